"""The load: what to send (:class:`LoadConfig`), how it arrives (closed or open loop), what
came back (:class:`LoadResult`), and how busy the client itself was meanwhile.

Closed loop (``request_rate=None``): ``concurrency`` workers, each sends its next request
when its previous one ends.  Open loop: arrivals at ``request_rate`` req/s with
gamma-distributed gaps (``burstiness=1`` is Poisson; smaller is burstier, as in ``vllm
bench serve``), capped at ``concurrency`` in flight (queued arrivals wait; the send time
is taken when the request is actually sent).  Each open-loop request records its
``send_lag``, the seconds from its scheduled arrival to its send: the metrics measure
its latencies from the schedule, so that a server that makes arrivals queue is not
flattered by the queueing it caused (coordinated omission).  ``num_requests`` or ``duration`` (stop
issuing after that many seconds) bounds the run; ``warmup`` requests run first, at the
same concurrency, and are kept apart in ``LoadResult.warmup_results``.

A hang ends a load quickly (``stop_on_stall``, on by default): at the first request that
meets a silence limit (``timeout_stall``: no token for that long; ``timeout_first_token``)
the load sends nothing more and ends the requests still in flight at once, as failed
records of kind ``stopped_after_stall`` with their text (never dropped).  A frozen server
then costs one stall timeout, not a first-token timeout per request still to send;
``LoadResult.stopped_by`` is the request that stopped it, for the caller to probe the
server.  Arrivals of an open loop that were waiting for a free slot were never sent and
leave no record.  A request still waiting for its first token after ``timeout_stall`` (a
server frozen between two requests sends nothing at all) is not proof of a hang -- a long
prefill is silent too -- so the load asks ``health_check`` (on a worker thread); a server
that does not answer it fails that request as ``timeout_first_token`` at once and stops the
load (``LoadResult.unhealthy`` says what the check found), one that answers is asked again
after another ``timeout_stall``.

During the measurement a task samples event-loop lag every ``lag_interval`` seconds
(lateness of a timer; includes up to ~1 ms of epoll timer granularity) and the loop
thread's CPU time (``time.thread_time``) is taken at both ends.  ``client_bound`` is set
when lag p99 > 5 ms or the client used > 90 % of a core: a number measured while the
client was saturated is flagged, not presented as the server's.
"""

from __future__ import annotations

import asyncio
import json
import random
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from sweepcore.kinds import RequestErrorKind
from sweepcore.loadgen import http1, stamping
from sweepcore.loadgen.apis import API_REGISTRY, APIS, SILENCE_TIMEOUTS, Endpoint, RequestResult
from sweepcore.metrics import percentile, summarize

CLIENT_BOUND_LAG_MS = 5.0
CLIENT_BOUND_CPU_FRACTION = 0.9


@dataclass
class LoadConfig:
    """One load: the server, the API and its prompts, how many requests and how they arrive."""

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
    # Closed loop only: asked before each new request with the results so far; False
    # stops sending (requests in flight still finish).  ``num_requests`` stays the cap.
    keep_going: Callable[[list], bool] | None = None
    # Stop the load at the first request that meets a silence limit (see the module's
    # docstring); False sends every request whatever happens to the others.
    stop_on_stall: bool = True
    # () -> (ok, detail): is the server still answering?  Asked when a request has had no
    # first token for ``timeout_stall`` (see the module's docstring); None never asks.
    health_check: Callable[[], tuple[bool, str]] | None = None

    def validate(self) -> None:
        if self.api not in API_REGISTRY:
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
        if self.keep_going is not None and self.request_rate is not None:
            raise ValueError("keep_going needs a closed loop (request_rate None)")
        if self.api != "sglang-generate" and not self.model:
            raise ValueError(f"{self.api} needs a model name")


@dataclass
class LoadResult:
    """Every request of one load, its wall duration and the client's own load meanwhile."""

    results: list  # RequestResult, in completion order, failures included
    duration: float  # wall seconds, first send to last completion
    start_time: float  # epoch seconds
    warmup_results: list = field(default_factory=list)
    lag_samples_ms: list = field(default_factory=list)
    event_loop_lag_p99_ms: float | None = None
    client_cpu_s: float = 0.0
    client_cpu_fraction: float = 0.0
    client_bound: bool = False
    # The request whose silence limit stopped the load (stop_on_stall), else None.
    stopped_by: RequestResult | None = None
    # What ``health_check`` answered when it found the server silent ('' otherwise).
    unhealthy: str = ""

    @property
    def spec_verify_ct(self) -> list:
        """Per-request ``spec_verify_ct`` (None where the server did not report it)."""
        return [r.spec_verify_ct for r in self.results]

    def summary(self, prompt_tokens_fallback: int | None = None) -> dict:
        return summarize(
            self.results,
            self.duration,
            client_bound=self.client_bound,
            event_loop_lag_p99_ms=self.event_loop_lag_p99_ms,
            prompt_tokens_fallback=prompt_tokens_fallback,
        )


def build_body(config: LoadConfig, prompt: Any) -> dict:
    """The JSON request body for one prompt, in ``config.api``'s shape."""
    return API_REGISTRY[config.api].build_body(
        prompt,
        model=config.model,
        max_tokens=config.max_tokens,
        extra=dict(config.extra_body or {}),
        continuous_usage=config.continuous_usage,
    )


class _Sender:
    """Sends request ``i`` of a load: prompt ``i`` modulo the prompts, requests encoded once."""

    def __init__(self, config: LoadConfig, pool: http1.Pool):
        api = API_REGISTRY[config.api]
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self.endpoint = Endpoint(
            pool=pool,
            url=config.base_url.rstrip("/") + api.path,
            path=api.path,
            headers=headers,
            timeout_first_token=config.timeout_first_token,
            timeout_stall=config.timeout_stall,
            timeout_total=config.timeout_total,
        )
        self.request = api.request
        self.requests = [
            self.endpoint.encode(json.dumps(build_body(config, p), separators=(",", ":")).encode())
            for p in config.prompts
        ]

    def one(self, index: int):
        return self.request(self.endpoint, index, self.requests[index % len(self.requests)])


#: Files a worker holds open besides its load's sockets: logs, database and broker
#: connections, the server's pipes, Python's own.
OPEN_FILES_MARGIN = 256


def open_files_problem(in_flight: int) -> str | None:
    """Why this process cannot hold ``in_flight`` requests at once, or None. Each request
    in flight holds a socket, so a load beyond the open-files limit would fail its requests
    with "Too many open files", which looks like a server failing. The soft limit is first
    raised as far as the hard one allows (a process may do so itself)."""
    needed = in_flight + OPEN_FILES_MARGIN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or needed <= soft:
        return None
    if hard == resource.RLIM_INFINITY or needed <= hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
            return None
        except (ValueError, OSError):
            hard = soft  # not raised here: the soft limit is what it may open
    return (f"concurrency {in_flight:,} needs about {needed:,} open files (a socket per request in flight and "
            f"{OPEN_FILES_MARGIN} more); this worker may open {hard:,} (ulimit -n)")


class _StallStop:
    """Stops a load at its first request that met a silence limit: the server may be hung,
    so nothing more is sent to it and the requests in flight are ended at once (see the
    module's docstring)."""

    def __init__(self, endpoint: Endpoint, enabled: bool):
        self.endpoint = endpoint
        self.enabled = enabled
        self.by: RequestResult | None = None
        self.event = asyncio.Event()
        self.unhealthy = ""

    @property
    def stopped(self) -> bool:
        return self.by is not None

    def see(self, r: RequestResult) -> None:
        """Stop when ``r`` ended on a silence limit (once)."""
        if not self.enabled or self.by is not None or r.error_kind not in SILENCE_TIMEOUTS:
            return
        self.by = r
        self.event.set()
        self.endpoint.end_in_flight(
            RequestErrorKind.STOPPED_AFTER_STALL,
            f"the load stopped sending when request {r.index} timed out ({r.error_kind}: {r.error}); "
            f"the server may be hung",
        )

    async def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the load stops meanwhile."""
        try:
            await asyncio.wait_for(self.event.wait(), seconds)
        except TimeoutError:
            pass


async def _watch_first_tokens(endpoint: Endpoint, stall: _StallStop, check, silence_s: float) -> None:
    """While the load runs: when a request has waited ``silence_s`` for its first token,
    ask ``check`` whether the server still answers; if not, fail the longest-waiting
    request (timeout_first_token, which stops the load). Asked at most once per
    ``silence_s``."""
    loop = asyncio.get_running_loop()
    period = max(0.05, min(1.0, silence_s / 4))
    asked = float("-inf")
    while not stall.stopped:
        await stall.wait(period)
        now = time.perf_counter()
        waiting = [ex for ex in endpoint.live
                   if not ex.res.chunk_offsets and not ex.res.error_kind and now - ex.t0 >= silence_s]
        if stall.stopped or not waiting or now - asked < silence_s:
            continue
        ok, detail = await loop.run_in_executor(None, check)
        asked = time.perf_counter()
        if ok:
            continue
        stall.unhealthy = detail
        oldest = min(waiting, key=lambda ex: ex.t0)
        oldest.give_up(RequestErrorKind.TIMEOUT_FIRST_TOKEN,
                       f"no first token for {asked - oldest.t0:.1f} s, and the server did not answer its health "
                       f"check: {detail}")
        return


def make_pool(base_url: str, connect_timeout: float = 10.0) -> http1.Pool:
    """The load's keep-alive connections to ``base_url`` (:mod:`sweepcore.loadgen.http1`).

    The send time TTFT is measured from is when the whole request is handed to the socket
    (so the client's own request-building time is not counted as server latency; the
    set-up of a new connection is not either); arrivals are stamped by the poll that
    reported them (:mod:`sweepcore.loadgen.stamping`).
    """
    return http1.Pool(base_url, connect_timeout=connect_timeout)


async def run_load(config: LoadConfig) -> LoadResult:
    """Run warmup then the measured load; return every request's record.

    Raises :class:`~sweepcore.loadgen.stamping.StampingError` when arrival times cannot
    be stamped on this event loop.
    """
    config.validate()
    undo = stamping.install_poll_stamp(asyncio.get_running_loop())
    try:
        return await _run_load(config)
    finally:
        undo()


def run_load_sync(config: LoadConfig) -> LoadResult:
    """Synchronous wrapper around :func:`run_load` (runs its own event loop)."""
    out: list[LoadResult] = []

    async def main() -> None:
        # The result is handed out beside the task, not as its result: on the main thread
        # asyncio.run puts SIGINT's handler back at the end, and signal.signal then formats
        # the repr of the handler it replaces, which holds the main task and so its result
        # -- every request's every arrival time (a second of CPU for a million tokens).
        out.append(await run_load(config))

    asyncio.run(main())
    return out[0]


async def _run_load(config: LoadConfig) -> LoadResult:
    async with make_pool(config.base_url, config.connect_timeout) as pool:
        sender = _Sender(config, pool)
        stall = _StallStop(sender.endpoint, config.stop_on_stall)
        watch = None
        if config.health_check is not None and config.stop_on_stall:
            watch = asyncio.create_task(
                _watch_first_tokens(sender.endpoint, stall, config.health_check, config.timeout_stall))
        warm: list[RequestResult] = []
        if config.warmup:
            warm = await _closed_loop(sender, config.warmup, None, min(config.concurrency, config.warmup), None,
                                      stop=stall)
        samples: list[float] = []
        stop = asyncio.Event()
        monitor = asyncio.create_task(_lag_monitor(config.lag_interval, samples, stop))
        cpu0 = time.thread_time()
        start_epoch = time.time()
        t0 = time.perf_counter()
        if config.request_rate is None:
            results = await _closed_loop(sender, config.num_requests, config.duration,
                                         config.concurrency, config.progress, config.keep_going, stall)
        else:
            results = await _open_loop(sender, config, stall)
        duration = time.perf_counter() - t0
        cpu = time.thread_time() - cpu0
        stop.set()
        await monitor
        if watch is not None:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
    p99 = percentile(samples, 99)
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
        stopped_by=stall.by,
        unhealthy=stall.unhealthy,
    )


async def _lag_monitor(interval: float, samples: list, stop: asyncio.Event) -> None:
    pc = time.perf_counter
    while not stop.is_set():
        t = pc()
        await asyncio.sleep(interval)
        samples.append(max(0.0, (pc() - t - interval) * 1000.0))


async def _closed_loop(sender: _Sender, num: int | None, duration: float | None,
                       concurrency: int, progress, keep_going=None, stop: _StallStop | None = None
                       ) -> list[RequestResult]:
    results: list[RequestResult] = []
    counter = iter(range(num)) if num is not None else None
    next_i = 0
    deadline = (time.perf_counter() + duration) if duration is not None else None

    def take() -> int | None:
        nonlocal next_i
        if stop is not None and stop.stopped:
            return None
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        if keep_going is not None and not keep_going(results):
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
            r = await sender.one(i)
            results.append(r)
            if progress is not None:
                progress(r)
            if stop is not None:
                stop.see(r)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


async def _open_loop(sender: _Sender, c: LoadConfig, stop: _StallStop) -> list[RequestResult]:
    results: list[RequestResult] = []
    sem = asyncio.Semaphore(c.concurrency)
    rng = random.Random(c.seed)
    loop = asyncio.get_running_loop()
    # The schedule runs on the loop's clock; send_time is epoch seconds: read both at once
    # to place each arrival on the epoch.
    start, start_epoch = loop.time(), time.time()
    end = start + c.duration if c.duration is not None else None
    tasks = []

    async def guarded(i: int, due_epoch: float) -> None:
        async with sem:
            if stop.stopped:  # waited for a slot while the load stopped: never sent
                return
            r = await sender.one(i)
        # The two clocks can disagree by microseconds; a send is never early.
        r.send_lag = max(0.0, r.send_time - due_epoch)
        results.append(r)
        if c.progress is not None:
            c.progress(r)
        stop.see(r)

    at = start
    i = 0
    while c.num_requests is None or i < c.num_requests:
        if i:
            at += rng.gammavariate(c.burstiness, 1.0 / (c.request_rate * c.burstiness))
        if end is not None and at >= end:
            break
        delay = at - loop.time()
        if delay > 0:
            await stop.wait(delay)
        if stop.stopped:
            break
        tasks.append(asyncio.create_task(guarded(i, start_epoch + (at - start))))
        i += 1
    await asyncio.gather(*tasks)
    return results
