import os
import shlex
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q
from django.http import HttpResponseForbidden, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from benchmarks.catalog import load_catalog
from benchmarks.models import Sweep, SweepStatus
from benchmarks.spec import SpecError, dump_yaml, load_yaml, validate
from runs.charts import sweep_charts as build_sweep_charts
from runs.models import Point, PointStatus, Run, RunEvent
from runs.sweeps import SweepStateError, cancel_sweep, create_sweep, launch_sweep, plan_spec, resume_sweep

SWEEPS_PER_PAGE = 50


@login_required
def sweep_list(request):
    sweeps = (
        Sweep.objects.select_related("host", "engine", "llm", "owner")
        .annotate(
            run_count=Count("runs", distinct=True),
            point_count=Count("runs__points"),
            points_measured=Count(
                "runs__points",
                filter=~Q(runs__points__status__in=[PointStatus.PLANNED, PointStatus.SKIPPED]),
            ),
            points_skipped=Count("runs__points", filter=Q(runs__points__status=PointStatus.SKIPPED)),
        )
        .order_by("-created_at", "-id")
    )
    status = request.GET.get("status", "")
    if status:
        sweeps = sweeps.filter(status=status)
    page = Paginator(sweeps, SWEEPS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/sweep_list.html",
        {"page": page, "status": status, "statuses": Sweep._meta.get_field("status").choices},
    )


@login_required
def sweep_detail(request, sweep_id):
    sweep = get_object_or_404(Sweep.objects.select_related("host", "engine", "llm", "owner"), pk=sweep_id)
    points = Point.objects.select_related("workload").order_by("position")
    runs = list(
        Run.objects.filter(sweep=sweep)
        .select_related("known_failure")
        .prefetch_related(Prefetch("points", queryset=points))
        .order_by("position")
    )
    counts = {}
    for run in runs:
        run.status_counts = {}
        for point in run.points.all():
            run.status_counts[point.status] = run.status_counts.get(point.status, 0) + 1
            counts[point.status] = counts.get(point.status, 0) + 1
        run.point_total = len(run.points.all())
    point_total = sum(counts.values())
    # Progress over the points there is something to do for: skipped ones are settled.
    to_measure = point_total - counts.get(PointStatus.SKIPPED, 0)
    finished = to_measure - counts.get(PointStatus.PLANNED, 0)
    return render(
        request,
        "runs/sweep_detail.html",
        {
            "sweep": sweep,
            "runs": runs,
            "point_total": point_total,
            "status_counts": [
                (value, label, counts[value]) for value, label in PointStatus.choices if counts.get(value)
            ],
            "points_to_measure": to_measure,
            "points_finished": finished,
            "progress_pct": round(100 * finished / to_measure) if to_measure else 100,
            "spec_yaml": dump_yaml(sweep.spec),
            "chart_height_px": 90 + 22 * len(runs),
            "status_chart": {
                "labels": [run.config_label for run in runs],
                "datasets": [
                    {"status": value, "label": label, "data": [run.status_counts.get(value, 0) for run in runs]}
                    for value, label in PointStatus.choices
                    if counts.get(value)
                ],
            },
        },
    )


# --- Live sweep page: progress.json, the run drawer, cancel and resume -------------------

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


@login_required
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


@login_required
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


@login_required
@require_POST
@permission_required("benchmarks.launch_sweep", raise_exception=True)
def sweep_launch(request, sweep_id):
    return _sweep_action(request, sweep_id, launch_sweep, "launch")


@login_required
@require_POST
@permission_required("benchmarks.launch_sweep", raise_exception=True)
def sweep_cancel(request, sweep_id):
    return _sweep_action(request, sweep_id, cancel_sweep, "cancel")


@login_required
@require_POST
@permission_required("benchmarks.launch_sweep", raise_exception=True)
def sweep_resume(request, sweep_id):
    return _sweep_action(request, sweep_id, resume_sweep, "resume")


@login_required
def sweep_charts(request, sweep_id):
    """The comparison charts of a sweep, Chart.js-ready (runs.charts)."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return JsonResponse(build_sweep_charts(sweep.pk))


# --- Sweep builder: a YAML spec, its live plan preview, save as draft or launch ---------

BUILDER_EXAMPLE = Path(settings.BASE_DIR) / "examples" / "qwen3.6-27b-sm120.yaml"


def _error_entries(errors):
    """"path: message" lines as {"path", "message"} for the page to place."""
    entries = []
    for line in errors:
        path, sep, message = line.partition(": ")
        entries.append({"path": path if sep else "", "message": message if sep else line})
    return entries


def plan_preview(spec_text):
    """What the builder shows: validation errors, or the plan's runs, skips and quarantines."""
    catalog = load_catalog()
    try:
        spec = validate(load_yaml(spec_text, source="spec"), catalog)
        the_plan = plan_spec(spec, catalog)
    except SpecError as exc:
        return {"valid": False, "errors": _error_entries(exc.errors)}
    skips = {}
    for run in the_plan.runs:
        for p in run.points:
            if p.status == "skipped" and not run.reason:
                length = f" {p.prompt_tokens} tokens" if p.prompt_tokens is not None else ""
                key = (f"{p.workload}{length} x{p.concurrency}", p.reason)
                skips[key] = skips.get(key, 0) + 1
    return {
        "valid": True,
        "errors": [],
        "warnings": the_plan.warnings,
        "totals": the_plan.totals,
        "runs": [
            {
                "label": r.label,
                "status": r.status,
                "reason": r.reason,
                "planned": sum(p.status == "planned" for p in r.points),
                "points": len(r.points),
            }
            for r in the_plan.runs
        ],
        "skips": [{"point": point, "reason": reason, "runs": n} for (point, reason), n in skips.items()],
        "quarantined": [
            {"label": r.label, "failure_kind": r.quarantine.failure_kind, "signature": r.quarantine.signature,
             "retrying": r.retry_quarantined}
            for r in the_plan.runs
            if r.quarantine is not None
        ],
    }


@login_required
@permission_required("benchmarks.add_sweep", raise_exception=True)
def sweep_new(request):
    """GET: the builder (from the example, or ?clone=ID). POST: save as draft, or launch."""
    errors = []
    if request.method == "POST":
        spec_text = request.POST.get("spec_yaml", "")
        launch = request.POST.get("action") == "launch"
        if launch and not request.user.has_perm("benchmarks.launch_sweep"):
            return HttpResponseForbidden("You may save drafts but not launch sweeps.")
        catalog = load_catalog()
        try:
            spec = validate(load_yaml(spec_text, source="spec"), catalog)
            sweep, _ = create_sweep(spec, owner=request.user, catalog=catalog)
            if launch:
                launch_sweep(sweep)
        except (SpecError, SweepStateError) as exc:
            errors = _error_entries(exc.errors if isinstance(exc, SpecError) else [str(exc)])
        else:
            verb = "launched" if launch else "saved as a draft"
            messages.success(request, f"Sweep #{sweep.pk} {verb}.")
            return redirect("sweep-detail", sweep_id=sweep.pk)
    else:
        clone = request.GET.get("clone")
        source = Sweep.objects.filter(pk=clone).first() if clone and clone.isdigit() else None
        if source is not None:
            spec_text = dump_yaml(source.spec)
        elif BUILDER_EXAMPLE.exists():
            spec_text = BUILDER_EXAMPLE.read_text()
        else:
            spec_text = ""
    return render(
        request,
        "runs/sweep_new.html",
        {"spec_yaml": spec_text, "errors": errors, "can_launch": request.user.has_perm("benchmarks.launch_sweep")},
        status=400 if errors else 200,
    )


@login_required
@require_POST
@permission_required("benchmarks.add_sweep", raise_exception=True)
def sweep_plan_preview(request):
    return JsonResponse(plan_preview(request.POST.get("spec_yaml", "")))
