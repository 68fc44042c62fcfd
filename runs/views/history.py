"""History of one series (workload, prompt length, concurrency) across runs, its
regressions and its exports."""

from django.db.models import Q
from django.http import Http404, JsonResponse
from django.shortcuts import render

from runs.curation import notes_for
from runs.forms import HistoryQueryForm
from runs.results import history as hist
from runs.results.exports import EXPORT_KINDS, export_response
from runs.roles import reader_required
from sweepcore import metrics


def _history_query(query):
    """Validated history parameters from a GET query (runs.forms.HistoryQueryForm): the
    series, metric, threshold, window and show_excluded; raises a QueryError (a ValueError)."""
    values = HistoryQueryForm.parse(query)
    return values["series"], values["metric"], values["threshold"], values["window"], values["show_excluded"]


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
    return export_response(kind, Q(pk__in=point_ids), "history", {"series": filters, "metric": metric})
