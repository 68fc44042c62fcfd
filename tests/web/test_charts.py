"""Comparison charts of a sweep: datasets, failure markers, speedups, query count."""

import pytest
from django.urls import reverse

from runs.models import Point, Run
from runs.results.charts import (
    BASELINE_COLOUR,
    FAMILIES,
    PALETTE,
    MARKER_STATUSES,
    UnknownChart,
    build_charts,
    every_chart,
    significant,
    sweep_charts,
)
from tests.web.records import add_records
from tests.web.sweeps import add_run, charts_by_id, make_sweep, values

FAILURE_STATUSES = ("crashed", "skipped", "timeout", "not_run", "failed", "context_overflow")


@pytest.fixture
def sweep(catalog):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0)
    add_run(sweep, 1, "autoregressive", {}, 4, speed=80.0, statuses={2: "crashed"})
    add_run(sweep, 2, "dflash", {"block_size": 16}, 1, speed=100.0, accept_length=3.5)
    add_run(sweep, 3, "ddtree", {"budget": 8, "topk_cap": 8}, 4, speed=0, statuses={
        0: "crashed", 1: "not_run", 2: "not_run"})
    add_run(sweep, 4, "ddtree", {"budget": 15, "topk_cap": 8}, 4, speed=160.0, accept_length=4.25,
            statuses={1: "context_overflow"})
    add_run(sweep, 5, "ddtree", {"budget": 32, "topk_cap": 8}, 4, speed=200.0, accept_length=5.0)
    return sweep


def markers(chart):
    return {d["status"]: d["data"] for d in chart["datasets"] if d["kind"] == "marker"}


def family(sweep_id, name):
    """The charts of one on-demand family, by id."""
    return charts_by_id(sweep_charts(sweep_id, family=name))


def test_the_chart_list(sweep):
    data = sweep_charts(sweep.pk)
    # The overview is sent; the other families are listed, ids and titles, to be fetched.
    # With several TPs a configuration chart is drawn once per TP (small multiples), each
    # panel in the group it shares with the others.
    assert data["family"] == "overview"
    assert [c["id"] for c in data["charts"]] == [
        "decode_tok_s@TP1", "decode_tok_s@TP4", "speedup@TP1", "speedup@TP4",
        "accept_length:fibonacci", "accept_length:long-context"]
    assert [(c["group"], c["panel"]) for c in data["charts"]] == [
        ("decode_tok_s", "TP1"), ("decode_tok_s", "TP4"), ("speedup", "TP1"), ("speedup", "TP4"),
        ("accept_length", None), ("accept_length", None)]
    assert data["charts"][0]["groupTitle"] == "Decode speed per configuration"
    assert data["charts"][0]["title"] == "Decode speed per configuration · TP1"
    assert {c["family"] for c in data["charts"]} == {"overview"}
    # A family lists its groups: the page asks for a group (all its panels) at once.
    listed = {f["id"]: [c["id"] for c in f["charts"]] for f in data["families"]}
    assert listed == {
        "prompt_length": ["decode_vs_prompt:long-context", "ttft_vs_prompt:long-context"],
        "latency": ["latency:fibonacci", "latency:long-context 3000", "latency:long-context 8000"],
    }
    assert [f["title"] for f in data["families"]] == [FAMILIES["prompt_length"], FAMILIES["latency"]]
    assert all(f["at_once"] for f in data["families"])  # small families: the page fetches them whole
    # Nothing is hidden: every chart is in the overview or in a listed family, under the
    # group it is listed as, and the family answer holds exactly the listed groups' panels.
    everything = every_chart(sweep_id=sweep.pk)
    assert [c["id"] for c in everything] == [
        "decode_tok_s@TP1", "decode_tok_s@TP4", "speedup@TP1", "speedup@TP4",
        "decode_vs_prompt:long-context@TP1", "decode_vs_prompt:long-context@TP4",
        "ttft_vs_prompt:long-context@TP1", "ttft_vs_prompt:long-context@TP4",
        "latency:fibonacci@TP1", "latency:fibonacci@TP4", "latency:long-context 3000@TP1",
        "latency:long-context 3000@TP4", "latency:long-context 8000@TP1", "latency:long-context 8000@TP4",
        "accept_length:fibonacci", "accept_length:long-context",
    ]
    for entry in data["families"]:
        fetched = sweep_charts(sweep.pk, family=entry["id"])
        assert fetched["family"] == entry["id"]
        assert list(dict.fromkeys(c["group"] for c in fetched["charts"])) == [c["id"] for c in entry["charts"]]
        assert {c["groupTitle"] for c in fetched["charts"]} == {c["title"] for c in entry["charts"]}
    for chart in everything:
        assert chart["title"] and chart["x"]["label"] and chart["y"]["label"]
        assert any(unit in chart["y"]["label"] for unit in ("tok/s", "ms", "tokens", "×"))
    # One concurrency level only: no throughput-against-concurrency chart.
    assert not any(c["id"].startswith("throughput_vs_concurrency") for c in everything)


def test_a_panel_holds_the_configurations_of_its_tp_only(sweep):
    charts = charts_by_id(sweep_charts(sweep.pk))
    assert list(values(charts["decode_tok_s@TP1"])) == ["autoregressive TP1", "dflash block_size=16 TP1"]
    assert list(values(charts["decode_tok_s@TP4"])) == [
        "autoregressive TP4", "ddtree budget=8 topk_cap=8 TP4", "ddtree budget=15 topk_cap=8 TP4",
        "ddtree budget=32 topk_cap=8 TP4"]
    # The same x categories in every panel, so that they read alike.
    assert charts["decode_tok_s@TP1"]["labels"] == charts["decode_tok_s@TP4"]["labels"]
    # Markers go with their panel.
    tp1 = {m["config"] for d in charts["decode_tok_s@TP1"]["datasets"] if d["kind"] == "marker" for m in d["data"]}
    assert tp1 == set()
    tp4 = {m["config"] for d in charts["decode_tok_s@TP4"]["datasets"] if d["kind"] == "marker" for m in d["data"]}
    assert tp4 == {"autoregressive TP4", "ddtree budget=8 topk_cap=8 TP4", "ddtree budget=15 topk_cap=8 TP4"}


def test_one_tp_draws_one_chart_under_its_own_id(catalog):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1, speed=30.0)
    add_run(sweep, 1, "dflash", {"block_size": 16}, 1, speed=70.0)
    data = sweep_charts(sweep.pk)
    assert [(c["id"], c["group"], c["panel"]) for c in data["charts"]] == [
        ("decode_tok_s", "decode_tok_s", None), ("speedup", "speedup", None)]
    # No point has an accept length: those charts are named as not drawn, not sent as empty axes.
    assert [c["id"] for c in data["omitted"]] == ["accept_length:fibonacci", "accept_length:long-context"]


def test_a_chart_with_nothing_to_draw_is_named_not_drawn(catalog):
    sweep = make_sweep()
    # Imported results without decode speeds (a vLLM summary has none): no decode chart.
    add_run(sweep, 0, "autoregressive", {}, 1, speed=30.0)
    Point.objects.filter(run__sweep=sweep).update(decode_tok_s=None)
    data = sweep_charts(sweep.pk)
    assert [c["id"] for c in data["charts"]] == []
    assert data["omitted"] == [{"id": "decode_tok_s", "title": "Decode speed per configuration",
                                "reason": "no measured point has a decode speed (tok/s)"}]
    # The latency family still has its values.
    assert values(family(sweep.pk, "latency")["latency:fibonacci"])["autoregressive TP1"] == [33.33, 50.0, 30.0, 66.67]


def test_one_chart_or_one_family_on_demand_is_the_same_chart(sweep):
    everything = {c["id"]: c for c in every_chart(sweep_id=sweep.pk)}
    for chart_id, chart in everything.items():
        one = sweep_charts(sweep.pk, chart=chart_id)
        assert one["family"] is None and one["charts"] == [chart]
        assert sweep_charts(sweep.pk, family=chart["family"])["charts"].count(chart) == 1
    with pytest.raises(UnknownChart, match="no chart family “nope”"):
        sweep_charts(sweep.pk, family="nope")
    with pytest.raises(UnknownChart, match="no chart “latency:nowhere” here"):
        sweep_charts(sweep.pk, chart="latency:nowhere")


def test_a_family_of_many_charts_is_opened_one_chart_at_a_time(sweep, monkeypatch):
    monkeypatch.setattr("runs.results.charts.FAMILY_AT_ONCE", 2)
    at_once = {f["id"]: f["at_once"] for f in sweep_charts(sweep.pk)["families"]}
    assert at_once == {"prompt_length": False, "latency": False}  # 4 and 6 panels
    monkeypatch.setattr("runs.results.charts.FAMILY_AT_ONCE", 4)
    at_once = {f["id"]: f["at_once"] for f in sweep_charts(sweep.pk)["families"]}
    assert at_once == {"prompt_length": True, "latency": False}


def test_configurations_are_described_once(sweep):
    data = sweep_charts(sweep.pk)
    configs = {c["config"]: c for c in data["configs"]}
    run = Run.objects.get(sweep=sweep, position=4)
    assert configs["ddtree budget=15 topk_cap=8 TP4"] == {
        "config": "ddtree budget=15 topk_cap=8 TP4", "method": "ddtree", "tp": 4,
        "params": {"budget": 15, "topk_cap": 8}, "run": run.pk, "sweep": sweep.pk,
        "color": configs["ddtree budget=15 topk_cap=8 TP4"]["color"],
        # Its place in the legend: grouped by method, the shared parameters named once.
        "legend": {"group": "ddtree topk_cap=8 · budget", "item": "15"},
    }
    assert configs["dflash block_size=16 TP1"]["legend"] == {"group": "dflash block_size=16", "item": ""}
    assert configs["autoregressive TP4"]["legend"] == {"group": "autoregressive", "item": ""}
    # A configuration's datasets carry its label and colours, not its identity again.
    for chart in every_chart(sweep_id=sweep.pk):
        for dataset in chart["datasets"]:
            if dataset["kind"] == "value" and not chart["id"].startswith("accept_length"):
                assert set(dataset) == {"kind", "type", "label", "data", "backgroundColor", "borderColor"}
                assert dataset["backgroundColor"] == configs[dataset["label"]]["color"]


def test_values_are_rounded_to_four_significant_digits(catalog):
    assert significant(1234.5678) == 1235.0 and significant(0.000123456) == 0.0001235
    assert significant(12.3456) == 12.35 and significant(None) is None and significant(40.0) == 40.0
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1, speed=30.0)  # TPOT 1000/30 = 33.333...
    add_run(sweep, 1, "dflash", {"block_size": 16}, 1, speed=70.0)
    assert values(family(sweep.pk, "latency")["latency:fibonacci"])["autoregressive TP1"] == [
        33.33, 50.0, 30.0, 66.67]
    assert values(charts_by_id(sweep_charts(sweep.pk))["speedup"])["dflash block_size=16 TP1"] == [
        2.333, 2.333, 2.333]


def test_decode_bars_per_configuration_with_failures_as_markers(sweep):
    chart = charts_by_id(sweep_charts(sweep.pk))["decode_tok_s"]
    assert chart["type"] == "bar"
    assert chart["labels"] == ["fibonacci", "long-context 3000", "long-context 8000"]
    bars = values(chart)
    assert list(bars) == [  # the TP1 panel's, then the TP4 panel's
        "autoregressive TP1", "dflash block_size=16 TP1", "autoregressive TP4",
        "ddtree budget=8 topk_cap=8 TP4", "ddtree budget=15 topk_cap=8 TP4", "ddtree budget=32 topk_cap=8 TP4",
    ]
    assert bars["autoregressive TP1"] == [50.0, 45.0, 40.0]
    assert bars["autoregressive TP4"] == [80.0, 72.0, None]
    assert bars["ddtree budget=8 topk_cap=8 TP4"] == [None, None, None]
    assert bars["ddtree budget=15 topk_cap=8 TP4"] == [160.0, None, 128.0]
    for data in bars.values():
        assert 0 not in data and 0.0 not in data
    marks = markers(chart)
    assert set(marks) == {"crashed", "not_run", "context_overflow"}
    crashed = {(m["config"], m["x"]): m for m in marks["crashed"]}
    assert set(crashed) == {("autoregressive TP4", "long-context 8000"), ("ddtree budget=8 topk_cap=8 TP4", "fibonacci")}
    assert crashed[("ddtree budget=8 topk_cap=8 TP4", "fibonacci")]["reason"] == "crashed reason ddtree TP4 #0"
    assert all(m["y"] == 0 for ms in marks.values() for m in ms)
    assert [m["reason"] for m in marks["context_overflow"]] == ["context_overflow reason ddtree TP4 #1"]
    # Marker datasets are scatter points, styled per status; the legend explains them.
    marker_sets = [d for d in chart["datasets"] if d["kind"] == "marker"]
    assert all(d["type"] == "scatter" and d["pointStyle"] for d in marker_sets)
    legend = {entry["status"]: entry for entry in sweep_charts(sweep.pk)["legend"]}
    assert set(FAILURE_STATUSES) <= set(legend) and all(legend[s]["meaning"] for s in FAILURE_STATUSES)


def test_every_failure_status_is_a_marker_never_a_value(catalog):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1, statuses=dict(enumerate(FAILURE_STATUSES[:3])))
    add_run(sweep, 1, "dflash", {"block_size": 16}, 1, statuses=dict(enumerate(FAILURE_STATUSES[3:])))
    charts = every_chart(sweep_id=sweep.pk)
    for chart in charts:
        for dataset in chart["datasets"]:
            if dataset["kind"] == "value":
                ys = [d["y"] if isinstance(d, dict) else d for d in dataset["data"]]
                assert all(y is None for y in ys), (chart["id"], dataset["label"])
    chart = charts_by_id({"charts": charts})["decode_tok_s"]
    assert set(markers(chart)) == set(FAILURE_STATUSES)
    assert set(markers(chart)) <= set(MARKER_STATUSES)


def test_speedup_against_autoregressive_at_the_same_tp_and_point(sweep):
    chart = charts_by_id(sweep_charts(sweep.pk))["speedup"]
    bars = values(chart)
    assert "autoregressive TP1" not in bars and "autoregressive TP4" not in bars
    # dflash TP1 against autoregressive TP1 (50, 45, 40), not TP4.
    assert bars["dflash block_size=16 TP1"] == [2.0, 2.0, 2.0]
    # ddtree budget 32 TP4 against autoregressive TP4 (80, 72, crashed): no speedup at the crash.
    assert bars["ddtree budget=32 topk_cap=8 TP4"] == [2.5, 2.5, None]
    assert bars["ddtree budget=15 topk_cap=8 TP4"] == [2.0, None, None]
    assert bars["ddtree budget=8 topk_cap=8 TP4"] == [None, None, None]
    marks = markers(chart)
    no_baseline = {(m["config"], m["x"]) for m in marks["no_baseline"]}
    assert no_baseline == {
        ("ddtree budget=32 topk_cap=8 TP4", "long-context 8000"),
        ("ddtree budget=15 topk_cap=8 TP4", "long-context 8000"),
    }
    assert all("crashed reason autoregressive TP4 #2" in m["reason"] for m in marks["no_baseline"])
    assert {m["config"] for m in marks["crashed"]} == {"ddtree budget=8 topk_cap=8 TP4"}
    assert chart["y"]["label"] == "speedup (×)"


def test_lines_against_prompt_length(sweep):
    charts = family(sweep.pk, "prompt_length")
    decode = charts["decode_vs_prompt:long-context"]
    assert decode["type"] == "line" and decode["x"]["type"] == "linear"
    lines = values(decode)
    assert lines["autoregressive TP1"] == [{"x": 3000, "y": 45.0}, {"x": 8000, "y": 40.0}]
    assert lines["ddtree budget=15 topk_cap=8 TP4"] == [{"x": 3000, "y": None}, {"x": 8000, "y": 128.0}]
    assert {m["x"] for m in markers(decode)["context_overflow"]} == {3000}
    ttft = values(charts["ttft_vs_prompt:long-context"])
    assert ttft["dflash block_size=16 TP1"] == [{"x": 3000, "y": 80.0}, {"x": 8000, "y": 130.0}]


def test_latency_grouped_bars(sweep):
    chart = family(sweep.pk, "latency")["latency:long-context 3000"]
    assert chart["labels"] == ["TPOT median", "TPOT p99", "ITL median", "ITL p99"]
    bars = values(chart)
    assert bars["autoregressive TP1"] == [20.0, 30.0, 18.0, 40.0]
    assert bars["ddtree budget=15 topk_cap=8 TP4"] == [None, None, None, None]
    assert {m["x"] for m in markers(chart)["context_overflow"]} == set(chart["labels"])
    assert chart["y"]["label"] == "latency (ms)"


def test_accept_length_against_the_speculative_parameter(sweep):
    chart = charts_by_id(sweep_charts(sweep.pk))["accept_length:long-context"]
    lines = {d["label"]: d for d in chart["datasets"] if d["kind"] == "value"}
    assert set(lines) == {"dflash TP1 (DFlash block size)", "ddtree TP4 (DDTree budget)"}
    ddtree = lines["ddtree TP4 (DDTree budget)"]["data"]
    assert [(d["x"], d["y"]) for d in ddtree] == [(8, None), (15, 4.25), (32, 5.0)]
    assert [(d["x"], d["y"]) for d in lines["dflash TP1 (DFlash block size)"]["data"]] == [(16, 3.5)]
    assert {(m["x"], m["status"]) for ms in markers(chart).values() for m in ms} == {(8, "not_run")}


def test_colours_are_consistent_per_configuration_and_told_apart_per_parameter_value(sweep):
    colours = {}
    configs = {c["config"] for c in sweep_charts(sweep.pk)["configs"]}
    for chart in every_chart(sweep_id=sweep.pk):
        for dataset in chart["datasets"]:
            if dataset["kind"] == "value" and dataset["label"] in configs:
                colours.setdefault(dataset["label"], set()).add(dataset["backgroundColor"])
    assert set(colours) == configs
    assert all(len(found) == 1 for found in colours.values())
    colour = {config: next(iter(found)) for config, found in colours.items()}
    # The same method and parameters at another TP: the same colour, so that the panels read alike.
    assert colour["autoregressive TP1"] == colour["autoregressive TP4"] == BASELINE_COLOUR
    # Every parameter value of a method, and every method, a colour of its own from the palette.
    others = [colour[c] for c in ("dflash block_size=16 TP1", "ddtree budget=8 topk_cap=8 TP4",
                                  "ddtree budget=15 topk_cap=8 TP4", "ddtree budget=32 topk_cap=8 TP4")]
    assert others == list(PALETTE[:4])


def test_the_palette_holds_twenty_distinct_colours():
    assert len(set(PALETTE)) == len(PALETTE) == 20 and BASELINE_COLOUR not in PALETTE


def test_throughput_against_concurrency_when_several_levels(catalog):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0, concurrencies=(1, 4))
    add_run(sweep, 1, "dflash", {"block_size": 16}, 1, speed=100.0, concurrencies=(1, 4), statuses={0: "timeout"})
    charts = charts_by_id({"charts": every_chart(sweep_id=sweep.pk)})
    assert [c["id"] for c in family(sweep.pk, "concurrency").values()] == [
        "throughput_vs_concurrency:fibonacci", "throughput_vs_concurrency:long-context 3000",
        "throughput_vs_concurrency:long-context 8000"]
    chart = charts["throughput_vs_concurrency:fibonacci"]
    lines = values(chart)
    assert lines["autoregressive TP1"] == [{"x": 1, "y": 45.0}, {"x": 4, "y": 180.0}]
    assert lines["dflash block_size=16 TP1"] == [{"x": 1, "y": None}, {"x": 4, "y": None}]
    assert len(markers(chart)["timeout"]) == 2
    assert charts["decode_tok_s"]["labels"][:2] == ["fibonacci c1", "fibonacci c4"]
    assert "decode_vs_prompt:long-context:c4" in charts


def test_excluded_runs_and_retries(sweep):
    Run.objects.filter(sweep=sweep, position=5).update(excluded=True)
    add_run(sweep, 6, "autoregressive", {}, 4, speed=90.0, attempt=2)
    bars = values(charts_by_id(sweep_charts(sweep.pk))["decode_tok_s"])
    assert "ddtree budget=32 topk_cap=8 TP4" not in bars
    assert bars["autoregressive TP4"] == [90.0, 81.0, 72.0]


def test_charts_of_chosen_runs(sweep):
    runs = list(Run.objects.filter(sweep=sweep, position__in=[0, 2]).values_list("pk", flat=True))
    bars = values(charts_by_id(build_charts(run_ids=runs))["decode_tok_s"])
    assert list(bars) == ["autoregressive TP1", "dflash block_size=16 TP1"]


def test_it_divides_a_speedup_by_the_autoregressive_run_of_the_same_sweep_only(catalog):
    this_week, last_week = make_sweep("this week"), make_sweep("last week")
    ar_tp1 = add_run(this_week, 0, "autoregressive", {}, 1, speed=50.0)
    dflash = add_run(this_week, 1, "dflash", {"block_size": 16}, 1, speed=100.0)
    ddtree = add_run(this_week, 2, "ddtree", {"budget": 15}, 4, speed=160.0)
    # Last week's autoregressive runs come last in the selection: a baseline keyed by TP alone
    # would divide this week's configurations by them.
    old_tp1 = add_run(last_week, 0, "autoregressive", {}, 1, speed=25.0)
    old_tp4 = add_run(last_week, 1, "autoregressive", {}, 4, speed=40.0)
    chart = charts_by_id(build_charts(run_ids=[r.pk for r in (ar_tp1, dflash, ddtree, old_tp1, old_tp4)]))["speedup"]
    bars = values(chart)
    assert bars[f"#{this_week.pk} dflash block_size=16 TP1"] == [2.0, 2.0, 2.0]
    # This week has no autoregressive run at TP4: no speedup, whatever last week had.
    assert bars[f"#{this_week.pk} ddtree budget=15 TP4"] == [None, None, None]
    no_baseline = markers(chart)["no_baseline"]
    assert {m["config"] for m in no_baseline} == {f"#{this_week.pk} ddtree budget=15 TP4"}
    assert all(m["reason"] == f"no autoregressive run at TP4 in sweep #{this_week.pk}" for m in no_baseline)


@pytest.mark.parametrize("ddtree_runs", [1, 9])
def test_constant_query_count(catalog, ddtree_runs, django_assert_num_queries):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 4, speed=80.0)
    for i in range(ddtree_runs):
        add_run(sweep, i + 1, "ddtree", {"budget": 8 + i, "topk_cap": 8}, 4, speed=100.0 + i, accept_length=3.0)
    # The runs, their points, and for the speedup chart the request records of its points.
    with django_assert_num_queries(3):
        data = sweep_charts(sweep.pk)
    assert len(values(charts_by_id(data)["decode_tok_s"])) == ddtree_runs + 1
    for choice in ({"family": "latency"}, {"family": "prompt_length"}, {"chart": "latency:fibonacci"}):
        with django_assert_num_queries(2):
            data = sweep_charts(sweep.pk, **choice)
        assert len(values(data["charts"][0])) == ddtree_runs + 1


@pytest.mark.parametrize("ddtree_runs", [1, 9])
def test_the_view_is_constant_in_queries(viewer, catalog, client, ddtree_runs, django_assert_num_queries):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 4, speed=80.0, concurrencies=(1, 4))
    for i in range(ddtree_runs):
        add_run(sweep, i + 1, "ddtree", {"budget": 8 + i, "topk_cap": 8}, 4, speed=100.0 + i, concurrencies=(1, 4))
    client.force_login(viewer)
    url = reverse("sweep-charts", args=[sweep.pk])
    client.get(url)  # the session's first request
    # Session, user, the sweep, its runs, their points: the same for every variant; the
    # overview's speedup chart reads its points' request records too.
    with django_assert_num_queries(6):
        response = client.get(url)
    assert response.status_code == 200
    assert len(values(charts_by_id(response.json())["decode_tok_s"])) == ddtree_runs + 1
    listed = {f["id"]: [c["id"] for c in f["charts"]] for f in response.json()["families"]}
    assert set(listed) == set(FAMILIES)
    for query in ({"family": name} for name in FAMILIES):
        with django_assert_num_queries(5):
            response = client.get(url, query)
        assert response.status_code == 200
        assert [c["id"] for c in response.json()["charts"]] == listed[query["family"]]
        assert all(len(values(c)) == ddtree_runs + 1 for c in response.json()["charts"])
    with django_assert_num_queries(5):
        response = client.get(url, {"chart": "latency:long-context 8000 c4"})
    assert response.status_code == 200
    chart = response.json()["charts"][0]
    assert chart["id"] == "latency:long-context 8000 c4" and len(values(chart)) == ddtree_runs + 1


def test_the_view_answers_404_for_an_unknown_family_or_chart(viewer, sweep, client):
    client.force_login(viewer)
    url = reverse("sweep-charts", args=[sweep.pk])
    response = client.get(url, {"family": "nope"})
    assert response.status_code == 404 and "no chart family “nope”" in response.json()["error"]
    response = client.get(url, {"chart": "latency:nowhere"})
    assert response.status_code == 404 and response.json() == {"error": "no chart “latency:nowhere” here"}
    # A group id answers all its TP panels; a panel id, that panel.
    response = client.get(url, {"chart": "latency:fibonacci"})
    assert [c["id"] for c in response.json()["charts"]] == ["latency:fibonacci@TP1", "latency:fibonacci@TP4"]
    response = client.get(url, {"chart": "latency:fibonacci@TP4"})
    assert [c["id"] for c in response.json()["charts"]] == ["latency:fibonacci@TP4"]


def test_the_view_requires_login(viewer, sweep, client):
    url = reverse("sweep-charts", args=[sweep.pk])
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(viewer)
    response = client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json()["sweep"] == sweep.pk
    assert client.get(reverse("sweep-charts", args=[sweep.pk + 1000])).status_code == 404


def test_the_sweep_page_holds_the_charts_container(viewer, sweep, client):
    client.force_login(viewer)
    page = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert f'data-url="{reverse("sweep-charts", args=[sweep.pk])}"' in page
    assert 'id="comparison-charts"' in page and "js/charts.js" in page


# --- The evidence of every value (issue 13) -------------------------------------------------


def _point(run, index):
    return Point.objects.get(run=run, position=index)


def test_suspect_values_carry_their_reasons_and_invalid_ones_are_markers_never_bars(catalog):
    sweep = make_sweep()
    ar = add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0)
    Point.objects.filter(run=ar).update(validity="valid", completed=20)
    Point.objects.filter(pk=_point(ar, 0).pk).update(
        intervals={"decode_tok_s": [48.123456, 52.5]}, simulated_time_scale=0.05)
    Point.objects.filter(pk=_point(ar, 1).pk).update(validity="suspect", validity_reasons=[
        {"code": "host_busy", "message": "pid 4242 (python) took 0.98 of a core"}])
    Point.objects.filter(pk=_point(ar, 2).pk).update(validity="invalid", validity_reasons=[
        {"code": "client_bound", "message": "the client's event loop lagged 14 ms p99 (limit 5 ms)"}])
    chart = charts_by_id(sweep_charts(sweep.pk))["decode_tok_s"]
    (dataset,) = [d for d in chart["datasets"] if d["kind"] == "value"]
    first, suspect, invalid = dataset["data"]
    assert first == {"x": "fibonacci", "y": 50.0, "yMin": 48.12, "yMax": 52.5, "validity": "valid", "reasons": "",
                     "n": 20, "simulated": 0.05}
    assert suspect["y"] == 45.0 and suspect["validity"] == "suspect"
    assert suspect["reasons"] == "host_busy: pid 4242 (python) took 0.98 of a core"
    assert suspect["yMin"] is None and suspect["yMax"] is None  # no interval stored
    assert invalid["y"] is None  # never a bar
    (marker,) = markers(chart)["invalid"]
    assert marker == {"x": "long-context 8000", "y": 0, "config": "autoregressive TP1", "status": "invalid",
                      "reason": "client_bound: the client's event loop lagged 14 ms p99 (limit 5 ms)"}
    assert "invalid" in {entry["status"] for entry in sweep_charts(sweep.pk)["legend"]}
    # The same in the families: the invalid point is a marker in the lines and the latency bars.
    lines = family(sweep.pk, "prompt_length")["decode_vs_prompt:long-context"]
    assert [item["y"] for item in lines["datasets"][0]["data"]] == [45.0, None]
    assert markers(lines)["invalid"][0]["x"] == 8000
    latency = family(sweep.pk, "latency")["latency:long-context 8000"]
    assert all(item["y"] is None for item in latency["datasets"][0]["data"])
    assert len(markers(latency)["invalid"]) == 4


def test_the_speedup_carries_the_interval_of_the_ratio_and_a_verdict_that_knows_the_noise(catalog):
    sweep = make_sweep()
    ar = add_run(sweep, 0, "autoregressive", {}, 1, speed=100.0)
    dd = add_run(sweep, 1, "ddtree", {"budget": 8, "topk_cap": 8}, 1, speed=130.0)
    same = add_run(sweep, 2, "dflash", {"block_size": 16}, 1, speed=100.0)
    for run, speed, seed in ((ar, 100.0, 1), (dd, 130.0, 2), (same, 100.0, 4)):
        Point.objects.filter(run=run).update(validity="valid", completed=20)
        for index in range(3):
            add_records(_point(run, index), speed * (1 - 0.1 * index), n=20, seed=seed * 10 + index, spread=0.03)
    Point.objects.filter(pk=_point(ar, 2).pk).update(validity="suspect", validity_reasons=[
        {"code": "cpu_steal", "message": "the hypervisor stole 9 % of the CPU time (limit 5 %)"}])
    chart = charts_by_id(sweep_charts(sweep.pk))["speedup"]
    by_config = {d["label"]: d["data"] for d in chart["datasets"] if d["kind"] == "value"}
    faster = by_config["ddtree budget=8 topk_cap=8 TP1"]
    assert [item["y"] for item in faster] == [1.3, 1.3, 1.3]
    assert faster[0]["verdict"] == "better" and faster[0]["pValue"] < 0.05 and faster[0]["baselineN"] == 20
    assert faster[0]["yMin"] < 1.3 < faster[0]["yMax"] and faster[0]["yMax"] - faster[0]["yMin"] < 0.1
    assert faster[2]["verdict"] == "insufficient" and faster[2]["validity"] == "suspect"
    assert faster[2]["reasons"] == ("baseline autoregressive TP1: cpu_steal: the hypervisor stole 9 % of the CPU "
                                    "time (limit 5 %)")
    within = by_config["dflash block_size=16 TP1"]
    assert within[0]["verdict"] == "same" and within[0]["verdictReason"].startswith("within noise: ±")
    assert within[0]["yMin"] < 1.0 < within[0]["yMax"]
