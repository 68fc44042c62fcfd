"""The known truth bench/validity.py holds the intervals against: the stub's per-request
gap distribution, and the script's pure helpers (the until_stable stop, coverage counting)."""

import math
import statistics
from types import SimpleNamespace

import pytest

from tests.core.bench_modules import load_bench

stub = load_bench("stub_server")
bench = load_bench("validity")


def options(itl_ms=10.0, jitter=None, seed=0):
    args = stub.argparse.Namespace(ttft_ms=0.0, itl_ms=itl_ms, itl_jitter=jitter, seed=seed, tokens_per_chunk=1,
                                   model="m", context_len=0, overflow_style="sglang", spec_accept=False,
                                   tokenize="sglang", interleave=False,
                                   prompt_count="words")
    return stub.Options(args)


@pytest.mark.parametrize("text, sigma", [(None, 0.0), ("", 0.0), ("none", 0.0), ("lognormal:0.25", 0.25),
                                         ("lognormal:0", 0.0)])
def test_jitter_flag_reads_lognormal_sigma_or_none(text, sigma):
    assert stub.parse_jitter(text) == sigma


@pytest.mark.parametrize("text, says", [("normal:0.2", "lognormal:SIGMA"), ("lognormal", "lognormal:SIGMA"),
                                        ("lognormal:x", "must be a number"), ("lognormal:-1", "between 0 and 3"),
                                        ("lognormal:nan", "between 0 and 3")])
def test_a_bad_jitter_flag_is_refused_with_what_it_takes(text, says):
    with pytest.raises(ValueError, match=says):
        stub.parse_jitter(text)


def test_a_bad_jitter_flag_exits_with_a_usage_error_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as exit_:
        stub.main(["--itl-jitter", "uniform:1"])
    assert exit_.value.code == 2
    assert "--itl-jitter takes lognormal:SIGMA" in capsys.readouterr().err


def test_without_jitter_every_request_gets_the_nominal_gap():
    o = options(itl_ms=10.0)
    assert {o.request_itl() for _ in range(50)} == {0.010}


def test_jittered_gaps_are_lognormal_around_the_nominal_gap_with_the_given_sigma():
    o = options(itl_ms=10.0, jitter="lognormal:0.25", seed=7)
    gaps = [o.request_itl() for _ in range(20000)]
    logs = [math.log(g / 0.010) for g in gaps]
    assert abs(statistics.median(gaps) / 0.010 - 1) < 0.01  # the truth the intervals must contain
    assert abs(statistics.mean(logs)) < 0.01
    assert abs(statistics.stdev(logs) - 0.25) < 0.005


def test_the_same_seed_draws_the_same_gaps_in_order():
    a, b = options(jitter="lognormal:0.5", seed=3), options(jitter="lognormal:0.5", seed=3)
    c = options(jitter="lognormal:0.5", seed=4)
    first = [a.request_itl() for _ in range(5)]
    assert first == [b.request_itl() for _ in range(5)]
    assert first != [c.request_itl() for _ in range(5)]


def test_binomial_standard_error_of_a_coverage():
    assert bench.binomial_se(380, 400) == pytest.approx(math.sqrt(0.95 * 0.05 / 400))
    assert bench.binomial_se(0, 10) == 0.0
    with pytest.raises(ValueError):
        bench.binomial_se(0, 0)


def test_an_interval_contains_its_ends_and_no_interval_is_unknown():
    assert bench.contains([1.0, 2.0], 1.0) and bench.contains([1.0, 2.0], 2.0)
    assert bench.contains([1.0, 2.0], 2.5) is False
    assert bench.contains(None, 1.0) is None


def requests(speeds, tokens=33):
    """Completed request records whose decode speed is each of ``speeds`` (tok/s)."""
    return [SimpleNamespace(error_kind="", output_tokens=tokens, chunk_offsets=[0.1, 0.1 + (tokens - 1) / s],
                            chunk_tokens=[1, tokens - 1]) for s in speeds]


def test_until_stable_goes_on_below_min_requests_even_when_the_values_agree():
    decided = []
    keep_going = bench.stable_keep_going("decode_tok_s", 0.05, 8, decided)
    assert keep_going(requests([100.0] * 7)) is True
    assert decided == []


def test_until_stable_stops_once_the_interval_is_narrow_enough_and_says_when():
    decided = []
    keep_going = bench.stable_keep_going("decode_tok_s", 0.05, 5, decided)
    assert keep_going(requests([100.0, 101.0, 99.0, 100.5, 99.5, 100.2])) is False
    assert decided[0][0] == 6 and decided[0][1] <= 0.05
    assert keep_going(requests([1.0, 1000.0] * 4)) is False  # once decided, it stays stopped
    assert len(decided) == 1


def test_until_stable_goes_on_while_the_interval_is_wide():
    decided = []
    keep_going = bench.stable_keep_going("decode_tok_s", 0.05, 5, decided)
    assert keep_going(requests([50.0, 150.0, 80.0, 120.0, 100.0, 60.0, 140.0])) is True
    assert decided == []
