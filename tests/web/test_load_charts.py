"""The sweep page against load: load curves with their SLO and capacity lines, the Pareto
view with its front and reproduce commands, the capacity table, and their endpoints."""

import shlex

import pytest
from django.urls import reverse

from benchmarks.models import Workload
from runs.management.commands.loadtest import Command as LoadtestCommand
from runs.models import Point, Run
from runs.results.capacity import capacity_table
from runs.results.charts import significant
from runs.results.load_charts import has_load_curves, load_charts
from tests.web.loads import CAP, SLO, add_load_run, make_load_sweep, ttft_p99
from tests.web.sweeps import add_run, make_sweep, values

GROUP = "long-context 3000"


def capacity_of(load, tp, tok_s_per_user):
    return {"load": load, "goodput": load, "output_tok_s": load * 256, "tok_s_per_gpu": load * 256 / tp,
            "tok_s_per_user": tok_s_per_user}


@pytest.fixture
def load_sweep(catalog):
    sweep = make_load_sweep()
    # p99 TTFT = 100 * rate²: the SLO (2000 ms) holds up to 4.47 req/s; the search found 4.25.
    add_load_run(sweep, 0, "autoregressive", {}, 1, probes=(3.0, 4.25, 4.5),
                 capacity=capacity_of(4.25, 1, 41.24))
    # Twice as fast: it holds up to 6.32 req/s, on four GPUs. Its 8 req/s point is invalid,
    # its 1 req/s point suspect, its 0.5 req/s point failed.
    add_load_run(sweep, 1, "dflash", {"block_size": 16}, 4, scale=0.5, probes=(6.0, 6.5),
                 statuses={0.5: "failed"}, validity={8: "invalid", 1: "suspect"}, capacity=capacity_of(6.0, 4, 43.48))
    # Missed at the lowest load: no capacity.
    add_load_run(sweep, 2, "ddtree", {"budget": 15, "topk_cap": 8}, 1, rates=(0.5,), scale=100.0,
                 capacity={"load": None, "goodput": None, "output_tok_s": None, "tok_s_per_gpu": None,
                           "tok_s_per_user": None, "stopped_because": "slo_missed_at_low",
                           "message": "the SLO is missed at the lowest load, 0.5 req/s"})
    return sweep


def charts_of(sweep):
    return {chart["id"]: chart for chart in load_charts(sweep.pk)["charts"]}


def markers(chart):
    return {d["status"]: d["data"] for d in chart["datasets"] if d["kind"] == "marker"}


def items(chart, label):
    return next(d["data"] for d in chart["datasets"] if d["label"] == label)


def test_a_closed_loop_sweep_has_no_load_curves_but_a_pareto_view_per_workload(catalog):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0)
    assert not has_load_curves(sweep.pk)
    assert list(charts_of(sweep)) == ["pareto:fibonacci", "pareto:long-context 3000", "pareto:long-context 8000"]


def test_one_chart_per_metric_against_the_rate_on_a_logarithmic_axis(load_sweep):
    assert has_load_curves(load_sweep.pk)
    charts = charts_of(load_sweep)
    assert list(charts) == [f"load:request_rate:{field}:{GROUP}" for field in (
        "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput")] + [f"pareto:{GROUP}"]
    chart = charts[f"load:request_rate:p99_ttft_ms:{GROUP}"]
    assert chart["type"] == "line" and chart["x"] == {"label": "request rate (req/s)", "type": "logarithmic"}
    assert chart["y"]["label"] == "p99 TTFT (ms)"
    assert chart["title"] == f"P99 TTFT against request rate (from the scheduled send): {GROUP}"
    # A line per configuration, the probes in their place along the grid.
    lines = values(chart)
    assert [item["x"] for item in lines["autoregressive TP1"]] == [0.5, 1, 2, 3.0, 4, 4.25, 4.5, 8]
    assert [item["y"] for item in lines["autoregressive TP1"]] == [significant(ttft_p99(x, 1.0)) for x in
                                                                  (0.5, 1, 2, 3.0, 4, 4.25, 4.5, 8)]
    # Coloured as every comparison chart colours its configuration.
    colours = {c["config"]: c["color"] for c in load_charts(load_sweep.pk)["configs"]}
    for dataset in chart["datasets"]:
        if dataset["kind"] == "value":
            assert dataset["borderColor"] == colours[dataset["label"]]
    # Evidence on every item: the median's interval where stored, the verdict, n.
    first = items(chart, "autoregressive TP1")[0]
    assert first["validity"] == "valid" and first["n"] == 40


def test_the_slo_limits_are_lines_on_the_charts_of_their_metrics(load_sweep):
    charts = charts_of(load_sweep)
    slo_lines = {field: [a for a in charts[f"load:request_rate:{field}:{GROUP}"]["annotations"] if a["kind"] == "slo"]
                 for field in ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "output_throughput")}
    assert [(a["axis"], a["value"], a["label"]) for a in slo_lines["p99_ttft_ms"]] == [
        ("y", 2000.0, "SLO: p99 TTFT ≤ 2000 ms")]
    assert [(a["axis"], a["value"], a["label"]) for a in slo_lines["median_tpot_ms"]] == [
        ("y", 40.0, "SLO: median TPOT ≤ 40 ms")]
    assert slo_lines["median_ttft_ms"] == slo_lines["p99_tpot_ms"] == slo_lines["output_throughput"] == []


def test_a_limit_on_a_metric_without_a_chart_gets_its_own(catalog):
    sweep = make_load_sweep(slo={"e2el_p90_ms": 6500.0})
    add_load_run(sweep, 0, "autoregressive", {}, 1)
    charts = charts_of(sweep)
    chart = charts[f"load:request_rate:p90_e2el_ms:{GROUP}"]
    assert [a["value"] for a in chart["annotations"] if a["kind"] == "slo"] == [6500.0]
    assert list(charts).index(chart["id"]) == 4  # after the four latency percentiles, before throughput


def test_each_capacity_is_a_labelled_vertical_line_in_its_configuration_colour(load_sweep):
    data = load_charts(load_sweep.pk)
    colours = {c["config"]: c["color"] for c in data["configs"]}
    for chart in data["charts"]:
        if not chart["id"].startswith("load:"):
            continue
        capacity = [a for a in chart["annotations"] if a["kind"] == "capacity"]
        # The ddtree run missed the SLO at its lowest load: no line.
        assert [(a["axis"], a["value"], a["config"], a["color"], a["label"]) for a in capacity] == [
            ("x", 4.25, "autoregressive TP1", colours["autoregressive TP1"],
             "capacity autoregressive TP1: 4.25 req/s"),
            ("x", 6.0, "dflash block_size=16 TP4", colours["dflash block_size=16 TP4"],
             "capacity dflash block_size=16 TP4: 6 req/s"),
        ]
    chart = charts_of(load_sweep)[f"load:request_rate:p99_ttft_ms:{GROUP}"]
    notes = {item["x"]: item["notes"] for item in items(chart, "autoregressive TP1")}
    assert notes[4.25][0] == "capacity: the highest load found that meets the SLO"
    assert notes[4.5][0] == "a probe of the capacity search"
    assert not any("probe" in note or "capacity" in note for note in notes[4])


def test_a_capacity_is_drawn_in_the_group_of_its_point_only(catalog):
    sweep = make_load_sweep()
    run = add_load_run(sweep, 0, "autoregressive", {}, 1, rates=(1, 2), probes=(3.0,),
                       capacity=capacity_of(3.0, 1, 43.0))
    add_load_run(sweep, 1, "dflash", {"block_size": 16}, 1, prompt_tokens=8000)
    # The run's grid points move to the 8000-token prompt; its probes (and capacity) stay at 3000.
    Point.objects.filter(run=run, from_search=False).update(prompt_tokens=8000)
    charts = charts_of(sweep)
    assert [a["value"] for a in charts[f"load:request_rate:p99_ttft_ms:{GROUP}"]["annotations"]
            if a["kind"] == "capacity"] == [3.0]
    assert [d["label"] for d in charts["load:request_rate:p99_ttft_ms:long-context 8000"]["datasets"]
            if d["kind"] == "value"] == ["autoregressive TP1", "dflash block_size=16 TP1"]
    assert not [a for a in charts["load:request_rate:p99_ttft_ms:long-context 8000"]["annotations"]
                if a["kind"] == "capacity"]


def test_points_without_a_value_are_markers_and_suspect_ones_say_so(load_sweep):
    chart = charts_of(load_sweep)[f"load:request_rate:p99_ttft_ms:{GROUP}"]
    dflash = {item["x"]: item for item in items(chart, "dflash block_size=16 TP4")}
    assert dflash[8]["y"] is None and dflash[0.5]["y"] is None  # invalid, failed: never a value
    assert dflash[1]["validity"] == "suspect" and dflash[1]["y"] == ttft_p99(1, 0.5)
    assert "few_samples: suspect at 1" in dflash[1]["reasons"]
    found = markers(chart)
    assert [(m["x"], m["y"], m["config"], m["reason"]) for m in found["invalid"]] == [
        (8, 0, "dflash block_size=16 TP4", "few_samples: invalid at 8")]
    assert [(m["x"], m["config"], m["reason"]) for m in found["failed"]] == [
        (0.5, "dflash block_size=16 TP4", "failed at 0.5 req/s")]


def test_tooltips_say_slo_goodput_and_the_send_based_figures(load_sweep):
    chart = charts_of(load_sweep)[f"load:request_rate:p99_ttft_ms:{GROUP}"]
    notes = {item["x"]: item["notes"] for item in items(chart, "autoregressive TP1")}
    assert notes[8] == [
        "misses the SLO: ttft_p99_ms 6400 > 2000",
        "goodput 3 req/s (50 % of requests within every limit)",
        "from the scheduled send; from the actual send: 90 ms",
        "the client sent late by median 0.4 ms, p99 3 ms, max 9 ms",
    ]
    assert notes[2][:2] == ["meets the SLO", "goodput 2 req/s (100 % of requests within every limit)"]
    tpot = charts_of(load_sweep)[f"load:request_rate:median_tpot_ms:{GROUP}"]
    assert not any("actual send" in note for item in items(tpot, "autoregressive TP1") for note in item["notes"])


def test_a_concurrency_search_is_charted_against_concurrency(catalog):
    sweep = make_load_sweep(metric="concurrency")
    run = Run.objects.create(sweep=sweep, position=0, method="autoregressive", params={}, tp=1, status="done")
    long_context = Workload.objects.get(name="long-context")
    for i, concurrency in enumerate((1, 2, 4, 8)):
        Point.objects.create(run=run, position=i, workload=long_context, prompt_tokens=3000, max_new_tokens=256,
                             concurrency=concurrency, from_search=True, status="ok", validity="valid", completed=20,
                             output_throughput=100.0 * concurrency, median_tpot_ms=20.0 + concurrency,
                             p99_ttft_ms=300.0 * concurrency)
    run.capacity = {"metric": "concurrency", "load": 4, "goodput": 3.0, "point": run.points.get(concurrency=4).pk}
    run.save(update_fields=["capacity"])
    charts = charts_of(sweep)
    chart = charts[f"load:concurrency:p99_ttft_ms:{GROUP}"]
    assert chart["x"] == {"label": "concurrency (requests in flight)", "type": "logarithmic"}
    assert chart["title"] == f"P99 TTFT against concurrency: {GROUP}"
    assert [item["x"] for item in values(chart)["autoregressive TP1"]] == [1, 2, 4, 8]
    assert [(a["value"], a["label"]) for a in chart["annotations"] if a["kind"] == "capacity"] == [
        (4, "capacity autoregressive TP1: 4 in flight")]


# -- The Pareto view ------------------------------------------------------------------------


@pytest.fixture
def pareto_sweep(catalog):
    """Closed-loop points: tok/s per user = speed, tok/s per GPU = speed × concurrency × 0.9 / TP."""
    sweep = make_sweep("pareto")
    add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0, concurrencies=(1, 4))  # (50, 45), (50, 180)
    add_run(sweep, 1, "autoregressive", {}, 4, speed=80.0, concurrencies=(1, 4))  # (80, 18), (80, 72)
    add_run(sweep, 2, "dflash", {"block_size": 16}, 1, speed=100.0, concurrencies=(1, 4))  # (100, 90), (100, 360)
    add_run(sweep, 3, "ddtree", {"budget": 32, "topk_cap": 8}, 4, speed=200.0, concurrencies=(1, 4))  # (200, 45), (200, 180)
    return sweep


def front(chart):
    return [(item["x"], item["y"], item["config"], item["load"])
            for d in chart["datasets"] if d["kind"] == "front" for item in d["data"]]


def test_the_front_joins_the_points_no_other_beats_on_both_axes(pareto_sweep):
    chart = charts_of(pareto_sweep)["pareto:fibonacci"]
    assert chart["type"] == "scatter"
    assert chart["x"]["label"] == "tok/s per user: 1000 / median TPOT (tok/s)"
    assert chart["y"]["label"] == "output tok/s per GPU (tok/s)"
    assert front(chart) == [(100.0, 360.0, "dflash block_size=16 TP1", "concurrency 4"),
                            (200.0, 180.0, "ddtree budget=32 topk_cap=8 TP4", "concurrency 4")]
    on_front = [(i["x"], i["y"]) for d in chart["datasets"] if d["kind"] == "value" for i in d["data"] if i["front"]]
    assert sorted(on_front) == [(100.0, 360.0), (200.0, 180.0)]
    assert chart["title"].endswith("(8 points, 2 on the front)")


def test_colours_by_method_and_tp(pareto_sweep):
    chart = charts_of(pareto_sweep)["pareto:fibonacci"]
    datasets = {d["label"]: d for d in chart["datasets"] if d["kind"] == "value"}
    assert list(datasets) == ["autoregressive TP1", "autoregressive TP4", "dflash TP1", "ddtree TP4"]
    # A shade of the method's colour per TP, a point style per TP.
    assert datasets["autoregressive TP1"]["backgroundColor"] != datasets["autoregressive TP4"]["backgroundColor"]
    assert datasets["autoregressive TP1"]["backgroundColor"].split(",")[0] == \
        datasets["autoregressive TP4"]["backgroundColor"].split(",")[0]  # the same hue
    assert datasets["autoregressive TP1"]["pointStyle"] == datasets["dflash TP1"]["pointStyle"] == "circle"
    assert datasets["autoregressive TP4"]["pointStyle"] == datasets["ddtree TP4"]["pointStyle"] == "rect"


def test_a_suspect_point_is_drawn_but_never_makes_the_front_and_invalid_ones_are_left_out(pareto_sweep):
    ddtree = Run.objects.get(sweep=pareto_sweep, method="ddtree")
    Point.objects.filter(run=ddtree, concurrency=4).update(
        validity="suspect", validity_reasons=[{"code": "host_busy", "message": "another process"}])
    Point.objects.filter(run__sweep=pareto_sweep, run__method="autoregressive", run__tp=1, concurrency=4).update(
        validity="invalid", validity_reasons=[{"code": "errors", "message": "too many"}])
    chart = charts_of(pareto_sweep)["pareto:fibonacci"]
    # Without the suspect (200, 180), (200, 45) is beaten by nothing.
    assert front(chart) == [(100.0, 360.0, "dflash block_size=16 TP1", "concurrency 4"),
                            (200.0, 45.0, "ddtree budget=32 topk_cap=8 TP4", "concurrency 1")]
    drawn = {(i["x"], i["y"]): i for d in chart["datasets"] if d["kind"] == "value" for i in d["data"]}
    assert drawn[(200.0, 180.0)]["validity"] == "suspect" and not drawn[(200.0, 180.0)]["front"]
    assert "host_busy: another process" in drawn[(200.0, 180.0)]["reasons"]
    assert (50.0, 180.0) not in drawn
    assert chart["title"].endswith("(7 points, 2 on the front, 1 invalid left out)")


def test_a_point_without_a_server_address_has_no_reproduce_command(pareto_sweep):
    chart = charts_of(pareto_sweep)["pareto:fibonacci"]
    item = next(d for d in chart["datasets"] if d["kind"] == "value")["data"][0]
    assert item["reproduce"] is None
    assert item["reproduceNote"] == "no command: the run's server never listened here (imported, or not launched)"


def test_each_pareto_point_names_its_configuration_load_verdict_and_reproduce_commands(load_sweep):
    chart = charts_of(load_sweep)[f"pareto:{GROUP}"]
    item = next(i for d in chart["datasets"] if d["kind"] == "value" for i in d["data"]
                if i["config"] == "autoregressive TP1" and i["load"].startswith("4.25 req/s"))
    assert item["load"] == f"4.25 req/s (Poisson), at most {CAP} in flight, a capacity-search probe"
    assert item["validity"] == "valid" and item["n"] == 40 and "verdict: valid" in item["notes"]
    assert item["x"] == significant(1000 / (20 + 4.25)) and item["y"] == 4.25 * 256
    # The loadtest line is one manage.py loadtest accepts, for the same load.
    argv = shlex.split(item["reproduce"]["loadtest"])
    assert argv[:3] == ["python", "manage.py", "loadtest"]
    options = vars(LoadtestCommand().create_parser("manage.py", "loadtest").parse_args(argv[3:]))
    assert {key: options[key] for key in ("base_url", "api", "prompt_tokens", "max_tokens", "concurrency",
                                          "num_requests", "request_rate", "burstiness", "ignore_eos")} == {
        "base_url": "http://127.0.0.1:30000", "api": "sglang-generate", "prompt_tokens": 3000, "max_tokens": 256,
        "concurrency": CAP, "num_requests": 40, "request_rate": 4.25, "burstiness": 1.0, "ignore_eos": True}
    assert item["reproduce"]["vllm"] == (
        "vllm bench serve --backend openai --base-url http://127.0.0.1:30000 --endpoint /v1/completions "
        "--model Qwen/Qwen3.6-27B --dataset-name random --random-input-len 3000 --random-output-len 256 "
        "--random-range-ratio 0 --num-prompts 40 --request-rate 4.25 --burstiness 1 --max-concurrency 64 --ignore-eos")
    assert item["reproduceNote"] == ""


def test_a_fixed_prompt_is_reproduced_by_its_workload_or_its_text(catalog):
    sweep = make_load_sweep()
    add_load_run(sweep, 0, "autoregressive", {}, 1, rates=(1,), workload="fibonacci", prompt_tokens=None)
    add_load_run(sweep, 1, "dflash", {"block_size": 16}, 1, rates=(1,), workload="code-edit", prompt_tokens=None)
    Point.objects.filter(run__sweep=sweep).update(actual_prompt_tokens=57)
    charts = charts_of(sweep)
    fibonacci = next(d for d in charts["pareto:fibonacci"]["datasets"] if d["kind"] == "value")["data"][0]
    assert "--workload fibonacci" in fibonacci["reproduce"]["loadtest"]
    assert "--random-input-len 57" in fibonacci["reproduce"]["vllm"]
    code_edit = next(d for d in charts["pareto:code-edit"]["datasets"] if d["kind"] == "value")["data"][0]
    argv = shlex.split(code_edit["reproduce"]["loadtest"])
    options = vars(LoadtestCommand().create_parser("manage.py", "loadtest").parse_args(argv[3:]))
    assert options["prompt"] and options["prompt"].startswith("Rename the variable")


# -- The capacity table ---------------------------------------------------------------------


def test_the_capacity_table_ranks_by_goodput_per_gpu_and_lists_the_misses_last(load_sweep):
    table = capacity_table(load_sweep.pk, load_sweep.spec)
    assert table["slo"] == SLO and table["metric"] == "request_rate"
    rows = table["rows"]
    assert [(r["rank"], r["config"]) for r in rows] == [
        (1, "autoregressive TP1"), (2, "dflash block_size=16 TP4"), (None, "ddtree budget=15 topk_cap=8 TP1")]
    first, second, missed = rows
    assert (first["load"], first["goodput"], first["goodput_per_gpu"], first["tok_s_per_gpu"]) == (
        4.25, 4.25, 4.25, 4.25 * 256)
    assert (second["goodput"], second["goodput_per_gpu"], second["tok_s_per_gpu"]) == (6.0, 1.5, 6.0 * 256 / 4)
    # The verdict and n are those of the capacity point.
    assert (first["validity"], first["n"], first["probes"]) == ("valid", 40, 3)
    assert missed["load"] is None and missed["goodput_per_gpu"] is None
    assert (missed["stopped_because"], missed["message"]) == (
        "slo_missed_at_low", "the SLO is missed at the lowest load, 0.5 req/s")


def test_equal_goodput_per_gpu_is_ranked_by_tok_s_per_gpu_and_a_suspect_capacity_says_so(catalog):
    sweep = make_load_sweep()
    add_load_run(sweep, 0, "autoregressive", {}, 1, probes=(3.0,), capacity={**capacity_of(3.0, 1, 40.0),
                                                                            "tok_s_per_gpu": 700.0})
    add_load_run(sweep, 1, "dflash", {"block_size": 16}, 2, probes=(6.0,), validity={6.0: "suspect"},
                 capacity={**capacity_of(6.0, 2, 40.0), "tok_s_per_gpu": 900.0})
    rows = capacity_table(sweep.pk, sweep.spec)["rows"]
    assert [(r["config"], r["goodput_per_gpu"]) for r in rows] == [
        ("dflash block_size=16 TP2", 3.0), ("autoregressive TP1", 3.0)]
    assert rows[0]["validity"] == "suspect" and rows[0]["reasons"] == "few_samples: suspect at 6.0"


def test_a_run_that_never_searched_is_listed_last_with_its_cause(load_sweep):
    crashed = Run.objects.create(sweep=load_sweep, position=3, method="ddtree", params={"budget": 8, "topk_cap": 8},
                                 tp=4, status="crashed", failure_cause="CUDA error: an illegal instruction")
    rows = capacity_table(load_sweep.pk, load_sweep.spec)["rows"]
    assert rows[-1]["run"] == crashed.pk and rows[-1]["rank"] is None
    assert rows[-1]["message"] == "CUDA error: an illegal instruction"


def test_no_capacity_no_table(catalog, django_assert_num_queries):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1)
    with django_assert_num_queries(0):  # no search in its spec: nothing to ask the database
        assert capacity_table(sweep.pk, sweep.spec) is None
    searched = make_load_sweep()
    add_load_run(searched, 0, "autoregressive", {}, 1)  # a search not run yet: no capacity
    assert capacity_table(searched.pk, searched.spec) is None


# -- The page and its endpoint --------------------------------------------------------------


def test_the_sweep_page_shows_the_capacity_table_and_the_load_charts(viewer, client, load_sweep):
    client.force_login(viewer)
    page = client.get(reverse("sweep-detail", args=[load_sweep.pk])).content.decode()
    assert 'id="capacity"' in page
    order = [page.index(config) for config in ("autoregressive TP1", "dflash block_size=16 TP4",
                                               "ddtree budget=15 topk_cap=8 TP1") if config in page]
    assert order == sorted(order) and len(order) == 3
    assert "the SLO is missed at the lowest load, 0.5 req/s" in page
    assert f'data-url="{reverse("sweep-load-charts", args=[load_sweep.pk])}"' in page
    assert "js/load_charts.js" in page and "chartjs-plugin-annotation" in page
    assert "Against load, and the Pareto view" in page


def test_a_sweep_without_a_search_has_no_capacity_table(viewer, client, catalog):
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1)
    client.force_login(viewer)
    page = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert 'id="capacity"' not in page and 'id="load-charts"' in page and "The Pareto view" in page


@pytest.mark.parametrize("runs", [1, 6])
def test_the_endpoint_is_constant_in_queries(viewer, client, catalog, runs, django_assert_num_queries):
    sweep = make_load_sweep()
    for i in range(runs):
        add_load_run(sweep, i, "ddtree", {"budget": 8 + i, "topk_cap": 8}, 1, probes=(3.0,),
                     capacity=capacity_of(3.0, 1, 40.0))
    client.force_login(viewer)
    url = reverse("sweep-load-charts", args=[sweep.pk])
    client.get(url)  # the session's first request
    # Session, user, the sweep (twice: the view's 404 check, then its spec, engine and
    # model), the runs, their capacities and addresses, their points.
    with django_assert_num_queries(7):
        response = client.get(url)
    assert response.status_code == 200
    assert len(values(response.json()["charts"][0])) == runs


def test_an_open_loops_ttft_is_drawn_from_the_schedule_and_from_the_actual_send(load_sweep):
    charts = charts_of(load_sweep)
    ttft = charts[f"load:request_rate:p99_ttft_ms:{GROUP}"]
    sent = [d for d in ttft["datasets"] if d["kind"] == "send_based"]
    assert [d["label"] for d in sent][:1] == ["autoregressive TP1 (from the actual send)"]
    assert {item["y"] for item in sent[0]["data"] if item["y"] is not None} == {90.0}  # send_based["p99_ttft_ms"]
    assert sent[0]["borderColor"] == next(d for d in ttft["datasets"] if d["label"] == "autoregressive TP1")[
        "borderColor"]
    # TPOT does not depend on when the request was sent: one line per configuration.
    assert not [d for d in charts[f"load:request_rate:p99_tpot_ms:{GROUP}"]["datasets"] if d["kind"] == "send_based"]
