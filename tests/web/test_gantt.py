"""The sweep page's Gantt chart (runs.results.gantt): which GPUs each run held when, and the
makespan against the ideal, from the stored leases."""

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from runs.models import GpuLease
from runs.results.gantt import sweep_gantt
from tests.web.sweeps import add_run, make_sweep


def lease(run, gpus, start_s, end_s, origin, host=None):
    for gpu in gpus:
        GpuLease.objects.create(host=host or run.sweep.host, gpu_index=gpu, run=run, worker="w",
                                leased_at=origin + timedelta(seconds=start_s),
                                released_at=None if end_s is None else origin + timedelta(seconds=end_s),
                                release_reason="" if end_s is None else "teardown")


def test_packed_runs_side_by_side_come_near_the_ideal(catalog):
    sweep = make_sweep("packed")
    tp4 = add_run(sweep, 0, "autoregressive", {}, 4)
    tp2 = add_run(sweep, 1, "ddtree", {"budget": 15, "topk_cap": 8}, 2)
    tp1 = add_run(sweep, 2, "ddtree", {"budget": 4, "topk_cap": 8}, 1)
    origin = timezone.now() - timedelta(minutes=5)
    lease(tp4, [0, 1, 2, 3], 0, 100, origin)
    lease(tp2, [4, 5], 0, 100, origin)
    lease(tp1, [6], 10, 60, origin)
    gantt = sweep_gantt(sweep)
    assert gantt["gpu_count"] == 8 and [row["label"] for row in gantt["rows"]][:2] == [
        "sim-8x-rtxpro6000 GPU 0", "sim-8x-rtxpro6000 GPU 1"]
    assert gantt["makespan_s"] == 100
    assert gantt["ideal_s"] == (100 * 4 + 100 * 2 + 50 * 1) / 8
    assert gantt["ratio"] == 100 / gantt["ideal_s"]
    (bar,) = gantt["rows"][6]["bars"]
    assert (bar["run"], bar["start"], bar["end"], bar["used"], bar["tp"]) == (tp1.pk, 10, 60, True, 1)
    assert bar["config"] == "ddtree budget=4 topk_cap=8 TP1"
    assert gantt["rows"][7]["bars"] == [] and not gantt["running"]


def test_a_sweep_shared_by_two_hosts_has_a_row_per_gpu_of_each_and_an_ideal_over_all(catalog, viewer, client):
    from benchmarks.models import Host

    sweep = make_sweep("two-hosts")
    sweep.spec = {**sweep.spec, "hosts": ["sim-8x-rtxpro6000", "sim-8x-rtxpro6000-b"]}
    sweep.save(update_fields=["spec"])
    on_a = add_run(sweep, 0, "autoregressive", {}, 8)
    on_b = add_run(sweep, 1, "dflash", {"block_size": 16}, 8)
    origin = timezone.now() - timedelta(minutes=5)
    lease(on_a, range(8), 0, 100, origin)
    lease(on_b, range(8), 0, 100, origin, host=Host.objects.get(name="sim-8x-rtxpro6000-b"))
    gantt = sweep_gantt(sweep)
    assert gantt["gpu_count"] == 16 and len(gantt["rows"]) == 16
    assert gantt["hosts"] == ["sim-8x-rtxpro6000", "sim-8x-rtxpro6000-b"]
    assert [row["label"] for row in gantt["rows"]][7:9] == ["sim-8x-rtxpro6000 GPU 7", "sim-8x-rtxpro6000-b GPU 0"]
    assert [bar["run"] for bar in gantt["rows"][8]["bars"]] == [on_b.pk]
    assert gantt["ideal_s"] == 100 and gantt["ratio"] == 1.0
    on_b.host = Host.objects.get(name="sim-8x-rtxpro6000-b")
    on_b.save(update_fields=["host"])
    client.force_login(viewer)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert '<dd data-field="hosts">sim-8x-rtxpro6000, sim-8x-rtxpro6000-b <span class="muted">2 alike hosts' in html
    assert "spread over the 16 GPUs of hosts sim-8x-rtxpro6000, sim-8x-rtxpro6000-b" in html
    drawer = client.get(reverse("run-drawer-partial", args=[on_b.pk])).content.decode()
    assert '<dd data-field="drawer-host">sim-8x-rtxpro6000-b</dd>' in drawer


def test_an_exclusive_run_holds_the_host_but_runs_on_its_tp(catalog):
    sweep = make_sweep("exclusive")
    first = add_run(sweep, 0, "autoregressive", {}, 1)
    second = add_run(sweep, 1, "autoregressive", {}, 2)
    origin = timezone.now() - timedelta(seconds=90)
    lease(first, range(8), 0, 40, origin)
    lease(second, range(8), 40, None, origin)  # still running
    gantt = sweep_gantt(sweep)
    assert [b["used"] for b in gantt["rows"][0]["bars"]] == [True, True]
    assert [b["used"] for b in gantt["rows"][1]["bars"]] == [False, True]
    assert [b["used"] for b in gantt["rows"][2]["bars"]] == [False, False]
    assert gantt["running"] and gantt["rows"][0]["bars"][1]["held"]
    assert 89 <= gantt["makespan_s"] <= 95
    # One TP1 and one TP2 run, one after the other, on 8 GPUs: far from the ideal.
    assert gantt["ratio"] > 4


def test_the_sweep_page_draws_it_only_once_gpus_were_leased(catalog, viewer, client):
    client.force_login(viewer)
    sweep = make_sweep("page")
    run = add_run(sweep, 0, "autoregressive", {}, 4)
    url = reverse("sweep-detail", args=[sweep.pk])
    assert 'data-field="gantt"' not in client.get(url).content.decode()
    lease(run, [0, 1, 2, 3], 0, 30, timezone.now() - timedelta(minutes=1))
    html = client.get(url).content.decode()
    assert 'data-field="gantt"' in html and 'id="gantt-chart"' in html and "data-chart=" in html and "js/gantt.js" in html
    assert "Makespan 30 s against an ideal of 15 s (<strong>2.00×</strong>)" in html
    # The live partial sends the section again, so that the chart grows while the sweep runs.
    sent = client.get(reverse("sweep-live-partial", args=[sweep.pk])).content.decode()
    assert '<div id="gantt-section" hx-swap-oob="true">' in sent and "Makespan 30 s" in sent


def test_a_point_measured_beside_another_run_says_so_in_the_drawer(catalog, viewer, client):
    sweep = make_sweep("drawer")
    run = add_run(sweep, 0, "autoregressive", {}, 4)
    other = add_run(sweep, 1, "autoregressive", {}, 2)
    run.points.update(validity="valid", co_runs=[other.pk])
    client.force_login(viewer)
    html = client.get(reverse("run-drawer-partial", args=[run.pk])).content.decode()
    assert f"measured while run(s) {other.pk} shared the host" in html
