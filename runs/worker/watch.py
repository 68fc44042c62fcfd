"""The periodic check every live worker makes (runs.tasks starts it in a thread of the
worker's main process), so that nothing waits for a person when a worker, the broker or a
message goes away. Every `watch_interval()` it:

- records that a worker of each host it consumes is alive (Host.last_heartbeat_at: the
  sweep page's "no worker of host H has been seen" reads it);
- sends again the task of each in-flight run of those hosts whose worker stopped
  heartbeating (stale_after): a worker takes it over, kills the server the dead worker
  left and measures the points not stored;
- sends again the task of each queued run of those hosts whose task was sent more than
  `requeue_after()` ago and that nobody has claimed though this worker has had a free slot
  for a whole interval (the broker lost it: restarted without persistence, a message
  dropped);
- sends the runs of a sweep held behind another (runs.lifecycle.start_after) once the
  other has been finished for longer than that (the task that was to send them was lost);
- marks done a sweep left running with every run ended (its last run's end was written
  but the sweep's status could not be), and cancelled an in-flight run of a cancelled
  sweep whose worker died before it reached a point boundary (its server, when on this
  machine, is killed).

Each re-send is a compare-and-set of the run's `sent_at`, so of two workers checking at
once one sends, and a run is sent again at most once per `requeue_after()`; the claim makes
a second delivery harmless anyway. Each is said in the run's timeline. Sends wait for a
free slot of this worker: while every slot is busy a queued run is expected to wait."""

import logging
import os
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from benchmarks.models import Host, Sweep, SweepStatus
from runs.lifecycle import (
    BROKER_ERRORS,
    CANCELLED_POINT_REASON,
    FINISHED_RUN,
    enqueue_queued_runs,
    refresh_sweep_status,
    send_run,
)
from runs.managers import stale_after
from runs.models import AFTER_SWEEP, Point, PointStatus, Run, RunEvent, RunEventKind, RunStatus
from runs.worker.store import record_host_heartbeat
from sweepcore.server import kill_leftover
from sweepcore.spec import host_names

log = logging.getLogger(__name__)

ACTIVE_SWEEP = (SweepStatus.QUEUED, SweepStatus.RUNNING)
IN_FLIGHT = (RunStatus.STARTING, RunStatus.RUNNING)


def watch_interval():
    """Seconds between two checks of a worker (SWEEPLAB_WATCH_INTERVAL_S, default 15), at
    most a quarter of the stale time, so that a live worker is never taken for absent."""
    return min(float(os.environ.get("SWEEPLAB_WATCH_INTERVAL_S", 15)), stale_after().total_seconds() / 4)


def requeue_after():
    """How long a queued run may go unclaimed, its task sent, while a worker of its host has
    a free slot, before its task is sent again (SWEEPLAB_REQUEUE_AFTER_S, default 120)."""
    return timedelta(seconds=float(os.environ.get("SWEEPLAB_REQUEUE_AFTER_S", 120)))


def _clock(at):
    return f"{timezone.localtime(at):%Y-%m-%d %H:%M:%S}"


def check(hosts, worker, now=None, idle_since=None):
    """One check by `worker` consuming the queues of `hosts` (Host rows). `idle_since`:
    since when this worker has had a free slot without a break (None: none free now).
    Returns [(run id, words)] of the runs sent again."""
    now = now or timezone.now()
    for host in hosts:
        record_host_heartbeat(host.pk, worker)
    here = {host.name for host in hosts}
    end_cancelled_orphans(here, now)
    finish_ended_sweeps(here)
    if idle_since is None:
        return []
    sent = resend_stale(here, now)
    # A slot free for a whole interval would have taken a message waiting in the queue.
    if idle_since <= now - timedelta(seconds=watch_interval()):
        sent += resend_lost(here, now, now - requeue_after())
    sent += send_held(here, now)
    return sent


def _candidates(runs, here):
    """(run row, this worker's host to send from) of the runs whose sweep runs on one of
    `here` (host names)."""
    rows = runs.filter(sweep__status__in=ACTIVE_SWEEP).values(
        "id", "status", "sent_at", "heartbeat_at", "claimed_by", "host__name", "sweep_id", "sweep__spec",
        "sweep__host__name")
    for row in rows:
        hosts = host_names(row["sweep__spec"], row["sweep__host__name"])
        mine = [h for h in hosts if h in here]
        if mine:
            yield row, (row["host__name"] if row["host__name"] in mine else mine[0])


def _resend(row, now, from_host, why):
    """Send the run's task again, once: a compare-and-set of its sent_at; the words said."""
    same = Run.objects.filter(pk=row["id"], status=row["status"])
    same = same.filter(sent_at=row["sent_at"]) if row["sent_at"] is not None else same.filter(sent_at__isnull=True)
    if not same.update(sent_at=now):
        return None  # another worker's check sent it, or its state moved on
    try:
        queue = send_run(row["id"], row["sweep_id"], row["sweep__spec"], row["sweep__host__name"], from_host)
    except BROKER_ERRORS as exc:
        Run.objects.filter(pk=row["id"], sent_at=now).update(sent_at=row["sent_at"])
        log.warning("run %s could not be sent again (%s): %s", row["id"], why, exc)
        return None
    words = f"re-sent to {queue}: {why}"
    RunEvent.objects.create(run_id=row["id"], at=now, kind=RunEventKind.QUEUED, message=words)
    log.info("run %s %s", row["id"], words)
    return row["id"], words


def resend_stale(here, now):
    """Runs in flight on `here` whose worker stopped heartbeating: sent again for a worker to
    take over, at once when their task was the one the dead worker took (sent before its
    last beat), else at most once per requeue_after."""
    stale = Run.objects.filter(status__in=IN_FLIGHT, heartbeat_at__lt=now - stale_after()).filter(
        Q(sent_at__isnull=True) | Q(sent_at__lt=F("heartbeat_at")) | Q(sent_at__lt=now - requeue_after()))
    return _resend_each(stale, here, now, lambda row: (
        f"its worker {row['claimed_by'] or '?'} stopped heartbeating at {_clock(row['heartbeat_at'])}; "
        f"a worker takes it over"))


def resend_lost(here, now, sent_before):
    """Queued runs on `here` whose task was sent before `sent_before` and nobody claimed:
    the task is lost; sent again."""
    lost = Run.objects.filter(status=RunStatus.QUEUED, sent_at__lt=sent_before)
    return _resend_each(lost, here, now, lambda row: (
        f"no worker claimed it within {(now - row['sent_at']).total_seconds():.0f} s of its sending while a "
        f"worker of the host was free (the task was lost: a broker restarted?)"))


def _resend_each(runs, here, now, why):
    """`_resend` each of `runs` on `here`, `why(row)` saying why; [(run id, words)] of those sent."""
    sent = [_resend(row, now, from_host, why(row)) for row, from_host in _candidates(runs, here)]
    return [done for done in sent if done]


def send_held(here, now):
    """The runs of a sweep held behind another (never sent) whose other sweep has been
    finished for longer than requeue_after: the task that was to send them was lost."""
    held = (Run.objects.filter(status=RunStatus.QUEUED, sent_at__isnull=True, sweep__status__in=ACTIVE_SWEEP)
            .values_list("sweep_id", flat=True).distinct())
    sent = []
    for sweep_id in held:
        sweep = Sweep.objects.filter(pk=sweep_id).values("spec", "host__name").first()
        if not sweep or not set(host_names(sweep["spec"], sweep["host__name"])) & here:
            continue
        last = (RunEvent.objects.filter(run__sweep_id=sweep_id, kind=RunEventKind.QUEUED).order_by("-at", "-id")
                .values_list("data", flat=True).first())
        other = last.get(AFTER_SWEEP) if isinstance(last, dict) else None
        if not isinstance(other, int):
            continue  # held by whoever queued it without sending: theirs to send
        ended = Sweep.objects.filter(pk=other).exclude(status__in=ACTIVE_SWEEP).values_list("finished_at", flat=True)
        if not ended.exists() or (ended.first() and ended.first() > now - requeue_after()):
            continue
        with transaction.atomic():
            Sweep.objects.select_for_update().filter(pk=sweep_id).first()  # one check sends them
            if not Run.objects.filter(sweep_id=sweep_id, status=RunStatus.QUEUED, sent_at__isnull=True).exists():
                continue
            run_ids = enqueue_queued_runs(sweep_id)
        sent += [(run_id, f"sent: sweep #{other}, which it waited for, has finished") for run_id in run_ids]
    return sent


def end_cancelled_orphans(here, now):
    """In-flight runs of cancelled sweeps on `here` whose worker stopped heartbeating (it
    died before the point boundary where it would have stopped): cancelled, their points
    not reached not_run, their server killed (it ran on this machine)."""
    stale = Run.objects.filter(status__in=IN_FLIGHT, heartbeat_at__lt=now - stale_after(),
                               sweep__status=SweepStatus.CANCELLED, host__name__in=here)
    for run in stale.only("id", "heartbeat_at", "claimed_by", "pid", "argv"):
        with transaction.atomic():
            if not Run.objects.filter(pk=run.pk, status__in=IN_FLIGHT, heartbeat_at=run.heartbeat_at).update(
                    status=RunStatus.CANCELLED, finished_at=now):
                continue
            Point.objects.filter(run_id=run.pk, status=PointStatus.PLANNED).update(
                status=PointStatus.NOT_RUN, reason=CANCELLED_POINT_REASON)
            killed = bool(run.pid) and kill_leftover(run.pid, run.argv)
            server = f"; its server (pgid {run.pid}) was killed" if killed else ""
            RunEvent.objects.create(
                run_id=run.pk, at=now, kind=RunEventKind.CANCELLED,
                message=f"the sweep was cancelled and its worker {run.claimed_by or '?'} stopped heartbeating at "
                        f"{_clock(run.heartbeat_at)} before stopping it{server}")


def finish_ended_sweeps(names):
    """Sweeps of the hosts named `names` still queued or running whose every run has ended: done."""
    unfinished = Run.objects.exclude(status__in=FINISHED_RUN).values("sweep_id")
    for sweep_id, spec, host in (Sweep.objects.filter(status__in=ACTIVE_SWEEP).exclude(pk__in=unfinished)
                                 .filter(runs__isnull=False).distinct().values_list("id", "spec", "host__name")):
        if set(host_names(spec, host)) & names:
            refresh_sweep_status(sweep_id)


def worker_hosts(queue_names):
    """The Host rows of the `host.<name>` queues a worker consumes."""
    names = [q.removeprefix("host.") for q in queue_names if q.startswith("host.")]
    return list(Host.objects.filter(name__in=names).order_by("name"))
