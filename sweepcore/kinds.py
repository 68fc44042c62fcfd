"""The kinds and statuses Sweeplab records, as StrEnums: one definition each. The Django
models build their TextChoices from these (benchmarks.models, runs.models): same values,
labels and order.
"""

from enum import StrEnum


class LabelledStrEnum(StrEnum):
    """A StrEnum whose members carry a label in words: ``NAME = "value", "Label"``."""

    def __new__(cls, value, label):
        member = str.__new__(cls, value)
        member._value_ = value
        member.label = label
        return member


class RequestErrorKind(StrEnum):
    """Why one request of a point failed (RequestRecord.error_kind; sweepcore.loadgen sets it)."""

    HTTP_ERROR = "http_error"
    ERROR_IN_STREAM = "error_in_stream"  # an error inside an HTTP 200 stream
    CONTEXT_OVERFLOW = "context_overflow"
    CONNECTION_REFUSED = "connection_refused"
    CONNECTION_LOST_MID_STREAM = "connection_lost_mid_stream"
    TIMEOUT_FIRST_TOKEN = "timeout_first_token"
    TIMEOUT_STALL = "timeout_stall"
    TIMEOUT_TOTAL = "timeout_total"
    EMPTY_RESPONSE = "empty_response"
    CLIENT_ERROR = "client_error"
    # Still unanswered when another request of its load met a silence limit (timeout_stall,
    # timeout_first_token): the load stopped and ended it rather than wait on a server
    # that may be hung (sweepcore.loadgen.runner).
    STOPPED_AFTER_STALL = "stopped_after_stall"


class FailureKind(LabelledStrEnum):
    """Why a run did not finish. The first group comes from a server's log tail
    (sweepcore.failures); the second from Sweeplab's own checks before and around the server."""

    CUDA_ILLEGAL_INSTRUCTION = "cuda_illegal_instruction", "CUDA illegal instruction"
    CUDA_ILLEGAL_MEMORY_ACCESS = "cuda_illegal_memory_access", "CUDA illegal memory access"
    CUDA_OOM = "cuda_oom", "CUDA out of memory"
    NCCL = "nccl", "NCCL error"
    TRITON_COMPILE = "triton_compile", "Triton compile error"
    WATCHDOG_TIMEOUT = "watchdog_timeout", "Watchdog timeout"
    PYTHON_EXCEPTION = "python_exception", "Python exception"
    GGML_ASSERT = "ggml_assert", "GGML assertion (llama.cpp)"
    KILLED = "killed", "Killed"
    UNKNOWN = "unknown", "Unknown"
    MODEL_MISSING = "model_missing", "Model path missing"
    MODEL_LOAD = "model_load", "Model failed to load"
    BAD_FLAG = "bad_flag", "Rejected command-line flag"
    PREFLIGHT = "preflight", "Preflight check failed"
    STARTUP_TIMEOUT = "startup_timeout", "Not ready in time"
    HUNG = "hung", "Server stopped responding"
    DISK_FULL = "disk_full", "No space left on disk"
    LOG_UNWRITABLE = "log_unwritable", "Server log not writable"
    INTERNAL = "internal", "Sweeplab internal error"


#: The failure kinds whose cause lies outside the run's configuration (method, parameters,
#: TP): the machine or Sweeplab itself, not what was measured. A run that ended ``failed``
#: or ``crashed`` with one of these is worth measuring again as it is, so resume queues it
#: again (runs.lifecycle.resume_sweep) and it goes on with the points it has not stored:
#: a fault of Sweeplab or of what it stands on (``internal``: an exception of its own,
#: a database or broker it could not reach), a full disk, a server that stopped answering
#: (``hung``: stopped, swapped out, its host overloaded), a model path gone (a reboot
#: empties ``/dev/shm``), a log folder that cannot be written. Every other kind says something about the configuration on
#: that engine and GPU (a crash signature, a flag refused, a start-up too slow, a kill),
#: and stays as it ended: a curator re-runs it (a new attempt) where that is wanted.
INFRASTRUCTURE_FAILURES = frozenset({
    FailureKind.INTERNAL, FailureKind.DISK_FULL, FailureKind.LOG_UNWRITABLE, FailureKind.HUNG,
    FailureKind.MODEL_MISSING,
})


class SweepStatus(LabelledStrEnum):
    DRAFT = "draft", "Draft"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    CANCELLED = "cancelled", "Cancelled"


class RunStatus(LabelledStrEnum):
    """Where one server configuration of a sweep is."""

    PLANNED = "planned", "Planned"
    QUEUED = "queued", "Queued"
    STARTING = "starting", "Starting"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    CRASHED = "crashed", "Crashed"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"
    CANCELLED = "cancelled", "Cancelled"


class PointStatus(LabelledStrEnum):
    """What came of one measurement. A point with zero output tokens is never ``ok``."""

    PLANNED = "planned", "Planned"
    OK = "ok", "OK"
    FAILED = "failed", "Failed (requests errored)"
    CRASHED = "crashed", "Crashed (server died during it)"
    TIMEOUT = "timeout", "Timed out"
    CONTEXT_OVERFLOW = "context_overflow", "Context overflow (server refused the length)"
    SKIPPED = "skipped", "Skipped"
    NOT_RUN = "not_run", "Not run"


#: The point statuses that are the outcome of a measurement: requests were sent and what came
#: back is recorded (even a crash or the server refusing the length). ``planned`` is still
#: to measure; ``skipped`` (the plan or the cap) and ``not_run`` (its server died earlier,
#: or the sweep was cancelled) were never sent a request.
MEASURED_POINT_STATUSES = (PointStatus.OK, PointStatus.FAILED, PointStatus.CRASHED, PointStatus.TIMEOUT,
                           PointStatus.CONTEXT_OVERFLOW)


class Validity(LabelledStrEnum):
    """The verdict on a measured point (sweepcore.validity decides it)."""

    VALID = "valid", "Valid"
    SUSPECT = "suspect", "Suspect"
    INVALID = "invalid", "Invalid"
