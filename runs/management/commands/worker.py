"""`python manage.py worker --host NAME`: a Celery worker for one GPU host.

It consumes only ``host.<NAME>`` and takes one task at a time: a host runs one server
configuration at a time."""

import os
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import Host
from sweeplab.celery import host_queue


def worker_argv(host_name, loglevel="INFO"):
    argv = [
        sys.executable, "-m", "celery", "-A", "sweeplab", "worker",
        "--queues", host_queue(host_name),
        "--hostname", f"{host_name}@%h",
        "--concurrency", "1",
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

    def handle(self, *args, host, loglevel, **options):
        if not Host.objects.filter(name=host).exists():
            known = ", ".join(Host.objects.order_by("name").values_list("name", flat=True)) or "none"
            raise CommandError(f"unknown host {host!r}; known hosts: {known}")
        self.stdout.write(f"Worker for host {host} on {settings.CELERY_BROKER_URL.split('@')[-1]}")
        self.stdout.flush()
        argv = worker_argv(host, loglevel)
        os.execv(argv[0], argv)
