"""GPU packing through a real Celery worker with two slots and real simengine servers
(issue 16): packed runs share the host at once on disjoint GPUs, each server told exactly
its own (CUDA_VISIBLE_DEVICES); exclusive runs take turns, a free slot notwithstanding."""

import pytest

from benchmarks.catalog import load_catalog
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import GpuLease, RequestRecord, Run, RunEvent
from sweepcore.gpus import overlapping_leases
from sweepcore.spec import validate
from tests.e2e.processes import celery_worker
from tests.e2e.test_sweep_worker import fast_engine, wait_sweep

pytestmark = [pytest.mark.slow, pytest.mark.backends]


def two_tp4_runs(packing):
    return validate({
        "name": f"two-tp4-{packing}", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim",
        "model": "Qwen/Qwen3.6-27B", "tp": [4], "methods": ["autoregressive", {"ddtree": {"budget": [15]}}],
        "workloads": ["fibonacci"], "max_new_tokens": 64, "concurrency": [2], "requests_per_point": 12,
        "options": {"packing": packing},
    }, load_catalog())


def run_sweep(packing, tmp_path):
    fast_engine(0.1)
    sweep, _ = create_sweep(two_tp4_runs(packing))
    log = tmp_path / "worker.log"
    with celery_worker(["host.sim-8x-rtxpro6000"], log, concurrency=2):
        launch_sweep(sweep)
        wait_sweep(sweep, timeout=300, log=log)
    runs = list(Run.objects.filter(sweep=sweep).order_by("position"))
    assert [r.status for r in runs] == ["done", "done"], [(r.status, r.failure_cause) for r in runs]
    leases = list(GpuLease.objects.filter(run__in=runs).order_by("leased_at"))
    assert all(lease.released_at is not None and lease.release_reason == "teardown" for lease in leases)
    # Never one GPU held by two runs at once, from the stored leases.
    assert overlapping_leases((l.host_id, l.gpu_index, l.leased_at, l.released_at, l.run_id) for l in leases) == []
    return runs, leases


def held(leases, run):
    mine = [lease for lease in leases if lease.run_id == run.pk]
    return sorted(lease.gpu_index for lease in mine), min(l.leased_at for l in mine), max(l.released_at for l in mine)


def test_packed_runs_share_the_host_at_once_on_disjoint_gpus(catalog, tmp_path):
    runs, leases = run_sweep("pack", tmp_path)
    (gpus_a, start_a, end_a), (gpus_b, start_b, end_b) = (held(leases, run) for run in runs)
    assert len(gpus_a) == len(gpus_b) == 4 and not set(gpus_a) & set(gpus_b)
    assert start_a < end_b and start_b < end_a  # they held their GPUs at the same time
    for run, gpus in zip(runs, (gpus_a, gpus_b)):
        # Each server was told exactly its own GPUs, and saw exactly those.
        launched = RunEvent.objects.get(run=run, kind="launched")
        assert launched.data["cuda_visible_devices"] == ",".join(map(str, gpus))
        assert run.server_info["simengine"]["visible_devices"] == gpus
    # A point measured while the other run held its GPUs names it; the drawer says so.
    (a, b) = runs
    shared = [p for p in a.points.all() if p.co_runs] + [p for p in b.points.all() if p.co_runs]
    assert shared and all(p.co_runs == [b.pk if p.run_id == a.pk else a.pk] for p in shared)


def test_exclusive_runs_take_turns_though_a_slot_is_free(catalog, tmp_path):
    runs, leases = run_sweep("exclusive", tmp_path)
    (gpus_a, start_a, end_a), (gpus_b, start_b, end_b) = (held(leases, run) for run in runs)
    assert gpus_a == gpus_b == list(range(8))
    assert end_a <= start_b or end_b <= start_a
    assert not any(p.co_runs for run in runs for p in run.points.all())
    waited = RunEvent.objects.filter(run__in=runs, kind="waiting_for_gpus")
    assert waited.exists() and "waiting for 8 GPU(s) of host sim-8x-rtxpro6000" in waited.first().message


def test_a_killed_workers_gpus_go_to_another_worker_once_its_heartbeat_is_stale(catalog, tmp_path, monkeypatch):
    import os
    import signal
    from datetime import timedelta

    from tests.e2e.processes import wait_for
    from tests.e2e.test_sweep_worker import TAKEOVER_ENV

    fast_engine(0.05)
    spec = validate({
        "name": "kill-lease", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
        "tp": [1], "methods": ["autoregressive", {"ddtree": {"budget": [15]}}],
        "workloads": [{"long-context": {"prompt_tokens": [1000, 2000, 3000, 4000]}}],
        "max_new_tokens": 64, "requests_per_point": 2,
    }, load_catalog())
    sweep, _ = create_sweep(spec)
    first = Run.objects.get(sweep=sweep, position=0)
    env = {**TAKEOVER_ENV, "SWEEPLAB_GPU_LEASE_POLL_S": "0.5"}
    monkeypatch.setenv("SWEEPLAB_STALE_CLAIM_S", "3")
    with celery_worker(["host.sim-8x-rtxpro6000"], tmp_path / "worker.log", **env) as worker:
        launch_sweep(sweep)
        assert wait_for(lambda: first.points.filter(status="ok").exists(), timeout=120, interval=0.2)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    first.refresh_from_db()
    last_beat = first.heartbeat_at
    held = GpuLease.objects.filter(run=first, released_at__isnull=True)
    assert held.count() == 8  # the dead worker's run still holds the host

    log = tmp_path / "worker2.log"
    with celery_worker(["host.sim-8x-rtxpro6000"], log, concurrency=2, **env):
        # nobody resumes it: the worker's periodic check takes the dead worker's run over
        wait_sweep(sweep, timeout=180, log=log)
    runs = list(Run.objects.filter(sweep=sweep))
    assert {r.status for r in runs} == {"done"}, [(r.status, r.failure_cause) for r in runs]
    dead = GpuLease.objects.filter(run=first, leased_at__lt=last_beat).order_by("gpu_index")
    assert dead.count() == 8
    for lease in dead:  # given back only once the heartbeat was stale, to the next worker
        assert lease.released_at >= last_beat + timedelta(seconds=3)
        taken_over = lease.release_reason.startswith("taken over by ") and first.claimed_by not in lease.release_reason
        assert taken_over or lease.release_reason == "taken back: its run's worker stopped heartbeating", \
            lease.release_reason
    leases = GpuLease.objects.filter(run__in=runs)
    assert overlapping_leases((l.host_id, l.gpu_index, l.leased_at, l.released_at, l.run_id) for l in leases) == []


def test_eight_tp1_runs_packed_on_an_eight_slot_worker_write_every_point_at_once(catalog, tmp_path):
    """Eight runs on one GPU each, from eight worker processes at once: on SQLite every
    writer queues for the one database lock, on PostgreSQL they take row locks (leases,
    claims, heartbeats, points). Nothing is lost or refused, and no GPU is held twice."""
    fast_engine(0.1)
    spec = validate({
        "name": "eight-tp1-pack", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
        "tp": [1], "methods": ["autoregressive", {"dflash": {"block_size": [16]}},
                               {"ddtree": {"budget": [4, 6, 15, 16, 32, 64]}}],
        "workloads": ["fibonacci", {"long-context": {"prompt_tokens": [1000, 2000]}}],
        "max_new_tokens": 32, "requests_per_point": 4, "options": {"packing": "pack"},
    }, load_catalog())
    sweep, _ = create_sweep(spec)
    log = tmp_path / "worker.log"
    with celery_worker(["host.sim-8x-rtxpro6000"], log, concurrency=8):
        launch_sweep(sweep)
        wait_sweep(sweep, timeout=300, log=log)
    runs = list(Run.objects.filter(sweep=sweep).order_by("position"))
    assert len(runs) == 8 and [r.status for r in runs] == ["done"] * 8, [(r.status, r.failure_cause) for r in runs]
    assert "database is locked" not in log.read_text()
    for run in runs:
        assert [p.status for p in run.points.order_by("position")] == ["ok"] * 3
        assert RequestRecord.objects.filter(point__run=run).count() == 3 * 4
    leases = list(GpuLease.objects.filter(run__in=runs))
    assert len(leases) == 8 and all(l.release_reason == "teardown" for l in leases)
    assert overlapping_leases((l.host_id, l.gpu_index, l.leased_at, l.released_at, l.run_id) for l in leases) == []
    # All eight held their GPU at the same moment: the last lease was taken before the first went back.
    assert max(l.leased_at for l in leases) < min(l.released_at for l in leases)
    assert sorted(l.gpu_index for l in leases) == list(range(8))
