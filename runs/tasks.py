"""Celery entry points: thin, take ids, never model instances. Found by the workers'
autodiscovery; nothing else imports this module (the web tier sends tasks by name)."""

import os

from celery import current_task, shared_task
from celery.signals import worker_ready
from django.utils import timezone

from benchmarks.models import Host
from runs.lifecycle import enqueue_after, enqueue_queued_runs
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


@shared_task(name=HOST_HEARTBEAT)
def host_heartbeat(host_id):
    """Record that a worker consuming this host's queue is alive."""
    record_host_heartbeat(host_id, current_task.request.hostname or "")


@worker_ready.connect
def announce_worker(sender, **kwargs):
    """On start, a worker sends a heartbeat through each host queue it consumes: the
    round trip proves the queue, the broker and the database all work."""
    queues = [q.name for q in sender.app.amqp.queues.consume_from.values()]
    for host in Host.objects.filter(name__in=[q.removeprefix("host.") for q in queues if q.startswith("host.")]):
        send_to_host(HOST_HEARTBEAT, host.name, host_id=host.id)


@shared_task(name=EXECUTE_RUN, bind=True, max_retries=3)
def execute_run(self, run_id):
    """Drive one run on this host (hours, possibly): claim, launch, measure, tear down.

    A resumed run whose previous worker died still shows that worker's last heartbeat:
    try again once it is stale. A run driven by a live worker keeps its heartbeat fresh,
    so the retries give up and nothing runs twice."""
    worker = f"{self.request.hostname or 'worker'}:{os.getpid()}"
    status = drive(run_id, worker_id=worker)
    if status is None:
        wait = seconds_until_stale(run_id)
        if wait is not None and self.request.retries < self.max_retries:
            raise self.retry(countdown=wait)
    return status


@shared_task(name=TAKE_RUN, bind=True)
def take_run(self, sweep_id, host):
    """A token of a sweep whose runs several hosts share, on the queue of `host`: drive the
    sweep's next run that fits this host's free GPUs now, then the next, until none fits;
    then look again after a wait (the token sent back to this host's queue). The sweep has
    one token per run, spread over its hosts, so each host holds about as many as it can run
    at once; a host that dies takes its tokens with it, and the others' tokens take over
    its runs once their heartbeat is stale. A token ends when nothing is left to take."""
    worker = f"{self.request.hostname or 'worker'}:{os.getpid()}"
    here = Host.objects.get(name=host)
    while True:
        run_id, wait = run_to_take(sweep_id, here, timezone.now(), host_groups(here.gpu_count))
        if run_id is None:
            break
        drive(run_id, worker_id=worker, host_id=here.pk)  # None: another worker claimed it first
    if wait is not None:
        send_to_host(TAKE_RUN, host, countdown=wait, sweep_id=sweep_id, host=host)
    return wait


@shared_task(name=START_SWEEP_AFTER, bind=True, max_retries=120)
def start_sweep_after(self, sweep_id, after_sweep_id):
    """Send the runs of a queued sweep once another sweep is finished (runs.lifecycle.
    start_after sends this task to the other sweep's host queue, behind that sweep's
    runs); gives up waiting after an hour."""
    if self.request.retries >= self.max_retries:
        return enqueue_queued_runs(sweep_id)
    run_ids = enqueue_after(sweep_id, after_sweep_id)
    if run_ids is None:
        raise self.retry(countdown=30)
    return run_ids
