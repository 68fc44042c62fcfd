"""The sweep page and what it fetches live: progress.json, the run drawer, charts.json,
the points table, launch / cancel / resume, and the sweep's exports."""

import os
import shlex

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.db.models import Count, Q
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from benchmarks.models import Sweep, SweepStatus
from runs.lifecycle import SweepStateError, cancel_sweep, launch_sweep, resume_sweep
from runs.models import Point, PointStatus, Run, RunEvent
from runs.results import points_table as points_table_lib
from runs.results.charts import UnknownChart
from runs.results.charts import sweep_charts as build_sweep_charts
from runs.results.exports import export_response
from runs.results.gpu_series import gpu_series
from runs.roles import reader_required
from runs.views.params import chart_choice
from sweepcore.spec import dump_yaml


@reader_required
def sweep_detail(request, sweep_id):
    """The sweep page. Run rows carry point counts per status from one aggregate query;
    the points themselves come page by page from points-table.json."""
    sweep = get_object_or_404(Sweep.objects.select_related("host", "engine", "llm", "owner"), pk=sweep_id)
    runs = list(Run.objects.filter(sweep=sweep).select_related("known_failure").order_by("position"))
    per_run = {run.pk: {} for run in runs}
    counts = {}
    rows = Point.objects.filter(run__sweep=sweep).values("run_id", "status").annotate(n=Count("id")).order_by()
    for row in rows:
        per_run.setdefault(row["run_id"], {})[row["status"]] = row["n"]
        counts[row["status"]] = counts.get(row["status"], 0) + row["n"]
    for run in runs:
        # In the order statuses are declared, as progress.json sends them.
        run.status_counts = {v: per_run[run.pk][v] for v in PointStatus.values if per_run[run.pk].get(v)}
        run.point_total = sum(run.status_counts.values())
    progress = _point_progress(counts)
    return render(
        request,
        "runs/sweep_detail.html",
        {
            "sweep": sweep,
            "runs": runs,
            "point_total": progress["total"],
            "status_counts": [
                (value, label, counts[value]) for value, label in PointStatus.choices if counts.get(value)
            ],
            "points_to_measure": progress["to_measure"],
            "points_finished": progress["done"],
            "progress_pct": progress["pct"],
            "spec_yaml": dump_yaml(sweep.spec),
            "chart_height_px": 140 + 24 * len(runs),  # title, axis and legend, then a bar per run
            "status_chart": {
                "labels": [run.config_label for run in runs],
                "datasets": [
                    {"status": value, "label": label, "data": [run.status_counts.get(value, 0) for run in runs]}
                    for value, label in PointStatus.choices
                    if counts.get(value)
                ],
            },
            "per_page_choices": (50, points_table_lib.DEFAULT_PER_PAGE, 200, points_table_lib.MAX_PER_PAGE),
        },
    )


@reader_required
def sweep_points_table(request, sweep_id):
    """One page of the sweep's points, sorted and filtered (runs.results.points_table); a bad
    parameter is a 400 saying which."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    try:
        return JsonResponse(points_table_lib.points_table(sweep.pk, points_table_lib.parse_query(request.GET)))
    except points_table_lib.TableQueryError as exc:
        return JsonResponse({"error": str(exc)}, status=400)


FINISHED_SWEEP = (SweepStatus.DONE, SweepStatus.CANCELLED)


LOG_TAIL_LINES = 200


LOG_TAIL_MAX_BYTES = 1 << 20  # never read more than this from the end of a server log


def _point_progress(counts):
    """Points of a status -> count mapping: total, to measure (skipped ones are settled),
    finished among those, and the percentage."""
    total = sum(counts.values())
    to_measure = total - counts.get(PointStatus.SKIPPED, 0)
    done = to_measure - counts.get(PointStatus.PLANNED, 0)
    return {
        "done": done,
        "to_measure": to_measure,
        "total": total,
        "pct": round(100 * done / to_measure) if to_measure else 100,
    }


@reader_required
def sweep_progress(request, sweep_id):
    """The sweep page's live state, polled by sweep_live.js. Three queries whatever the
    number of runs: the sweep, its runs, and point counts per run and status."""
    sweep = get_object_or_404(Sweep.objects.only("id", "status"), pk=sweep_id)
    runs = list(
        Run.objects.filter(sweep=sweep)
        .only("id", "position", "method", "params", "tp", "status", "reason", "failure_kind", "failure_cause")
        .order_by("position")
    )
    per_run = {run.pk: {} for run in runs}
    overall = {}
    rows = (
        Point.objects.filter(run__sweep=sweep)
        .values("run_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in rows:
        per_run.setdefault(row["run_id"], {})[row["status"]] = row["n"]
        overall[row["status"]] = overall.get(row["status"], 0) + row["n"]
    labels = dict(PointStatus.choices)
    return JsonResponse(
        {
            "sweep": {
                "id": sweep.pk,
                "status": sweep.status,
                "status_display": sweep.get_status_display(),
                "finished": sweep.status in FINISHED_SWEEP,
            },
            "progress": _point_progress(overall),
            "counts": {value: overall[value] for value in PointStatus.values if overall.get(value)},
            "status_labels": labels,
            "runs": [
                {
                    "id": run.pk,
                    "label": run.config_label,
                    "status": run.status,
                    "status_display": run.get_status_display(),
                    "failure_kind": run.failure_kind,
                    "failure_kind_display": run.get_failure_kind_display() if run.failure_kind else "",
                    "failure_cause": run.failure_cause,
                    "reason": run.failure_cause or run.reason,
                    "points": {
                        **_point_progress(per_run[run.pk]),
                        "counts": {v: per_run[run.pk][v] for v in PointStatus.values if per_run[run.pk].get(v)},
                    },
                }
                for run in runs
            ],
        }
    )


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


def _log_tail(run):
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


@reader_required
def run_drawer(request, run_id):
    """Everything about one run for the side panel: timeline, what was launched, what the
    server said, why it failed, and the tail of its log. Plain JSON text: the page inserts
    it with textContent, so it is never interpreted as HTML."""
    run = get_object_or_404(Run, pk=run_id)
    events = RunEvent.objects.filter(run=run).order_by("at", "id")
    argv = run.argv if isinstance(run.argv, list) else []
    return JsonResponse(
        {
            "run": {
                "id": run.pk,
                "sweep_id": run.sweep_id,
                "label": run.config_label,
                "method": run.method,
                "params": run.params,
                "tp": run.tp,
                "attempt": run.attempt,
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
            "log": _log_tail(run),
            "telemetry": gpu_series(run.pk),
        }
    )


def _sweep_action(request, sweep_id, action, verb):
    sweep = get_object_or_404(Sweep, pk=sweep_id)
    try:
        result = action(sweep)
    except SweepStateError as exc:
        messages.error(request, f"Cannot {verb} sweep #{sweep.pk}: {exc}.")
    else:
        if verb == "launch":
            messages.success(request, f"Sweep #{sweep.pk} launched: {len(result)} run(s) queued on host.{sweep.host.name}.")
        elif verb == "cancel":
            messages.success(
                request, f"Sweep #{sweep.pk} cancelled: {result} waiting run(s) will not start; a running one stops at its next point."
            )
        elif result:
            messages.success(request, f"Sweep #{sweep.pk} resumed: {len(result)} run(s) queued.")
        else:
            messages.info(request, f"Sweep #{sweep.pk} has no unfinished run to resume.")
    return redirect("sweep-detail", sweep_id=sweep.pk)


@reader_required
@require_POST
@permission_required("benchmarks.launch_sweep", raise_exception=True)
def sweep_launch(request, sweep_id):
    return _sweep_action(request, sweep_id, launch_sweep, "launch")


@reader_required
@require_POST
@permission_required("benchmarks.launch_sweep", raise_exception=True)
def sweep_cancel(request, sweep_id):
    return _sweep_action(request, sweep_id, cancel_sweep, "cancel")


@reader_required
@require_POST
@permission_required("benchmarks.launch_sweep", raise_exception=True)
def sweep_resume(request, sweep_id):
    return _sweep_action(request, sweep_id, resume_sweep, "resume")


@reader_required
def sweep_charts(request, sweep_id):
    """The comparison charts of a sweep, Chart.js-ready (runs.results.charts): the overview, or
    ?family=ID / ?chart=ID of the families it lists; 404 with {"error"} for an unknown id."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    try:
        return JsonResponse(build_sweep_charts(sweep.pk, **chart_choice(request.GET)))
    except UnknownChart as exc:
        return JsonResponse({"error": str(exc)}, status=404)


@reader_required
def sweep_points_csv(request, sweep_id):
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return export_response("points.csv", Q(run__sweep_id=sweep.pk), f"sweep-{sweep.pk}", {"sweep": sweep.pk})


@reader_required
def sweep_points_json(request, sweep_id):
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return export_response("points.json", Q(run__sweep_id=sweep.pk), f"sweep-{sweep.pk}", {"sweep": sweep.pk})


@reader_required
def sweep_requests_jsonl(request, sweep_id):
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return export_response("requests.jsonl", Q(run__sweep_id=sweep.pk), f"sweep-{sweep.pk}", {"sweep": sweep.pk})
