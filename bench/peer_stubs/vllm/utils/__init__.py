# Stand-in (bench/peers.py, vLLM bench serve without the engine): the real vllm/utils/__init__.py is 49 lines that `import torch`
# for two engine helpers (length_from_prompt_token_ids_or_embeds, is_moe_layer).
# Only random_uuid is kept verbatim; nothing in the benchmark client uses the rest.
import uuid

MASK_64_BITS = (1 << 64) - 1


def random_uuid() -> str:
    return f"{uuid.uuid4().int & MASK_64_BITS:016x}"  # 16 hex chars
