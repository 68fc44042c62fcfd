"""Run.objects.claim: one conditional UPDATE, so one claim of a run succeeds; a stale
heartbeat lets another worker take over, after which the worker taken for dead writes
nothing of the run; a cancelled sweep's runs are never taken."""

from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks.catalog import load_catalog
from runs.lifecycle import cancel_sweep, create_sweep, launch_sweep
from runs.models import GpuLease, Point, Run
from runs.worker.store import (
    ClaimLost,
    RunStore,
    heartbeat_interval,
    seconds_until_stale,
)
from sweepcore.failures import Failure
from sweepcore.kinds import FailureKind
from sweepcore.spec import validate


@pytest.fixture
def queued(catalog):
    """The id of a queued run, its task not sent."""
    spec = validate(
        {"name": "claim", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
         "tp": [1], "methods": ["autoregressive"], "workloads": ["fibonacci"]},
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    (run_id,) = launch_sweep(sweep, enqueue=False)
    return run_id


def test_only_one_of_two_workers_claims_a_queued_run(queued):
    now = timezone.now()
    assert Run.objects.claim(queued, "a:1", now, now - timedelta(seconds=60), host_id=None)
    assert not Run.objects.claim(queued, "b:2", now, now - timedelta(seconds=60), host_id=None)
    run = Run.objects.get(pk=queued)
    assert (run.status, run.claimed_by, run.heartbeat_at) == ("starting", "a:1", now)


def test_a_stale_heartbeat_lets_another_worker_take_over(queued):
    first = RunStore(queued, "a:1")
    assert first.claim() and first.run.sweep.host.name == "sim-8x-rtxpro6000"
    assert seconds_until_stale(queued) > 50  # a live claim: wait for it to go stale
    Run.objects.filter(pk=queued).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    second = RunStore(queued, "b:2")
    assert second.claim()
    assert not first.heartbeat()  # the first worker learns it lost the run
    assert second.heartbeat()


def test_a_cancelled_sweep_s_runs_are_not_taken(queued):
    cancel_sweep(Run.objects.get(pk=queued).sweep)
    Run.objects.filter(pk=queued).update(status="queued")  # a task delivered before the cancel
    assert not RunStore(queued, "a:1").claim()
    assert seconds_until_stale(queued) is None


def taken_over(run_id):
    """(the first worker's store, the second's): the first claimed the run and was then
    taken for dead."""
    first = RunStore(run_id, "a:1")
    assert first.claim()
    Run.objects.filter(pk=run_id).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    second = RunStore(run_id, "b:2")
    assert second.claim()
    return first, second


def test_a_worker_taken_for_dead_can_neither_crash_nor_finish_the_run_it_lost(queued):
    first, second = taken_over(queued)
    killed = Failure(FailureKind.KILLED, "killed by SIGKILL", ())
    with pytest.raises(ClaimLost):
        first.record_crash(None, "the first point", killed)  # its server, killed by the new owner
    with pytest.raises(ClaimLost):
        first.finish("done")
    with pytest.raises(ClaimLost):
        first.touch()
    # The new owner's run and points are as it left them: no crash kind to outlive its "done".
    run = Run.objects.get(pk=queued)
    assert (run.status, run.claimed_by, run.failure_kind) == ("starting", "b:2", "")
    assert set(Point.objects.filter(run_id=queued).values_list("status", flat=True)) == {"planned"}
    second.finish("done")
    assert Run.objects.get(pk=queued).status == "done"


def test_a_worker_taken_for_dead_gives_back_only_its_own_gpus(queued):
    first, second = taken_over(queued)
    host_id = first.run.host_id
    GpuLease.objects.create(host_id=host_id, gpu_index=0, run_id=queued, worker="a:1", leased_at=timezone.now())
    assert second.take_back_leases("taken over by b:2") == 1
    GpuLease.objects.create(host_id=host_id, gpu_index=0, run_id=queued, worker="b:2", leased_at=timezone.now())
    assert first.release_gpus("teardown") == 0
    assert GpuLease.objects.get(released_at__isnull=True).worker == "b:2"


def test_a_live_worker_beats_at_least_four_times_per_stale_time(monkeypatch):
    assert heartbeat_interval() == 5
    monkeypatch.setenv("SWEEPLAB_STALE_CLAIM_S", "4")
    assert heartbeat_interval() == 1
