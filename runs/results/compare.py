"""Side-by-side comparison of sweeps (or runs): match their points, compute the difference
of one metric against the first (the baseline) and decide, from the evidence, whether it is
one. Pure: plain dicts in, plain dicts out.

A *group* is one sweep or one run: ``{"label": str, "points": [point dict, ...]}``. A point
dict carries the match-key fields (``method``, ``params_key``, ``tp``, ``workload``,
``prompt_tokens``, ``concurrency``), ``status``, ``reason``, ``excluded`` (the point's or its
run's: an excluded point is shown as excluded, never compared), optionally
``attempt`` and ``params``, and the metric's value under the metric's name; for the verdict
its evidence: ``validity``, ``validity_reasons``, ``completed``, ``intervals``, ``samples``
(the per-request values of the metric, in the point's own time; None for a metric without
them) and ``repeats`` (the per-repeat values, for such a metric).

The verdict (``judge``)
-----------------------
``better`` / ``worse`` only when the difference is significant: a two-sided Mann-Whitney U
test (sweepcore.stats.compare_samples) on the two points' per-request values at ``alpha``
(settings.SWEEPLAB_SIGNIFICANCE_ALPHA) together with the ratio of medians' bootstrap
interval leaving 1 out; otherwise ``same`` ("within noise: ±x %");
``insufficient`` when either side is not ``valid`` or has fewer than ``min_requests``
requests. A metric with one value per measurement (throughputs, duration) is tested on the
points' repeats when both have at least ``MIN_REPEATS``, else it is ``insufficient``.
"""

from runs.models import PointStatus
from runs.results.charts import INVALID, INVALID_MARKER, MARKER_RADIUS, MARKER_STATUSES, hsl
from sweepcore.methods import config_label
from sweepcore.metrics import METRIC_NAMES, higher_is_better, interval_of, metric_label, metric_unit
from sweepcore.stats import Verdict, compare_samples

MIN_REPEATS = 4
NO_SAMPLES = f"one value per measurement: needs >= {MIN_REPEATS} repeats on each side"

# Point float metrics one may compare; their direction is sweepcore.metrics.higher_is_better.
METRICS = tuple(METRIC_NAMES)
DEFAULT_METRIC = "decode_tok_s"

SWEEP_KEY = ("method", "params_key", "tp", "workload", "prompt_tokens", "concurrency")
RUN_KEY = ("workload", "prompt_tokens", "concurrency")

GROUP_HUES = (212, 24, 140, 275, 350, 190, 45, 0)

# A bar's fill says how it compares with the baseline, as the table's colours do (the
# baseline's own bars and bars without a difference keep their group's colour).
VERDICT_COLOURS = {"better": "#1a7f37", "worse": "#c62828", "same": "#8a939e", "insufficient": "#c9a227"}
VERDICT_LABELS = {"better": "better than the baseline (significant)", "worse": "worse than the baseline (significant)",
                  "same": "the same as the baseline: within noise",
                  "insufficient": "not enough evidence to compare"}

# Cells without a value are markers at the axis baseline, one dataset per status, with their
# reason (never a zero bar, never an empty bar that cannot be hovered): the sweep charts'
# markers, plus the states only a comparison has. An invalid point is a marker too.
EXCLUDED = "excluded"
NO_VALUE = "no_value"
MISSING = "missing"
MARKERS = {
    **MARKER_STATUSES,
    INVALID: INVALID_MARKER,
    PointStatus.PLANNED.value: ("#a0a7b0", "circle", "not measured yet"),
    EXCLUDED: ("#9aa3ad", "crossRot", "excluded by a curator: never compared"),
    NO_VALUE: ("#5c6670", "dash", "ok, but this metric was not measured"),
    MISSING: ("#c0c6cd", "line", "no matching point"),
}
MARKER_LABELS = {EXCLUDED: "Excluded", NO_VALUE: "No value", MISSING: "No matching point", INVALID: "Invalid"}


def pct_difference(baseline, value):
    """Percent difference of value against baseline; None when either is missing or the
    baseline is zero."""
    if baseline is None or value is None or baseline == 0:
        return None
    return (value - baseline) / abs(baseline) * 100.0


def _reasons(point):
    return [r for r in (point.get("validity_reasons") or []) if isinstance(r, dict)]


def _not_valid_reason(baseline, point):
    parts = []
    for name, side in (("the baseline", baseline), ("this point", point)):
        validity = side.get("validity") or ""
        if validity == "valid":
            continue
        if not validity:
            parts.append(f"{name} has no verdict (measured before verdicts, or imported)")
        else:
            codes = ", ".join(str(r.get("code", "")) for r in _reasons(side)) or "no reason stored"
            parts.append(f"{name} is {validity} ({codes})")
    return "; ".join(parts)


def judge(baseline, point, metric, *, alpha=0.05, min_requests=5):
    """The verdict of ``point`` against ``baseline`` on ``metric`` (point dicts with their
    evidence, see the module docstring): ``{"verdict", "p_value", "reason", "ratio_ci",
    "noise_pct", "basis"}``; ``basis`` is "requests", "repeats" or None (not tested)."""
    higher = higher_is_better(metric)
    valid = (baseline.get("validity") == "valid", point.get("validity") == "valid")
    a, b = baseline.get("samples"), point.get("samples")
    basis = "requests"
    minimum = min_requests
    if a is None or b is None:  # one value per measurement: the repeats, if enough
        a, b = baseline.get("repeats") or [], point.get("repeats") or []
        basis, minimum = "repeats", MIN_REPEATS
        if all(valid) and (len(a) < MIN_REPEATS or len(b) < MIN_REPEATS):
            return {"verdict": Verdict.INSUFFICIENT, "p_value": None, "ratio_ci": None, "noise_pct": None,
                    "basis": None, "reason": f"{NO_SAMPLES} ({len(a)} vs {len(b)})"}
    result = compare_samples(
        a, b, higher_is_better=higher, alpha=alpha, min_requests=minimum, baseline_valid=valid[0],
        value_valid=valid[1], not_valid_reason=_not_valid_reason(baseline, point),
    )
    reason = result.reason
    if basis == "repeats" and result.verdict == Verdict.INSUFFICIENT and all(valid):
        reason = reason.replace("requests", "repeats")
    return {"verdict": result.verdict, "p_value": result.p_value, "reason": reason,
            "ratio_ci": list(result.ratio_ci) if result.ratio_ci else None, "noise_pct": result.noise_pct,
            "basis": basis if result.p_value is not None else None}


def key_label(key, fields, params=None):
    parts = dict(zip(fields, key))
    out = []
    if "method" in parts:
        out.append(config_label(parts["method"], params if isinstance(params, dict) else parts["params_key"]))
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
    evidence = {"validity": "", "validity_reasons": [], "n": None, "ci": None, "simulated_time_scale": None,
                "point": None}
    if point is None:
        return {"present": False, "ok": False, "value": None, "status": None, "reason": "no matching point",
                **evidence}
    evidence = {
        "validity": point.get("validity") or "", "validity_reasons": _reasons(point), "n": point.get("completed"),
        "ci": interval_of(point.get("intervals"), metric), "simulated_time_scale": point.get("simulated_time_scale"),
        "point": point.get("id"),
    }
    if point.get("excluded"):
        return {"present": True, "ok": False, "value": None, "status": EXCLUDED,
                "reason": point.get("exclude_reason") or "excluded by a curator", **evidence}
    ok = point.get("status") == "ok" and point.get(metric) is not None
    return {
        "present": True,
        "ok": ok,
        "value": point.get(metric) if ok else None,
        "status": point.get("status"),
        "reason": point.get("reason") or "",
        **evidence,
    }


def compare(groups, metric, mode="sweep", *, alpha=0.05, min_requests=5):
    """Rows of matched points: ``{"key", "label", "cells": [cell per group]}`` where a cell
    is ``{"present", "ok", "value", "status", "reason", "pct", "verdict", "p_value",
    "verdict_reason", "ratio_ci", "noise_pct", "basis", "validity", "validity_reasons", "n",
    "ci", "simulated_time_scale", "point"}`` (``ci``: the 95 % interval of the value, where
    the point has one; ``point``: its id); the first group is the baseline (its pct and
    verdict are None, as are those of a cell without a value). Rows follow the baseline's
    order, then keys only the others have. Raises KeyError for a metric not in METRICS."""
    if metric not in METRICS:
        raise KeyError(metric)
    blank = {"verdict": None, "p_value": None, "reason": "", "ratio_ci": None, "noise_pct": None, "basis": None}
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
        points = [by_key.get(key) for by_key, _ in indexes]
        cells = [_cell(point, metric) for point in points]
        base = cells[0]["value"] if cells else None
        for i, cell in enumerate(cells):
            cell["pct"] = pct_difference(base, cell["value"]) if i else None
            found = blank
            if i and cell["pct"] is not None:
                found = judge(points[0], points[i], metric, alpha=alpha, min_requests=min_requests)
            cell.update(verdict=found["verdict"], p_value=found["p_value"], verdict_reason=found["reason"],
                        ratio_ci=found["ratio_ci"], noise_pct=found["noise_pct"], basis=found["basis"])
        first = next(by_key[key] for by_key, _ in indexes if key in by_key)
        rows.append({"key": key, "label": key_label(key, fields, first.get("params")), "cells": cells,
                     "matched": sum(c["present"] for c in cells)})
    return rows


def _marker_status(cell):
    if not cell["present"]:
        return MISSING
    if cell["value"] is not None and cell["validity"] == INVALID:
        return INVALID
    return cell["status"] if cell["status"] in MARKERS else NO_VALUE  # an ok point without this metric


def _reasons_text(cell):
    return "; ".join(f"{r.get('code')}: {r.get('message')}" for r in cell["validity_reasons"])


def marker_label(status):
    return MARKER_LABELS.get(status) or str(PointStatus(status).label)


def chart_data(groups, rows, metric, mode="sweep"):
    """Chart.js-ready horizontal bars: one value dataset per group, its bars filled by their
    verdict against the baseline (``barColors``), and marker datasets for the cells without
    a value, each marker ``{"x": 0, "y": row label, "group", "status", "reason"}``.

    A value dataset has one entry per row in each of: ``data`` (None where no bar),
    ``status``, ``reason``, ``pct``, ``verdict``, ``verdictReason`` ("within noise: ±x %"
    ...), ``pValue``, ``validity`` ("valid" / "suspect" / "" unjudged: a suspect bar is
    drawn hatched), ``reasons`` (the verdict's reasons as one text), ``n``, ``simulated``
    (the time scale or None), ``xMin`` / ``xMax`` (the 95 % interval of the value, for
    horizontal error bars; None without one) and ``barColors``. An ``invalid`` point is
    never a bar: it is a marker of status "invalid" with its reasons."""
    label = metric_label(metric)
    labels = [row["label"] for row in rows]
    datasets, markers = [], {}
    for i, group in enumerate(groups):
        hue = GROUP_HUES[i % len(GROUP_HUES)]
        colour = hsl(hue, 65, 52, 0.8)
        cells = [row["cells"][i] for row in rows]
        bars = [cell["value"] is not None and cell["validity"] != INVALID for cell in cells]
        datasets.append({
            "kind": "value",
            "type": "bar",
            "label": group["label"],
            "data": [cell["value"] if bar else None for cell, bar in zip(cells, bars)],
            "status": [cell["status"] for cell in cells],
            "reason": [cell["reason"] for cell in cells],
            "pct": [cell["pct"] for cell in cells],
            "verdict": [cell["verdict"] for cell in cells],
            "verdictReason": [cell["verdict_reason"] for cell in cells],
            "pValue": [cell["p_value"] for cell in cells],
            "validity": [cell["validity"] for cell in cells],
            "reasons": [_reasons_text(cell) for cell in cells],
            "n": [cell["n"] for cell in cells],
            "simulated": [cell["simulated_time_scale"] for cell in cells],
            "xMin": [cell["ci"][0] if bar and cell["ci"] else None for cell, bar in zip(cells, bars)],
            "xMax": [cell["ci"][1] if bar and cell["ci"] else None for cell, bar in zip(cells, bars)],
            "barColors": [VERDICT_COLOURS.get(cell["verdict"], colour) for cell in cells],
            "backgroundColor": colour,
            "borderColor": hsl(hue, 65, 40),
            "borderWidth": 2,
        })
        for row_label, cell, bar in zip(labels, cells, bars):
            if not bar:
                status = _marker_status(cell)
                reason = cell["reason"] or MARKERS[status][2]
                if status == INVALID:
                    reason = _reasons_text(cell) or MARKERS[status][2]
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
