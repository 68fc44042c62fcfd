"""SGLang's Prometheus /metrics (``--enable-metrics``), as python/sglang/srt/metrics/collector.py
defines it and prometheus_client's multiprocess collector writes it (SGLang serves its
tokenizer's and scheduler's metrics from several processes): label sets sorted by name,
no ``_created`` samples, a histogram's ``_sum`` before its buckets and ``_count``, and a
counter's HELP and TYPE lines under its ``_total`` name (docs/references/production_metrics.md
shows a real server's output)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# TokenizerMetricsCollector's default buckets (seconds).
TTFT_BUCKETS_S = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS_S = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
                 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)


class Histogram:
    """A Prometheus histogram: a count per bucket (the last one +Inf) and the sum."""

    def __init__(self, bounds: Sequence[float]):
        self.bounds = tuple(float(b) for b in bounds) + (math.inf,)
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0

    def _bucket(self, value: float) -> int:
        return next(i for i, bound in enumerate(self.bounds) if value <= bound)

    def observe(self, value: float) -> None:
        self.counts[self._bucket(value)] += 1
        self.sum += value

    def observe_chunk(self, interval: float, tokens: int) -> None:
        """SGLang's ``observe_inter_token_latency``: a chunk of ``tokens`` new tokens that
        arrived ``interval`` after the previous one counts ``tokens`` observations of
        ``interval / tokens``; the sum grows by ``interval``."""
        self.counts[self._bucket(interval / tokens)] += tokens
        self.sum += interval

    @property
    def count(self) -> int:
        return sum(self.counts)


def go_float(value: float) -> str:
    """prometheus_client's ``floatToGoString``: Python's repr, but Go's exponent form from
    1e7 up, and +Inf."""
    value = float(value)
    if value == math.inf:
        return "+Inf"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


class Exposition:
    """Prometheus text format 0.0.4, one family at a time."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def _family(self, name: str, kind: str, doc: str) -> None:
        self.lines.append(f"# HELP {name} {doc}")
        self.lines.append(f"# TYPE {name} {kind}")

    def gauge(self, name: str, doc: str, labels: dict[str, str], value: float) -> None:
        self._family(name, "gauge", doc)
        self.lines.append(f"{name}{_labels(labels)} {go_float(value)}")

    def counter(self, name: str, doc: str, labels: dict[str, str], value: float) -> None:
        """``name`` with its ``_total`` suffix, as SGLang names its counters."""
        self._family(name, "counter", doc)
        self.lines.append(f"{name}{_labels(labels)} {go_float(value)}")

    def histogram(self, name: str, doc: str, labels: dict[str, str], histogram: Histogram) -> None:
        self._family(name, "histogram", doc)
        self.lines.append(f"{name}_sum{_labels(labels)} {go_float(histogram.sum)}")
        cumulative = 0
        for bound, count in zip(histogram.bounds, histogram.counts):
            cumulative += count
            self.lines.append(f"{name}_bucket{_labels({**labels, 'le': go_float(bound)})} {go_float(cumulative)}")
        self.lines.append(f"{name}_count{_labels(labels)} {go_float(cumulative)}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
