"""`python manage.py serve`: the web server and one worker per host, for one machine.

What `make run` ends with. Ctrl-C (or SIGTERM) stops them all cleanly."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks.models import Host, Sweep, SweepStatus

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
        log_dir = Path(settings.DATA_DIR) / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        for name, argv in commands.items():
            # Workers log to files, the web server to this terminal. Each child has its
            # own process group, so we decide when and how they stop.
            out = None if name == "web" else open(log_dir / f"{name.replace(' ', '-')}.log", "ab")
            children[name] = subprocess.Popen(
                argv, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT if out else None
            )

        if self.wait_for_port(addr, port, children["web"]):
            broker = settings.CELERY_BROKER_URL.split("@")[-1]
            watch = "".join(
                f"  watch: http://{addr}:{port}{sweep.get_absolute_url()}  {sweep.name} ({sweep.status})\n"
                for sweep in Sweep.objects.filter(status__in=[SweepStatus.QUEUED, SweepStatus.RUNNING]).order_by("pk")
            )
            self.stdout.write(
                f"\nSweeplab is up: http://{addr}:{port}/\n"
                f"  {self.login_hint()}\n"
                f"  workers: {', '.join(hosts)} (broker {broker}; logs in {log_dir})\n"
                f"{watch}"
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
                proc.terminate()  # the leader only: a Celery worker shuts its pool down itself
        deadline = time.monotonic() + GRACE_SECONDS
        for name, proc in children.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"{name} did not stop in {GRACE_SECONDS}s; killing it")
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of its group
            except ProcessLookupError:
                pass
            proc.wait()
        self.stdout.write("Stopped.")
        sys.exit(exit_code)

    def wait_for_port(self, addr, port, proc, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection((addr, port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.25)
        return False

    def login_hint(self):
        path = Path(settings.DATA_DIR) / "demo-admin-password"
        if path.exists():
            return f"login: admin / {path.read_text().strip()}"
        return "login: create an account with `python manage.py createsuperuser`"
