"""Migration 0009: points measured before verdicts existed get one, from their records or,
for imported points without records, from their stored columns."""

import importlib

import pytest
from django.apps import apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from runs.models import Point, RequestRecord
from tests.web.sweeps import add_run, make_sweep

backfill = importlib.import_module("runs.migrations.0009_point_verdicts_backfill").backfill


def record(point, index, *, gap=0.02, tokens=64, error_kind=""):
    """A request that decoded `tokens` tokens one per chunk, `gap` seconds apart."""
    offsets = [0.1 + i * gap for i in range(tokens)] if not error_kind else []
    return RequestRecord(point=point, index=index, send_time=1000.0 + index, chunk_offsets=offsets,
                         chunk_tokens=[1] * len(offsets), prompt_tokens=20, output_tokens=len(offsets),
                         token_count_source="server_cumulative", error_kind=error_kind,
                         error="boom" if error_kind else "")


def test_measured_points_get_a_verdict_and_intervals_from_their_records(catalog):
    run = add_run(make_sweep(), 0, "autoregressive", {}, 1, statuses={1: "failed", 2: "skipped"}, duration=9.0,
                  completed=8, failed=0)
    ok, failed, skipped = run.points.order_by("position")
    RequestRecord.objects.bulk_create(record(ok, i, gap=0.02 + i * 0.0001, tokens=256) for i in range(8))
    RequestRecord.objects.bulk_create([record(failed, 0), *(record(failed, i, error_kind="http_error")
                                                            for i in (1, 2, 3))])
    Point.objects.filter(pk=failed.pk).update(completed=1, failed=3, duration=2.0)

    backfill(apps, None)

    ok.refresh_from_db(), failed.refresh_from_db(), skipped.refresh_from_db()
    assert ok.validity == "valid" and ok.validity_reasons == []
    lo, hi = ok.intervals["decode_tok_s"]
    assert lo <= 1 / 0.0204 <= hi and hi < 50  # around the median request's 49 tok/s
    assert failed.validity == "invalid"
    assert {r["code"] for r in failed.validity_reasons} >= {"failed_requests", "few_requests"}
    assert skipped.validity == "" and skipped.validity_reasons == []  # nothing measured


def test_an_imported_point_without_records_is_judged_from_its_columns(catalog):
    run = add_run(make_sweep(), 0, "autoregressive", {}, 1, completed=3, failed=0, duration=12.0,
                  client_bound=True)
    point = run.points.order_by("position").first()

    backfill(apps, None)

    point.refresh_from_db()
    assert point.validity == "invalid"
    assert [r["code"] for r in point.validity_reasons] == ["client_bound", "few_requests"]
    assert point.intervals == {}


def test_a_crashed_point_without_records_is_invalid_and_says_why(catalog):
    run = add_run(make_sweep(), 0, "autoregressive", {}, 1, statuses={0: "crashed"})
    point = run.points.order_by("position").first()
    backfill(apps, None)
    point.refresh_from_db()
    assert point.validity == "invalid" and point.validity_reasons[0]["code"] == "crashed"
    assert "crashed reason" in point.validity_reasons[0]["message"]


def test_an_imported_file_stores_a_verdict_on_every_point(catalog):
    from benchmarks.models import Engine, Host
    from runs.imports import import_file
    from tests.import_samples import SGLANG_FILE, VLLM_FILE

    Host.objects.create(name="h200-box", gpu_model="NVIDIA H200", gpu_count=8, compute_capability="9.0")
    Engine.objects.create(name="sglang-h200", kind="sglang", argv_template=["python", "-m", "sglang.launch_server"])
    Engine.objects.create(name="vllm-h200", kind="vllm", argv_template=["vllm", "serve", "{model_path}"])

    engines = {VLLM_FILE: "vllm-h200", SGLANG_FILE: "sglang-h200"}  # the demo has a CPU vLLM engine too
    for sample in (VLLM_FILE, SGLANG_FILE):
        result = import_file(sample.name, sample.read_bytes(), host="h200-box", engine=engines[sample])
        points = list(Point.objects.filter(run__sweep=result.sweep))
        assert points and all(p.validity in ("valid", "suspect", "invalid") for p in points)
        for p in points:
            assert (p.validity == "valid") == (p.validity_reasons == [])
            if p.completed and p.completed < 5:
                assert "few_requests" in [r["code"] for r in p.validity_reasons]
            if p.requests.filter(error_kind="").count() >= 6:
                assert "decode_tok_s" in p.intervals


def test_a_point_measured_on_a_time_scaled_simulator_is_converted_to_model_time(catalog):
    run = add_run(make_sweep(), 0, "ddtree", {"budget": 15, "topk_cap": 8}, 1, duration=1.5, completed=8, failed=0,
                  decode_tok_s=1250.0, median_tpot_ms=0.8)
    run.server_info = {"simengine": {"time_scale": 0.02}}
    run.save(update_fields=["server_info"])
    point = run.points.order_by("position").first()
    RequestRecord.objects.bulk_create(record(point, i, gap=0.0008, tokens=64) for i in range(8))

    backfill(apps, None)

    point.refresh_from_db()
    assert point.simulated_time_scale == 0.02
    # Times divided by the scale, rates multiplied by it: what the executor now stores.
    assert (point.duration, point.decode_tok_s, point.median_tpot_ms) == (75.0, 25.0, 40.0)
    lo, hi = point.intervals["median_tpot_ms"]
    assert lo <= 40.0 <= hi and lo > 10  # the interval in model time too
    # Judged on the wall time it was measured in: 1.5 s is a long enough window.
    assert "short_window" not in [r["code"] for r in point.validity_reasons]


@pytest.mark.django_db(transaction=True)
def test_the_backfill_converts_a_simulated_point_of_the_model_as_it_was_then():
    """Run as `migrate` runs it, on Point as of 0008: the metric columns added since (the
    server's medians) are not there to read or write."""
    before = [("runs", "0008_point_verdicts"), *MigrationLoader(connection).graph.leaf_nodes("benchmarks")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    catalog = {"host": old.get_model("benchmarks", "Host").objects.create(name="h", gpu_model="sim", gpu_count=1),
               "engine": old.get_model("benchmarks", "Engine").objects.create(name="e", kind="sglang",
                                                                              argv_template=["simengine"]),
               "llm": old.get_model("benchmarks", "LLM").objects.create(name="m", path="/m", context_length=4096)}
    sweep = old.get_model("benchmarks", "Sweep").objects.create(name="s", spec={}, **catalog)
    run = old.get_model("runs", "Run").objects.create(sweep=sweep, position=0, method="autoregressive", params={},
                                                      tp=1, status="done", server_info={"simengine": {"time_scale": 0.1}})
    workload = old.get_model("benchmarks", "Workload").objects.create(name="w", kind="fixed", prompt="hi")
    point = old.get_model("runs", "Point").objects.create(
        run=run, position=0, workload=workload, concurrency=1, max_new_tokens=8, status="ok", completed=6, failed=0,
        duration=1.0, median_ttft_ms=5.0, decode_tok_s=100.0)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate([("runs", "0009_point_verdicts_backfill")])
        point = executor.loader.project_state([("runs", "0009_point_verdicts_backfill")]).apps.get_model(
            "runs", "Point").objects.get(pk=point.pk)
        assert (point.simulated_time_scale, point.median_ttft_ms, point.decode_tok_s) == (0.1, 50.0, 10.0)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
