"""RunStore.store_point keeps the server's own view of a point beside its metrics, and a
point measured again, or planned again after a crash, keeps no view of an earlier try."""

import pytest
from django.utils import timezone

from runs.models import Point
from tests.worker.stores import claimed_store

VIEW = {"source": "sglang", "counters": {"prompt_tokens": 120, "generation_tokens": 64},
        "gauges_max": {"requests_running": 1, "requests_waiting": 0, "kv_cache_usage": 0.01, "samples": 3},
        "ttft_ms": {"median": 35.0, "bucket": [25.0, 50.0], "count": 4}, "itl_ms": None}


@pytest.fixture
def store(catalog):
    """A claimed run's store and its one planned point."""
    return claimed_store("store", concurrency=[1])


def test_a_measured_point_keeps_the_server_s_view_and_medians(store):
    (point,) = store.pending_points()
    store.store_point(point, "ok", "", timezone.now(), None,
                      {"completed": 4, "server_median_ttft_ms": 35.0, "server_median_itl_ms": None},
                      server_metrics=VIEW)
    stored = Point.objects.get(pk=point.pk)
    assert stored.server_metrics == VIEW
    assert (stored.server_median_ttft_ms, stored.server_median_itl_ms, stored.completed) == (35.0, None, 4)
    assert "server_median_ttft_ms" not in stored.extra  # a column, not an extra


def test_a_point_measured_again_without_a_view_keeps_none_of_the_last(store):
    (point,) = store.pending_points()
    store.store_point(point, "ok", "", timezone.now(), None, {"completed": 4}, server_metrics=VIEW)
    store.store_point(point, "ok", "", timezone.now(), None, {"completed": 5})
    assert Point.objects.get(pk=point.pk).server_metrics == {}


def test_a_crashed_point_planned_again_loses_its_view(store):
    (point,) = store.pending_points()
    store.store_point(point, "crashed", "the server died", timezone.now(), None, {"completed": 1},
                      server_metrics=VIEW)
    store.prepare_retry()
    again = Point.objects.get(pk=point.pk)
    assert (again.status, again.server_metrics) == ("planned", {})
