"""runs.results.estimate: how long a planned sweep takes, from the requests it will send."""

from types import SimpleNamespace

from runs.results.estimate import History, estimate, point_key, requests_per_point
from sweepcore.kinds import PointStatus


def spec(**kw):
    return SimpleNamespace(**{"requests_per_point": 3, "repeats": 1, "until_stable": None, **kw})


def test_a_point_sends_its_requests_per_point_times_its_repeats():
    assert requests_per_point(spec()) == (3, 3)
    assert requests_per_point(spec(repeats=4)) == (12, 12)


def test_until_stable_sends_between_the_six_an_interval_needs_and_its_maximum():
    until = {"metric": "decode_tok_s", "rel_ci": 0.05, "min_requests": 5, "max_requests": 30}
    assert requests_per_point(spec(until_stable=until)) == (6, 30)
    assert requests_per_point(spec(until_stable={**until, "min_requests": 10}, repeats=2)) == (20, 60)


def plan_of_one_point():
    point = SimpleNamespace(status=PointStatus.PLANNED, workload="fibonacci", prompt_tokens=None, concurrency=1,
                            max_new_tokens=256)
    return SimpleNamespace(runs=[SimpleNamespace(method="autoregressive", params={}, tp=1, points=[point])])


def test_the_estimate_is_a_range_when_the_point_stops_when_stable():
    key = point_key("autoregressive", {}, 1, "fibonacci", None, 1, 256)
    history = History({key: [10.0]}, {("autoregressive", 1): [60.0]})
    fixed = estimate(plan_of_one_point(), (5, 5), 1, history)
    assert fixed["seconds"] == fixed["seconds_most"] == 60 + 6 * 10
    assert fixed["text"] == "about 2 min for 1 runs and 1 points (every point from its own history)"
    ranged = estimate(plan_of_one_point(), (6, 30), 1, history)
    assert (ranged["seconds"], ranged["seconds_most"]) == (60 + 7 * 10, 60 + 31 * 10)
    assert ranged["text"] == ("about 2 min to 6 min for 1 runs and 1 points (every point from its own history); "
                              "each point sends 6 to 30 requests until it is stable")
