"""Side-by-side comparison of sweeps (or runs): match their points, compute the difference
of one metric against the first (the baseline). Pure: plain dicts in, plain dicts out.

A *group* is one sweep or one run: ``{"label": str, "points": [point dict, ...]}``. A point
dict carries the match-key fields (``method``, ``params_key``, ``tp``, ``workload``,
``prompt_tokens``, ``concurrency``), ``status``, ``reason``, ``excluded``, optionally
``attempt`` and ``params``, and the metric's value under the metric's name.
"""

from runs.charts import hsl
from runs.models import LATENCY_FIELDS

# Point float metrics one may compare, with their direction (True: higher is better).
HIGHER_IS_BETTER = (
    "decode_tok_s",
    "server_decode_tok_s",
    "max_output_tokens_per_s",
    "output_throughput",
    "total_token_throughput",
    "request_throughput",
    "accept_length",
)
LOWER_IS_BETTER = (*LATENCY_FIELDS, "event_loop_lag_p99_ms", "duration")
METRICS = {**{m: True for m in HIGHER_IS_BETTER}, **{m: False for m in LOWER_IS_BETTER}}
DEFAULT_METRIC = "decode_tok_s"

SWEEP_KEY = ("method", "params_key", "tp", "workload", "prompt_tokens", "concurrency")
RUN_KEY = ("workload", "prompt_tokens", "concurrency")

# Differences within this many percent are "same", neither better nor worse.
SAME_WITHIN_PCT = 1e-9

GROUP_HUES = (212, 24, 140, 275, 350, 190, 45, 0)


def higher_is_better(metric):
    return METRICS[metric]


def pct_difference(baseline, value):
    """Percent difference of value against baseline; None when either is missing or the
    baseline is zero."""
    if baseline is None or value is None or baseline == 0:
        return None
    return (value - baseline) / abs(baseline) * 100.0


def verdict(pct, metric):
    """"better", "worse" or "same" for a percent difference, by the metric's direction;
    None without a difference."""
    if pct is None:
        return None
    if abs(pct) <= SAME_WITHIN_PCT:
        return "same"
    return "better" if (pct > 0) == higher_is_better(metric) else "worse"


def key_label(key, fields, params=None):
    parts = dict(zip(fields, key))
    out = []
    if "method" in parts:
        if isinstance(params, dict):
            values = " ".join(f"{k}={v}" for k, v in sorted(params.items()))
        else:
            values = parts["params_key"] if parts["params_key"] not in ("", "{}") else ""
        out.append(" ".join(part for part in (parts["method"], values) if part))
        out.append(f"TP{parts['tp']}")
    length = parts["prompt_tokens"]
    out.append(f"{parts['workload']}" + (f" {length} tok" if length is not None else ""))
    out.append(f"x{parts['concurrency']}")
    return " · ".join(out)


def _index(points, fields):
    """Key -> point; of the same key, the latest attempt wins (a retried run)."""
    by_key = {}
    order = []
    for point in points:
        key = tuple(point.get(f) for f in fields)
        if key not in by_key:
            order.append(key)
            by_key[key] = point
        elif point.get("attempt", 0) >= by_key[key].get("attempt", 0):
            by_key[key] = point
    return by_key, order


def _cell(point, metric):
    if point is None:
        return {"present": False, "ok": False, "value": None, "status": None, "reason": "no matching point"}
    if point.get("excluded"):
        return {"present": True, "ok": False, "value": None, "status": "excluded",
                "reason": point.get("exclude_reason") or "excluded by a curator"}
    ok = point.get("status") == "ok" and point.get(metric) is not None
    return {
        "present": True,
        "ok": ok,
        "value": point.get(metric) if ok else None,
        "status": point.get("status"),
        "reason": point.get("reason") or "",
    }


def compare(groups, metric, mode="sweep"):
    """Rows of matched points: ``{"key", "label", "cells": [cell per group]}`` where a cell
    is ``{"present", "ok", "value", "status", "reason", "pct", "verdict"}``; the first group
    is the baseline (its pct and verdict are None). Rows follow the baseline's order, then
    keys only the others have. Raises KeyError for a metric not in METRICS."""
    if metric not in METRICS:
        raise KeyError(metric)
    fields = SWEEP_KEY if mode == "sweep" else RUN_KEY
    indexes = [_index(g["points"], fields) for g in groups]
    order, seen = [], set()
    for _, keys in indexes:
        for key in keys:
            if key not in seen:
                seen.add(key)
                order.append(key)
    rows = []
    for key in order:
        cells = [_cell(by_key.get(key), metric) for by_key, _ in indexes]
        base = cells[0]["value"] if cells else None
        for i, cell in enumerate(cells):
            cell["pct"] = pct_difference(base, cell["value"]) if i else None
            cell["verdict"] = verdict(cell["pct"], metric) if i else None
        first = next(by_key[key] for by_key, _ in indexes if key in by_key)
        rows.append({"key": key, "label": key_label(key, fields, first.get("params")), "cells": cells,
                     "matched": sum(c["present"] for c in cells)})
    return rows


def chart_data(groups, rows, metric, metric_label):
    """Chart.js-ready bars: one dataset per group, None where a point has no value (never a
    zero), with each bar's status and reason for the tooltip."""
    datasets = []
    for i, group in enumerate(groups):
        hue = GROUP_HUES[i % len(GROUP_HUES)]
        datasets.append({
            "label": group["label"],
            "data": [row["cells"][i]["value"] for row in rows],
            "status": [row["cells"][i]["status"] for row in rows],
            "reason": [row["cells"][i]["reason"] for row in rows],
            "pct": [row["cells"][i]["pct"] for row in rows],
            "backgroundColor": hsl(hue, 65, 52, 0.8),
            "borderColor": hsl(hue, 65, 40),
            "borderWidth": 1,
        })
    return {
        "metric": metric,
        "metricLabel": metric_label,
        "higherIsBetter": higher_is_better(metric),
        "labels": [row["label"] for row in rows],
        "datasets": datasets,
    }
