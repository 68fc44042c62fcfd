"""bench/ui_scale.py at a tiny scale: it seeds, it measures, and the browser's data
endpoints issue the same number of SQL queries whatever the size of the sweep."""

import importlib.util
from pathlib import Path

import pytest

from benchmarks.models import Sweep
from runs.models import Point, PointStatus, RequestRecord, Run

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "ui_scale.py"


def load_script():
    spec = importlib.util.spec_from_file_location("ui_scale", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ui_scale():
    return load_script()


def expected_endpoints():
    # Every data endpoint the sweep page reads, points-table.json included: a list that
    # followed whether an endpoint exists would accept its removal.
    return ["sweep detail page (HTML)", "progress.json", "charts.json",
            "charts.json ?family=prompt_length", "charts.json ?family=latency", "charts.json ?family=concurrency",
            "charts.json ?chart=<latency>", "points-table.json", "history.json", "history page (HTML)"]


@pytest.mark.django_db
def test_seed_and_measure_at_two_sizes_issue_the_same_queries(ui_scale, client):
    seeded = ui_scale.seed(runs=6, points_per_run=4, requests_per_point=2)
    assert Run.objects.count() == 6
    assert Point.objects.count() == 6 * 4
    assert RequestRecord.objects.exists()
    assert Point.objects.filter(status=PointStatus.OK).exists()
    assert seeded["series"] is not None and seeded["series"]["points"] >= 2
    small_rows = ui_scale.measure_all(seeded, repeat=1, client=client)
    assert [r["endpoint"] for r in small_rows] == expected_endpoints()
    for row in small_rows:
        assert row["status"] == 200, row
        assert row["bytes"] > 0 and row["median_ms"] > 0 and row["queries"] > 0
    table = ui_scale.format_table(small_rows)
    assert "progress.json" in table and "target" in table

    Sweep.objects.all().delete()
    seeded = ui_scale.seed(runs=16, points_per_run=9, requests_per_point=2)
    assert Point.objects.count() == 16 * 9
    assert Run.objects.filter(sweep=seeded["big_sweep"]).count() > 4
    big_rows = ui_scale.measure_all(seeded, repeat=1, client=client)

    small = {r["endpoint"]: r["queries"] for r in small_rows}
    big = {r["endpoint"]: r["queries"] for r in big_rows}
    assert big == small  # constant-query: more runs and points, not more queries
    for row in big_rows:
        assert row["queries"] == row["queries_small"], row  # largest vs smallest sweep


def test_arguments_default_to_the_issue_scale(ui_scale):
    args = ui_scale.parse_args([])
    assert (args.runs, args.points_per_run, args.requests_per_point, args.repeat) == (500, 40, 3, 7)
    assert args.database_url is None
    assert len(ui_scale.point_shapes(40)) == 40 and len(ui_scale.point_shapes(100)) == 100
