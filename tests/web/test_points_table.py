"""The sweep page's points table: points-table.json (sorting, filters, pages, bad
parameters, query count) and the page that hosts it (its partial: tests/web/test_partials.py)."""

from pathlib import Path

import pytest
from django.urls import reverse

from runs.models import Point, Run
from runs.results.points_table import DEFAULT_COLUMNS, MAX_PER_PAGE, SORT_COLUMNS, parse_query, points_table
from tests.web.sweeps import add_run, make_sweep


@pytest.fixture
def sweep(catalog):
    """Three runs of three points each (fibonacci, long-context 3000, long-context 8000)."""
    sweep = make_sweep()
    add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0)
    crashed = add_run(sweep, 1, "ddtree", {"budget": 8, "topk_cap": 8}, 4, speed=0,
                      statuses={0: "crashed", 1: "not_run", 2: "not_run"})
    add_run(sweep, 2, "ddtree", {"budget": 15, "topk_cap": 8}, 4, speed=160.0, accept_length=4.25,
            statuses={1: "context_overflow"})
    # Points that died with their server and say nothing themselves carry the run's cause.
    Run.objects.filter(pk=crashed.pk).update(status="crashed",
                                             failure_cause="CUDA error: an illegal instruction was encountered")
    Point.objects.filter(run=crashed, status="not_run").update(reason="")
    return sweep


def table(client, sweep, **params):
    response = client.get(reverse("sweep-points-table", args=[sweep.pk]), params)
    assert response["Content-Type"] == "application/json"
    return response


def configs(data):
    return [row["config"] for row in data["rows"]]


def test_it_lists_every_point_in_plan_order_with_labels_statuses_and_choices(sweep, viewer, client):
    client.force_login(viewer)
    response = table(client, sweep)
    assert response.status_code == 200
    data = response.json()
    assert (data["total"], data["page"], data["pages"], data["per_page"], data["sort"]) == (9, 1, 1, 100, "run")
    assert configs(data) == (["autoregressive TP1"] * 3 + ["ddtree budget=8 topk_cap=8 TP4"] * 3
                             + ["ddtree budget=15 topk_cap=8 TP4"] * 3)
    first = data["rows"][0]
    assert first["workload"] == "fibonacci" and first["prompt_tokens"] is None and first["concurrency"] == 1
    assert first["status"] == "ok" and first["reason"] == "" and first["decode_tok_s"] == 50.0
    assert first["run"] == Run.objects.get(sweep=sweep, position=0).pk and first["run_position"] == 0
    assert set(SORT_COLUMNS) - {"run", "config", "workload", "status"} <= set(first)
    assert data["choices"]["statuses"] == [
        {"value": "ok", "label": "OK"},
        {"value": "crashed", "label": "Crashed (server died during it)"},
        {"value": "context_overflow", "label": "Context overflow (server refused the length)"},
        {"value": "not_run", "label": "Not run"},
    ]
    assert data["choices"]["workloads"] == ["fibonacci", "long-context"]
    assert data["choices"]["methods"] == ["autoregressive", "ddtree"]
    assert data["choices"]["tps"] == [1, 4]
    assert [r["label"] for r in data["choices"]["runs"]] == list(dict.fromkeys(configs(data)))


def test_points_without_a_measurement_carry_their_reason_and_never_a_value(sweep, viewer, client):
    client.force_login(viewer)
    rows = table(client, sweep).json()["rows"]
    overflow = next(r for r in rows if r["status"] == "context_overflow")
    assert overflow["reason"] == "context_overflow reason ddtree TP4 #1"
    assert overflow["status_display"] == "Context overflow (server refused the length)"
    crashed = [r for r in rows if r["config"].startswith("ddtree budget=8")]
    assert crashed[0]["reason"] == "crashed reason ddtree TP4 #0"
    # not_run points with no reason of their own: the run's cause.
    assert [r["reason"] for r in crashed[1:]] == ["CUDA error: an illegal instruction was encountered"] * 2
    for row in rows:
        if row["status"] != "ok":
            assert all(row[name] is None for name in ("decode_tok_s", "output_throughput", "median_ttft_ms"))


def test_it_sorts_points_by_decode_speed_with_missing_values_last_in_both_directions(sweep, viewer, client):
    client.force_login(viewer)
    # A failed point that stored a throughput of 0.0 still sorts as missing, not as slowest.
    Point.objects.filter(run__sweep=sweep, status="crashed").update(decode_tok_s=0.0)
    down = table(client, sweep, sort="-decode_tok_s").json()
    speeds = [row["decode_tok_s"] for row in down["rows"]]
    assert speeds == [160.0, 128.0, 50.0, 45.0, 40.0, None, None, None, None]
    assert down["sort"] == "-decode_tok_s"
    up = table(client, sweep, sort="decode_tok_s").json()
    assert [row["decode_tok_s"] for row in up["rows"]] == [40.0, 45.0, 50.0, 128.0, 160.0, None, None, None, None]
    # Ties (the missing values) keep plan order.
    assert [r["id"] for r in up["rows"][5:]] == [r["id"] for r in down["rows"][5:]]


def test_it_sorts_by_prompt_tokens_status_workload_and_run(sweep, viewer, client):
    client.force_login(viewer)
    tokens = [r["prompt_tokens"] for r in table(client, sweep, sort="-prompt_tokens").json()["rows"]]
    assert tokens == [8000] * 3 + [3000] * 3 + [None] * 3
    statuses = [r["status"] for r in table(client, sweep, sort="status").json()["rows"]]
    assert statuses == ["ok"] * 5 + ["crashed", "context_overflow", "not_run", "not_run"]
    workloads = [r["workload"] for r in table(client, sweep, sort="-workload").json()["rows"]]
    assert workloads == ["long-context"] * 6 + ["fibonacci"] * 3
    last_run_first = configs(table(client, sweep, sort="-config").json())
    assert last_run_first[0] == "ddtree budget=15 topk_cap=8 TP4" and last_run_first[-1] == "autoregressive TP1"


def test_it_filters_by_status_workload_method_tp_run_and_text(sweep, viewer, client):
    client.force_login(viewer)
    assert table(client, sweep, status="not_run").json()["total"] == 2
    assert table(client, sweep, workload="fibonacci").json()["total"] == 3
    assert set(configs(table(client, sweep, method="ddtree").json())) == {
        "ddtree budget=8 topk_cap=8 TP4", "ddtree budget=15 topk_cap=8 TP4"}
    assert table(client, sweep, tp="1").json()["total"] == 3
    run = Run.objects.get(sweep=sweep, position=2)
    data = table(client, sweep, run=str(run.pk), status="ok").json()
    assert data["total"] == 2 and {r["run"] for r in data["rows"]} == {run.pk}
    # q: a substring of the configuration label (made from JSON params) or of the reason.
    assert set(configs(table(client, sweep, q="BUDGET=15").json())) == {"ddtree budget=15 topk_cap=8 TP4"}
    assert [r["status"] for r in table(client, sweep, q="overflow reason").json()["rows"]] == ["context_overflow"]
    # Choices stay those of the whole sweep whatever the filter.
    assert table(client, sweep, status="not_run").json()["choices"]["tps"] == [1, 4]
    assert table(client, sweep, q="nothing like this").json() | {"choices": None} == {
        "rows": [], "total": 0, "page": 1, "pages": 1, "per_page": 100, "sort": "run",
        "columns": list(SORT_COLUMNS), "choices": None}


def test_it_pages_through_the_points(sweep, viewer, client):
    client.force_login(viewer)
    data = table(client, sweep, per_page="4", page="2").json()
    assert (data["total"], data["page"], data["pages"], len(data["rows"])) == (9, 2, 3, 4)
    assert [r["id"] for r in data["rows"]] == [r["id"] for r in table(client, sweep).json()["rows"][4:8]]
    # A page past the end (a filter shrank the table) answers the last page.
    data = table(client, sweep, per_page="4", page="7").json()
    assert (data["page"], len(data["rows"])) == (3, 1)
    assert table(client, sweep, per_page=str(MAX_PER_PAGE)).status_code == 200


@pytest.mark.parametrize("params, message", [
    ({"sort": "bogus"}, "unknown sort column 'bogus'"),
    ({"sort": "-errors"}, "unknown sort column 'errors'"),
    ({"page": "two"}, "page must be an integer, got 'two'"),
    ({"page": "0"}, "page must be at least 1, got 0"),
    ({"per_page": "501"}, "per_page must be at least 1 and at most 500, got 501"),
    ({"tp": "4x"}, "tp must be an integer, got '4x'"),
    ({"run": "first"}, "run must be an integer, got 'first'"),
    ({"status": "great"}, "unknown status 'great'"),
    ({"method": "magic"}, "unknown method 'magic'"),
])
def test_bad_parameters_are_a_400_saying_what_was_wrong(sweep, viewer, client, params, message):
    client.force_login(viewer)
    response = table(client, sweep, **params)
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_a_run_of_another_sweep_is_a_400(sweep, viewer, client):
    other = make_sweep("other")
    run = add_run(other, 0, "autoregressive", {}, 1)
    client.force_login(viewer)
    response = table(client, sweep, run=str(run.pk))
    assert response.status_code == 400
    assert response.json() == {"error": f"run {run.pk} is not a run of sweep {sweep.pk}"}


def test_the_table_requires_login_and_an_unknown_sweep_is_404(sweep, viewer, client):
    url = reverse("sweep-points-table", args=[sweep.pk])
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next=")
    client.force_login(viewer)
    assert client.get(url).status_code == 200
    assert client.get(reverse("sweep-points-table", args=[sweep.pk + 100])).status_code == 404


@pytest.mark.parametrize("runs", [2, 30])
def test_the_table_uses_a_constant_number_of_queries(catalog, viewer, client, runs, django_assert_num_queries):
    sweep = make_sweep()
    for position in range(runs):
        add_run(sweep, position, "ddtree", {"budget": 8 + position, "topk_cap": 8}, 4, speed=100.0 + position,
                statuses={1: "crashed"})
    client.force_login(viewer)
    url = reverse("sweep-points-table", args=[sweep.pk])
    client.get(url)  # warm the session
    # Session, user, the sweep, its runs, statuses and workloads present, the count, the page.
    with django_assert_num_queries(7):
        data = client.get(url, {"sort": "-decode_tok_s", "q": "budget", "per_page": "50"}).json()
    assert data["total"] == 3 * runs and len(data["rows"]) == min(50, 3 * runs)


def test_parse_query_defaults():
    assert parse_query({}) == {
        "sort": "run", "status": "", "workload": "", "method": "", "tp": None, "run": None, "validity": "",
        "valid_only": False, "q": "", "cols": list(DEFAULT_COLUMNS),
        "page": 1, "per_page": 100,
    }


def test_points_table_answers_without_a_request(sweep):
    data = points_table(sweep.pk, parse_query({"sort": "-accept_length", "per_page": "2"}))
    assert [r["accept_length"] for r in data["rows"]] == [4.25, 4.25] and data["pages"] == 5


# --- the sweep page ---------------------------------------------------------------------


def test_the_sweep_page_asks_for_the_points_table_partial_not_nested_tables(sweep, viewer, client):
    client.force_login(viewer)
    response = client.get(reverse("sweep-detail", args=[sweep.pk]))
    html = response.content.decode()
    # The table's partial is asked for once the page has loaded, and again by every control.
    assert (f'<form id="points-form" hx-get="{reverse("sweep-points-table-partial", args=[sweep.pk])}" '
            'hx-trigger="load, change, submit"') in html
    assert 'id="points-table"' in html and "point-row" not in html
    assert "points-row" not in html and "<details>" not in html
    run = Run.objects.get(sweep=sweep, position=1)
    assert f'data-action="filter-points" data-run-id="{run.pk}"' in html
    # Counts per status still come with the run rows, in the declared status order.
    counted = next(r for r in response.context["runs"] if r.pk == run.pk)
    assert list(counted.status_counts.items()) == [("crashed", 1), ("not_run", 2)] and counted.progress["total"] == 3


def test_the_sweep_page_has_a_run_selection_form_for_charts(sweep, viewer, client):
    client.force_login(viewer)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert f'<form id="run-selection" method="get" action="{reverse("run-selection-charts")}"' in html
    for run in Run.objects.filter(sweep=sweep):
        assert f'name="runs" value="{run.pk}" form="run-selection"' in html
    assert "Chart selected runs" in html


@pytest.mark.parametrize("runs", [2, 30])
def test_the_sweep_page_uses_a_constant_number_of_queries(catalog, viewer, client, runs, django_assert_num_queries):
    sweep = make_sweep()
    for position in range(runs):
        add_run(sweep, position, "ddtree", {"budget": 8 + position, "topk_cap": 8}, 4)
    client.force_login(viewer)
    url = reverse("sweep-detail", args=[sweep.pk])
    client.get(url)  # warm the session
    # Session, user, the sweep, its runs, point counts per run and status, two for
    # permissions, whether it has load curves (open-loop points or search probes), its GPU
    # leases (the Gantt chart).
    with django_assert_num_queries(9):
        assert client.get(url).status_code == 200


def test_no_page_script_inserts_html():
    """The server's partials are the only HTML the pages add: every hand-written script
    inserts text."""
    from django.contrib.staticfiles import finders

    scripts = sorted(Path(finders.find("js/util.js")).parent.glob("*.js"))
    assert {"util.js", "sweep_live.js", "charts.js"} <= {path.name for path in scripts}
    for path in scripts:
        source = path.read_text()
        assert "innerHTML" not in source and "insertAdjacentHTML" not in source, path.name


def test_it_shows_the_servers_own_decode_speed_beside_ours(sweep, viewer, client):
    point = Point.objects.filter(run__sweep=sweep, status="ok").order_by("run__position", "position").first()
    Point.objects.filter(pk=point.pk).update(server_decode_tok_s=53.7)
    client.force_login(viewer)
    rows = table(client, sweep, sort="-server_decode_tok_s").json()["rows"]
    assert (rows[0]["id"], rows[0]["decode_tok_s"], rows[0]["server_decode_tok_s"]) == (point.pk, 50.0, 53.7)
    assert all(row["server_decode_tok_s"] is None for row in rows[1:])
