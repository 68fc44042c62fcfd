"""The proof of issue 16 on the seed's example sweep (its 23 server configurations: AR,
DFlash and DDTree budgets at TP1, TP4 and TP8), through real Celery workers and real
simengine servers: ``exclusive`` on one simulated 8-GPU host, ``pack`` on it, and ``pack``
on two alike simulated hosts whose first worker is SIGKILLed mid-run.

For the packed sweeps, from the stored leases: no GPU of a host ever held by two runs at
once; every server told exactly the GPUs it leased (CUDA_VISIBLE_DEVICES), disjoint from
those of every run it overlapped on its host; the same outcome for every run and point as
the exclusive sweep (statuses, crash kinds, context-cap skips); every server launched with
the exclusive run's command, its port apart; and, point by point, no decode speed the
comparison rule calls better or worse than the exclusive one's by more than a fifth, beyond
the rule's chance (a tenth of the points compared: its false-positive rate is 1.5-2.6 %,
bench/validity.py). The killed host's runs finish on the other host, their GPUs given back
only once stale.

The exclusive sweep is also the proof of the example's course through a worker: its SM120
crashes (DDTree budgets 8 and 12) quarantined for the next sweep, the context cap at plan
time, TP1's KV cap at run time, never a zero recorded as a result, tree speculation several
times faster than plain decoding on code."""

import os
import signal
from collections import Counter
from datetime import timedelta

import pytest

from benchmarks.catalog import load_catalog
from benchmarks.models import KnownFailure
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import GpuLease, Point, RequestRecord, Run, RunEvent
from runs.results.gantt import sweep_gantt
from sweepcore.gpus import overlapping_leases
from sweepcore.spec import load_spec_file, load_yaml, validate
from sweepcore.stats import compare_samples
from tests.e2e.processes import celery_worker, simengine_pids, wait_for
from tests.e2e.test_sweep_worker import EXAMPLE, fast_engine, run_of, wait_sweep

pytestmark = [pytest.mark.slow, pytest.mark.agnostic, pytest.mark.quiet]

A, B = "sim-8x-rtxpro6000", "sim-8x-rtxpro6000-b"
#: The comparison's margin. Packed, up to 16 servers and their clients share this machine's
#: 2 cores, against one at a time exclusive: the autoregressive points, whose spread is a few
#: per cent, came out up to 12 % slower, which the rule rightly calls worse (the CPU, not
#: packing). A point measured with another's configuration differs by 24 % or more (TP4 and
#: TP8, 3,000 and 32,700 tokens of context); the commands themselves are compared exactly.
SPOILED_PCT = 20
STALE_S = 6  # heartbeats every 1.5 s (a quarter of it): a busy worker is not taken for dead
ENV = {"SWEEPLAB_STALE_CLAIM_S": str(STALE_S), "SWEEPLAB_GPU_LEASE_POLL_S": "0.5", "SWEEPLAB_TAKE_POLL_S": "0.5"}


#: New tokens a request: past the 37th, where DDTree budget 12 dies on SM120 (the profile's
#: crash rule), so that both crashing budgets crash.
NEW_TOKENS = 40
#: Beyond the model's 32,768 tokens of context with 40 new and the 16-token margin: skipped
#: when the sweep is planned, at every TP.
BEYOND_CONTEXT = 32730


def example(packing, hosts):
    """The example's configurations with few, short points: the fixed prompt, a long one, one
    that TP1's KV cache cannot hold (TP4 and TP8 measure it) and one beyond the context."""
    data = load_yaml(EXAMPLE.read_text(encoding="utf-8"), source=str(EXAMPLE))
    del data["until_stable"]
    data.update(name=f"{data['name']}-{packing}-{len(hosts)}", requests_per_point=6, max_new_tokens=NEW_TOKENS,
                workloads=["fibonacci", {"long-context": {"prompt_tokens": [3000, 32700, BEYOND_CONTEXT]}}])
    # Each sweep meets the crashes itself (the first would quarantine them for the others).
    data["options"].update(packing=packing, retry_quarantined=True)
    if len(hosts) > 1:
        del data["host"]
        data["hosts"] = hosts
    return validate(data, load_catalog())


def outcome(sweep):
    """{(method, params, tp): (run status, failure kind, {(workload, prompt): point}, command)},
    the command as launched with its port left out."""
    result = {}
    for run in Run.objects.filter(sweep=sweep).order_by("position"):
        points = {(p.workload.name, p.prompt_tokens): p for p in run.points.select_related("workload")}
        command = [a if b != "--port" else "PORT" for b, a in zip([None, *run.argv], run.argv)]
        result[(run.method, run.params_key, run.tp)] = (run.status, run.failure_kind, points, command)
    return result


def no_gpu_held_twice_and_each_server_saw_its_own(sweep):
    runs = list(Run.objects.filter(sweep=sweep))
    leases = list(GpuLease.objects.filter(run__in=runs))
    assert leases
    assert overlapping_leases((l.host_id, l.gpu_index, l.leased_at, l.released_at, l.run_id) for l in leases) == []
    spans = {}
    for lease in leases:
        spans.setdefault((lease.run_id, lease.leased_at), []).append(lease)
    for (run_id, _), held in spans.items():
        host = held[0].host_id
        start, end = held[0].leased_at, max(l.released_at for l in held)
        gpus = sorted(l.gpu_index for l in held)
        launched = RunEvent.objects.filter(run_id=run_id, kind="launched", at__gte=start, at__lte=end).first()
        if launched is None:  # it ended before launching (a quarantined or crashed start)
            continue
        told = [int(g) for g in launched.data["cuda_visible_devices"].split(",")]
        assert set(told) <= set(gpus), (run_id, told, gpus)
        for other in spans.values():
            o_start, o_end = other[0].leased_at, max(l.released_at for l in other)
            if other[0].run_id != run_id and other[0].host_id == host and o_start < end and start < o_end:
                assert not set(told) & {l.gpu_index for l in other}, (run_id, told, other[0].run_id)
    return len(spans)


def speeds(point):
    """Per request: output tokens per second of its decode (model time on a simulator)."""
    values = []
    for r in RequestRecord.objects.filter(point=point, error_kind="").order_by("index"):
        if len(r.chunk_offsets) > 1 and r.chunk_offsets[-1] > r.chunk_offsets[0]:
            values.append((r.output_tokens - 1) / (r.chunk_offsets[-1] - r.chunk_offsets[0]))
    return values


def same_as(exclusive, packed):
    """Every run and point ends as in the exclusive sweep, each server launched alike; returns
    the comparison verdicts of the points neither sweep calls invalid, those of them beyond
    SPOILED_PCT, and the (exclusive, packed) verdict pairs."""
    assert packed.keys() == exclusive.keys()
    verdicts, validity, beyond = Counter(), Counter(), []
    for config, (status, kind, points, command) in exclusive.items():
        p_status, p_kind, p_points, p_command = packed[config]
        assert (p_status, p_kind) == (status, kind), config
        assert p_command == command and (command or status != "done"), (config, command, p_command)
        assert p_points.keys() == points.keys(), config
        for key, point in points.items():
            other = p_points[key]
            assert other.status == point.status, (config, key, point.reason, other.reason)
            if point.status == "ok":
                validity[(point.validity, other.validity)] += 1
                # An invalid point's numbers are not to be compared (its verdict says why);
                # valid and suspect ones are compared by the comparison pages' own rule.
                if "invalid" not in (point.validity, other.validity):
                    comparison = compare_samples(speeds(point), speeds(other), higher_is_better=True)
                    verdicts[comparison.verdict] += 1
                    if comparison.verdict != "same" or abs(comparison.diff_pct or 0) > SPOILED_PCT:
                        print(config, key, comparison.verdict, comparison.reason)
                    if comparison.verdict in ("better", "worse") and abs(comparison.diff_pct) > SPOILED_PCT:
                        beyond.append((config, key, comparison.reason))
    return verdicts, beyond, validity


def the_example_ran_its_course(sweep):
    """The exclusive sweep's outcome, as the example's SM120 host would give it; then the next
    sweep of the example plans the crashed configurations as quarantined."""
    runs = list(Run.objects.filter(sweep=sweep))
    assert sweep.status == "done" and len(runs) == 23
    for budget in (8, 12):
        for tp in (1, 4, 8):
            run = run_of(sweep, "ddtree", tp, budget=budget)
            assert run.status == "crashed" and run.failure_kind == "cuda_illegal_instruction", run.failure_cause
            others = run.points.exclude(status__in=["crashed", "skipped"])
            assert set(others.values_list("status", flat=True)) == {"not_run"}
    crashed_ids = {r.pk for r in runs if r.status == "crashed"}
    assert len(crashed_ids) == 6
    assert all(r.status == "done" for r in runs if r.pk not in crashed_ids)

    # Never a zero recorded as a result.
    assert not Point.objects.filter(run__sweep=sweep, status="ok", total_output_tokens__lte=0).exists()
    assert not Point.objects.filter(run__sweep=sweep, status="ok", decode_tok_s__isnull=True).exists()
    # Beyond the context: skipped at plan time, everywhere.
    beyond = Point.objects.filter(run__sweep=sweep, prompt_tokens=BEYOND_CONTEXT)
    assert beyond.count() == 23
    for p in beyond:
        assert p.status == "skipped" and f"{BEYOND_CONTEXT} + {NEW_TOKENS} + 16 > 32768" in p.reason, p.reason
    # 32,700 tokens do not fit TP1's KV cache; TP4 and TP8 measure them.
    ar1, ar4, ar8 = (run_of(sweep, "autoregressive", tp) for tp in (1, 4, 8))
    assert ar1.points.get(prompt_tokens=32700).status == "skipped"
    assert "KV capacity" in ar1.points.get(prompt_tokens=32700).reason
    assert ar4.points.get(prompt_tokens=32700).status == "ok"
    assert ar8.points.get(prompt_tokens=32700).status == "ok"
    # Tree speculation on code is several times faster than plain decoding.
    fib_ar = ar1.points.get(workload__name="fibonacci").decode_tok_s
    fib_dd = run_of(sweep, "ddtree", 1, budget=15).points.get(workload__name="fibonacci").decode_tok_s
    assert fib_dd > 3 * fib_ar
    assert run_of(sweep, "ddtree", 1, budget=15).points.get(workload__name="fibonacci").accept_length > 3

    # The next sweep of the example as it is plans budgets 8 and 12 as quarantined.
    assert KnownFailure.objects.filter(active=True).count() == 6
    again, _ = create_sweep(load_spec_file(EXAMPLE, load_catalog()))
    skipped = {(r.params.get("budget"), r.tp) for r in Run.objects.filter(sweep=again, status="skipped")}
    assert skipped == {(8, 1), (8, 4), (8, 8), (12, 1), (12, 4), (12, 8)}


def test_the_example_packed_on_one_and_two_hosts_ends_as_exclusive(catalog, tmp_path):
    fast_engine(0.05, startup_time_scale=0.005)  # each start-up 0.2 s, not 2: 69 of them
    before = simengine_pids()
    sweeps = {}
    for packing in ("exclusive", "pack"):
        sweep, _ = create_sweep(example(packing, [A]))
        log = tmp_path / f"worker-{packing}.log"
        with celery_worker([f"host.{A}"], log, concurrency=8, **ENV):
            launch_sweep(sweep)
            wait_sweep(sweep, timeout=600, log=log)
        sweeps[packing] = sweep
        if packing == "exclusive":
            the_example_ran_its_course(sweep)
            assert wait_for(lambda: not (simengine_pids() - before), timeout=10)

    # Two hosts; host A's worker is killed while one of its runs is mid-way.
    sweep, _ = create_sweep(example("pack", [A, B]))
    log_a, log_b = tmp_path / "worker-a.log", tmp_path / "worker-b.log"
    with celery_worker([f"host.{B}"], log_b, concurrency=8, **ENV):
        with celery_worker([f"host.{A}"], log_a, concurrency=8, **ENV) as worker_a:
            launch_sweep(sweep)
            on_a = Run.objects.filter(sweep=sweep, host__name=A)
            mid_way = on_a.filter(status="running", points__status="ok")
            assert wait_for(lambda: on_a.filter(status="done").exists() and mid_way.exists(), timeout=300,
                            interval=0.2), log_a.read_text()[-3000:]
            os.killpg(worker_a.pid, signal.SIGKILL)
            worker_a.wait()
        victims = {r.pk: r.heartbeat_at
                   for r in Run.objects.filter(sweep=sweep, host__name=A, status__in=["starting", "running"])}
        wait_sweep(sweep, timeout=600, log=log_b)
    for pid in simengine_pids() - before:  # the killed host's servers: that host's to clean up
        os.kill(pid, signal.SIGKILL)
    sweeps["pack-2"] = sweep

    exclusive = outcome(sweeps["exclusive"])
    assert len(exclusive) == 23 and {s for s, _, _, _ in exclusive.values()} >= {"done", "crashed"}
    for name in ("pack", "pack-2"):
        spans = no_gpu_held_twice_and_each_server_saw_its_own(sweeps[name])
        verdicts, beyond, validity = same_as(exclusive, outcome(sweeps[name]))
        compared = sum(verdicts.values())
        print(f"{name}: {spans} holdings; verdict pairs (exclusive, packed) {dict(validity)}; "
              f"{compared} compared: {dict(verdicts)}, {len(beyond)} beyond {SPOILED_PCT} %; "
              f"makespan {sweep_gantt(sweeps[name])['ratio']:.2f} x ideal")
        # The comparison rule calls 1.5-2.6 % of identical pairs different (bench/validity.py):
        # about one of ~40 here by chance; a tenth would be packing spoiling the numbers.
        # At least ten points both sweeps could compare: the client's own verdicts (event-loop
        # lag, CPU share or chunk gaps under its resolution; which, not recorded) left out more
        # of them on a slower machine (11, 15 and 21 of 46 in three sweeps on 2026-12-07's,
        # 20 and more before); a packing that spoiled the numbers would still show in ten.
        assert compared >= 10 and len(beyond) <= max(2, compared // 10), beyond

    # The killed host's runs were taken over by host B, their leases given back once stale.
    assert victims
    for run in Run.objects.filter(pk__in=victims):
        assert run.host.name == B and run.status in ("done", "crashed"), (run.pk, run.status, run.failure_cause)
        assert RunEvent.objects.filter(run=run, kind="resumed", message__startswith=f"taken over on host {B}").exists()
        for lease in GpuLease.objects.filter(run=run, host__name=A):
            assert lease.released_at >= victims[run.pk] + timedelta(seconds=STALE_S), lease.release_reason
    assert {r.host.name for r in Run.objects.filter(sweep=sweep, status="done")} == {A, B}
    print(f"exclusive: makespan {sweep_gantt(sweeps['exclusive'])['ratio']:.2f} x ideal; "
          f"{len(victims)} run(s) of the killed host taken over")
