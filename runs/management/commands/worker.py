"""`python manage.py worker --host NAME [--slots N]`: a Celery worker for one GPU host.

It consumes only ``host.<NAME>`` and takes up to N tasks at a time (default: the host's
GPU count; 1 on a CPU host), one per worker process. What may run at once is decided by
the GPU leases (runs.worker.store.RunStore.lease_gpus), not by the slots: a run of a sweep
whose ``options.packing`` is ``exclusive`` (the default) leases every GPU of the host, so
the other slots wait for it; ``pack`` runs lease their TP's GPUs and share the host."""

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import Host
from sweeplab.celery import host_queue


def worker_argv(host_name, loglevel="INFO", slots=1):
    argv = [
        sys.executable, "-m", "celery", "-A", "sweeplab", "worker",
        "--queues", host_queue(host_name),
        "--hostname", f"{host_name}@%h",
        "--concurrency", str(slots),
        "--loglevel", loglevel,
        # Our own heartbeats and claims coordinate runs; gossip, mingle and event
        # heartbeats need broadcast, which the filesystem broker does not have.
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]
    return argv


class Command(BaseCommand):
    help = "Run a Celery worker that consumes the queue of one host."

    def add_arguments(self, parser):
        parser.add_argument("--host", required=True, help="host name, as in the catalog")
        parser.add_argument("--loglevel", default="INFO")
        parser.add_argument("--slots", type=int, default=None,
                            help="runs at once, at most (default: the host's GPU count; 1 on a CPU host)")

    def handle(self, *args, host, loglevel, slots, **options):
        found = Host.objects.filter(name=host).first()
        if found is None:
            known = ", ".join(Host.objects.order_by("name").values_list("name", flat=True)) or "none"
            raise CommandError(f"unknown host {host!r}; known hosts: {known}")
        if slots is None:
            slots = max(1, found.gpu_count)
        if slots < 1:
            raise CommandError(f"--slots must be at least 1, not {slots}")
        self.stdout.write(f"Worker for host {host} ({slots} slot(s)) on {settings.CELERY_BROKER_URL.split('@')[-1]}")
        self.stdout.flush()
        argv = worker_argv(host, loglevel, slots)
        os.execv(argv[0], argv)
