"""Celery entry points: thin, take ids, never model instances."""

import os

from celery import current_task, shared_task
from celery.signals import worker_ready
from django.utils import timezone

from benchmarks.models import Host
from sweeplab.celery import host_queue


def send_to_host(task, host_name, **kwargs):
    """Enqueue a task on the queue of one host, where only that host's workers look."""
    return task.apply_async(kwargs=kwargs, queue=host_queue(host_name))


@shared_task(name="runs.host_heartbeat")
def host_heartbeat(host_id):
    """Record that a worker consuming this host's queue is alive."""
    Host.objects.filter(pk=host_id).update(
        last_heartbeat_at=timezone.now(), last_worker=current_task.request.hostname or ""
    )


@worker_ready.connect
def announce_worker(sender, **kwargs):
    """On start, a worker sends a heartbeat through each host queue it consumes: the
    round trip proves the queue, the broker and the database all work."""
    queues = [q.name for q in sender.app.amqp.queues.consume_from.values()]
    for host in Host.objects.filter(name__in=[q.removeprefix("host.") for q in queues if q.startswith("host.")]):
        send_to_host(host_heartbeat, host.name, host_id=host.id)


@shared_task(name="runs.execute_run", bind=True, max_retries=3)
def execute_run(self, run_id):
    """Drive one run on this host (hours, possibly): claim, launch, measure, tear down.

    A resumed run whose previous worker died still shows that worker's last heartbeat:
    try again once it is stale. A run driven by a live worker keeps its heartbeat fresh,
    so the retries give up and nothing runs twice."""
    from runs.worker.executor import execute_run as drive
    from runs.worker.executor import seconds_until_stale

    worker = f"{self.request.hostname or 'worker'}:{os.getpid()}"
    status = drive(run_id, worker_id=worker)
    if status is None:
        wait = seconds_until_stale(run_id)
        if wait is not None and self.request.retries < self.max_retries:
            raise self.retry(countdown=wait)
    return status


@shared_task(name="runs.start_sweep_after", bind=True, max_retries=120)
def start_sweep_after(self, sweep_id, after_sweep_id):
    """Send the runs of a queued sweep once another sweep is finished: two sweeps on hosts
    that share one machine (the demo's simulated host and its CPU host) would measure each
    other. Sent to the other sweep's host queue, behind that sweep's runs; gives up waiting
    after an hour."""
    from runs.lifecycle import enqueue_after, enqueue_queued_runs

    if self.request.retries >= self.max_retries:
        return enqueue_queued_runs(sweep_id)
    run_ids = enqueue_after(sweep_id, after_sweep_id)
    if run_ids is None:
        raise self.retry(countdown=30)
    return run_ids
