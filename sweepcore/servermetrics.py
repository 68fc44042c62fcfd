"""The server's own view of one point: its Prometheus ``/metrics``, read before and after.

Counters and histograms only ever grow, so the difference of two reads is what the server
did during the point: tokens, preemptions, prefix-cache queries and hits, finished requests,
speculative drafts, and the TTFT and ITL histograms, whose deltas give the server's own
medians.  Gauges (requests running and waiting, KV-cache usage) are sampled while the point
runs (:class:`GaugeSampler`) and their maxima kept.  :func:`point_view` builds the dict a
Point stores as ``server_metrics``; docs/metrics.md describes it.

Names differ per engine and move between versions, so each engine has a :class:`MetricNames`
that lists, per concept, the names to try (the first one present wins).  Servers running
several engine cores (vLLM with data parallelism) label each core's series (``engine="0"``):
a concept is summed over every label set, except the label that is the point of it (finish
reason, draft position).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

#: Seconds a scrape may take: /metrics is read between points and while one runs.
SCRAPE_TIMEOUT_S = 5


@dataclass(frozen=True)
class MetricNames:
    """One engine's Prometheus names for each concept of the view.

    Counters are named as their samples are exposed, with the ``_total`` suffix (what
    ``prometheus_client`` writes, and what its parser keeps in the sample name while it
    drops it from the family name).  Histograms are named by their family: their samples
    are ``<name>_bucket``/``_count``/``_sum``.  An empty tuple: the engine has no such
    series, and the view leaves the concept out.
    """

    source: str
    prompt_tokens: tuple[str, ...] = ()
    generation_tokens: tuple[str, ...] = ()
    preemptions: tuple[str, ...] = ()
    prefix_cache_queries: tuple[str, ...] = ()
    prefix_cache_hits: tuple[str, ...] = ()
    #: finished requests; by finish reason where the engine labels them so
    request_success: tuple[str, ...] = ()
    finish_reason_label: str | None = None
    spec_drafts: tuple[str, ...] = ()
    spec_draft_tokens: tuple[str, ...] = ()
    spec_accepted_tokens: tuple[str, ...] = ()
    spec_accepted_per_pos: tuple[str, ...] = ()
    position_label: str = "position"
    requests_running: tuple[str, ...] = ()
    requests_waiting: tuple[str, ...] = ()
    kv_cache_usage: tuple[str, ...] = ()
    ttft: tuple[str, ...] = ()
    itl: tuple[str, ...] = ()


# vllm/v1/metrics/loggers.py and vllm/v1/spec_decode/metrics.py. The second names are the
# older spellings of the same series (renamed in V1 releases).
VLLM_METRICS = MetricNames(
    source="vllm",
    prompt_tokens=("vllm:prompt_tokens_total",),
    generation_tokens=("vllm:generation_tokens_total",),
    preemptions=("vllm:num_preemptions_total",),
    prefix_cache_queries=("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    prefix_cache_hits=("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    request_success=("vllm:request_success_total",),
    finish_reason_label="finished_reason",
    spec_drafts=("vllm:spec_decode_num_drafts_total",),
    spec_draft_tokens=("vllm:spec_decode_num_draft_tokens_total",),
    spec_accepted_tokens=("vllm:spec_decode_num_accepted_tokens_total",),
    spec_accepted_per_pos=("vllm:spec_decode_num_accepted_tokens_per_pos_total",),
    requests_running=("vllm:num_requests_running",),
    requests_waiting=("vllm:num_requests_waiting",),
    kv_cache_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    ttft=("vllm:time_to_first_token_seconds",),
    itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
)

# python/sglang/srt/metrics/collector.py (served with --enable-metrics). SGLang retracts a
# request where vLLM preempts one; it counts prefix-cache hits (cached prompt tokens) but no
# queries, finished requests without a reason, and speculation only in gauges.
SGLANG_METRICS = MetricNames(
    source="sglang",
    prompt_tokens=("sglang:prompt_tokens_total",),
    generation_tokens=("sglang:generation_tokens_total",),
    preemptions=("sglang:num_retracted_requests_total",),
    prefix_cache_hits=("sglang:cached_tokens_total",),
    request_success=("sglang:num_requests_total",),
    requests_running=("sglang:num_running_reqs",),
    requests_waiting=("sglang:num_queue_reqs",),
    kv_cache_usage=("sglang:token_usage",),
    ttft=("sglang:time_to_first_token_seconds",),
    itl=("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
)


class ScrapeError(Exception):
    """/metrics could not be read; the message says why."""


@dataclass(frozen=True)
class Snapshot:
    """One read of /metrics: each sample name's series, as (labels, value) pairs."""

    series: Mapping[str, tuple[tuple[Mapping[str, str], float], ...]] = field(default_factory=dict)

    def first_present(self, names: Iterable[str], suffix: str = "") -> str | None:
        return next((name for name in names if name + suffix in self.series), None)

    def total(self, sample_name: str) -> float | None:
        """The sum over every label set, or None when no such sample was exposed."""
        values = self.series.get(sample_name)
        return sum(v for _, v in values) if values else None

    def total_by(self, sample_name: str, label: str) -> dict[str, float]:
        """The sum per value of ``label``, over every other label."""
        out: dict[str, float] = {}
        for labels, value in self.series.get(sample_name, ()):
            if label in labels:
                out[labels[label]] = out.get(labels[label], 0.0) + value
        return out

    def buckets(self, histogram: str) -> dict[float, float]:
        """A histogram's cumulative bucket counts by upper bound (seconds), summed over
        every label set but ``le``."""
        return {float(le): v for le, v in self.total_by(histogram + "_bucket", "le").items()}

    def gauge_max(self, sample_name: str) -> float | None:
        values = self.series.get(sample_name)
        return max(v for _, v in values) if values else None


def parse(text: str) -> Snapshot:
    """Prometheus text exposition -> Snapshot.  Raises ValueError for text that is not the
    exposition format."""
    series: dict[str, list[tuple[dict[str, str], float]]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                series.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    except ValueError as ex:
        raise ValueError(f"not the Prometheus text format: {ex}") from ex
    return Snapshot({name: tuple(values) for name, values in series.items()})


def only_samples(text: str, sample_names: Iterable[str]) -> str:
    """The lines of an exposition whose sample is one of ``sample_names`` (a regular
    expression, run in C). Parsing vLLM's whole /metrics (about 50 kB) takes about 10 ms of
    pure Python holding the GIL: done once a second beside a running point, it stalled the
    load generator's event loop by as much (p99 event-loop lag 5-12 ms, every point
    ``client_bound``). Its three gauges are a few lines."""
    names = "|".join(re.escape(name) for name in sorted(set(sample_names)))
    if not names:
        return ""
    return "\n".join(re.findall(rf"^(?:{names})(?:{{[^\n]*}})?[ \t][^\n]*$", text, re.MULTILINE)) + "\n"


def scrape(base_url: str, timeout: float = SCRAPE_TIMEOUT_S, only: Iterable[str] | None = None) -> Snapshot:
    """GET ``base_url``/metrics and parse it (only the samples named in ``only``, when
    given: :func:`only_samples`); ScrapeError says what went wrong."""
    url = base_url.rstrip("/") + "/metrics"
    try:
        response = requests.get(url, timeout=timeout)
    except requests.Timeout as ex:
        raise ScrapeError(f"GET {url}: no answer within {timeout} s") from ex
    except requests.ConnectionError as ex:
        raise ScrapeError(f"GET {url}: connection refused" if _refused(ex) else f"GET {url}: {ex}") from ex
    except requests.RequestException as ex:
        raise ScrapeError(f"GET {url}: {ex}") from ex
    if response.status_code != 200:
        # SGLang without --enable-metrics answers 404.
        raise ScrapeError(f"GET {url}: HTTP {response.status_code} {response.reason}".rstrip())
    text = response.text if only is None else only_samples(response.text, only)
    try:
        return parse(text)
    except ValueError as ex:
        raise ScrapeError(f"GET {url}: unparseable: {ex}") from ex


def _refused(ex: BaseException) -> bool:
    """Whether a ConnectionRefusedError is behind ``ex`` (requests wraps urllib3's
    MaxRetryError, whose ``reason`` wraps the socket's error)."""
    stack, seen = [ex], set()
    while stack:
        err = stack.pop()
        if id(err) in seen:
            continue
        seen.add(id(err))
        if isinstance(err, ConnectionRefusedError):
            return True
        linked = (err.__cause__, err.__context__, getattr(err, "reason", None), *err.args)
        stack.extend(x for x in linked if isinstance(x, BaseException))
    return False


# --- histograms ---------------------------------------------------------------------------


def histogram_median(delta_buckets: Mapping[float, float] | Iterable[tuple[float, float]]):
    """The median of a histogram by Prometheus' ``histogram_quantile(0.5, …)`` rule, from
    cumulative bucket counts by upper bound (seconds, +Inf included): the bucket holding
    rank count/2, and linear interpolation inside it (the first bucket starts at 0).

    Returns ``(median_s, (lower_s, upper_s))``, the bucket's bounds being all the
    histogram can say; when the rank falls in the +Inf bucket, the median is its lower
    bound and the upper bound is None.  None without observations or without a +Inf bucket
    (Prometheus answers NaN for both)."""
    buckets = sorted(dict(delta_buckets).items())
    if len(buckets) < 2 or buckets[-1][0] != math.inf:
        return None
    observations = buckets[-1][1]
    if observations <= 0:
        return None
    rank = 0.5 * observations
    index = next(i for i, (_, count) in enumerate(buckets) if count >= rank)
    if index == len(buckets) - 1:
        lower = buckets[-2][0]
        return lower, (lower, None)
    upper, count = buckets[index]
    if index == 0 and upper <= 0:
        return upper, (upper, upper)
    lower, below = (0.0, 0.0) if index == 0 else buckets[index - 1]
    return lower + (upper - lower) * (rank - below) / (count - below), (lower, upper)


def _ms(seconds: float | None) -> float | None:
    # Rounded to a nanosecond: bucket bounds such as 0.035 s are not exact in binary.
    return None if seconds is None else round(seconds * 1000, 6)


# --- the view -----------------------------------------------------------------------------


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


class _Deltas:
    """Differences between two snapshots; remembers whether any series went backwards
    (the server restarted in between, so none of them means anything)."""

    def __init__(self, before: Snapshot, after: Snapshot):
        self.before, self.after = before, after
        self.went_backwards = False

    def _check(self, delta: float) -> float:
        if delta < 0:
            self.went_backwards = True
        return delta

    def total(self, names: tuple[str, ...]) -> float | None:
        name = self.after.first_present(names)
        if name is None:
            return None
        # A series first exposed during the point (a labelled counter appears at its first
        # increment) was 0 before it.
        return self._check(self.after.total(name) - (self.before.total(name) or 0.0))

    def by_label(self, names: tuple[str, ...], label: str) -> dict[str, float] | None:
        name = self.after.first_present(names)
        if name is None:
            return None
        before = self.before.total_by(name, label)
        return {key: self._check(value - before.get(key, 0.0))
                for key, value in self.after.total_by(name, label).items()}

    def buckets(self, names: tuple[str, ...]) -> dict[float, float] | None:
        name = self.after.first_present(names, "_bucket")
        if name is None:
            return None
        before = self.before.buckets(name)
        return {le: self._check(count - before.get(le, 0.0)) for le, count in self.after.buckets(name).items()}


def _latency_view(delta_buckets: dict[float, float] | None) -> dict[str, Any] | None:
    if not delta_buckets:
        return None
    found = histogram_median(delta_buckets)
    if found is None:
        return None
    median, (lower, upper) = found
    return {"median": _ms(median), "bucket": [_ms(lower), _ms(upper)],
            "count": _number(delta_buckets[math.inf])}


def point_view(before: Snapshot, after: Snapshot, names: MetricNames,
               gauges_max: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the server says about one point: counter deltas, its TTFT and ITL medians from
    the histogram deltas, speculative-decoding counts, and the gauges' maxima sampled
    during the point (``GaugeSampler.stop()``), passed through.  Concepts the server does
    not expose are left out; ``ttft_ms``/``itl_ms`` are None without a histogram or without
    an observation.  When a counter went backwards the server restarted during the point:
    the view says ``"reset": true`` and gives no deltas."""
    deltas = _Deltas(before, after)
    counters: dict[str, Any] = {}
    for key in ("prompt_tokens", "generation_tokens", "preemptions", "prefix_cache_queries", "prefix_cache_hits"):
        value = deltas.total(getattr(names, key))
        if value is not None:
            counters[key] = _number(value)
    finished = deltas.total(names.request_success)
    if finished is not None:
        counters["requests_finished"] = _number(finished)
    if names.finish_reason_label:
        by_reason = deltas.by_label(names.request_success, names.finish_reason_label)
        if by_reason is not None:
            # vLLM exposes a series per reason from the start: only the reasons that happened.
            counters["requests_by_finish_reason"] = {reason: _number(n) for reason, n in sorted(by_reason.items()) if n}
    ttft = _latency_view(deltas.buckets(names.ttft))
    itl = _latency_view(deltas.buckets(names.itl))
    spec = _spec_view(deltas, names)
    view: dict[str, Any] = {"source": names.source}
    if deltas.went_backwards:
        view.update({"reset": True, "counters": {}, "ttft_ms": None, "itl_ms": None})
    else:
        view.update({"counters": counters, "ttft_ms": ttft, "itl_ms": itl})
        if spec is not None:
            view["spec"] = spec
    if gauges_max is not None:
        view["gauges_max"] = dict(gauges_max)
    return view


def _spec_view(deltas: _Deltas, names: MetricNames) -> dict[str, Any] | None:
    drafts = deltas.total(names.spec_drafts)
    if drafts is None:
        return None
    draft_tokens = deltas.total(names.spec_draft_tokens)
    accepted = deltas.total(names.spec_accepted_tokens)
    per_pos = deltas.by_label(names.spec_accepted_per_pos, names.position_label) or {}
    spec: dict[str, Any] = {"drafts": _number(drafts)}
    if draft_tokens is not None:
        spec["draft_tokens"] = _number(draft_tokens)
    if accepted is not None:
        spec["accepted_tokens"] = _number(accepted)
    # Conventionally (vLLM's SpecDecodingLogging) the accept length counts the bonus token.
    spec["accept_length"] = 1 + accepted / drafts if drafts > 0 and accepted is not None else None
    spec["acceptance_rate_per_position"] = (
        [per_pos[pos] / drafts for pos in sorted(per_pos, key=int)] if drafts > 0 else None)
    return spec


def median_fields(view: Mapping[str, Any]) -> dict[str, float | None]:
    """The Point columns taken from a view: the server's own TTFT and ITL medians (ms)."""
    return {"server_median_ttft_ms": (view.get("ttft_ms") or {}).get("median"),
            "server_median_itl_ms": (view.get("itl_ms") or {}).get("median")}


def to_model_time(view: Mapping[str, Any], time_scale: float) -> dict[str, Any]:
    """A view of a simulator running at ``time_scale`` x real time, in the model's time:
    its TTFT and ITL medians and bucket bounds divided by the scale (at 0.1 the server
    observed a tenth of the model's latencies).  Counts, gauges and ratios do not change."""
    if not time_scale or time_scale <= 0:
        raise ValueError(f"time scale must be > 0, not {time_scale!r}")
    out = dict(view)
    for key in ("ttft_ms", "itl_ms"):
        latency = view.get(key)
        if latency:
            out[key] = {**latency,
                        "median": _scaled(latency["median"], time_scale),
                        "bucket": [_scaled(bound, time_scale) for bound in latency["bucket"]]}
    return out


def _scaled(ms: float | None, time_scale: float) -> float | None:
    return None if ms is None else round(ms / time_scale, 6)


# --- gauges during a point ----------------------------------------------------------------


class GaugeSampler:
    """Polls /metrics on a daemon thread while a point runs and keeps the maxima of the
    running and waiting requests and the KV-cache usage.  A failed scrape is counted, never
    raised: the point goes on without it.

    Running and waiting requests are summed over engine cores; KV-cache usage is a fraction
    of each core's own cache, so its maximum over cores is kept.
    """

    def __init__(self, base_url: str, names: MetricNames, interval_s: float = 1.0,
                 timeout_s: float = SCRAPE_TIMEOUT_S):
        self.base_url = base_url
        self.names = names
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gauge-sampler", daemon=True)
        self._maxima: dict[str, float] = {}
        # Only these lines are parsed while the point runs (only_samples says why).
        self._gauge_names = names.requests_running + names.requests_waiting + names.kv_cache_usage
        self.samples = 0
        self.failed_scrapes = 0
        self.last_error: str | None = None

    def start(self) -> GaugeSampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        """Stops polling and returns ``{"requests_running": max, "requests_waiting": max,
        "kv_cache_usage": max, "samples": n}`` (a gauge the server lacks is left out), with
        ``failed_scrapes`` when some failed."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        out: dict[str, Any] = {key: _number(value) for key, value in self._maxima.items()}
        out["samples"] = self.samples
        if self.failed_scrapes:
            out["failed_scrapes"] = self.failed_scrapes
        return out

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.interval_s):
                return

    def _sample(self) -> None:
        try:
            snapshot = scrape(self.base_url, timeout=self.timeout_s, only=self._gauge_names)
        except ScrapeError as ex:
            self.failed_scrapes += 1
            self.last_error = str(ex)
            return
        self.samples += 1
        for key, value in gauge_values(snapshot, self.names).items():
            self._maxima[key] = max(value, self._maxima.get(key, value))


def gauge_values(snapshot: Snapshot, names: MetricNames) -> dict[str, float]:
    """The gauges of one read: running and waiting requests (summed over engine cores)
    and KV-cache usage (the fullest core's)."""
    out: dict[str, float] = {}
    for key, sample_names, combine in (("requests_running", names.requests_running, Snapshot.total),
                                       ("requests_waiting", names.requests_waiting, Snapshot.total),
                                       ("kv_cache_usage", names.kv_cache_usage, Snapshot.gauge_max)):
        name = snapshot.first_present(sample_names)
        if name is not None:
            out[key] = combine(snapshot, name)
    return out
