"""Command lines that send a measured point's load again: ``manage.py loadtest`` (this
project's own client, runs/management/commands/loadtest.py) and the equivalent
``vllm bench serve``, shown with every point of the sweep page's Pareto view.

Both send the same load to the same server: the same API, prompt length, output length
(forced with ``--ignore-eos`` where the sweep forced it), number of requests, and the same
arrival process: a closed loop of ``concurrency`` requests in flight, or an open loop of
``request_rate`` requests per second (gamma arrivals of shape ``burstiness``, 1 = Poisson)
capped at ``concurrency`` in flight. They do not send the same bytes: the sweep built one
long-context prompt per request (seeded by the request's index), loadtest builds one and
vLLM draws random tokens of the same length; the server must be running with the run's
own argv (the run drawer shows it). A point that left its ramp out (the sweep's
``steady_state``) gets loadtest's ``--skip-first``/``--skip-last``; vLLM has no such option.

vLLM's flags (vllm/benchmarks/serve.py): ``--backend openai`` or ``openai-chat`` (the
OpenAI completions and chat request functions), ``--base-url``, ``--endpoint``,
``--model`` (the served name, also its tokenizer unless ``--tokenizer`` is given),
``--dataset-name random --random-input-len N --random-output-len M --random-range-ratio 0``
(exactly N and M tokens) or ``--dataset-name sharegpt --dataset-path F
--sharegpt-output-len M``, ``--num-prompts``, ``--request-rate`` (``inf``: everything at
once, so a closed loop is ``inf`` capped by ``--max-concurrency``), ``--burstiness``,
``--max-concurrency``, ``--ignore-eos``. vLLM has no fixed-prompt dataset: a fixed prompt
becomes random tokens of its measured length. SGLang's native ``/generate`` is not one of
vLLM's APIs: its line uses the OpenAI completions endpoint SGLang serves beside it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from sweepcore.loadgen.apis import API_PATHS
from sweepcore.prompts import FIBONACCI_PROMPT
from sweepcore.spec import WORKLOAD_DATASET, WORKLOAD_FIXED, WORKLOAD_SYNTHETIC

# vLLM's request function for each of our APIs, and the path it posts to.
VLLM_BACKENDS = {
    "openai-completions": ("openai", API_PATHS["openai-completions"]),
    "openai-chat": ("openai-chat", API_PATHS["openai-chat"]),
    "sglang-generate": ("openai", API_PATHS["openai-completions"]),
}


@dataclass(frozen=True)
class PointLoad:
    """What both commands need to know of a point and its server."""

    base_url: str
    api: str  # sweepcore.loadgen.APIS
    model: str  # the name the server serves
    workload_kind: str  # sweepcore.spec.WORKLOAD_FIXED / _SYNTHETIC / _DATASET
    max_tokens: int
    num_requests: int  # what the point sent: completed and failed requests
    concurrency: int  # closed loop: requests in flight; open loop: the cap
    request_rate: float | None = None  # None: closed loop
    burstiness: float = 1.0
    ignore_eos: bool = False
    prompt_tokens: int | None = None  # synthetic: the exact length; fixed: its measured length
    prompt: str = ""  # the fixed workload's prompt
    dataset_path: str = ""
    tokenizer: str = ""  # the model's path or hub id, where vLLM cannot load it by the served name
    skip_first: float = 0.0  # the steady_state shares left out of the statistics (loadtest only)
    skip_last: float = 0.0


def _number(value: float) -> str:
    """A rate as a person writes it: 2 rather than 2.0."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def loadtest_argv(load: PointLoad) -> list[str]:
    """``python manage.py loadtest …`` for this load."""
    argv = ["python", "manage.py", "loadtest", "--base-url", load.base_url, "--api", load.api]
    if load.api != "sglang-generate":
        argv += ["--model", load.model]
    if load.workload_kind == WORKLOAD_SYNTHETIC:
        argv += ["--prompt-tokens", str(load.prompt_tokens)]
    elif load.workload_kind == WORKLOAD_FIXED:
        argv += ["--workload", "fibonacci"] if load.prompt == FIBONACCI_PROMPT else ["--prompt", load.prompt]
    elif load.workload_kind == WORKLOAD_DATASET:
        argv += ["--workload", "dataset", "--dataset", load.dataset_path]
    else:
        raise ValueError(f"unknown workload kind {load.workload_kind!r}")
    argv += ["--max-tokens", str(load.max_tokens), "--concurrency", str(load.concurrency),
             "--num-requests", str(load.num_requests)]
    if load.request_rate is not None:
        argv += ["--request-rate", _number(load.request_rate), "--burstiness", _number(load.burstiness)]
    if load.ignore_eos:
        argv.append("--ignore-eos")
    if load.skip_first or load.skip_last:
        argv += ["--skip-first", _number(load.skip_first), "--skip-last", _number(load.skip_last)]
    return argv


def vllm_bench_argv(load: PointLoad) -> list[str]:
    """``vllm bench serve …`` for the same load."""
    try:
        backend, endpoint = VLLM_BACKENDS[load.api]
    except KeyError:
        raise ValueError(f"unknown api {load.api!r}") from None
    argv = ["vllm", "bench", "serve", "--backend", backend, "--base-url", load.base_url, "--endpoint", endpoint,
            "--model", load.model]
    if load.tokenizer and load.tokenizer != load.model:
        argv += ["--tokenizer", load.tokenizer]
    if load.workload_kind == WORKLOAD_DATASET:
        argv += ["--dataset-name", "sharegpt", "--dataset-path", load.dataset_path,
                 "--sharegpt-output-len", str(load.max_tokens)]
    elif load.workload_kind in (WORKLOAD_SYNTHETIC, WORKLOAD_FIXED):
        if load.prompt_tokens is None:
            raise ValueError("a random dataset needs the prompt length (prompt_tokens)")
        argv += ["--dataset-name", "random", "--random-input-len", str(load.prompt_tokens),
                 "--random-output-len", str(load.max_tokens), "--random-range-ratio", "0"]
    else:
        raise ValueError(f"unknown workload kind {load.workload_kind!r}")
    rate = "inf" if load.request_rate is None else _number(load.request_rate)
    argv += ["--num-prompts", str(load.num_requests), "--request-rate", rate]
    if load.request_rate is not None:
        argv += ["--burstiness", _number(load.burstiness)]
    argv += ["--max-concurrency", str(load.concurrency)]
    if load.ignore_eos:
        argv.append("--ignore-eos")
    return argv


def command_line(argv: list[str]) -> str:
    """One shell line, each argument quoted where the shell needs it."""
    return shlex.join(argv)
