"""A sweep whose runs several alike hosts share (spec ``hosts: [a, b]``): one token per run
on the hosts' queues; a worker holding one drives the first run that fits its host's free
GPUs now (runs.worker.store.run_to_take), its host recorded on the run by the claim; a run
whose host stopped heartbeating is taken over by another host."""

from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks.catalog import load_catalog
from benchmarks.models import Host
from runs import lifecycle
from runs.lifecycle import cancel_sweep, create_sweep, launch_sweep
from runs.models import GpuLease, Run, RunEvent
from runs.worker.store import TAKE_POLL_S, RunStore, run_to_take, stale_after
from sweepcore.spec import validate
from sweeplab.celery import TAKE_RUN

A, B = "sim-8x-rtxpro6000", "sim-8x-rtxpro6000-b"


def shared_sweep(tps, packing="pack", enqueue=False):
    spec = validate(
        {"name": f"two-hosts-{packing}", "hosts": [A, B], "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
         "tp": sorted(set(tps)), "methods": ["autoregressive"], "workloads": ["fibonacci"],
         "options": {"packing": packing}},
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    run_ids = launch_sweep(sweep, enqueue=enqueue)
    return sweep, run_ids


def host(name):
    return Host.objects.get(name=name)


def take(sweep, name, worker):
    """What a worker of host `name` does with a token: find a run, claim it there, lease."""
    run_id, wait = run_to_take(sweep.pk, host(name), timezone.now())
    if run_id is None:
        return None, wait
    store = RunStore(run_id, worker, host(name).pk)
    assert store.claim()
    run = Run.objects.get(pk=run_id)
    count = 8 if sweep.spec["options"]["packing"] == "exclusive" else run.tp
    assert store.lease_gpus(count).gpus is not None
    return store, None


def test_launch_spreads_one_token_per_run_over_the_hosts_queues(catalog, monkeypatch,
                                                                 django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(lifecycle, "send_to_host", lambda task, name, **kw: sent.append((task, name, kw)))
    with django_capture_on_commit_callbacks(execute=True):
        sweep, run_ids = shared_sweep([1, 2, 4], enqueue=True)
    assert [(task, name) for task, name, _ in sent] == [(TAKE_RUN, A), (TAKE_RUN, B), (TAKE_RUN, A)]
    assert all(kw == {"sweep_id": sweep.pk, "host": name} for _, name, kw in sent)
    assert RunEvent.objects.filter(run_id=run_ids[0], kind="queued").get().message == (
        f"queued on hosts {A}, {B} (each takes the next run that fits)")


def test_each_host_takes_what_fits_its_free_gpus_and_the_claim_records_where(catalog):
    sweep, _ = shared_sweep([8, 4, 1])  # packed: sent largest TP first
    tp8, _ = take(sweep, A, "a:1")
    assert Run.objects.get(pk=tp8.run_id).tp == 8 and Run.objects.get(pk=tp8.run_id).host.name == A
    # Host A is full: its worker waits and looks again; host B takes the TP4 run.
    assert run_to_take(sweep.pk, host(A), timezone.now()) == (None, TAKE_POLL_S)
    tp4, _ = take(sweep, B, "b:1")
    assert (Run.objects.get(pk=tp4.run_id).tp, Run.objects.get(pk=tp4.run_id).host.name) == (4, B)
    assert sorted(GpuLease.objects.filter(run_id=tp4.run_id).values_list("gpu_index", flat=True)) == [0, 1, 2, 3]
    tp1, _ = take(sweep, B, "b:2")
    assert Run.objects.get(pk=tp1.run_id).host.name == B
    # Both hosts' GPU 0 are held at once: leases are per host.
    assert GpuLease.objects.filter(gpu_index=0, released_at__isnull=True).count() == 2


def test_a_host_skips_a_run_too_big_for_its_free_gpus_and_another_host_takes_it(catalog):
    sweep, _ = shared_sweep([1, 8])
    tp8 = Run.objects.get(sweep=sweep, tp=8)
    blocker = RunStore(Run.objects.get(sweep=sweep, tp=1).pk, "a:1", host(A).pk)
    assert blocker.claim() and blocker.lease_gpus(1).gpus == [0]
    assert run_to_take(sweep.pk, host(A), timezone.now()) == (None, TAKE_POLL_S)  # 7 free GPUs: no TP8
    assert run_to_take(sweep.pk, host(B), timezone.now()) == (tp8.pk, None)


def test_a_run_whose_host_stopped_heartbeating_is_taken_over_by_another_host(catalog):
    sweep, _ = shared_sweep([4], packing="exclusive")
    dead, _ = take(sweep, A, "a:1")
    Run.objects.filter(pk=dead.run_id).update(pid=4242, argv=["simengine"])
    # While its heartbeat is fresh, B has nothing to take: it looks again once it could be stale.
    run_id, wait = run_to_take(sweep.pk, host(B), timezone.now())
    assert run_id is None and 0 < wait <= stale_after().total_seconds()
    Run.objects.filter(pk=dead.run_id).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert run_to_take(sweep.pk, host(B), timezone.now()) == (dead.run_id, None)
    from runs.worker.executor import RunExecutor

    successor = RunExecutor(dead.run_id, "b:1", host(B).pk)
    assert successor.claim()
    run = Run.objects.get(pk=dead.run_id)
    assert run.host.name == B and run.claimed_by == "b:1"
    # Host A's leases went with the run; no pid of host A was killed from host B.
    assert not GpuLease.objects.filter(run=run, released_at__isnull=True).exists()
    resumed = RunEvent.objects.get(run=run, kind="resumed")
    assert resumed.message.startswith(f"taken over on host {B} from another host")
    assert successor.store.lease_gpus(8).gpus == list(range(8))
    assert set(GpuLease.objects.filter(run=run, released_at__isnull=True).values_list("host__name", flat=True)) == {B}


@pytest.mark.parametrize("how", ["finished", "cancelled"])
def test_a_token_ends_when_nothing_is_left_to_take(catalog, how):
    sweep, run_ids = shared_sweep([1, 2])
    if how == "finished":
        Run.objects.filter(pk__in=run_ids).update(status="done")
    else:
        cancel_sweep(sweep)
    assert run_to_take(sweep.pk, host(A), timezone.now()) == (None, None)


def test_runs_of_a_one_host_sweep_are_recorded_on_that_host(catalog):
    spec = validate({"name": "one", "host": A, "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
                     "methods": ["autoregressive"], "workloads": ["fibonacci"]}, load_catalog())
    sweep, _ = create_sweep(spec)
    (run_id,) = launch_sweep(sweep, enqueue=False)
    store = RunStore(run_id, "w:1")
    assert store.claim() and store.host.name == A and Run.objects.get(pk=run_id).host.name == A
