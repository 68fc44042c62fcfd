"""Private PostgreSQL and Redis instances for tests that restart or stop them: never the
shared ones a deployment or another test run uses. Each starts on a free loopback port,
in a folder of its own, and is stopped and removed at the end; where its binaries are
missing the test is skipped, saying which (in CI it fails: processes.unavailable)."""

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from tests.e2e.processes import unavailable


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=30.0, up=True):
    """Until 127.0.0.1:`port` accepts connections (or, `up` False, refuses them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                if up:
                    return True
        except OSError:
            if not up:
                return True
        time.sleep(0.05)
    return False


class PrivatePostgres:
    """A PostgreSQL cluster of its own: `url` (database `name`), `restart()`, `stop()`,
    `start()`. Run as the postgres user where this process is root (PostgreSQL refuses root)."""

    def __init__(self, bindir, folder, port, name="sweeplab"):
        self.bindir, self.folder, self.port, self.name = bindir, folder, port, name
        self.data = folder / "data"
        self.url = f"postgres://postgres@127.0.0.1:{port}/{name}"
        self.as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def pg_ctl(self, *args, check=True):
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        return subprocess.run(
            [*self.as_owner, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options,
             "-l", str(self.folder / "server.log"), "-w", *args],
            check=check, capture_output=True, text=True, timeout=60)

    def start(self):
        self.pg_ctl("start")

    def stop(self, mode="fast"):
        self.pg_ctl("stop", "-m", mode)

    def restart(self):
        """A fast restart: every connection is terminated (as an administrator's restart)."""
        self.pg_ctl("restart", "-m", "fast")


@contextmanager
def private_postgres(name="sweeplab"):
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        unavailable("running as root without runuser: PostgreSQL refuses to run as root")
    bindir = Path(found[-1]).parent
    folder = Path(tempfile.mkdtemp(prefix="sweeplab-pg-", dir="/tmp"))
    pg = PrivatePostgres(bindir, folder, free_port(), name)
    if pg.as_owner:
        shutil.chown(folder, "postgres")
    try:
        subprocess.run([*pg.as_owner, str(bindir / "initdb"), "-D", str(pg.data), "-U", "postgres", "--auth=trust",
                        "-E", "UTF8", "--no-sync"], check=True, capture_output=True, timeout=120)
        pg.start()
        subprocess.run([*pg.as_owner, str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres",
                        name], check=True, capture_output=True, timeout=60)
        yield pg
    finally:
        pg.pg_ctl("stop", "-m", "immediate", check=False)
        shutil.rmtree(folder, ignore_errors=True)


class PrivateRedis:
    """A Redis without persistence of its own: `url`, `restart(down_s)` (killed, as a crash
    does: its queues are gone), `stop()`."""

    def __init__(self, exe, port):
        self.exe, self.port = exe, port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_port(self.port), "redis-server did not start"

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        assert wait_port(self.port, up=False)

    def restart(self, down_s=3.0):
        self.stop()
        time.sleep(down_s)
        self.start()


@contextmanager
def private_redis():
    exe = shutil.which("redis-server")
    if not exe:
        unavailable("redis-server not found on PATH")
    redis = PrivateRedis(exe, free_port())
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()
