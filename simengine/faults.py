"""Fault injection: the --fault flags, the profile crash rules, and the error texts they log."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Dict, List, Mapping, Optional

FAULT_KINDS = {
    "crash-on-start": None,
    "crash-after-requests": int,
    "crash-mid-stream": int,
    "hang-after-tokens": int,
    "oom-on-start": None,
    "slow-start": float,
}


@dataclasses.dataclass
class Faults:
    crash_on_start: bool = False
    oom_on_start: bool = False
    slow_start_s: Optional[float] = None
    crash_after_requests: Optional[int] = None
    crash_mid_stream_tokens: Optional[int] = None
    hang_after_tokens: Optional[int] = None
    # From the profile's crash rules
    die_on_first_verify: bool = False
    die_mid_stream_rule: Optional[Dict[str, Any]] = None
    rules_applied: List[str] = dataclasses.field(default_factory=list)


def parse_fault(spec: str):
    """argparse type for --fault: 'KIND' or 'KIND:VALUE'."""
    kind, _, value = spec.partition(":")
    if kind not in FAULT_KINDS:
        raise argparse.ArgumentTypeError(
            f"invalid fault {spec!r}; choose from: crash-on-start, crash-after-requests:N, "
            "crash-mid-stream:TOKENS, hang-after-tokens:N, oom-on-start, slow-start:SECONDS"
        )
    conv = FAULT_KINDS[kind]
    if conv is None:
        if value:
            raise argparse.ArgumentTypeError(f"fault {kind!r} takes no value")
        return kind, None
    if not value:
        raise argparse.ArgumentTypeError(f"fault {kind!r} needs a value: {kind}:VALUE")
    try:
        v = conv(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value for fault {kind!r}: {value!r}")
    if v < 0:
        raise argparse.ArgumentTypeError(f"fault {kind!r} needs a non-negative value")
    return kind, v


def build_faults(fault_specs, profile: Mapping[str, Any], args_dict: Mapping[str, Any]) -> Faults:
    f = Faults()
    for kind, value in fault_specs or []:
        if kind == "crash-on-start":
            f.crash_on_start = True
        elif kind == "oom-on-start":
            f.oom_on_start = True
        elif kind == "slow-start":
            f.slow_start_s = float(value)
        elif kind == "crash-after-requests":
            f.crash_after_requests = int(value)
        elif kind == "crash-mid-stream":
            f.crash_mid_stream_tokens = int(value)
        elif kind == "hang-after-tokens":
            f.hang_after_tokens = int(value)
    for rule in profile.get("crash_rules", []) or []:
        match = rule.get("match", {})
        if all(_norm(args_dict.get(k)) == _norm(v) for k, v in match.items()):
            action = rule.get("action")
            if action == "die-on-first-verify":
                f.die_on_first_verify = True
            elif action == "die-mid-stream":
                f.die_mid_stream_rule = dict(rule)
            f.rules_applied.append(rule.get("name", action))
    return f


def _norm(v):
    if isinstance(v, str):
        return v.upper()
    return v


# --------------------------------------------------------------------------- error texts

_SRT = "/sgl-workspace/sglang/python/sglang/srt"
_TORCH = "/usr/local/lib/python3.12/dist-packages/torch"

CUDA_ERROR_TAIL = (
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)

SIGQUIT_MSG = "Received sigquit from a child process. It usually means the child failed."


def illegal_instruction_traceback(method: str = "DDTREE") -> str:
    worker = {"DDTREE": "ddtree_worker.py", "DFLASH": "dflash_worker.py"}.get(method, "eagle_worker.py")
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SRT}/managers/scheduler.py", line 2967, in run_scheduler_process\n'
        "    scheduler.event_loop_overlap()\n"
        f'  File "{_TORCH}/utils/_contextlib.py", line 120, in decorate_context\n'
        "    return func(*args, **kwargs)\n"
        "           ^^^^^^^^^^^^^^^^^^^^^\n"
        f'  File "{_SRT}/managers/scheduler.py", line 1032, in event_loop_overlap\n'
        "    batch_result = self.run_batch(batch)\n"
        "                   ^^^^^^^^^^^^^^^^^^^^^\n"
        f'  File "{_SRT}/managers/scheduler.py", line 2011, in run_batch\n'
        "    batch_result = self.model_worker.forward_batch_generation(batch)\n"
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f'  File "{_SRT}/speculative/{worker}", line 412, in forward_batch_generation\n'
        "    verify_output = self.verify(batch, spec_info)\n"
        "                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        f'  File "{_SRT}/speculative/{worker}", line 538, in verify\n'
        "    accept_index_cpu = accept_index.tolist()\n"
        "                       ^^^^^^^^^^^^^^^^^^^^^\n"
        "RuntimeError: CUDA error: an illegal instruction was encountered\n" + CUDA_ERROR_TAIL
    )


def crash_on_start_traceback() -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SRT}/managers/scheduler.py", line 2953, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        "                ^^^^^^^^^^\n"
        f'  File "{_SRT}/managers/scheduler.py", line 312, in __init__\n'
        "    self.tp_worker = TpModelWorker(\n"
        "                     ^^^^^^^^^^^^^^\n"
        f'  File "{_SRT}/managers/tp_worker.py", line 94, in __init__\n'
        "    self.model_runner = ModelRunner(\n"
        "                        ^^^^^^^^^^^^\n"
        f'  File "{_SRT}/model_executor/model_runner.py", line 317, in __init__\n'
        "    self.initialize(min_per_gpu_memory)\n"
        f'  File "{_SRT}/model_executor/model_runner.py", line 402, in initialize\n'
        "    self.load_model()\n"
        f'  File "{_SRT}/model_executor/model_runner.py", line 871, in load_model\n'
        "    self.model = get_model(\n"
        "                 ^^^^^^^^^^\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n" + CUDA_ERROR_TAIL
    )


def oom_traceback(tried_gib: float, total_gib: float, free_mib: float, in_use_gib: float) -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SRT}/managers/scheduler.py", line 2953, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        "                ^^^^^^^^^^\n"
        f'  File "{_SRT}/model_executor/model_runner.py", line 414, in initialize\n'
        "    self.init_memory_pool(\n"
        f'  File "{_SRT}/model_executor/model_runner.py", line 1902, in init_memory_pool\n'
        "    self.token_to_kv_pool = MHATokenToKVPool(\n"
        "                            ^^^^^^^^^^^^^^^^^\n"
        f'  File "{_SRT}/mem_cache/memory_pool.py", line 528, in _create_buffers\n'
        "    torch.zeros(\n"
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. "
        f"GPU 0 has a total capacity of {total_gib:.2f} GiB of which {free_mib:.2f} MiB is free. "
        f"Including non-PyTorch memory, this process has {in_use_gib:.2f} GiB memory in use. "
        f"Of the allocated memory {in_use_gib - 0.62:.2f} GiB is allocated by PyTorch, and 412.33 MiB is reserved "
        "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
        "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n"
    )


def not_enough_memory_traceback() -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SRT}/managers/scheduler.py", line 2953, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        "                ^^^^^^^^^^\n"
        f'  File "{_SRT}/model_executor/model_runner.py", line 1790, in init_memory_pool\n'
        "    raise RuntimeError(\n"
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
    )


def invalid_device_traceback(rank: int) -> str:
    return (
        "Traceback (most recent call last):\n"
        f'  File "{_SRT}/managers/scheduler.py", line 2953, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        "                ^^^^^^^^^^\n"
        f'  File "{_SRT}/model_executor/model_runner.py", line 562, in init_torch_distributed\n'
        "    torch.get_device_module(self.device).set_device(self.gpu_id)\n"
        f'  File "{_TORCH}/cuda/__init__.py", line 567, in set_device\n'
        "    torch._C._cuda_setDevice(device)\n"
        "torch.AcceleratorError: CUDA error: invalid device ordinal\n"
        "GPU device may be out of range, do you have enough GPUs?\n" + CUDA_ERROR_TAIL
    )
