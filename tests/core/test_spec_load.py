"""The load in the spec: open-loop rates, the SLO and the capacity search, and how they plan."""

import pytest

from sweepcore.plan import plan
from sweepcore.spec import OPEN_LOOP_MAX_CONCURRENCY, SpecError, dump_yaml, load_yaml, validate
from tests.core.catalogs import demo_catalog

BASE = """\
name: t
host: sim-8x-rtxpro6000
engine: sglang-sim
model: Qwen/Qwen3.6-27B
tp: [1]
methods: [autoregressive]
workloads: [fibonacci]
"""


def spec_of(*lines):
    return validate(load_yaml(BASE + "\n".join(lines) + "\n"), demo_catalog())


def errors_of(*lines):
    with pytest.raises(SpecError) as exc:
        spec_of(*lines)
    return exc.value.errors


def round_trips(spec):
    again = validate(load_yaml(dump_yaml(spec.to_dict())), demo_catalog())
    assert again == spec
    return again


def test_request_rates_plan_one_open_loop_point_each_capped_by_max_concurrency():
    spec = spec_of("request_rate: [0.5, 1, 2.5]", "burstiness: 0.5", "max_concurrency: 32", "duration_s: 30")
    assert spec.open_loop and spec.request_rate == (0.5, 1.0, 2.5) and spec.burstiness == 0.5
    assert spec.duration_s == 30.0 and spec.in_flight_cap == 32
    (run,) = plan(spec, demo_catalog()).runs
    assert [(p.request_rate, p.concurrency) for p in run.points] == [(0.5, 32), (1.0, 32), (2.5, 32)]
    data = round_trips(spec).to_dict()
    assert "concurrency" not in data and data["burstiness"] == 0.5


def test_an_open_loop_without_max_concurrency_is_capped_at_the_clients_limit():
    (run,) = plan(spec_of("request_rate: [4]"), demo_catalog()).runs
    assert [(p.request_rate, p.concurrency) for p in run.points] == [(4.0, OPEN_LOOP_MAX_CONCURRENCY)]


def test_a_closed_loop_plans_no_rate_and_keeps_no_burstiness():
    spec = spec_of("concurrency: [1, 4]")
    assert not spec.open_loop
    (run,) = plan(spec, demo_catalog()).runs
    assert [(p.request_rate, p.concurrency) for p in run.points] == [(None, 1), (None, 4)]
    assert "burstiness" not in round_trips(spec).to_dict()


@pytest.mark.parametrize("lines, expected", [
    (["request_rate: 2"], "request_rate: expected a list of positive numbers (requests per second), got 2 (write [2])"),
    (["request_rate: [1, 0]"], "request_rate[1]: expected a positive number, got 0"),
    (["request_rate: [1, 1.0]"], "request_rate: 1.0 is listed twice"),
    (["request_rate: [1]", "concurrency: [2]"],
     "concurrency: give concurrency (a closed loop) or request_rate (an open loop), not both; the open loop's cap "
     "on requests in flight is max_concurrency"),
    (["max_concurrency: 8"], "max_concurrency: applies to an open loop only (request_rate, or a search over it); "
                             "a closed loop's load is its concurrency"),
    (["request_rate: [1]", "burstiness: -1"], "burstiness: expected a positive number, got -1"),
    (["duration_s: 0"], "duration_s: expected a positive number, got 0"),
    (["request_rate: [1]", "until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 5, max_requests: 50}"],
     "until_stable: stops a closed loop once its figure is stable; an open loop sends on its schedule: give "
     "requests_per_point or duration_s"),
    (["duration_s: 10", "until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 5, max_requests: 50}"],
     "duration_s: give duration_s or until_stable, not both: each decides when a point stops"),
])
def test_load_mistakes_are_named_with_their_field(lines, expected):
    assert expected in errors_of(*lines)


def test_an_slo_is_kept_normalised_and_round_trips():
    spec = spec_of("slo: {ttft_p99_ms: 2000, tpot_p50_ms: 50.5}")
    assert spec.slo == {"ttft_p99_ms": 2000.0, "tpot_p50_ms": 50.5}
    round_trips(spec)


def test_an_slo_mistake_is_reported_under_slo():
    errors = errors_of("slo: {ttft_p99: 2000}")
    assert errors and all(e.startswith("slo") for e in errors)


SEARCH = "search: {max_goodput: {metric: request_rate, low: 0.25, high: 64}}"


def test_a_search_over_rates_plans_no_points_and_round_trips():
    spec = spec_of("slo: {ttft_p99_ms: 2000}", SEARCH, "duration_s: 20")
    assert spec.open_loop and spec.search_spec.metric == "request_rate"
    assert spec.search_spec.low == 0.25 and spec.search_spec.high == 64
    (run,) = plan(spec, demo_catalog()).runs
    assert run.points == []
    data = round_trips(spec).to_dict()
    assert "concurrency" not in data and data["search"]["max_goodput"]["metric"] == "request_rate"


def test_a_search_over_concurrency_is_a_closed_loop():
    spec = spec_of("slo: {tpot_p50_ms: 30}", "search: {max_goodput: {metric: concurrency, low: 1, high: 64}}")
    assert not spec.open_loop and spec.search_spec.metric == "concurrency"
    assert "concurrency" not in round_trips(spec).to_dict()


@pytest.mark.parametrize("lines, expected", [
    ([SEARCH], "search: a capacity search looks for the highest load that meets an SLO: give slo too, such as "
               "{ttft_p99_ms: 2000, tpot_p99_ms: 200}"),
    (["slo: {ttft_p99_ms: 2000}", SEARCH, "request_rate: [1]"],
     "request_rate: the search picks the request rates (search.max_goodput.metric is request_rate): remove request_rate"),
    (["slo: {ttft_p99_ms: 2000}", SEARCH, "concurrency: [1]"],
     "concurrency: a search over request_rate measures only its own probes: remove concurrency"),
])
def test_search_mistakes_are_named_with_their_field(lines, expected):
    assert expected in errors_of(*lines)


def test_a_search_runs_on_one_workload_at_one_length():
    text = BASE.replace("workloads: [fibonacci]\n", "workloads: [fibonacci, {long-context: {prompt_tokens: [1000]}}]\n")
    with pytest.raises(SpecError) as exc:
        validate(load_yaml(text + "slo: {ttft_p99_ms: 2000}\n" + SEARCH + "\n"), demo_catalog())
    assert ("search: a capacity search runs on one workload at one prompt length; this spec has 2 (split it into one "
            "sweep per workload)") in exc.value.errors


def test_a_search_mistake_is_reported_under_search():
    errors = errors_of("slo: {ttft_p99_ms: 2000}", "search: {max_goodput: {metric: request_rate, low: 0, high: 64}}")
    assert errors and all(e.startswith("search") for e in errors)


def test_the_cooldown_between_probes_is_a_number_of_seconds():
    assert spec_of("options: {cooldown_s: 0.5}").options["cooldown_s"] == 0.5
    assert spec_of("options: {cooldown_s: 0}").options["cooldown_s"] == 0
    for bad in ("-1", "'2s'", "true", ".nan"):
        assert "options.cooldown_s: expected a number of seconds >= 0, got" in errors_of(
            f"options: {{cooldown_s: {bad}}}")[0]


def test_an_empty_rate_list_is_still_an_open_loop_for_its_other_fields():
    errors = errors_of("request_rate: []", "burstiness: 0.5", "max_concurrency: 4")
    assert errors == ["request_rate: expected a list of positive numbers (requests per second), got an empty list"]


def test_a_search_whose_prompt_cannot_fit_the_context_is_a_plan_warning():
    text = BASE.replace("workloads: [fibonacci]\n", "workloads: [{long-context: {prompt_tokens: [32700]}}]\n")
    spec = validate(load_yaml(text + "slo: {ttft_p99_ms: 2000}\n" + SEARCH + "\n"), demo_catalog())
    (warning,) = plan(spec, demo_catalog()).warnings
    assert warning.startswith("search: every probe would be skipped by the context cap: 32700 + 256 + 16 > 32768")


def test_steady_state_shares_are_kept_and_round_trip():
    spec = spec_of("steady_state: {skip_first: 0.2, skip_last: 0.1}")
    assert spec.steady_state == {"skip_first": 0.2, "skip_last": 0.1}
    assert round_trips(spec).to_dict()["steady_state"] == {"skip_first": 0.2, "skip_last": 0.1}
    assert spec_of("steady_state: {skip_first: 0.25}").steady_state == {"skip_first": 0.25, "skip_last": 0.0}
    assert "steady_state" not in spec_of("steady_state: {skip_first: 0, skip_last: 0}").to_dict()


@pytest.mark.parametrize("lines, expected", [
    (["steady_state: 0.2"], "steady_state: expected a mapping such as {skip_first: 0.2, skip_last: 0.1}, got 0.2"),
    (["steady_state: {skip_frist: 0.2}"],
     "steady_state.skip_frist: unknown field (did you mean 'skip_first'?); expected one of skip_first, skip_last"),
    (["steady_state: {skip_first: 1}"],
     "steady_state.skip_first: expected a share of the point's requests, at least 0 and below 1 (0.2 for 20 %), got 1"),
    (["steady_state: {skip_first: 0.4, skip_last: 0.2}"],
     "steady_state: skip_first + skip_last is 0.6: at most 0.5, so that at least half of each point's requests "
     "are measured"),
    (["steady_state: {skip_first: 0.2}", "repeats: 3"],
     "steady_state: leaves out the ramp of one load per point; with repeats each repeat ramps up and down again: "
     "give one of them (more requests_per_point instead of repeats)"),
    (["steady_state: {skip_first: 0.2}",
      "until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 5, max_requests: 50}"],
     "steady_state: needs a point's requests known before they are counted; until_stable decides as they come: "
     "give requests_per_point or duration_s"),
])
def test_steady_state_mistakes_are_named_with_their_field(lines, expected):
    assert expected in errors_of(*lines)


def test_packing_is_exclusive_or_pack():
    assert spec_of().options["packing"] == "exclusive"
    assert spec_of("options: {packing: pack}").options["packing"] == "pack"
    assert "options.packing: expected one of exclusive, pack, got 'packed'" in errors_of("options: {packing: packed}")
