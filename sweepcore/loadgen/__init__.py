"""Streaming load generator (asyncio, its own HTTP/1.1 client).  Plain Python, no Django.

Drives an inference server with streaming requests and records, per request, the raw
facts every metric in :mod:`sweepcore.metrics` is computed from.

APIs (``LoadConfig.api``)
-------------------------
``openai-completions``  ``POST /v1/completions``       ``{"prompt": ...}``
``openai-chat``         ``POST /v1/chat/completions``  ``{"messages": [{"role": "user", ...}]}``
    Both stream with ``stream_options = {"include_usage": true,
    "continuous_usage_stats": true}``: vLLM and SGLang then put the cumulative
    ``usage.completion_tokens`` in every chunk; servers that ignore
    ``continuous_usage_stats`` still send the final usage chunk.
``sglang-generate``     ``POST /generate``  SGLang's native API, ``{"text": ...}`` or
    ``{"input_ids": [...]}`` with ``sampling_params.max_new_tokens``; every event carries
    ``meta_info.completion_tokens`` (cumulative), ``prompt_tokens`` and, under
    speculative decoding, ``spec_verify_ct``.

Token counts
------------
A chunk can carry several tokens (speculative decoding, stream intervals).  Counts come
from the server's cumulative counts in each chunk, else the final usage, else one token
per content chunk (``RequestResult.token_count_source``; see :mod:`.sse`).

Error kinds (``RequestResult.error_kind``; '' on success)
---------------------------------------------------------
``http_error``          non-200 status (``error`` = "HTTP <status>: <body>").
``context_overflow``    the server's too-long-request answer, as a 4xx body or as an
                        in-stream error after HTTP 200 (SGLang's streaming /generate does
                        that), matched on the real texts -- see :data:`CONTEXT_OVERFLOW_MARKERS`.
``error_in_stream``     ``data: {"error": ...}`` inside an HTTP 200 stream.
``connection_refused``  could not connect.
``connection_lost_mid_stream``  the server closed/reset the connection (or the stream
                        ended without ``[DONE]`` and without a finish reason).
``timeout_first_token`` no token within ``timeout_first_token`` seconds of sending (or
                        none for ``timeout_stall`` and the load's ``health_check`` found
                        the server silent).
``timeout_stall``       no token for ``timeout_stall`` seconds after the first.
``timeout_total``       the request ran longer than ``timeout_total``.
``empty_response``      HTTP 200, stream finished, zero output tokens.
``client_error``        an unexpected exception in the client itself (text kept).
``stopped_after_stall`` still unanswered when another request of the load met a silence
                        limit (``timeout_stall``, ``timeout_first_token``): the load
                        stopped sending and ended it (``stop_on_stall``, see :mod:`.runner`).
Failed requests are kept in ``LoadResult.results`` and counted; never dropped.

Modules
-------
:mod:`.sse` SSE framing and stream scanning; :mod:`.http1` keep-alive HTTP/1.1
connections that hand each read of a response to its scan inside the protocol (no task
wake per read; see its docstring for why not aiohttp); :mod:`.apis` one request function
per API (``API_REGISTRY``), the request record and the time limits; :mod:`.runner` the
closed and open loops, warmup and the client's self-measurement; :mod:`.stamping` the
arrival stamp, the only hook into asyncio's private names (a hook that cannot be
installed or stops taking effect raises :class:`StampingError`).
"""

from sweepcore.loadgen.apis import (
    API_PATHS,
    API_REGISTRY,
    APIS,
    CONTEXT_OVERFLOW_MARKERS,
    RequestResult,
    classify_error_text,
)
from sweepcore.loadgen.runner import (
    CLIENT_BOUND_CPU_FRACTION,
    CLIENT_BOUND_LAG_MS,
    LoadConfig,
    LoadResult,
    build_body,
    make_pool,
    open_files_problem,
    run_load,
    run_load_sync,
)
from sweepcore.loadgen.stamping import StampingError

__all__ = [
    "API_PATHS",
    "API_REGISTRY",
    "APIS",
    "CLIENT_BOUND_CPU_FRACTION",
    "CLIENT_BOUND_LAG_MS",
    "CONTEXT_OVERFLOW_MARKERS",
    "LoadConfig",
    "LoadResult",
    "RequestResult",
    "StampingError",
    "build_body",
    "classify_error_text",
    "make_pool",
    "open_files_problem",
    "run_load",
    "run_load_sync",
]
