"""The capacity search (sweepcore.capacity), driven by synthetic servers whose capacity is
known: a pure function load -> Probe."""

import math
import random

import pytest

from sweepcore.capacity import (
    SEARCH_EXAMPLE,
    Capacity,
    Probe,
    SearchSpec,
    StopReason,
    conclude,
    grid_probes,
    next_load,
    parse_search,
    search_errors,
    search_probes_bound,
)

RATE = SearchSpec("request_rate", 0.25, 64, 0.1)
CONCURRENCY = SearchSpec("concurrency", 1, 64, 1)
TOKENS = 256  # output tokens per request: a served request/s is worth this many tok/s


def server(threshold, *, saturates_at=math.inf, fails_from=math.inf):
    """A server whose SLO holds up to ``threshold`` (inclusive), whose output throughput
    follows the load up to ``saturates_at`` and stays there, and which dies at every load
    from ``fails_from`` on."""

    def probe(load):
        if load >= fails_from:
            return Probe(load, meets_slo=False, goodput=None, output_throughput=None, server_failed=True)
        served = min(load, saturates_at)
        meets = load <= threshold
        return Probe(load, meets, goodput=served if meets else 0.0, output_throughput=served * TOKENS)

    return probe


def search(spec, measure):
    """Run a search to its end: (the probes in the order they were measured, the capacity)."""
    probes = []
    while (load := next_load(spec, probes)) is not None:
        assert load not in {p.load for p in probes}, f"{load} probed twice"
        assert spec.low <= load <= spec.high
        probes.append(measure(load))
        assert len(probes) <= spec.max_probes
    return probes, conclude(spec, probes)


# --- the capacity found -----------------------------------------------------------------

RATE_THRESHOLDS = [0.25 * 1.037**k for k in range(150)] + [0.26, 0.3, 0.49, 0.5, 0.51, 1, 5, 31.9, 32, 33, 63.9]


@pytest.mark.parametrize("threshold", RATE_THRESHOLDS)
def test_a_rate_search_finds_the_threshold_within_its_resolution(threshold):
    probes, capacity = search(RATE, server(threshold))
    assert capacity.stopped_because == StopReason.RESOLUTION
    assert capacity.load <= threshold < capacity.fails_at
    assert capacity.fails_at / capacity.load <= 1.1 + 1e-12
    assert capacity.probe.load == capacity.load and capacity.probe.meets_slo
    assert len(probes) <= search_probes_bound(RATE)
    assert all(isinstance(p.load, float) for p in probes)


def test_the_threshold_exactly_at_low_is_the_capacity():
    _, capacity = search(RATE, server(0.25))
    assert capacity.load == 0.25
    assert capacity.stopped_because == StopReason.RESOLUTION
    assert capacity.fails_at <= 0.25 * 1.1


@pytest.mark.parametrize("threshold", [0.0, 0.1, 0.2499])
def test_a_threshold_below_low_has_no_capacity(threshold):
    probes, capacity = search(RATE, server(threshold))
    assert [p.load for p in probes] == [0.25]
    assert capacity.load is None and capacity.probe is None
    assert capacity.stopped_because == StopReason.SLO_MISSED_AT_LOW
    assert capacity.message == (
        "SLO fails already at the lowest load, 0.25 req/s: no capacity between 0.25 req/s and 64 req/s"
    )


@pytest.mark.parametrize("threshold", [64, 64.5, 1000, math.inf])
def test_a_threshold_at_or_above_high_stops_there(threshold):
    probes, capacity = search(RATE, server(threshold))
    assert [p.load for p in probes] == [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]
    assert capacity.load == 64 and capacity.fails_at is None
    assert capacity.stopped_because == StopReason.REACHED_HIGH
    assert capacity.message == (
        "SLO holds at the highest load, 64 req/s: the capacity is at least that (raise high to search further)"
    )


def test_high_off_the_doubling_ladder_is_probed_once_clipped():
    spec = SearchSpec("request_rate", 1, 10, 0.1)
    probes, capacity = search(spec, server(9))
    assert [p.load for p in probes][:5] == [1, 2, 4, 8, 10]
    assert 8 <= capacity.load <= 9 < capacity.fails_at <= 10
    probes, capacity = search(spec, server(10))
    assert [p.load for p in probes] == [1, 2, 4, 8, 10]
    assert capacity.stopped_because == StopReason.REACHED_HIGH


@pytest.mark.parametrize("threshold", range(1, 64))
def test_a_concurrency_search_finds_the_exact_integer(threshold):
    probes, capacity = search(CONCURRENCY, server(threshold))
    assert capacity.stopped_because == StopReason.RESOLUTION
    assert (capacity.load, capacity.fails_at) == (threshold, threshold + 1)
    assert all(type(p.load) is int for p in probes)
    assert type(capacity.load) is int


def test_concurrency_edges():
    _, capacity = search(CONCURRENCY, server(0))
    assert capacity.stopped_because == StopReason.SLO_MISSED_AT_LOW and capacity.load is None
    for threshold in (64, 100):
        probes, capacity = search(CONCURRENCY, server(threshold))
        assert [p.load for p in probes] == [1, 2, 4, 8, 16, 32, 64]
        assert capacity.stopped_because == StopReason.REACHED_HIGH and capacity.load == 64


@pytest.mark.parametrize("threshold", [5, 13, 22, 37, 58])
def test_a_coarser_concurrency_resolution_stops_earlier(threshold):
    spec = SearchSpec("concurrency", 2, 60, 4)
    probes, capacity = search(spec, server(threshold))
    assert capacity.load <= threshold < capacity.fails_at <= capacity.load + 4
    assert len(probes) < len(search(SearchSpec("concurrency", 2, 60, 1), server(threshold))[0])


def test_the_resolution_message_names_both_ends():
    probes = [Probe(load, load <= 4, 1.0, 100.0) for load in (0.25, 0.5, 1, 2, 4, 4.4)]
    assert next_load(RATE, probes) is None
    assert conclude(RATE, probes).message == "SLO holds at 4 req/s and fails at 4.4 req/s (resolution 10 %)"
    _, capacity = search(CONCURRENCY, server(12))
    assert capacity.message == "SLO holds at concurrency 12 and fails at concurrency 13 (resolution 1)"


def test_a_bracket_of_exactly_the_resolution_is_within_it():
    # 1.1099 / 1.009 is 1.1 in decimals and 1.1000000000000003 in floats.
    spec = SearchSpec("request_rate", 1, 8, 0.1)
    probes = [Probe(1, True, 1, 256), Probe(2, False, 0, 300), Probe(1.009, True, 1, 258), Probe(1.1099, False, 0, 280)]
    assert next_load(spec, probes) is None
    assert conclude(spec, probes).stopped_because == StopReason.RESOLUTION


def test_bisection_loads_read_short():
    for threshold in RATE_THRESHOLDS:
        probes, _ = search(RATE, server(threshold))
        assert all(float(f"{p.load:.4g}") == p.load for p in probes), [p.load for p in probes]


# --- saturation and failure ----------------------------------------------------------------


def test_a_saturated_server_stops_the_search_at_the_highest_passing_load():
    probes, capacity = search(RATE, server(math.inf, saturates_at=6))
    assert [p.load for p in probes] == [0.25, 0.5, 1, 2, 4, 8, 16]
    assert capacity.stopped_because == StopReason.SATURATED
    assert capacity.load == 16 and capacity.fails_at is None
    assert capacity.message == (
        "the server is saturated: output throughput 1536 tok/s at 8 req/s, 1536 tok/s at 16 req/s "
        "(+0.0 % for twice the load, less than 5 %); the capacity is 16 req/s, the highest load probed, "
        "where the SLO still holds"
    )


@pytest.mark.parametrize("growth, saturated", [(0.049, True), (0.051, False), (-0.2, True)])
def test_saturation_is_throughput_growing_less_than_the_share_for_a_doubled_load(growth, saturated):
    def measure(load):
        throughput = 1000.0 * load if load <= 4 else 4000.0 * (1 + growth) * (load / 8)
        return Probe(load, True, load, throughput)

    probes, capacity = search(CONCURRENCY, measure)
    if saturated:
        assert [p.load for p in probes] == [1, 2, 4, 8]
        assert capacity.stopped_because == StopReason.SATURATED and capacity.load == 8
    else:
        assert capacity.stopped_because == StopReason.REACHED_HIGH


def test_flat_throughput_over_a_load_that_did_not_double_is_no_saturation():
    # A history from another search's loads: 1.5 is no doubling of 1.
    spec = SearchSpec("request_rate", 1, 64, 0.1)
    assert next_load(spec, [Probe(1, True, 1, 256.0), Probe(1.5, True, 1.5, 257.0)]) == 3
    assert next_load(spec, [Probe(1, True, 1, 256.0), Probe(2, True, 2, 257.0)]) is None


def test_saturation_is_judged_only_while_bracketing():
    # Flat throughput between close loads is no sign of saturation once the SLO has failed.
    _, capacity = search(RATE, server(7, saturates_at=5))
    assert capacity.stopped_because == StopReason.RESOLUTION
    assert capacity.load <= 7 < capacity.fails_at <= capacity.load * 1.1


def test_a_server_that_dies_stops_the_search_with_the_last_passing_load():
    probes, capacity = search(RATE, server(math.inf, fails_from=10))
    assert [p.load for p in probes] == [0.25, 0.5, 1, 2, 4, 8, 16]
    assert capacity.stopped_because == StopReason.SERVER_FAILED
    assert (capacity.load, capacity.fails_at) == (8, 16)
    assert capacity.message == "the server failed at 16 req/s; SLO holds at 8 req/s"


def test_a_server_that_dies_during_bisection_keeps_the_bracket_found():
    probes = [Probe(load, load <= 4, 1.0, 100.0) for load in (0.25, 0.5, 1, 2, 4, 8)]
    assert next_load(RATE, probes) == 5.66
    probes.append(Probe(5.66, False, None, None, server_failed=True))
    assert next_load(RATE, probes) is None
    capacity = conclude(RATE, probes)
    assert capacity.stopped_because == StopReason.SERVER_FAILED
    assert (capacity.load, capacity.fails_at) == (4, 5.66)
    assert capacity.message == "the server failed at 5.66 req/s; SLO holds at 4 req/s"


def test_a_server_that_dies_above_an_slo_miss_says_both():
    probes = [Probe(load, load <= 4, 1.0, 100.0) for load in (0.25, 0.5, 1, 2, 4)]
    probes += [Probe(8, False, None, None, server_failed=True), Probe(5.7, False, 0.5, 90.0)]
    capacity = conclude(RATE, probes)
    assert capacity.message == "the server failed at 8 req/s; SLO holds at 4 req/s and fails at 5.7 req/s"


def test_a_server_that_dies_at_low_has_no_capacity():
    probes, capacity = search(RATE, server(math.inf, fails_from=0))
    assert len(probes) == 1
    assert capacity.load is None and capacity.stopped_because == StopReason.SERVER_FAILED
    assert capacity.message == "the server failed at 0.25 req/s; no load below it meets the SLO"


def test_max_probes_bounds_the_search():
    spec = SearchSpec("request_rate", 0.25, 64, 0.1, max_probes=5)
    probes, capacity = search(spec, server(10))
    assert [p.load for p in probes] == [0.25, 0.5, 1, 2, 4]
    assert capacity.stopped_because == StopReason.PROBE_LIMIT and capacity.load == 4
    assert capacity.message == "stopped after 5 probes (max_probes 5); SLO holds at 4 req/s"
    spec = SearchSpec("request_rate", 0.25, 64, 0.1, max_probes=8)
    _, capacity = search(spec, server(10))
    assert capacity.message == "stopped after 8 probes (max_probes 8); SLO holds at 8 req/s and fails at 11.3 req/s"


def test_a_search_that_ends_on_its_last_allowed_probe_says_why_it_ended():
    spec = SearchSpec("concurrency", 1, 8, 1, max_probes=4)
    probes, capacity = search(spec, server(8))
    assert len(probes) == 4 and capacity.stopped_because == StopReason.REACHED_HIGH


# --- the history ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec, threshold", [(RATE, 0.3), (RATE, 5.2), (RATE, 47), (CONCURRENCY, 23)])
def test_the_order_of_the_history_does_not_matter(spec, threshold):
    probes, capacity = search(spec, server(threshold))
    shuffler = random.Random(15)
    for k in range(len(probes) + 1):
        for _ in range(5):
            history = probes[:k]
            shuffler.shuffle(history)
            assert next_load(spec, history) == (probes[k].load if k < len(probes) else None)
    history = list(reversed(probes))
    assert conclude(spec, history) == capacity


def noisy_server(seed, high):
    """A server whose SLO holds or fails at random, more often at loads near ``high``, and
    which now and then dies: whether the SLO holds is no function of the load."""
    noise = random.Random(seed)

    def probe(load):
        meets = noise.random() < 1 - load / (1.2 * high)
        dies = noise.random() < 0.02
        return Probe(load, meets, load if meets else 0.0, noise.uniform(100, 2000), server_failed=dies)

    return probe


@pytest.mark.parametrize("spec", [RATE, CONCURRENCY, SearchSpec("request_rate", 0.5, 3, 0.02)])
def test_a_noisy_server_never_gets_a_load_twice_and_the_search_ends(spec):
    for seed in range(200):
        # search() asserts that no load comes twice, each within range and max_probes.
        probes, capacity = search(spec, noisy_server(seed, spec.high))
        if capacity.load is not None:
            assert capacity.probe.meets_slo and not capacity.probe.server_failed
            assert capacity.fails_at is None or capacity.load < capacity.fails_at
        assert conclude(spec, probes[::-1]) == capacity


def test_a_passing_probe_above_a_failing_one_does_not_move_the_bracket():
    spec = SearchSpec("request_rate", 1, 16, 0.1)
    probes = [Probe(1, True, 1, 256), Probe(2, False, 0, 300), Probe(4, True, 4, 1024)]
    assert next_load(spec, probes) == 1.41
    probes.append(Probe(1.41, True, 1.41, 361))
    assert next_load(spec, probes) == 1.68
    probes.append(Probe(1.68, False, 0, 400))
    assert next_load(spec, probes) == 1.54
    probes.append(Probe(1.54, True, 1.54, 394))
    capacity = conclude(spec, probes)
    assert (capacity.load, capacity.fails_at) == (1.54, 1.68)


def test_two_probes_at_one_load_meet_the_slo_only_if_both_do():
    spec = SearchSpec("request_rate", 1, 16, 0.1)
    probes = [Probe(1, True, 1, 256), Probe(2, True, 2, 512), Probe(2, False, 0, 500)]
    assert next_load(spec, probes) == next_load(spec, probes[::-1]) == 1.41


def test_probes_outside_the_range_belong_to_another_search():
    spec = SearchSpec("request_rate", 1, 8, 0.1)
    assert next_load(spec, [Probe(0.5, False, 0, 0), Probe(16, False, 0, 0)]) == 1
    assert next_load(spec, [Probe(0.5, False, 0, 0), Probe(1, True, 1, 256), Probe(16, False, 0, 0)]) == 2


def test_loads_from_the_database_compare_with_the_searchs_own():
    # Stored concurrencies may come back as floats; they are the same loads.
    probes = [Probe(float(c), True, c, 100.0 * c) for c in (1, 2, 4)] + [Probe(8.0, False, 0, 700.0)]
    assert next_load(CONCURRENCY, probes) == 6 and type(next_load(CONCURRENCY, probes)) is int
    probes += [Probe(6.0, True, 6, 600.0), Probe(7.0, False, 0, 650.0)]
    capacity = conclude(CONCURRENCY, probes)
    assert (capacity.load, capacity.fails_at) == (6, 7)
    assert type(capacity.load) is int and type(capacity.fails_at) is int


def test_conclude_refuses_a_search_that_is_not_over():
    with pytest.raises(ValueError, match="the search is not over: it would probe 0.25 req/s next"):
        conclude(RATE, [])
    with pytest.raises(ValueError, match="it would probe concurrency 2 next"):
        conclude(CONCURRENCY, [Probe(1, True, 1, 100)])


def test_capacity_as_dict():
    probe = Probe(4.0, True, 3.9, 998.0)
    capacity = Capacity(4.0, probe, StopReason.RESOLUTION, "m", 4.4)
    assert capacity.as_dict() == {
        "load": 4.0, "goodput": 3.9, "output_throughput": 998.0, "fails_at": 4.4,
        "stopped_because": "resolution", "message": "m",
    }
    assert Capacity(None, None, StopReason.SLO_MISSED_AT_LOW, "m").as_dict()["goodput"] is None
    assert StopReason.SATURATED.label == "server saturated"


# --- cost ------------------------------------------------------------------------------------


def test_the_search_costs_a_fraction_of_a_grid():
    assert grid_probes(RATE) == 60  # ceil(log(256) / log(1.1)) + 1
    assert grid_probes(CONCURRENCY) == 64
    assert grid_probes(SearchSpec("concurrency", 1, 64, 4)) == 17
    assert search_probes_bound(RATE) == 12  # 9 bracketing loads, 3 bisections of a factor 2
    assert search_probes_bound(CONCURRENCY) == 12  # 7 bracketing loads, 5 bisections of 32
    rate_counts = [len(search(RATE, server(t))[0]) for t in RATE_THRESHOLDS]
    concurrency_counts = [len(search(CONCURRENCY, server(t))[0]) for t in range(70)]
    # The bound is reached, never passed.
    assert max(rate_counts) == search_probes_bound(RATE)
    assert max(concurrency_counts) == search_probes_bound(CONCURRENCY)


def test_the_bound_respects_max_probes():
    assert search_probes_bound(SearchSpec("request_rate", 0.25, 64, 0.1, max_probes=6)) == 6


# --- the spec's `search` mapping ---------------------------------------------------------

BODY = "{metric: request_rate, low: 0.25, high: 64}"


def test_the_example_parses_with_defaults():
    spec = parse_search({"max_goodput": {"metric": "request_rate", "low": 0.25, "high": 64}})
    assert spec == SearchSpec("request_rate", 0.25, 64, 0.1, 0.05, 20)
    assert SEARCH_EXAMPLE == "{max_goodput: " + BODY + "}"
    concurrency = parse_search({"max_goodput": {"metric": "concurrency", "low": 1, "high": 32, "max_probes": 9}})
    assert concurrency == SearchSpec("concurrency", 1, 32, 1, 0.05, 9)
    for parsed in (spec, concurrency):
        assert search_errors(parsed.to_dict()) == []
        assert parse_search(parsed.to_dict()) == parsed


def test_parse_refuses_what_validation_refuses():
    with pytest.raises(ValueError, match=r"search.max_goodput.low: expected a positive number, got 0"):
        parse_search({"max_goodput": {"metric": "request_rate", "low": 0, "high": 64}})


def search_with(**fields):
    return {"max_goodput": {"metric": "request_rate", "low": 0.25, "high": 64, **fields}}


P = "search.max_goodput"
RATE_RESOLUTION_EXPECTED = "expected a relative step above 0 and at most 1 (0.1 for 10 %)"
SATURATION_EXPECTED = "expected a relative throughput growth of at least 0 and below 1 (0.05 for 5 %)"


@pytest.mark.parametrize(
    "value, errors",
    [
        ([], [f"search: expected a mapping such as {SEARCH_EXAMPLE}, got a list"]),
        ("max_goodput", [f"search: expected a mapping such as {SEARCH_EXAMPLE}, got 'max_goodput'"]),
        ({}, [f"search: expected one objective (max_goodput) as in {SEARCH_EXAMPLE}, got an empty mapping"]),
        ({"max_goodpt": {}}, [("search.max_goodpt: unknown objective (did you mean 'max_goodput'?); "
                               "expected one of max_goodput")]),
        ({"fastest": {}}, ["search.fastest: unknown objective; expected one of max_goodput"]),
        ({"max_goodput": 64}, [f"{P}: expected a mapping such as {BODY}, got 64"]),
        ({"max_goodput": {}}, [f"{P}.metric: required (as in {BODY})", f"{P}.low: required (as in {BODY})",
                               f"{P}.high: required (as in {BODY})"]),
        (search_with(resolutoin=0.1), [(f"{P}.resolutoin: unknown field (did you mean 'resolution'?); "
                                        "expected one of metric, low, high, resolution, saturation, max_probes")]),
        (search_with(metric="rate"), [f"{P}.metric: expected one of request_rate, concurrency, got 'rate'"]),
        (search_with(low=0), [f"{P}.low: expected a positive number, got 0"]),
        (search_with(low=-1.5), [f"{P}.low: expected a positive number, got -1.5"]),
        (search_with(low="1"), [f"{P}.low: expected a positive number, got '1'"]),
        (search_with(high=True), [f"{P}.high: expected a positive number, got true"]),
        (search_with(high=math.inf), [f"{P}.high: expected a positive number, got inf"]),
        (search_with(high=None), [f"{P}.high: expected a positive number, got nothing"]),
        (search_with(low=8, high=4), [f"{P}.high: expected more than low (8), got 4"]),
        (search_with(low=8, high=8), [f"{P}.high: expected more than low (8), got 8"]),
        (search_with(metric="concurrency", low=1.5, high=64),
         [f"{P}.low: expected a positive integer (a concurrency), got 1.5"]),
        (search_with(metric="concurrency", low=0, high=8.0),
         [f"{P}.low: expected a positive integer (a concurrency), got 0",
          f"{P}.high: expected a positive integer (a concurrency), got 8.0"]),
        (search_with(resolution=0), [f"{P}.resolution: {RATE_RESOLUTION_EXPECTED}, got 0"]),
        (search_with(resolution=1.5),
         [f"{P}.resolution: {RATE_RESOLUTION_EXPECTED}, got 1.5"]),
        (search_with(metric="concurrency", low=1, high=8, resolution=0.5),
         [f"{P}.resolution: expected a positive integer (requests of concurrency), got 0.5"]),
        (search_with(saturation=1), [f"{P}.saturation: {SATURATION_EXPECTED}, got 1"]),
        (search_with(saturation=-0.1), [f"{P}.saturation: {SATURATION_EXPECTED}, got -0.1"]),
        (search_with(max_probes=1), [f"{P}.max_probes: expected an integer >= 2, got 1"]),
        (search_with(max_probes=2.5), [f"{P}.max_probes: expected an integer >= 2, got 2.5"]),
    ],
)
def test_every_search_error(value, errors):
    assert search_errors(value) == errors


def test_errors_name_the_path_given():
    assert search_errors(search_with(low=0), path="sweeps[2].search") == [
        "sweeps[2].search.max_goodput.low: expected a positive number, got 0"
    ]


@pytest.mark.parametrize(
    "value",
    [search_with(), search_with(resolution=1, saturation=0, max_probes=2), search_with(low=1, high=2),
     search_with(metric="concurrency", low=1, high=2, resolution=3)],
)
def test_valid_searches_have_no_errors(value):
    assert search_errors(value) == []
