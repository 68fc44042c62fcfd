"""Run.objects.claim: one conditional UPDATE, so one claim of a run succeeds; a stale
heartbeat lets another worker take over; a cancelled sweep's runs are never taken."""

from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks.catalog import load_catalog
from runs.lifecycle import cancel_sweep, create_sweep, launch_sweep
from runs.models import Run
from runs.worker.store import RunStore, seconds_until_stale
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
