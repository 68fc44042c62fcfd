"""Comparison charts of any runs, across sweeps (/charts/?runs=1,2,3)."""

from django.http import JsonResponse
from django.shortcuts import render

from runs.models import Run
from runs.results.charts import UnknownChart
from runs.results.charts import run_charts as build_run_charts
from runs.roles import reader_required
from runs.views.params import chart_choice


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
    """JSON: runs.results.charts for the chosen runs (with ?family=ID / ?chart=ID as for a sweep);
    400 with {"error"} for a bad selection, 404 for an unknown family or chart."""
    try:
        runs = _selected_runs(request.GET)
    except _BadSelection as exc:
        return JsonResponse({"error": f"Cannot chart this selection: {exc}."}, status=400)
    try:
        data = build_run_charts([run.pk for run in runs], **chart_choice(request.GET))
    except UnknownChart as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    data["runs"] = [
        {"id": run.pk, "sweep": run.sweep_id, "sweep_name": run.sweep.name, "label": run.config_label}
        for run in runs
    ]
    return JsonResponse(data)
