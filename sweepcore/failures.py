"""Crash classifier: a server's log tail (and how its process ended) -> failure kind,
a one-line cause, and the log lines it was read from. Pure.

Rules are tried most specific first: a Python traceback that ends in a CUDA error is a
CUDA error, not a "python_exception". Engine adapters add their own signatures (e.g.
llama.cpp's GGML_ASSERT) through ``extra_rules``.

Texts matched are the ones real servers print (torch, NCCL, Triton, SGLang, vLLM):
- torch: ``RuntimeError: CUDA error: an illegal instruction was encountered``,
  ``... an illegal memory access was encountered``, ``torch.OutOfMemoryError: CUDA out
  of memory. Tried to allocate …`` (``torch.cuda.OutOfMemoryError`` before torch 2.5);
- SGLang: ``Not enough memory. Please try to increase --mem-fraction-static.``,
  ``Watchdog timeout (self.watchdog_timeout=…)``, ``Scheduler hit an exception``;
- vLLM: ``No available memory for the cache blocks``, ``… larger than the available KV
  cache memory``;
- NCCL: ``NCCL error``, ``ncclUnhandledCudaError``/``ncclSystemError``…, torch's
  ``Watchdog caught collective operation timeout``;
- Triton: ``triton.compiler.errors.CompilationError``, ``OutOfResources: out of
  resource: shared memory`` (common on consumer/workstation Blackwell, SM120).
"""

import re
import signal
from dataclasses import dataclass

from sweepcore.kinds import FailureKind

# The same configuration on the same kind of GPU fails the same way every time: these
# are quarantined (a llama.cpp assertion checks shapes and parameters, which do not change
# from one launch to the next). An OOM or an NCCL hiccup depends on the moment and is not.
DETERMINISTIC = frozenset({
    FailureKind.CUDA_ILLEGAL_INSTRUCTION, FailureKind.CUDA_ILLEGAL_MEMORY_ACCESS, FailureKind.TRITON_COMPILE,
    FailureKind.GGML_ASSERT,
})


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern
    cause: str  # what it means, in words; the matched line follows it


def rule(kind, pattern, cause):
    return Rule(kind, re.compile(pattern, re.IGNORECASE), cause)


RULES = (
    rule(FailureKind.CUDA_ILLEGAL_INSTRUCTION, r"CUDA error: an illegal instruction was encountered",
         "CUDA illegal instruction"),
    rule(FailureKind.CUDA_ILLEGAL_MEMORY_ACCESS, r"CUDA error: an illegal memory access was encountered",
         "CUDA illegal memory access"),
    rule(FailureKind.TRITON_COMPILE, r"triton\.compiler\.errors\.\w+|CompilationError|OutOfResources: out of resource",
         "Triton kernel compile error"),
    rule(FailureKind.CUDA_OOM, r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory"
         r"|Not enough memory\. Please try to increase --mem-fraction-static"
         r"|No available memory for the cache blocks|larger than the available KV cache memory",
         "out of GPU memory"),
    rule(FailureKind.NCCL, r"\bNCCL error\b|\bnccl\w*Error\b|collective operation timeout|ProcessGroupNCCL.*(?:error|timeout)",
         "NCCL (multi-GPU communication) error"),
    rule(FailureKind.WATCHDOG_TIMEOUT, r"Watchdog timeout", "the server's watchdog killed a stuck forward pass"),
    rule(FailureKind.BAD_FLAG, r"error: unrecognized arguments?:|error: argument -|error: the following arguments are required",
         "the server rejected its command line"),
    rule(FailureKind.MODEL_MISSING, r"does not appear to have a file named|Repository Not Found|is not a local folder and is not a valid model identifier"
         r"|No such file or directory.*(?:model|\.gguf|\.safetensors|config\.json)",
         "the model could not be found"),
)

# Last line of a Python traceback: "SomeError: message" (possibly dotted).
EXCEPTION_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b.*")
TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True)
class Failure:
    kind: str
    cause: str
    lines: tuple = ()

    @property
    def deterministic(self):
        return self.kind in DETERMINISTIC

    @property
    def signature(self):
        """What identifies this failure across runs: the matched log line, minus noise."""
        line = self.lines[-1] if self.lines else self.cause
        return normalise(line)


def normalise(line):
    """Drop what differs between two occurrences of the same failure: timestamps, log
    prefixes, addresses, pids, file positions."""
    line = re.sub(r"^\[[^\]]*\]\s*", "", line.strip())  # "[2026-12-02 10:00:00 TP0] "
    line = re.sub(r"^\d{4}-\d\d-\d\d[ T][\d:.,]+\s*(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+)?", "", line)
    line = re.sub(r"0x[0-9a-fA-F]+", "0x…", line)
    line = re.sub(r"\bpid[=: ]\d+", "pid …", line)
    return line.strip()


def _signal_name(returncode):
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def classify(log_text, returncode=None, extra_rules=()):
    """The failure a log tail shows. ``returncode``: the server process's exit status
    (negative: killed by that signal), None while it is still alive."""
    lines = log_text.splitlines()
    for r in (*extra_rules, *RULES):
        hits = [i for i, line in enumerate(lines) if r.pattern.search(line)]
        if hits:
            last = hits[-1]
            matched = lines[last].strip()
            context = tuple(line for line in lines[max(0, last - 2) : last + 1] if line.strip())
            return Failure(r.kind, f"{r.cause}: {normalise(matched)}", context)

    if returncode is not None and returncode < 0:
        name = _signal_name(returncode)
        if -returncode == signal.SIGKILL:
            return Failure(FailureKind.KILLED, "killed by SIGKILL (out of host memory, or stopped by hand)", ())
        return Failure(FailureKind.UNKNOWN, f"died of {name}", tuple(lines[-3:]))

    if TRACEBACK in log_text:
        start = log_text.rfind(TRACEBACK)
        tail = log_text[start:].splitlines()
        exceptions = [line for line in tail if EXCEPTION_LINE.match(line)]
        if exceptions:
            return Failure(FailureKind.PYTHON_EXCEPTION, f"Python exception: {normalise(exceptions[-1])}", (exceptions[-1].strip(),))

    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    if returncode is not None:
        detail = f"; last log line: {normalise(last)}" if last else "; the log is empty"
        return Failure(FailureKind.UNKNOWN, f"exited with status {returncode}{detail}", (last,) if last else ())
    return Failure(FailureKind.UNKNOWN, f"no known signature in the log{'; last line: ' + normalise(last) if last else ''}", (last,) if last else ())
