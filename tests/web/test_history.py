"""History: series selection, regression detection, the JSON endpoint and its query count."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from django.urls import reverse

from benchmarks.models import LLM, Engine, Host, Sweep, Workload
from runs.models import Point, Run
from runs.results.charts import sweep_charts
from runs.results.history import METRICS, choices, detect_regressions, series_points
from sweepcore.plan import canonical_params
from tests.web.records import add_records

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


# -- detect_regressions: pure ------------------------------------------------------------

def pt(centre, validity="valid", excluded=False, n=20, seed=None):
    """A series point whose requests' values are drawn around ``centre`` (seeded)."""
    seed = int(centre * 100) if seed is None else seed
    samples = list(centre * np.random.default_rng(seed).lognormal(0.0, 0.03, n))
    return {"value": centre, "validity": validity, "excluded": excluded, "samples": samples, "repeats": []}


def judged(points, metric="decode_tok_s", **kwargs):
    return detect_regressions(points, metric, **kwargs)


def test_a_clear_drop_is_a_regression():
    result = judged([pt(100, seed=1), pt(100, seed=2), pt(100, seed=3), pt(100, seed=4), pt(70, seed=5)])
    assert [r["verdict"] for r in result] == ["insufficient"] * 3 + ["same", "worse"]
    assert [r["regression"] for r in result] == [False] * 4 + [True]
    assert result[4]["p_value"] < 0.05 and result[4]["window"] == 4 and result[4]["pooled"] == 80
    assert result[4]["diff_pct"] == pytest.approx(-30, abs=3)


def test_three_points_are_insufficient_data_never_a_flag():
    result = judged([pt(100, seed=1), pt(100, seed=2), pt(50, seed=3)])
    assert [r["verdict"] for r in result] == ["insufficient"] * 3 and not any(r["regression"] for r in result)
    assert result[2]["reason"] == "insufficient data: 2 valid earlier point(s) in the window (at least 3)"


def test_noise_is_the_same_and_an_improvement_is_not_a_regression():
    noise = judged([pt(100, seed=s) for s in range(10, 16)])
    assert [r["verdict"] for r in noise][3:] == ["same"] * 3
    better = judged([pt(100, seed=1), pt(100, seed=2), pt(100, seed=3), pt(130, seed=4)])
    assert better[3]["verdict"] == "better" and not better[3]["regression"]


def test_lower_is_better_flags_a_rise():
    result = judged([pt(10, seed=1), pt(10, seed=2), pt(10, seed=3), pt(13, seed=4)], metric="median_tpot_ms")
    assert result[3]["verdict"] == "worse" and result[3]["regression"]


def test_suspect_invalid_and_excluded_points_are_never_pooled_or_judged():
    points = [pt(100, seed=1), pt(60, validity="suspect"), pt(100, seed=2), pt(60, validity="invalid"),
              pt(60, excluded=True), pt(100, seed=3), pt(100, seed=4)]
    result = judged(points)
    assert [r["verdict"] for r in result] == ["insufficient", None, "insufficient", None, None, "insufficient",
                                              "same"]
    assert result[1]["reason"] == "not judged: suspect; never part of a window"
    assert result[4]["reason"] == "not judged: excluded; never part of a window"
    assert result[6]["window"] == 3  # the three valid points before it


def test_too_few_requests_in_the_point_is_insufficient_data():
    result = judged([pt(100, seed=1), pt(100, seed=2), pt(100, seed=3), pt(70, seed=4, n=3)])
    assert result[3]["verdict"] == "insufficient" and not result[3]["regression"]
    assert result[3]["reason"] == "insufficient data: 60 vs 3 requests: at least 5 on each side are needed"


def test_window_limits_the_history():
    result = judged([pt(100, seed=s) for s in range(1, 6)] + [pt(70, seed=s) for s in range(6, 12)], window=3)
    # Once most of the window is at the new level its median is too: the drop is the new
    # normal, no longer flagged (the ratio of medians no longer leaves 1 out).
    assert [r["regression"] for r in result][5:] == [True, True, False, False, False, False]


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        judged([pt(100)], window=0)


def make_sweep(name, host="sim-8x-rtxpro6000", engine="sglang-sim", llm="Qwen/Qwen3.6-27B"):
    return Sweep.objects.create(
        name=name, spec={"name": name}, host=Host.objects.get(name=host),
        engine=Engine.objects.get(name=engine), llm=LLM.objects.get(name=llm),
    )


def add_point(sweep, at, value, method="ddtree", params=None, tp=4, workload="long-context",
              prompt_tokens=3000, concurrency=1, status="ok", excluded=False, run_excluded=False,
              engine_version="0.5.1", position=0, validity="valid", requests=20, **metrics):
    params = {"budget": 15, "topk_cap": 8} if params is None else params
    run, _ = Run.objects.get_or_create(
        sweep=sweep, method=method, params_key=canonical_params(params), tp=tp, attempt=1,
        defaults={"position": Run.objects.filter(sweep=sweep).count(), "params": params, "status": "done",
                  "engine_version": engine_version, "excluded": run_excluded,
                  "exclude_reason": "bad driver" if run_excluded else ""},
    )
    point = Point.objects.create(
        run=run, position=Point.objects.filter(run=run).count(), workload=Workload.objects.get(name=workload),
        prompt_tokens=prompt_tokens, max_new_tokens=256, concurrency=concurrency, status=status,
        finished_at=at, excluded=excluded, exclude_reason="thermal throttling" if excluded else "",
        decode_tok_s=value if status == "ok" else None, validity=validity if status == "ok" else "",
        completed=requests if status == "ok" else None,
        median_tpot_ms=1000 / value if status == "ok" and value else None, **metrics,
    )
    if status == "ok" and value:  # its requests: decode speeds drawn around the value
        add_records(point, value, n=requests, seed=int(at.timestamp()) % 100_000 + int(value))
    return point


SERIES = {
    "model": "Qwen/Qwen3.6-27B", "engine": "sglang-sim", "method": "ddtree",
    "params": '{"budget":15,"topk_cap":8}', "tp": 4, "workload": "long-context",
    "prompt_tokens": 3000, "concurrency": 1, "gpu": None,
}


@pytest.fixture
def series(catalog):
    gpu = Host.objects.get(name="sim-8x-rtxpro6000").gpu_model
    values = [100, 101, 99, 100, 60, 100]
    # Created out of time order: the series must come back sorted by finished_at.
    sweeps = []
    for i in (3, 0, 5, 1, 4, 2):
        sweep = make_sweep(f"hist-{i}")
        sweeps.append(sweep)
        add_point(sweep, T0 + timedelta(days=i), values[i])
        # Noise from other series in the same sweeps.
        add_point(sweep, T0 + timedelta(days=i), 5.0, prompt_tokens=8000)
        add_point(sweep, T0 + timedelta(days=i), 6.0, tp=1)
        add_point(sweep, T0 + timedelta(days=i), 7.0, concurrency=4)
        add_point(sweep, T0 + timedelta(days=i), 8.0, method="dflash", params={"block_size": 16})
        add_point(sweep, T0 + timedelta(days=i), None, prompt_tokens=16000, status="crashed")
    # Same configuration, another model / another GPU: other series.
    add_point(make_sweep("other-model", llm="SmolLM2-135M-Instruct"), T0 + timedelta(days=2, hours=1), 9.0)
    add_point(make_sweep("other-gpu", host="local-cpu"), T0 + timedelta(days=2, hours=2), 9.5)
    excluded_sweep = make_sweep("hist-excluded")
    add_point(excluded_sweep, T0 + timedelta(days=3, hours=12), 10.0, excluded=True)
    return {**SERIES, "gpu": gpu}


def test_series_points_selects_one_series_in_time_order(series):
    rows = series_points(series, "decode_tok_s")
    assert [r["value"] for r in rows] == [100, 101, 99, 100, 10.0, 60, 100]
    assert [r["finished_at"] for r in rows] == sorted(r["finished_at"] for r in rows)
    assert [r["sweep_name"] for r in rows][:2] == ["hist-0", "hist-1"]
    excluded = [r for r in rows if r["excluded"]]
    assert len(excluded) == 1 and excluded[0]["exclude_reason"] == "thermal throttling"
    assert set(rows[0]) >= {"value", "finished_at", "sweep_id", "sweep_name", "run_id", "engine_version",
                            "excluded", "exclude_reason"}
    assert rows[0]["engine_version"] == "0.5.1"


def test_series_points_rejects_unknown_metrics(series):
    with pytest.raises(ValueError, match="unknown metric"):
        series_points(series, "reason")
    assert "decode_tok_s" in METRICS and "p99_itl_ms" in METRICS and "request_rate" not in METRICS


def test_a_run_exclusion_excludes_its_points(catalog):
    sweep = make_sweep("run-excluded")
    gpu = Host.objects.get(name="sim-8x-rtxpro6000").gpu_model
    add_point(sweep, T0, 100.0, run_excluded=True)
    rows = series_points({**SERIES, "gpu": gpu}, "decode_tok_s")
    assert rows[0]["excluded"] and rows[0]["exclude_reason"] == "bad driver"


def test_choices_list_every_dimension(series):
    c = choices()
    assert "Qwen/Qwen3.6-27B" in c["model"] and "sglang-sim" in c["engine"]
    # The key is what the page sends back; the label is what it shows (config_label, no JSON).
    assert {"method": "ddtree", "params": '{"budget":15,"topk_cap":8}',
            "label": "ddtree budget=15 topk_cap=8"} in c["config"]
    assert c["tp"] == [1, 4] and 3000 in c["prompt_tokens"] and c["concurrency"] == [1, 4]
    assert series["gpu"] in c["gpu"]


def query(series, **extra):
    params = {**series, **extra}
    return {k: v for k, v in params.items() if v is not None}


def test_history_json_shape_and_regressions(series, viewer, client):
    client.force_login(viewer)
    response = client.get(reverse("history-data"), query(series))
    assert response.status_code == 200, response.content
    data = response.json()
    # The label and unit the comparison charts give the same metric.
    assert data["metric"] == {"name": "decode_tok_s", "label": "decode speed (tok/s)", "higher_is_better": True}
    assert data["method"]["name"] == "Mann-Whitney U against the trailing window"
    assert (data["method"]["window"], data["method"]["alpha"], data["method"]["min_history"]) == (5, 0.05, 3)
    assert [p["y"] for p in data["points"]] == [100, 101, 99, 100, 60, 100]  # excluded hidden
    assert not any(p["excluded"] for p in data["points"])
    first = data["points"][0]
    assert first["x"] == T0.isoformat() and first["sweep_name"] == "hist-0" and first["engine_version"] == "0.5.1"
    assert [r["y"] for r in data["regressions"]] == [60]
    regression = data["regressions"][0]
    assert regression["verdict"] == "worse" and regression["p_value"] < 0.05 and regression["sweep_name"] == "hist-4"
    assert regression["window"] == 4 and regression["pooled"] == 80 and regression["n"] == 20
    assert [p["verdict"] for p in data["points"]][:3] == ["insufficient"] * 3
    assert data["points"][0]["verdict_reason"].startswith("insufficient data: 0 valid earlier point(s)")
    assert data["points"][0]["validity"] == "valid" and data["points"][0]["decode_tok_s_ci"] is None
    assert data["counts"] == {"points": 7, "excluded": 1, "regressions": 1, "insufficient": 3, "not_valid": 0}


def test_history_json_show_excluded(series, viewer, client):
    client.force_login(viewer)
    data = client.get(reverse("history-data"), query(series, show_excluded=1)).json()
    assert [p["y"] for p in data["points"]] == [100, 101, 99, 100, 10.0, 60, 100]
    excluded = [p for p in data["points"] if p["excluded"]]
    assert len(excluded) == 1 and excluded[0]["exclude_reason"] == "thermal throttling"
    assert not excluded[0]["regression"]
    assert data["show_excluded"] is True


def test_history_json_valid_only_hides_suspect_and_invalid_points(series, viewer, client):
    sweep = make_sweep("hist-suspect")
    add_point(sweep, T0 + timedelta(days=6), 55.0, validity="suspect")
    add_point(make_sweep("hist-invalid"), T0 + timedelta(days=7), 20.0, validity="invalid")
    client.force_login(viewer)
    data = client.get(reverse("history-data"), query(series)).json()
    drawn = [(p["y"], p["validity"], p["verdict"]) for p in data["points"]][-2:]
    # Drawn with their verdict, never judged against the window.
    assert drawn == [(55.0, "suspect", None), (20.0, "invalid", None)]
    assert data["counts"]["not_valid"] == 2
    data = client.get(reverse("history-data"), query(series, valid_only=1)).json()
    assert {p["validity"] for p in data["points"]} == {"valid"} and len(data["points"]) == 6
    assert data["valid_only"] is True


def test_history_json_lower_is_better_metric(series, viewer, client):
    client.force_login(viewer)
    data = client.get(reverse("history-data"), query(series, metric="median_tpot_ms")).json()
    assert data["metric"]["higher_is_better"] is False and data["metric"]["label"] == "median TPOT (ms)"
    assert [r["y"] for r in data["regressions"]] == [pytest.approx(1000 / 60)]


def test_it_labels_every_history_metric_with_its_unit_as_the_charts_do(series):
    labels = {m["name"]: m["label"] for m in choices()["metric"]}
    assert set(labels) == set(METRICS)
    assert labels["output_throughput"] == "output throughput (tok/s)"
    assert labels["total_token_throughput"] == "total token throughput (tok/s)"
    assert labels["request_throughput"] == "request throughput (req/s)"
    assert labels["duration"] == "duration (s)" and labels["p99_e2el_ms"] == "p99 E2EL (ms)"
    assert labels["accept_length"] == "mean accept length (tokens)"
    sweep = Sweep.objects.order_by("pk").first()
    # The sweep has several TPs: each chart is a group of TP panels, all labelled alike.
    charts = {chart["group"]: chart["y"]["label"] for chart in sweep_charts(sweep.pk)["charts"]}
    assert charts["decode_tok_s"] == labels["decode_tok_s"] == "decode speed (tok/s)"


def test_history_json_config_parameter(series, viewer, client):
    client.force_login(viewer)
    params = query(series)
    params["config"] = f"{params.pop('method')}:{params.pop('params')}"
    data = client.get(reverse("history-data"), params).json()
    assert len(data["points"]) == 6


@pytest.mark.parametrize("bad", [
    {"metric": "reason"}, {"metric": "decode_tok_s;drop"}, {"tp": "four"}, {"tp": "0"},
    {"window": "0"}, {"window": "1"}, {"window": "x"},
    {"concurrency": ""}, {"model": ""}, {"prompt_tokens": "-3"},
])
def test_history_json_bad_parameters_are_400(series, viewer, client, bad):
    client.force_login(viewer)
    response = client.get(reverse("history-data"), {**query(series), **bad})
    assert response.status_code == 400
    assert response.json()["error"]


def test_history_requires_login(series, client):
    for name in ("history", "history-data"):
        response = client.get(reverse(name), query(series))
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login") + "?next=")


def test_history_page_renders(series, viewer, client):
    client.force_login(viewer)
    response = client.get(reverse("history"))
    assert response.status_code == 200 and b"Choose a model" in response.content
    response = client.get(reverse("history"), query(series))
    body = response.content.decode()
    assert response.status_code == 200 and 'id="history-chart"' in body and "js/history.js" in body
    assert ('<option value="ddtree:{&quot;budget&quot;:15,&quot;topk_cap&quot;:8}" selected>'
            "ddtree budget=15 topk_cap=8</option>") in body
    assert "{&quot;budget&quot;:15,&quot;topk_cap&quot;:8}<" not in body  # no JSON shown as text
    assert 'id="history-valid-only"' in body and "Mann-Whitney U against the trailing window" in body
    assert "standard deviations" not in body
    assert client.get(reverse("history"), {"metric": "nope"}).status_code == 400
    assert b'href="/history/"' in client.get(reverse("sweep-list")).content


@pytest.mark.parametrize("n", [3, 12])
def test_history_json_query_count_is_constant(catalog, viewer, client, django_assert_max_num_queries, n):
    gpu = Host.objects.get(name="sim-8x-rtxpro6000").gpu_model
    for i in range(n):
        add_point(make_sweep(f"q-{i}"), T0 + timedelta(days=i), 100.0 + i % 2)
    client.force_login(viewer)
    with django_assert_max_num_queries(5):  # session, user, the series, its requests, its curation notes
        response = client.get(reverse("history-data"), query({**SERIES, "gpu": gpu}))
    assert response.status_code == 200 and len(response.json()["points"]) == n


def test_history_tooltips_carry_the_curation_of_each_point(series, viewer, curator, client):
    from runs import curation

    target = Point.objects.get(run__sweep__name="hist-4", prompt_tokens=3000, run__tp=4, concurrency=1,
                               run__method="ddtree")
    curation.exclude(Point.objects.filter(pk=target.pk), curator, "a noisy neighbour on the host")
    curation.mark_baseline(Point.objects.filter(run__sweep__name="hist-0", prompt_tokens=3000, run__tp=4,
                                                concurrency=1, run__method="ddtree"), curator)
    client.force_login(viewer)
    data = client.get(reverse("history-data"), query(series, show_excluded=1)).json()
    (excluded,) = [p for p in data["points"] if p["point"] == target.pk]
    assert excluded["excluded"] and excluded["exclude_reason"] == "a noisy neighbour on the host"
    assert excluded["curation"] == [
        f"Excluded from charts and history by cora on {datetime.now(timezone.utc):%Y-%m-%d}: a noisy neighbour on the host"]
    assert data["points"][0]["baseline"] and data["points"][0]["curation"][0].startswith("Marked as the baseline")
    # Hidden by default, and the drop it had is no longer flagged.
    default = client.get(reverse("history-data"), query(series)).json()
    assert target.pk not in [p["point"] for p in default["points"]] and default["regressions"] == []


def test_a_series_exports_its_points_and_requests(series, viewer, client):
    client.force_login(viewer)
    page = client.get(reverse("history"), query(series)).content.decode()
    assert reverse("history-export", args=["points.csv"]) in page
    data = client.get(reverse("history-export", args=["points.json"]), query(series)).json()
    assert data["metric"] == "decode_tok_s" and len(data["points"]) == 7
    assert sorted(p["decode_tok_s"] for p in data["points"]) == [10.0, 60, 99, 100, 100, 100, 101]
    assert [p["excluded"] for p in data["points"]].count(True) == 1
    csv_rows = b"".join(client.get(reverse("history-export", args=["points.csv"]), query(series)).streaming_content)
    assert len(csv_rows.decode().strip().splitlines()) == 1 + 7
    bad = client.get(reverse("history-export", args=["points.json"]), query(series, tp="four"))
    assert bad.status_code == 400 and "tp" in bad.json()["error"]
