"""The capacity table of a sweep page: its configurations ranked by what each serves per GPU
within the SLO (issue 15).

Each run's capacity search stores ``Run.capacity`` (the highest load meeting the SLO, its
goodput, tok/s, tok/s per GPU and per user, why the search stopped, and the Point it was
measured at). The table ranks the configurations by goodput per GPU at that load
(``capacity.goodput / tp``), then by tok/s per GPU; a configuration without a capacity (its
SLO missed at the lowest load, or its run never searched: crashed, skipped) is listed after
them with the reason. Every capacity carries the verdict and n of the point it was
measured at: the same rules as every measured number (a suspect capacity says so, with
its reasons). Two queries: the runs (latest attempt per configuration, as the charts), then
the capacity points.
"""

from runs.models import Point, Run
from runs.results import evidence
from sweepcore.methods import config_label


def _per_gpu(value, tp):
    return value / tp if value is not None and tp else None


def capacity_table(sweep_id, spec):
    """``{"slo": {key: limit}, "metric", "rows": [...]}`` of the sweep's capacity searches,
    or None when its ``spec`` has no search (no query then) or no run of it has a capacity
    yet. Each row: ``rank`` (1.. or None), ``config``,
    ``run``, ``method``, ``tp``, ``load``, ``metric``, ``goodput``, ``goodput_per_gpu``,
    ``output_tok_s``, ``tok_s_per_gpu``, ``tok_s_per_user``, ``stopped_because``,
    ``message``, ``probes``, ``point``, ``validity``, ``reasons`` (text), ``n``."""
    if not (spec or {}).get("search"):
        return None
    rows = Run.objects.filter(sweep_id=sweep_id, excluded=False).order_by("position", "attempt", "id").values(
        "id", "method", "params", "params_key", "tp", "status", "reason", "failure_cause", "capacity")
    latest = {}
    for row in rows:  # a retry replaces the attempt before it
        latest[(row["method"], row["params_key"], row["tp"])] = row
    runs = list(latest.values())
    if not any(run["capacity"] for run in runs):
        return None
    point_ids = [run["capacity"].get("point") for run in runs if run["capacity"].get("point") is not None]
    points = {p["id"]: p for p in Point.objects.filter(pk__in=point_ids).values("id", *evidence.EVIDENCE_VALUES)}
    table = []
    for run in runs:
        capacity = run["capacity"] or {}
        point = points.get(capacity.get("point"))
        found = capacity.get("load") is not None
        message = capacity.get("message") or (
            "" if capacity else (run["failure_cause"] or run["reason"] or f"no capacity search ({run['status']})"))
        table.append({
            "rank": None, "run": run["id"], "config": config_label(run["method"], run["params"], run["tp"]),
            "method": run["method"], "tp": run["tp"], "metric": capacity.get("metric"),
            "load": capacity.get("load"), "goodput": capacity.get("goodput") if found else None,
            "goodput_per_gpu": _per_gpu(capacity.get("goodput"), run["tp"]) if found else None,
            "output_tok_s": capacity.get("output_tok_s"), "tok_s_per_gpu": capacity.get("tok_s_per_gpu"),
            "tok_s_per_user": capacity.get("tok_s_per_user"), "stopped_because": capacity.get("stopped_because") or "",
            "message": message, "probes": capacity.get("probes"), "point": capacity.get("point"),
            "validity": (point["validity"] if point else "") or "",
            "reasons": evidence.reasons_text(point["validity_reasons"]) if point else "",
            "n": point["completed"] if point else None,
        })
    ranked = sorted((r for r in table if r["load"] is not None),
                    key=lambda r: (-(r["goodput_per_gpu"] or 0.0), -(r["tok_s_per_gpu"] or 0.0)))
    for rank, row in enumerate(ranked, 1):
        row["rank"] = rank
    metrics = {r["metric"] for r in table if r["metric"]}
    return {"slo": dict(spec.get("slo") or {}), "metric": metrics.pop() if len(metrics) == 1 else None,
            "rows": ranked + [r for r in table if r["load"] is None]}
