"""GPU leases (RunStore.lease_gpus): a GPU is held by one run at a time, which the database
enforces; exclusive runs take the whole host, packed runs their TP's GPUs; the largest
waiting need is served first; a dead worker's GPUs are taken back once its heartbeat is
stale; a run gives its GPUs back at the end."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmarks.catalog import load_catalog
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import GpuLease, Run
from runs.worker.store import RunStore
from sweepcore.spec import validate


def queued_runs(tps, packing="pack", claim=True):
    """The runs (their stores, in plan order) of a sweep on the 8-GPU simulated host,
    claimed by one worker each unless `claim` is False."""
    spec = validate(
        {"name": f"lease-{packing}", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim",
         "model": "Qwen/Qwen3.6-27B", "tp": sorted(set(tps)), "methods": ["autoregressive"],
         "workloads": ["fibonacci"], "options": {"packing": packing}},
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    run_ids = launch_sweep(sweep, enqueue=False)
    stores = []
    for i, run_id in enumerate(run_ids):
        store = RunStore(run_id, f"worker:{i}")
        assert not claim or store.claim()
        stores.append(store)
    return stores


def finish(store):
    """As the executor ends a run: its status first, then its GPUs given back."""
    Run.objects.filter(pk=store.run_id).update(status="done")
    return store.release_gpus("teardown")


def live(run_id):
    return sorted(GpuLease.objects.filter(run_id=run_id, released_at__isnull=True).values_list("gpu_index", flat=True))


def test_an_exclusive_run_leases_the_whole_host_and_the_next_waits(catalog):
    first, second = queued_runs([1, 2], packing="exclusive")
    assert first.lease_gpus(8).gpus == list(range(8))
    answer = second.lease_gpus(8)
    assert answer.gpus is None and answer.held == {i: first.run_id for i in range(8)}
    assert finish(first) == 8
    assert second.lease_gpus(8).gpus == list(range(8))
    released = GpuLease.objects.filter(run_id=first.run_id)
    assert {lease.release_reason for lease in released} == {"teardown"}


def test_packed_runs_get_disjoint_aligned_gpus(catalog):
    tp4, tp2, tp1 = sorted(queued_runs([1, 2, 4]), key=lambda s: -Run.objects.get(pk=s.run_id).tp)
    assert tp4.lease_gpus(4).gpus == [0, 1, 2, 3]
    assert tp2.lease_gpus(2).gpus == [4, 5]
    assert tp1.lease_gpus(1).gpus == [6]
    assert live(tp4.run_id) == [0, 1, 2, 3] and live(tp1.run_id) == [6]


def test_the_database_refuses_a_second_live_lease_of_one_gpu(catalog):
    second, first = queued_runs([1, 2])  # TP2 is served first
    assert first.lease_gpus(2).gpus == [0, 1]
    host_id = first.run.sweep.host_id
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuLease.objects.create(host_id=host_id, gpu_index=0, run_id=second.run_id, worker="w",
                                leased_at=timezone.now())
    # Once given back, the GPU can be leased again (the old row stays, as history).
    finish(first)
    GpuLease.objects.create(host_id=host_id, gpu_index=0, run_id=second.run_id, worker="w", leased_at=timezone.now())
    assert GpuLease.objects.filter(host_id=host_id, gpu_index=0).count() == 2


def test_the_largest_waiting_need_is_served_first(catalog):
    stores = queued_runs([1, 4, 8], claim=False)
    by_tp = {Run.objects.get(pk=s.run_id).tp: s for s in stores}
    assert by_tp[4].claim() and by_tp[4].lease_gpus(4).gpus == [0, 1, 2, 3]
    assert by_tp[8].claim() and by_tp[1].claim()
    # TP8 waits for the TP4 run; TP1 must not take the four free GPUs from under it.
    assert by_tp[8].lease_gpus(8).gpus is None
    blocked = by_tp[1].lease_gpus(1)
    assert blocked.gpus is None and blocked.behind == by_tp[8].run_id
    finish(by_tp[4])
    assert by_tp[8].lease_gpus(8).gpus == list(range(8))
    finish(by_tp[8])
    assert by_tp[1].lease_gpus(1).gpus == [0]


def test_a_dead_workers_gpus_are_taken_back_once_its_heartbeat_is_stale(catalog):
    dead, alive = queued_runs([4, 8], claim=False)
    assert dead.claim() and dead.lease_gpus(4).gpus is not None
    assert alive.claim()
    assert alive.lease_gpus(8).gpus is None  # the dead worker's run still looks alive
    Run.objects.filter(pk=dead.run_id).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    answer = alive.lease_gpus(8)
    assert answer.gpus == list(range(8)) and answer.taken_back == 4
    reasons = set(GpuLease.objects.filter(run_id=dead.run_id).values_list("release_reason", flat=True))
    assert reasons == {"taken back: its run's worker stopped heartbeating"}


def test_a_run_that_ended_without_giving_its_gpus_back_loses_them(catalog):
    ended, waiting = queued_runs([2, 8], claim=False)
    assert ended.claim() and ended.lease_gpus(2).gpus == [0, 1]
    assert waiting.claim()
    Run.objects.filter(pk=ended.run_id).update(status="crashed")
    answer = waiting.lease_gpus(8)
    assert answer.gpus == list(range(8)) and answer.taken_back == 2


def test_a_run_taken_over_gives_back_what_its_dead_worker_leased(catalog):
    (run,) = queued_runs([2])
    run.lease_gpus(2)
    Run.objects.filter(pk=run.run_id).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    from runs.worker.executor import RunExecutor

    successor = RunExecutor(run.run_id, "worker:new")
    assert successor.claim()
    assert live(run.run_id) == []
    assert set(GpuLease.objects.filter(run_id=run.run_id).values_list("release_reason", flat=True)) == {
        "taken over by worker:new"}


def test_a_hosts_worker_takes_as_many_runs_at_once_as_it_has_gpus(catalog, monkeypatch):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from runs.management.commands import worker

    started = []
    monkeypatch.setattr(worker.os, "execv", lambda path, argv: started.append(argv))
    call_command("worker", "--host", "sim-8x-rtxpro6000", stdout=None)
    call_command("worker", "--host", "sim-8x-rtxpro6000", "--slots", "2")
    call_command("worker", "--host", "local-cpu")
    slots = [argv[argv.index("--concurrency") + 1] for argv in started]
    assert slots == ["8", "2", "1"]
    with pytest.raises(CommandError, match="--slots must be at least 1, not 0"):
        call_command("worker", "--host", "local-cpu", "--slots", "0")
