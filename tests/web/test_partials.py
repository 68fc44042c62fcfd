"""The sweep page's partials, which htmx swaps in: the live rows and progress, the points
table and the run drawer. Each is the template the page itself includes, needs the page's
role, escapes what it shows, and stops polling when the sweep is finished."""

import html as html_lib
import json
import re
from datetime import timedelta

import pytest
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import FailureKind, SweepStatus
from runs.models import Point, PointStatus, Run, RunEvent, RunEventKind, RunStatus, TelemetrySample
from runs.results.points_table import DEFAULT_COLUMNS, METRIC_COLUMNS
from runs.templatetags.sweeplab_format import num
from tests.web.sweeps import add_run, make_sweep

EVIL = "<script>alert('x')</script> & \"quoted\""


@pytest.fixture
def sweep(catalog):
    """Three runs of three points each; the second crashed, the third overflowed once."""
    sweep = make_sweep()
    sweep.status = SweepStatus.RUNNING
    sweep.save()
    add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0)
    crashed = add_run(sweep, 1, "ddtree", {"budget": 8, "topk_cap": 8}, 4, speed=0,
                      statuses={0: "crashed", 1: "not_run", 2: "not_run"})
    add_run(sweep, 2, "ddtree", {"budget": 15, "topk_cap": 8}, 4, speed=160.0, accept_length=4.25,
            statuses={1: "context_overflow"})
    Run.objects.filter(pk=crashed.pk).update(status=RunStatus.CRASHED, failure_kind=FailureKind.CUDA_ILLEGAL_INSTRUCTION,
                                             failure_cause="CUDA error: an illegal instruction was encountered")
    return sweep


def live(client, sweep, **params):
    response = client.get(reverse("sweep-live-partial", args=[sweep.pk]), params)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    return response


def run_rows(html):
    """Each run's <tbody> as sent, without the out-of-band marker the live partial adds."""
    rows = re.findall(r'<tbody class="run" id="run-(\d+)".*?</tbody>', html, re.S)
    bodies = re.findall(r'(<tbody class="run" id="run-\d+".*?</tbody>)', html, re.S)
    return {int(pk): body.replace(' hx-swap-oob="true"', "") for pk, body in zip(rows, bodies)}


# --- the live rows and progress ----------------------------------------------------------


def test_the_live_partial_sends_the_same_run_rows_the_page_shows(sweep, viewer, client):
    client.force_login(viewer)
    page = run_rows(client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode())
    sent = live(client, sweep).content.decode()
    assert run_rows(sent) == page and len(page) == 3
    # Out of band, by id, inside a <template> (a <tbody> cannot stand alone in a fragment).
    template = sent[sent.index("<template>"):sent.index("</template>")]
    assert run_rows(template) == page and sent.count(' hx-swap-oob="true"') == 3 + 8  # rows, status, actions, bar, waiting, legend, verdicts, status chart, gantt
    crashed = Run.objects.get(sweep=sweep, position=1)
    row = page[crashed.pk]
    assert '<span class="badge r-crashed" data-field="status">Crashed</span>' in row
    assert '<span class="badge r-crashed failure-kind" data-field="failure-kind">CUDA illegal instruction</span>' in row
    assert '<span class="badge p-crashed" title="crashed">1</span><span class="badge p-not_run" title="not_run">2</span>' in row
    # The selection checkbox survives the live swaps (hx-preserve needs its id).
    assert f'id="run-{crashed.pk}-select" hx-preserve name="runs" value="{crashed.pk}"' in row


def test_the_live_partial_follows_the_runs_and_the_progress(sweep, viewer, client):
    client.force_login(viewer)
    first = Run.objects.get(sweep=sweep, position=0)
    Run.objects.filter(pk=first.pk).update(status=RunStatus.RUNNING)
    Point.objects.filter(run=first).update(status=PointStatus.PLANNED)
    html = live(client, sweep).content.decode()
    row = run_rows(html)[first.pk]
    assert '<span class="badge r-running" data-field="status">Running</span>' in row
    assert '<span class="badge p-planned" title="planned">3</span>' in row
    # 9 points, none skipped: 6 finished; the sentence keeps its element (innerHTML) for screen readers.
    assert ('id="sweep-progress-text" data-field="progress-text" aria-live="polite" hx-swap-oob="innerHTML">'
            "6 of 9 points to measure are finished (67%).</p>") in html
    assert 'aria-valuenow="67"' in html and 'style="width: 67%"' in html
    assert '<span class="badge p-planned">Planned: 3</span>' in html
    assert '<span class="badge s-running" id="sweep-status" data-field="sweep-status" hx-swap-oob="true">Running</span>' in html


def test_polling_stops_when_the_sweep_is_finished(sweep, viewer, client):
    client.force_login(viewer)
    url = reverse("sweep-live-partial", args=[sweep.pk])
    poller = f'<span id="sweep-poll" hidden hx-get="{url}" hx-trigger="every 2s" hx-swap="outerHTML"'
    assert poller in live(client, sweep).content.decode()
    assert poller in client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    for status in (SweepStatus.DONE, SweepStatus.CANCELLED):
        sweep.status = status
        sweep.save()
        html = live(client, sweep).content.decode()
        # The last answer still brings the final state, and a poller that polls no more.
        assert '<span id="sweep-poll" hidden></span>' in html and "hx-trigger" not in html
        assert f'<span class="badge s-{status}" id="sweep-status"' in html
        assert 'data-field="cancel-form"' not in html
        assert "every 2s" not in client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()


def test_the_points_table_reloads_only_when_points_changed(sweep, viewer, client):
    client.force_login(viewer)
    key = re.search(r'hx-vals=\'\{"seen": "(\w+)"\}\'', live(client, sweep).content.decode()).group(1)
    assert "HX-Trigger" not in live(client, sweep, seen=key)
    assert "HX-Trigger" not in live(client, sweep)  # nothing seen yet: nothing to compare
    point = Point.objects.filter(run__sweep=sweep, status=PointStatus.OK).first()
    Point.objects.filter(pk=point.pk).update(status=PointStatus.FAILED)
    response = live(client, sweep, seen=key)
    assert response["HX-Trigger"] == "points-changed"
    assert key not in response.content.decode()
    # The table listens for it, and asks again for the page it shows.
    html = points(client, sweep, per_page="4", page="2").content.decode()
    assert 'hx-trigger="points-changed from:body" hx-include="#points-form" hx-vals=\'{"page": "2"}\'' in html


def test_the_live_partial_uses_a_constant_number_of_queries(sweep, viewer, client, django_assert_num_queries):
    client.force_login(viewer)
    live(client, sweep)  # warm the session
    # Session, user, the sweep, its runs, point counts per run and status, its GPU leases,
    # two for permissions.
    with django_assert_num_queries(8):
        live(client, sweep)
    for position in range(3, 30):
        add_run(sweep, position, "ddtree", {"budget": 100 + position, "topk_cap": 8}, 4)
    with django_assert_num_queries(8):
        assert len(run_rows(live(client, sweep).content.decode())) == 30


def test_the_live_partial_escapes_what_runs_say(sweep, viewer, client):
    run = Run.objects.get(sweep=sweep, position=1)
    Run.objects.filter(pk=run.pk).update(failure_cause=EVIL)
    client.force_login(viewer)
    for html in (live(client, sweep).content.decode(),
                 client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()):
        assert "<script>alert" not in html
        # Shown (truncated by the page's CSS) and whole on hover, escaped both times.
        said = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;"
        assert f'<span data-field="reason" title="{said}">{said}</span>' in html


# --- the points table ---------------------------------------------------------------------


def points(client, sweep, **params):
    return client.get(reverse("sweep-points-table-partial", args=[sweep.pk]), params)


def point_rows(html):
    return re.findall(r'<tr class="point-row[^"]*" data-point-id="(\d+)" data-run-id="\d+" data-status="(\w+)"', html)


def test_the_points_partial_shows_the_rows_of_points_table_json(sweep, viewer, client):
    client.force_login(viewer)
    for params in ({}, {"sort": "-decode_tok_s"}, {"status": "not_run"}, {"per_page": "4", "page": "2"},
                   {"q": "budget=15", "sort": "accept_length"}):
        html = points(client, sweep, **params).content.decode()
        data = client.get(reverse("sweep-points-table", args=[sweep.pk]), params).json()
        assert point_rows(html) == [(str(r["id"]), r["status"]) for r in data["rows"]], params
        assert f'<input type="hidden" name="sort" value="{data["sort"]}">' in html
        assert f'<span data-field="points-page">Page {data["page"]} of {data["pages"]}</span>' in html


def test_the_points_partial_writes_values_reasons_and_the_missing_ones(sweep, viewer, client):
    client.force_login(viewer)
    html = points(client, sweep, sort="-decode_tok_s",
                  cols=DEFAULT_COLUMNS + ("server_decode_tok_s", "median_tpot_ms")).content.decode()
    rows = re.findall(r'<tr class="point-row".*?</tr>', html, re.S)
    fastest = rows[0]
    assert "#3 </span>ddtree budget=15 topk_cap=8 TP4" in fastest
    assert '<td class="num">160</td>' in fastest and '<td class="num">4.25</td>' in fastest
    assert '<td class="num">6.25</td>' in fastest  # 1000 / 160 ms
    # Not ok: the status and its reason, and a dash (never a 0) in every measured column.
    crashed = next(row for row in rows if 'data-status="crashed"' in row)
    # The reason on one line (the page's CSS cuts it), whole on hover.
    assert ('<span class="badge p-crashed" title="crashed">Crashed (server died during it)</span>'
            '<span class="reason" data-field="reason" title="crashed reason ddtree TP4 #0">crashed reason ddtree TP4 #0</span>'
            ) in crashed
    assert crashed.count('<span class="muted" title="Crashed (server died during it)">—</span>') == len(DEFAULT_COLUMNS) + 2
    assert '<td class="num">its own</td>' in fastest  # fibonacci: a fixed prompt has no target length
    assert 'title="not measured for this point">—</span>' in fastest  # ok, but no median TTFT
    assert 'title="the server reported none for this point">—</span>' in fastest  # ok, but no server count


def test_the_points_partial_shows_the_chosen_columns_and_its_chooser_ticks_them(sweep, viewer, client):
    client.force_login(viewer)
    html = points(client, sweep).content.decode()
    head = re.findall(r'data-sort="(\w+)"', html)
    assert [name for name in head if name in METRIC_COLUMNS] == list(DEFAULT_COLUMNS)
    ticked = re.findall(r'<input type="checkbox" name="cols" value="(\w+)" checked>', html)
    assert ticked == list(DEFAULT_COLUMNS)
    html = points(client, sweep, cols=["p99_itl_ms", "duration"]).content.decode()
    head = re.findall(r'data-sort="(\w+)"', html)
    assert [name for name in head if name in METRIC_COLUMNS] == ["p99_itl_ms", "duration"]
    rows = re.findall(r'<tr class="point-row".*?</tr>', html, re.S)
    assert all(row.count('<td class="num"') == 2 + 1 + 2 for row in rows)  # prompt, concurrency; n; the two
    assert re.findall(r'<input type="checkbox" name="cols" value="(\w+)" checked>', html) == ["p99_itl_ms", "duration"]
    # None ticked: the leading columns only, and a bad column is a 400 that says which.
    html = points(client, sweep, cols="").content.decode()
    assert not [name for name in re.findall(r'data-sort="(\w+)"', html) if name in METRIC_COLUMNS]
    response = points(client, sweep, cols="reason")
    assert response.status_code == 400 and "unknown column &#x27;reason&#x27;" in response.content.decode()


def test_the_points_headers_ask_for_the_next_sort(sweep, viewer, client):
    client.force_login(viewer)

    def header(html, column):
        return re.search(rf'<th[^>]*aria-sort="(\w+)"><button type="button" class="sort" name="sort" '
                         rf'value="(-?\w+)" data-sort="{column}"', html).groups()

    html = points(client, sweep).content.decode()
    assert header(html, "run") == ("ascending", "-run")
    assert header(html, "decode_tok_s") == ("none", "-decode_tok_s")  # speeds start with the fastest
    assert header(html, "median_ttft_ms") == ("none", "median_ttft_ms")  # latencies with the lowest
    html = points(client, sweep, sort="-decode_tok_s").content.decode()
    assert header(html, "decode_tok_s") == ("descending", "decode_tok_s")
    assert '<span class="sort-arrow" aria-hidden="true"> ▼</span>' in html
    # Filters keep their values; the pager asks for its neighbours.
    html = points(client, sweep, status="ok", tp="4", per_page="50").content.decode()
    assert '<option value="ok" selected>OK</option>' in html and '<option value="4" selected>TP4</option>' in html
    assert '<option value="50" selected>50</option>' in html
    html = points(client, sweep, per_page="4", page="2").content.decode()
    assert 'hx-vals=\'{"page": "1"}\'>‹ Previous</button>' in html and 'hx-vals=\'{"page": "3"}\'>Next ›</button>' in html
    assert "Points 5–8 of 9." in html


def test_a_bad_points_parameter_is_a_400_shown_in_place_and_escaped(sweep, viewer, client):
    client.force_login(viewer)
    response = points(client, sweep, status="<b>nope</b>")
    assert response.status_code == 400
    assert response["HX-Retarget"] == "#points-state" and response["HX-Reswap"] == "innerHTML"
    assert response.content.decode().startswith("The points could not be loaded: unknown status &#x27;&lt;b&gt;nope")


def test_the_points_partial_escapes_reasons(sweep, viewer, client):
    Point.objects.filter(run__sweep=sweep, status="not_run").update(reason=EVIL)
    client.force_login(viewer)
    html = points(client, sweep, status="not_run").content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)" in html


def test_num_writes_numbers_as_the_charts_tooltips_do():
    # JavaScript's toFixed: half away from zero on the float's exact value.
    assert [num(v) for v in (None, 0.0, -0.0, 1.005, 0.125, -0.125, 2.675, 99.994, 99.995, 100.0, 100.5, 1234.5678)] == [
        "", "0.00", "0.00", "1.00", "0.13", "-0.13", "2.67", "99.99", "100.00", "100", "101", "1235"]
    assert Template("{% load sweeplab_format %}{{ v|num }}").render(Context({"v": 4.25})) == "4.25"


# --- the run drawer -----------------------------------------------------------------------


def drawer(client, run):
    response = client.get(reverse("run-drawer-partial", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_drawer_partial_shows_what_drawer_json_says(sweep, viewer, client, tmp_path):
    run = Run.objects.get(sweep=sweep, position=1)
    log = tmp_path / "server.log"
    lines = [f"line {i}: {EVIL}" for i in range(300)]
    log.write_text("\n".join(lines) + "\n")
    run.argv = ["python", "-m", "sglang.launch_server", "--speculative-ddtree-budget", "8"]
    run.engine_version, run.context_length, run.log_path = "sglang 0.5.4", 32768, str(log)
    run.failure_log = "Traceback (most recent call last):\nRuntimeError: CUDA error"
    run.save()
    now = timezone.now()
    RunEvent.objects.create(run=run, at=now, kind=RunEventKind.LAUNCHED, message="pid 4242")
    RunEvent.objects.create(run=run, at=now + timedelta(seconds=40), kind=RunEventKind.READY, message="<b>ready</b>")
    client.force_login(viewer)
    html = drawer(client, run)
    data = client.get(reverse("run-drawer", args=[run.pk])).json()
    assert f'<h2 id="run-drawer-title" data-field="drawer-title" hx-swap-oob="true">Run: {run.config_label}</h2>' in html
    assert f'<pre class="argv" data-field="drawer-argv">{data["command"]}</pre>' in html
    assert '<dd data-field="drawer-version">sglang 0.5.4</dd>' in html and "32768 tokens" in html
    assert '<dd data-field="drawer-kv">—</dd>' in html
    assert "CUDA illegal instruction</span> <span data-field=\"drawer-failure-cause\">CUDA error: an illegal" in html
    assert "Traceback (most recent call last):&#10;RuntimeError: CUDA error</pre>" in html
    events = re.findall(r'<li class="ev-(\w+)"><time datetime="([^"]+)">', html)
    assert events == [(e["kind"], e["at"]) for e in data["events"]] == [("launched", now.isoformat()),
                                                                        ("ready", (now + timedelta(seconds=40)).isoformat())]
    assert ": &lt;b&gt;ready&lt;/b&gt;</li>" in html
    # The log's last 200 lines, escaped, and a note that says so.
    assert "(last 200 lines)" in html and "<script>alert" not in html
    tail = re.search(r'<pre class="log-tail" data-field="drawer-log">(.*?)</pre>', html, re.S).group(1)
    assert tail.split("&#10;")[0].startswith("line 100: &lt;script&gt;") and tail.count("&#10;") == 199
    assert 'id="drawer-telemetry-data"' not in html and "No GPU telemetry for this run" in html


def test_the_drawer_partial_polls_while_the_sweep_runs_and_carries_its_telemetry(sweep, viewer, client):
    run = Run.objects.get(sweep=sweep, position=0)
    start = timezone.now()
    TelemetrySample.objects.bulk_create(
        TelemetrySample(run=run, gpu_index=0, at=start + timedelta(seconds=i), memory_used_mib=1000.0 + i,
                        memory_total_mib=97887.0, power_w=200.0, utilization_pct=90.0)
        for i in range(3)
    )
    client.force_login(viewer)
    url = reverse("run-drawer-partial", args=[run.pk])
    html = drawer(client, run)
    assert f'hx-get="{url}" hx-trigger="every 2s" hx-target="#run-drawer-body"' in html
    assert '<script id="drawer-telemetry-data" type="application/json">' in html
    assert '"memory_used_mib": [1000.0, 1001.0, 1002.0]' in html and "thinned" not in html
    assert "(no server log: the server was never launched)" in html
    sweep.status = SweepStatus.DONE
    sweep.save()
    assert "hx-trigger" not in drawer(client, run)


# --- who may ask ------------------------------------------------------------------------


def test_the_partials_need_a_role(sweep, client, make_user):
    run = Run.objects.get(sweep=sweep, position=0)
    urls = [reverse("sweep-live-partial", args=[sweep.pk]), reverse("sweep-points-table-partial", args=[sweep.pk]),
            reverse("run-drawer-partial", args=[run.pk])]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next="), url
    client.force_login(make_user("nobody"))
    for url in urls:
        assert client.get(url).status_code == 403, url
    client.force_login(make_user("vera", "viewer"))
    for url in urls:
        assert client.get(url).status_code == 200, url
    assert client.get(reverse("sweep-live-partial", args=[sweep.pk + 100])).status_code == 404
    assert client.get(reverse("run-drawer-partial", args=[run.pk + 100])).status_code == 404


def status_chart_sent(html):
    found = re.search(r'<div id="status-chart-data" hidden data-field="status-chart-data" data-chart="([^"]*)"', html)
    return json.loads(html_lib.unescape(found.group(1)))


def test_the_live_partial_sends_the_status_chart_again_as_points_land(sweep, viewer, client):
    client.force_login(viewer)
    page = status_chart_sent(client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode())
    sent = status_chart_sent(live(client, sweep).content.decode())
    assert sent == page and len(sent["labels"]) == 3
    before = {d["status"]: d["data"] for d in sent["datasets"]}
    # A point of the first run lands as crashed: the chart the partial sends moves with it.
    point = Point.objects.filter(run__sweep=sweep, run__position=0, status=PointStatus.OK).order_by("position").first()
    Point.objects.filter(pk=point.pk).update(status=PointStatus.CRASHED, reason="died")
    after = {d["status"]: d["data"] for d in status_chart_sent(live(client, sweep).content.decode())["datasets"]}
    assert after["ok"][0] == before["ok"][0] - 1
    assert after["crashed"][0] == before.get("crashed", [0, 0, 0])[0] + 1
