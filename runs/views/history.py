"""History of one series (workload, prompt length, concurrency) across runs, its
regressions and its exports."""

from django.db.models import Q
from django.http import Http404, JsonResponse
from django.shortcuts import render

from runs.curation import notes_for
from runs.forms import HistoryQueryForm
from runs.results import evidence
from runs.results import history as hist
from runs.results.exports import EXPORT_KINDS, export_response
from runs.roles import reader_required
from sweepcore import metrics


def _history_query(query):
    """Validated history parameters from a GET query (runs.forms.HistoryQueryForm): the
    series, metric, window, show_excluded and valid_only; raises a QueryError (a ValueError)."""
    values = HistoryQueryForm.parse(query)
    return values["series"], values["metric"], values["window"], values["show_excluded"], values["valid_only"]


@reader_required
def history(request):

    try:
        filters, metric, window, show_excluded, valid_only = _history_query(request.GET)
        error = ""
    except ValueError as exc:
        filters, metric, window, show_excluded, valid_only = {}, hist.DEFAULT_METRIC, hist.DEFAULT_WINDOW, False, False
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
            "window": window,
            "show_excluded": show_excluded,
            "valid_only": valid_only,
            "min_history": hist.MIN_HISTORY,
            "alpha": evidence.alpha(),
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
        filters, metric, window, show_excluded, valid_only = _history_query(request.GET)
        points = hist.series_points(filters, metric)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    higher = metrics.higher_is_better(metric)
    alpha, min_requests = evidence.alpha(), evidence.min_requests()
    judged = hist.detect_regressions(hist.attach_samples(points, metric), metric, window=window, alpha=alpha,
                                     min_requests=min_requests)
    notes = notes_for([p["id"] for p in points], {p["id"]: p["run_id"] for p in points})
    out = []
    regressions = []
    for p, found in zip(points, judged):
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
            **evidence.point_evidence(p),
            "ci": metrics.interval_of(p["intervals"], metric),
            "regression": found["regression"],
            "verdict": found["verdict"],
            "verdict_reason": found["reason"],
            "p_value": found["p_value"],
            "diff_pct": found["diff_pct"],
        }
        if found["regression"]:
            regressions.append({**item, "window": found["window"], "pooled": found["pooled"]})
        if (show_excluded or not p["excluded"]) and (not valid_only or p.get("validity") == "valid"):
            out.append(item)
    return JsonResponse({
        "series": filters,
        "metric": {"name": metric, "label": metrics.metric_label(metric), "higher_is_better": higher},
        "method": {
            "name": hist.METHOD_NAME,
            "window": window,
            "alpha": alpha,
            "min_history": hist.MIN_HISTORY,
            "min_requests": min_requests,
            "description": (
                f"each valid point's per-request values against those of the last {window} earlier valid, "
                f"not excluded points pooled (at least {hist.MIN_HISTORY}, else insufficient data): a two-sided "
                f"Mann-Whitney U test at α = {alpha:g}, with the ratio of medians' 95 % interval leaving 1 out; "
                f"a regression when significantly "
                f"{'lower' if higher else 'higher'}. Suspect and invalid points are drawn, never judged or pooled"
            ),
        },
        "show_excluded": show_excluded,
        "valid_only": valid_only,
        "points": out,
        "regressions": regressions,
        "counts": {
            "points": len(points),
            "excluded": sum(p["excluded"] for p in points),
            "regressions": len(regressions),
            "insufficient": sum(f["verdict"] == "insufficient" for f in judged),
            "not_valid": sum(p.get("validity") != "valid" for p in points),
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
    return export_response(kind, Q(pk__in=point_ids), "history", {"series": filters, "metric": metric})
