import csv
import json
import os
import shlex
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpResponseForbidden, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from benchmarks.catalog import load_catalog
from benchmarks.models import Sweep, SweepStatus
from benchmarks.spec import DEFAULTS, METHOD_PARAMS, OPTION_DEFAULTS, SpecError, dump_yaml, load_yaml, validate
from runs import compare as compare_lib
from runs import metrics
from runs import points_table as points_table_lib
from runs import history as hist
from runs.charts import UnknownChart
from runs.charts import run_charts as build_run_charts
from runs.charts import sweep_charts as build_sweep_charts
from runs.curation import notes_for
from runs.estimate import estimate as estimate_duration
from runs.forms import ImportForm
from runs.importers import ImportRefused
from runs.imports import import_file
from runs.estimate import load_history
from runs.gpu_series import gpu_series
from runs.models import Point, PointStatus, RequestRecord, Run, RunEvent
from runs.roles import reader_required
from runs.sweeps import SweepStateError, cancel_sweep, create_sweep, launch_sweep, plan_spec, resume_sweep

SWEEPS_PER_PAGE = 50


@reader_required
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
    """One page of the sweep's points, sorted and filtered (runs.points_table); a bad
    parameter is a 400 saying which."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    try:
        return JsonResponse(points_table_lib.points_table(sweep.pk, points_table_lib.parse_query(request.GET)))
    except points_table_lib.TableQueryError as exc:
        return JsonResponse({"error": str(exc)}, status=400)


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


def _chart_choice(query):
    """?family=ID or ?chart=ID (runs.charts.build_charts): the overview when neither."""
    return {"family": query.get("family") or None, "chart": query.get("chart") or None}


@reader_required
def sweep_charts(request, sweep_id):
    """The comparison charts of a sweep, Chart.js-ready (runs.charts): the overview, or
    ?family=ID / ?chart=ID of the families it lists; 404 with {"error"} for an unknown id."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    try:
        return JsonResponse(build_sweep_charts(sweep.pk, **_chart_choice(request.GET)))
    except UnknownChart as exc:
        return JsonResponse({"error": str(exc)}, status=404)


# --- Comparison charts of any runs, across sweeps (/charts/?runs=1,2,3) -------------------


class _BadSelection(ValueError):
    pass


def _selected_runs(query):
    """The runs of ?runs=1,2,3 (or runs=1&runs=2, as a form of checkboxes sends them), in
    the order given, with their sweeps: one query. Raises _BadSelection naming what is wrong."""
    ids = []
    for value in query.getlist("runs"):
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            if not part.isdigit():
                raise _BadSelection(f"“{part}” is not a run id: give ids like ?runs=1,2,3")
            if int(part) not in ids:
                ids.append(int(part))
    if not ids:
        raise _BadSelection("no runs selected: give run ids like ?runs=1,2,3")
    found = {
        run.pk: run
        for run in Run.objects.filter(pk__in=ids).select_related("sweep").only(
            "id", "sweep_id", "method", "params", "tp", "attempt", "status", "excluded", "exclude_reason",
            "sweep__id", "sweep__name"
        )
    }
    missing = [str(i) for i in ids if i not in found]
    if missing:
        raise _BadSelection(f"no run #{', #'.join(missing)}")
    return [found[i] for i in ids]


@reader_required
def run_selection_charts(request):
    """The comparison charts of chosen runs, from any sweeps (charts.js draws them)."""
    context = {"runs": [], "error": "", "sweeps": []}
    if request.GET.get("runs", "").strip():
        try:
            runs = _selected_runs(request.GET)
        except _BadSelection as exc:
            context["error"] = f"Cannot chart this selection: {exc}."
        else:
            ids = ",".join(str(run.pk) for run in runs)
            context.update(
                runs=runs,
                ids=ids,
                sweeps=list({run.sweep_id: run.sweep for run in runs}.values()),
                compare_query="&".join(f"run={run.pk}" for run in runs),
            )
    return render(request, "runs/run_charts.html", context, status=400 if context["error"] else 200)


@reader_required
def run_selection_charts_data(request):
    """JSON: runs.charts for the chosen runs (with ?family=ID / ?chart=ID as for a sweep);
    400 with {"error"} for a bad selection, 404 for an unknown family or chart."""
    try:
        runs = _selected_runs(request.GET)
    except _BadSelection as exc:
        return JsonResponse({"error": f"Cannot chart this selection: {exc}."}, status=400)
    try:
        data = build_run_charts([run.pk for run in runs], **_chart_choice(request.GET))
    except UnknownChart as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    data["runs"] = [
        {"id": run.pk, "sweep": run.sweep_id, "sweep_name": run.sweep.name, "label": run.config_label}
        for run in runs
    ]
    return JsonResponse(data)


# --- Sweep builder: a form and a YAML view of one spec, its live plan preview, save ---------

BUILDER_EXAMPLE = Path(settings.BASE_DIR) / "examples" / "qwen3.6-27b-sm120.yaml"
SPEC_JSON_MAX_BYTES = 1 << 20


def _error_entries(errors):
    """"path: message" lines as {"path", "message"} for the page to place."""
    entries = []
    for line in errors:
        path, sep, message = line.partition(": ")
        entries.append({"path": path if sep else "", "message": message if sep else line})
    return entries


def builder_input(post):
    """The spec data the builder sent, and its YAML text.

    The form view sends ``spec_json`` (the data it edits) with ``editor=form``; the YAML
    view sends ``spec_yaml``. Returns (data, yaml_text); data is None when the text does
    not parse, and SpecError is raised with the parse error."""
    if post.get("editor") == "form":
        raw = post.get("spec_json", "")
        if len(raw) > SPEC_JSON_MAX_BYTES:
            raise SpecError(f"spec: more than {SPEC_JSON_MAX_BYTES} bytes")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise SpecError(f"spec: the form sent data that is not JSON ({exc})") from None
        return data, dump_yaml(data) if isinstance(data, dict) else ""
    text = post.get("spec_yaml", "")
    return load_yaml(text, source="spec"), text


def _quarantine_rule(run):
    return {"method": run.method, **run.params, "tp": run.tp}


def plan_preview(post):
    """What the builder shows: the spec as data and as YAML, its validation errors, or the
    plan's runs, skips, quarantines and the duration estimate."""
    try:
        data, text = builder_input(post)
    except SpecError as exc:
        return {"valid": False, "parsed": False, "errors": _error_entries(exc.errors)}
    answer = {"parsed": True, "data": data, "spec_yaml": text}
    catalog = load_catalog()
    try:
        spec = validate(data, catalog)
        the_plan = plan_spec(spec, catalog)
    except SpecError as exc:
        return {**answer, "valid": False, "errors": _error_entries(exc.errors)}
    skips = {}
    for run in the_plan.runs:
        for p in run.points:
            if p.status == "skipped" and not run.reason:
                length = f" {p.prompt_tokens} tokens" if p.prompt_tokens is not None else ""
                key = (f"{p.workload}{length} x{p.concurrency}", p.reason)
                skips[key] = skips.get(key, 0) + 1
    history = load_history(spec, catalog.hosts[spec.host].gpu_model)
    return {
        **answer,
        "valid": True,
        "errors": [],
        "warnings": the_plan.warnings,
        "totals": the_plan.totals,
        "estimate": estimate_duration(the_plan, spec.requests_per_point, spec.warmup_requests, history),
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
             "retrying": r.retry_quarantined, "rule": _quarantine_rule(r)}
            for r in the_plan.runs
            if r.quarantine is not None
        ],
    }


def builder_catalog(catalog):
    """What the form offers: the catalog's names and what each method takes."""
    return {
        "hosts": [{"name": h.name, "gpu_count": h.gpu_count, "gpu_model": h.gpu_model} for h in catalog.hosts.values()],
        "engines": [{"name": e.name, "kind": e.kind, "methods": list(e.methods)} for e in catalog.engines.values()],
        "models": [{"name": m.name, "context_length": m.context_length} for m in catalog.models.values()],
        "workloads": [{"name": w.name, "kind": w.kind} for w in catalog.workloads.values()],
        "method_params": {
            method: [{"name": p.name, "swept": p.swept, "default": p.default} for p in params]
            for method, params in METHOD_PARAMS.items()
        },
        "defaults": {**DEFAULTS, "options": OPTION_DEFAULTS},
    }


@reader_required
@permission_required("benchmarks.add_sweep", raise_exception=True)
def sweep_new(request):
    """GET: the builder (from the example, or ?clone=ID). POST: save as draft, or launch."""
    errors = []
    data = None
    editor = "form"
    if request.method == "POST":
        launch = request.POST.get("action") == "launch"
        if launch and not request.user.has_perm("benchmarks.launch_sweep"):
            return HttpResponseForbidden("You may save drafts but not launch sweeps.")
        editor = "form" if request.POST.get("editor") == "form" else "yaml"
        spec_text = request.POST.get("spec_yaml", "")
        catalog = load_catalog()
        try:
            data, spec_text = builder_input(request.POST)
            spec = validate(data, catalog)
            sweep, _ = create_sweep(spec, owner=request.user, catalog=catalog)
            if launch:
                launch_sweep(sweep)
        except (SpecError, SweepStateError) as exc:
            errors = _error_entries(exc.errors if isinstance(exc, SpecError) else [str(exc)])
            if data is None:
                editor = "yaml"  # the text does not parse: the form has nothing to show
        else:
            verb = "launched" if launch else "saved as a draft"
            messages.success(request, f"Sweep #{sweep.pk} {verb}.")
            return redirect("sweep-detail", sweep_id=sweep.pk)
    else:
        catalog = load_catalog()
        clone = request.GET.get("clone")
        source = Sweep.objects.filter(pk=clone).first() if clone and clone.isdigit() else None
        if source is not None:
            spec_text = dump_yaml(source.spec)
        elif BUILDER_EXAMPLE.exists():
            spec_text = BUILDER_EXAMPLE.read_text()
        else:
            spec_text = ""
        try:
            data = load_yaml(spec_text, source="spec")
        except SpecError:
            editor = "yaml"
    return render(
        request,
        "runs/sweep_new.html",
        {
            "spec_yaml": spec_text,
            "errors": errors,
            "builder": {"data": data, "errors": errors, "editor": editor, "catalog": builder_catalog(catalog)},
            "can_launch": request.user.has_perm("benchmarks.launch_sweep"),
        },
        status=400 if errors else 200,
    )


@reader_required
@require_POST
@permission_required("benchmarks.add_sweep", raise_exception=True)
def sweep_plan_preview(request):
    return JsonResponse(plan_preview(request.POST))


# --- Import a vLLM / SGLang result file (runs.imports) -------------------------------------


@reader_required
@permission_required("benchmarks.add_sweep", raise_exception=True)
def import_new(request):
    """GET: the upload form. POST: import the file as a sweep, or say why not (400)."""
    error = ""
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            result = import_file(
                data["file"].name, data["file"].read(), fmt=data["format"] or None, host=data["host"],
                model=data["model"] or None, user=request.user, engine=data["engine"] or None, tp=data["tp"],
                workload=data["workload"] or None,
            )
        except ImportRefused as exc:
            error = str(exc)
        else:
            (messages.success if result.created else messages.info)(request, result.message + ".")
            return redirect("sweep-detail", sweep_id=result.sweep.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "runs/import_new.html", {"form": form, "error": error}, status=status)


# -- History: one series across sweeps, with regression detection (runs/history.py). --------

HISTORY_MAX_WINDOW = 100


class _BadQuery(ValueError):
    pass


def _int_param(query, name, default=None, minimum=0, maximum=None):
    try:
        return points_table_lib.int_param(query, name, default, minimum=minimum, maximum=maximum)
    except points_table_lib.TableQueryError as exc:
        raise _BadQuery(str(exc)) from None


def _history_query(query):
    """Validated history parameters from a GET query; raises _BadQuery (a ValueError)."""
    filters = {
        "model": query.get("model", ""),
        "engine": query.get("engine", ""),
        "method": query.get("method", ""),
        "params": query.get("params", "") or "{}",
        "tp": _int_param(query, "tp", minimum=1),
        "workload": query.get("workload", ""),
        "prompt_tokens": _int_param(query, "prompt_tokens", minimum=1),
        "concurrency": _int_param(query, "concurrency", minimum=1),
        "gpu": query.get("gpu", ""),
    }
    config = query.get("config", "")
    if config:  # the page's select: "method:params_key"
        filters["method"], _, filters["params"] = config.partition(":")
        filters["params"] = filters["params"] or "{}"
    metric = query.get("metric", "") or hist.DEFAULT_METRIC
    try:
        hist.validate_metric(metric)
    except ValueError as exc:
        raise _BadQuery(str(exc)) from None
    raw = query.get("threshold", "")
    try:
        threshold = float(raw) if raw != "" else hist.DEFAULT_THRESHOLD
    except ValueError:
        raise _BadQuery(f"threshold must be a number, got {raw!r}") from None
    if not (0 < threshold < 1000):
        raise _BadQuery(f"threshold must be > 0 and < 1000, got {raw}")
    window = _int_param(query, "window", hist.DEFAULT_WINDOW, minimum=hist.MIN_HISTORY,
                        maximum=HISTORY_MAX_WINDOW)
    show_excluded = query.get("show_excluded", "") in ("1", "true", "on", "yes")
    return filters, metric, threshold, window, show_excluded


@reader_required
def history(request):

    try:
        filters, metric, threshold, window, show_excluded = _history_query(request.GET)
        error = ""
    except ValueError as exc:
        filters, metric, threshold, window, show_excluded = {}, hist.DEFAULT_METRIC, hist.DEFAULT_THRESHOLD, \
            hist.DEFAULT_WINDOW, False
        error = str(exc)
    complete = not error and all(
        filters.get(k) not in (None, "") for k in ("model", "engine", "method", "tp", "workload", "concurrency")
    )
    return render(
        request,
        "runs/history.html",
        {
            "choices": hist.choices(),
            "selected": {
                **{k: request.GET.get(k, "") for k in hist.SERIES_KEYS},
                "config": f"{filters['method']}:{filters['params']}" if filters.get("method") else "",
                "metric": metric,
            },
            "threshold": threshold,
            "window": window,
            "show_excluded": show_excluded,
            "complete": complete,
            "error": error,
            "query": request.GET.urlencode(),
            "method_name": hist.METHOD_NAME,
        },
        status=400 if error else 200,
    )


@reader_required
def history_data(request):
    """JSON: one series over time, its regressions and the detection method used."""

    try:
        filters, metric, threshold, window, show_excluded = _history_query(request.GET)
        points = hist.series_points(filters, metric)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    higher = metrics.higher_is_better(metric)
    flagged = {
        f["index"]: f for f in hist.detect_regressions(points, window=window, threshold=threshold, higher_is_better=higher)
    }
    notes = notes_for([p["id"] for p in points], {p["id"]: p["run_id"] for p in points})
    out = []
    regressions = []
    for index, p in enumerate(points):
        item = {
            "curation": notes[p["id"]],
            "baseline": p["is_baseline"],
            "x": p["finished_at"].isoformat() if p["finished_at"] else None,
            "y": p["value"],
            "sweep": p["sweep_id"],
            "sweep_name": p["sweep_name"],
            "run": p["run_id"],
            "point": p["id"],
            "engine_version": p["engine_version"],
            "excluded": p["excluded"],
            "exclude_reason": p["exclude_reason"],
            "regression": index in flagged,
        }
        if index in flagged:
            f = flagged[index]
            regressions.append({**item, "z": f["z"], "mean": f["mean"], "std": f["std"], "change": f["change"]})
        if show_excluded or not p["excluded"]:
            out.append(item)
    return JsonResponse({
        "series": filters,
        "metric": {"name": metric, "label": metrics.metric_label(metric), "higher_is_better": higher},
        "method": {
            "name": hist.METHOD_NAME,
            "window": window,
            "threshold": threshold,
            "min_history": hist.MIN_HISTORY,
            "zero_std_relative_change": hist.ZERO_STD_RELATIVE_CHANGE,
            "description": (
                f"z = (x - mean) / std over the last {window} earlier non-excluded points (population std, "
                f"at least {hist.MIN_HISTORY}); flagged when z {'<' if higher else '>'} "
                f"{'-' if higher else ''}{threshold:g}; with std = 0, a relative change of more than "
                f"{hist.ZERO_STD_RELATIVE_CHANGE:.0%} in the bad direction"
            ),
        },
        "show_excluded": show_excluded,
        "points": out,
        "regressions": regressions,
        "counts": {
            "points": len(points),
            "excluded": sum(p["excluded"] for p in points),
            "regressions": len(regressions),
        },
    })


@reader_required
def history_export(request, kind):
    """The exports of one history series (the history page's query): its ok points with
    their configuration, excluded ones included and flagged, and their request records."""
    if kind not in EXPORT_KINDS:
        raise Http404(f"no export {kind!r}: expected one of {', '.join(EXPORT_KINDS)}")
    try:
        filters, metric, _, _, _ = _history_query(request.GET)
        point_ids = [p["id"] for p in hist.series_points(filters, metric)]
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return _export(kind, Q(pk__in=point_ids), "history", {"series": filters, "metric": metric})


# --- Export (points.csv, points.json, requests.jsonl) and the compare page -----------------




# Export column -> the values() lookup it comes from. One list for CSV and JSON.
EXPORT_CONFIG_COLUMNS = (
    ("sweep_id", "run__sweep_id"),
    ("run_id", "run_id"),
    ("point_id", "id"),
    ("method", "run__method"),
    ("params", "run__params"),
    ("tp", "run__tp"),
    ("attempt", "run__attempt"),
    ("engine_version", "run__engine_version"),
    ("workload", "workload__name"),
    ("prompt_tokens", "prompt_tokens"),
    ("actual_prompt_tokens", "actual_prompt_tokens"),
    ("concurrency", "concurrency"),
    ("max_new_tokens", "max_new_tokens"),
    ("request_rate", "request_rate"),
    ("status", "status"),
    ("reason", "reason"),
    ("excluded", "excluded"),
)
# The metrics a point stores: those runs.metrics computes (errors is a mapping, left out
# of the flat export), and the server's own decode speed.
EXPORT_METRIC_COLUMNS = tuple(f for f in metrics.FIELDS if f != "errors") + ("server_decode_tok_s",)
EXPORT_COLUMNS = tuple(name for name, _ in EXPORT_CONFIG_COLUMNS) + EXPORT_METRIC_COLUMNS
_EXPORT_LOOKUPS = tuple(lookup for _, lookup in EXPORT_CONFIG_COLUMNS) + EXPORT_METRIC_COLUMNS

REQUEST_RECORD_FIELDS = (
    "index",
    "send_time",
    "chunk_offsets",
    "chunk_tokens",
    "prompt_tokens",
    "output_tokens",
    "token_count_source",
    "finish_reason",
    "http_status",
    "error_kind",
    "error",
    "spec_verify_ct",
)


def export_rows(points_filter):
    """The selected points as dicts keyed by EXPORT_COLUMNS, in plan order: one query."""
    rows = (
        Point.objects.filter(points_filter)
        .order_by("run__sweep_id", "run__position", "run_id", "position", "id")
        .values_list(*_EXPORT_LOOKUPS)
        .iterator(chunk_size=2000)
    )
    for row in rows:
        yield dict(zip(EXPORT_COLUMNS, row))


class _Echo:
    def write(self, value):
        return value


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def _csv_lines(points_filter):
    writer = csv.writer(_Echo())
    yield writer.writerow(EXPORT_COLUMNS)
    for row in export_rows(points_filter):
        yield writer.writerow([_csv_value(row[c]) for c in EXPORT_COLUMNS])


def _request_lines(points_filter):
    records = (
        RequestRecord.objects.filter(point__in=Point.objects.filter(points_filter).values("pk"))
        .order_by("point__run__sweep_id", "point__run__position", "point__run_id", "point__position", "point_id", "index")
        .values("point_id", "point__run_id", *REQUEST_RECORD_FIELDS)
        .iterator(chunk_size=2000)
    )
    for record in records:
        line = {"point_id": record.pop("point_id"), "run_id": record.pop("point__run_id"), **record}
        yield json.dumps(line) + "\n"


def _export(kind, points_filter, name, selection):
    """One export of the points a filter selects: kind is points.csv, points.json or
    requests.jsonl; name is the file name's stem."""
    if kind == "points.csv":
        response = StreamingHttpResponse(_csv_lines(points_filter), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f"attachment; filename={name}-points.csv"
    elif kind == "points.json":
        response = JsonResponse({**selection, "columns": list(EXPORT_COLUMNS), "points": list(export_rows(points_filter))})
        response["Content-Disposition"] = f"inline; filename={name}-points.json"
    else:
        response = StreamingHttpResponse(_request_lines(points_filter), content_type="application/jsonl; charset=utf-8")
        response["Content-Disposition"] = f"attachment; filename={name}-requests.jsonl"
    return response


@reader_required
def sweep_points_csv(request, sweep_id):
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return _export("points.csv", Q(run__sweep_id=sweep.pk), f"sweep-{sweep.pk}", {"sweep": sweep.pk})


@reader_required
def sweep_points_json(request, sweep_id):
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return _export("points.json", Q(run__sweep_id=sweep.pk), f"sweep-{sweep.pk}", {"sweep": sweep.pk})


@reader_required
def sweep_requests_jsonl(request, sweep_id):
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return _export("requests.jsonl", Q(run__sweep_id=sweep.pk), f"sweep-{sweep.pk}", {"sweep": sweep.pk})


EXPORT_KINDS = ("points.csv", "points.json", "requests.jsonl")


@reader_required
def selection_export(request, kind):
    """The exports of any selection: ?sweep=A&sweep=B and/or ?run=X&run=Y (the compare
    and run-selection pages link here). Bad or unknown ids: a 400 that names them."""
    if kind not in EXPORT_KINDS:
        raise Http404(f"no export {kind!r}: expected one of {', '.join(EXPORT_KINDS)}")
    try:
        sweep_ids = _ids(request.GET.getlist("sweep"))
        run_ids = _ids(request.GET.getlist("run"))
    except ValueError as exc:
        return JsonResponse({"error": f"bad selection: {exc}"}, status=400)
    if not sweep_ids and not run_ids:
        return JsonResponse({"error": "nothing selected: give ?sweep=ID or ?run=ID, once per sweep or run"}, status=400)
    found_sweeps = set(Sweep.objects.filter(pk__in=sweep_ids).values_list("pk", flat=True))
    found_runs = set(Run.objects.filter(pk__in=run_ids).values_list("pk", flat=True))
    missing = [f"sweep {i}" for i in sweep_ids if i not in found_sweeps] + [f"run {i}" for i in run_ids if i not in found_runs]
    if missing:
        return JsonResponse({"error": f"no such {', '.join(missing)}"}, status=400)
    points_filter = Q(run__sweep_id__in=sweep_ids) if sweep_ids else Q(run_id__in=run_ids)
    if sweep_ids and run_ids:
        points_filter = Q(run__sweep_id__in=sweep_ids) | Q(run_id__in=run_ids)
    name = "-".join([f"sweep{i}" for i in sweep_ids] + [f"run{i}" for i in run_ids])[:80]
    return _export(kind, points_filter, name, {"sweeps": sweep_ids, "runs": run_ids})


COMPARE_POINT_FIELDS = (
    "run_id", "run__sweep_id", "run__method", "run__params", "run__params_key", "run__tp", "run__attempt",
    "workload__name", "prompt_tokens", "concurrency", "status", "reason", "excluded", "exclude_reason",
    "run__excluded", "run__exclude_reason",
)


def _compare_points(queryset, metric):
    rows = queryset.order_by("run__position", "run_id", "position").values(*COMPARE_POINT_FIELDS, metric)
    return [
        {
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


def _ids(values):
    ids = []
    for value in values:
        value = value.strip()
        if not value.isdigit():
            raise ValueError(f"“{value}” is not an id")
        if int(value) not in ids:
            ids.append(int(value))
    return ids


@reader_required
def compare(request):
    """Two or more sweeps (?sweep=..) or runs (?run=..) side by side for one metric; the
    first is the baseline. Bad input is a message on the page, never an error page."""
    metric = request.GET.get("metric") or compare_lib.DEFAULT_METRIC
    context = {
        "metric": metric,
        "metrics": [
            (m, metrics.metric_label(m), "higher is better" if metrics.higher_is_better(m) else "lower is better")
            for m in compare_lib.METRICS
        ],
        "errors": [],
        "groups": [],
        "rows": [],
        "mode": "",
        "chart": None,
    }
    errors = context["errors"]
    try:
        sweep_ids = _ids(request.GET.getlist("sweep"))
        run_ids = _ids(request.GET.getlist("run"))
    except ValueError as exc:
        errors.append(f"Bad selection: {exc}.")
        sweep_ids = run_ids = []
    if metric not in compare_lib.METRICS:
        errors.append(
            f"Unknown metric “{metric}”: choose one of {', '.join(compare_lib.METRICS)}."
        )
    if sweep_ids and run_ids:
        errors.append("Compare either sweeps or runs, not both.")
    elif not errors and (sweep_ids or run_ids) and len(sweep_ids or run_ids) < 2:
        errors.append("Pick two or more sweeps (or runs) to compare.")
    groups = []
    if not errors and len(sweep_ids) >= 2:
        context["mode"] = "sweep"
        sweeps = {s.pk: s for s in Sweep.objects.filter(pk__in=sweep_ids).select_related("llm", "engine", "host")}
        missing = [str(i) for i in sweep_ids if i not in sweeps]
        if missing:
            errors.append(f"No sweep #{', #'.join(missing)}.")
        else:
            points = _compare_points(Point.objects.filter(run__sweep_id__in=sweep_ids), metric)
            for sid in sweep_ids:
                s = sweeps[sid]
                groups.append({
                    "id": sid, "label": f"#{sid} {s.name}", "url": s.get_absolute_url(),
                    "detail": f"{s.llm.name} · {s.engine.name} · {s.host.name}",
                    "points": [p for p in points if p["sweep_id"] == sid],
                })
    elif not errors and len(run_ids) >= 2:
        context["mode"] = "run"
        runs = {r.pk: r for r in Run.objects.filter(pk__in=run_ids).select_related("sweep")}
        missing = [str(i) for i in run_ids if i not in runs]
        if missing:
            errors.append(f"No run #{', #'.join(missing)}.")
        else:
            points = _compare_points(Point.objects.filter(run_id__in=run_ids), metric)
            for rid in run_ids:
                r = runs[rid]
                groups.append({
                    "id": rid, "label": f"#{r.sweep_id}/{rid} {r.config_label}", "url": r.sweep.get_absolute_url(),
                    "detail": f"run #{rid} of sweep #{r.sweep_id} {r.sweep.name}",
                    "points": [p for p in points if p["run_id"] == rid],
                })
    if groups:
        selection = "&".join(f"{context['mode']}={g['id']}" for g in groups)
        context["exports"] = [
            (kind, f"{reverse('selection-export', args=[kind])}?{selection}") for kind in EXPORT_KINDS
        ]
        if context["mode"] == "run":
            context["run_ids"] = ",".join(str(group["id"]) for group in groups)
        rows = compare_lib.compare(groups, metric, mode=context["mode"])
        label = metrics.metric_label(metric)
        context.update(
            groups=[{k: v for k, v in g.items() if k != "points"} for g in groups],
            rows=rows,
            metric_label=label,
            higher_is_better=metrics.higher_is_better(metric),
            chart=compare_lib.chart_data(groups, rows, metric, mode=context["mode"]),
            chart_height_px=140 + len(rows) * (8 + 14 * len(groups)),  # a bar per group in each row
        )
    return render(request, "runs/compare.html", context, status=400 if errors else 200)
