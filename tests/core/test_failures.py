import re
import signal

import pytest

from sweepcore.failures import Rule, classify, normalise

SGLANG_DDTREE_CRASH = """\
[2026-12-02 10:00:01 TP0] Decode batch. #running-req: 1, #token: 3120, token usage: 0.01, accept len: 1.00, gen throughput (token/s): 25.91
[2026-12-02 10:00:01 TP0] avg_accepted_drafts=0.00
[2026-12-02 10:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "/sgl-workspace/sglang/python/sglang/srt/speculative/ddtree_worker.py", line 311, in verify
    torch.cuda.synchronize()
RuntimeError: CUDA error: an illegal instruction was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.

[2026-12-02 10:00:02] Received sigquit from a child process. It usually means the child failed.
"""


def test_it_reads_a_cuda_illegal_instruction_from_an_sglang_traceback():
    failure = classify(SGLANG_DDTREE_CRASH, returncode=-9)
    assert failure.kind == "cuda_illegal_instruction"
    assert failure.cause.endswith("RuntimeError: CUDA error: an illegal instruction was encountered")
    assert failure.lines[-1] == "RuntimeError: CUDA error: an illegal instruction was encountered"
    assert failure.deterministic
    assert failure.signature == "RuntimeError: CUDA error: an illegal instruction was encountered"


@pytest.mark.parametrize(
    "line, kind",
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_illegal_memory_access"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 95.00 GiB", "cuda_oom"),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", "cuda_oom"),
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "cuda_oom"),
        ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.", "cuda_oom"),
        ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error", "nccl"),
        ("[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)", "nccl"),
        ("triton.compiler.errors.CompilationError: at 34:8:", "triton_compile"),
        ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 114688, Hardware limit: 101376.", "triton_compile"),
        ("[2026-12-02 10:00:00] Watchdog timeout (self.watchdog_timeout=300)", "watchdog_timeout"),
        ("launch_server.py: error: unrecognized arguments: --speculative-ddtree-budgt 15", "bad_flag"),
        ("OSError: /dev/shm/Qwen3.6-27B does not appear to have a file named config.json.", "model_missing"),
    ],
)
def test_it_knows_the_signatures_of_real_servers(line, kind):
    failure = classify(f"INFO starting\n{line}\n", returncode=1)
    assert failure.kind == kind
    assert failure.lines[-1] == line


def test_only_hardware_kernel_failures_are_deterministic():
    assert classify("RuntimeError: CUDA error: an illegal memory access was encountered").deterministic
    assert classify("triton.compiler.errors.CompilationError: x").deterministic
    assert not classify("torch.OutOfMemoryError: CUDA out of memory.").deterministic
    assert not classify("NCCL error in: x").deterministic


def test_sigkill_without_a_signature_is_killed():
    failure = classify("INFO: 127.0.0.1 - POST /v1/completions 200\n", returncode=-signal.SIGKILL)
    assert failure.kind == "killed"


def test_another_signal_is_named():
    failure = classify("", returncode=-signal.SIGSEGV)
    assert (failure.kind, failure.cause) == ("unknown", "died of SIGSEGV")


def test_a_plain_python_exception_names_its_last_line():
    log = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'rope_scaling'\n"
    failure = classify(log, returncode=1)
    assert failure.kind == "python_exception"
    assert failure.cause == "Python exception: KeyError: 'rope_scaling'"


def test_an_unexplained_exit_quotes_the_last_line():
    failure = classify("loading\nsomething odd happened\n\n", returncode=3)
    assert (failure.kind, failure.cause) == ("unknown", "exited with status 3; last log line: something odd happened")
    assert classify("", returncode=3).cause == "exited with status 3; the log is empty"


def test_engine_rules_come_first():
    rules = (Rule("ggml_assert", re.compile("GGML_ASSERT"), "llama.cpp assertion"),)
    failure = classify("ggml.c:123: GGML_ASSERT(n_tokens <= n_batch) failed\n", returncode=-6, extra_rules=rules)
    assert failure.kind == "ggml_assert"


def test_normalise_drops_timestamps_and_addresses():
    assert normalise("[2026-12-02 10:00:02 TP3] RuntimeError: bad pointer 0x7f00ab") == "RuntimeError: bad pointer 0x…"
    assert normalise("2026-12-02 10:00:02,123 ERROR NCCL error") == "NCCL error"
