"""Command line: the subset of ``python -m sglang.launch_server`` flags Sweeplab uses, plus
simulator-only flags.  Flag names, dests and defaults follow SGLang's server_args.py."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import List, Optional

from simengine.faults import parse_fault


@dataclasses.dataclass
class ServerArgs:
    # Model and tokenizer
    model_path: str
    tokenizer_path: Optional[str] = None
    tokenizer_mode: str = "auto"
    skip_tokenizer_init: bool = False
    load_format: str = "auto"
    trust_remote_code: bool = False
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: Optional[str] = None
    context_length: Optional[int] = None
    device: str = "cuda"
    served_model_name: Optional[str] = None
    chat_template: Optional[str] = None
    is_embedding: bool = False
    revision: Optional[str] = None
    # HTTP server
    host: str = "127.0.0.1"
    port: int = 30000
    skip_server_warmup: bool = False
    warmups: Optional[str] = None
    api_key: Optional[str] = None
    # Memory and scheduling
    mem_fraction_static: Optional[float] = None
    max_running_requests: Optional[int] = None
    max_total_tokens: Optional[int] = None
    chunked_prefill_size: Optional[int] = None
    max_prefill_tokens: int = 16384
    schedule_policy: str = "fcfs"
    schedule_conservativeness: float = 1.0
    page_size: int = 1
    # Runtime
    tp_size: int = 1
    pp_size: int = 1
    dp_size: int = 1
    ep_size: int = 1
    stream_interval: int = 1
    random_seed: Optional[int] = None
    watchdog_timeout: float = 300
    base_gpu_id: int = 0
    gpu_id_step: int = 1
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: Optional[str] = None
    # Logging
    log_level: str = "info"
    log_level_http: Optional[str] = None
    log_requests: bool = False
    log_requests_level: int = 2
    show_time_cost: bool = False
    enable_metrics: bool = False
    decode_log_interval: int = 40
    enable_cache_report: bool = False
    # API related
    allow_auto_truncate: bool = False
    stream_response_default_include_usage: bool = False
    weight_version: str = "default"
    preferred_sampling_params: Optional[str] = None
    reasoning_parser: Optional[str] = None
    tool_call_parser: Optional[str] = None
    # Speculative decoding
    speculative_algorithm: Optional[str] = None
    speculative_draft_model_path: Optional[str] = None
    speculative_num_steps: Optional[int] = None
    speculative_eagle_topk: Optional[int] = None
    speculative_num_draft_tokens: Optional[int] = None
    speculative_dflash_block_size: Optional[int] = None
    speculative_ddtree_budget: Optional[int] = None
    speculative_ddtree_topk_cap: Optional[int] = None
    # Kernels / graphs
    attention_backend: Optional[str] = None
    sampling_backend: Optional[str] = None
    disable_cuda_graph: bool = False
    cuda_graph_max_bs: Optional[int] = None
    disable_radix_cache: bool = False
    enable_mixed_chunk: bool = False
    enable_torch_compile: bool = False
    disaggregation_mode: str = "null"
    tokenizer_worker_num: int = 1


@dataclasses.dataclass
class SimArgs:
    profile: str = "rtxpro6000-sm120"
    time_scale: float = 1.0
    startup_time_scale: Optional[float] = None
    seed: int = 0
    gpus: Optional[int] = None
    fault: List = dataclasses.field(default_factory=list)


SIM_DESTS = {f.name for f in dataclasses.fields(SimArgs)}


def _positive_float(s: str) -> float:
    v = float(s)
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m simengine",
        description="Simulated SGLang server (accepts sglang.launch_server flags).",
    )
    a = parser.add_argument
    a("--model-path", "--model", dest="model_path", type=str, required=True)
    a("--tokenizer-path", type=str, default=None)
    a("--tokenizer-mode", type=str, default="auto", choices=["auto", "slow"])
    a("--skip-tokenizer-init", action="store_true")
    a("--load-format", type=str, default="auto")
    a("--trust-remote-code", action="store_true")
    a("--dtype", type=str, default="auto", choices=["auto", "half", "float16", "bfloat16", "float", "float32"])
    a("--kv-cache-dtype", type=str, default="auto", choices=["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16"])
    a("--quantization", type=str, default=None)
    a("--context-length", type=int, default=None)
    a("--device", type=str, default="cuda")
    a("--served-model-name", type=str, default=None)
    a("--chat-template", type=str, default=None)
    a("--is-embedding", action="store_true")
    a("--revision", type=str, default=None)
    a("--host", type=str, default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--skip-server-warmup", action="store_true")
    a("--warmups", type=str, default=None)
    a("--api-key", type=str, default=None)
    a("--mem-fraction-static", type=float, default=None)
    a("--max-running-requests", type=int, default=None)
    a("--max-total-tokens", type=int, default=None)
    a("--chunked-prefill-size", type=int, default=None)
    a("--max-prefill-tokens", type=int, default=16384)
    a("--schedule-policy", type=str, default="fcfs", choices=["lpm", "random", "fcfs", "dfs-weight", "lof", "priority"])
    a("--schedule-conservativeness", type=float, default=1.0)
    a("--page-size", type=int, default=1)
    a("--tensor-parallel-size", "--tp-size", "--tp", dest="tp_size", type=int, default=1)
    a("--pipeline-parallel-size", "--pp-size", dest="pp_size", type=int, default=1)
    a("--data-parallel-size", "--dp-size", dest="dp_size", type=int, default=1)
    a("--expert-parallel-size", "--ep-size", dest="ep_size", type=int, default=1)
    a("--stream-interval", type=int, default=1)
    a("--random-seed", type=int, default=None)
    a("--watchdog-timeout", type=float, default=300)
    a("--base-gpu-id", type=int, default=0)
    a("--gpu-id-step", type=int, default=1)
    a("--nnodes", type=int, default=1)
    a("--node-rank", type=int, default=0)
    a("--dist-init-addr", type=str, default=None)
    a("--log-level", type=str, default="info")
    a("--log-level-http", type=str, default=None)
    a("--log-requests", action="store_true")
    a("--log-requests-level", type=int, default=2)
    a("--show-time-cost", action="store_true")
    a("--enable-metrics", action="store_true")
    a("--decode-log-interval", type=int, default=40)
    a("--enable-cache-report", action="store_true")
    a("--allow-auto-truncate", action="store_true")
    a("--stream-response-default-include-usage", action="store_true")
    a("--weight-version", type=str, default="default")
    a("--preferred-sampling-params", type=str, default=None)
    a("--reasoning-parser", type=str, default=None)
    a("--tool-call-parser", type=str, default=None)
    a("--speculative-algorithm", type=str, default=None,
      choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DDTREE"])
    a("--speculative-draft-model-path", "--speculative-draft-model", dest="speculative_draft_model_path",
      type=str, default=None)
    a("--speculative-num-steps", type=int, default=None)
    a("--speculative-eagle-topk", type=int, default=None)
    a("--speculative-num-draft-tokens", type=int, default=None)
    a("--speculative-dflash-block-size", type=int, default=None)
    a("--speculative-ddtree-budget", type=int, default=None)
    a("--speculative-ddtree-topk-cap", type=int, default=None)
    a("--attention-backend", type=str, default=None)
    a("--sampling-backend", type=str, default=None)
    a("--disable-cuda-graph", action="store_true")
    a("--cuda-graph-max-bs", type=int, default=None)
    a("--disable-radix-cache", action="store_true")
    a("--enable-mixed-chunk", action="store_true")
    a("--enable-torch-compile", action="store_true")
    # Simulator-only flags
    sim = parser.add_argument_group("simulator")
    sim.add_argument("--profile", type=str, default="rtxpro6000-sm120",
                     help="hardware/model profile: a name in simengine/profiles or a JSON path")
    sim.add_argument("--time-scale", type=_positive_float, default=1.0,
                     help="multiplies every delay: 1.0 real time, 0.01 a hundred times faster, 0 no delays")
    sim.add_argument("--startup-time-scale", type=_positive_float, default=None,
                     help="multiplies the start-up's delays instead (default: --time-scale)")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--gpus", type=int, default=None, help="GPUs the simulated host has (default: profile)")
    sim.add_argument("--fault", type=parse_fault, action="append", default=[],
                     help="crash-on-start | crash-after-requests:N | crash-mid-stream:TOKENS | "
                          "hang-after-tokens:N | oom-on-start | slow-start:SECONDS (repeatable)")
    return parser


def parse_args(argv: Optional[List[str]] = None):
    parser = build_parser()
    ns = parser.parse_args(argv)
    d = vars(ns)
    sim = SimArgs(**{k: d.pop(k) for k in list(d) if k in SIM_DESTS})
    args = ServerArgs(**d)
    if args.tokenizer_path is None:
        args.tokenizer_path = args.model_path
    if args.served_model_name is None:
        args.served_model_name = args.model_path
    if args.random_seed is None:
        args.random_seed = sim.seed
    if args.mem_fraction_static is None:
        args.mem_fraction_static = 0.85
    if args.speculative_algorithm in ("DFLASH", "DDTREE"):
        if args.speculative_dflash_block_size is None:
            args.speculative_dflash_block_size = args.speculative_num_draft_tokens or 16
        if args.speculative_num_draft_tokens is None:
            args.speculative_num_draft_tokens = args.speculative_dflash_block_size
        args.speculative_num_steps = 1
        args.speculative_eagle_topk = 1
        if args.speculative_algorithm == "DDTREE":
            if args.speculative_ddtree_budget is None:
                args.speculative_ddtree_budget = 15
            if args.speculative_ddtree_topk_cap is None:
                args.speculative_ddtree_topk_cap = 8
    return args, sim


def main(argv: Optional[List[str]] = None) -> int:
    args, sim = parse_args(argv)
    from simengine.server import run_server

    return run_server(args, sim)


if __name__ == "__main__":
    sys.exit(main())
