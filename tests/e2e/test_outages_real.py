"""The worker outlives real outages of its dependencies (issue 19), on private instances
this test starts, restarts and removes (tests/e2e/services.py; never the shared ones):

- PostgreSQL restarted, then stopped for seconds, under a claimed run: every point is
  stored once with its request records, the heartbeat thread lives on and beats again.
- Redis (without persistence) killed and started again while a worker drives the first
  of three runs: the queued runs' tasks are gone with it; the run in flight finishes, the
  worker's consumer reconnects and its periodic check sends the lost runs again; the
  sweep finishes with every point stored once."""

import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest
from django.utils import timezone

from benchmarks.catalog import load_catalog
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import Point, Run, RunEvent
from sweepcore.spec import validate
from sweeplab.celery import EXECUTE_RUN, host_queue
from tests.e2e.processes import ROOT, celery_worker, simengine_pids, wait_for
from tests.e2e.services import private_postgres, private_redis
from tests.e2e.test_sweep_worker import fast_engine, wait_sweep

pytestmark = pytest.mark.slow


class Lines:
    """The lines a child process writes, read with a timeout."""

    def __init__(self, stream):
        self.lines = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in stream], daemon=True).start()

    def next(self, timeout):
        try:
            return self.lines.get(timeout=timeout).strip()
        except queue.Empty:
            raise AssertionError(f"nothing from the child within {timeout} s") from None


@pytest.mark.agnostic
def test_a_run_outlives_a_postgresql_restart_and_stop(tmp_path):
    with private_postgres() as pg:
        env = {**os.environ, "DATABASE_URL": pg.url, "SWEEPLAB_DATA_DIR": str(tmp_path / "data"),
               "SWEEPLAB_STALE_CLAIM_S": "2"}
        child = subprocess.Popen([sys.executable, "-m", "tests.e2e.pg_outage_child"], cwd=ROOT, env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(tmp_path / "child.log", "w"),
                                 text=True)
        try:
            out = Lines(child.stdout)
            assert out.next(240) == "stored 0", (tmp_path / "child.log").read_text()
            pg.restart()  # every connection terminated by the administrator
            child.stdin.write("\n")
            child.stdin.flush()
            assert out.next(120) == "stored 1", (tmp_path / "child.log").read_text()
            pg.stop()
            child.stdin.write("\n")
            child.stdin.flush()
            time.sleep(5)  # the third point waits for the database meanwhile
            pg.start()
            assert out.next(120) == "stored 2", (tmp_path / "child.log").read_text()
            child.stdin.write("\n")
            child.stdin.flush()
            summary = json.loads(out.next(60))
        finally:
            child.kill()
            child.wait()
    log = (tmp_path / "child.log").read_text()
    assert summary == {"points": ["ok", "ok", "ok"], "records": [5, 5, 5], "heartbeat_alive": True,
                       "beat_after_outage": True, "status": "starting"}, log
    assert "database unreachable during RunStore.store_point" in log


@pytest.mark.backends
def test_queued_runs_lost_with_a_redis_restart_are_sent_again(catalog, tmp_path):
    from celery import Celery

    fast_engine(0.05)
    spec = validate({
        "name": "redis-restart", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
        "tp": [1], "methods": ["autoregressive", {"ddtree": {"budget": [15]}}, {"dflash": {"block_size": [16]}}],
        "workloads": [{"long-context": {"prompt_tokens": [1000, 2000, 3000]}}],
        "max_new_tokens": 64, "requests_per_point": 2,
    }, load_catalog())
    sweep, _ = create_sweep(spec)
    run_ids = launch_sweep(sweep, enqueue=False)
    first = Run.objects.get(pk=run_ids[0])
    log = tmp_path / "worker.log"
    env = {"SWEEPLAB_REQUEUE_AFTER_S": "4", "SWEEPLAB_WATCH_INTERVAL_S": "1"}
    with private_redis() as redis:
        sender = Celery("sender", broker=redis.url)
        for run_id in run_ids:  # as lifecycle._enqueue sends them, on this broker
            sender.send_task(EXECUTE_RUN, kwargs={"run_id": run_id}, queue=host_queue("sim-8x-rtxpro6000"))
        Run.objects.filter(pk__in=run_ids).update(sent_at=timezone.now())
        with celery_worker(["host.sim-8x-rtxpro6000"], log, CELERY_BROKER_URL=redis.url, **env):
            assert wait_for(lambda: first.points.filter(status="ok").exists(), timeout=120, interval=0.2), \
                log.read_text()[-3000:]
            redis.restart(down_s=3)  # the two queued runs' tasks go with it
            wait_sweep(sweep, timeout=240, log=log)
        sender.close()
    runs = list(Run.objects.filter(sweep=sweep).order_by("position"))
    assert [r.status for r in runs] == ["done"] * 3, [(r.status, r.failure_cause) for r in runs]
    assert Point.objects.filter(run__sweep=sweep).count() == 9
    assert set(Point.objects.filter(run__sweep=sweep).values_list("status", flat=True)) == {"ok"}
    resent = RunEvent.objects.filter(run__in=runs[1:], kind="queued", message__startswith="re-sent to host.")
    assert resent.exists(), log.read_text()[-3000:]
    # Its servers are gone (the machine's other simengines are not this test's business).
    assert wait_for(lambda: not {r.pid for r in runs} & simengine_pids(), timeout=10)
