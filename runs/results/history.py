"""History: one measurement series across every sweep, and regression detection on it.

A *series* is everything that makes two points comparable: the model (``Sweep.llm``), the
engine, the method and its parameters (``Run.params_key``), TP, the workload, the prompt
length, the concurrency and the GPU model of the host (``Host.gpu_model``). Its points are
the ``ok`` points of that configuration in every sweep, in ``finished_at`` order.

Regression detection (``detect_regressions``): a trailing-window z-score.

* For point *i*, the *history* is the last ``window`` (default 5) earlier points that are not
  excluded (point or run excluded by a curator) and have a value. Excluded points are never
  used as history and are never flagged.
* With fewer than ``min_history`` (default 3) points of history, point *i* is not judged.
* Otherwise, with ``mean`` and the population standard deviation ``std`` of the history,
  ``z = (x_i - mean) / std``. A higher-is-better metric (decode tok/s, throughputs, accept
  length) is flagged when ``z < -threshold``; a lower-is-better one (latencies ``*_ms``,
  ``duration``) when ``z > threshold``. ``threshold`` defaults to 3.0.
* When ``std == 0`` (a perfectly flat history) the z-score is undefined; the relative change
  ``(x_i - mean) / |mean|`` is used instead, and a change of more than 5 % in the bad
  direction is flagged (a flat history at 0 flags nothing).
* A flagged point stays in the history of the later points: a lasting drop becomes the new
  normal after ``window`` points instead of flagging forever.
"""

import math

from django.db.models import F, FloatField, Q

from benchmarks.models import LLM, Engine, Host, Workload
from runs.models import Point, PointStatus, Run
from sweepcore.metrics import metric_label

DEFAULT_WINDOW = 5
DEFAULT_THRESHOLD = 3.0
MIN_HISTORY = 3
ZERO_STD_RELATIVE_CHANGE = 0.05
METHOD_NAME = "trailing-window z-score"

# Float columns of Point that are measurements (request_rate is a setting, not a result).
METRICS = tuple(
    f.name
    for f in Point._meta.get_fields()
    if isinstance(f, FloatField) and f.name != "request_rate"
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
    (point or run excluded), exclude_reason (the point's, else the run's) and is_baseline.
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
        )
    )
    points = []
    for row in rows:
        run_excluded = row.pop("run_excluded")
        run_reason = row.pop("run_exclude_reason")
        if row["excluded"]:
            row["exclude_reason"] = row["exclude_reason"] or run_reason
        elif run_excluded:
            row["excluded"] = True
            row["exclude_reason"] = run_reason or "run excluded"
        points.append(row)
    return points


def _item(value):
    if isinstance(value, dict):
        return value.get("value"), bool(value.get("excluded"))
    return value, False


def detect_regressions(values, window=DEFAULT_WINDOW, threshold=DEFAULT_THRESHOLD, higher_is_better=True,
                       min_history=MIN_HISTORY):
    """Flag regressions in a time-ordered sequence (see the module docstring).

    ``values``: numbers, or dicts with ``value`` and ``excluded``. Returns one dict per flagged
    point: index, value, mean, std, z (None when std == 0) and change (relative to the mean).
    """
    if window < 1 or threshold <= 0 or min_history < 1:
        raise ValueError("window and min_history must be >= 1 and threshold > 0")
    history = []
    flagged = []
    for index, raw in enumerate(values):
        value, excluded = _item(raw)
        if excluded or value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        recent = history[-window:]
        if len(recent) >= min_history:
            mean = sum(recent) / len(recent)
            std = math.sqrt(sum((v - mean) ** 2 for v in recent) / len(recent))
            change = (value - mean) / abs(mean) if mean else None
            z = None
            if std > 0:
                z = (value - mean) / std
                bad = z < -threshold if higher_is_better else z > threshold
            elif change is None:
                bad = False
            else:
                bad = change < -ZERO_STD_RELATIVE_CHANGE if higher_is_better else change > ZERO_STD_RELATIVE_CHANGE
            if bad:
                flagged.append({"index": index, "value": value, "mean": mean, "std": std, "z": z, "change": change})
        history.append(value)
    return flagged


def choices():
    """The values of every series dimension, for the history page's selects."""
    configs = (
        Run.objects.order_by("method", "params_key").values_list("method", "params_key").distinct()
    )
    return {
        "model": list(LLM.objects.order_by("name").values_list("name", flat=True)),
        "engine": list(Engine.objects.order_by("name").values_list("name", flat=True)),
        "config": [
            {"method": method, "params": key, "label": method if key == "{}" else f"{method} {key}"}
            for method, key in configs
        ],
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
