"""Starting real processes (workers, the stub server) from tests, against the test database."""

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection

from tests.lanes import LANE_VARIABLE, in_lane, lane_of

ROOT = Path(__file__).resolve().parents[2]
STUB = ROOT / "bench" / "stub_server.py"


def unavailable(reason):
    """What a machine lacks for a test (a binary, a browser, root, vLLM's environment): the
    test is skipped saying so, except in CI (`CI` set, as .ci/run does), which has them all
    and must not pass a test it did not run."""
    (pytest.fail if os.environ.get("CI") else pytest.skip)(reason)


def test_database_url():
    """DATABASE_URL of the database this test runs on, for child processes."""
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    user = quote(s["USER"] or "")
    password = f":{quote(s['PASSWORD'])}" if s["PASSWORD"] else ""
    return f"postgres://{user}{password}@{s['HOST'] or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


def child_env(**extra):
    from django.conf import settings

    return {**os.environ, "DATABASE_URL": test_database_url(), "SWEEPLAB_DATA_DIR": str(settings.DATA_DIR), **extra}


def stop_process_group(proc, grace=10):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def celery_worker(queues, log_path, concurrency=1, **env):
    """A real Celery worker process consuming `queues` with `concurrency` slots, stopped
    (and its children) after."""
    argv = [
        sys.executable, "-m", "celery", "-A", "sweeplab", "worker",
        "--queues", ",".join(queues), "--concurrency", str(concurrency), "--loglevel", "INFO",
        "--hostname", f"test-{os.getpid()}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=child_env(**env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield proc
    finally:
        stop_process_group(proc)


@contextmanager
def stub(*args):
    """Start bench/stub_server.py on a free loopback port; kill it at the end."""
    p = subprocess.Popen([sys.executable, str(STUB), "--port", "0", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("LISTENING"), p.stderr.read()
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        p.kill()
        p.wait(timeout=5)


def wait_for(predicate, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def lane_pids():
    """Process ids on this machine that this test lane started (tests.lanes): another lane's
    servers are not this one's left-overs."""
    lane = os.environ[LANE_VARIABLE]
    return (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and in_lane(entry.name, lane))


def server_pids(module):
    """Process ids of this lane's `python -m <module>` servers."""
    pids = set()
    for pid in lane_pids():
        entry = Path("/proc") / str(pid)
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if module.encode() in cmdline and b"-m" in cmdline:
            pids.add(int(entry.name))
    return pids


def simengine_pids():
    return server_pids("simengine")


def llamacpp_pids():
    return server_pids("llama_cpp.server")


def vllm_pids():
    """vLLM's API servers and the processes they start, alive: these rename themselves
    (`VLLM::EngineCore`, `VLLM::Worker`), so they are found by name as well. Renaming
    overwrites the environment that names their lane: they count unless it names another
    one (the vLLM tests run on one xdist worker, their xdist_group, so that two lanes never
    run vLLM at once). A killed one waiting to be reaped (a zombie: it holds nothing but
    its pid) does not count."""
    pids = server_pids("vllm.entrypoints.openai.api_server")
    lane = os.environ[LANE_VARIABLE]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or lane_of(entry.name) not in (lane, None):
            continue
        try:
            name = (entry / "comm").read_text().strip()
            cmdline = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        zombie = stat[stat.rindex(")") + 2:].startswith("Z")
        if (name.startswith("VLLM::") or cmdline.startswith(b"VLLM::")) and not zombie:
            pids.add(int(entry.name))
    return pids


def wait_sweep_done(sweep, log, timeout, interval=0.5):
    """Wait until the sweep is `done`; fail with its status and the worker's log tail."""
    def finished():
        sweep.refresh_from_db()
        return sweep.status == "done"

    assert wait_for(finished, timeout=timeout, interval=interval), f"sweep is {sweep.status}:\n{log.read_text()[-4000:]}"
