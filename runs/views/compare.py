"""The compare page, and the exports of any selection of sweeps or runs."""

from django.db.models import Q
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from benchmarks.models import Sweep
from runs.forms import CompareForm, SelectionForm
from runs.models import Run
from runs.results import compare as compare_lib
from runs.results import evidence
from runs.results.compare_groups import MissingSelection, compare_groups
from runs.results.exports import EXPORT_KINDS, export_response
from runs.roles import reader_required
from sweepcore import metrics


@reader_required
def selection_export(request, kind):
    """The exports of any selection: ?sweep=A&sweep=B and/or ?run=X&run=Y (the compare
    and run-selection pages link here). Bad or unknown ids: a 400 that names them."""
    if kind not in EXPORT_KINDS:
        raise Http404(f"no export {kind!r}: expected one of {', '.join(EXPORT_KINDS)}")
    form = SelectionForm(request.GET)
    if not form.is_valid():
        return JsonResponse({"error": f"bad selection: {form.selection_error()}"}, status=400)
    sweep_ids, run_ids = form.cleaned_data["sweep"], form.cleaned_data["run"]
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
    return export_response(kind, points_filter, name, {"sweeps": sweep_ids, "runs": run_ids})


@reader_required
def compare(request):
    """Two or more sweeps (?sweep=..) or runs (?run=..) side by side for one metric; the
    first is the baseline. Bad input is a message on the page, never an error page."""
    form = CompareForm(request.GET)
    form.is_valid()  # each bad parameter is a message below
    metric = form.asked_metric()
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
    sweep_ids = run_ids = []
    if form.selection_error():
        errors.append(f"Bad selection: {form.selection_error()}.")
    else:
        sweep_ids, run_ids = form.cleaned_data["sweep"], form.cleaned_data["run"]
    if "metric" in form.errors:
        errors.append(form.errors["metric"][0])
    if sweep_ids and run_ids:
        errors.append("Compare either sweeps or runs, not both.")
    elif not errors and (sweep_ids or run_ids) and len(sweep_ids or run_ids) < 2:
        errors.append("Pick two or more sweeps (or runs) to compare.")
    groups = []
    if not errors and (sweep_ids or run_ids):
        context["mode"] = "sweep" if sweep_ids else "run"
        try:
            groups = compare_groups(context["mode"], sweep_ids or run_ids, metric)
        except MissingSelection as exc:
            errors.append(str(exc))
    if groups:
        selection = "&".join(f"{context['mode']}={g['id']}" for g in groups)
        context["exports"] = [
            (kind, f"{reverse('selection-export', args=[kind])}?{selection}") for kind in EXPORT_KINDS
        ]
        if context["mode"] == "run":
            context["run_ids"] = ",".join(str(group["id"]) for group in groups)
        rows = compare_lib.compare(groups, metric, mode=context["mode"], alpha=evidence.alpha(),
                                   min_requests=evidence.min_requests())
        label = metrics.metric_label(metric)
        context.update(
            groups=[{k: v for k, v in g.items() if k != "points"} for g in groups],
            rows=rows,
            metric_label=label,
            higher_is_better=metrics.higher_is_better(metric),
            alpha=evidence.alpha(),
            min_requests=evidence.min_requests(),
            chart=compare_lib.chart_data(groups, rows, metric, mode=context["mode"]),
            chart_height_px=140 + len(rows) * (8 + 14 * len(groups)),  # a bar per group in each row
        )
    return render(request, "runs/compare.html", context, status=400 if errors else 200)
