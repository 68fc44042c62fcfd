"""sweepcore.servermetrics: the server's own view of a point, from two reads of its /metrics.

The exposition texts are real servers' (tests/core/fixtures/README.md says where each comes
from); the expected medians are worked out by hand from their bucket counts."""

import math
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sweepcore.servermetrics import (
    SGLANG_METRICS,
    VLLM_METRICS,
    GaugeSampler,
    ScrapeError,
    Snapshot,
    gauge_values,
    histogram_median,
    median_fields,
    parse,
    point_view,
    scrape,
    to_model_time,
)

FIXTURES = Path(__file__).with_name("fixtures")
SGLANG_TEXT = (FIXTURES / "sglang-metrics.txt").read_text()
VLLM_IDLE = parse((FIXTURES / "vllm-metrics-idle.txt").read_text())
VLLM_AFTER_1 = parse((FIXTURES / "vllm-metrics-after-1-request.txt").read_text())
VLLM_AFTER_6 = parse((FIXTURES / "vllm-metrics-after-6-requests.txt").read_text())
NOTHING = Snapshot()


# --------------------------------------------------------------------------- histogram median


def test_median_interpolates_linearly_inside_the_bucket_holding_half_the_count():
    # 6 observations: rank 3 falls in (0.04, 0.06], which holds observations 2 to 4.
    buckets = {0.02: 0, 0.04: 1, 0.06: 4, 0.08: 6, math.inf: 6}
    median, bucket = histogram_median(buckets)
    assert median == pytest.approx(0.04 + 0.02 * (3 - 1) / (4 - 1))  # 0.05333…
    assert bucket == (0.04, 0.06)


def test_median_in_the_first_bucket_counts_from_zero():
    assert histogram_median({0.1: 4, 0.2: 4, math.inf: 4}) == (pytest.approx(0.05), (0.0, 0.1))


def test_median_on_a_bucket_edge_is_that_upper_bound():
    assert histogram_median({0.1: 2, 0.2: 4, math.inf: 4}) == (pytest.approx(0.1), (0.0, 0.1))


def test_median_in_the_inf_bucket_is_its_lower_bound_with_no_upper_bound():
    assert histogram_median({0.1: 1, 0.2: 2, math.inf: 5}) == (0.2, (0.2, None))


def test_median_takes_bucket_pairs_in_any_order():
    pairs = [(math.inf, 6), (0.08, 6), (0.04, 1), (0.06, 4), (0.02, 0)]
    assert histogram_median(pairs)[1] == (0.04, 0.06)


@pytest.mark.parametrize("buckets", [
    {0.1: 0, 0.2: 0, math.inf: 0},  # no observation during the point
    {},  # no histogram
    {0.1: 3, 0.2: 5},  # no +Inf bucket: Prometheus answers NaN
    {math.inf: 4},  # a single bucket says nothing
])
def test_median_is_none_without_observations_or_without_a_usable_histogram(buckets):
    assert histogram_median(buckets) is None


# --------------------------------------------------------------------------- parsing


def test_parse_reads_a_real_sglang_exposition():
    snapshot = parse(SGLANG_TEXT)
    assert snapshot.total("sglang:prompt_tokens_total") == 8128902
    assert gauge_values(snapshot, SGLANG_METRICS) == {
        "requests_running": 162, "requests_waiting": 2826, "kv_cache_usage": 0.28}
    assert snapshot.buckets("sglang:time_to_first_token_seconds")[math.inf] == 11008


def test_counter_samples_keep_their_total_suffix_whichever_way_the_type_line_names_them():
    # prometheus_client types a counter under its _total name; other writers drop the suffix.
    with_suffix = parse("# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total 5.0\n")
    without = parse("# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total 5.0\n")
    untyped = parse("vllm:prompt_tokens_total 5.0\n")
    for snapshot in (with_suffix, without, untyped):
        assert snapshot.total("vllm:prompt_tokens_total") == 5.0
        assert snapshot.total("vllm:prompt_tokens") is None


@pytest.mark.parametrize("text", [
    "<html><body>Not Found</body></html>",
    'vllm:num_requests_running{engine="0" 1.0\n',
    "vllm:num_requests_running one\n",
])
def test_parse_refuses_text_that_is_not_the_exposition_format(text):
    with pytest.raises(ValueError, match="not the Prometheus text format"):
        parse(text)


# --------------------------------------------------------------------------- the view


def test_vllm_view_of_a_speculative_point_on_a_real_server():
    view = point_view(VLLM_AFTER_1, VLLM_AFTER_6, VLLM_METRICS)
    assert view["source"] == "vllm"
    assert view["counters"] == {
        "prompt_tokens": 389, "generation_tokens": 448, "preemptions": 0,
        "prefix_cache_queries": 389, "prefix_cache_hits": 0,
        "requests_finished": 5, "requests_by_finish_reason": {"length": 5}}
    # TTFT deltas by bucket: 1 by 0.08 s, 5 by 0.25 s, 5 in all; rank 2.5 in (0.1, 0.25],
    # which holds observations 1 to 5: 0.1 + 0.15 * (2.5 - 1) / 4 s.
    assert view["ttft_ms"] == {"median": 156.25, "bucket": [100.0, 250.0], "count": 5}
    # ITL: 268 in (0.025, 0.05], 66 in (0.05, 0.075]; rank 167: 0.025 + 0.025 * 167 / 268 s.
    assert view["itl_ms"]["median"] == pytest.approx(40.578358, abs=1e-6)
    assert view["itl_ms"]["bucket"] == [25.0, 50.0]
    # vLLM times one gap per engine step, not per token: fewer gaps than tokens after the first.
    assert view["itl_ms"]["count"] == 334 < 448 - 5
    spec = view["spec"]
    assert (spec["drafts"], spec["draft_tokens"], spec["accepted_tokens"]) == (67, 268, 109)
    assert spec["accept_length"] == pytest.approx(1 + 109 / 67)
    assert spec["acceptance_rate_per_position"] == pytest.approx([39 / 67, 30 / 67, 26 / 67, 14 / 67])


def test_vllm_view_of_one_request_that_accepted_no_draft():
    view = point_view(VLLM_IDLE, VLLM_AFTER_1, VLLM_METRICS)
    assert view["counters"]["requests_by_finish_reason"] == {"length": 1}
    # One TTFT in (1.0, 2.5] s: rank 0.5 is half way through it.
    assert view["ttft_ms"] == {"median": 1750.0, "bucket": [1000.0, 2500.0], "count": 1}
    assert view["itl_ms"] == {"median": 37.5, "bucket": [25.0, 50.0], "count": 63}
    assert view["spec"] == {"drafts": 4, "draft_tokens": 16, "accepted_tokens": 0, "accept_length": 1.0,
                            "acceptance_rate_per_position": [0.0, 0.0, 0.0, 0.0]}


def test_vllm_view_of_a_point_with_no_draft_has_no_accept_length():
    view = point_view(VLLM_IDLE, VLLM_IDLE, VLLM_METRICS)
    assert view["spec"] == {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0, "accept_length": None,
                            "acceptance_rate_per_position": None}
    assert view["ttft_ms"] is None and view["itl_ms"] is None
    assert view["counters"]["requests_by_finish_reason"] == {}


def test_vllm_restarted_during_the_point_gives_a_reset_view():
    view = point_view(VLLM_AFTER_6, VLLM_IDLE, VLLM_METRICS)
    assert view["reset"] is True and view["counters"] == {} and "spec" not in view


def test_vllm_gauges_of_a_real_server():
    assert gauge_values(VLLM_IDLE, VLLM_METRICS) == {
        "requests_running": 0.0, "requests_waiting": 0.0, "kv_cache_usage": 0.0}


def test_sglang_view_reads_its_names_and_falls_back_to_the_older_itl_histogram():
    # From an empty read to the real one: every delta is the server's total so far.
    view = point_view(NOTHING, parse(SGLANG_TEXT), SGLANG_METRICS)
    assert view["source"] == "sglang"
    # This release exposes no request counter, no cache hits, no retractions: left out.
    assert view["counters"] == {"prompt_tokens": 8128902, "generation_tokens": 7557572}
    # TTFT: 11008 observations, rank 5504 is past the 30 s bucket (2513): the +Inf bucket.
    assert view["ttft_ms"] == {"median": 30000.0, "bucket": [30000.0, None], "count": 11008}
    # ITL (time_per_output_token_seconds): rank 3700378.5 in (0.075, 0.1], which holds
    # observations 433413 to 4950195: 0.075 + 0.025 * 3266965.5 / 4516782 s.
    assert view["itl_ms"]["median"] == pytest.approx(93.082373, abs=1e-6)
    assert view["itl_ms"]["bucket"] == [75.0, 100.0]
    assert view["itl_ms"]["count"] == 7400757
    assert "spec" not in view and "reset" not in view


def test_a_counter_that_went_backwards_means_a_restart_and_gives_no_deltas():
    before = parse(SGLANG_TEXT)
    after = parse(SGLANG_TEXT.replace("8.128902e+06", "1024.0"))
    view = point_view(before, after, SGLANG_METRICS, gauges_max={"requests_running": 3, "samples": 2})
    assert view == {"source": "sglang", "reset": True, "counters": {}, "ttft_ms": None, "itl_ms": None,
                    "gauges_max": {"requests_running": 3, "samples": 2}}


def test_a_histogram_that_went_backwards_also_means_a_restart():
    after = parse(SGLANG_TEXT.replace('le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 11008.0',
                                      'le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0'))
    assert point_view(parse(SGLANG_TEXT), after, SGLANG_METRICS)["reset"] is True


def test_an_idle_point_has_zero_deltas_and_no_latency_medians():
    snapshot = parse(SGLANG_TEXT)
    view = point_view(snapshot, snapshot, SGLANG_METRICS)
    assert view["counters"] == {"prompt_tokens": 0, "generation_tokens": 0}
    assert view["ttft_ms"] is None and view["itl_ms"] is None


def test_a_server_without_the_families_gives_an_empty_view():
    view = point_view(NOTHING, parse("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 3.0\n"),
                      VLLM_METRICS)
    assert view == {"source": "vllm", "counters": {}, "ttft_ms": None, "itl_ms": None}


DATA_PARALLEL = """\
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 10.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 1.0
vllm:request_success_total{engine="1",finished_reason="length",model_name="m"} 12.0
vllm:request_success_total{engine="1",finished_reason="abort",model_name="m"} 0.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 3.0
# HELP vllm:kv_cache_usage_perc KV-Cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
"""


def test_engine_cores_are_summed_except_the_label_that_is_the_point():
    before = parse(DATA_PARALLEL.replace("} 10.0", "} 4.0").replace("} 12.0", "} 6.0"))
    view = point_view(before, parse(DATA_PARALLEL), VLLM_METRICS)
    # 6 + 6 more by length across the two cores; the reasons that did not happen are left out.
    assert view["counters"] == {"requests_finished": 12, "requests_by_finish_reason": {"length": 12}}


def test_gauges_sum_requests_over_engine_cores_and_keep_the_fullest_kv_cache():
    assert gauge_values(parse(DATA_PARALLEL), VLLM_METRICS) == {"requests_running": 5.0, "kv_cache_usage": 0.5}


def test_gauges_read_the_older_kv_cache_name():
    text = "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.75\n"
    assert gauge_values(parse(text), VLLM_METRICS) == {"kv_cache_usage": 0.75}


def test_a_labelled_series_first_exposed_during_the_point_counts_from_zero():
    before = parse(DATA_PARALLEL)
    after = parse(DATA_PARALLEL + 'vllm:request_success_total{engine="0",finished_reason="error",model_name="m"} 2.0\n')
    view = point_view(before, after, VLLM_METRICS)
    assert view["counters"]["requests_by_finish_reason"] == {"error": 2}


# --------------------------------------------------------------------------- model time and columns


def test_model_time_divides_the_latencies_and_their_buckets_by_the_time_scale():
    view = {"source": "sglang", "counters": {"prompt_tokens": 10}, "gauges_max": {"kv_cache_usage": 0.5},
            "ttft_ms": {"median": 4.0, "bucket": [2.0, 4.0], "count": 3},
            "itl_ms": {"median": 600.0, "bucket": [400.0, None], "count": 30}}
    model = to_model_time(view, 0.1)
    assert model["ttft_ms"] == {"median": 40.0, "bucket": [20.0, 40.0], "count": 3}
    assert model["itl_ms"] == {"median": 6000.0, "bucket": [4000.0, None], "count": 30}
    assert model["counters"] == view["counters"] and model["gauges_max"] == view["gauges_max"]
    assert view["ttft_ms"]["median"] == 4.0  # the wall-time view is left as it was
    with pytest.raises(ValueError):
        to_model_time(view, 0)


def test_model_time_leaves_a_view_without_latencies_alone():
    view = {"source": "sglang", "counters": {}, "ttft_ms": None, "itl_ms": None}
    assert to_model_time(view, 0.5) == view


def test_median_fields_are_the_point_columns_of_a_view():
    view = point_view(NOTHING, parse(SGLANG_TEXT), SGLANG_METRICS)
    assert median_fields(view) == {"server_median_ttft_ms": 30000.0,
                                   "server_median_itl_ms": view["itl_ms"]["median"]}
    assert median_fields({"source": "vllm", "reset": True, "counters": {}, "ttft_ms": None, "itl_ms": None}) == {
        "server_median_ttft_ms": None, "server_median_itl_ms": None}


# --------------------------------------------------------------------------- scraping


class MetricsServer:
    """A /metrics endpoint on a free local port that answers with ``responses`` in turn
    (status, body), repeating the last one."""

    def __init__(self, responses):
        self.responses = list(responses)
        self.hits = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                status, body = owner.responses[min(owner.hits, len(owner.responses) - 1)]
                owner.hits += 1
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def metrics_server():
    servers = []

    def start(*responses):
        servers.append(MetricsServer(responses))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_scrape_reads_the_metrics_path_of_a_base_url(metrics_server):
    server = metrics_server((200, SGLANG_TEXT))
    assert scrape(server.url + "/").total("sglang:generation_tokens_total") == 7557572


def test_scrape_says_the_http_status_of_a_server_without_metrics(metrics_server):
    server = metrics_server((404, '{"detail":"Not Found"}'))
    with pytest.raises(ScrapeError, match=r"/metrics: HTTP 404 Not Found"):
        scrape(server.url)


def test_scrape_says_the_connection_was_refused():
    with pytest.raises(ScrapeError, match="connection refused"):
        scrape(f"http://127.0.0.1:{_closed_port()}")


def test_scrape_says_the_answer_was_unparseable(metrics_server):
    server = metrics_server((200, "<html>metrics are elsewhere</html>"))
    with pytest.raises(ScrapeError, match="unparseable"):
        scrape(server.url)


def _running(n):
    return f'# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{{model_name="m"}} {n}\n' \
           f'# TYPE sglang:token_usage gauge\nsglang:token_usage{{model_name="m"}} {n / 10}\n'


def test_gauge_sampler_keeps_the_maxima_and_counts_failed_scrapes(metrics_server):
    server = metrics_server((200, _running(1)), (200, _running(4)), (500, "oops"), (200, _running(2)))
    sampler = GaugeSampler(server.url, SGLANG_METRICS, interval_s=0.01).start()
    while server.hits < 6:
        threading.Event().wait(0.01)
    result = sampler.stop()
    assert result["requests_running"] == 4 and result["kv_cache_usage"] == pytest.approx(0.4)
    assert "requests_waiting" not in result  # this server has no queue gauge
    assert result["failed_scrapes"] == 1 and result["samples"] == server.hits - 1
    assert "500" in sampler.last_error


def test_gauge_sampler_never_raises_when_the_server_is_gone():
    sampler = GaugeSampler(f"http://127.0.0.1:{_closed_port()}", VLLM_METRICS, interval_s=0.01).start()
    threading.Event().wait(0.05)
    result = sampler.stop()
    assert result["samples"] == 0 and result["failed_scrapes"] >= 1
    assert "connection refused" in sampler.last_error
