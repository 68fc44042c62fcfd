"""Comparison charts of any runs across sweeps: /charts/?runs=... and /charts.json."""

import pytest
from django.urls import reverse

from runs.results.charts import run_charts
from tests.web.sweeps import add_run, charts_by_id, make_sweep, values


@pytest.fixture
def two_sweeps(catalog):
    """Last week's and this week's sweep, each with the same autoregressive TP1 run."""
    old, new = make_sweep("last-week"), make_sweep("this-week")
    runs = {
        "old_ar": add_run(old, 0, "autoregressive", {}, 1, speed=50.0),
        "old_dd": add_run(old, 1, "ddtree", {"budget": 15, "topk_cap": 8}, 1, speed=120.0,
                          statuses={2: "crashed"}),
        "new_ar": add_run(new, 0, "autoregressive", {}, 1, speed=60.0),
    }
    return old, new, runs


def data_url(*runs):
    return reverse("run-selection-charts-data") + "?runs=" + ",".join(str(r.pk) for r in runs)


def test_the_endpoint_charts_runs_of_two_sweeps_side_by_side(two_sweeps, viewer, client):
    old, new, runs = two_sweeps
    client.force_login(viewer)
    response = client.get(data_url(runs["new_ar"], runs["old_ar"], runs["old_dd"]))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    data = response.json()
    assert data["sweep"] is None
    assert data["runs"] == [
        {"id": runs["new_ar"].pk, "sweep": new.pk, "sweep_name": "this-week", "label": "autoregressive TP1"},
        {"id": runs["old_ar"].pk, "sweep": old.pk, "sweep_name": "last-week", "label": "autoregressive TP1"},
        {"id": runs["old_dd"].pk, "sweep": old.pk, "sweep_name": "last-week",
         "label": "ddtree budget=15 topk_cap=8 TP1"},
    ]
    decode = charts_by_id(data)["decode_tok_s"]
    # The same configuration from two sweeps is two datasets, told apart by the sweep, in
    # the order chosen; never collapsed as retries of one sweep are.
    assert values(decode) == {
        f"#{new.pk} autoregressive TP1": [60.0, 54.0, 48.0],
        f"#{old.pk} autoregressive TP1": [50.0, 45.0, 40.0],
        f"#{old.pk} ddtree budget=15 topk_cap=8 TP1": [120.0, 108.0, None],
    }
    configs = {c["config"]: c for c in data["configs"]}
    assert [configs[d["label"]]["sweep"] for d in decode["datasets"] if d["kind"] == "value"] == [new.pk, old.pk, old.pk]
    assert [c["run"] for c in data["configs"]] == [runs["new_ar"].pk, runs["old_ar"].pk, runs["old_dd"].pk]
    crashed = [d for d in decode["datasets"] if d.get("status") == "crashed"]
    assert [m["config"] for m in crashed[0]["data"]] == [f"#{old.pk} ddtree budget=15 topk_cap=8 TP1"]
    assert "speedup" in charts_by_id(data)
    # The on-demand families of a selection: listed here, fetched with ?family= or ?chart=.
    listed = {f["id"]: [c["id"] for c in f["charts"]] for f in data["families"]}
    assert listed["latency"] == ["latency:fibonacci", "latency:long-context 3000", "latency:long-context 8000"]
    response = client.get(data_url(runs["new_ar"], runs["old_ar"], runs["old_dd"]) + "&family=latency")
    assert response.status_code == 200 and response.json()["runs"] == data["runs"]
    latency = charts_by_id(response.json())
    assert list(latency) == listed["latency"]
    assert values(latency["latency:long-context 8000"]) == {
        f"#{new.pk} autoregressive TP1": [16.67, 25.0, 15.0, 33.33],
        f"#{old.pk} autoregressive TP1": [20.0, 30.0, 18.0, 40.0],
        f"#{old.pk} ddtree budget=15 topk_cap=8 TP1": [None, None, None, None],
    }
    assert {m["config"] for d in latency["latency:long-context 8000"]["datasets"] if d["kind"] == "marker"
            for m in d["data"]} == {f"#{old.pk} ddtree budget=15 topk_cap=8 TP1"}
    response = client.get(data_url(runs["old_ar"]) + "&chart=ttft_vs_prompt:long-context")
    assert [c["id"] for c in response.json()["charts"]] == ["ttft_vs_prompt:long-context"]
    response = client.get(data_url(runs["old_ar"]) + "&family=nope")
    assert response.status_code == 404 and "no chart family" in response.json()["error"]


def test_runs_of_one_sweep_keep_their_plain_labels_and_two_attempts_are_told_apart(two_sweeps):
    old, _, runs = two_sweeps
    retry = add_run(old, 0, "autoregressive", {}, 1, speed=55.0, attempt=2)
    bars = values(charts_by_id(run_charts([runs["old_ar"].pk, retry.pk]))["decode_tok_s"])
    assert list(bars) == ["autoregressive TP1 attempt 1", "autoregressive TP1 attempt 2"]
    bars = values(charts_by_id(run_charts([runs["old_dd"].pk]))["decode_tok_s"])
    assert list(bars) == ["ddtree budget=15 topk_cap=8 TP1"]


def test_the_page_lists_the_runs_with_links_to_their_sweeps(two_sweeps, viewer, client):
    old, new, runs = two_sweeps
    client.force_login(viewer)
    ids = f"{runs['old_ar'].pk},{runs['new_ar'].pk}"
    response = client.get(reverse("run-selection-charts"), {"runs": ids})
    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-url="{reverse("run-selection-charts-data")}?runs={ids}"' in html
    assert 'id="comparison-charts"' in html and "js/charts.js" in html and "chart.umd.min.js" in html
    for sweep, run in ((old, runs["old_ar"]), (new, runs["new_ar"])):
        assert f'href="{reverse("sweep-detail", args=[sweep.pk])}#run-{run.pk}">#{sweep.pk} {sweep.name}</a>' in html
    assert "· autoregressive TP1" in html
    assert f'{reverse("compare")}?run={runs["old_ar"].pk}&amp;run={runs["new_ar"].pk}' in html


def test_the_page_takes_the_checkboxes_of_the_sweep_page(two_sweeps, viewer, client):
    _, _, runs = two_sweeps
    client.force_login(viewer)
    # A GET form of checkboxes named "runs" sends runs=1&runs=2.
    response = client.get(reverse("run-selection-charts"), {"runs": [runs["old_dd"].pk, runs["new_ar"].pk]})
    assert response.status_code == 200
    assert [r.pk for r in response.context["runs"]] == [runs["old_dd"].pk, runs["new_ar"].pk]
    response = client.get(reverse("run-selection-charts-data"), {"runs": [runs["old_dd"].pk, runs["new_ar"].pk]})
    assert [r["id"] for r in response.json()["runs"]] == [runs["old_dd"].pk, runs["new_ar"].pk]


def test_without_a_selection_the_page_explains_and_the_endpoint_refuses(catalog, viewer, client):
    client.force_login(viewer)
    response = client.get(reverse("run-selection-charts"))
    assert response.status_code == 200 and "Chart selected runs" in response.content.decode()
    response = client.get(reverse("run-selection-charts-data"))
    assert response.status_code == 400
    assert response.json() == {"error": "Cannot chart this selection: no runs selected: give run ids like ?runs=1,2,3."}


def test_bad_and_unknown_ids_are_a_400_that_names_them(two_sweeps, viewer, client):
    _, _, runs = two_sweeps
    client.force_login(viewer)
    response = client.get(reverse("run-selection-charts"), {"runs": f"{runs['old_ar'].pk},abc"})
    assert response.status_code == 400
    assert "“abc” is not a run id" in response.content.decode()
    assert 'id="comparison-charts"' not in response.content.decode()
    missing = runs["new_ar"].pk + 1000
    response = client.get(reverse("run-selection-charts"), {"runs": f"{runs['old_ar'].pk},{missing},{missing + 1}"})
    assert response.status_code == 400
    assert f"no run #{missing}, #{missing + 1}" in response.content.decode()
    response = client.get(reverse("run-selection-charts-data"), {"runs": f"{missing}"})
    assert response.status_code == 400 and f"no run #{missing}" in response.json()["error"]
    response = client.get(reverse("run-selection-charts-data"), {"runs": "-3"})
    assert response.status_code == 400 and "“-3” is not a run id" in response.json()["error"]


def test_both_require_login(two_sweeps, client):
    _, _, runs = two_sweeps
    for url in (reverse("run-selection-charts") + f"?runs={runs['old_ar'].pk}", data_url(runs["old_ar"])):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next="), url


@pytest.mark.parametrize("count", [2, 12])
def test_the_endpoint_uses_a_constant_number_of_queries(catalog, viewer, client, count, django_assert_num_queries):
    chosen = []
    for i in range(count):
        sweep = make_sweep(f"sweep-{i}")
        chosen.append(add_run(sweep, 0, "ddtree", {"budget": 8 + i, "topk_cap": 8}, 1, speed=100.0 + i))
    client.force_login(viewer)
    url = data_url(*chosen)
    client.get(url)  # warm the session
    # Session, user, the chosen runs with their sweeps, then the charts' runs and points (and
    # for the overview the points' request records, for the speedups' intervals).
    with django_assert_num_queries(6):
        data = client.get(url).json()
    assert len(values(charts_by_id(data)["decode_tok_s"])) == count
    for query in ("&family=latency", "&family=prompt_length", "&chart=latency:fibonacci"):
        with django_assert_num_queries(5):
            data = client.get(url + query).json()
        assert data["charts"] and all(len(values(chart)) == count for chart in data["charts"])


def test_the_compare_page_links_to_charts_of_the_compared_runs(two_sweeps, viewer, client):
    _, _, runs = two_sweeps
    client.force_login(viewer)
    response = client.get(reverse("compare"), {"run": [runs["old_ar"].pk, runs["new_ar"].pk]})
    assert response.status_code == 200
    html = response.content.decode()
    assert f'href="{reverse("run-selection-charts")}?runs={runs["old_ar"].pk},{runs["new_ar"].pk}"' in html
    assert "Charts of these runs" in html
    # Comparing sweeps is not comparing runs: no such link there.
    old, new, _ = two_sweeps
    html = client.get(reverse("compare"), {"sweep": [old.pk, new.pk]}).content.decode()
    assert "Charts of these runs" not in html
