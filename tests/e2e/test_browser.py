"""The product in a real browser: Debian's Chromium driven by Playwright, against the
live server, a real Celery worker and real simengine servers. Saves full-page
screenshots under var/screenshots/ (`make screenshots`). The real llama.cpp sweep in the
browser is tests/e2e/test_llamacpp_sweep.py's, the example at full size
tests/e2e/test_browser_full_size.py's."""

import pytest

from benchmarks.models import Engine, Sweep
from runs.models import Point, PointStatus, Run
from runs.results.charts import sweep_charts
from runs.results.compare import VERDICT_COLOURS
from runs.results.gantt import sweep_gantt
from runs.results.load_charts import load_charts
from runs.templatetags.sweeplab_format import num
from tests.e2e.browser import browser, doc_shot, log_in, shot, wait_until  # noqa: F401 (browser: a fixture)
from tests.e2e.processes import celery_worker, simengine_pids, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def operator(catalog, roles, make_user):
    """olga, an operator, and the simulated engine at 0.1 x real time (the demo's scale: its
    chunks far enough apart for the client to time them)."""
    engine = Engine.objects.get(name="sglang-sim")
    engine.argv_template = engine.argv_template + ["--time-scale", "0.1"]
    engine.readiness_timeout_s = 60
    engine.save()
    return make_user("olga", "operator")


# What a chart drew, by its id: each dataset's label, kind and data, a marker's lane row and
# bar slot (the page's layout) left out; ``served`` is the same of the server's chart.
DRAWN = """id => window.sweeplabCharts[id].data.datasets.map(d => ({label: d.label, kind: d.kind,
           data: d.kind === 'marker' ? d.data.map(({slot, y, ...item}) => item) : d.data}))"""


def served(chart):
    return [{"label": d["label"], "kind": d["kind"],
             "data": [{k: v for k, v in item.items() if k != "y"} for item in d["data"]] if d["kind"] == "marker"
             else d["data"]} for d in chart["datasets"]]


@pytest.mark.backends
def test_build_launch_watch_and_chart_a_sweep_in_the_browser(browser, operator, live_server, tmp_path):
    before = simengine_pids()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # What the Content-Security-Policy refused (an inline script or handler, an eval): nothing.
    page.on("console", lambda message: errors.append(message.text) if "Content Security Policy" in message.text
            else None)
    log_in(page, live_server, "olga", "pw-olga-12345")

    # Build the sweep in the form, starting from the example it opens with.
    page.click("text=New sweep")
    page.wait_for_selector("#plan-preview h2:has-text('23 runs, 161 points')")
    page.fill("#f-name", "browser-smoke")
    page.uncheck("#f-tp-4")
    page.uncheck("#f-tp-8")
    page.fill("#f-method-2-budget", "8, x")
    # A wrong value is explained next to its field, in words.
    page.wait_for_selector("[data-path='methods[2].ddtree.budget'] .field-error:has-text('expected a list of positive integers')")
    page.fill("#f-method-2-budget", "8, 15")
    page.click(".method-row[data-path='methods[1]'] button:has-text('Remove')")  # dflash
    page.fill("#f-workload-1-prompt_tokens", "1000, 2000")
    page.fill("#f-max_new_tokens", "64")
    page.fill("#f-requests_per_point", "2")
    page.click("[data-path='exclude[0]'] button:has-text('Remove')")
    page.wait_for_selector("#plan-preview h2:has-text('3 runs, 9 points')")
    shot(page, "builder")
    doc_shot(page, "builder")
    # The YAML view shows the same spec.
    page.click("#tab-yaml")
    wait_until(page, "document.getElementById('id_spec_yaml').value.includes('budget: [8, 15]')")
    assert "max_new_tokens: 64" in page.input_value("#id_spec_yaml")
    shot(page, "builder-yaml")
    page.click("#tab-form")
    page.wait_for_selector("#f-name")

    with celery_worker(["host.sim-8x-rtxpro6000"], tmp_path / "worker.log"):
        page.click("button[value=launch]")
        page.wait_for_url("**/sweeps/*/")
        sweep = Sweep.objects.get(name="browser-smoke")
        url = page.url
        # A run ticked for charting stays ticked while the live partial replaces the rows.
        page.check("tbody[data-run-id] input[name=runs] >> nth=0")
        # Progress reaches done without a reload: the live badge changes in place.
        page.wait_for_selector("[data-field=sweep-status]:has-text('Done')", timeout=180_000)
        assert page.url == url
        # So do the progress, the run rows and (told by the live partial) the points table.
        page.wait_for_selector("[data-field=progress-text]:has-text('(100%)')")
        assert page.is_checked("tbody[data-run-id] input[name=runs] >> nth=0")
        wait_until(page,
            "[...document.querySelectorAll('#points-table tr.point-row')].length === 9 && "
            "[...document.querySelectorAll('#points-table tr.point-row')].every(r => r.dataset.status !== 'planned')")
        shown = page.eval_on_selector_all("tbody[data-run-id] [data-field=status]", "els => els.map(e => e.textContent)")
        assert shown == [run.get_status_display() for run in Run.objects.filter(sweep=sweep).order_by("position")]
    sweep.refresh_from_db()
    assert sweep.status == "done"

    # Cloned into the builder, the same sweep now has a duration estimate from its history.
    page.goto(f"{live_server.url}/sweeps/new/?clone={sweep.pk}")
    page.wait_for_selector("[data-field=estimate]:has-text('Estimated duration: about')")
    assert "extrapolated" not in page.inner_text("[data-field=estimate]")

    page.goto(url)
    # The comparison and the load section (the Pareto view) are fetched and drawn apart.
    page.wait_for_selector("#comparison-charts[data-ready=true]")
    page.wait_for_selector("#load-charts[data-ready=true]")
    charts = page.evaluate(
        """() => Object.fromEntries(Object.entries(window.sweeplabCharts).map(
               ([name, chart]) => [name, chart.data.datasets.map(d => d.label)]))"""
    )
    # Every Chart.js instance on the page is one of these, and each drew the datasets the
    # server sent it: the status chart its statuses, each comparison chart its configurations
    # and markers (none left empty, none missing).
    assert page.evaluate(
        """() => Object.values(Chart.instances).every(c => Object.values(window.sweeplabCharts).includes(c))"""
    )
    assert page.evaluate("Object.keys(Chart.instances).length") == len(charts)
    # The load section: a closed-loop sweep has no load curves, but a Pareto view per workload.
    sent = sweep_charts(sweep.pk)["charts"] + load_charts(sweep.pk)["charts"]
    expected = {chart["id"]: [d["label"] for d in chart["datasets"]] for chart in sent if chart["datasets"]}
    # A Pareto panel whose points were all judged invalid (this host busy with other tests)
    # has nothing to draw: it says so in place of a chart.
    empty = sorted(chart["id"] for chart in sent if not chart["datasets"])
    assert page.evaluate("() => [...document.querySelectorAll('.chart-empty')].map(p => p.dataset.chart).sort()") == empty
    assert all(name.startswith("pareto:") for name in empty)
    statuses = set(Point.objects.filter(run__sweep=sweep).values_list("status", flat=True))
    expected["status"] = [label for value, label in PointStatus.choices if value in statuses]
    # The GPUs each run held (the sweep ran exclusive: each run leased the whole host).
    held = {}
    for row in sweep_gantt(sweep)["rows"]:
        for bar in row["bars"]:
            held.setdefault(bar["run"], f"run {bar['run']}: {bar['config']}")
    expected["gantt"] = list(held.values())
    assert set(charts) == set(expected) and len(expected) > 4
    for name, labels in charts.items():
        assert labels and labels == expected[name], name
    assert "ddtree budget=15 topk_cap=8 TP1" in charts["decode_tok_s"]
    assert "autoregressive TP1" in charts["decode_tok_s"]
    # The budget-8 crash is a marker with its reason, not a zero bar.
    assert any(label.startswith("Crashed") or label.startswith("Not run") for label in charts["decode_tok_s"])
    reasons = page.evaluate(
        """() => window.sweeplabCharts.decode_tok_s.data.datasets
               .filter(d => d.kind === 'marker').flatMap(d => d.data.map(p => p.reason))"""
    )
    assert any("illegal instruction" in r for r in reasons)
    # The other chart families are listed, not drawn, until opened; opening one fetches it
    # (?family=) and draws exactly the datasets the server builds for it.
    listed = sweep_charts(sweep.pk)["families"]
    assert page.evaluate(
        "() => [...document.querySelectorAll('#comparison-charts details.chart-family')].map(d => d.dataset.family)"
    ) == [family["id"] for family in listed] == ["prompt_length", "latency"]
    page.click("details.chart-family[data-family=latency] > summary")
    page.wait_for_selector("details.chart-family[data-family=latency][data-ready=true]")
    latency = sweep_charts(sweep.pk, family="latency")["charts"]
    assert [c["id"] for c in latency] == [c["id"] for c in listed[1]["charts"]] and len(latency) == 3
    drawn = page.evaluate(f"ids => ids.map({DRAWN})", [c["id"] for c in latency])
    for chart, datasets in zip(latency, drawn):
        assert datasets == served(chart)
    # The budget-8 crash is a marker there too, with its reason; no value of it is drawn.
    assert any("illegal instruction" in m["reason"] for ds in drawn for d in ds if d["kind"] == "marker"
               for m in d["data"])
    assert page.evaluate("Object.keys(Chart.instances).length") == len(charts) + len(latency)
    # A family of more charts than the page draws at once lists them, each fetched (?chart=)
    # and drawn when opened.
    import runs.results.charts

    at_once, runs.results.charts.FAMILY_AT_ONCE = runs.results.charts.FAMILY_AT_ONCE, 2  # the live server is this process
    try:
        page.reload()
        page.wait_for_selector("#comparison-charts[data-ready=true]")
    finally:
        runs.results.charts.FAMILY_AT_ONCE = at_once
    one = latency[1]
    page.click("details.chart-family[data-family=latency] > summary")
    assert page.evaluate(
        "() => [...document.querySelectorAll('details.chart-family[data-family=latency] details.chart-one')]"
        ".map(d => [d.dataset.chart, d.querySelector('summary').textContent])"
    ) == [[c["id"], c["title"]] for c in latency]
    assert one["id"] not in page.evaluate("Object.keys(window.sweeplabCharts)")
    page.click(f"details.chart-one[data-chart='{one['id']}'] > summary")
    page.wait_for_selector(f"details.chart-one[data-chart='{one['id']}'][data-ready=true]")
    assert page.evaluate(DRAWN, one["id"]) == served(one)
    assert page.evaluate("Object.keys(Chart.instances).length") == len(charts) + 1
    # The points table: 9 points, sorted by decode speed (missing values last), filtered.
    wait_until(page, "document.querySelectorAll('#points-table tr.point-row').length === 9")
    page.click("#points-table button[data-sort=decode_tok_s]")  # a speed: the fastest first
    page.wait_for_selector("#points-table th[aria-sort=descending] button[data-sort=decode_tok_s]")
    wait_until(page, "document.querySelector('#points-table tr.point-row').dataset.status === 'ok'")
    page.click("#points-table button[data-sort=decode_tok_s]")  # the other way; missing values still last
    page.wait_for_selector("#points-table th[aria-sort=ascending] button[data-sort=decode_tok_s]")
    wait_until(page, "document.querySelector('#points-table tr.point-row').dataset.status === 'ok'")
    # The table's numbers (the server's num filter) read as the charts' tooltips (util.js) write them.
    values = [0.125, 1.005, 2.675, 6.25, 99.995, 100.5, 1234.5678, -0.125]
    assert page.evaluate("values => values.map(v => sweeplab.fmt(v))", values) == [num(v) for v in values]
    page.select_option("#points-table select[name=status]", "ok")
    wait_until(page,
        "[...document.querySelectorAll('#points-table tr.point-row')].every(r => r.dataset.status === 'ok')")
    page.select_option("#points-table select[name=status]", "")
    wait_until(page, "document.querySelectorAll('#points-table tr.point-row').length === 9")
    shot(page, "sweep-detail")
    # A click on the row (its configuration; the middle of a compact row is its "points" button) opens the drawer.
    page.click("tbody[data-run-id] tr.run-row >> nth=1 >> td >> nth=2")
    page.wait_for_selector("#run-drawer :text('Command launched')")
    shot(page, "run-drawer")
    doc_shot(page.locator("#run-drawer"), "run-drawer")
    page.keyboard.press("Escape")
    page.wait_for_selector("#run-drawer", state="hidden")
    assert page.inner_text("#run-drawer-body") == "" and not page.query_selector("tbody.run.selected")

    # Compare two configurations point by point, and follow one series over time.
    ar, dd15 = (Run.objects.get(sweep=sweep, method=m, params_key=k) for m, k in (
        ("autoregressive", "{}"), ("ddtree", '{"budget":15,"topk_cap":8}')))
    dd8 = Run.objects.get(sweep=sweep, method="ddtree", params_key='{"budget":8,"topk_cap":8}')
    page.goto(f"{live_server.url}/compare/?run={ar.pk}&run={dd15.pk}&run={dd8.pk}")
    wait_until(page, "window.sweeplabCharts && window.sweeplabCharts.compare")
    compare = page.evaluate(
        """() => { const c = window.sweeplabCharts.compare;
                   return {title: c.options.plugins.title.text, x: c.options.scales.x.title.text,
                           y: c.options.scales.y.title.text,
                           datasets: c.data.datasets.map(d => ({label: d.label, kind: d.kind, data: d.data,
                                                                barColors: d.barColors || null}))}; }"""
    )
    assert compare["title"].startswith("decode speed (tok/s) of matched points")
    assert compare["x"] == "decode speed (tok/s), higher is better" and compare["y"] == "matched point"
    values = {d["label"]: d for d in compare["datasets"] if d["kind"] == "value"}
    assert list(values) == [f"#{sweep.pk}/{run.pk} {run.config_label}" for run in (ar, dd15, dd8)]
    # Each of DDTree budget 15's bars is coloured by its verdict against autoregressive (the
    # API's, from the same Mann-Whitney test); budget 8 crashed: no bars, markers with the
    # crash's reason instead.
    verdicts = page.evaluate(
        "url => fetch(url).then(r => r.json())", f"/api/compare?run={ar.pk}&run={dd15.pk}&metric=decode_tok_s")
    expected = [VERDICT_COLOURS[row["verdict"]] for row in verdicts["rows"]]  # one group after the baseline
    assert len(expected) == 3
    assert values[f"#{sweep.pk}/{dd15.pk} {dd15.config_label}"]["barColors"] == expected
    assert [item["x"] for item in values[f"#{sweep.pk}/{dd8.pk} {dd8.config_label}"]["data"]] == [None, None, None]
    # Budget 8's markers; a point the verdicts call invalid (a noisy machine: the client's
    # event loop lagged, the hypervisor stole CPU) is a marker too, and is not what this checks.
    marker_sets = [d for d in compare["datasets"] if d["kind"] == "marker" and d["label"] != "Invalid"]
    assert {d["label"] for d in marker_sets} <= {"Crashed (server died during it)", "Not run"}
    assert sum(len(d["data"]) for d in marker_sets) == 3
    assert any("illegal instruction" in m["reason"] for d in marker_sets for m in d["data"])
    # A marker can be hovered, and its tooltip says what happened.
    page.evaluate("window.scrollTo(0, 0)")
    x, y = page.evaluate(
        """() => { const c = window.sweeplabCharts.compare;
                   const i = c.data.datasets.findIndex(d => d.kind === 'marker');
                   const p = c.getDatasetMeta(i).data[0], r = c.canvas.getBoundingClientRect();
                   return [r.left + p.x, r.top + p.y]; }"""
    )
    page.mouse.move(x, y)
    wait_until(page,
        """group => (window.sweeplabCharts.compare.tooltip.body || [])
                      .some(b => b.lines[0].startsWith(group + ': ') && b.lines[1].includes('illegal instruction'))""",
        arg=f"#{sweep.pk}/{dd8.pk} {dd8.config_label}",
    )
    shot(page, "compare")
    doc_shot(page, "compare")
    # The same two runs as comparison charts of a selection (any runs, across sweeps).
    page.goto(f"{live_server.url}/charts/?runs={ar.pk},{dd15.pk}")
    wait_until(page, "window.sweeplabCharts && window.sweeplabCharts.decode_tok_s")
    labels = page.evaluate("window.sweeplabCharts.decode_tok_s.data.datasets.map(d => d.label)")
    assert "autoregressive TP1" in labels and "ddtree budget=15 topk_cap=8 TP1" in labels
    shot(page, "charts")
    from urllib.parse import urlencode

    series = {
        "model": "Qwen/Qwen3.6-27B", "engine": "sglang-sim", "config": "ddtree:" + dd15.params_key, "tp": 1,
        "workload": "long-context", "prompt_tokens": 2000, "concurrency": 1, "gpu": sweep.host.gpu_model,
    }
    page.goto(f"{live_server.url}/history/?{urlencode(series)}")
    wait_until(page, "window.sweeplabCharts && window.sweeplabCharts.history")
    # The one point of the series is drawn once: on the line if valid, else as suspect or invalid.
    drawn = page.evaluate("""window.sweeplabCharts.history.data.datasets
        .filter(d => ['value', 'suspect', 'invalid'].includes(d.kind)).map(d => [d.kind, d.data.length])""")
    where = {"valid": "value", "suspect": "suspect"}.get(dd15.points.get(prompt_tokens=2000).validity, "invalid")
    assert sum(n for _, n in drawn) == 1 and dict(drawn)[where] == 1
    shot(page, "history")
    # A filter submits as soon as it changes (a data attribute: the pages carry no inline handler).
    page.goto(f"{live_server.url}/")
    with page.expect_navigation():
        page.select_option(".filters select[name=status]", "done")
    assert page.url.endswith("/?status=done") and page.is_visible(f"text={sweep.name}")
    assert errors == []
    assert wait_for(lambda: not (simengine_pids() - before), timeout=10)


@pytest.mark.agnostic
def test_a_suspect_bar_is_hatched_and_an_invalid_point_is_a_marker_with_its_reason(
        browser, catalog, roles, make_user, live_server):
    """Nothing suspect looks clean: on the sweep page's decode chart a suspect value is a
    hatched bar (a CanvasPattern), an invalid one is no bar but an "Invalid" marker whose
    tooltip gives its reason, and an interval is an error bar; ?valid_only=1 hides both."""
    from tests.web.sweeps import add_run, make_sweep

    make_user("vera", "viewer")
    sweep = make_sweep("verdicts")
    ar = add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0)
    dd = add_run(sweep, 1, "ddtree", {"budget": 15, "topk_cap": 8}, 1, speed=120.0)
    reason = {"code": "client_bound", "message": "the client's event loop lagged 14 ms p99 (limit 5 ms)"}
    busy = {"code": "host_busy", "message": "pid 4242 (python) took 0.97 of a core (limit 0.25)"}
    for run in (ar, dd):
        for point in Point.objects.filter(run=run):
            Point.objects.filter(pk=point.pk).update(
                validity="valid", completed=12,
                intervals={"decode_tok_s": [point.decode_tok_s * 0.95, point.decode_tok_s * 1.05]})
    suspect, invalid = Point.objects.filter(run=dd).order_by("position")[:2]
    Point.objects.filter(pk=suspect.pk).update(validity="suspect", validity_reasons=[busy])
    Point.objects.filter(pk=invalid.pk).update(validity="invalid", validity_reasons=[reason])

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, live_server, "vera", "pw-vera-12345")
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    page.wait_for_selector("#comparison-charts[data-ready=true]")
    chart = "window.sweeplabCharts.decode_tok_s"
    found = page.evaluate(f"""() => {{
        const chart = {chart};
        const i = chart.data.datasets.findIndex(d => d.label === {dd.config_label!r} && d.kind !== "marker");
        const bars = chart.getDatasetMeta(i).data;
        const m = chart.data.datasets.findIndex(d => d.kind === "marker" && d.status === "invalid");
        return {{
            type: chart.config.type,
            fills: bars.map(b => b.options.backgroundColor instanceof CanvasPattern ? "pattern" : String(b.options.backgroundColor)),
            values: chart.data.datasets[i].data.map(p => p.y),
            intervals: chart.data.datasets[i].data.map(p => [p.yMin, p.yMax]),
            marker: m,
            markers: m < 0 ? [] : chart.data.datasets[m].data.map(p => [p.x, p.reason]),
        }};
    }}""")
    assert found["type"] == "barWithErrorBars"
    assert found["fills"][0] == "pattern" and "pattern" not in found["fills"][1:]  # the suspect bar, only
    assert found["values"][1] is None  # the invalid point is not a bar
    assert found["intervals"][0][0] < found["values"][0] < found["intervals"][0][1]
    assert found["marker"] >= 0 and len(found["markers"]) == 1 and "client_bound" in found["markers"][0][1]

    def tooltip_at(dataset, index):
        """Hover the element and read the tooltip Chart.js draws for it."""
        canvas = page.locator(".chart-box[data-chart='decode_tok_s'] canvas")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        x, y = page.evaluate(f"""() => {{
            const e = {chart}.getDatasetMeta({dataset}).data[{index}];
            return [e.x, e.base === undefined ? e.y : (e.y + e.base) / 2];  // a bar's middle, a marker's centre
        }}""")
        page.mouse.move(box["x"] + x, box["y"] + y)
        wait_until(page, f"{chart}.tooltip.opacity > 0 && {chart}.tooltip.getActiveElements().length > 0")
        return page.evaluate(f"() => {chart}.tooltip.body.flatMap(b => b.lines)")

    lines = tooltip_at(found["marker"], 0)
    assert lines[0] == f"Invalid: {dd.config_label}"
    assert "client_bound: the client's event loop lagged 14 ms p99 (limit 5 ms)" in lines
    dd_index = page.evaluate(f"() => {chart}.data.datasets.findIndex(d => d.label === {dd.config_label!r})")
    lines = tooltip_at(dd_index, 0)
    assert lines[0].startswith(f"{dd.config_label}: {num(suspect.decode_tok_s)} tok/s, 95 % CI ") and lines[0].endswith("n = 12")
    assert lines[1] == "suspect: host_busy: pid 4242 (python) took 0.97 of a core (limit 0.25)"
    assert page.locator("#sweep-verdicts [data-verdict=suspect]").inner_text() == "1 suspect"
    assert page.locator(f"tr.point-row[data-point-id='{invalid.pk}'] [data-field=validity] .badge").get_attribute("title") == (
        "client_bound: the client's event loop lagged 14 ms p99 (limit 5 ms)")
    shot(page, "verdicts-sweep-detail")

    page.click("[data-action=show-valid-only]")
    page.wait_for_selector("#comparison-charts[data-ready=true]")
    page.wait_for_selector("tr.point-row")
    hidden = page.evaluate(f"""() => {{
        const chart = {chart};
        const i = chart.data.datasets.findIndex(d => d.label === {dd.config_label!r} && d.kind !== "marker");
        return {{ values: chart.data.datasets[i].data.map(p => p.y),
                  invalid: chart.data.datasets.some(d => d.kind === "marker" && d.status === "invalid") }};
    }}""")
    assert hidden["values"][:2] == [None, None] and hidden["values"][2] is not None and not hidden["invalid"]
    rows = page.eval_on_selector_all("tr.point-row", "rows => rows.map(r => r.dataset.validity)")
    assert rows and set(rows) == {"valid"}
    assert errors == []
