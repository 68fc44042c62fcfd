"""The sweep page and what it fetches live: its partials (the live rows and progress, the
points table, the run drawer) and their JSON twins (progress.json, points-table.json,
drawer.json), charts.json and load-charts.json, launch / cancel / resume, and the sweep's
exports."""

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.db.models import Q
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.html import escape
from django.views.decorators.http import require_POST

from benchmarks.models import Sweep
from runs.forms import chart_choice
from runs.lifecycle import SweepStateError, action_refusals, cancel_sweep, launch_sweep, queued_on, resume_sweep
from runs.models import PointStatus, Run
from runs.queryparams import QueryError
from runs.results import live
from runs.results import points_table as points_table_lib
from runs.results.capacity import capacity_table
from runs.results.gantt import gantt_section
from runs.results.charts import UnknownChart
from runs.results.charts import sweep_charts as build_sweep_charts
from runs.results.exports import export_response
from runs.results.load_charts import has_load_curves, load_charts
from runs.results.points_page import PAGE_PER_PAGE, points_page
from runs.roles import reader_required
from sweepcore.spec import dump_yaml, host_names

# The event the live partial triggers when points changed status: the points table, which
# listens for this name, reloads.
POINTS_CHANGED = "points-changed"


@reader_required
def sweep_detail(request, sweep_id):
    """The sweep page. Its run rows and progress are the partials the live endpoint sends
    again (templates/runs/partials/); the points table's partial comes once the page has
    loaded."""
    sweep = get_object_or_404(Sweep.objects.select_related("host", "engine", "llm", "owner"), pk=sweep_id)
    state = live.sweep_state(sweep)
    runs = state["runs"]
    return render(
        request,
        "runs/sweep_detail.html",
        {
            **state,
            "refusals": action_refusals(sweep, runs, state["counts"]),
            "spec_yaml": dump_yaml(sweep.spec),
            # Configurations ranked by goodput per GPU within the SLO; None without a search.
            "capacity": capacity_table(sweep.pk, sweep.spec),
            # Which GPUs each run held, when; None before any lease (or on a CPU host).
            **gantt_section(sweep),
            "hosts": host_names(sweep.spec, sweep.host.name),
            "load_curves": has_load_curves(sweep.pk),
            # ?valid_only=1: the charts and the points table hide suspect and invalid points
            "valid_only": request.GET.get("valid_only") == "1",
            "points_per_page": PAGE_PER_PAGE,
            # title, axis and legend, then a bar per run, the plot at least 230 px tall
            "chart_height_px": 110 + max(230, 14 * len(runs)),
        },
    )


@reader_required
def sweep_live_partial(request, sweep_id):
    """The sweep page's live parts, polled every 2 s by the page while the sweep is not
    finished (the poller it sends stops then). ``?seen=`` is the counts key the page has:
    when the points moved since, the HX-Trigger header tells the points table to reload."""
    sweep = get_object_or_404(Sweep.objects.select_related("engine", "host", "llm"), pk=sweep_id)
    state = live.sweep_state(sweep)
    response = render(request, "runs/partials/sweep_live.html", {
        **state, **gantt_section(sweep), "refusals": action_refusals(sweep, state["runs"], state["counts"])})
    if request.GET.get("seen", state["counts_key"]) != state["counts_key"]:
        response["HX-Trigger"] = POINTS_CHANGED
    return response


@reader_required
def sweep_points_table(request, sweep_id):
    """One page of the sweep's points, sorted and filtered (runs.results.points_table); a bad
    parameter is a 400 saying which."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    try:
        return JsonResponse(points_table_lib.points_table(sweep.pk, points_table_lib.parse_query(request.GET)))
    except points_table_lib.TableQueryError as exc:
        return JsonResponse({"error": str(exc)}, status=400)


@reader_required
def sweep_points_table_partial(request, sweep_id):
    """The points table of the sweep page for the same parameters as points-table.json; a
    bad parameter is a 400 whose message replaces the table's state line."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    try:
        table = points_page(sweep.pk, points_table_lib.parse_query(request.GET))
    except points_table_lib.TableQueryError as exc:
        response = HttpResponse(escape(f"The points could not be loaded: {exc}"), status=400)
        response["HX-Retarget"] = "#points-state"
        response["HX-Reswap"] = "innerHTML"
        return response
    return render(request, "runs/partials/points_table.html", {"table": table, "points_changed": POINTS_CHANGED})


@reader_required
def sweep_progress(request, sweep_id):
    """The sweep's live state as JSON, for API users. Three queries whatever the number of
    runs: the sweep, its runs, and point counts per run and status (a few more while runs
    wait: what they wait for)."""
    sweep = get_object_or_404(Sweep.objects.select_related("host"), pk=sweep_id)
    state = live.sweep_state(sweep)
    return JsonResponse(
        {
            "sweep": {
                "id": sweep.pk,
                "status": sweep.status,
                "status_display": sweep.get_status_display(),
                "finished": state["finished"],
            },
            "progress": state["progress"],
            # What its waiting runs wait for, in words (runs.results.waiting); null when none waits.
            "waiting": state["waiting"],
            "counts": state["counts"],
            "status_labels": dict(PointStatus.choices),
            "verdicts": {value: count for value, _, count in state["verdicts"]},
            "simulated_time_scales": state["simulated_scales"],
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
                    "points": {**run.progress, "counts": run.status_counts},
                }
                for run in state["runs"]
            ],
        }
    )


@reader_required
def run_drawer(request, run_id):
    """Everything about one run for the side panel (runs.results.live.run_drawer), as JSON."""
    return JsonResponse(live.run_drawer(get_object_or_404(Run, pk=run_id)))


@reader_required
def run_drawer_partial(request, run_id):
    """The run drawer's content; it polls itself every 2 s while the run's sweep is not
    finished, as the rows do."""
    run = get_object_or_404(Run.objects.select_related("sweep"), pk=run_id)
    drawer = live.run_drawer(run)
    return render(
        request,
        "runs/partials/run_drawer.html",
        {**drawer, "live": run.sweep.status not in live.FINISHED_SWEEP,
         "thinned": live.telemetry_thinned(drawer["telemetry"])},
    )


def _sweep_action(request, sweep_id, action, verb):
    sweep = get_object_or_404(Sweep, pk=sweep_id)
    try:
        result = action(sweep)
    except SweepStateError as exc:
        messages.error(request, f"Cannot {verb} sweep #{sweep.pk}: {exc}.")
    else:
        if verb == "launch":
            messages.success(request, f"Sweep #{sweep.pk} launched: {len(result)} run(s) queued on {queued_on(sweep)}.")
        elif verb == "cancel":
            messages.success(
                request, f"Sweep #{sweep.pk} cancelled: {result} waiting run(s) will not start; a running one stops at its next point."
            )
        else:
            messages.success(request, f"Sweep #{sweep.pk} resumed: {len(result)} run(s) queued.")
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
    ?family=ID / ?chart=ID of the families it lists; 404 with {"error"} for an unknown id, 400
    for one that cannot be an id (runs.queryparams.TextParam)."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    try:
        return JsonResponse(build_sweep_charts(sweep.pk, **chart_choice(request.GET)))
    except QueryError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    except UnknownChart as exc:
        return JsonResponse({"error": str(exc)}, status=404)


@reader_required
def sweep_load_charts(request, sweep_id):
    """The sweep's curves against load and its Pareto view, Chart.js-ready
    (runs.results.load_charts)."""
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return JsonResponse(load_charts(sweep.pk))


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
