# Stand-in (bench/peers.py, vLLM bench serve without the engine): the real vllm/lora/utils.py imports the LoRA layers (torch, the
# whole model executor). The benchmark only calls get_adapter_absolute_path for
# --lora-path style datasets; not used here.
def get_adapter_absolute_path(lora_path: str) -> str:
    raise NotImplementedError("vllm-peer stub: LoRA adapters are not supported")
