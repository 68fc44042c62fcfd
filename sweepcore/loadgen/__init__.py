"""Streaming load generator (asyncio + aiohttp).  Plain Python, no Django.

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
from, in order: the server's cumulative counts in each chunk (``token_count_source =
"server_cumulative"``); the final ``usage.completion_tokens`` with one token assumed per
content chunk and the total spread evenly over the chunks when they differ
(``"usage"``); one token per content chunk (``"chunks"``).  SSE lines are scanned with
byte searches and precompiled regexes instead of decoding every chunk's JSON; JSON is
decoded only for lines that carry an ``"error"`` key.  The stream is read with
``readany()`` and split on newlines by us, so no line-length limit applies (aiohttp's
``readline`` limit of 64 KiB breaks long-context results in other tools); events that
arrived in one read share that read's arrival time.

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
``timeout_first_token`` no token within ``timeout_first_token`` seconds of sending.
``timeout_stall``       no token for ``timeout_stall`` seconds after the first.
``timeout_total``       the request ran longer than ``timeout_total``.
``empty_response``      HTTP 200, stream finished, zero output tokens.
``client_error``        an unexpected exception in the client itself (text kept).
Failed requests are kept in ``LoadResult.results`` and counted; never dropped.

Arrival
-------
Closed loop (``request_rate=None``): ``concurrency`` workers, each sends its next
request when its previous one ends.  Open loop: arrivals at ``request_rate`` req/s with
gamma-distributed gaps (``burstiness=1`` is Poisson; smaller is burstier, as in
``vllm bench serve``), capped at ``concurrency`` in flight (queued arrivals wait; the
send time is taken when the request is actually sent).  ``num_requests`` or
``duration`` (stop issuing after that many seconds) bounds the run; ``warmup``
requests run first, at the same concurrency, and are kept apart in
``LoadResult.warmup_results``.

Self-measurement
----------------
During the measurement a task samples event-loop lag every ``lag_interval`` seconds
(lateness of a timer; includes up to ~1 ms of epoll timer granularity) and the loop
thread's CPU time (``time.thread_time``) is taken at both ends.  ``client_bound`` is set
when lag p99 > 5 ms or the client used > 90 % of a core: a number measured while the
client was saturated is flagged, not presented as the server's.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import random
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import aiohttp
from aiohttp.client_proto import ResponseHandler

API_PATHS = {
    "openai-completions": "/v1/completions",
    "openai-chat": "/v1/chat/completions",
    "sglang-generate": "/generate",
}
APIS = tuple(API_PATHS)

ERROR_KINDS = (
    "http_error",
    "error_in_stream",
    "context_overflow",
    "connection_refused",
    "connection_lost_mid_stream",
    "timeout_first_token",
    "timeout_stall",
    "timeout_total",
    "empty_response",
    "client_error",
)

CLIENT_BOUND_LAG_MS = 5.0
CLIENT_BOUND_CPU_FRACTION = 0.9

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

SGLANG_TOP_LEVEL_KEYS = frozenset(
    {
        "rid", "return_logprob", "logprob_start_len", "top_logprobs_num",
        "token_ids_logprob", "return_text_in_logprobs", "lora_path", "session_params",
        "custom_logit_processor", "return_hidden_states", "bootstrap_host",
        "bootstrap_port", "bootstrap_room", "image_data", "modalities",
    }
)

_CT = re.compile(rb'"completion_tokens":\s*(\d+)')
_PT = re.compile(rb'"prompt_tokens":\s*(\d+)')
_SPEC = re.compile(rb'"spec_verify_ct":\s*(\d+)')
_EMPTY_CHOICES = re.compile(rb'"choices":\s*\[\s*\]')
_CONTENT = re.compile(rb'"(?:text|content|reasoning_content|reasoning)":\s*"(?!")')
_FINISH = re.compile(rb'"finish_reason":\s*(?:"([^"]+)"|\{\s*"type":\s*"([^"]+)")')


def classify_error_text(text: str, default: str) -> str:
    """``context_overflow`` when ``text`` is a real server's too-long answer, else default."""
    low = text.lower()
    for marker in CONTEXT_OVERFLOW_MARKERS:
        if marker in low:
            return "context_overflow"
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
    error_kind: str = ""
    error: str = ""
    spec_verify_ct: int | None = None  # SGLang meta_info under speculative decoding

    @property
    def ok(self) -> bool:
        return not self.error_kind and self.output_tokens > 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LoadConfig:
    base_url: str
    api: str = "openai-completions"
    model: str | None = None
    prompts: Sequence[Any] = ()  # strings, or token id lists for sglang-generate
    max_tokens: int = 256
    concurrency: int = 1
    num_requests: int | None = None
    duration: float | None = None
    request_rate: float | None = None  # None = closed loop
    burstiness: float = 1.0
    warmup: int = 0
    timeout_first_token: float = 600.0
    timeout_stall: float = 120.0
    timeout_total: float = 3600.0
    connect_timeout: float = 10.0
    extra_body: dict = field(default_factory=dict)  # e.g. {"ignore_eos": True}
    continuous_usage: bool = True
    api_key: str | None = None
    seed: int = 0
    lag_interval: float = 0.01
    progress: Callable[[RequestResult], None] | None = None

    def validate(self) -> None:
        if self.api not in API_PATHS:
            raise ValueError(f"unknown api {self.api!r}; choose one of {', '.join(APIS)}")
        if not self.prompts:
            raise ValueError("no prompts")
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.num_requests is None and self.duration is None:
            raise ValueError("give num_requests or duration")
        if self.request_rate is not None and self.request_rate <= 0:
            raise ValueError("request_rate must be > 0 (None for a closed loop)")
        if self.burstiness <= 0:
            raise ValueError("burstiness must be > 0")
        if self.api != "sglang-generate" and not self.model:
            raise ValueError(f"{self.api} needs a model name")


@dataclass
class LoadResult:
    results: list  # RequestResult, in completion order, failures included
    duration: float  # wall seconds, first send to last completion
    start_time: float  # epoch seconds
    warmup_results: list = field(default_factory=list)
    lag_samples_ms: list = field(default_factory=list)
    event_loop_lag_p99_ms: float | None = None
    client_cpu_s: float = 0.0
    client_cpu_fraction: float = 0.0
    client_bound: bool = False

    @property
    def spec_verify_ct(self) -> list:
        """Per-request ``spec_verify_ct`` (None where the server did not report it)."""
        return [r.spec_verify_ct for r in self.results]

    def summary(self, prompt_tokens_fallback: int | None = None) -> dict:
        from sweepcore.metrics import summarize

        return summarize(
            self.results,
            self.duration,
            client_bound=self.client_bound,
            event_loop_lag_p99_ms=self.event_loop_lag_p99_ms,
            prompt_tokens_fallback=prompt_tokens_fallback,
        )


def build_body(config: LoadConfig, prompt: Any) -> dict:
    """The JSON request body for one prompt."""
    extra = dict(config.extra_body or {})
    if config.api == "sglang-generate":
        sampling = {"max_new_tokens": config.max_tokens}
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
    body = {"model": config.model, "max_tokens": config.max_tokens, "stream": True}
    opts = {"include_usage": True}
    if config.continuous_usage:
        opts["continuous_usage_stats"] = True
    body["stream_options"] = opts
    if config.api == "openai-chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    body.update(extra)
    return body


def _spread(total: int, n: int) -> list[int]:
    q, r = divmod(total, n)
    return [q + (1 if i < r else 0) for i in range(n)]


def _lag_p99(samples: list[float]) -> float | None:
    if not samples:
        return None
    xs = sorted(samples)
    rank = 0.99 * (len(xs) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (rank - lo) * (xs[hi] - xs[lo])


class _Runner:
    def __init__(self, config: LoadConfig, session: aiohttp.ClientSession):
        self.c = config
        self.session = session
        self.url = config.base_url.rstrip("/") + API_PATHS[config.api]
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if config.api_key:
            self.headers["Authorization"] = f"Bearer {config.api_key}"
        self.bodies = [
            json.dumps(build_body(config, p), separators=(",", ":")).encode()
            for p in config.prompts
        ]
        self.is_sglang = config.api == "sglang-generate"

    async def one(self, index: int) -> RequestResult:
        c = self.c
        res = RequestResult(index=index)
        body = self.bodies[index % len(self.bodies)]
        loop = asyncio.get_running_loop()
        offs = res.chunk_offsets
        toks = res.chunk_tokens
        pc = time.perf_counter
        is_sglang = self.is_sglang
        ct_search, content_search, finish_search = _CT.search, _CONTENT.search, _FINISH.search
        prev_cum = 0
        cum_mode = False
        final_usage: int | None = None
        meta_line = b""
        done = False
        finish = ""
        fire_kind = "timeout_first_token"
        started = loop.time()
        total_deadline = started + c.timeout_total
        wall0 = time.time()
        t_pre = t0 = pc()
        sent = [0.0]  # set by the trace hook when the body is handed to the socket
        try:
            async with asyncio.timeout_at(min(total_deadline, started + c.timeout_first_token)) as tm:
                if c.timeout_total <= c.timeout_first_token:
                    fire_kind = "timeout_total"
                async with self.session.post(self.url, data=body, headers=self.headers,
                                             trace_request_ctx=sent) as resp:
                    if sent[0]:
                        t0 = sent[0]
                    res.http_status = resp.status
                    if resp.status != 200:
                        raw = await resp.content.read(65536)
                        text = raw.decode("utf-8", "replace")
                        res.error_kind = classify_error_text(text, "http_error")
                        res.error = f"HTTP {resp.status}: {text}"
                        return res
                    content = resp.content
                    proto = resp.connection.protocol if resp.connection is not None else None
                    if not isinstance(proto, _StampingHandler):
                        proto = None
                    pending = bytearray()
                    stream_error = None
                    while not done and stream_error is None:
                        data = await content.readany()
                        if not data:
                            break
                        now = (proto.rx_time if proto is not None else pc()) - t0
                        nl = data.rfind(b"\n")
                        if nl < 0:
                            pending += data
                            continue
                        if pending:
                            pending += data[:nl]
                            block = bytes(pending)
                            pending = bytearray(data[nl + 1 :])
                        else:
                            block = data[:nl]
                            if nl + 1 < len(data):
                                pending += data[nl + 1 :]
                        n_before = len(offs)
                        for line in block.split(b"\n"):
                            if line[:5] != b"data:":
                                continue
                            payload = line[5:].strip()
                            if payload[:6] == b"[DONE]":
                                done = True
                                break
                            if b'"error"' in payload or b'"object":"error"' in payload:
                                err = _stream_error(payload)
                                if err is not None:
                                    stream_error = err
                                    break
                            m = ct_search(payload)
                            if m is not None:
                                meta_line = payload
                                if not is_sglang and _EMPTY_CHOICES.search(payload):
                                    final_usage = int(m.group(1))
                                    continue
                                cum = int(m.group(1))
                                d = cum - prev_cum
                                if d > 0:
                                    offs.append(now)
                                    toks.append(d)
                                    prev_cum = cum
                                cum_mode = True
                            elif content_search(payload):
                                offs.append(now)
                                toks.append(1)
                            if b"finish_reason" in payload:
                                f = finish_search(payload)
                                if f is not None:
                                    finish = (f.group(1) or f.group(2)).decode()
                        if len(offs) > n_before:
                            stall_at = loop.time() + c.timeout_stall
                            if stall_at < total_deadline:
                                tm.reschedule(stall_at)
                                fire_kind = "timeout_stall"
                            else:
                                tm.reschedule(total_deadline)
                                fire_kind = "timeout_total"
                    if stream_error is not None:
                        res.error_kind = classify_error_text(stream_error, "error_in_stream")
                        res.error = stream_error
                    elif not done and not finish:
                        res.error_kind = "connection_lost_mid_stream"
                        res.error = (
                            "the stream ended before [DONE] and before a finish_reason "
                            f"(after {len(offs)} token chunks)"
                        )
        except TimeoutError:
            res.error_kind = fire_kind
            limit = {
                "timeout_first_token": c.timeout_first_token,
                "timeout_stall": c.timeout_stall,
                "timeout_total": c.timeout_total,
            }[fire_kind]
            what = {
                "timeout_first_token": "no first token within",
                "timeout_stall": "no token for",
                "timeout_total": "request not finished within",
            }[fire_kind]
            res.error = f"{what} {limit:g} s (after {len(offs)} token chunks)"
        except aiohttp.ClientConnectorError as e:
            res.error_kind = "connection_refused"
            res.error = f"cannot connect to {self.url}: {e.os_error or e}"
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
                aiohttp.ClientOSError) as e:
            res.error_kind = "connection_lost_mid_stream"
            where = "before the response" if res.http_status is None else (
                f"mid-stream after {len(offs)} token chunks")
            res.error = f"connection lost {where}: {type(e).__name__}: {e}"
        except aiohttp.ClientError as e:
            res.error_kind = "client_error"
            res.error = f"{type(e).__name__}: {e}"
        finally:
            res.send_time = wall0 + (t0 - t_pre)
            _finish_counts(res, cum_mode, prev_cum, final_usage, meta_line)
            res.finish_reason = finish
        if not res.error_kind and res.output_tokens == 0:
            res.error_kind = "empty_response"
            res.error = f"HTTP 200 stream finished with zero output tokens (finish_reason={finish or 'none'})"
        return res


def _stream_error(payload: bytes) -> str | None:
    """The error text of an in-stream ``{"error": ...}`` event, else None."""
    try:
        obj = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if "error" in obj and obj["error"]:
        err = obj["error"]
    elif obj.get("object") == "error":
        err = obj
    else:
        return None
    if isinstance(err, dict):
        parts = [str(err.get("message") or "")]
        for k in ("type", "code"):
            if err.get(k) not in (None, ""):
                parts.append(f"{k}={err[k]}")
        return " ".join(p for p in parts if p) or json.dumps(err)
    return str(err)


def _finish_counts(res: RequestResult, cum_mode: bool, prev_cum: int,
                   final_usage: int | None, meta_line: bytes) -> None:
    toks = res.chunk_tokens
    if cum_mode:
        if final_usage is not None and final_usage > prev_cum and toks:
            toks[-1] += final_usage - prev_cum
        res.token_count_source = "server_cumulative"
    elif final_usage is not None:
        res.token_count_source = "usage"
        if toks and final_usage != len(toks):
            spread = _spread(final_usage, len(toks))
            keep = [i for i, k in enumerate(spread) if k > 0]
            res.chunk_offsets[:] = [res.chunk_offsets[i] for i in keep]
            toks[:] = [spread[i] for i in keep]
    else:
        res.token_count_source = "chunks"
    res.output_tokens = sum(toks)
    if meta_line:
        m = _PT.search(meta_line)
        if m:
            res.prompt_tokens = int(m.group(1))
        m = _SPEC.search(meta_line)
        if m:
            res.spec_verify_ct = int(m.group(1))


async def _lag_monitor(interval: float, samples: list, stop: asyncio.Event) -> None:
    pc = time.perf_counter
    while not stop.is_set():
        t = pc()
        await asyncio.sleep(interval)
        samples.append(max(0.0, (pc() - t - interval) * 1000.0))


class _PollStampSelector:
    """Wraps an event loop's selector; ``t`` is the ``perf_counter()`` its last poll returned.

    Every socket that poll reported readable had its bytes in the kernel by then, so
    ``t`` bounds their arrival from above without the time the loop then spends reading
    and parsing the other ready sockets of the same batch (hundreds of microseconds at
    high concurrency).  Everything else is delegated to the wrapped selector.
    """

    def __init__(self, inner):
        self._inner = inner
        self.t = time.perf_counter()

    def select(self, timeout=None):
        ev = self._inner.select(timeout)
        self.t = time.perf_counter()
        return ev

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _install_poll_stamp(loop) -> Callable[[], None]:
    """Wrap ``loop``'s selector (selector event loops only); returns the undo."""
    inner = getattr(loop, "_selector", None)
    if inner is None or isinstance(inner, _PollStampSelector) or not hasattr(inner, "select"):
        return lambda: None
    loop._selector = _PollStampSelector(inner)

    def undo() -> None:
        if isinstance(loop._selector, _PollStampSelector):
            loop._selector = inner

    return undo


class _StampingHandler(ResponseHandler):
    """aiohttp's connection protocol, stamping when bytes come off the socket.

    ``rx_time`` is when the latest bytes reached the process: the return of the event
    loop's poll that reported them (see :class:`_PollStampSelector`), else the
    ``perf_counter()`` at which the transport handed them to the protocol.  Either is
    taken before aiohttp parses the bytes, wakes the reading task and that task gets its
    turn on the loop.  ``readany()`` drains everything fed so far, so the data it returns
    arrived no later than the ``rx_time`` read right after it.
    """

    rx_time = 0.0

    def data_received(self, data: bytes) -> None:
        sel = getattr(self._loop, "_selector", None)
        self.rx_time = sel.t if isinstance(sel, _PollStampSelector) else time.perf_counter()
        super().data_received(data)


async def _on_chunk_sent(session, ctx, params) -> None:
    holder = ctx.trace_request_ctx
    if holder is not None:
        holder[0] = time.perf_counter()


def make_session(concurrency: int, connect_timeout: float = 10.0) -> aiohttp.ClientSession:
    """One shared session: connection limit >= concurrency, 1 MiB read buffers.

    A trace hook stamps the moment the request body is handed to the socket; that is the
    send time TTFT is measured from (so the client's own request-building time is not
    counted as server latency; connection set-up on a new connection still is).
    """
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_on_chunk_sent)
    connector = aiohttp.TCPConnector(limit=concurrency + 8, limit_per_host=0,
                                     ttl_dns_cache=300, enable_cleanup_closed=False)
    factory = getattr(connector, "_factory", None)
    if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
        connector._factory = functools.partial(_StampingHandler, *factory.args, **factory.keywords)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout),
        read_bufsize=1 << 20,
        auto_decompress=False,
        trust_env=False,
        trace_configs=[trace],
    )


async def run_load(config: LoadConfig) -> LoadResult:
    """Run warmup then the measured load; return every request's record."""
    config.validate()
    undo = _install_poll_stamp(asyncio.get_running_loop())
    try:
        return await _run_load(config)
    finally:
        undo()


async def _run_load(config: LoadConfig) -> LoadResult:
    async with make_session(config.concurrency, config.connect_timeout) as session:
        runner = _Runner(config, session)
        warm: list[RequestResult] = []
        if config.warmup:
            warm = await _closed_loop(runner, config.warmup, None, min(config.concurrency, config.warmup), None)
        samples: list[float] = []
        stop = asyncio.Event()
        monitor = asyncio.create_task(_lag_monitor(config.lag_interval, samples, stop))
        cpu0 = time.thread_time()
        start_epoch = time.time()
        t0 = time.perf_counter()
        if config.request_rate is None:
            results = await _closed_loop(runner, config.num_requests, config.duration,
                                         config.concurrency, config.progress)
        else:
            results = await _open_loop(runner, config)
        duration = time.perf_counter() - t0
        cpu = time.thread_time() - cpu0
        stop.set()
        await monitor
    p99 = _lag_p99(samples)
    frac = cpu / duration if duration > 0 else 0.0
    return LoadResult(
        results=results,
        duration=duration,
        start_time=start_epoch,
        warmup_results=warm,
        lag_samples_ms=samples,
        event_loop_lag_p99_ms=p99,
        client_cpu_s=cpu,
        client_cpu_fraction=frac,
        client_bound=bool((p99 is not None and p99 > CLIENT_BOUND_LAG_MS)
                          or frac > CLIENT_BOUND_CPU_FRACTION),
    )


async def _closed_loop(runner: _Runner, num: int | None, duration: float | None,
                       concurrency: int, progress) -> list[RequestResult]:
    results: list[RequestResult] = []
    counter = iter(range(num)) if num is not None else None
    next_i = 0
    deadline = (time.perf_counter() + duration) if duration is not None else None

    def take() -> int | None:
        nonlocal next_i
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        if counter is not None:
            return next(counter, None)
        next_i += 1
        return next_i - 1

    async def worker() -> None:
        while True:
            i = take()
            if i is None:
                return
            r = await runner.one(i)
            results.append(r)
            if progress is not None:
                progress(r)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


async def _open_loop(runner: _Runner, c: LoadConfig) -> list[RequestResult]:
    results: list[RequestResult] = []
    sem = asyncio.Semaphore(c.concurrency)
    rng = random.Random(c.seed)
    loop = asyncio.get_running_loop()
    start = loop.time()
    end = start + c.duration if c.duration is not None else None
    tasks = []

    async def guarded(i: int) -> None:
        async with sem:
            r = await runner.one(i)
        results.append(r)
        if c.progress is not None:
            c.progress(r)

    at = start
    i = 0
    while c.num_requests is None or i < c.num_requests:
        if i:
            at += rng.gammavariate(c.burstiness, 1.0 / (c.request_rate * c.burstiness))
        if end is not None and at >= end:
            break
        delay = at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(guarded(i)))
        i += 1
    await asyncio.gather(*tasks)
    return results


def run_load_sync(config: LoadConfig) -> LoadResult:
    """Synchronous wrapper around :func:`run_load` (runs its own event loop)."""
    return asyncio.run(run_load(config))
