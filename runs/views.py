from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q
from django.shortcuts import get_object_or_404, render

from benchmarks.models import Sweep
from benchmarks.spec import dump_yaml
from runs.models import Point, PointStatus, Run

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
