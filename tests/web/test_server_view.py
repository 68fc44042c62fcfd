"""The server's own view of each point (its /metrics, deltas over the point): the run drawer
lists it with its numbers, the points table sets the server's medians beside ours with the
histogram's bucket on hover, and the API and the exports carry it. A point whose server
reported nothing shows nothing: no zeros, no "None"."""

import csv
import io
import json
import re

import pytest
from django.urls import reverse

from runs.models import Point
from runs.templatetags.sweeplab_format import bucket, percent
from tests.web.sweeps import add_run, make_sweep

# A speculative point as vLLM reported it (the shape sweepcore.servermetrics.point_view makes).
VIEW = {
    "source": "vllm",
    "counters": {"prompt_tokens": 1536, "generation_tokens": 384, "preemptions": 2,
                 "prefix_cache_queries": 1536, "prefix_cache_hits": 512,
                 "requests_by_finish_reason": {"length": 6, "stop": 1}},
    "gauges_max": {"requests_running": 4, "requests_waiting": 3, "kv_cache_usage": 0.123, "samples": 9},
    "ttft_ms": {"median": 41.3, "bucket": [40.0, 60.0], "count": 7},
    "itl_ms": {"median": 52.0, "bucket": [50.0, 75.0], "count": 378},
    "spec": {"drafts": 14, "draft_tokens": 56, "accepted_tokens": 50, "accept_length": 4.571,
             "acceptance_rate_per_position": [1.0, 1.0, 0.929, 0.643]},
}
# What SGLang without speculation reports: no prefix-cache or spec counters, no TTFT
# observation, an ITL median in the +Inf bucket.
SPARSE_VIEW = {
    "source": "sglang",
    "counters": {"prompt_tokens": 100, "generation_tokens": 50},
    "gauges_max": {"requests_running": 2, "samples": 3},
    "ttft_ms": None,
    "itl_ms": {"median": 2600.0, "bucket": [2500.0, None], "count": 40},
}


@pytest.fixture
def sweep(catalog):
    """A ddtree run whose first point has the server's view, its second (ok) none, its third
    crashed; and an autoregressive run on a server without /metrics."""
    sweep = make_sweep("server view")
    spec = add_run(sweep, 0, "ddtree", {"budget": 15, "topk_cap": 8}, 1, speed=120.0, statuses={2: "crashed"},
                   median_ttft_ms=44.0)
    add_run(sweep, 1, "autoregressive", {}, 1, speed=50.0, median_ttft_ms=30.0)
    first, second, _ = spec.points.order_by("position")
    Point.objects.filter(pk=first.pk).update(server_metrics=VIEW, server_median_ttft_ms=41.3,
                                             server_median_itl_ms=52.0)
    sweep.spec_run, sweep.with_view, sweep.without_view = spec, first, second
    return sweep


def drawer_html(client, run):
    response = client.get(reverse("run-drawer-partial", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def server_section(html):
    match = re.search(r'<section data-field="drawer-server-view".*?</section>', html, re.S)
    return match.group(0) if match else None


def facts(section):
    """{data-field: its value's text} of the server's facts in a drawer section."""
    return {field: re.sub(r"<[^>]+>", "", dd).strip()
            for field, dd in re.findall(r'<div data-field="server-([\w-]+)"><dt>[^<]*</dt><dd>(.*?)</dd></div>',
                                        section, re.S)}


# --- the run drawer -----------------------------------------------------------------------


def test_the_drawer_shows_the_server_s_view_of_a_point_with_its_numbers(sweep, viewer, client):
    client.force_login(viewer)
    section = server_section(drawer_html(client, sweep.spec_run))
    assert "<h3>The server's own view <span class=\"muted\">(its /metrics, deltas over this point)</span></h3>" in section
    assert re.findall(r'<div class="server-view" data-point-id="(\d+)">', section) == [str(sweep.with_view.pk)]
    assert '<span class="muted" data-field="server-source">vllm</span>' in section
    assert facts(section) == {
        "ttft": "41.30 ms (between 40 and 60 ms, 7 observed) · ours 44.00 ms",
        "itl": "52.00 ms (between 50 and 75 ms, 378 observed) · ours 7.50 ms",
        "prompt-tokens": "1536",
        "generation-tokens": "384",
        "preemptions": "2",
        "prefix-cache": "512 of 1536 tokens (33 %)",
        "finished": "6 length, 1 stop",
        "running": "4",
        "waiting": "3",
        "kv-cache": "12 %",
        "samples": "9",
        "drafts": "14 (56 tokens)",
        "accepted": "50",
        "accept-length": "4.57",
        "acceptance": "100 %, 100 %, 93 %, 64 %",
    }


def test_the_drawer_shows_only_what_the_server_reported_in_its_time(sweep, viewer, client):
    Point.objects.filter(pk=sweep.with_view.pk).update(server_metrics=SPARSE_VIEW, server_median_ttft_ms=None,
                                                       server_median_itl_ms=2600.0, simulated_time_scale=0.1)
    client.force_login(viewer)
    section = server_section(drawer_html(client, sweep.spec_run))
    assert '<span class="muted" data-field="server-source">sglang, model time</span>' in section
    assert facts(section) == {
        "itl": "2600 ms (above 2500 ms, 40 observed) · ours 7.50 ms",
        "prompt-tokens": "100",
        "generation-tokens": "50",
        "running": "2",
        "samples": "3",
    }
    assert "None" not in section and "server-reset" not in section


def test_the_drawer_says_when_the_server_restarted_during_a_point(sweep, viewer, client):
    Point.objects.filter(pk=sweep.with_view.pk).update(
        server_metrics={"source": "vllm", "reset": True, "gauges_max": {"requests_running": 1, "samples": 2}})
    client.force_login(viewer)
    section = server_section(drawer_html(client, sweep.spec_run))
    assert "Its counters went back during this point (the server restarted): no deltas." in section
    assert facts(section) == {"running": "1", "samples": "2"}


def test_a_run_whose_server_reported_nothing_has_no_server_view_in_its_drawer(sweep, viewer, client):
    client.force_login(viewer)
    plain = sweep.runs.get(position=1)
    html = drawer_html(client, plain)
    assert server_section(html) is None and "own view" not in html and "None" not in html
    assert client.get(reverse("run-drawer", args=[plain.pk])).json()["server_views"] == []


def test_drawer_json_carries_each_view_with_our_medians(sweep, viewer, client):
    client.force_login(viewer)
    (point,) = client.get(reverse("run-drawer", args=[sweep.spec_run.pk])).json()["server_views"]
    assert point["id"] == sweep.with_view.pk and point["server_metrics"] == VIEW
    assert point["prefix_cache_hit_share"] == pytest.approx(1 / 3)
    assert [(m["name"], m["server"]["median"], m["ours"]) for m in point["medians"]] == [
        ("TTFT", 41.3, 44.0), ("ITL", 52.0, 7.5)]


def test_the_server_s_view_is_escaped(sweep, viewer, client):
    evil = {**VIEW, "counters": {"requests_by_finish_reason": {"<script>x</script>": 1}}}
    Point.objects.filter(pk=sweep.with_view.pk).update(server_metrics=evil)
    client.force_login(viewer)
    section = server_section(drawer_html(client, sweep.spec_run))
    assert "<script>x" not in section and "1 &lt;script&gt;x&lt;/script&gt;" in section


# --- the points table ---------------------------------------------------------------------


def table(client, sweep, **params):
    return client.get(reverse("sweep-points-table", args=[sweep.pk]), params).json()


def test_the_points_table_sets_the_server_s_medians_beside_ours(sweep, viewer, client):
    client.force_login(viewer)
    url = reverse("sweep-points-table-partial", args=[sweep.pk])
    # The server's columns are chosen in the column chooser (the page's default leaves them out).
    html = client.get(url, {"cols": "decode_tok_s,server_decode_tok_s,median_ttft_ms,server_median_ttft_ms,"
                                     "median_itl_ms,server_median_itl_ms"}).content.decode()
    headers = re.findall(r'data-sort="(\w+)"', html)
    assert headers[headers.index("median_ttft_ms") + 1] == "server_median_ttft_ms"
    assert headers[headers.index("median_itl_ms") + 1] == "server_median_itl_ms"
    assert "Server&#x27;s TTFT median (ms)" in html and "Server&#x27;s ITL median (ms)" in html
    row = re.search(rf'<tr class="point-row" data-point-id="{sweep.with_view.pk}".*?</tr>', html, re.S).group(0)
    assert '<td class="num" title="the server\'s histogram puts the median between 40 and 60 ms">41.30</td>' in row
    assert '<td class="num" title="the server\'s histogram puts the median between 50 and 75 ms">52.00</td>' in row
    # An ok point without a view: the server's cells are empty and say why, never 0 or None.
    plain = re.search(rf'<tr class="point-row" data-point-id="{sweep.without_view.pk}".*?</tr>', html, re.S).group(0)
    assert plain.count('title="the server reported none for this point">—</span>') == 3  # decode, TTFT, ITL
    assert "None" not in plain and "histogram" not in plain


def test_the_points_table_json_carries_the_server_s_medians_and_their_buckets(sweep, viewer, client):
    client.force_login(viewer)
    rows = {row["id"]: row for row in table(client, sweep)["rows"]}
    with_view, without = rows[sweep.with_view.pk], rows[sweep.without_view.pk]
    assert (with_view["server_median_ttft_ms"], with_view["server_median_itl_ms"]) == (41.3, 52.0)
    assert with_view["buckets"] == {"server_median_ttft_ms": [40.0, 60.0], "server_median_itl_ms": [50.0, 75.0]}
    assert (without["server_median_ttft_ms"], without["buckets"]) == (None, {})


def test_the_points_table_sorts_by_the_server_s_medians(sweep, viewer, client):
    others = list(sweep.spec_run.points.exclude(pk=sweep.with_view.pk).filter(status="ok"))
    Point.objects.filter(pk=others[0].pk).update(server_median_ttft_ms=90.0, server_median_itl_ms=10.0)
    client.force_login(viewer)
    ordered = [r["id"] for r in table(client, sweep, sort="server_median_ttft_ms")["rows"]]
    assert ordered[:2] == [sweep.with_view.pk, others[0].pk]  # 41.3 then 90; the rest (none) after
    ordered = [r["id"] for r in table(client, sweep, sort="-server_median_itl_ms")["rows"]]
    assert ordered[:2] == [sweep.with_view.pk, others[0].pk]  # 52 then 10, descending
    assert [r["id"] for r in table(client, sweep, sort="-server_median_ttft_ms")["rows"]][:2] == [
        others[0].pk, sweep.with_view.pk]


def test_a_server_median_of_a_point_that_is_not_ok_is_not_shown(sweep, viewer, client):
    Point.objects.filter(pk=sweep.with_view.pk).update(status="failed", reason="requests errored")
    client.force_login(viewer)
    row = next(r for r in table(client, sweep)["rows"] if r["id"] == sweep.with_view.pk)
    assert (row["server_median_ttft_ms"], row["buckets"]) == (None, {})


# --- the API and the exports --------------------------------------------------------------


def test_the_api_point_carries_the_server_s_view_and_medians(sweep, viewer, client):
    client.force_login(viewer)
    auth = {}
    point = client.get(f"/api/points/{sweep.with_view.pk}", **auth).json()
    assert point["server_metrics"] == VIEW
    assert (point["metrics"]["server_median_ttft_ms"], point["metrics"]["server_median_itl_ms"]) == (41.3, 52.0)
    plain = client.get(f"/api/points/{sweep.without_view.pk}", **auth).json()
    assert plain["server_metrics"] == {} and plain["metrics"]["server_median_ttft_ms"] is None
    listed = {p["id"]: p for p in client.get(f"/api/points?sweep={sweep.pk}", **auth).json()["items"]}
    assert listed[sweep.with_view.pk]["server_metrics"] == VIEW


def test_the_exports_carry_the_server_s_medians_and_view(sweep, viewer, client):
    client.force_login(viewer)
    response = client.get(reverse("sweep-points-csv", args=[sweep.pk]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    by_id = {int(r["point_id"]): r for r in rows}
    with_view, without = by_id[sweep.with_view.pk], by_id[sweep.without_view.pk]
    assert (with_view["server_median_ttft_ms"], with_view["server_median_itl_ms"]) == ("41.3", "52.0")
    assert json.loads(with_view["server_metrics"]) == VIEW
    assert (without["server_median_ttft_ms"], without["server_median_itl_ms"], without["server_metrics"]) == ("", "", "")
    points = {p["point_id"]: p for p in client.get(reverse("sweep-points-json", args=[sweep.pk])).json()["points"]}
    assert points[sweep.with_view.pk]["server_metrics"] == VIEW and points[sweep.without_view.pk]["server_metrics"] == {}
    assert points[sweep.with_view.pk]["server_median_itl_ms"] == 52.0


# --- how the numbers are written ----------------------------------------------------------


def test_a_bucket_says_where_the_histogram_puts_the_median():
    assert bucket([40.0, 60.0]) == "between 40 and 60 ms"
    assert bucket([0.0, 2.5]) == "between 0 and 2.5 ms"
    assert bucket([0.1 * 1000, 0.25 * 1000]) == "between 100 and 250 ms"  # no float noise
    assert bucket([2560000.0, None]) == "above 2560000 ms"
    assert bucket(None) == "" and bucket([]) == ""


def test_a_share_is_written_as_a_percentage():
    assert [percent(v) for v in (0.123, 1.0, 0.929, 0.045, 0.0, None)] == ["12 %", "100 %", "93 %", "4.5 %", "0 %", ""]
