# Stand-in (bench/peers.py, vLLM bench serve without the engine): the real module imports torch, safetensors.torch and the
# transformers model registries (engine model-config handling). vllm.tokenizers
# imports three names from it; for a plain HF tokenizer they are not needed:
#  - get_config: the real one loads the HF model config so AutoTokenizer can reuse it;
#    vllm's get_tokenizer wraps the call in suppress(ValueError, OSError) and carries
#    on with config=None (AutoTokenizer then reads config.json itself).
#  - _maybe_register_hf_config: registers vLLM's custom config classes (none apply).
#  - get_sentence_transformer_tokenizer_config: only for Sentence-Transformer BERT
#    repos (do_lower_case); None means "not one", as the real one returns.
def get_config(*args, **kwargs):
    raise ValueError("vllm-peer stub: model config not loaded (no torch)")


def _maybe_register_hf_config(config) -> None:
    return None


def get_sentence_transformer_tokenizer_config(model, revision="main"):
    return None
