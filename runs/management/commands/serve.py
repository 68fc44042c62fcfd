"""`python manage.py serve`: the web server and one worker per host, for one machine.

What `make run` ends with. Ctrl-C (or SIGTERM) stops them all cleanly."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import Host

GRACE_SECONDS = 15


class Command(BaseCommand):
    help = "Start the web server and a Celery worker per host; stop them on Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, addr, port, **options):
        hosts = list(Host.objects.order_by("name").values_list("name", flat=True))
        if not hosts:
            raise CommandError("no hosts in the catalog: run `python manage.py seed_demo` first")
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        # Plain HTTP on this machine: no HTTPS redirect, cookies without the Secure flag.
        env = {**os.environ, "SWEEPLAB_HTTPS": os.environ.get("SWEEPLAB_HTTPS", "0")}
        commands = {"web": [sys.executable, manage, "runserver", f"{addr}:{port}", "--noreload", "--insecure"]}
        for host in hosts:
            commands[f"worker {host}"] = [sys.executable, manage, "worker", "--host", host]

        children = {}
        stopping = []

        def stop(signum, frame):
            stopping.append(signum)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        for name, argv in commands.items():
            # Own process group each, so we decide when and how they stop.
            children[name] = subprocess.Popen(argv, env=env, start_new_session=True)

        broker = settings.CELERY_BROKER_URL.split("@")[-1]
        self.stdout.write(
            f"\nSweeplab is up: http://{addr}:{port}/\n"
            f"  workers: {', '.join(hosts)} (broker {broker})\n"
            f"  {self.login_hint()}\n"
            "  Ctrl-C stops everything.\n"
        )
        self.stdout.flush()

        exit_code = 0
        while not stopping:
            for name, proc in children.items():
                if proc.poll() is not None:
                    self.stderr.write(f"{name} exited with status {proc.returncode}; stopping the others")
                    exit_code = 1
                    stopping.append(name)
                    break
            time.sleep(0.5)

        self.stdout.write("Stopping…")
        for proc in children.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        for name, proc in children.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"{name} did not stop in {GRACE_SECONDS}s; killing it")
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.stdout.write("Stopped.")
        sys.exit(exit_code)

    def login_hint(self):
        path = Path(settings.DATA_DIR) / "demo-admin-password"
        if path.exists():
            return f"login: admin / {path.read_text().strip()}"
        return "login: create an account with `python manage.py createsuperuser`"
