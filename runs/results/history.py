"""History: one measurement series across every sweep, and regression detection on it.

A *series* is everything that makes two points comparable: the model (``Sweep.llm``), the
engine, the method and its parameters (``Run.params_key``), TP, the workload, the prompt
length, the concurrency and the GPU model of the host (``Host.gpu_model``). Its points are
the ``ok`` points of that configuration in every sweep, in ``finished_at`` order.

Regression detection (``detect_regressions``): the test the compare page makes
(runs.results.compare.judge: a two-sided Mann-Whitney U test at
settings.SWEEPLAB_SIGNIFICANCE_ALPHA, with the ratio of medians' interval leaving 1 out), of a point's per-request values against the pooled
per-request values of its trailing window.

* For point *i*, the *window* is the last ``window`` (default 5) earlier points that are
  ``valid`` and not excluded (point or run excluded by a curator). Suspect, invalid,
  unjudged and excluded points never enter a window and are never judged: they are returned
  with their validity, for drawing.
* With fewer than ``min_history`` (default 3) valid points in the window, point *i* is
  ``insufficient data`` (the reason says how many there are); with fewer than
  ``min_requests`` pooled requests (or, for a metric with one value per measurement,
  fewer than 4 repeats on a side), too.
* Otherwise it is ``worse`` (a regression, flagged), ``better`` or ``same`` ("within noise").
* A flagged point stays in the window of the later points: a lasting drop becomes the new
  normal once it holds most of the window (its pooled median) instead of flagging forever.
"""

import math
import statistics

from django.db.models import F, FloatField, Q

from benchmarks.models import LLM, Engine, Host, Workload
from runs.models import Point, PointStatus, Run, Validity
from runs.results import evidence
from runs.results.compare import judge
from sweepcore.methods import config_label
from sweepcore.metrics import METRIC_NAMES, metric_label, request_samples
from sweepcore.stats import Verdict

DEFAULT_WINDOW = 5
MIN_HISTORY = 3
METHOD_NAME = "Mann-Whitney U against the trailing window"

# Float columns of Point that are measurements (not request_rate, a setting, nor the time scale).
METRICS = tuple(
    f.name
    for f in Point._meta.get_fields()
    if isinstance(f, FloatField) and f.name in METRIC_NAMES
)
DEFAULT_METRIC = "decode_tok_s"


def validate_metric(metric):
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}: expected one of {', '.join(METRICS)}")
    return metric


SERIES_KEYS = ("model", "engine", "method", "params", "tp", "workload", "prompt_tokens", "concurrency", "gpu")


def series_points(filters, metric):
    """The ok points of one series, oldest first, in one query (``.values()`` rows).

    ``filters``: model (LLM name), engine (name), method, params (``params_key``; default
    ``{}``), tp, workload (name), prompt_tokens (None: a fixed prompt or a dataset),
    concurrency, gpu (``Host.gpu_model``; "" for a CPU host).

    Each row: value, finished_at, sweep_id, sweep_name, run_id, engine_version, excluded
    (point or run excluded), exclude_reason (the point's, else the run's), is_baseline, the
    point's evidence (runs.results.evidence.EVIDENCE_VALUES) and ``repeats`` (its per-repeat
    values of the metric, for a metric without per-request values).
    """
    validate_metric(metric)
    missing = [k for k in ("model", "engine", "method", "tp", "workload", "concurrency") if filters.get(k) in (None, "")]
    if missing:
        raise ValueError(f"missing series filter(s): {', '.join(missing)}")
    rows = (
        Point.objects.filter(
            status=PointStatus.OK,
            run__sweep__llm__name=filters["model"],
            run__sweep__engine__name=filters["engine"],
            run__sweep__host__gpu_model=filters.get("gpu") or "",
            run__method=filters["method"],
            run__params_key=filters.get("params") or "{}",
            run__tp=filters["tp"],
            workload__name=filters["workload"],
            concurrency=filters["concurrency"],
            **{f"{metric}__isnull": False},
        )
        .filter(
            Q(prompt_tokens__isnull=True)
            if filters.get("prompt_tokens") is None
            else Q(prompt_tokens=filters["prompt_tokens"])
        )
        .annotate(
            value=F(metric),
            sweep_name=F("run__sweep__name"),
            engine_version=F("run__engine_version"),
            run_excluded=F("run__excluded"),
            run_exclude_reason=F("run__exclude_reason"),
            sweep_id=F("run__sweep_id"),
        )
        .order_by(F("finished_at").asc(nulls_last=True), "id")
        .values(
            "id", "value", "finished_at", "sweep_id", "sweep_name", "run_id", "engine_version",
            "excluded", "exclude_reason", "run_excluded", "run_exclude_reason", "is_baseline",
            *evidence.EVIDENCE_VALUES, "extra__repeats",
        )
    )
    points = []
    for row in rows:
        row["repeats"] = evidence.repeat_values({"repeats": row.pop("extra__repeats")}, metric)
        run_excluded = row.pop("run_excluded")
        run_reason = row.pop("run_exclude_reason")
        if row["excluded"]:
            row["exclude_reason"] = row["exclude_reason"] or run_reason
        elif run_excluded:
            row["excluded"] = True
            row["exclude_reason"] = run_reason or "run excluded"
        points.append(row)
    return points


def attach_samples(points, metric):
    """Each point's ``samples``: its per-request values of ``metric`` (one query for the
    valid, not excluded points; [] for the others), or None for a metric without them."""
    if request_samples(metric, []) is None:
        for point in points:
            point["samples"] = None
        return points
    usable = [p for p in points if p.get("validity") == Validity.VALID and not p.get("excluded")]
    samples = evidence.load_samples(usable, metric)
    for point in points:
        point["samples"] = samples.get(point["id"], [])
    return points


def _usable(point):
    value = point.get("value")
    return (point.get("validity") == Validity.VALID and not point.get("excluded") and value is not None
            and not (isinstance(value, float) and math.isnan(value)))


def detect_regressions(points, metric, window=DEFAULT_WINDOW, *, alpha=0.05, min_requests=5,
                       min_history=MIN_HISTORY):
    """Judge every point of a time-ordered series against its trailing window (see the
    module docstring). ``points``: dicts with ``value``, ``excluded``, ``validity``,
    ``samples`` (per-request values, or None for a metric without them) and ``repeats``.

    Returns one dict per point, in order: ``index``, ``verdict`` ("better", "worse", "same",
    "insufficient", or None for a point that is not judged: not valid or excluded),
    ``regression`` (verdict "worse"), ``reason``, ``p_value``, ``diff_pct`` (of the point's
    median against the window's pooled median), ``window`` (valid points in the window) and
    ``pooled`` (their requests, or repeats).
    """
    if window < 1 or min_history < 1:
        raise ValueError("window and min_history must be >= 1")
    history = []
    out = []
    for index, point in enumerate(points):
        entry = {"index": index, "verdict": None, "regression": False, "reason": "", "p_value": None,
                 "diff_pct": None, "window": 0, "pooled": 0}
        out.append(entry)
        if not _usable(point):
            why = "excluded" if point.get("excluded") else f"{point.get('validity') or 'not judged'}"
            entry["reason"] = f"not judged: {why}; never part of a window"
            continue
        recent = history[-window:]
        entry["window"] = len(recent)
        per_request = point.get("samples") is not None
        pooled = [v for p in recent for v in ((p.get("samples") or []) if per_request else (p.get("repeats") or []))]
        entry["pooled"] = len(pooled)
        history.append(point)
        if len(recent) < min_history:
            entry.update(verdict=Verdict.INSUFFICIENT,
                         reason=f"insufficient data: {len(recent)} valid earlier point(s) in the window "
                                f"(at least {min_history})")
            continue
        base = {"validity": Validity.VALID, "samples": pooled if per_request else None, "repeats": pooled}
        found = judge(base, point, metric, alpha=alpha, min_requests=min_requests)
        reason = found["reason"]
        if found["verdict"] == Verdict.INSUFFICIENT:
            reason = f"insufficient data: {reason}"
        mine = point.get("samples") if per_request else point.get("repeats")
        diff = None
        if pooled and mine and statistics.median(pooled):
            diff = (statistics.median(mine) / statistics.median(pooled) - 1) * 100
        entry.update(verdict=found["verdict"], regression=found["verdict"] == Verdict.WORSE, reason=reason,
                     p_value=found["p_value"], diff_pct=diff)
    return out


def choices():
    """The values of every series dimension, for the history page's selects."""
    configs = (
        Run.objects.order_by("method", "params_key").values_list("method", "params_key").distinct()
    )
    return {
        "model": list(LLM.objects.order_by("name").values_list("name", flat=True)),
        "engine": list(Engine.objects.order_by("name").values_list("name", flat=True)),
        # The value sent is the key (the query's ``config``); the text shown is the label.
        "config": [{"method": method, "params": key, "label": config_label(method, key)} for method, key in configs],
        "tp": list(Run.objects.order_by("tp").values_list("tp", flat=True).distinct()),
        "workload": list(Workload.objects.order_by("name").values_list("name", flat=True)),
        "prompt_tokens": list(
            Point.objects.filter(prompt_tokens__isnull=False)
            .order_by("prompt_tokens").values_list("prompt_tokens", flat=True).distinct()
        ),
        "concurrency": list(Point.objects.order_by("concurrency").values_list("concurrency", flat=True).distinct()),
        "gpu": list(Host.objects.order_by("gpu_model").values_list("gpu_model", flat=True).distinct()),
        "metric": [{"name": m, "label": metric_label(m)} for m in METRICS],
    }
