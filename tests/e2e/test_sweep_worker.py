"""A sweep through a real Celery worker and real simengine servers whose worker is killed in
the middle of a run: the next worker takes the run over by itself. (The example spec's
course through a worker, its SM120 crashes and KV cap, is proved on the exclusive sweep of
test_packing_example.py, which runs the same 23 configurations.) Helpers the other worker
tests share."""

import os
import signal
from pathlib import Path

import pytest

from benchmarks.catalog import load_catalog
from benchmarks.models import Engine
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import Point, Run, RunEvent
from sweepcore.spec import validate
from sweeplab.celery import EXECUTE_RUN, send_to_host
from tests.e2e.processes import celery_worker, simengine_pids, wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen3.6-27b-sm120.yaml"


def fast_engine(time_scale, startup_time_scale=None):
    engine = Engine.objects.get(name="sglang-sim")
    engine.argv_template = engine.argv_template + ["--time-scale", str(time_scale)]
    if startup_time_scale is not None:
        engine.argv_template += ["--startup-time-scale", str(startup_time_scale)]
    engine.readiness_timeout_s = 60
    engine.save()
    return engine


def wait_sweep(sweep, timeout, log):
    def finished():
        sweep.refresh_from_db()
        return sweep.status in ("done", "cancelled")

    assert wait_for(finished, timeout=timeout, interval=1), f"sweep still {sweep.status}:\n{log.read_text()[-3000:]}"


#: A killed worker's run is stale after 3 s; a live worker's periodic check (every 0.75 s,
#: a quarter of that) sends it again, and the queued runs whose tasks the killed worker
#: had taken with it after 5 s.
TAKEOVER_ENV = {"SWEEPLAB_STALE_CLAIM_S": "3", "SWEEPLAB_REQUEUE_AFTER_S": "5"}


def run_of(sweep, method, tp, **params):
    return next(
        r for r in Run.objects.filter(sweep=sweep, method=method, tp=tp) if all(r.params.get(k) == v for k, v in params.items())
    )


@pytest.mark.backends
@pytest.mark.slow
def test_a_worker_killed_mid_run_is_taken_over_by_itself_without_losing_or_repeating_points(catalog, tmp_path,
                                                                                             monkeypatch):
    fast_engine(0.05)
    before = simengine_pids()
    spec = validate(
        {
            "name": "kill", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
            "tp": [1], "methods": ["autoregressive", {"ddtree": {"budget": [15]}}],
            "workloads": [{"long-context": {"prompt_tokens": [1000, 2000, 3000, 4000, 5000]}}],
            "max_new_tokens": 64, "requests_per_point": 2, "warmup_requests": 1,
        },
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    first = Run.objects.get(sweep=sweep, position=0)
    log = tmp_path / "worker.log"
    env = TAKEOVER_ENV
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with celery_worker(["host.sim-8x-rtxpro6000"], log, **env) as worker:
        launch_sweep(sweep)
        assert wait_for(lambda: first.points.filter(status="ok").count() >= 2, timeout=120, interval=0.2), log.read_text()
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    stored = {p.pk: (p.status, p.output_throughput, p.finished_at) for p in first.points.filter(status="ok")}
    first.refresh_from_db()
    assert first.status == "running"
    orphan = first.pid
    assert orphan in simengine_pids()  # the dead worker's server lives on

    # Nobody resumes it: the next worker's periodic check finds the run stale and sends it again.
    with celery_worker(["host.sim-8x-rtxpro6000"], tmp_path / "worker2.log", **env):
        wait_sweep(sweep, timeout=180, log=tmp_path / "worker2.log")
        first.refresh_from_db()
        events_before = RunEvent.objects.filter(run=first).count()
        # A duplicate delivery of a finished run's task does nothing: once the worker says it
        # has handled the task, the run has no new event.
        task = send_to_host(EXECUTE_RUN, "sim-8x-rtxpro6000", run_id=first.pk)
        handled = f"Task {EXECUTE_RUN}[{task.id}] succeeded"
        assert wait_for(lambda: handled in (tmp_path / "worker2.log").read_text(), timeout=30, interval=0.2), \
            (tmp_path / "worker2.log").read_text()[-3000:]
        assert RunEvent.objects.filter(run=first).count() == events_before

    assert first.status == "done"
    assert Point.objects.filter(run=first).count() == 5
    assert set(first.points.values_list("status", flat=True)) == {"ok"}
    for pk, values in stored.items():
        p = Point.objects.get(pk=pk)
        assert (p.status, p.output_throughput, p.finished_at) == values
    assert Run.objects.get(sweep=sweep, position=1).status == "done"
    taken = RunEvent.objects.get(run=first, kind="resumed").message
    assert taken.startswith("taken over: its worker ") and taken.endswith(f"; its server (pgid {orphan}) was killed")
    resent = RunEvent.objects.filter(run=first, kind="queued", message__startswith="re-sent to host.sim-8x-rtxpro6000: "
                                                                              "its worker ")
    # Once, or again each SWEEPLAB_REQUEUE_AFTER_S (5 s) while no worker has taken it over yet
    # (on a loaded machine the new worker's consumer can start later than that): never twice
    # at once. A second delivery is harmless: the claim takes one.
    sent_at = list(resent.order_by("at").values_list("at", flat=True))
    assert sent_at and all((b - a).total_seconds() >= 5 for a, b in zip(sent_at, sent_at[1:])), sent_at
    assert not os.path.exists(f"/proc/{orphan}") or orphan not in simengine_pids()
    assert wait_for(lambda: not (simengine_pids() - before), timeout=10)
