"""How long a planned sweep will take, from what earlier sweeps measured.

The method (shown to users beside the figure):
- a point's time is the wall time per request of the same point (engine, model, GPU
  model, method and parameters, TP, workload, prompt tokens, concurrency, max new tokens)
  in earlier sweeps: the median of its last ``RECENT`` ok measurements, times the requests
  the new sweep sends (requests per point, times repeats, + warmup); with ``until_stable``
  a point sends between its ``min_requests`` (at least the 6 an interval needs) and its
  ``max_requests``, so the estimate is a range;
- a run's start-up is the median time from a run's start to its first point of the same
  method and TP, else of any run of this engine, model and GPU model;
- planned points without history are extrapolated at the mean time of those with history,
  and the estimate says how many points that is. No history at all: no estimate.

``estimate`` is pure; ``load_history`` reads the two aggregates it needs in two queries.
"""

from dataclasses import dataclass

from django.db.models import F, Min

from runs.models import Point, Run
from sweepcore.kinds import PointStatus
from sweepcore.metrics import percentile
from sweepcore.stats import MIN_CI_SAMPLES
from sweepcore.plan import canonical_params

RECENT = 5
HISTORY_ROWS = 20_000  # newest ok points read; older ones do not change a median of 5


@dataclass
class History:
    # (method, params_key, tp, workload, prompt_tokens, concurrency, max_new_tokens) ->
    # wall seconds per request, newest first
    point_seconds_per_request: dict
    # (method, tp) -> start-up seconds, newest first
    startup_seconds: dict


def point_key(method, params, tp, workload, prompt_tokens, concurrency, max_new_tokens):
    return (method, canonical_params(params), tp, workload, prompt_tokens, concurrency, max_new_tokens)


def requests_per_point(spec):
    """(fewest, most) measured requests a point of ``spec`` (a sweepcore.spec.Spec) sends."""
    if spec.until_stable:
        low = max(int(spec.until_stable["min_requests"]), MIN_CI_SAMPLES)
        return low * spec.repeats, int(spec.until_stable["max_requests"]) * spec.repeats
    return spec.requests_per_point * spec.repeats, spec.requests_per_point * spec.repeats


def estimate(the_plan, requests, warmup_requests, history):
    """{"seconds", "seconds_most", "points_with_history", "points_planned", "runs_planned",
    "text"}, or None when nothing planned has history. ``requests``: (fewest, most)
    measured requests a point sends (:func:`requests_per_point`)."""
    fewest, most = requests
    found = _estimate(the_plan, fewest + warmup_requests, most + warmup_requests, history)
    if found and most > fewest:
        found["text"] += f"; each point sends {fewest} to {most} requests until it is stable"
    return found


def _estimate(the_plan, requests, requests_most, history):
    known, known_most, unknown, runs = [], [], 0, 0
    startup_total = 0.0
    all_startups = [s for values in history.startup_seconds.values() for s in values[:RECENT]]
    for run in the_plan.runs:
        planned = [p for p in run.points if p.status == PointStatus.PLANNED]
        if not planned:
            continue
        runs += 1
        startups = history.startup_seconds.get((run.method, run.tp)) or all_startups
        startup_total += percentile(startups[:RECENT], 50) if startups else 0.0
        for p in planned:
            key = point_key(run.method, run.params, run.tp, p.workload, p.prompt_tokens, p.concurrency, p.max_new_tokens)
            past = history.point_seconds_per_request.get(key)
            if past:
                known.append(percentile(past[:RECENT], 50) * requests)
                known_most.append(percentile(past[:RECENT], 50) * requests_most)
            else:
                unknown += 1
    if not known:
        return None
    seconds = startup_total + sum(known) + unknown * (sum(known) / len(known))
    seconds_most = startup_total + sum(known_most) + unknown * (sum(known_most) / len(known_most))
    points = len(known) + unknown
    span = format_duration(seconds)
    if format_duration(seconds_most) != span:
        span += f" to {format_duration(seconds_most)}"
    text = f"about {span} for {runs} runs and {points} points"
    if unknown:
        text += f" ({len(known)} points from their own history, {unknown} extrapolated at the mean of those)"
    else:
        text += " (every point from its own history)"
    return {
        "seconds": round(seconds),
        "seconds_most": round(seconds_most),
        "points_with_history": len(known),
        "points_planned": points,
        "runs_planned": runs,
        "text": text,
    }


def format_duration(seconds):
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def load_history(spec, gpu_model):
    """The History of this spec's engine, model and GPU model at its TP sizes."""
    same_setup = {
        "sweep__engine__name": spec.engine,
        "sweep__llm__name": spec.model,
        "sweep__host__gpu_model": gpu_model,
        "tp__in": spec.tp,
    }
    rows = (
        Point.objects.filter(
            status=PointStatus.OK,
            started_at__isnull=False,
            finished_at__isnull=False,
            **{f"run__{k}": v for k, v in same_setup.items()},
        )
        .order_by("-finished_at")
        .values_list(
            "run__method", "run__params_key", "run__tp", "workload__name", "prompt_tokens", "concurrency",
            "max_new_tokens", "started_at", "finished_at", "completed", "failed",
        )[:HISTORY_ROWS]
    )
    per_request = {}
    for method, params_key, tp, workload, length, conc, max_new, started, finished, completed, failed in rows:
        sent = (completed or 0) + (failed or 0)
        if sent:
            key = (method, params_key, tp, workload, length, conc, max_new)
            per_request.setdefault(key, []).append((finished - started).total_seconds() / sent)
    runs = (
        Run.objects.filter(started_at__isnull=False, **same_setup)
        .annotate(first_point_at=Min("points__started_at"))
        .filter(first_point_at__isnull=False)
        .order_by(F("started_at").desc())
        .values_list("method", "tp", "started_at", "first_point_at")[:HISTORY_ROWS]
    )
    startups = {}
    for method, tp, started, first_point in runs:
        startups.setdefault((method, tp), []).append(max((first_point - started).total_seconds(), 0.0))
    return History(per_request, startups)
