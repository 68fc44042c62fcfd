"""Queries on runs that more than one caller relies on: the claim a worker takes and the
aggregates the lifecycle needs."""

from django.db import models
from django.db.models import Q

from benchmarks.models import SweepStatus


class RunManager(models.Manager):
    """`Run.objects`. The model hands over its status choices (``RunManager.of(RunStatus)``),
    so this module does not import runs.models, which imports it."""

    statuses = None  # the model's status TextChoices

    @classmethod
    def of(cls, statuses):
        """A manager for a model whose statuses are `statuses`. A class attribute, not an
        instance one: the managers of reverse relations (``sweep.runs``) subclass this
        manager's class and are built without arguments."""
        return type(cls.__name__, (cls,), {"statuses": statuses})()

    def in_flight(self):
        """Runs a worker has claimed and not finished."""
        return self.filter(status__in=[self.statuses.STARTING, self.statuses.RUNNING])

    def claim(self, run_id, worker_id, now, stale_before):
        """Take run `run_id` for `worker_id` with one conditional UPDATE, so that only one
        of two workers can succeed: a queued run, or an in-flight one whose heartbeat is
        older than `stale_before` (its worker died). A cancelled sweep's runs are never
        taken. Returns whether the claim succeeded."""
        taken = (
            self.filter(pk=run_id)
            .filter(
                Q(status=self.statuses.QUEUED)
                | Q(status__in=[self.statuses.STARTING, self.statuses.RUNNING], heartbeat_at__lt=stale_before)
            )
            .exclude(sweep__status=SweepStatus.CANCELLED)
            .update(status=self.statuses.STARTING, claimed_by=worker_id, claimed_at=now, heartbeat_at=now)
        )
        return taken == 1

    def heartbeat(self, run_id, worker_id, now):
        """Renew the claim of `worker_id`; False once another worker has taken the run."""
        return self.filter(pk=run_id, claimed_by=worker_id).update(heartbeat_at=now) == 1

    def latest_attempt(self, run):
        """The highest attempt number of `run`'s configuration in its sweep."""
        return self.filter(
            sweep_id=run.sweep_id, method=run.method, params_key=run.params_key, tp=run.tp
        ).aggregate(models.Max("attempt"))["attempt__max"]
