"""Comparison charts of any runs, across sweeps (/charts/?runs=1,2,3)."""

from django.http import JsonResponse
from django.shortcuts import render

from runs.forms import RunSelectionForm, chart_choice
from runs.queryparams import QueryError
from runs.results.charts import UnknownChart
from runs.results.charts import run_charts as build_run_charts
from runs.roles import reader_required


@reader_required
def run_selection_charts(request):
    """The comparison charts of chosen runs, from any sweeps (charts.js draws them)."""
    context = {"runs": [], "error": "", "sweeps": []}
    if request.GET.get("runs", "").strip():
        try:
            runs = RunSelectionForm.parse(request.GET)["runs"]
        except QueryError as exc:
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
    400 with {"error"} for a bad selection or chart parameter, 404 for an unknown family or chart."""
    try:
        runs = RunSelectionForm.parse(request.GET)["runs"]
        choice = chart_choice(request.GET)
    except QueryError as exc:
        return JsonResponse({"error": f"Cannot chart this selection: {exc}."}, status=400)
    try:
        data = build_run_charts([run.pk for run in runs], **choice)
    except UnknownChart as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    data["runs"] = [
        {"id": run.pk, "sweep": run.sweep_id, "sweep_name": run.sweep.name, "label": run.config_label}
        for run in runs
    ]
    return JsonResponse(data)
