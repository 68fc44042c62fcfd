"""Celery entry points: thin, take ids, never model instances. Found by the workers'
autodiscovery; nothing else imports this module (the web tier sends tasks by name).

Acknowledgement: tasks are acknowledged late (CELERY_TASK_ACKS_LATE), after they return,
and a run task returns only once its run is claimed and driven, or found not to be its to
drive. A task that cannot reach the database is never acknowledged as failed: it is sent
again with a growing countdown (`retry_later`), for as long as the database stays away;
where the broker cannot take that either, the message is put back (rejected, requeued)."""

import logging
import os
import threading
import time

from celery import current_task, shared_task
from celery.exceptions import Reject
from celery.signals import worker_ready, worker_shutdown
from celery.worker import state as worker_state
from django.utils import timezone

from benchmarks.models import Host
from runs.lifecycle import enqueue_after, enqueue_queued_runs
from runs.worker import dbretry, watch
from runs.worker.dbretry import DB_ERRORS, pauses, reconnect
from runs.worker.executor import execute_run as drive
from runs.worker.executor import host_groups
from runs.worker.store import record_host_heartbeat, run_to_take, seconds_until_stale
from sweeplab.celery import (
    EXECUTE_RUN,
    HOST_HEARTBEAT,
    START_SWEEP_AFTER,
    TAKE_RUN,
    send_to_host,
)

log = logging.getLogger(__name__)

#: How often a task whose run is claimed by a worker that may have died waits for its
#: heartbeat to go stale before it leaves the run to that worker.
STALE_WAITS = 3
#: The longest countdown of a task waiting for the database.
LONGEST_DB_WAIT_S = 60.0


def db_wait_s(retries):
    """The countdown of a task's `retries`-th wait for the database: 1, 2, 4 … 60 s."""
    for i, pause in enumerate(pauses(1.0, LONGEST_DB_WAIT_S)):
        if i >= retries:
            return pause


def retry_later(task, exc, **kwargs):
    """Try `task` again later because the database could not be reached (`exc`): a new
    message with a countdown, the current one acknowledged only once that is sent. If the
    broker cannot take it either, the current message goes back to the queue instead."""
    wait = db_wait_s(task.request.retries)
    log.warning("%s[%s]: the database cannot be reached (%s); trying again in %g s", task.name, task.request.id,
                str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, wait)
    reconnect()
    try:
        return task.retry(exc=exc, countdown=wait, **kwargs)
    except Reject:  # Celery could not publish the retry
        time.sleep(wait)
        raise Reject(exc, requeue=True) from None


@shared_task(name=HOST_HEARTBEAT)
def host_heartbeat(host_id):
    """Record that a worker consuming this host's queue is alive (dropped when the database
    is away: the worker's periodic check beats again)."""
    try:
        record_host_heartbeat(host_id, current_task.request.hostname or "")
    except DB_ERRORS as exc:
        log.warning("host heartbeat not recorded: %s", exc)


@shared_task(name=EXECUTE_RUN, bind=True, max_retries=None)
def execute_run(self, run_id, stale_waits=0):
    """Drive one run on this host (hours, possibly): claim, launch, measure, tear down.

    A resumed run whose previous worker died still shows that worker's last heartbeat:
    try again once it is stale (STALE_WAITS times). A run driven by a live worker keeps
    its heartbeat fresh, so the retries give up and nothing runs twice. Without the
    database the task waits for it (retry_later), never acknowledged as failed; a run
    whose database went away mid-way is left in flight, and this task, tried again, takes
    it back (its claim is this worker's own) or another worker takes it over."""
    worker = f"{self.request.hostname or 'worker'}:{os.getpid()}"
    try:
        status = drive(run_id, worker_id=worker)
        if status is None:
            wait = seconds_until_stale(run_id)
            if wait is not None and stale_waits < STALE_WAITS:
                raise self.retry(countdown=wait, kwargs={"run_id": run_id, "stale_waits": stale_waits + 1})
    except DB_ERRORS as exc:
        raise retry_later(self, exc) from None
    return status


@shared_task(name=TAKE_RUN, bind=True, max_retries=None)
def take_run(self, sweep_id, host):
    """A token of a sweep whose runs several hosts share, on the queue of `host`: drive the
    sweep's next run that fits this host's free GPUs now, then the next, until none fits;
    then look again after a wait (the token sent back to this host's queue). The sweep has
    one token per run, spread over its hosts, so each host holds about as many as it can run
    at once; a host that dies takes its tokens with it, and the others' tokens take over
    its runs once their heartbeat is stale. A token ends when nothing is left to take.
    Without the database it waits for it, as execute_run does."""
    worker = f"{self.request.hostname or 'worker'}:{os.getpid()}"
    try:
        here = Host.objects.get(name=host)
        while True:
            run_id, wait = run_to_take(sweep_id, here, timezone.now(), host_groups(here.gpu_count))
            if run_id is None:
                break
            drive(run_id, worker_id=worker, host_id=here.pk)  # None: another worker claimed it first
    except DB_ERRORS as exc:
        raise retry_later(self, exc) from None
    if wait is not None:
        send_to_host(TAKE_RUN, host, countdown=wait, sweep_id=sweep_id, host=host)
    return wait


@shared_task(name=START_SWEEP_AFTER, bind=True, max_retries=None)
def start_sweep_after(self, sweep_id, after_sweep_id, waits=0):
    """Send the runs of a queued sweep once another sweep is finished (runs.lifecycle.
    start_after sends this task to the other sweep's host queue, behind that sweep's
    runs); gives up waiting after an hour (120 waits of 30 s)."""
    try:
        if waits >= 120:
            return enqueue_queued_runs(sweep_id)
        run_ids = enqueue_after(sweep_id, after_sweep_id)
    except DB_ERRORS as exc:
        raise retry_later(self, exc) from None
    if run_ids is None:
        raise self.retry(countdown=30, kwargs={"sweep_id": sweep_id, "after_sweep_id": after_sweep_id,
                                               "waits": waits + 1})
    return run_ids


# --- the worker's own periodic check ---------------------------------------------------


class Watch(threading.Thread):
    """The worker's periodic check (runs.worker.watch.check), every watch_interval(), in a
    thread of the worker's main process, from its start to its shutdown. It never dies of
    an error: it logs it, drops its database connection and looks again next time."""

    def __init__(self, worker_name, queue_names, slots):
        super().__init__(name="sweeplab-watch", daemon=True)
        self.worker_name = worker_name
        self.queue_names = queue_names
        self.slots = slots
        self.stopped = threading.Event()
        self.idle_since = None

    def free_slot(self):
        return len(worker_state.active_requests) < self.slots

    def run(self):
        try:
            while True:
                self.once()
                if self.stopped.wait(watch.watch_interval()):
                    return
        finally:
            reconnect()

    def once(self):
        now = timezone.now()
        if not self.free_slot():
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = now
        try:
            # A database that does not answer holds up one check for an interval, not more.
            with dbretry.budget(watch.watch_interval()):
                hosts = watch.worker_hosts(self.queue_names)
                watch.check(hosts, self.worker_name, now, self.idle_since)
        except Exception:  # noqa: BLE001 - a periodic check outlives whatever went wrong once
            log.exception("the worker's periodic check failed; it looks again in %g s", watch.watch_interval())
            reconnect()

    def stop(self):
        self.stopped.set()
        self.join(timeout=5)


_watches = []


@worker_ready.connect
def announce_worker(sender, **kwargs):
    """On start, a worker sends a heartbeat through each host queue it consumes (the round
    trip proves the queue, the broker and the database all work) and starts its periodic
    check (Watch)."""
    queues = [q.name for q in sender.app.amqp.queues.consume_from.values()]
    slots = getattr(sender.controller, "concurrency", None) or 1
    watcher = Watch(sender.hostname, queues, slots)
    watcher.start()
    _watches.append(watcher)
    try:
        for host in watch.worker_hosts(queues):
            send_to_host(HOST_HEARTBEAT, host.name, host_id=host.id)
    except Exception:  # noqa: BLE001 - the periodic check records the worker anyway
        log.exception("the start-up heartbeat could not be sent")


@worker_shutdown.connect
def stop_watching(**kwargs):
    while _watches:
        _watches.pop().stop()
