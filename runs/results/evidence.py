"""The evidence behind a point's numbers, as every reader of results shows it: its verdict
(``validity``, ``validity_reasons``), its sample size ``n`` (the ``completed`` column), the
95 % intervals of its medians (``<metric>_ci``), whether it was simulated; and, for the
comparisons (compare page and API, speedup charts, history), the per-request samples of a
set of points loaded in one query, in the point's own time (model time for a simulated
point), and the significance settings.

The JSON contract of a point (API, ``sweep show --json``, exports, points table)::

    "validity": "valid" | "suspect" | "invalid" | "",      # "" until measured (or imported)
    "validity_reasons": [{"code", "message"}],
    "n": completed requests | null,
    "<m>_ci": [lo, hi] | null  for m in sweepcore.metrics.INTERVAL_METRICS,
    "simulated_time_scale": float | null,                  # null: real time
    "stop_reason": text
"""

from django.conf import settings

from runs.models import RequestRecord
from sweepcore import metrics
from sweepcore.validity import Thresholds

#: The Point columns the evidence is built from (``.values(*EVIDENCE_VALUES)``).
EVIDENCE_VALUES = ("validity", "validity_reasons", "completed", "intervals", "simulated_time_scale", "stop_reason",
                   "co_runs")
#: The ``<m>_ci`` keys, in INTERVAL_METRICS order.
CI_KEYS = tuple(f"{m}_ci" for m in metrics.INTERVAL_METRICS)
#: The keys point_evidence adds to a point's JSON, in order.
EVIDENCE_KEYS = ("validity", "validity_reasons", "n", *CI_KEYS, "simulated_time_scale", "stop_reason", "co_runs")

#: The point columns that are a median the server took from its own histogram, with that
#: histogram's key in the point's ``server_metrics`` view (sweepcore.servermetrics), whose
#: ``bucket`` is all the histogram can say of where the median lies.
SERVER_HISTOGRAMS = {"server_median_ttft_ms": "ttft_ms", "server_median_itl_ms": "itl_ms"}

#: The RequestRecord columns sweepcore.metrics.request_samples reads.
SAMPLE_FIELDS = ("point_id", "error_kind", "output_tokens", "chunk_offsets", "spec_verify_ct", "send_lag", "in_ramp")


def _get(point, name, default=None):
    if isinstance(point, dict):
        return point.get(name, default)
    return getattr(point, name, default)


def reasons_list(reasons):
    """A point's ``validity_reasons`` as ``[{"code", "message"}]`` (whatever was stored)."""
    out = []
    for reason in reasons or []:
        if isinstance(reason, dict):
            out.append({"code": str(reason.get("code", "")), "message": str(reason.get("message", ""))})
    return out


def reasons_text(reasons):
    """``code: message; code: message`` (the CSV column and tooltips)."""
    return "; ".join(f"{r['code']}: {r['message']}" for r in reasons_list(reasons))


def histogram_bucket(bucket):
    """The bounds of the server histogram's bucket that holds a median, ``[lo, hi]`` in ms
    (``hi`` None: the +Inf bucket), from a view's ``bucket``; None for anything else."""
    if not isinstance(bucket, (list, tuple)) or len(bucket) != 2:
        return None
    lo, hi = bucket
    if not isinstance(lo, (int, float)) or not (hi is None or isinstance(hi, (int, float))):
        return None
    return [float(lo), None if hi is None else float(hi)]


def point_evidence(point):
    """The evidence keys of a point's JSON (EVIDENCE_KEYS) from a Point or a ``.values()``
    row holding EVIDENCE_VALUES."""
    return {
        "validity": _get(point, "validity") or "",
        "validity_reasons": reasons_list(_get(point, "validity_reasons")),
        "n": _get(point, "completed"),
        **metrics.ci_fields(_get(point, "intervals")),
        "simulated_time_scale": _get(point, "simulated_time_scale"),
        "stop_reason": _get(point, "stop_reason") or "",
        "co_runs": list(_get(point, "co_runs") or []),
    }


# --- Significance ------------------------------------------------------------------------


def alpha():
    return float(settings.SWEEPLAB_SIGNIFICANCE_ALPHA)


def thresholds():
    return Thresholds.from_mapping(settings.SWEEPLAB_VALIDITY)


def min_requests():
    return thresholds().min_requests


def load_samples(points, metric):
    """``{point id: [per-request value, ...]}`` of ``metric`` for the given points (dicts
    with ``id`` and ``simulated_time_scale``, or Points), in one query; {} for a metric that
    has no per-request values (see sweepcore.metrics.request_samples)."""
    if metrics.request_samples(metric, []) is None:
        return {}
    scales = {_get(p, "id"): _get(p, "simulated_time_scale") for p in points}
    records = {pid: [] for pid in scales}
    if not records:
        return {}
    rows = RequestRecord.objects.filter(point_id__in=list(records)).order_by().values(*SAMPLE_FIELDS)
    for row in rows.iterator(chunk_size=2000):
        records[row.pop("point_id")].append(row)
    return {pid: metrics.samples_to_model_time(metric, metrics.request_samples(metric, recs), scales[pid])
            for pid, recs in records.items()}


def repeat_values(extra, metric):
    """The per-repeat values of ``metric`` in a point's ``extra["repeats"]`` (a list of
    dicts), or [] when it has none."""
    repeats = (extra or {}).get("repeats") if isinstance(extra, dict) else None
    if not isinstance(repeats, list):
        return []
    return [float(r[metric]) for r in repeats
            if isinstance(r, dict) and isinstance(r.get(metric), (int, float))]
