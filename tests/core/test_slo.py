"""sweepcore.slo against hand-made records (pure; no DB, no processes)."""

import json
import math

import pytest

from sweepcore import metrics, slo
from sweepcore.slo import SLO_EXAMPLE, SLO_KEYS, evaluate, normalise, slo_errors


def req(ttft, gaps=(), *, lag=None, kind=""):
    """A request record as the executor stores it: one token per chunk, its first after
    ``ttft`` seconds, the next ones ``gaps`` seconds apart; ``lag`` its open-loop send lag."""
    offs = [ttft]
    for gap in gaps:
        offs.append(offs[-1] + gap)
    if kind:
        offs = []
    record = {"send_time": 100.0, "chunk_offsets": offs, "chunk_tokens": [1] * len(offs),
              "output_tokens": len(offs), "error_kind": kind}
    if lag is not None:
        record["send_lag"] = lag
    return record


def failed(lag=None):
    return req(0.0, kind="http_error", lag=lag)


def approx(x):
    return pytest.approx(x, rel=1e-9, abs=1e-9)


def test_failed_requests_are_misses_and_count_in_attainment_and_goodput():
    records = [req(0.1), req(0.2), req(0.3), failed()]
    out = evaluate(records, 2.0, {"ttft_p50_ms": 260})
    assert (out.met_requests, out.total_requests) == (2, 4)  # 0.3 s is over; the failure is a miss
    assert out.slo_attainment == 0.5
    assert out.goodput == approx(1.0)  # 2 met in 2 s
    # p50 of [100, 200, 300, inf]: rank 1.5, half way from 200 to 300
    assert out.checks == {"ttft_p50_ms": {"limit": 260.0, "observed": approx(250.0), "met": True}}
    assert out.slo_met is True
    assert evaluate(records, 2.0, {"ttft_p50_ms": 240}).slo_met is False
    # A failure is a miss however fast its tokens came.
    stalled = dict(req(0.01, [0.01]), error_kind="timeout_stall")
    assert evaluate([stalled], 1.0, {"ttft_p99_ms": 100}).met_requests == 0


def test_one_failure_among_100_misses_p99_but_among_101_it_does_not():
    # Ranks of p99: 0.99 * 99 = 98.01 (between the 99th value and the failure's +inf:
    # +inf); 0.99 * 100 = 99 exactly (the 100th value, a completed request's 100 ms).
    ninety_nine = [req(i / 1000) for i in range(1, 100)] + [failed()]
    out = evaluate(ninety_nine, 10.0, {"ttft_p99_ms": 1000})
    assert out.checks["ttft_p99_ms"] == {"limit": 1000.0, "observed": None, "met": False}
    assert out.slo_met is False
    assert (out.met_requests, out.slo_attainment) == (99, 0.99)  # every completed request met it

    hundred = [req(i / 1000) for i in range(1, 101)] + [failed()]
    out = evaluate(hundred, 10.0, {"ttft_p99_ms": 1000})
    assert out.checks["ttft_p99_ms"] == {"limit": 1000.0, "observed": approx(100.0), "met": True}
    assert out.slo_met is True and out.met_requests == 100
    # A second failure (102 requests, rank 99.99: between the 100th value and +inf) misses.
    assert evaluate(hundred + [failed()], 10.0, {"ttft_p99_ms": 1000}).slo_met is False


def test_with_nothing_failed_the_observed_percentiles_are_the_point_s_own():
    records = [req(0.05 + 0.013 * i, [0.01 + 0.001 * (i % 7)] * 5) for i in range(40)]
    summary = metrics.summarize(records, 4.0)
    out = evaluate(records, 4.0, {"ttft_p99_ms": 1e6, "ttft_p90_ms": 1e6, "tpot_p50_ms": 1e6, "e2el_p99_ms": 1e6})
    assert out.checks["ttft_p99_ms"]["observed"] == approx(summary["p99_ttft_ms"])
    assert out.checks["ttft_p90_ms"]["observed"] == approx(summary["p90_ttft_ms"])
    assert out.checks["tpot_p50_ms"]["observed"] == approx(summary["median_tpot_ms"])
    assert out.checks["e2el_p99_ms"]["observed"] == approx(summary["p99_e2el_ms"])
    assert out.slo_met is True and out.slo_attainment == 1.0


def test_open_loop_lag_pushes_a_request_over_the_ttft_limit():
    on_time = req(0.1, [0.01], lag=0.0)
    late = req(0.1, [0.01], lag=0.5)  # sent 0.5 s after its scheduled arrival
    out = evaluate([on_time, late], 1.0, {"ttft_p50_ms": 500})
    assert out.met_requests == 1  # 100 ms against 600 ms from the schedule
    # p50 of [100, 600] from the schedule: 350, within the limit, as the point's median
    assert out.checks["ttft_p50_ms"]["observed"] == approx(350.0)
    assert out.checks["ttft_p50_ms"]["observed"] == approx(metrics.summarize([on_time, late], 1.0)["median_ttft_ms"])
    # E2EL from the schedule too; TPOT is between tokens and the lag does not touch it.
    assert evaluate([late], 1.0, {"e2el_p99_ms": 200}).met_requests == 0
    assert evaluate([late], 1.0, {"tpot_p99_ms": 10.5}).met_requests == 1
    # Without the lag (a closed loop) the same latencies meet the limit.
    assert evaluate([req(0.1, [0.01])] * 2, 1.0, {"ttft_p50_ms": 500}).met_requests == 2


def test_itl_limits_each_request_s_own_percentile_of_its_gaps():
    # Gaps of 10 ms nine times and one of 50 ms: p50 10, p90 14 (rank 8.1), p99 46.4 (rank 8.91).
    jumpy = req(0.05, [0.01] * 9 + [0.05])
    assert evaluate([jumpy], 1.0, {"itl_p50_ms": 11}).met_requests == 1
    assert evaluate([jumpy], 1.0, {"itl_p90_ms": 15}).met_requests == 1
    assert evaluate([jumpy], 1.0, {"itl_p90_ms": 13}).met_requests == 0
    out = evaluate([jumpy], 1.0, {"itl_p99_ms": 40})
    assert out.met_requests == 0
    assert out.checks["itl_p99_ms"] == {"limit": 40.0, "observed": approx(46.4), "met": False}
    # The point's ITL check is the percentile over requests of each one's own: p99 of
    # [10, 10, 46.4] is 45.67 ms (rank 1.98), over the limit, where the point's
    # p99_itl_ms pools the 30 gaps (29 of 10 ms, one of 50) and is 38.4 ms (rank 28.71).
    steady = req(0.05, [0.01] * 10)
    out = evaluate([steady, steady, jumpy], 1.0, {"itl_p50_ms": 11, "itl_p99_ms": 40})
    assert out.checks["itl_p50_ms"]["observed"] == approx(10.0)
    assert out.checks["itl_p99_ms"]["observed"] == approx(10.0 + 0.98 * 36.4)
    assert out.met_requests == 2 and out.slo_met is False
    assert metrics.summarize([steady, steady, jumpy], 1.0)["p99_itl_ms"] == approx(38.4)


def test_a_latency_a_request_does_not_have_limits_nothing():
    one_token = req(0.1)  # no TPOT, no gaps
    out = evaluate([one_token, one_token], 1.0, {"tpot_p99_ms": 1, "itl_p99_ms": 1})
    assert out.met_requests == 2 and out.slo_attainment == 1.0
    assert out.checks["tpot_p99_ms"] == {"limit": 1.0, "observed": None, "met": None}
    assert out.slo_met is True
    # A failure among them is an infinite TPOT: the check has a value and misses.
    out = evaluate([one_token, failed()], 1.0, {"tpot_p99_ms": 1})
    assert out.checks["tpot_p99_ms"] == {"limit": 1.0, "observed": None, "met": False}
    assert out.slo_met is False and out.met_requests == 1


def test_time_scale_converts_wall_latencies_to_model_time_and_goodput_to_model_rate():
    # At 0.1 x real time a wall 10 ms is 100 model ms.
    records = [req(0.01, [0.002]), req(0.02, [0.002])]
    out = evaluate(records, 2.0, {"ttft_p50_ms": 150}, time_scale=0.1)
    assert out.met_requests == 1  # 100 ms met, 200 ms not
    assert out.goodput == approx(0.05)  # 1 in 2 wall s = 0.5/s wall = 0.05/s of the model
    assert out.checks["ttft_p50_ms"]["observed"] == approx(150.0)
    model = metrics.to_model_time(metrics.summarize(records, 2.0), 0.1)
    assert out.checks["ttft_p50_ms"]["observed"] == approx(model["median_ttft_ms"])
    assert evaluate(records, 2.0, {"ttft_p50_ms": 150}).met_requests == 2  # real time: 10 and 20 ms
    with pytest.raises(ValueError, match="time scale must be > 0"):
        evaluate(records, 2.0, {"ttft_p50_ms": 150}, time_scale=0)


def test_no_requests_and_no_duration():
    out = evaluate([], 1.0, {"ttft_p99_ms": 100})
    assert (out.slo_attainment, out.slo_met, out.met_requests, out.total_requests) == (None, None, 0, 0)
    assert out.goodput == 0.0  # a rate over a measured second
    assert out.checks["ttft_p99_ms"] == {"limit": 100.0, "observed": None, "met": None}
    assert evaluate([req(0.01)], None, {"ttft_p99_ms": 100}).goodput is None
    assert evaluate([req(0.01)], 0.0, {"ttft_p99_ms": 100}).goodput is None


def test_the_outcome_is_json_for_storage():
    out = evaluate([req(0.1, [0.01]), failed()], 1.0, {"ttft_p99_ms": 200, "tpot_p99_ms": 50})
    stored = json.loads(json.dumps(out.as_dict()))
    assert stored == {
        "goodput": approx(1.0), "slo_attainment": 0.5, "slo_met": False, "met_requests": 1, "total_requests": 2,
        "checks": {"ttft_p99_ms": {"limit": 200.0, "observed": None, "met": False},
                   "tpot_p99_ms": {"limit": 50.0, "observed": None, "met": False}},
    }


# --- the spec's slo mapping -------------------------------------------------------------------


def test_keys_and_normalise():
    assert SLO_KEYS[:4] == ("ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "tpot_p50_ms")
    assert len(SLO_KEYS) == 12 and set(SLO_KEYS) >= {"itl_p90_ms", "e2el_p99_ms"}
    value = {"tpot_p99_ms": 200, "ttft_p99_ms": 2000.5}
    assert slo_errors(value) == []
    assert list(normalise(value).items()) == [("ttft_p99_ms", 2000.5), ("tpot_p99_ms", 200.0)]
    assert slo_errors(slo.normalise(value)) == []


ALL_KEYS = ", ".join(SLO_KEYS)


@pytest.mark.parametrize("value, errors", [
    ([2000], [f"slo: expected a mapping of latency limits such as {SLO_EXAMPLE}, got a list"]),
    (None, [f"slo: expected a mapping of latency limits such as {SLO_EXAMPLE}, got nothing"]),
    ("ttft_p99_ms=2000", [(f"slo: expected a mapping of latency limits such as {SLO_EXAMPLE}, "
                           "got 'ttft_p99_ms=2000'")]),
    ({}, [f"slo: expected at least one latency limit, such as {SLO_EXAMPLE}"]),
    ({"ttft_p99": 2000}, [f"slo.ttft_p99: unknown key (did you mean 'ttft_p99_ms'?); expected one of {ALL_KEYS}"]),
    ({"p99_ttft_ms": 2000}, [(f"slo.p99_ttft_ms: unknown key (did you mean 'ttft_p99_ms'?); "
                              f"expected one of {ALL_KEYS}")]),
    ({"goodput": 1}, [f"slo.goodput: unknown key; expected one of {ALL_KEYS}"]),
    ({"tpot_p99_ms": -1}, ["slo.tpot_p99_ms: expected a positive number of milliseconds, got -1"]),
    ({"tpot_p99_ms": 0}, ["slo.tpot_p99_ms: expected a positive number of milliseconds, got 0"]),
    ({"tpot_p99_ms": True}, ["slo.tpot_p99_ms: expected a positive number of milliseconds, got true"]),
    ({"tpot_p99_ms": "200"}, ["slo.tpot_p99_ms: expected a positive number of milliseconds, got '200'"]),
    ({"tpot_p99_ms": None}, ["slo.tpot_p99_ms: expected a positive number of milliseconds, got nothing"]),
    ({"tpot_p99_ms": math.inf}, ["slo.tpot_p99_ms: expected a positive number of milliseconds, got inf"]),
    ({"tpot_p99_ms": math.nan}, ["slo.tpot_p99_ms: expected a positive number of milliseconds, got nan"]),
    ({"ttft_p99": 1, "itl_p90_ms": -2, "e2el_p50_ms": 5}, [
        f"slo.ttft_p99: unknown key (did you mean 'ttft_p99_ms'?); expected one of {ALL_KEYS}",
        "slo.itl_p90_ms: expected a positive number of milliseconds, got -2",
    ]),
])
def test_every_slo_error_names_the_key_and_what_was_given(value, errors):
    assert slo_errors(value) == errors


def test_errors_carry_the_path_they_are_given_and_evaluate_refuses_an_invalid_slo():
    assert slo_errors({"tpot_p99_ms": -1}, path="sweep.slo") == [
        "sweep.slo.tpot_p99_ms: expected a positive number of milliseconds, got -1"]
    with pytest.raises(ValueError, match="slo.ttft_p99: unknown key"):
        evaluate([req(0.1)], 1.0, {"ttft_p99": 100})


def test_each_key_names_the_point_column_of_its_percentile():
    assert slo.point_field("ttft_p99_ms") == "p99_ttft_ms"
    assert slo.point_field("tpot_p50_ms") == "median_tpot_ms"
    assert slo.point_field("e2el_p90_ms") == "p90_e2el_ms"
    assert {slo.point_field(key) for key in SLO_KEYS} <= set(metrics.LATENCY_FIELDS)
    with pytest.raises(ValueError, match="not an SLO key"):
        slo.point_field("ttft_p95_ms")
