"""What the sweep page shows of a sweep while it runs, and of one run in its drawer.

``sweep_state`` is the one reading behind the page, its live partial and progress.json: the
runs with their point counts per status, the sweep's progress, its points counted by verdict
(valid / suspect / invalid) and the time scales of its simulated points, in two queries
whatever the number of runs, and what its waiting runs wait for (runs.results.waiting: a few
more, only while some wait). ``run_drawer`` is everything about one run (drawer.json and the drawer
partial): timeline, what was launched, what the server said, why it failed, its log tail
GPU telemetry, the verdict on each of its measured points with the reasons, and the server's own
view of each point that has one (its /metrics, deltas over the point).
"""

import hashlib
import json
import os
import shlex

from django.db.models import Count

from benchmarks.models import SweepStatus
from runs.models import Point, PointStatus, Run, RunEvent, RunStatus, Validity
from runs.results.gpu_series import gpu_series
from runs.results.waiting import waiting_sentence

FINISHED_SWEEP = (SweepStatus.DONE, SweepStatus.CANCELLED)

LOG_TAIL_LINES = 200

LOG_TAIL_MAX_BYTES = 1 << 20  # never read more than this from the end of a server log

# What a run row shows (templates/runs/partials/run_row.html) and progress.json sends.
RUN_ROW_FIELDS = (
    "id", "sweep_id", "position", "method", "params", "tp", "status", "reason", "failure_kind",
    "failure_cause", "retry_quarantined", "known_failure", "known_failure__signature", "heartbeat_at",
)


def point_progress(counts, cancelled=False):
    """Points of a status -> count mapping: ``total``, ``to_measure`` (skipped ones are
    settled), ``done`` (finished among those: measured, or not_run because their server
    died) and its percentage ``pct`` (None when there is nothing to measure), and
    ``cancelled``: how many of them a cancel left unmeasured. Those are the not_run points of
    a `cancelled` run: not finished, resume measures them."""
    total = sum(counts.values())
    to_measure = total - counts.get(PointStatus.SKIPPED, 0)
    unmeasured = counts.get(PointStatus.NOT_RUN, 0) if cancelled else 0
    done = to_measure - counts.get(PointStatus.PLANNED, 0) - unmeasured
    return _with_pct({"done": done, "to_measure": to_measure, "total": total, "cancelled": unmeasured})


def sweep_progress(progresses):
    """The sweep's progress: the sum of its runs' (point_progress)."""
    return _with_pct({key: sum(p[key] for p in progresses) for key in ("done", "to_measure", "total", "cancelled")})


def _with_pct(progress):
    to_measure = progress["to_measure"]
    return {**progress, "pct": round(100 * progress["done"] / to_measure) if to_measure else None}


def progress_text(progress, search=False):
    """The progress in one sentence. Never "0 of 0 … (100%)": a sweep whose every point was
    skipped says so, and a capacity search, whose probes come as it measures, says that."""
    if not progress["to_measure"]:
        if progress["total"]:
            return "There is nothing to measure: every point was skipped."
        if search:
            return "No probe measured yet: each run's capacity search adds its probes as it measures them."
        return "There is nothing to measure: the plan has no point."
    text = f"{progress['done']} of {progress['to_measure']} points to measure are finished ({progress['pct']}%)"
    if progress["cancelled"]:
        n = progress["cancelled"]
        text += (f"; {n} {'was' if n == 1 else 'were'} not measured: the sweep was cancelled "
                 f"(resume measures {'it' if n == 1 else 'them'})")
    return text + "."


def sweep_state(sweep):
    """The sweep's runs in plan order, each with ``status_counts`` (its points per status, in
    the order statuses are declared) and ``progress`` (point_progress of those), plus the
    sweep's own ``counts``, ``progress``, ``legend`` (value, label, count), whether it is
    ``finished``, ``counts_key``, which changes whenever a point of any run changes
    status (the points table reloads then), ``verdicts`` (value, label, count of the
    measured points by verdict) and ``simulated_scales`` (the time scales of the points
    measured on a time-scaled simulator, whose figures are in model time)."""
    runs = list(
        Run.objects.filter(sweep=sweep).select_related("known_failure").only(*RUN_ROW_FIELDS).order_by("position")
    )
    per_run = {run.pk: {} for run in runs}
    overall = {}
    verdicts = {}
    scales = set()
    rows = (
        Point.objects.filter(run__sweep=sweep)
        .values("run_id", "status", "validity", "simulated_time_scale")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        statuses = per_run.setdefault(row["run_id"], {})
        statuses[row["status"]] = statuses.get(row["status"], 0) + row["n"]
        overall[row["status"]] = overall.get(row["status"], 0) + row["n"]
        if row["validity"]:
            verdicts[row["validity"]] = verdicts.get(row["validity"], 0) + row["n"]
        if row["simulated_time_scale"] is not None:
            scales.add(row["simulated_time_scale"])
    for run in runs:
        run.status_counts = {v: per_run[run.pk][v] for v in PointStatus.values if per_run[run.pk].get(v)}
        run.progress = point_progress(run.status_counts, cancelled=run.status == RunStatus.CANCELLED)
    counts = {value: overall[value] for value in PointStatus.values if overall.get(value)}
    key = json.dumps([[run.pk, run.status_counts] for run in runs])
    progress = sweep_progress([run.progress for run in runs])
    return {
        "sweep": sweep,
        "finished": sweep.status in FINISHED_SWEEP,
        "runs": runs,
        "counts": counts,
        "progress": {**progress, "text": progress_text(progress, bool((sweep.spec or {}).get("search")))},
        "waiting": waiting_sentence(sweep, runs),
        "legend": [(value, label, counts[value]) for value, label in PointStatus.choices if value in counts],
        "counts_key": hashlib.sha1(key.encode()).hexdigest()[:16],
        "verdicts": verdict_counts(verdicts),
        "simulated_scales": sorted(scales),
        "status_chart": status_chart(runs, counts),
    }


def status_chart(runs, counts):
    """The sweep page's chart of each run's points by status (static/js/sweep_detail.js),
    sent again by the live partial so that it moves as points land."""
    return {
        "labels": [run.config_label for run in runs],
        "datasets": [
            {"status": value, "label": str(label), "data": [run.status_counts.get(value, 0) for run in runs]}
            for value, label in PointStatus.choices if value in counts
        ],
    }


def verdict_counts(counts):
    """(value, label, count) of each verdict (sweepcore.validity) with points, valid first."""
    return [(value, label, counts[value]) for value, label in Validity.choices if counts.get(value)]


# A measured point of a run as its drawer lists it.
DRAWER_POINT_FIELDS = (
    "id", "workload__name", "prompt_tokens", "concurrency", "validity", "validity_reasons", "completed",
    "decode_tok_s", "intervals", "simulated_time_scale", "stop_reason", "co_runs",
)


def run_verdicts(run):
    """The verdicts on a run's measured points (one query): counts per verdict, the time
    scales of simulated points, and each point in plan order with its verdict, reasons, n,
    decode speed and its interval, why it stopped sending requests and the runs that shared
    its host meanwhile."""
    points = []
    counts = {}
    scales = set()
    for point in Point.objects.filter(run=run).exclude(validity="").order_by("position", "id").values(
        *DRAWER_POINT_FIELDS
    ):
        counts[point["validity"]] = counts.get(point["validity"], 0) + 1
        if point["simulated_time_scale"] is not None:
            scales.add(point["simulated_time_scale"])
        interval = (point["intervals"] or {}).get("decode_tok_s")
        points.append({
            "id": point["id"],
            "workload": point["workload__name"],
            "prompt_tokens": point["prompt_tokens"],
            "concurrency": point["concurrency"],
            "validity": point["validity"],
            "validity_display": str(Validity(point["validity"]).label),
            "validity_reasons": point["validity_reasons"] or [],
            "n": point["completed"],
            "decode_tok_s": point["decode_tok_s"],
            "decode_tok_s_ci": list(interval) if interval else None,
            "simulated_time_scale": point["simulated_time_scale"],
            "stop_reason": point["stop_reason"],
            "co_runs": point["co_runs"] or [],
        })
    return {"counts": verdict_counts(counts), "simulated_scales": sorted(scales), "points": points}


# A point of a run with the server's own view of it, as its drawer shows it: the view and
# our own medians beside the server's.
SERVER_VIEW_POINT_FIELDS = (
    "id", "workload__name", "prompt_tokens", "concurrency", "status", "simulated_time_scale",
    "median_ttft_ms", "median_itl_ms", "server_metrics",
)


def server_views(run):
    """The points of a run that carry the server's own view (its /metrics, deltas over the
    point: sweepcore.servermetrics), in plan order, one query: each with the view as stored
    (``server_metrics``), ``medians`` (the server's median TTFT and ITL that it has, each with
    its histogram's bucket and our own median beside it) and the share of prefix-cache
    queries that hit (None without queries). A point without a view is not listed."""
    points = []
    for point in (Point.objects.filter(run=run).exclude(server_metrics={}).order_by("position", "id")
                  .values(*SERVER_VIEW_POINT_FIELDS)):
        view = point["server_metrics"]
        if not isinstance(view, dict):
            continue
        counters = view.get("counters") if isinstance(view.get("counters"), dict) else {}
        hits, queries = counters.get("prefix_cache_hits"), counters.get("prefix_cache_queries")
        points.append({
            "id": point["id"],
            "workload": point["workload__name"],
            "prompt_tokens": point["prompt_tokens"],
            "concurrency": point["concurrency"],
            "status": point["status"],
            "status_display": str(PointStatus(point["status"]).label),
            "simulated_time_scale": point["simulated_time_scale"],
            "medians": [
                {"name": name, "field": key.removesuffix("_ms"), "server": histogram, "ours": point[ours]}
                for name, key, ours in (("TTFT", "ttft_ms", "median_ttft_ms"), ("ITL", "itl_ms", "median_itl_ms"))
                if isinstance(histogram := view.get(key), dict) and histogram.get("median") is not None
            ],
            "prefix_cache_hit_share": (hits / queries if isinstance(hits, (int, float))
                                       and isinstance(queries, (int, float)) and queries > 0 else None),
            "server_metrics": view,
        })
    return points


def tail_lines(path, n=LOG_TAIL_LINES, max_bytes=LOG_TAIL_MAX_BYTES, block=64 * 1024):
    """The last n lines of a file, read backwards in blocks from its end (a server log can
    be gigabytes). Returns (lines, truncated): truncated is True when the file holds more
    than what is returned. Raises OSError when the file cannot be read."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        end = size = f.tell()
        data = b""
        # More than n newlines: n whole lines after the first (possibly cut) one.
        while end > 0 and data.count(b"\n") <= n and size - end < max_bytes:
            step = min(block, end, max_bytes - (size - end))
            end -= step
            f.seek(end)
            data = f.read(step) + data
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()  # the file ends with a newline
    if end > 0:
        parts = parts[1:]  # the first one is cut by the read window
    lines = [part.decode("utf-8", errors="replace") for part in parts[-n:]] if n else []
    return lines, end > 0 or len(parts) > n


def log_tail(run):
    """The end of a run's server log, or a message saying why there is none."""
    log = {"path": run.log_path, "available": False, "lines": [], "truncated": False, "message": ""}
    if not run.log_path:
        log["message"] = "no server log: the server was never launched"
        return log
    try:
        lines, truncated = tail_lines(run.log_path)
    except FileNotFoundError:
        log["message"] = f"the server log is missing: {run.log_path}"
    except OSError as exc:
        log["message"] = f"the server log cannot be read: {exc.strerror or exc}"
    else:
        log.update(available=True, lines=lines, truncated=truncated)
        if not lines:
            log["message"] = "the server log is empty"
    return log


def run_drawer(run):
    """Everything about one run for the side panel, as plain JSON-ready data."""
    events = RunEvent.objects.filter(run=run).order_by("at", "id")
    argv = run.argv if isinstance(run.argv, list) else []
    return {
        "run": {
            "id": run.pk,
            "sweep_id": run.sweep_id,
            "label": run.config_label,
            "method": run.method,
            "params": run.params,
            "tp": run.tp,
            "attempt": run.attempt,
            "host": run.host.name if run.host_id else None,
            "status": run.status,
            "status_display": run.get_status_display(),
            "reason": run.reason,
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        },
        "events": [
            {"at": e.at.isoformat(), "kind": e.kind, "kind_display": e.get_kind_display(), "message": e.message}
            for e in events
        ],
        "argv": argv,
        "command": shlex.join(str(a) for a in argv) if argv else "",
        "engine_version": run.engine_version,
        "context_length": run.context_length,
        "kv_capacity_tokens": run.kv_capacity_tokens,
        "failure": {
            "kind": run.failure_kind,
            "kind_display": run.get_failure_kind_display() if run.failure_kind else "",
            "cause": run.failure_cause,
            "log_lines": run.failure_log.splitlines(),
        },
        "log": log_tail(run),
        "telemetry": gpu_series(run.pk),
        "verdicts": run_verdicts(run),
        "server_views": server_views(run),
    }


def telemetry_thinned(telemetry):
    """Whether gpu_series left samples out of any GPU's series (the drawer says so)."""
    return any(gpu["shown"] < gpu["samples"] for gpu in telemetry["gpus"])
