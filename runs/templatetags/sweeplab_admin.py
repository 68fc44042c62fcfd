"""The admin index's overview: running sweeps, recent crashes by kind, active quarantines."""

from datetime import timedelta

from django import template
from django.db.models import Count
from django.utils import timezone

from benchmarks.models import FailureKind, KnownFailure, Sweep, SweepStatus
from runs.models import Run, RunStatus

register = template.Library()

CRASH_DAYS = 7
SHOWN = 10


@register.inclusion_tag("admin/sweeplab_overview.html")
def admin_overview():
    since = timezone.now() - timedelta(days=CRASH_DAYS)
    crashes = (
        Run.objects.filter(status__in=[RunStatus.CRASHED, RunStatus.FAILED], finished_at__gte=since)
        .exclude(failure_kind="")
        .values("failure_kind")
        .annotate(count=Count("id"))
        .order_by("-count", "failure_kind")
    )
    labels = dict(FailureKind.choices)
    active = KnownFailure.objects.filter(active=True)
    quarantines = list(active.select_related("llm").order_by("-last_seen_at")[:SHOWN])
    count = active.count() if len(quarantines) == SHOWN else len(quarantines)
    return {
        "running": Sweep.objects.filter(status__in=[SweepStatus.QUEUED, SweepStatus.RUNNING])
        .select_related("host").order_by("-created_at")[:SHOWN],
        "crash_days": CRASH_DAYS,
        "crashes": [{**row, "label": labels.get(row["failure_kind"], row["failure_kind"])} for row in crashes],
        "quarantines": quarantines,
        "quarantine_count": count,
        "more_quarantines": count > SHOWN,
    }
