# Stand-in (bench/peers.py, vLLM bench serve without the engine): the real package __init__ pulls the multimodal engine registry
# (torch). Empty here so the real vllm/multimodal/image.py can be imported.
