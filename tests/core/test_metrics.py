"""sweepcore.metrics against hand-computed examples (pure; no DB, no processes)."""

import math
from dataclasses import asdict

import pytest

from sweepcore import metrics
from sweepcore.loadgen import RequestResult
from sweepcore.metrics import SUMMARY_FIELDS, percentile, pstdev, request_itls, summarize


def rec(index, send, offs, toks, *, prompt=None, kind="", err="", spec=None, status=200):
    return RequestResult(
        index=index, send_time=send, chunk_offsets=list(offs), chunk_tokens=list(toks),
        prompt_tokens=prompt, output_tokens=sum(toks), token_count_source="server_cumulative",
        finish_reason="length" if not kind else "", http_status=status, error_kind=kind,
        error=err, spec_verify_ct=spec,
    )


def approx(x):
    return pytest.approx(x, rel=1e-9, abs=1e-9)


@pytest.fixture
def point():
    return [
        # ttft 100, e2el 130, tpot 15, itl [10, 20], decode 2/0.03
        rec(0, 100.0, [0.100, 0.110, 0.130], [1, 1, 1], prompt=10),
        # second chunk carries 3 tokens: ttft 200, e2el 260, tpot 20, itl [20, 20, 20]
        rec(1, 100.9, [0.200, 0.260], [1, 3], prompt=20),
        rec(2, 101.0, [], [], kind="http_error", err="HTTP 500: boom", status=500),
        # an error-free 200 with no tokens is not a success
        rec(3, 101.0, [], [], kind=""),
        rec(4, 101.2, [0.05], [1], kind="error_in_stream", err="overloaded"),
    ]


def test_hand_computed_point(point):
    s = summarize(point, 2.0, client_bound=False, event_loop_lag_p99_ms=0.7)
    assert list(s) == list(SUMMARY_FIELDS)
    assert (s["completed"], s["failed"]) == (2, 3)
    assert s["duration"] == 2.0
    assert s["total_input_tokens"] == 30
    assert s["total_output_tokens"] == 7
    assert s["request_throughput"] == approx(1.0)
    assert s["output_throughput"] == approx(3.5)
    assert s["total_token_throughput"] == approx(18.5)
    assert s["mean_ttft_ms"] == approx(150.0)
    assert s["median_ttft_ms"] == approx(150.0)
    assert s["std_ttft_ms"] == approx(50.0)
    assert s["p90_ttft_ms"] == approx(190.0)
    assert s["p99_ttft_ms"] == approx(199.0)
    assert s["mean_e2el_ms"] == approx(195.0)
    assert s["mean_tpot_ms"] == approx(17.5)
    assert s["median_tpot_ms"] == approx(17.5)
    # pooled ITL [10, 20, 20, 20, 20]
    assert s["mean_itl_ms"] == approx(18.0)
    assert s["median_itl_ms"] == approx(20.0)
    assert s["std_itl_ms"] == approx(4.0)
    assert s["p90_itl_ms"] == approx(20.0)
    assert s["decode_tok_s"] == approx((2 / 0.03 + 3 / 0.06) / 2)
    # request 0: 3 tokens in second 0; request 1 sent at +0.9 s: 4 tokens at 1.1 s / 1.16 s
    assert s["max_output_tokens_per_s"] == 4.0
    assert s["accept_length"] is None
    assert s["errors"] == {
        "http_error": {"count": 1, "example": "HTTP 500: boom"},
        "empty_response": {"count": 1, "example": "HTTP 200 with zero output tokens"},
        "error_in_stream": {"count": 1, "example": "overloaded"},
    }
    assert s["client_bound"] is False
    assert s["event_loop_lag_p99_ms"] == 0.7


def test_first_chunk_with_several_tokens_gives_zero_gaps_and_itl_mean_equals_tpot():
    r = rec(0, 0.0, [0.050, 0.080, 0.090], [3, 2, 1])  # 6 tokens
    gaps = [g * 1000 for g in request_itls(r)]
    assert gaps == pytest.approx([0, 0, 15, 15, 10])
    s = summarize([r], 1.0)
    assert s["mean_tpot_ms"] == approx(40.0 / 5)
    assert s["mean_itl_ms"] == approx(s["mean_tpot_ms"])
    assert s["median_itl_ms"] == approx(10.0)
    assert s["decode_tok_s"] == approx(5 / 0.040)


def test_one_token_responses_have_ttft_but_no_tpot_itl_decode():
    rs = [rec(0, 0.0, [0.020], [1]), rec(1, 0.0, [0.040], [1])]
    s = summarize(rs, 0.5)
    assert s["completed"] == 2
    assert s["mean_ttft_ms"] == approx(30.0)
    assert s["mean_e2el_ms"] == approx(30.0)
    for st in metrics.STATS:
        assert s[f"{st}_tpot_ms"] is None
        assert s[f"{st}_itl_ms"] is None
    assert s["decode_tok_s"] is None
    assert s["output_throughput"] == approx(4.0)


def test_all_tokens_in_one_chunk_has_tpot_zero_and_no_decode_speed():
    r = rec(0, 0.0, [0.030], [5])
    s = summarize([r], 1.0)
    assert s["mean_tpot_ms"] == 0.0
    assert s["decode_tok_s"] is None
    assert s["mean_itl_ms"] == 0.0


def test_all_failed_point_has_none_latencies_and_zero_throughput():
    rs = [rec(i, 0.0, [], [], kind="connection_refused", err="refused") for i in range(3)]
    s = summarize(rs, 1.5)
    assert (s["completed"], s["failed"]) == (0, 3)
    assert s["request_throughput"] == 0.0 and s["output_throughput"] == 0.0
    assert s["total_output_tokens"] == 0
    for m in metrics.LATENCIES:
        for st in metrics.STATS:
            assert s[f"{st}_{m}_ms"] is None
    assert s["decode_tok_s"] is None
    assert s["max_output_tokens_per_s"] is None
    assert s["errors"] == {"connection_refused": {"count": 3, "example": "refused"}}
    s0 = summarize([], None)
    assert s0["completed"] == 0 and s0["request_throughput"] is None


def test_percentiles_with_few_samples_match_numpy_linear():
    # numpy.percentile([1, 2, 3, 4], q) -> 50: 2.5, 90: 3.7, 99: 3.97
    assert percentile([4, 1, 3, 2], 50) == approx(2.5)
    assert percentile([4, 1, 3, 2], 90) == approx(3.7)
    assert percentile([4, 1, 3, 2], 99) == approx(3.97)
    assert percentile([7.5], 99) == 7.5
    assert percentile([1, 2], 90) == approx(1.9)
    assert percentile([], 50) is None
    assert pstdev([2, 4, 4, 4, 5, 5, 7, 9]) == approx(2.0)
    assert pstdev([3.0]) == 0.0


def test_percentiles_over_infinite_values_are_infinite_only_where_they_interpolate_towards_one():
    inf = math.inf
    assert percentile([1, 2, inf], 50) == 2.0  # rank 1: on a finite value
    assert percentile([1, 2, inf], 75) == inf  # rank 1.5: half way to +inf
    assert percentile([inf, inf], 50) == inf  # not nan (0 * inf)
    assert percentile(list(range(99)) + [inf], 99) == inf  # rank 98.01
    assert percentile(list(range(100)) + [inf], 99) == 99.0  # rank 99


def test_accept_length_from_spec_verify_ct():
    rs = [rec(0, 0.0, [0.1, 0.2], [4, 6], spec=4), rec(1, 0.0, [0.1, 0.2], [2, 4], spec=4),
          rec(2, 0.0, [0.1], [1], kind="timeout_stall", err="stall", spec=9)]
    s = summarize(rs, 1.0)
    assert s["accept_length"] == approx(16 / 8)


def test_prompt_tokens_unknown_or_fallback():
    rs = [rec(0, 0.0, [0.1, 0.2], [1, 1], prompt=None), rec(1, 0.0, [0.1], [1], prompt=5)]
    assert summarize(rs, 1.0)["total_input_tokens"] is None
    assert summarize(rs, 1.0)["total_token_throughput"] is None
    s = summarize(rs, 1.0, prompt_tokens_fallback=7)
    assert s["total_input_tokens"] == 12
    assert s["total_token_throughput"] == approx(15.0)


def test_stored_dict_records_give_the_same_summary(point):
    as_dicts = [asdict(r) for r in point]
    a, b = summarize(point, 2.0), summarize(as_dicts, 2.0)
    assert a == b
    # a stored row without per-chunk counts falls back to one token per chunk
    d = dict(as_dicts[0], chunk_tokens=[])
    assert request_itls(d) == pytest.approx([0.010, 0.020])


def test_no_nan_or_inf_anywhere(point):
    s = summarize(point, 2.0)
    for k, v in s.items():
        if isinstance(v, float):
            assert math.isfinite(v), k


# --- intervals, samples, model time, stability -------------------------------------------


def steady(n, gap=0.01, tokens=16, ttft=0.05, jitter=0.0):
    out = []
    for i in range(n):
        g = gap * (1 + jitter * ((i % 5) - 2) / 2)
        out.append(rec(i, 100.0 + i, [ttft + g * k for k in range(tokens)], [1] * tokens, prompt=10))
    return out


def test_decode_speed_is_the_median_so_one_stalled_request_does_not_move_it():
    recs = steady(9) + [rec(9, 200.0, [0.05, 5.05], [1, 1], prompt=10)]  # 1 token in 5 s
    s = summarize(recs, 10.0)
    assert s["decode_tok_s"] == approx(100.0)


def test_summary_carries_intervals_of_the_medians_only_with_enough_requests():
    s = summarize(steady(12, jitter=0.2), 10.0)
    assert set(s["intervals"]) == set(metrics.INTERVAL_METRICS)
    for name in metrics.INTERVAL_METRICS:
        lo, hi = s["intervals"][name]
        assert lo <= s[name] <= hi, name
    assert summarize(steady(5), 10.0)["intervals"] == {}
    assert "intervals" not in metrics.FIELDS


def test_request_samples_per_metric():
    recs = steady(3) + [rec(3, 101.0, [], [], kind="http_error")]
    assert metrics.request_samples("decode_tok_s", recs) == [approx(100.0)] * 3
    assert metrics.request_samples("p99_ttft_ms", recs) == [approx(50.0)] * 3
    assert metrics.request_samples("median_itl_ms", recs) == [approx(10.0)] * 3  # each request's TPOT
    assert metrics.request_samples("output_throughput", recs) is None


def test_model_time_divides_times_and_multiplies_rates_by_the_scale():
    s = summarize(steady(8), 2.0)
    m = metrics.to_model_time(s, 0.02)
    assert m["median_tpot_ms"] == approx(s["median_tpot_ms"] * 50)
    assert m["duration"] == approx(100.0)
    assert m["decode_tok_s"] == approx(s["decode_tok_s"] / 50)
    assert m["output_throughput"] == approx(s["output_throughput"] / 50)
    assert m["intervals"]["median_ttft_ms"] == [approx(v * 50) for v in s["intervals"]["median_ttft_ms"]]
    assert m["completed"] == s["completed"] and m["event_loop_lag_p99_ms"] == s["event_loop_lag_p99_ms"]
    with pytest.raises(ValueError):
        metrics.to_model_time(s, 0)


# --- open loop: latencies from the scheduled send time -----------------------------------


@pytest.fixture
def open_loop():
    """Stored records of an open loop: each was sent ``send_lag`` seconds after its
    scheduled arrival."""
    rows = [
        # from the send: ttft 100, e2el 130; from the schedule: the same (on time)
        dict(asdict(rec(0, 100.0, [0.100, 0.130], [1, 1])), send_lag=0.0),
        # ttft 200, e2el 260, tpot 20; from the schedule 500 and 560
        dict(asdict(rec(1, 100.9, [0.200, 0.260], [1, 3])), send_lag=0.3),
        # ttft 100, e2el 120; from the schedule 200 and 220
        dict(asdict(rec(2, 101.0, [0.100, 0.120], [1, 1])), send_lag=0.1),
        # failed: in no latency, but its lag counts
        dict(asdict(rec(3, 101.5, [], [], kind="connection_refused", err="refused")), send_lag=0.5),
    ]
    return rows


def test_open_loop_ttft_and_e2el_are_measured_from_the_schedule(open_loop):
    s = summarize(open_loop, 2.0)
    assert list(s) == list(SUMMARY_FIELDS)
    # TTFT from the schedule [100, 500, 200]; E2EL [130, 560, 220]
    assert s["mean_ttft_ms"] == approx(800 / 3)
    assert s["median_ttft_ms"] == approx(200.0)
    assert s["std_ttft_ms"] == approx(pstdev([100, 500, 200]))
    assert s["p90_ttft_ms"] == approx(440.0)  # rank 1.8 of [100, 200, 500]
    assert s["p99_ttft_ms"] == approx(494.0)
    assert s["median_e2el_ms"] == approx(220.0)
    assert s["p99_e2el_ms"] == approx(220 + 0.98 * 340)
    # From the send, the figures without the wait: TTFT [100, 200, 100], E2EL [130, 260, 120]
    assert s["send_based"] == {
        "mean_ttft_ms": approx(400 / 3), "median_ttft_ms": approx(100.0),
        "std_ttft_ms": approx(pstdev([100, 200, 100])), "p90_ttft_ms": approx(180.0), "p99_ttft_ms": approx(198.0),
        "mean_e2el_ms": approx(170.0), "median_e2el_ms": approx(130.0),
        "std_e2el_ms": approx(pstdev([130, 260, 120])), "p90_e2el_ms": approx(234.0), "p99_e2el_ms": approx(257.4),
    }
    # The lag over every request, the failed one too: [0, 300, 100, 500]
    assert s["send_lag_median_ms"] == approx(200.0)
    assert s["send_lag_p99_ms"] == approx(494.0)  # rank 2.97
    assert s["send_lag_max_ms"] == approx(500.0)
    # Between tokens nothing changes.
    closed = summarize([{k: v for k, v in r.items() if k != "send_lag"} for r in open_loop], 2.0)
    for field in [f"{st}_{m}_ms" for m in ("tpot", "itl") for st in metrics.STATS] + ["decode_tok_s"]:
        assert s[field] == closed[field], field
    assert closed["median_ttft_ms"] == approx(100.0)  # the closed loop's TTFT is from the send
    assert {k: closed[k] for k in metrics.OPEN_LOOP_FIELDS} == dict.fromkeys(metrics.OPEN_LOOP_FIELDS)
    # The lags are point columns; the send-based latencies a mapping beside them.
    assert set(metrics.SEND_LAG_FIELDS) <= set(metrics.FIELDS) and "send_based" not in metrics.FIELDS


def test_per_request_latencies_from_the_send_and_from_the_schedule(open_loop):
    late = open_loop[1]
    assert metrics.request_ttft(late) == approx(0.2) and metrics.request_e2el(late) == approx(0.26)
    assert metrics.request_ttft_scheduled(late) == approx(0.5)
    assert metrics.request_e2el_scheduled(late) == approx(0.56)
    assert metrics.request_send_lag(late) == approx(0.3)
    # In a closed loop (no key, or None on a RequestResult) the schedule is the send.
    closed = rec(0, 100.0, [0.1, 0.13], [1, 1])
    assert closed.send_lag is None and metrics.request_send_lag(closed) is None
    assert metrics.request_ttft_scheduled(closed) == approx(0.1)
    assert metrics.request_e2el_scheduled({"chunk_offsets": [0.1, 0.13]}) == approx(0.13)
    assert metrics.request_ttft_scheduled(open_loop[3]) is None  # no token


def test_samples_for_comparisons_are_the_stored_statistics_own(open_loop):
    s = summarize(open_loop, 2.0)
    ttfts = metrics.request_samples("median_ttft_ms", open_loop)
    assert ttfts == [approx(100.0), approx(500.0), approx(200.0)]
    assert percentile(ttfts, 50) == approx(s["median_ttft_ms"])
    e2els = metrics.request_samples("p99_e2el_ms", open_loop)
    assert e2els == [approx(130.0), approx(560.0), approx(220.0)]
    assert percentile(e2els, 99) == approx(s["p99_e2el_ms"])
    assert metrics.request_samples("median_tpot_ms", open_loop) == [approx(30.0), approx(20.0), approx(20.0)]


def test_model_time_converts_the_open_loop_figures(open_loop):
    s = summarize(open_loop, 2.0, event_loop_lag_p99_ms=0.7)
    m = metrics.to_model_time(s, 0.1)
    assert m["median_ttft_ms"] == approx(2000.0)
    assert m["send_lag_median_ms"] == approx(2000.0)
    assert m["send_lag_p99_ms"] == approx(4940.0) and m["send_lag_max_ms"] == approx(5000.0)
    assert m["send_based"] == {k: approx(v * 10) for k, v in s["send_based"].items()}
    assert m["event_loop_lag_p99_ms"] == 0.7  # the client's own lateness stays wall time
    assert s["send_based"]["median_ttft_ms"] == approx(100.0)  # the wall-time summary is left as it was
    closed = metrics.to_model_time(summarize(steady(3), 1.0), 0.1)
    assert closed["send_based"] is None and closed["send_lag_p99_ms"] is None


def test_the_server_s_own_medians_are_latencies_in_model_time_without_per_request_samples():
    m = metrics.to_model_time({"server_median_ttft_ms": 2.0, "server_median_itl_ms": 0.5, "server_decode_tok_s": 5000.0},
                              0.02)
    assert m == {"server_median_ttft_ms": approx(100.0), "server_median_itl_ms": approx(25.0),
                 "server_decode_tok_s": approx(100.0)}
    assert not metrics.higher_is_better("server_median_itl_ms")
    assert metrics.metric_label("server_median_ttft_ms") == "median TTFT as the server reported it (ms)"
    # Its histogram is all there is: it is never compared on our requests' values.
    assert metrics.request_samples("server_median_ttft_ms", steady(3)) is None


def test_stability_is_the_relative_half_width_once_there_are_enough_requests():
    assert metrics.stability("decode_tok_s", steady(5)) == (None, 5)
    width, n = metrics.stability("decode_tok_s", steady(12, jitter=0.2))
    assert n == 12 and 0 < width < 0.2
    assert metrics.stability("decode_tok_s", steady(12))[0] == approx(0.0)
    with pytest.raises(ValueError, match="until_stable cannot watch 'median_itl_ms'"):
        metrics.stability("median_itl_ms", steady(12))


# --- steady state: the ramp left out ------------------------------------------------------


def closed_loop_records():
    """Ten requests of four tokens, one a second, each streaming its tokens 0.1 s apart
    from 0.5 s after its send: sent at 0..9, ending at 0.8..9.8."""
    return [rec(i, float(i), [0.5, 0.6, 0.7, 0.8], [1, 1, 1, 1], prompt=10) for i in range(10)]


def test_mark_ramp_marks_the_first_and_last_shares_by_send_order():
    records = closed_loop_records()
    shuffled = records[5:] + records[:5]  # completion order is not send order
    assert metrics.mark_ramp(shuffled, 0.2, 0.1) == (2, 1)
    assert [r.in_ramp for r in records] == [True, True] + [False] * 7 + [True]
    # Marking again with other shares clears the earlier marks.
    assert metrics.mark_ramp(records, 0.0, 0.0) == (0, 0)
    assert not any(r.in_ramp for r in records)


def test_mark_ramp_keeps_at_least_one_request_measured():
    records = closed_loop_records()[:1]
    assert metrics.mark_ramp(records, 0.4, 0.1) == (0, 0)
    assert not records[0].in_ramp


def test_a_ramp_leaves_its_requests_out_of_the_statistics_and_rates_the_steady_window():
    records = closed_loop_records()
    records[0].chunk_offsets = [5.0, 5.1, 5.2, 5.3]  # the first request, in the ramp, was slow
    records[9].error_kind, records[9].error = "http_error", "HTTP 500"  # so failed the last one
    metrics.mark_ramp(records, 0.2, 0.1)
    s = summarize(records, 100.0)
    assert (s["completed"], s["failed"]) == (7, 0)
    assert s["median_ttft_ms"] == approx(500.0)
    assert s["ramp"] == {"first": 2, "last": 1}
    # The window: the first measured send (2.0) to the last measured request's last token (8.8).
    assert s["duration"] == approx(6.8)
    # Tokens arriving inside it from every request: request 0's (5.0-5.3) are in it,
    # request 1's (1.5-1.8) are not; requests 2..8 all; request 9 failed.
    assert s["output_throughput"] == approx((4 + 7 * 4) / 6.8)
    assert s["request_throughput"] == approx(8 / 6.8)  # requests 0 and 2..8 ended inside it
    assert s["total_token_throughput"] == approx((8 * 10 + 32) / 6.8)
    assert s["errors"] == {"http_error": {"count": 1, "example": "HTTP 500"}}  # the ramp's failure too


def test_without_a_ramp_the_duration_given_stands():
    records = closed_loop_records()
    s = summarize(records, 20.0)
    assert s["ramp"] is None and s["duration"] == 20.0
    assert s["output_throughput"] == approx(40 / 20.0)
    assert metrics.measured_seconds(records) is None


def test_measured_seconds_scales_the_window_to_the_measured_requests():
    records = closed_loop_records()
    metrics.mark_ramp(records, 0.2, 0.1)
    # Window 2.0 .. 8.8 holds the ends of requests 2..8 (7 of them); 7 requests are measured.
    assert metrics.measured_seconds(records) == approx(6.8 * 7 / 7)
    records[1].chunk_offsets = [0.5, 0.6, 0.7, 2.5]  # a ramp request that now ends inside it
    assert metrics.measured_seconds(records) == approx(6.8 * 7 / 8)


def test_ramp_requests_are_no_samples_for_comparisons():
    records = closed_loop_records()
    metrics.mark_ramp(records, 0.2, 0.1)
    assert len(metrics.request_samples("median_tpot_ms", records)) == 7
