"""simengine's /metrics writer (simengine/metrics.py): SGLang's histogram rules and the text
format prometheus_client writes, read back by the parser Sweeplab uses."""

import math

import pytest
from prometheus_client.utils import floatToGoString

from simengine.metrics import ITL_BUCKETS_S, TTFT_BUCKETS_S, Exposition, Histogram, go_float
from sweepcore.servermetrics import SGLANG_METRICS, parse, point_view


def test_a_chunk_of_k_tokens_counts_k_itl_observations_of_its_gap_over_k():
    itl = Histogram(ITL_BUCKETS_S)
    itl.observe_chunk(0.030, 3)  # three tokens 30 ms after the previous chunk: 10 ms each
    assert itl.count == 3 and itl.sum == pytest.approx(0.030)
    assert itl.counts[itl.bounds.index(0.010)] == 3


def test_an_observation_past_the_last_bound_lands_in_the_inf_bucket():
    ttft = Histogram(TTFT_BUCKETS_S)
    ttft.observe(401.0)
    ttft.observe(0.1)  # bounds are inclusive (le)
    assert ttft.counts[-1] == 1 and ttft.bounds[-1] == math.inf
    assert ttft.counts[0] == 1


@pytest.mark.parametrize("value", [0.002, 0.01, 1.0, 400.0, 8128902.0, 12345678.9, math.inf, 0.0])
def test_numbers_are_written_as_prometheus_client_writes_them(value):
    assert go_float(value) == floatToGoString(value)


def test_the_exposition_reads_back_as_sglang_series():
    ttft, itl = Histogram(TTFT_BUCKETS_S), Histogram(ITL_BUCKETS_S)
    for seconds in (0.15, 0.3, 0.5):
        ttft.observe(seconds)
    itl.observe_chunk(0.05, 5)
    labels = {"model_name": 'a "quoted" model'}
    text = Exposition()
    text.gauge("sglang:num_running_reqs", "The number of running requests.", labels, 2)
    text.counter("sglang:num_requests_total", "Number of requests processed.", labels, 3)
    text.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels, ttft)
    text.histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels, itl)
    snapshot = parse(text.text())
    assert snapshot.series["sglang:num_running_reqs"] == (({"model_name": 'a "quoted" model'}, 2.0),)
    view = point_view(parse(""), snapshot, SGLANG_METRICS)
    assert view["counters"] == {"requests_finished": 3}
    # Three TTFTs: rank 1.5 in (0.2, 0.4], which holds the second: 0.2 + 0.2 * 0.5 / 1 s.
    assert view["ttft_ms"] == {"median": 300.0, "bucket": [200.0, 400.0], "count": 3}
    # Five gaps of 10 ms, all in (8, 10] ms: rank 2.5 -> 8 + 2 * 2.5 / 5 ms.
    assert view["itl_ms"] == {"median": 9.0, "bucket": [8.0, 10.0], "count": 5}
