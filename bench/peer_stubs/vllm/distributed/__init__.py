# Stand-in (bench/peers.py, vLLM bench serve without the engine): the real package is the engine's torch.distributed layer.
