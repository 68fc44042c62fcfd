"""Nothing suspect looks clean on the sweep page: the points table, the run drawer and the
sweep header show each point's verdict with its reasons, its sample size n, the 95 %
intervals beside the medians and "simulated" for model time; "valid only" hides the rest."""

import re

import pytest
from django.urls import reverse

from runs.models import Point
from runs.templatetags.sweeplab_format import interval, reasons, scale
from tests.web.sweeps import add_run, make_sweep

CLIENT_BOUND = {"code": "client_bound", "message": "the client's event loop lagged 14 ms p99 (limit 5 ms)"}
HOST_BUSY = {"code": "host_busy", "message": "pid 4242 (python) took 0.97 of a core (limit 0.25)"}
EVIL_REASON = {"code": "host_busy", "message": "<script>alert('x')</script> took a core"}


@pytest.fixture
def sweep(catalog):
    """An autoregressive run of three points: valid (n 12, intervals), suspect (host busy,
    simulated at ×0.1), invalid (client bound); and a DDTree run whose second point crashed."""
    sweep = make_sweep()
    run = add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0)
    valid, suspect, invalid = Point.objects.filter(run=run).order_by("position")
    Point.objects.filter(pk=valid.pk).update(
        validity="valid", completed=12, decode_tok_s=34.1,
        intervals={"decode_tok_s": [33.2, 35.0], "median_tpot_ms": [28.1, 29.9]},
        stop_reason="stable: decode_tok_s ±2.6 % after 12 requests (limit ±5 %)")
    Point.objects.filter(pk=suspect.pk).update(
        validity="suspect", validity_reasons=[HOST_BUSY], completed=6, simulated_time_scale=0.1,
        intervals={"decode_tok_s": [40.0, 47.5]})
    Point.objects.filter(pk=invalid.pk).update(validity="invalid", validity_reasons=[CLIENT_BOUND], completed=3)
    other = add_run(sweep, 1, "ddtree", {"budget": 8, "topk_cap": 8}, 1, speed=80.0, statuses={1: "crashed"})
    Point.objects.filter(run=other, status="ok").update(validity="valid", completed=10)
    sweep.ids = {"valid": valid.pk, "suspect": suspect.pk, "invalid": invalid.pk}
    sweep.run = run
    return sweep


def points_html(client, sweep, **params):
    response = client.get(reverse("sweep-points-table-partial", args=[sweep.pk]), params)
    assert response.status_code == 200
    return response.content.decode()


def row_of(html, point_id):
    match = re.search(rf'<tr class="point-row[^"]*" data-point-id="{point_id}".*?</tr>', html, re.S)
    assert match, f"no row for point {point_id}"
    return match.group(0)


def test_the_points_table_shows_each_verdict_with_its_reasons_and_n(sweep, viewer, client):
    client.force_login(viewer)
    html = points_html(client, sweep)
    assert 'title="valid, suspect or invalid (sweepcore.validity), the reasons in its tooltip"' in html
    assert 'title="completed requests: the sample behind the medians"' in html
    valid = row_of(html, sweep.ids["valid"])
    assert 'class="point-row v-valid"' in valid and '<span class="badge v-valid" title="no rule objected">Valid</span>' in valid
    assert '<td class="num" data-field="n">12</td>' in valid
    suspect = row_of(html, sweep.ids["suspect"])
    assert 'class="point-row v-suspect"' in suspect
    assert ('<span class="badge v-suspect" title="host_busy: pid 4242 (python) took 0.97 of a core (limit 0.25)">Suspect</span>'
            in suspect)
    assert '<abbr title="pid 4242 (python) took 0.97 of a core (limit 0.25)">host_busy</abbr>' in suspect
    invalid = row_of(html, sweep.ids["invalid"])
    assert 'class="point-row v-invalid"' in invalid and "client_bound: the client&#x27;s event loop lagged 14 ms p99" in invalid
    assert '<td class="num" data-field="n">3</td>' in invalid


def test_the_points_table_writes_the_interval_beside_the_median(sweep, viewer, client):
    client.force_login(viewer)
    valid = row_of(points_html(client, sweep, cols="decode_tok_s,median_tpot_ms"), sweep.ids["valid"])
    assert '34.10 <span class="ci" title="95 % interval of the median, n = 12">[33.20–35.00]</span>' in valid
    tpot = 1000 / 50.0
    assert f'{tpot:.2f} <span class="ci" title="95 % interval of the median, n = 12">[28.10–29.90]</span>' in valid
    # a point without an interval shows its value alone
    invalid = row_of(points_html(client, sweep), sweep.ids["invalid"])
    assert 'class="ci"' not in invalid


def test_a_simulated_point_says_so_in_the_table(sweep, viewer, client):
    client.force_login(viewer)
    html = points_html(client, sweep)
    assert 'title="simulated: measured on a simulator at ×0.1 real time; its figures are in model time">sim ×0.1</span>' in row_of(
        html, sweep.ids["suspect"])
    assert "simulated" not in row_of(html, sweep.ids["valid"])


def test_a_point_without_a_measurement_has_no_verdict(sweep, viewer, client):
    client.force_login(viewer)
    html = points_html(client, sweep, status="crashed")
    crashed = Point.objects.get(status="crashed")
    row = row_of(html, crashed.pk)
    assert 'class="point-row"' in row and 'title="no verdict: the point was not measured"' in row


def test_valid_only_hides_suspect_and_invalid_rows(sweep, viewer, client):
    client.force_login(viewer)
    every = points_html(client, sweep)
    assert 'data-validity="suspect"' in every and 'data-validity="invalid"' in every
    html = points_html(client, sweep, valid_only="1")
    ids = {int(i) for i in re.findall(r'data-point-id="(\d+)"', html)}
    assert sweep.ids["valid"] in ids and sweep.ids["suspect"] not in ids and sweep.ids["invalid"] not in ids
    assert 'data-validity="suspect"' not in html and 'data-validity="invalid"' not in html
    assert 'data-status="crashed"' not in html  # no verdict is not a valid one
    assert 'name="valid_only" value="1" checked' in html
    assert "Points 1–3 of 3." in html  # the valid one and the DDTree run's two valid ones


def test_valid_only_filters_points_table_json_too(sweep, viewer, client):
    client.force_login(viewer)
    data = client.get(reverse("sweep-points-table", args=[sweep.pk]), {"valid_only": "1"}).json()
    assert data["total"] == 3 and sweep.ids["suspect"] not in [row["id"] for row in data["rows"]]


def test_valid_only_off_shows_every_point(sweep, viewer, client):
    client.force_login(viewer)
    html = points_html(client, sweep, valid_only="0")
    assert 'data-validity="suspect"' in html and 'data-validity="invalid"' in html
    assert 'name="valid_only" value="1">' in html  # the box is not ticked


def test_the_sweep_header_counts_points_by_verdict(sweep, viewer, client):
    client.force_login(viewer)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    verdicts = re.search(r'<p class="legend verdicts" id="sweep-verdicts".*?</p>', html, re.S).group(0)
    counts = re.findall(r'data-verdict="(\w+)">(\d+) (\w+)</span>', verdicts)
    assert counts == [("valid", "3", "valid"), ("suspect", "1", "suspect"), ("invalid", "1", "invalid")]
    assert "simulated (model time, ×0.1)" in verdicts


def test_the_live_partial_sends_the_verdict_counts_again(sweep, viewer, client):
    client.force_login(viewer)
    Point.objects.filter(pk=sweep.ids["suspect"]).update(validity="valid", validity_reasons=[],
                                                         simulated_time_scale=None)
    html = client.get(reverse("sweep-live-partial", args=[sweep.pk])).content.decode()
    verdicts = re.search(r'<p class="legend verdicts" id="sweep-verdicts"[^>]*hx-swap-oob="true">.*?</p>', html, re.S)
    assert verdicts and re.findall(r'data-verdict="(\w+)">(\d+)', verdicts.group(0)) == [("valid", "4"), ("invalid", "1")]
    assert "simulated" not in verdicts.group(0)


def test_progress_json_counts_points_by_verdict(sweep, viewer, client):
    client.force_login(viewer)
    data = client.get(reverse("sweep-progress", args=[sweep.pk])).json()
    assert data["verdicts"] == {"valid": 3, "suspect": 1, "invalid": 1}
    assert data["simulated_time_scales"] == [0.1]


def test_a_sweep_without_verdicts_says_so(catalog, viewer, client):
    sweep = make_sweep("no verdicts")
    add_run(sweep, 0, "autoregressive", {}, 1)
    client.force_login(viewer)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert "No measured point has a verdict yet." in html


def test_the_drawer_lists_each_point_with_its_verdict_reasons_n_and_interval(sweep, viewer, client):
    client.force_login(viewer)
    html = client.get(reverse("run-drawer-partial", args=[sweep.run.pk])).content.decode()
    section = re.search(r'<section data-field="drawer-verdicts".*?</section>', html, re.S).group(0)
    assert re.findall(r'data-verdict="(\w+)">(\d+)', section) == [("valid", "1"), ("suspect", "1"), ("invalid", "1")]
    assert "simulated (model time, ×0.1)" in section
    assert "<strong>client_bound</strong>: the client&#x27;s event loop lagged 14 ms p99 (limit 5 ms)" in section
    assert "<strong>host_busy</strong>: pid 4242 (python) took 0.97 of a core (limit 0.25)" in section
    assert '34.10 <span class="ci" title="95 % interval of the median">[33.20–35.00]</span>' in section
    assert "stable: decode_tok_s ±2.6 % after 12 requests (limit ±5 %)" in section
    assert re.search(r'<td class="num">12</td>', section) and re.search(r'<td class="num">3</td>', section)


def test_the_drawer_json_carries_the_verdicts(sweep, viewer, client):
    client.force_login(viewer)
    data = client.get(reverse("run-drawer", args=[sweep.run.pk])).json()["verdicts"]
    assert [p["validity"] for p in data["points"]] == ["valid", "suspect", "invalid"]
    assert data["points"][0]["decode_tok_s_ci"] == [33.2, 35.0] and data["points"][0]["n"] == 12
    assert data["points"][2]["validity_reasons"] == [CLIENT_BOUND]
    assert data["simulated_scales"] == [0.1]


def test_reasons_are_escaped_everywhere(sweep, viewer, client):
    Point.objects.filter(pk=sweep.ids["suspect"]).update(validity_reasons=[EVIL_REASON])
    client.force_login(viewer)
    for html in (points_html(client, sweep),
                 client.get(reverse("run-drawer-partial", args=[sweep.run.pk])).content.decode()):
        assert "<script>alert" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html


def test_the_sweep_page_passes_valid_only_to_the_charts_and_the_table(sweep, viewer, client):
    client.force_login(viewer)
    every = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert "data-valid-only" not in every and 'href="?valid_only=1"' in every
    html = client.get(reverse("sweep-detail", args=[sweep.pk]), {"valid_only": "1"}).content.decode()
    assert 'data-valid-only="true"' in html and '<input type="hidden" name="valid_only" value="1">' in html
    assert "Showing valid points only" in html and 'data-action="show-every-point"' in html


def test_the_filters_write_intervals_reasons_and_scales():
    assert interval([33.2, 35.0]) == "[33.20–35.00]"
    assert interval([120.4, 131.6]) == "[120–132]"
    assert interval(None) == "" and interval([1.0, None]) == ""
    assert reasons([CLIENT_BOUND, HOST_BUSY]) == (
        "client_bound: the client's event loop lagged 14 ms p99 (limit 5 ms); "
        "host_busy: pid 4242 (python) took 0.97 of a core (limit 0.25)")
    assert reasons([]) == ""
    assert scale(0.1) == "0.1" and scale(0.02) == "0.02" and scale(2.0) == "2" and scale(None) == ""
