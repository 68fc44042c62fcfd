"""The sweep list: every sweep with its run and point counts, filtered by status. Its points
are counted by what came of them, so that the parts add up to the whole: measured (an
outcome of requests sent: sweepcore.kinds.MEASURED_POINT_STATUSES), still to measure, not
run (their server died earlier, or the sweep was cancelled) and skipped (the plan or the
cap), all in the one query of the page."""

from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.shortcuts import render

from benchmarks.models import Sweep, SweepStatus
from runs.models import PointStatus
from runs.queryparams import ChoiceParam, QueryError, QueryForm
from runs.roles import reader_required
from sweepcore.kinds import MEASURED_POINT_STATUSES

SWEEPS_PER_PAGE = 50


class SweepListForm(QueryForm):
    """?status=: the sweeps of one status (all when blank; a 400 saying why, over all of
    them, for a status that is none)."""

    status = ChoiceParam(SweepStatus.values, "status")


@reader_required
def sweep_list(request):
    sweeps = (
        Sweep.objects.select_related("host", "engine", "llm", "owner")
        .annotate(
            run_count=Count("runs", distinct=True),
            point_count=Count("runs__points"),
            points_measured=Count("runs__points", filter=Q(runs__points__status__in=MEASURED_POINT_STATUSES)),
            points_planned=Count("runs__points", filter=Q(runs__points__status=PointStatus.PLANNED)),
            points_not_run=Count("runs__points", filter=Q(runs__points__status=PointStatus.NOT_RUN)),
            points_skipped=Count("runs__points", filter=Q(runs__points__status=PointStatus.SKIPPED)),
        )
        .order_by("-created_at", "-id")
    )
    try:
        status, error = SweepListForm.parse(request.GET)["status"], ""
    except QueryError as exc:
        status, error = "", str(exc)
    if status:
        sweeps = sweeps.filter(status=status)
    page = Paginator(sweeps, SWEEPS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/sweep_list.html",
        {"page": page, "status": status, "statuses": Sweep._meta.get_field("status").choices, "error": error},
        status=400 if error else 200,
    )
