"""The groups the compare page sets side by side (runs.results.compare matches them): the
points of two or more sweeps, or of two or more runs, read in one query, with their
evidence; and the per-request samples of the metric of every ok point that can be compared
(valid, not excluded), read in one more query."""

from benchmarks.models import Sweep
from runs.models import Point, PointStatus, Run, Validity
from runs.results.evidence import EVIDENCE_VALUES, load_samples, repeat_values
from sweepcore.metrics import request_samples


class MissingSelection(ValueError):
    """A selected sweep or run does not exist; the message names them."""


COMPARE_POINT_FIELDS = (
    "run_id", "run__sweep_id", "run__method", "run__params", "run__params_key", "run__tp", "run__attempt",
    "workload__name", "prompt_tokens", "concurrency", "status", "reason", "excluded", "exclude_reason",
    "run__excluded", "run__exclude_reason", "id", *EVIDENCE_VALUES,
)


def compare_points(queryset, metric):
    """The points of a queryset as compare dicts (runs.results.compare), with ``samples``
    (per-request values of ``metric``, or None for a metric without them) and ``repeats``."""
    per_request = request_samples(metric, []) is not None
    fields = COMPARE_POINT_FIELDS + (() if per_request else ("extra__repeats",))
    rows = queryset.order_by("run__position", "run_id", "position").values(*fields, metric)
    points = [
        {
            "id": r["id"], **{k: r[k] for k in EVIDENCE_VALUES},
            "repeats": [] if per_request else repeat_values({"repeats": r["extra__repeats"]}, metric),
            "run_id": r["run_id"], "sweep_id": r["run__sweep_id"], "method": r["run__method"],
            "params": r["run__params"], "params_key": r["run__params_key"], "tp": r["run__tp"],
            "attempt": r["run__attempt"], "workload": r["workload__name"], "prompt_tokens": r["prompt_tokens"],
            "concurrency": r["concurrency"], "status": r["status"], "reason": r["reason"],
            # A point of an excluded run is excluded too (as in the charts and history).
            "excluded": r["excluded"] or r["run__excluded"],
            "exclude_reason": r["exclude_reason"] if r["excluded"] else (r["run__exclude_reason"] or "run excluded"),
            metric: r[metric],
        }
        for r in rows
    ]
    comparable = [p for p in points if p["status"] == PointStatus.OK and p["validity"] == Validity.VALID
                  and not p["excluded"]]
    samples = load_samples(comparable, metric) if per_request else {}
    for point in points:
        point["samples"] = samples.get(point["id"], []) if per_request else None
    return points


def compare_groups(mode, ids, metric):
    """The groups of `ids` (sweep ids when `mode` is "sweep", else run ids), in the order
    given, each with its points carrying `metric`; MissingSelection names any unknown id."""
    if mode == "sweep":
        sweeps = {s.pk: s for s in Sweep.objects.filter(pk__in=ids).select_related("llm", "engine", "host")}
        missing = [str(i) for i in ids if i not in sweeps]
        if missing:
            raise MissingSelection(f"No sweep #{', #'.join(missing)}.")
        points = compare_points(Point.objects.filter(run__sweep_id__in=ids), metric)
        return [
            {
                "id": sid, "label": f"#{sid} {sweeps[sid].name}", "url": sweeps[sid].get_absolute_url(),
                "detail": f"{sweeps[sid].llm.name} · {sweeps[sid].engine.name} · {sweeps[sid].host.name}",
                "points": [p for p in points if p["sweep_id"] == sid],
            }
            for sid in ids
        ]
    runs = {r.pk: r for r in Run.objects.filter(pk__in=ids).select_related("sweep")}
    missing = [str(i) for i in ids if i not in runs]
    if missing:
        raise MissingSelection(f"No run #{', #'.join(missing)}.")
    points = compare_points(Point.objects.filter(run_id__in=ids), metric)
    return [
        {
            "id": rid, "label": f"#{runs[rid].sweep_id}/{rid} {runs[rid].config_label}",
            "url": runs[rid].sweep.get_absolute_url(),
            "detail": f"run #{rid} of sweep #{runs[rid].sweep_id} {runs[rid].sweep.name}",
            "points": [p for p in points if p["run_id"] == rid],
        }
        for rid in ids
    ]
