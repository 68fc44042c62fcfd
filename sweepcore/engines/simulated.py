"""simengine (`python -m simengine`): SGLang's API and behaviour, simulated."""

from sweepcore.engines.sglang import SGLangAdapter


class SimulatedAdapter(SGLangAdapter):
    kind = "simulated"
