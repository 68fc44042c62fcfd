"""GPU memory and power over a run's time, for the run drawer's chart.

A long run holds a sample per GPU every second or so: hundreds of thousands of rows. Only
evenly spaced ones are read, chosen in SQL in one query: each GPU's samples are numbered in
time order (a window function) and every ``stride``-th is kept, the stride being that GPU's
sample count divided by ``MAX_SAMPLES_PER_GPU``, rounded up. So at most that many rows per
GPU leave the database, and the query count does not grow with the samples.
"""

from django.db.models import Count, F, Min, Window
from django.db.models.functions import RowNumber

from runs.models import TelemetrySample

MAX_SAMPLES_PER_GPU = 300
SERIES = ("memory_used_mib", "memory_total_mib", "power_w")


def gpu_series(run_id, max_samples=MAX_SAMPLES_PER_GPU):
    """{"max_samples_per_gpu", "gpus": [{"index", "samples", "shown", "t", <SERIES>...}]}
    with ``t`` in seconds since the run's first sample; ``gpus`` is empty without telemetry."""
    gpu = [F("gpu_index")]
    picked = (
        TelemetrySample.objects.filter(run_id=run_id)
        .annotate(
            number=Window(RowNumber(), partition_by=gpu, order_by=[F("at").asc(), F("id").asc()]),
            samples=Window(Count("id"), partition_by=gpu),
            first_at=Window(Min("at")),
        )
        # (number - 1) % ceil(samples / max): integer arithmetic in SQL.
        .annotate(offset=(F("number") - 1) % ((F("samples") + (max_samples - 1)) / max_samples))
        .filter(offset=0)
        .order_by("gpu_index", "at", "id")
        .values_list("gpu_index", "at", "samples", "first_at", *SERIES)
    )
    gpus = {}
    for index, at, samples, first_at, *values in picked:
        series = gpus.get(index)
        if series is None:
            series = gpus[index] = {"index": index, "samples": samples, "shown": 0, "t": [],
                                    **{name: [] for name in SERIES}}
        series["shown"] += 1
        series["t"].append(round((at - first_at).total_seconds(), 3))
        for name, value in zip(SERIES, values):
            series[name].append(value)
    return {"max_samples_per_gpu": max_samples, "gpus": list(gpus.values())}
