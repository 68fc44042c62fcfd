"""Open loops, SLOs and the capacity search against real simengine processes (issue 15)."""

import json

import pytest

from benchmarks.models import Engine
from runs.models import Point, RequestRecord, Run, RunEvent
from runs.results.exports import sweep_as_dict
from tests.e2e.test_executor import events, no_stray_servers, run_inline, spec  # noqa: F401

# A model second lasts 50 ms: TP1's 37 ms decode steps take 1.85 ms of wall time, well
# above what the client can stamp; start-up takes seconds.
SCALE = "0.05"


@pytest.fixture
def engine(catalog):
    base = Engine.objects.get(name="sglang-sim")
    return Engine.objects.create(name="sim-load", kind="simulated", method_args=base.method_args,
                                 argv_template=[*base.argv_template, "--time-scale", SCALE], readiness_timeout_s=60)


@pytest.mark.agnostic
@pytest.mark.slow
def test_an_open_loop_counts_the_clients_queue_in_its_latencies(engine):
    # Two requests in flight at most, arrivals at 8/s against a server that needs about 2 s
    # a request: the client holds the rest back, so they are sent late. TTFT from the
    # schedule counts that wait; TTFT from the send does not.
    sweep = run_inline(spec(engine=engine.name, workloads=["fibonacci"], request_rate=[0.5, 8], max_concurrency=2,
                            requests_per_point=12, slo={"ttft_p99_ms": 1500}))
    run = Run.objects.get(sweep=sweep)
    slow, fast = run.points.order_by("request_rate")
    assert (slow.request_rate, fast.request_rate) == (0.5, 8.0)
    assert {p.concurrency for p in (slow, fast)} == {2} and {p.burstiness for p in (slow, fast)} == {1.0}
    for point in (slow, fast):
        assert point.status == "ok" and point.completed == 12
        lags = list(RequestRecord.objects.filter(point=point).values_list("send_lag", flat=True))
        assert len(lags) == 12 and all(lag is not None and lag >= 0 for lag in lags)
        assert point.send_based["p99_ttft_ms"] <= point.p99_ttft_ms
    assert fast.send_lag_p99_ms > 1000  # model ms: requests waited seconds for a free slot
    assert fast.p99_ttft_ms > 2 * fast.send_based["p99_ttft_ms"]
    assert fast.p99_ttft_ms > 1500 and fast.slo_met is False and fast.slo_checks["ttft_p99_ms"]["met"] is False
    assert fast.goodput < fast.request_throughput
    assert slow.slo_met is True and slow.slo_attainment == 1.0
    assert slow.goodput == pytest.approx(slow.request_throughput)


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_capacity_search_stores_each_probe_and_the_runs_capacity(engine):
    sweep = run_inline(spec(
        engine=engine.name, workloads=["fibonacci"], requests_per_point=8, slo={"ttft_p99_ms": 3000},
        search={"max_goodput": {"metric": "request_rate", "low": 0.25, "high": 16, "resolution": 0.25}},
        options={"stall_timeout_s": 10, "cooldown_s": 1},
    ))
    run = Run.objects.get(sweep=sweep)
    assert run.status == "done", run.failure_cause
    probes = list(run.points.order_by("position"))
    assert probes and all(p.from_search and p.request_rate is not None for p in probes)
    assert len({p.request_rate for p in probes}) == len(probes)  # no load probed twice
    assert all(p.slo_met is not None for p in probes)
    capacity = run.capacity
    assert capacity["metric"] == "request_rate" and capacity["probes"] == len(probes)
    assert capacity["stopped_because"] in ("resolution", "saturated", "reached_high")
    best = Point.objects.get(pk=capacity["point"])
    assert best.request_rate == capacity["load"] and best.slo_met is True
    assert capacity["goodput"] == best.goodput
    assert capacity["tok_s_per_gpu"] == pytest.approx(best.output_throughput / run.tp)
    assert capacity["tok_s_per_user"] == pytest.approx(1000 / best.median_tpot_ms)
    kinds = events(run)
    assert "capacity" in kinds and kinds.count("cache_reset") == len(probes) - 1
    assert RunEvent.objects.filter(run=run, kind="cache_reset").first().message == "cache reset (POST /flush_cache)"
    shown = json.loads(json.dumps(sweep_as_dict(sweep)))["runs"][0]
    assert set(shown["capacity"]) >= {"load", "goodput", "output_tok_s", "tok_s_per_gpu", "tok_s_per_user",
                                      "stopped_because"}
    assert {"request_rate", "goodput", "slo_met"} <= set(shown["points"][0])



@pytest.mark.agnostic
@pytest.mark.slow
def test_a_resumed_search_goes_on_from_the_probes_it_stored(engine):
    from runs.worker.executor import execute_run

    sweep = run_inline(spec(
        engine=engine.name, workloads=["fibonacci"], requests_per_point=6, slo={"ttft_p99_ms": 3000},
        search={"max_goodput": {"metric": "request_rate", "low": 0.5, "high": 8}}, options={"cooldown_s": 1},
    ))
    run = Run.objects.get(sweep=sweep)
    probes = list(run.points.order_by("position"))
    assert len(probes) >= 3 and run.capacity
    # As if the worker had died while measuring the last probe, before the search ended.
    kept, lost = probes[:-1], probes[-1]
    Point.objects.filter(pk=lost.pk).update(status="planned", validity="", finished_at=None)
    RequestRecord.objects.filter(point=lost).delete()
    Run.objects.filter(pk=run.pk).update(status="queued", capacity={})
    sweep.status = "running"
    sweep.save(update_fields=["status"])
    execute_run(run.pk, worker_id="test-resumed")
    run.refresh_from_db()
    assert run.status == "done" and run.capacity["probes"] >= len(probes)
    again = {p.pk: p for p in run.points.all()}
    for point in kept:  # measured once: never again
        assert again[point.pk].finished_at == point.finished_at
    assert again[lost.pk].status == "ok" and again[lost.pk].requests.count() == 6
    loads = [p.request_rate for p in again.values()]
    assert len(loads) == len(set(loads))
