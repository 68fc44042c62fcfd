"""The admin names configurations and points in words (sweepcore.methods.config_label,
sweepcore.plan.point_label), never as parameter JSON or ids, and its lists of points, runs and
request records do not pay a query per row for those names."""

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import LLM, Engine, FailureKind, Host, KnownFailure, Sweep, Workload
from runs.models import Point, PointStatus, RequestRecord, Run, RunEvent, RunEventKind, TelemetrySample

JSON = "&quot;budget&quot;"


def make_sweep(name="labels"):
    return Sweep.objects.create(name=name, spec={}, host=Host.objects.get(name="sim-8x-rtxpro6000"),
                                engine=Engine.objects.get(name="sglang-sim"),
                                llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"))


def make_run(sweep, position, method="ddtree", params=None, tp=1, **fields):
    params = {"budget": 15, "topk_cap": 8} if params is None else params
    return Run.objects.create(sweep=sweep, position=position, method=method, params=params, tp=tp, **fields)


def add_points(run, count, workload="long-context"):
    workload = Workload.objects.get(name=workload)
    points = [Point.objects.create(run=run, position=i, workload=workload, prompt_tokens=1000 * (i + 1),
                                   max_new_tokens=64, concurrency=4, status=PointStatus.OK)
              for i in range(count)]
    for point in points:
        RequestRecord.objects.create(point=point, index=0, send_time=0.0, output_tokens=3)
    return points


def page_queries(client, url, params=None):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, params or {})
    assert response.status_code == 200
    return response.content.decode(), len(queries.captured_queries)


def test_a_point_is_named_by_its_workload_length_load_and_configuration(catalog):
    run = make_run(make_sweep(), 0)
    long_context, fixed = Workload.objects.get(name="long-context"), Workload.objects.get(name="fibonacci")
    measured = Point.objects.create(run=run, position=0, workload=long_context, prompt_tokens=32000,
                                    max_new_tokens=64, concurrency=4)
    assert str(measured) == "long-context, 32,000 tokens, c=4 — ddtree budget=15 topk_cap=8 TP1"
    open_loop = Point.objects.create(run=run, position=1, workload=fixed, max_new_tokens=64, concurrency=64,
                                     request_rate=2.5)
    assert str(open_loop) == "fibonacci, fixed prompt, 2.5 req/s (cap 64) — ddtree budget=15 topk_cap=8 TP1"


def test_runs_and_known_failures_are_named_by_their_configuration(catalog):
    sweep = make_sweep()
    assert str(make_run(sweep, 0, "autoregressive", {})) == f"#{sweep.pk} autoregressive TP1"
    assert str(make_run(sweep, 1, tp=4, attempt=2)) == f"#{sweep.pk} ddtree budget=15 topk_cap=8 TP4 attempt 2"
    kf = KnownFailure.objects.create(
        engine_kind="sglang", llm=sweep.llm, method="ddtree", params={"budget": 12, "topk_cap": 8}, tp=1,
        compute_capability="12.0", failure_kind=FailureKind.CUDA_ILLEGAL_INSTRUCTION, signature="illegal",
        first_seen_at=timezone.now(), last_seen_at=timezone.now(),
    )
    assert str(kf) == f"SGLang ddtree budget=12 topk_cap=8 TP1: {FailureKind.CUDA_ILLEGAL_INSTRUCTION.label}"


def test_events_and_telemetry_samples_are_named_in_words(catalog):
    run = make_run(make_sweep(), 0)
    at = timezone.now().replace(year=2026, month=1, day=2, hour=3, minute=4, second=5)
    event = RunEvent.objects.create(run=run, at=at, kind=RunEventKind.CRASHED)
    assert str(event) == "Server crashed at 2026-01-02 03:04:05"
    sample = TelemetrySample.objects.create(run=run, at=at, gpu_index=3)
    assert str(sample) == f"GPU 3 of run {run.pk} at 2026-01-02 03:04:05"


def test_the_run_list_shows_configurations_sorts_and_filters_by_them(catalog, curator, client):
    sweep = make_sweep()
    make_run(sweep, 0, params={"budget": 8, "topk_cap": 8})
    make_run(sweep, 1, "autoregressive", {})
    make_run(sweep, 2, "dflash", {"block_size": 16})
    client.force_login(curator)
    url = reverse("admin:runs_run_changelist")
    page = client.get(url).content.decode()
    assert "ddtree budget=8 topk_cap=8 TP1" in page and "dflash block_size=16 TP1" in page
    assert JSON not in page and "Configuration" in page
    # The configuration column (third after the checkbox: id, sweep, configuration) sorts by
    # method, then parameters.
    labels = ("autoregressive TP1", "ddtree budget=8", "dflash block_size=16")
    for order, ascending in (("3", True), ("-3", False)):
        rows = client.get(url, {"o": order}).content.decode().split('id="result_list"', 1)[1]
        at = [rows.index(label) for label in labels]
        assert at == sorted(at, reverse=not ascending)
    filtered = client.get(url, {"method__exact": "dflash"}).content.decode()
    assert "dflash block_size=16 TP1" in filtered and "ddtree budget=8" not in filtered


def test_the_known_failure_list_shows_configurations_not_json(catalog, curator, client):
    llm = LLM.objects.get(name="Qwen/Qwen3.6-27B")
    KnownFailure.objects.create(
        engine_kind="sglang", llm=llm, method="ddtree", params={"budget": 12, "topk_cap": 8}, tp=4,
        compute_capability="12.0", failure_kind=FailureKind.CUDA_ILLEGAL_INSTRUCTION, signature="illegal",
        first_seen_at=timezone.now(), last_seen_at=timezone.now(),
    )
    client.force_login(curator)
    page = client.get(reverse("admin:benchmarks_knownfailure_changelist"), {"o": "3"}).content.decode()
    assert "ddtree budget=12 topk_cap=8 TP4" in page and "&quot;topk_cap&quot;" not in page


def test_the_point_list_names_runs_without_a_query_per_row(catalog, curator, client):
    run = make_run(make_sweep(), 0)
    add_points(run, 2)
    client.force_login(curator)
    url = reverse("admin:runs_point_changelist")
    page, few = page_queries(client, url)
    assert f"#{run.sweep_id} ddtree budget=15 topk_cap=8 TP1" in page
    add_points(make_run(run.sweep, 1, params={"budget": 8, "topk_cap": 8}), 6)
    _, many = page_queries(client, url)
    assert many == few


def test_the_request_record_list_names_points_without_a_query_per_row(catalog, curator, client):
    run = make_run(make_sweep(), 0)
    add_points(run, 2)
    client.force_login(curator)
    url = reverse("admin:runs_requestrecord_changelist")
    page, few = page_queries(client, url)
    assert "long-context, 1,000 tokens, c=4 — ddtree budget=15 topk_cap=8 TP1" in page
    add_points(make_run(run.sweep, 1, "dflash", {"block_size": 16}), 6, workload="fibonacci")
    page, many = page_queries(client, url)
    assert "fibonacci, 1,000 tokens, c=4 — dflash block_size=16 TP1" in page and many == few


def test_a_run_page_titles_its_points_without_a_query_per_point(catalog, curator, client):
    run = make_run(make_sweep(), 0)
    add_points(run, 2)
    client.force_login(curator)
    url = reverse("admin:runs_run_change", args=[run.pk])
    page, few = page_queries(client, url)
    assert "long-context, 2,000 tokens, c=4 — ddtree budget=15 topk_cap=8 TP1" in page
    workload = Workload.objects.get(name="long-context")
    for i in range(2, 8):
        Point.objects.create(run=run, position=i, workload=workload, prompt_tokens=1000 * (i + 1),
                             max_new_tokens=64, concurrency=4)
    _, many = page_queries(client, url)
    assert many == few


def test_the_run_list_shows_the_gpu_of_the_host_the_run_ran_on(catalog, curator, client):
    sweep = make_sweep()
    make_run(sweep, 0)  # never claimed: its sweep's host
    other = Host.objects.create(name="b200-box", gpu_model="NVIDIA B200", gpu_count=8, compute_capability="10.0")
    make_run(sweep, 1, "autoregressive", {}, host=other)
    client.force_login(curator)
    page = client.get(reverse("admin:runs_run_changelist"), {"o": "7"}).content.decode()
    rows = page.split('id="result_list"', 1)[1]  # the list, not the filters beside it
    assert "NVIDIA B200" in rows and sweep.host.gpu_model in rows
    assert rows.index("NVIDIA B200") < rows.index(sweep.host.gpu_model)  # sorted by that GPU model
