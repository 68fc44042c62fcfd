"""Point metrics, computed from raw per-request records.  Pure Python, no Django.

Every number Sweeplab shows for a benchmark point is computed here, by
:func:`summarize`, from the records that :mod:`sweepcore.loadgen` produces (or from the
``RequestRecord`` rows the executor stored from them, which carry the same field
names).  Nothing is taken from a server's own summary, so every figure can be
recomputed later from what was stored.

Inputs per request (see :class:`sweepcore.loadgen.RequestResult`)
-------------------------------------------------------------
``send_time``      epoch seconds when the request was handed to the socket.
``chunk_offsets``  seconds since send at which each token-carrying chunk arrived
                   (``time.perf_counter`` differences, so immune to wall-clock steps).
``chunk_tokens``   tokens carried by each such chunk.  Taken from the server's
                   cumulative counts when it sends them (SGLang ``meta_info.
                   completion_tokens``; vLLM/SGLang ``usage`` with
                   ``continuous_usage_stats``) -> ``token_count_source =
                   "server_cumulative"``; otherwise one per content chunk, scaled to
                   the final ``usage.completion_tokens`` -> ``"usage"``; otherwise one
                   per content chunk -> ``"chunks"``.
``output_tokens``  the request's output token count (the same sources, in that order).
``prompt_tokens``  the prompt length as the server counted it (``usage.prompt_tokens``
                   or ``meta_info.prompt_tokens``), or None.
``error_kind``     '' for a success, else the failure class (see sweepcore.loadgen).
``send_lag``       open loop only: seconds from the request's scheduled arrival to its
                   ``send_time`` (waiting for the concurrency cap and a late event loop
                   both count); None, or no such key in a stored dict, in a closed loop.

Success
-------
A request is **completed** when ``error_kind == ''`` *and* ``output_tokens > 0``.
Everything else is **failed**: it is counted, kept with its error text, listed in
``errors`` and excluded from every latency statistic.  An error sent inside an HTTP 200
stream is a failure; a 200 response with zero output tokens is a failure
(``empty_response``), never a success.

Per request (seconds; reported in ms)
-------------------------------------
* ``ttft = chunk_offsets[0]`` -- first token minus send.
* ``e2el = chunk_offsets[-1]`` -- *last token* minus send.
* ``tpot = (e2el - ttft) / (output_tokens - 1)`` -- only for output_tokens >= 2.
* ``itl``: the gaps between consecutive tokens.  A chunk ``j > 0`` that carries
  ``k`` tokens and arrived ``g`` seconds after chunk ``j-1`` contributes ``k`` gaps of
  ``g / k``; the ``k0 - 1`` extra tokens of the *first* chunk arrived together with the
  first token and contribute gaps of 0.  So each request contributes exactly
  ``output_tokens - 1`` gaps whose sum is ``e2el - ttft``: the mean ITL of one request
  equals its TPOT, and the point's mean ITL is the token-weighted TPOT.
* decode speed ``(output_tokens - 1) / (e2el - ttft)`` tok/s -- only where
  output_tokens >= 2 and e2el > ttft (all tokens in one chunk has no decode interval).

Open loop: latencies from the schedule
--------------------------------------
Under an open loop a request that waits (for the concurrency cap, or for a late event
loop) before it is sent would hide that wait from a TTFT measured from the send: the
slower the server, the later the sends, the better its TTFT looks (coordinated
omission; vLLM issue 54101).  So where a record carries ``send_lag`` its TTFT and E2EL
*statistics* are measured from its scheduled arrival: ``ttft + send_lag`` and ``e2el +
send_lag`` (:func:`request_ttft_scheduled`, :func:`request_e2el_scheduled`).  TPOT, ITL
and decode speed are differences between token arrivals and do not change.
:func:`request_ttft` and :func:`request_e2el` keep meaning "from the send"; the point
keeps those statistics too, in ``send_based``.

Steady state: the ramp left out
--------------------------------
A closed loop's clients all send their first request at once and its last requests
finish while the batch drains, so a short point reads a server that is filling and
emptying, not the one its load keeps busy (speculative decoding's TPOT read ~6 % low on a
15-second point of the simulator).  With the spec's ``steady_state: {skip_first: 0.2,
skip_last: 0.1}`` (:func:`mark_ramp`) those shares of the point's requests, by send order,
are sent under the same load but carry ``in_ramp``: kept as records, left out of the
statistics.  Counts, latencies, intervals, ``decode_tok_s`` and the open-loop figures are
then over the measured requests; ``duration`` is their **window**, from the first measured
send to the last measured request's last token, and the throughputs count what arrived
inside it from *every* request (tokens of ramp requests still streaming at its start or
already streaming before its end are part of the load the server carried then): output
tokens arriving in the window, requests completed in it (and their prompt tokens for the
total), each divided by its length.  ``errors`` covers every request, ramp included: a
failure is a failure wherever it happened.  ``ramp`` is ``{"first": n, "last": n}``, the
requests left out at each end (None without a ramp).

Per point
---------
* ``completed``, ``failed`` -- counts as defined above; ``completed + failed`` is every
  measured request (warmup requests and ramp requests are not measured).
* ``duration`` -- the wall time of the measurement, seconds (given by the caller:
  first send to last completion, see sweepcore.loadgen).
* ``total_input_tokens`` -- sum of the server-counted prompt tokens of completed
  requests (a caller-supplied fallback count is used for a request where the server
  reported none; None if still unknown for any completed request).
* ``total_output_tokens`` -- sum of output_tokens of completed requests.
* ``request_throughput = completed / duration``; ``output_throughput =
  total_output_tokens / duration``; ``total_token_throughput = (total_input_tokens +
  total_output_tokens) / duration``.  These are rates over a measured interval, so a
  point where everything failed has a throughput of 0.0, not None.
* ``{mean,median,std,p90,p99}_{ttft,tpot,itl,e2el}_ms`` over completed requests (ITL
  over all their gaps pooled; TTFT and E2EL from the schedule under an open loop).
  ``std`` is the population standard deviation; percentiles interpolate linearly
  between closest ranks (numpy's default, which ``vllm bench serve`` uses): ``p`` ->
  rank ``p/100 * (n-1)``.  With one sample every percentile is that sample.
* ``decode_tok_s`` -- median over completed requests of the per-request decode speed
  (the median, so that one stalled request does not move it, and so that its interval
  is the same kind as the latencies').
* ``intervals`` -- ``{metric: [lo, hi]}``, the 95 % interval of ``decode_tok_s`` and of
  the latency medians (:data:`INTERVAL_METRICS`; see :mod:`sweepcore.stats`), TTFT's and
  E2EL's from the schedule under an open loop; a metric with too few samples for one is
  left out.
* ``max_output_tokens_per_s`` -- the most output tokens (of completed requests) that
  arrived within one whole-second bucket, buckets counted from the earliest send.
* ``accept_length = sum(output_tokens) / sum(spec_verify_ct)`` over the completed
  requests that report ``spec_verify_ct`` (SGLang ``meta_info`` under speculative
  decoding); None when no request reports it.
* ``errors`` -- ``{kind: {"count": n, "example": "<one message>"}}`` over failed
  requests.
* ``send_based`` -- open loop: ``{mean,median,std,p90,p99}_{ttft,e2el}_ms`` over completed
  requests measured from the actual send, the figures a closed-loop tool would show;
  None in a closed loop.
* ``send_lag_{median,p99,max}_ms`` -- open loop: the send lag over every measured request
  (failed ones too: the lag is the client's lateness, whatever the answer); None in a
  closed loop.
* ``client_bound``, ``event_loop_lag_p99_ms`` -- the client's self-measurement, passed
  through (see sweepcore.loadgen): a point measured while the client was saturated is
  flagged.
* A statistic with no samples is None, never 0.

How this differs from other tools
---------------------------------
vLLM (``vllm/benchmarks/serve.py`` ``calculate_metrics``, ``endpoint_request_func.py``):
  same names and the same TTFT/TPOT formulas, percentiles and std.  Differences: vLLM's
  ITL is one sample per *chunk* (a chunk with k tokens is one long gap, so ITL is
  inflated k-fold under speculative decoding or stream intervals); its ``e2el`` runs to
  the end of the stream (after ``[DONE]``), ours to the last token; it counts input
  tokens with the client's tokenizer, we use the server's count; it reports 0 for
  empty statistics, we report None; its ``max_output_tokens_per_s`` counts one token per
  chunk, ours counts the tokens each chunk carries.
SGLang (``python/sglang/bench_serving.py``): for its native ``/generate`` it spreads a
  chunk's gap over the chunk's new tokens exactly as we do, but drops the extra tokens
  of the first chunk (we count them as 0 gaps, so that mean ITL = TPOT); for OpenAI
  endpoints its ITL is per chunk like vLLM's.  It names total throughput
  ``total_throughput``; its ``accept_length`` is the server-wide
  ``avg_spec_accept_length`` from ``/get_server_info``, ours is computed from this
  point's own requests.  Its client treats an in-stream ``{"error": ...}`` as a
  success with empty text; we count it as a failure.
guidellm (``guidellm/benchmark/schemas`` ``request_stats``): its
  ``time_per_output_token_ms = (last_token - request_start) / output_tokens`` *includes*
  the first token (TTFT); its ``inter_token_latency_ms = (last_token - first_token) /
  (output_tokens - 1)`` is what vLLM and we call TPOT.
AIPerf (``aiperf/metrics/types/inter_token_latency_metric.py``): its "Inter Token
  Latency" is ``(request_latency - ttft) / (osl - 1)`` per request -- vLLM's TPOT, not
  a per-gap distribution; its request latency runs to the end of the response.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from sweepcore import stats

STATS = ("mean", "median", "std", "p90", "p99")
LATENCIES = ("ttft", "tpot", "itl", "e2el")

#: The latency columns of a point: {mean,median,std,p90,p99}_{ttft,tpot,itl,e2el}_ms.
LATENCY_FIELDS: tuple[str, ...] = tuple(f"{s}_{m}_ms" for m in LATENCIES for s in STATS)

#: How late an open loop's sends were against its schedule.
SEND_LAG_FIELDS: tuple[str, ...] = ("send_lag_median_ms", "send_lag_p99_ms", "send_lag_max_ms")

#: A point's open-loop figures, None in a closed loop: its TTFT and E2EL statistics from
#: the actual send (a mapping of ``{mean,median,std,p90,p99}_{ttft,e2el}_ms``) and its
#: send lag.
OPEN_LOOP_FIELDS: tuple[str, ...] = ("send_based", *SEND_LAG_FIELDS)

#: Every key :func:`summarize` returns, in display order.
SUMMARY_FIELDS: tuple[str, ...] = (
    "completed",
    "failed",
    "duration",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    *LATENCY_FIELDS,
    *OPEN_LOOP_FIELDS,
    "decode_tok_s",
    "max_output_tokens_per_s",
    "accept_length",
    "errors",
    "intervals",
    "client_bound",
    "event_loop_lag_p99_ms",
    "ramp",
)

#: The metrics stored with a 95 % interval; shown as ``<metric>_ci`` by the API.
INTERVAL_METRICS: tuple[str, ...] = ("decode_tok_s", *(f"median_{m}_ms" for m in LATENCIES))


def interval_of(intervals: Any, metric: str) -> list[float] | None:
    """``[lo, hi]`` of ``metric`` from a point's stored ``intervals``, or None (also for
    anything malformed)."""
    value = intervals.get(metric) if isinstance(intervals, Mapping) else None
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return [float(value[0]), float(value[1])]
    return None


def ci_fields(intervals: Any) -> dict[str, list | None]:
    """``{"<metric>_ci": [lo, hi] or None}`` for every interval metric: how the API,
    exports, the points table and the CLI show a point's stored ``intervals``."""
    return {f"{m}_ci": interval_of(intervals, m) for m in INTERVAL_METRICS}

#: The point metric columns, one list for the model, the executor's write, the exports,
#: the API and the charts: what :func:`summarize` computes (less ``errors``, the ``ramp`` counts and an open
#: loop's ``send_based`` latencies, mappings kept beside them) and what the server itself
#: reported, each beside our own figure: its decode speed (llama.cpp's timings) and its
#: median TTFT and ITL, from the delta of its /metrics histograms over the point
#: (sweepcore.servermetrics).
FIELDS: tuple[str, ...] = tuple(
    f for f in SUMMARY_FIELDS if f not in ("errors", "intervals", "send_based", "ramp")
) + (
    "server_decode_tok_s",
    "server_median_ttft_ms",
    "server_median_itl_ms",
)

#: What is kept of each request (a RequestRecord): every metric can be recomputed from it.
REQUEST_FIELDS: tuple[str, ...] = (
    "index",
    "send_time",
    "chunk_offsets",
    "chunk_tokens",
    "prompt_tokens",
    "output_tokens",
    "token_count_source",
    "finish_reason",
    "http_status",
    "error_kind",
    "error",
    "spec_verify_ct",
    "send_lag",
    "in_ramp",
)

#: How each point metric is named on screen, with its unit: the one definition behind the
#: axis labels of the comparison charts, the compare page and history.
LATENCY_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
METRIC_NAMES: dict[str, tuple[str, str]] = {
    "duration": ("duration", "s"),
    "request_throughput": ("request throughput", "req/s"),
    "output_throughput": ("output throughput", "tok/s"),
    "total_token_throughput": ("total token throughput", "tok/s"),
    **{f"{s}_{m}_ms": (f"{s} {LATENCY_NAMES[m]}", "ms") for m in LATENCIES for s in STATS},
    "decode_tok_s": ("decode speed", "tok/s"),
    "server_decode_tok_s": ("decode speed as the server reported it", "tok/s"),
    "server_median_ttft_ms": ("median TTFT as the server reported it", "ms"),
    "server_median_itl_ms": ("median ITL as the server reported it", "ms"),
    "max_output_tokens_per_s": ("peak output throughput", "tok/s"),
    "accept_length": ("mean accept length", "tokens"),
    "event_loop_lag_p99_ms": ("p99 event-loop lag", "ms"),
    "send_lag_median_ms": ("median send lag behind the schedule", "ms"),
    "send_lag_p99_ms": ("p99 send lag behind the schedule", "ms"),
    "send_lag_max_ms": ("largest send lag behind the schedule", "ms"),
}


#: The metrics where less is better (latencies, durations); more is better for the rest.
LOWER_IS_BETTER = frozenset(m for m, (_, unit) in METRIC_NAMES.items() if unit in ("ms", "s"))


def higher_is_better(metric: str) -> bool:
    """The direction of a point metric, for regressions and comparisons. KeyError for an
    unknown metric."""
    METRIC_NAMES[metric]
    return metric not in LOWER_IS_BETTER


def metric_unit(metric: str) -> str:
    """The unit of a point metric ("tok/s", "ms", ...). KeyError for an unknown metric."""
    return METRIC_NAMES[metric][1]


def metric_label(metric: str) -> str:
    """A point metric's name with its unit, e.g. "decode speed (tok/s)", "mean TTFT (ms)".
    KeyError for an unknown metric."""
    name, unit = METRIC_NAMES[metric]
    return f"{name} ({unit})"


def _get(rec: Any, name: str, default: Any = None) -> Any:
    if isinstance(rec, Mapping):
        return rec.get(name, default)
    return getattr(rec, name, default)


def percentile(values: Sequence[float], p: float) -> float | None:
    """Linear-interpolation percentile (numpy's default method); None for no values.

    ``+inf`` values are allowed (sweepcore.slo counts a failed request as an infinite
    latency): a percentile whose rank falls on a finite value is that value, one that
    interpolates towards ``+inf`` with any weight is ``+inf``."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return float(xs[0])
    rank = (p / 100.0) * (len(xs) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    weight = rank - lo
    if weight == 0 or xs[hi] == xs[lo]:  # no interpolation: also keeps 0 * inf from making nan
        return float(xs[lo])
    return float(xs[lo] + weight * (xs[hi] - xs[lo]))


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def pstdev(values: Sequence[float]) -> float | None:
    """Population standard deviation (numpy's ``np.std`` default); None for no values."""
    if not values:
        return None
    m = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / len(values))


def is_success(rec: Any) -> bool:
    """Completed = no error and at least one output token."""
    return not _get(rec, "error_kind") and (_get(rec, "output_tokens") or 0) > 0


def request_ttft(rec: Any) -> float | None:
    """Seconds from the send to the first token; None without tokens."""
    offs = _get(rec, "chunk_offsets") or []
    return float(offs[0]) if offs else None


def request_e2el(rec: Any) -> float | None:
    """Seconds from the send to the last token; None without tokens."""
    offs = _get(rec, "chunk_offsets") or []
    return float(offs[-1]) if offs else None


def request_send_lag(rec: Any) -> float | None:
    """Seconds from the request's scheduled arrival to its send (open loop); None in a
    closed loop, where there is no schedule."""
    lag = _get(rec, "send_lag")
    return None if lag is None else float(lag)


def request_ttft_scheduled(rec: Any) -> float | None:
    """The TTFT a point's statistics use: from the scheduled arrival under an open loop
    (``ttft + send_lag``), from the send in a closed loop; None without tokens."""
    ttft = request_ttft(rec)
    return None if ttft is None else ttft + (request_send_lag(rec) or 0.0)


def request_e2el_scheduled(rec: Any) -> float | None:
    """The E2EL a point's statistics use: from the scheduled arrival under an open loop
    (``e2el + send_lag``), from the send in a closed loop; None without tokens."""
    e2el = request_e2el(rec)
    return None if e2el is None else e2el + (request_send_lag(rec) or 0.0)


def request_tpot(rec: Any) -> float | None:
    out = _get(rec, "output_tokens") or 0
    offs = _get(rec, "chunk_offsets") or []
    if out < 2 or not offs:
        return None
    return (offs[-1] - offs[0]) / (out - 1)


def request_decode_tok_s(rec: Any) -> float | None:
    out = _get(rec, "output_tokens") or 0
    offs = _get(rec, "chunk_offsets") or []
    if out < 2 or not offs or offs[-1] <= offs[0]:
        return None
    return (out - 1) / (offs[-1] - offs[0])


def request_itls(rec: Any) -> list[float]:
    """The request's inter-token gaps in seconds (see the module docstring)."""
    offs = _get(rec, "chunk_offsets") or []
    toks = _get(rec, "chunk_tokens") or []
    if not offs:
        return []
    if len(toks) != len(offs):  # no per-chunk counts stored: one token per chunk
        toks = [1] * len(offs)
    gaps: list[float] = []
    if toks[0] > 1:
        gaps.extend([0.0] * (toks[0] - 1))
    prev = offs[0]
    for off, k in zip(offs[1:], toks[1:]):
        if k > 0:
            g = (off - prev) / k
            gaps.extend([g] * k)
            prev = off
    return gaps


def _stats(prefix: str, values_s: Sequence[float]) -> dict[str, float | None]:
    ms = [v * 1000.0 for v in values_s]
    return {
        f"mean_{prefix}_ms": mean(ms),
        f"median_{prefix}_ms": percentile(ms, 50),
        f"std_{prefix}_ms": pstdev(ms),
        f"p90_{prefix}_ms": percentile(ms, 90),
        f"p99_{prefix}_ms": percentile(ms, 99),
    }


def max_output_tokens_per_s(records: Iterable[Any]) -> float | None:
    """Most tokens arriving in one 1-second bucket counted from the earliest send."""
    recs = list(records)
    if not recs:
        return None
    t0 = min(_get(r, "send_time") for r in recs)
    buckets: dict[int, int] = {}
    for r in recs:
        base = _get(r, "send_time") - t0
        offs = _get(r, "chunk_offsets") or []
        toks = _get(r, "chunk_tokens") or []
        if len(toks) != len(offs):
            toks = [1] * len(offs)
        for off, k in zip(offs, toks):
            b = int(base + off)
            buckets[b] = buckets.get(b, 0) + k
    return float(max(buckets.values())) if buckets else None


def error_summary(records: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """``{kind: {"count": n, "example": message}}`` over failed records."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if is_success(r):
            continue
        kind = _get(r, "error_kind") or "empty_response"
        entry = out.setdefault(kind, {"count": 0, "example": ""})
        entry["count"] += 1
        if not entry["example"]:
            entry["example"] = _get(r, "error") or (
                "HTTP 200 with zero output tokens" if kind == "empty_response" else kind
            )
    return out


def open_loop_figures(records: Sequence[Any]) -> dict[str, Any]:
    """:data:`OPEN_LOOP_FIELDS` of a point's records: every one None when no record
    carries a send lag (a closed loop)."""
    lags_ms = [lag * 1000.0 for r in records if (lag := request_send_lag(r)) is not None]
    if not lags_ms:
        return dict.fromkeys(OPEN_LOOP_FIELDS)
    ok = [r for r in records if is_success(r)]
    send_based = {
        **_stats("ttft", [v for v in (request_ttft(r) for r in ok) if v is not None]),
        **_stats("e2el", [v for v in (request_e2el(r) for r in ok) if v is not None]),
    }
    return {
        "send_based": send_based,
        "send_lag_median_ms": percentile(lags_ms, 50),
        "send_lag_p99_ms": percentile(lags_ms, 99),
        "send_lag_max_ms": max(lags_ms),
    }


def in_ramp(rec: Any) -> bool:
    """Whether a request was sent while the load ramped up or down (left out of the statistics)."""
    return bool(_get(rec, "in_ramp", False))


def mark_ramp(records: Sequence[Any], skip_first: float, skip_last: float) -> tuple[int, int]:
    """Set ``in_ramp`` on the first ``skip_first`` and last ``skip_last`` shares of a load's
    requests by send order (rounded down; at least one request stays measured); the
    others are cleared.  Returns how many were marked at each end.  One load at a time:
    each load ramps up and down on its own."""
    ordered = sorted(records, key=lambda r: (_get(r, "send_time"), _get(r, "index")))
    n = len(ordered)
    first, last = int(n * skip_first), int(n * skip_last)
    if first + last >= n:
        first, last = 0, 0
    for i, r in enumerate(ordered):
        r.in_ramp = i < first or i >= n - last
    return first, last


def _request_end(rec: Any) -> float:
    """Epoch seconds of a request's last token (its send time when none arrived)."""
    offsets = _get(rec, "chunk_offsets") or []
    return _get(rec, "send_time") + (offsets[-1] if offsets else 0.0)


def steady_window(records: Sequence[Any]) -> tuple[float, float] | None:
    """(start, end) epoch seconds of the measured requests' window -- the first measured
    send to the last measured request's last token -- when some requests are in the ramp;
    None when none is (the caller's duration stands)."""
    measured = [r for r in records if not in_ramp(r)]
    if len(measured) == len(records) or not measured:
        return None
    return min(_get(r, "send_time") for r in measured), max(_request_end(r) for r in measured)


@dataclass(frozen=True)
class ConcurrencyWindow:
    """The span of a load in which the requests in flight held near their peak (SGLang's
    steady-state window, ``find_steady_state_window``): the longest interval with at least
    ``threshold`` = ceil(ratio x ``peak``) in flight, and the time-averaged number of
    requests in flight over it -- what a point's label claims (x64) checked against what
    ran."""

    start: float  # epoch seconds
    end: float
    threshold: int
    peak: int
    average_in_flight: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def _spans(records: Sequence[Any]) -> list[tuple[float, float]]:
    """(send, last token) of each request that received a token: the time it held a slot of
    the load. One that received none has no end we know, and is left out."""
    spans = []
    for rec in records:
        if _get(rec, "chunk_offsets"):
            start = _get(rec, "send_time")
            spans.append((start, _request_end(rec)))
    return [(a, b) for a, b in spans if b > a]


def average_in_flight(records: Sequence[Any], start: float, end: float) -> float | None:
    """Requests in flight between ``start`` and ``end``, averaged over time: the seconds
    each request spent in flight inside the interval, summed, over its length."""
    if end <= start:
        return None
    held = sum(max(0.0, min(b, end) - max(a, start)) for a, b in _spans(records))
    return held / (end - start)


def concurrency_window(records: Sequence[Any], ratio: float = 0.9) -> ConcurrencyWindow | None:
    """The longest span with at least ceil(``ratio`` x peak) requests in flight (the first of
    equally long ones), with the average in flight over it; None without a request that
    received a token. The ramp-up as the first requests are sent, and the drain as the last
    ones finish, fall outside it whatever the number of requests."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio: expected a share in (0, 1], got {ratio!r}")
    spans = _spans(records)
    if not spans:
        return None
    changes: dict[float, int] = {}
    for a, b in spans:
        changes[a] = changes.get(a, 0) + 1
        changes[b] = changes.get(b, 0) - 1
    times = sorted(changes)
    steps, level = [], 0  # (from, to, requests in flight)
    for here, following in zip(times, times[1:]):
        level += changes[here]
        steps.append((here, following, level))
    peak = max(n for _, _, n in steps)
    threshold = max(1, math.ceil(peak * ratio - 1e-9))
    best: tuple[float, float] | None = None
    first = None
    for a, b, n in steps + [(times[-1], times[-1], 0)]:
        if n >= threshold:
            first = a if first is None else first
            last = b
        elif first is not None:
            if best is None or last - first > best[1] - best[0]:
                best = (first, last)
            first = None
    start, end = best
    return ConcurrencyWindow(start, end, threshold, peak, average_in_flight(records, start, end))


def measured_seconds(records: Sequence[Any]) -> float | None:
    """The seconds a point's measured requests stand for, for a rate over them (goodput:
    those that met the SLO per second).  None without a ramp: the load's own duration.
    With one, the steady window scaled to them: its length x the measured requests / the
    requests (of any outcome) that finished inside it, so that a rate over the measured
    requests is the window's rate, as the throughputs are."""
    window = steady_window(records)
    if window is None:
        return None
    start, end = window
    finished = sum(1 for r in records if start <= _request_end(r) <= end)
    measured = sum(1 for r in records if not in_ramp(r))
    return (end - start) * measured / finished if finished and end > start else None


def _window_counts(records: Sequence[Any], start: float, end: float, prompt_fallback: int | None):
    """(output tokens arriving in [start, end], requests completed in it, their prompt
    tokens or None) over every successful record."""
    tokens, done, prompt = 0, 0, 0
    for r in records:
        if not is_success(r):
            continue
        send = _get(r, "send_time")
        offsets = _get(r, "chunk_offsets") or []
        counts = _get(r, "chunk_tokens") or []
        if len(counts) != len(offsets):
            counts = [1] * len(offsets)
        tokens += sum(k for off, k in zip(offsets, counts) if start <= send + off <= end)
        if start <= _request_end(r) <= end:
            done += 1
            pt = _get(r, "prompt_tokens")
            pt = prompt_fallback if pt is None else pt
            prompt = None if prompt is None or pt is None else prompt + int(pt)
    return tokens, done, prompt


def summarize(
    results: Iterable[Any],
    duration: float | None,
    *,
    client_bound: bool | None = None,
    event_loop_lag_p99_ms: float | None = None,
    prompt_tokens_fallback: int | None = None,
) -> dict[str, Any]:
    """Compute a point's metrics from its request records.

    ``results``: RequestResult objects, dicts, or model rows with the same field names.
    ``duration``: wall seconds of the measurement (the steady window replaces it when
    some records are in the ramp).  ``prompt_tokens_fallback``: the
    prompt length to use for a completed request whose server reported none (e.g. the
    exact count sweepcore.prompts measured).  Returns a dict with exactly :data:`SUMMARY_FIELDS`.
    """
    every = list(results)
    recs = [r for r in every if not in_ramp(r)]
    ok = [r for r in recs if is_success(r)]
    completed, failed = len(ok), len(recs) - len(ok)

    total_out = sum(int(_get(r, "output_tokens") or 0) for r in ok)
    total_in: int | None = 0
    for r in ok:
        pt = _get(r, "prompt_tokens")
        if pt is None:
            pt = prompt_tokens_fallback
        if pt is None:
            total_in = None
            break
        total_in += int(pt)

    window = steady_window(every)
    if window is not None:  # the steady window's rates: what arrived inside it, from every request
        duration = window[1] - window[0]
    rate_ok = duration is not None and duration > 0

    def rate(x: float | None) -> float | None:
        return (x / duration) if (rate_ok and x is not None) else None

    ttfts = [v for v in (request_ttft_scheduled(r) for r in ok) if v is not None]
    e2els = [v for v in (request_e2el_scheduled(r) for r in ok) if v is not None]
    tpots = [v for v in (request_tpot(r) for r in ok) if v is not None]
    itls: list[float] = []
    for r in ok:
        itls.extend(request_itls(r))
    decode = [v for v in (request_decode_tok_s(r) for r in ok) if v is not None]

    spec_out = spec_ct = 0
    for r in ok:
        ct = _get(r, "spec_verify_ct")
        if ct:
            spec_ct += int(ct)
            spec_out += int(_get(r, "output_tokens") or 0)

    if window is None:
        rates = (rate(completed), rate(total_out), rate(None if total_in is None else total_in + total_out))
    else:
        tokens, done, prompt = _window_counts(every, *window, prompt_tokens_fallback)
        rates = (rate(done), rate(tokens), rate(None if prompt is None else prompt + tokens))

    summary: dict[str, Any] = {
        "completed": completed,
        "failed": failed,
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": rates[0],
        "output_throughput": rates[1],
        "total_token_throughput": rates[2],
    }
    for name, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        summary.update(_stats(name, vals))
    summary["decode_tok_s"] = percentile(decode, 50)
    intervals = {
        "decode_tok_s": stats.median_ci(decode),
        "median_ttft_ms": stats.median_ci([v * 1000 for v in ttfts]),
        "median_tpot_ms": stats.median_ci([v * 1000 for v in tpots]),
        "median_e2el_ms": stats.median_ci([v * 1000 for v in e2els]),
        "median_itl_ms": stats.pooled_median_ci([[g * 1000 for g in request_itls(r)] for r in ok]),
    }
    summary["intervals"] = {k: [lo, hi] for k, v in intervals.items() if v is not None for lo, hi in [v]}
    summary.update(open_loop_figures(recs))
    summary["max_output_tokens_per_s"] = max_output_tokens_per_s(ok)
    summary["accept_length"] = (spec_out / spec_ct) if spec_ct else None
    summary["errors"] = error_summary(every)
    summary["client_bound"] = client_bound
    summary["event_loop_lag_p99_ms"] = event_loop_lag_p99_ms
    summary["ramp"] = None
    if window is not None:
        ordered = sorted(every, key=lambda r: (_get(r, "send_time"), _get(r, "index")))
        first = next(i for i, r in enumerate(ordered) if not in_ramp(r))
        summary["ramp"] = {"first": first, "last": len(every) - len(recs) - first}
    return {k: summary[k] for k in SUMMARY_FIELDS}


# --- samples for comparisons ------------------------------------------------------------


def request_samples(metric: str, records: Iterable[Any]) -> list[float] | None:
    """One value per completed request for comparing ``metric`` between points (what a
    significance test needs), or None for a metric that has no per-request value
    (throughputs, durations: one value per measurement); ramp requests are not samples.
    Latencies in ms; TTFT and E2EL
    from the schedule under an open loop, as the point's statistics.  Every ITL
    statistic is compared on each request's mean gap (its TPOT): a request's gaps are
    not independent samples."""
    ok = [r for r in records if is_success(r) and not in_ramp(r)]
    if metric == "decode_tok_s":
        values = [request_decode_tok_s(r) for r in ok]
    elif metric.endswith("_ms") and metric.split("_")[1] in LATENCIES:
        kind = metric.split("_")[1]
        per = {"ttft": request_ttft_scheduled, "tpot": request_tpot, "itl": request_tpot,
               "e2el": request_e2el_scheduled}[kind]
        values = [None if (v := per(r)) is None else v * 1000 for r in ok]
    elif metric == "accept_length":
        values = [(_get(r, "output_tokens") or 0) / ct for r in ok if (ct := _get(r, "spec_verify_ct"))]
    else:
        return None
    return [v for v in values if v is not None]


# --- simulated time ---------------------------------------------------------------------

#: Point metrics that are times (converted by dividing by the time scale) and rates
#: (multiplied by it); counts and ratios do not change.  The send lag is converted too:
#: on a simulator the wall-time schedule and the wall-time server make one time-dilated
#: copy of the model's world, where the lag is mostly the wait for the concurrency cap,
#: i.e. for the simulated requests ahead to finish; and the TTFT from the schedule
#: (TTFT from the send + lag) must stay that sum once converted.  The event loop's own
#: lateness, the part that does not dilate, is judged in wall time
#: (``event_loop_lag_p99_ms``, ``client_bound``).
TIME_FIELDS = frozenset(["duration", *LATENCY_FIELDS, "server_median_ttft_ms", "server_median_itl_ms",
                         *SEND_LAG_FIELDS])
RATE_FIELDS = frozenset(["request_throughput", "output_throughput", "total_token_throughput",
                         "decode_tok_s", "max_output_tokens_per_s", "server_decode_tok_s"])


def simulated_time_scale(server_info: Mapping[str, Any] | None) -> float | None:
    """The time scale a simulator reported (simengine's ``/get_server_info`` has
    ``simengine.time_scale``), or None for a real server or one running at real time."""
    sim = (server_info or {}).get("simengine") or {}
    try:
        scale = float(sim.get("time_scale"))
    except (TypeError, ValueError):
        return None
    return scale if scale > 0 and scale != 1 else None


def samples_to_model_time(metric: str, values: list[float] | None, time_scale: float | None) -> list[float] | None:
    """Per-request values of ``metric`` (:func:`request_samples`, from wall-time records)
    in the model's time, as :func:`to_model_time` converts a point's summary; unchanged
    for a real point (``time_scale`` None)."""
    if values is None or not time_scale:
        return values
    if metric in RATE_FIELDS:
        return [v * time_scale for v in values]
    if metric in TIME_FIELDS:
        return [v / time_scale for v in values]
    return values


def to_model_time(summary: Mapping[str, Any], time_scale: float) -> dict[str, Any]:
    """A summary measured on a simulator running at ``time_scale`` x real time (0.02: a
    model second lasts 20 ms of wall time), in the model's time: times divided by the
    scale, rates multiplied by it, their intervals and the ``send_based`` latencies
    likewise.  The client's own figures (event-loop lag) stay wall time."""
    if not time_scale or time_scale <= 0:
        raise ValueError(f"time scale must be > 0, not {time_scale!r}")
    out = dict(summary)
    for key, value in summary.items():
        if value is None:
            continue
        if key in TIME_FIELDS:
            out[key] = value / time_scale
        elif key in RATE_FIELDS:
            out[key] = value * time_scale
        elif key == "send_based":  # {mean,...}_{ttft,e2el}_ms: latencies
            out[key] = {k: None if v is None else v / time_scale for k, v in value.items()}
    intervals = {}
    for key, (lo, hi) in (summary.get("intervals") or {}).items():
        factor = 1 / time_scale if key in TIME_FIELDS else time_scale if key in RATE_FIELDS else 1
        intervals[key] = [lo * factor, hi * factor]
    if "intervals" in summary:
        out["intervals"] = intervals
    return out


# --- adaptive stop ------------------------------------------------------------------------

#: The metrics ``until_stable`` can watch: those with a per-request interval that is cheap
#: to recompute after every completion (ITL's needs a bootstrap).
STABLE_METRICS: tuple[str, ...] = ("decode_tok_s", "median_ttft_ms", "median_tpot_ms", "median_e2el_ms")


def stability(metric: str, records: Iterable[Any]) -> tuple[float | None, int]:
    """(relative half-width of ``metric``'s 95 % interval, completed requests so far);
    the half-width is None while there are too few values for an interval."""
    if metric not in STABLE_METRICS:
        raise ValueError(f"until_stable cannot watch {metric!r}; choose one of {', '.join(STABLE_METRICS)}")
    sample_metric = "decode_tok_s" if metric == "decode_tok_s" else metric
    values = request_samples(sample_metric, records) or []
    centre = percentile(values, 50)
    return stats.relative_half_width(stats.median_ci(values), centre), len(values)
