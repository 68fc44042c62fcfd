# Stand-in (bench/peers.py, vLLM bench serve without the engine): real module pulls the multimodal media stack (torch). Only
# used by multimodal (image URL) datasets, not by the random/text datasets.
def encode_image_url(*args, **kwargs):
    raise NotImplementedError("vllm-peer stub: multimodal datasets are not supported")


def fetch_image(*args, **kwargs):
    raise NotImplementedError("vllm-peer stub: multimodal datasets are not supported")
