"""The HTTP APIs the load generator speaks: one request function per API in one registry,
:data:`API_REGISTRY` (the way vLLM's ``benchmarks/backend_request_func.py`` keeps
``ASYNC_REQUEST_FUNCS``), and the record one request leaves, :class:`RequestResult`.

Each :class:`Api` says where the API is served, how a prompt becomes its JSON body, and
which request function reads its answer.  A request function sends one pre-encoded body,
reads the stream (:mod:`sweepcore.loadgen.sse`) with arrival times from
:mod:`sweepcore.loadgen.stamping`, and classifies every failure into a
:class:`~sweepcore.kinds.RequestErrorKind`; it never raises for a failed request.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from sweepcore.kinds import RequestErrorKind as Kind
from sweepcore.loadgen import http1, stamping
from sweepcore.loadgen.sse import StreamScan

#: Lower-cased substrings of the too-long-request answers of real servers:
#: SGLang ``python/sglang/srt/managers/tokenizer_manager.py``: "The input (N tokens) is
#: longer than the model's context length (L tokens)." and "Requested token count
#: exceeds the model's maximum context length of L tokens. You requested a total of ...";
#: vLLM ``vllm/entrypoints/openai/serving_engine.py`` / ``vllm/renderers/params.py``:
#: "This model's maximum context length is L tokens. However, you requested ..." and the
#: engine's "The decoder prompt (length N) is longer than the maximum model length of L";
#: llama.cpp ``tools/server``: type ``exceed_context_size_error``, "request (N tokens)
#: exceeds the available context size (L tokens), try increasing it"; llama-cpp-python
#: ``llama_cpp/llama.py`` "Requested tokens (P) exceed context window of N", answered by
#: ``llama_cpp/server/errors.py`` with code ``context_length_exceeded``.
CONTEXT_OVERFLOW_MARKERS = (
    "maximum context length",
    "longer than the model's context length",
    "longer than the maximum model length",
    "exceeds the available context size",
    "exceed context window of",
    "exceed_context_size_error",
    "context_length_exceeded",
)

#: Keys of SGLang's ``GenerateReqInput`` that sit beside ``sampling_params``; any other
#: extra body key is a sampling parameter.
SGLANG_TOP_LEVEL_KEYS = frozenset(
    {
        "rid", "return_logprob", "logprob_start_len", "top_logprobs_num",
        "token_ids_logprob", "return_text_in_logprobs", "lora_path", "session_params",
        "custom_logit_processor", "return_hidden_states", "bootstrap_host",
        "bootstrap_port", "bootstrap_room", "image_data", "modalities",
    }
)


def classify_error_text(text: str, default: str) -> str:
    """``context_overflow`` when ``text`` is a real server's too-long answer, else default."""
    low = text.lower()
    for marker in CONTEXT_OVERFLOW_MARKERS:
        if marker in low:
            return Kind.CONTEXT_OVERFLOW
    return default


@dataclass(slots=True)
class RequestResult:
    """One request's raw record (the executor stores these fields as a RequestRecord)."""

    index: int
    send_time: float = 0.0  # epoch seconds
    chunk_offsets: list = field(default_factory=list)  # seconds since send, per token chunk
    chunk_tokens: list = field(default_factory=list)  # tokens carried by each such chunk
    prompt_tokens: int | None = None  # as the server counted them
    output_tokens: int = 0
    token_count_source: str = "chunks"  # "server_cumulative" | "usage" | "chunks"
    finish_reason: str = ""
    http_status: int | None = None
    error_kind: str = ""  # a RequestErrorKind, '' on success
    error: str = ""
    spec_verify_ct: int | None = None  # SGLang meta_info under speculative decoding
    # Open loop only (None in a closed loop): seconds from the request's scheduled arrival
    # to its send_time -- waiting for the concurrency cap and a late event loop both count.
    # A request that was never sent (connection refused) has the send_time of its attempt,
    # so its lag is how late it was attempted.
    send_lag: float | None = None
    # Sent while the load ramped up or down (the spec's steady_state): kept with the
    # point's requests, left out of its statistics (sweepcore.metrics.mark_ramp).
    in_ramp: bool = False

    @property
    def ok(self) -> bool:
        return not self.error_kind and self.output_tokens > 0


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What every request of one load shares: its connections, URL, headers and time limits."""

    pool: http1.Pool
    url: str
    path: str
    headers: dict
    timeout_first_token: float
    timeout_stall: float
    timeout_total: float
    # The requests of this endpoint not answered yet (their exchanges), so that a load that
    # stops can end them at once instead of waiting out their time limits.
    live: set = field(default_factory=set, compare=False)

    def encode(self, body: bytes) -> bytes:
        """The whole HTTP request that sends ``body`` (encoded once per prompt)."""
        return self.pool.request_bytes("POST", self.path, body, self.headers)

    def end_in_flight(self, kind: str, why: str) -> int:
        """End every request still waiting on this endpoint as failed with ``kind`` and
        ``why`` (its text says how far it got); returns how many were ended."""
        return sum(ex.give_up(kind, f"{why} (ended after {len(ex.res.chunk_offsets)} token chunks)")
                   for ex in list(self.live))


# ------------------------------------------------------------------------------ bodies

def _openai_body(model: str | None, max_tokens: int, continuous_usage: bool) -> dict:
    # vLLM and SGLang put the cumulative usage.completion_tokens in every chunk with
    # continuous_usage_stats; servers that ignore it still send the final usage chunk.
    opts = {"include_usage": True}
    if continuous_usage:
        opts["continuous_usage_stats"] = True
    return {"model": model, "max_tokens": max_tokens, "stream": True, "stream_options": opts}


def openai_completions_body(prompt: Any, *, model: str | None, max_tokens: int, extra: dict,
                            continuous_usage: bool) -> dict:
    """``POST /v1/completions``: ``{"prompt": ...}``; ``extra`` keys are added last."""
    body = _openai_body(model, max_tokens, continuous_usage)
    body["prompt"] = prompt
    body.update(extra)
    return body


def openai_chat_body(prompt: Any, *, model: str | None, max_tokens: int, extra: dict,
                     continuous_usage: bool) -> dict:
    """``POST /v1/chat/completions``: one user message; ``extra`` keys are added last."""
    body = _openai_body(model, max_tokens, continuous_usage)
    body["messages"] = [{"role": "user", "content": prompt}]
    body.update(extra)
    return body


def sglang_generate_body(prompt: Any, *, model: str | None, max_tokens: int, extra: dict,
                         continuous_usage: bool) -> dict:
    """SGLang's native ``POST /generate``: ``{"text": ...}`` or ``{"input_ids": [...]}``.

    ``extra`` keys go into ``sampling_params`` unless they are SGLang's top-level request
    keys; the model name and usage options do not apply (every event carries
    ``meta_info.completion_tokens``).
    """
    extra = dict(extra)
    sampling = {"max_new_tokens": max_tokens}
    sampling.update(extra.pop("sampling_params", {}) or {})
    top = {}
    for k, v in extra.items():
        (top if k in SGLANG_TOP_LEVEL_KEYS else sampling)[k] = v
    body: dict = {"sampling_params": sampling, "stream": True}
    if isinstance(prompt, str):
        body["text"] = prompt
    else:
        body["input_ids"] = list(prompt)
    body.update(top)
    return body


# --------------------------------------------------------------------- request functions

_TIMEOUT_TEXT = {
    Kind.TIMEOUT_FIRST_TOKEN: "no first token within",
    Kind.TIMEOUT_STALL: "no token for",
    Kind.TIMEOUT_TOTAL: "request not finished within",
}

#: The time limits that mean the server sent nothing for that long (not merely a long
#: answer): a request ending on one of them may have met a hung server.
SILENCE_TIMEOUTS = frozenset({Kind.TIMEOUT_FIRST_TOKEN, Kind.TIMEOUT_STALL})

#: How much of a non-200 answer's body is kept as its error text.
ERROR_BODY_BYTES = 65536


class _StreamExchange(http1.Exchange):
    """One streamed request as its connection reads it: the event stream goes through
    the scan as each read arrives; the request's task is woken once, when it is over
    (the stream ended, the connection failed, or a time limit passed)."""

    __slots__ = ("scan", "res", "t0", "future", "status", "error_body", "error", "lost",
                 "started", "last_token", "timer", "conn", "begun", "limits")

    def __init__(self, scan: StreamScan, begun: float):
        self.scan = scan
        self.res = scan.res
        self.begun = begun  # perf_counter() when the request began (its connection included)
        self.t0 = begun  # perf_counter() when the request was handed to the socket
        self.future: asyncio.Future | None = None
        self.status = 0
        self.error_body: bytearray | None = None
        self.error: BaseException | None = None  # why the connection failed
        self.lost = False
        self.started = False
        self.last_token = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.conn: http1.Connection | None = None
        self.limits: tuple | None = None  # (loop, endpoint) of the armed time limits

    def attempt(self, conn: http1.Connection, future: asyncio.Future) -> None:
        self.conn, self.future = conn, future
        self.status, self.error_body, self.error, self.lost, self.started = 0, None, None, False, False

    # ----------------------------------------------------------------- http1.Exchange

    def head(self, status: int, headers: dict) -> None:
        self.status = status
        self.res.http_status = status
        if status != 200:
            self.error_body = bytearray()

    def body(self, pieces: list, rx: float) -> bool:
        eb = self.error_body
        if eb is not None:
            for data in pieces:
                eb += data[: ERROR_BODY_BYTES - len(eb)]
            return len(eb) >= ERROR_BODY_BYTES
        t0 = self.t0
        if rx < t0:
            self.error = stamping.StampingError(
                "response bytes were read but none was stamped since the request was sent: "
                "asyncio no longer polls through loop._selector"
            )
            return True
        scan = self.scan
        if scan.feed_pieces(pieces, rx - t0):
            first = not self.last_token
            self.last_token = rx
            if first:
                self._arm_stall()
        return scan.done or scan.error is not None

    def end(self, error: BaseException | None, response_started: bool) -> None:
        if error is not None and self.error is None:
            self.error, self.lost, self.started = error, True, response_started
        if self.future is not None and not self.future.done():
            self.future.set_result(None)

    # ---------------------------------------------------------------------- time limits

    def arm(self, loop: asyncio.AbstractEventLoop, ep: Endpoint) -> None:
        """The request's time limits, from now: first token, then stall, within the total."""
        self.limits = (loop, ep)
        self.timer = loop.call_later(min(ep.timeout_first_token, ep.timeout_total), self._on_timer, loop, ep)

    def _arm_stall(self) -> None:
        """At the first token the limit ahead becomes the stall limit (usually far shorter
        than the first-token one): the timer is moved there once; later tokens only move
        ``last_token``, which the timer reads when it fires."""
        if self.timer is None or self.limits is None:  # over already
            return
        loop, ep = self.limits
        self.timer.cancel()
        due = min(self.begun + ep.timeout_total, self.last_token + ep.timeout_stall)
        self.timer = loop.call_later(max(0.0, due - time.perf_counter()), self._on_timer, loop, ep)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _on_timer(self, loop: asyncio.AbstractEventLoop, ep: Endpoint) -> None:
        # Re-armed only when a limit is reached: tokens arriving cost nothing here.
        self.timer = None
        res = self.res
        if res.error_kind or (self.future is not None and self.future.done()):
            return
        now = time.perf_counter()
        total_at = self.begun + ep.timeout_total
        if res.chunk_offsets:
            stall_at = self.last_token + ep.timeout_stall
            due = min(total_at, stall_at)
            if now < due:
                self.timer = loop.call_later(due - now, self._on_timer, loop, ep)
                return
            kind = Kind.TIMEOUT_TOTAL if total_at <= stall_at else Kind.TIMEOUT_STALL
        else:
            kind = Kind.TIMEOUT_FIRST_TOKEN if ep.timeout_first_token < ep.timeout_total else Kind.TIMEOUT_TOTAL
        limit = {Kind.TIMEOUT_FIRST_TOKEN: ep.timeout_first_token, Kind.TIMEOUT_STALL: ep.timeout_stall,
                 Kind.TIMEOUT_TOTAL: ep.timeout_total}[kind]
        self.give_up(kind, f"{_TIMEOUT_TEXT[kind]} {limit:g} s (after {len(res.chunk_offsets)} token chunks)")

    def give_up(self, kind: str, text: str) -> bool:
        """Fail the request now with ``kind`` and ``text`` unless it is over already (a time
        limit, or the load stopping); returns whether it did."""
        res = self.res
        if res.error_kind or (self.future is not None and self.future.done()):
            return False
        res.error_kind = kind
        res.error = text
        if self.conn is not None:
            self.conn.abort()  # nothing more is read from it: a late answer counts for nothing
        if self.future is not None and not self.future.done():
            self.future.set_result(None)
        return True


async def stream_request(ep: Endpoint, index: int, request: bytes, usage_chunk: bool) -> RequestResult:
    """Send ``request`` (a whole HTTP request, :meth:`Endpoint.encode`), read the event
    stream, return the request's record (never raises for a failed request; raises
    :class:`~sweepcore.loadgen.stamping.StampingError` when arrival times could not be
    stamped)."""
    res = RequestResult(index=index)
    scan = StreamScan(res, usage_chunk)
    loop = asyncio.get_running_loop()
    wall0 = time.time()
    t_pre = time.perf_counter()
    ex = _StreamExchange(scan, t_pre)
    ex.arm(loop, ep)
    ep.live.add(ex)
    try:
        for attempt in (0, 1):
            conn = await ep.pool.connection(fresh=attempt > 0)
            if res.error_kind:  # a time limit passed while connecting
                conn.abort()
                break
            reused = conn.used > 0
            ex.attempt(conn, loop.create_future())
            ex.t0 = conn.send(request, ex)
            await ex.future
            # A kept-alive connection the server closed before it read the request:
            # nothing was answered, so the request goes once more on a new connection.
            if not (attempt == 0 and reused and ex.lost and not ex.started and not res.error_kind):
                break
    except OSError as e:
        if not res.error_kind:
            res.error_kind = Kind.CONNECTION_REFUSED
            why = f"no connection within {ep.pool.connect_timeout:g} s" if isinstance(e, TimeoutError) else str(e)
            res.error = f"cannot connect to {ep.url}: {why or type(e).__name__}"
    finally:
        ep.live.discard(ex)
        ex.disarm()
        if ex.future is not None and not ex.future.done() and ex.conn is not None:
            ex.conn.abort()  # cancelled while reading: the connection cannot be reused
        res.send_time = wall0 + (ex.t0 - t_pre)
        scan.count()
        res.finish_reason = scan.finish
    if not res.error_kind:
        _outcome(ex, scan, res, ep)
    if not res.error_kind and res.output_tokens == 0:
        res.error_kind = Kind.EMPTY_RESPONSE
        res.error = ("HTTP 200 stream finished with zero output tokens "
                     f"(finish_reason={scan.finish or 'none'})")
    return res


def _outcome(ex: _StreamExchange, scan: StreamScan, res: RequestResult, ep: Endpoint) -> None:
    """The record's error, if any, from how the exchange ended."""
    if isinstance(ex.error, stamping.StampingError):
        raise ex.error
    if ex.future is None:  # never sent
        return
    offs = res.chunk_offsets
    if ex.error_body is not None:
        text = bytes(ex.error_body).decode("utf-8", "replace")
        res.error_kind = classify_error_text(text, Kind.HTTP_ERROR)
        res.error = f"HTTP {ex.status}: {text}"
    elif isinstance(ex.error, http1.ProtocolError):
        res.error_kind = Kind.CLIENT_ERROR
        res.error = f"malformed HTTP response from {ep.url}: {ex.error}"
    elif scan.error is not None:
        res.error_kind = classify_error_text(scan.error, Kind.ERROR_IN_STREAM)
        res.error = scan.error
    elif ex.lost and not scan.done:
        res.error_kind = Kind.CONNECTION_LOST_MID_STREAM
        where = "before the response" if not ex.status else f"mid-stream after {len(offs)} token chunks"
        res.error = f"connection lost {where}: {type(ex.error).__name__}: {ex.error}"
    elif not scan.done and not scan.finish:
        res.error_kind = Kind.CONNECTION_LOST_MID_STREAM
        res.error = (
            "the stream ended before [DONE] and before a finish_reason "
            f"(after {len(offs)} token chunks)"
        )


async def request_openai(ep: Endpoint, index: int, body: bytes) -> RequestResult:
    """openai-completions and openai-chat: chunks carry ``usage`` (with
    ``continuous_usage_stats``) and the stream ends with a usage chunk, ``"choices": []``."""
    return await stream_request(ep, index, body, usage_chunk=True)


async def request_sglang_generate(ep: Endpoint, index: int, body: bytes) -> RequestResult:
    """sglang-generate: every event carries ``meta_info.completion_tokens`` (cumulative),
    ``prompt_tokens`` and, under speculative decoding, ``spec_verify_ct``."""
    return await stream_request(ep, index, body, usage_chunk=False)


@dataclass(frozen=True, slots=True)
class Api:
    """One HTTP API: its path, how a prompt becomes its body, the function that sends it."""

    path: str
    build_body: Callable[..., dict]
    request: Callable[[Endpoint, int, bytes], Awaitable[RequestResult]]


#: The APIs by name (``LoadConfig.api``): the one list of them.
API_REGISTRY = {
    "openai-completions": Api("/v1/completions", openai_completions_body, request_openai),
    "openai-chat": Api("/v1/chat/completions", openai_chat_body, request_openai),
    "sglang-generate": Api("/generate", sglang_generate_body, request_sglang_generate),
}
API_PATHS = {name: api.path for name, api in API_REGISTRY.items()}
APIS = tuple(API_REGISTRY)
