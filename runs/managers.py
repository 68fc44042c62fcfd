"""Queries on runs that more than one caller relies on: the claim a worker takes and the
aggregates the lifecycle needs."""

import os
from datetime import timedelta

from django.db import models
from django.db.models import Q

from sweepcore.kinds import RunStatus, SweepStatus


def stale_after():
    """A claim whose heartbeat is older than this may be taken over (the worker died)."""
    return timedelta(seconds=int(os.environ.get("SWEEPLAB_STALE_CLAIM_S", 60)))


class RunManager(models.Manager):
    """`Run.objects`."""

    def in_flight(self):
        """Runs a worker has claimed and not finished."""
        return self.filter(status__in=[RunStatus.STARTING, RunStatus.RUNNING])

    def claim(self, run_id, worker_id, now, stale_before, host_id):
        """Take run `run_id` for `worker_id` with one conditional UPDATE, so that only one
        of two workers can succeed: a queued run, or an in-flight one whose heartbeat is
        older than `stale_before` (its worker died) or whose claim is `worker_id`'s own (a
        claim tried again after its connection dropped, or a run this worker left when the
        database went away: nobody else drives it). A cancelled sweep's runs are never
        taken. The run is then driven on host `host_id`. Returns whether the claim succeeded."""
        in_flight = [RunStatus.STARTING, RunStatus.RUNNING]
        taken = (
            self.filter(pk=run_id)
            .filter(
                Q(status=RunStatus.QUEUED)
                | Q(status__in=in_flight, heartbeat_at__lt=stale_before)
                | Q(status__in=in_flight, claimed_by=worker_id)
            )
            .exclude(sweep__status=SweepStatus.CANCELLED)
            .update(status=RunStatus.STARTING, claimed_by=worker_id, claimed_at=now, heartbeat_at=now,
                    host_id=host_id)
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
