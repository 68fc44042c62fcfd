"""Engine adapters: one module per engine kind. Pure of Django: they take plain values
and talk HTTP with `requests`.

    adapter = get_adapter("sglang")
    argv = adapter.argv(template, method_args, LaunchValues(...))
"""

from sweepcore.engines.base import ArgvError, EngineAdapter, LaunchValues, ServerLimits
from sweepcore.engines.llamacpp import LlamaCppAdapter
from sweepcore.engines.sglang import SGLangAdapter
from sweepcore.engines.simulated import SimulatedAdapter
from sweepcore.engines.vllm import VLLMAdapter

ADAPTERS = {a.kind: a for a in (SGLangAdapter(), VLLMAdapter(), LlamaCppAdapter(), SimulatedAdapter())}


def get_adapter(kind):
    try:
        return ADAPTERS[kind]
    except KeyError:
        raise ValueError(f"no adapter for engine kind {kind!r}; known: {', '.join(sorted(ADAPTERS))}") from None


__all__ = ["ADAPTERS", "ArgvError", "EngineAdapter", "LaunchValues", "ServerLimits", "get_adapter"]
