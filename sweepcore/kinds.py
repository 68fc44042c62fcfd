"""The kinds and statuses Sweeplab records, as StrEnums: one definition each. The Django
models build their TextChoices from these (benchmarks.models, runs.models).
"""

from enum import StrEnum


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
