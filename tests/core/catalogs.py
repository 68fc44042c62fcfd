"""The demo catalog as the pure types specs and plans are checked against (no DB)."""

from sweepcore.spec import Catalog, EngineInfo, HostInfo, ModelInfo, WorkloadInfo


def demo_catalog():
    return Catalog(
        hosts={
            "local-cpu": HostInfo("local-cpu", 0),
            "sim-8x-rtxpro6000": HostInfo("sim-8x-rtxpro6000", 8, "12.0", "NVIDIA RTX PRO 6000 Blackwell"),
            "sim-8x-rtxpro6000-b": HostInfo("sim-8x-rtxpro6000-b", 8, "12.0", "NVIDIA RTX PRO 6000 Blackwell"),
            "sim-4x-h200": HostInfo("sim-4x-h200", 4, "9.0", "NVIDIA H200"),
        },
        engines={
            "llamacpp-cpu": EngineInfo("llamacpp-cpu", "llamacpp", ("autoregressive", "prompt-lookup")),
            "sglang-sim": EngineInfo("sglang-sim", "simulated", ("autoregressive", "dflash", "ddtree")),
        },
        models={
            "Qwen/Qwen3.6-27B": ModelInfo("Qwen/Qwen3.6-27B", 32768),
            "SmolLM2-135M-Instruct": ModelInfo("SmolLM2-135M-Instruct", 2048),
        },
        workloads={
            "fibonacci": WorkloadInfo("fibonacci", "fixed"),
            "long-context": WorkloadInfo("long-context", "synthetic"),
            "sharegpt": WorkloadInfo("sharegpt", "dataset"),
        },
    )
