"""Side-by-side comparison of sweeps (or runs): match their points, compute the difference
of one metric against the first (the baseline). Pure: plain dicts in, plain dicts out.

A *group* is one sweep or one run: ``{"label": str, "points": [point dict, ...]}``. A point
dict carries the match-key fields (``method``, ``params_key``, ``tp``, ``workload``,
``prompt_tokens``, ``concurrency``), ``status``, ``reason``, ``excluded`` (the point's or its
run's: an excluded point is shown as excluded, never compared), optionally
``attempt`` and ``params``, and the metric's value under the metric's name.
"""

from runs.models import PointStatus
from runs.results.charts import MARKER_RADIUS, MARKER_STATUSES, hsl
from sweepcore.metrics import METRIC_NAMES, higher_is_better, metric_label, metric_unit

# Point float metrics one may compare; their direction is sweepcore.metrics.higher_is_better.
METRICS = tuple(METRIC_NAMES)
DEFAULT_METRIC = "decode_tok_s"

SWEEP_KEY = ("method", "params_key", "tp", "workload", "prompt_tokens", "concurrency")
RUN_KEY = ("workload", "prompt_tokens", "concurrency")

# Differences within this many percent are "same", neither better nor worse.
SAME_WITHIN_PCT = 1e-9

GROUP_HUES = (212, 24, 140, 275, 350, 190, 45, 0)

# A bar's fill says how it compares with the baseline, as the table's colours do (the
# baseline's own bars and bars without a difference keep their group's colour).
VERDICT_COLOURS = {"better": "#1a7f37", "worse": "#c62828", "same": "#8a939e"}
VERDICT_LABELS = {"better": "better than the baseline", "worse": "worse than the baseline",
                  "same": "the same as the baseline"}

# Cells without a value are markers at the axis baseline, one dataset per status, with their
# reason (never a zero bar, never an empty bar that cannot be hovered): the sweep charts'
# markers, plus the states only a comparison has.
EXCLUDED = "excluded"
NO_VALUE = "no_value"
MISSING = "missing"
MARKERS = {
    **MARKER_STATUSES,
    PointStatus.PLANNED.value: ("#a0a7b0", "circle", "not measured yet"),
    EXCLUDED: ("#9aa3ad", "crossRot", "excluded by a curator: never compared"),
    NO_VALUE: ("#5c6670", "dash", "ok, but this metric was not measured"),
    MISSING: ("#c0c6cd", "line", "no matching point"),
}
MARKER_LABELS = {EXCLUDED: "Excluded", NO_VALUE: "No value", MISSING: "No matching point"}


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


def _rank(point):
    # An excluded point (or a point of an excluded run) never hides one that is not, as the
    # sweep charts drop excluded runs before the latest attempt is chosen.
    return not point.get("excluded"), point.get("attempt", 0)


def _index(points, fields):
    """Key -> point; of the same key, the latest attempt that is not excluded wins (a
    retried run)."""
    by_key = {}
    order = []
    for point in points:
        key = tuple(point.get(f) for f in fields)
        if key not in by_key:
            order.append(key)
            by_key[key] = point
        elif _rank(point) >= _rank(by_key[key]):
            by_key[key] = point
    return by_key, order


def _cell(point, metric):
    if point is None:
        return {"present": False, "ok": False, "value": None, "status": None, "reason": "no matching point"}
    if point.get("excluded"):
        return {"present": True, "ok": False, "value": None, "status": EXCLUDED,
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


def _marker_status(cell):
    if not cell["present"]:
        return MISSING
    return cell["status"] if cell["status"] in MARKERS else NO_VALUE  # an ok point without this metric


def marker_label(status):
    return MARKER_LABELS.get(status) or str(PointStatus(status).label)


def chart_data(groups, rows, metric, mode="sweep"):
    """Chart.js-ready horizontal bars: one value dataset per group, its bars filled by their
    verdict against the baseline (``barColors``), and marker datasets for the cells without
    a value, each marker ``{"x": 0, "y": row label, "group", "status", "reason"}``."""
    label = metric_label(metric)
    labels = [row["label"] for row in rows]
    datasets, markers = [], {}
    for i, group in enumerate(groups):
        hue = GROUP_HUES[i % len(GROUP_HUES)]
        colour = hsl(hue, 65, 52, 0.8)
        cells = [row["cells"][i] for row in rows]
        datasets.append({
            "kind": "value",
            "type": "bar",
            "label": group["label"],
            "data": [cell["value"] for cell in cells],
            "status": [cell["status"] for cell in cells],
            "reason": [cell["reason"] for cell in cells],
            "pct": [cell["pct"] for cell in cells],
            "verdict": [cell["verdict"] for cell in cells],
            "barColors": [VERDICT_COLOURS.get(cell["verdict"], colour) for cell in cells],
            "backgroundColor": colour,
            "borderColor": hsl(hue, 65, 40),
            "borderWidth": 2,
        })
        for row_label, cell in zip(labels, cells):
            if cell["value"] is None:
                status = _marker_status(cell)
                reason = cell["reason"] or MARKERS[status][2]
                markers.setdefault(status, []).append(
                    {"x": 0, "y": row_label, "group": group["label"], "status": status, "reason": reason}
                )
    for status, (colour, style, _) in MARKERS.items():
        if markers.get(status):
            datasets.append({
                "kind": "marker", "type": "scatter", "status": status, "label": marker_label(status),
                "data": markers[status], "pointStyle": style, "pointRadius": MARKER_RADIUS,
                "pointHoverRadius": MARKER_RADIUS + 2, "backgroundColor": colour, "borderColor": colour,
                "borderWidth": 2,
            })
    better = "higher" if higher_is_better(metric) else "lower"
    return {
        "metric": metric,
        "metricLabel": label,
        "unit": metric_unit(metric),
        "higherIsBetter": higher_is_better(metric),
        "title": f"{label} of matched points, against the baseline {groups[0]['label']}" if groups else label,
        "x": {"label": f"{label}, {better} is better"},
        "y": {"label": "matched configuration and point" if mode == "sweep" else "matched point"},
        "labels": labels,
        "datasets": datasets,
        "legend": [
            {"status": status, "label": marker_label(status), "meaning": meaning, "pointStyle": style, "color": colour}
            for status, (colour, style, meaning) in MARKERS.items()
            if markers.get(status)
        ],
        "verdicts": [{"verdict": v, "label": VERDICT_LABELS[v], "color": c} for v, c in VERDICT_COLOURS.items()],
    }
