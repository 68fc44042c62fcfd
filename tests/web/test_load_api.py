"""The load, SLO and capacity fields in the API and the exports (issue 15, point 5)."""

import csv
import io

from django.test import Client
from django.urls import reverse

from tests.web.loads import SLO, add_load_run, make_load_sweep
from tests.web.sweeps import add_run, make_sweep
from tests.web.test_api import user_with_token


def test_the_api_carries_a_runs_capacity_and_each_points_load_and_slo_fields(catalog):
    sweep = make_load_sweep()
    run = add_load_run(sweep, 0, "autoregressive", {}, 1, rates=(0.5, 8), probes=(4,),
                       capacity={"load": 4, "goodput": 3.5, "output_tok_s": 1024.0, "tok_s_per_gpu": 1024.0,
                                 "tok_s_per_user": 40.0})
    _, auth = user_with_token("viewer")
    api = Client()
    shown = api.get(f"/api/runs/{run.pk}", **auth).json()
    assert shown["capacity"]["load"] == 4 and shown["capacity"]["stopped_because"] == "resolution"
    points = {p["request_rate"]: p for p in api.get(f"/api/points?run={run.pk}", **auth).json()["items"]}
    assert set(points) == {0.5, 8.0, 4.0}
    slow, fast, probe = points[0.5], points[8.0], points[4.0]
    assert slow["slo_met"] is True and fast["slo_met"] is False and probe["from_search"] is True
    assert slow["goodput"] == 0.5 and fast["slo_attainment"] == 0.5 and slow["burstiness"] == 1.0
    assert slow["slo_checks"]["ttft_p99_ms"]["limit"] == SLO["ttft_p99_ms"]
    assert slow["send_based"]["p99_ttft_ms"] == 90.0 and slow["metrics"]["send_lag_p99_ms"] == 3.0


def test_a_closed_loop_run_has_no_capacity_in_the_api(catalog):
    run = add_run(make_sweep("closed"), 0, "autoregressive", {}, 1)
    _, auth = user_with_token("viewer")
    assert Client().get(f"/api/runs/{run.pk}", **auth).json()["capacity"] is None


def test_the_csv_export_has_the_load_and_slo_columns(catalog, viewer, client):
    sweep = make_load_sweep()
    add_load_run(sweep, 0, "autoregressive", {}, 1, rates=(0.5, 8))
    client.force_login(viewer)
    response = client.get(reverse("sweep-points-csv", args=[sweep.pk]))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    by_rate = {row["request_rate"]: row for row in rows}
    assert set(by_rate) == {"0.5", "8.0"}
    assert by_rate["0.5"]["slo_met"] == "True" and by_rate["8.0"]["slo_met"] == "False"
    assert by_rate["0.5"]["goodput"] == "0.5" and by_rate["0.5"]["burstiness"] == "1.0"
    assert by_rate["0.5"]["send_lag_p99_ms"] == "3.0" and '"p99_ttft_ms": 90.0' in by_rate["0.5"]["send_based"]
