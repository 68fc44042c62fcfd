"""GPU memory and power over a run's time in drawer.json: shape, downsampling, empty case,
query count."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import TelemetrySample
from runs.results.gpu_series import MAX_SAMPLES_PER_GPU, gpu_series
from tests.web.sweeps import add_run, make_sweep


@pytest.fixture
def run(catalog):
    return add_run(make_sweep(), 0, "ddtree", {"budget": 15, "topk_cap": 8}, 2)


START = timezone.now().replace(microsecond=0)


def sample(run, count, gpus=(0, 1), every_s=1.0, late_by_s=0.0):
    """``count`` samples per GPU, one every ``every_s``; GPU n starts ``n * late_by_s`` later."""
    TelemetrySample.objects.bulk_create(
        TelemetrySample(
            run=run, gpu_index=gpu, at=START + timedelta(seconds=gpu * late_by_s + i * every_s),
            memory_used_mib=1000.0 + i, memory_total_mib=97887.0, power_w=200.0 + gpu, utilization_pct=90.0,
        )
        for gpu in gpus
        for i in range(count)
    )


def test_a_run_without_telemetry_has_no_gpus(run, viewer, client):
    client.force_login(viewer)
    data = client.get(reverse("run-drawer", args=[run.pk])).json()
    assert data["telemetry"] == {"max_samples_per_gpu": MAX_SAMPLES_PER_GPU, "gpus": []}


def test_short_runs_send_every_sample_per_gpu_in_seconds_since_the_first(run, viewer, client):
    sample(run, 5, every_s=2.0, late_by_s=0.5)
    client.force_login(viewer)
    gpus = client.get(reverse("run-drawer", args=[run.pk])).json()["telemetry"]["gpus"]
    assert [g["index"] for g in gpus] == [0, 1]
    first, second = gpus
    assert first == {
        "index": 0, "samples": 5, "shown": 5,
        "t": [0.0, 2.0, 4.0, 6.0, 8.0],
        "memory_used_mib": [1000.0, 1001.0, 1002.0, 1003.0, 1004.0],
        "memory_total_mib": [97887.0] * 5,
        "power_w": [200.0] * 5,
    }
    # One clock for the run: GPU 1's first sample came half a second after GPU 0's.
    assert second["t"] == [0.5, 2.5, 4.5, 6.5, 8.5] and second["power_w"] == [201.0] * 5


@pytest.mark.parametrize("count", [MAX_SAMPLES_PER_GPU, MAX_SAMPLES_PER_GPU + 1, 1000, 7777])
def test_long_runs_are_thinned_to_evenly_spaced_samples_per_gpu(run, count):
    sample(run, count)
    gpus = gpu_series(run.pk)["gpus"]
    assert len(gpus) == 2
    for gpu in gpus:
        stride = -(-count // MAX_SAMPLES_PER_GPU)
        assert gpu["samples"] == count
        assert gpu["shown"] == len(gpu["t"]) == len(gpu["power_w"]) == len(gpu["memory_used_mib"])
        assert gpu["shown"] <= MAX_SAMPLES_PER_GPU and gpu["shown"] == -(-count // stride)
        # Evenly spaced from the first sample on: every stride-th one.
        assert gpu["t"][0] == 0.0
        assert {round(b - a, 3) for a, b in zip(gpu["t"], gpu["t"][1:])} == {float(stride)}
        assert gpu["memory_used_mib"][:2] == [1000.0, 1000.0 + stride]


def test_the_drawer_reads_telemetry_in_a_constant_number_of_queries(run, viewer, client, django_assert_num_queries):
    client.force_login(viewer)
    url = reverse("run-drawer", args=[run.pk])
    client.get(url)  # warm the session
    counts = []
    for samples in (3, 5000):
        TelemetrySample.objects.filter(run=run).delete()
        sample(run, samples, gpus=range(4))
        # Session, user, the run, its events, its points' verdicts, their server views, the
        # thinned telemetry.
        with django_assert_num_queries(7):
            gpus = client.get(url).json()["telemetry"]["gpus"]
        counts.append([g["shown"] for g in gpus])
    assert counts == [[3] * 4, [-(-5000 // -(-5000 // MAX_SAMPLES_PER_GPU))] * 4]


def test_other_runs_samples_are_not_mixed_in(run):
    other = add_run(run.sweep, 1, "autoregressive", {}, 2)
    sample(other, 10, gpus=(3,))
    sample(run, 2, gpus=(0,))
    assert [(g["index"], g["samples"]) for g in gpu_series(run.pk)["gpus"]] == [(0, 2)]


def test_the_drawer_requires_login_and_a_viewer_reads_it(run, viewer, client):
    url = reverse("run-drawer", args=[run.pk])
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(viewer)
    assert client.get(url).status_code == 200


def test_the_drawer_markup_holds_the_telemetry_chart_and_its_empty_message(run, viewer, client):
    client.force_login(viewer)
    url = reverse("run-drawer-partial", args=[run.pk])
    assert "No GPU telemetry for this run" in client.get(url).content.decode()
    sample(run, 3)
    html = client.get(url).content.decode()
    assert 'data-field="drawer-telemetry-canvas"' in html and "No GPU telemetry" not in html
