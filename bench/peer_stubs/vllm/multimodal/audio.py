# Stand-in (bench/peers.py, vLLM bench serve without the engine): real module needs torch/torchaudio. Only used by the audio
# (ASR) datasets in vllm.benchmarks.datasets, not by the random/text datasets.
def get_audio_duration(*args, **kwargs):
    raise NotImplementedError("vllm-peer stub: audio datasets are not supported")
