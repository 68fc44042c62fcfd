from pathlib import Path

import pytest

from sweepcore.plan import MAX_POINTS, Quarantine, plan, point_label, search_shape
from sweepcore.spec import SpecError, load_spec_file, load_yaml, validate
from tests.core.catalogs import demo_catalog

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen3.6-27b-sm120.yaml"

SIGNATURE = "RuntimeError: CUDA error: an illegal instruction was encountered"


def example_spec():
    return load_spec_file(EXAMPLE, demo_catalog())


def spec_of(text):
    return validate(load_yaml(text), demo_catalog())


def test_the_example_plans_23_runs_and_161_points():
    the_plan = plan(example_spec(), demo_catalog())
    assert the_plan.totals == {"runs": 23, "points": 161, "skipped_points": 23}
    labels = [r.label for r in the_plan.runs]
    assert labels[:4] == ["autoregressive TP1", "autoregressive TP4", "autoregressive TP8", "dflash block_size=16 TP1"]
    assert "ddtree budget=64 topk_cap=8 TP1" not in labels
    assert "ddtree budget=64 topk_cap=8 TP4" in labels
    assert the_plan.warnings == []


def test_each_run_has_its_points_in_spec_order():
    run = plan(example_spec(), demo_catalog()).runs[0]
    assert [(p.workload, p.prompt_tokens, p.concurrency) for p in run.points] == [
        ("fibonacci", None, 1),
        ("long-context", 3000, 1),
        ("long-context", 8000, 1),
        ("long-context", 16000, 1),
        ("long-context", 25000, 1),
        ("long-context", 30000, 1),
        ("long-context", 32700, 1),
    ]


def test_it_skips_points_beyond_the_context_with_the_numbers():
    run = plan(example_spec(), demo_catalog()).runs[0]
    skipped = [p for p in run.points if p.status == "skipped"]
    assert [p.prompt_tokens for p in skipped] == [32700]
    assert "32700 + 256 + 16 > 32768" in skipped[0].reason
    assert all(p.reason == "" for p in run.points if p.status == "planned")


def test_a_point_that_exactly_fits_is_planned():
    text = EXAMPLE.read_text().replace("32700]", "32496]")  # 32496 + 256 + 16 = 32768
    run = plan(spec_of(text), demo_catalog()).runs[0]
    assert run.points[-1].prompt_tokens == 32496
    assert run.points[-1].status == "planned"


def test_the_margin_comes_from_the_options():
    text = EXAMPLE.read_text().replace("context_margin_tokens: 16", "context_margin_tokens: 3000")
    run = plan(spec_of(text), demo_catalog()).runs[0]
    assert [p.prompt_tokens for p in run.points if p.status == "skipped"] == [30000, 32700]


def test_exclusions_drop_every_matching_configuration():
    text = EXAMPLE.read_text().replace(
        "  - {method: ddtree, budget: 64, tp: 1}", "  - {method: ddtree, tp: 8}\n  - {tp: 4, block_size: 16}"
    )
    labels = [r.label for r in plan(spec_of(text), demo_catalog()).runs]
    assert not [label for label in labels if label.startswith("ddtree") and label.endswith("TP8")]
    assert "dflash block_size=16 TP4" not in labels
    assert "dflash block_size=16 TP8" in labels
    assert "ddtree budget=64 topk_cap=8 TP1" in labels
    assert len(labels) == 24 - 6 - 1


def test_an_exclusion_that_matches_nothing_is_a_warning():
    text = EXAMPLE.read_text().replace("budget: 64, tp: 1}", "budget: 99, tp: 1}")
    the_plan = plan(spec_of(text), demo_catalog())
    assert the_plan.warnings == ["exclude[0]: matches no configuration of this sweep"]
    assert the_plan.totals["runs"] == 24


def quarantines():
    return [Quarantine("ddtree", {"budget": 8, "topk_cap": 8}, 1, "cuda_illegal_instruction", SIGNATURE, id=7)]


def test_a_quarantined_configuration_is_skipped_with_its_signature():
    the_plan = plan(example_spec(), demo_catalog(), quarantines())
    (run,) = [r for r in the_plan.runs if r.label == "ddtree budget=8 topk_cap=8 TP1"]
    assert run.status == "skipped"
    assert "cuda_illegal_instruction" in run.reason and SIGNATURE in run.reason
    assert {p.status for p in run.points} == {"skipped"}
    assert run.quarantine.id == 7
    # Same method and budget at another TP is a different configuration.
    (other,) = [r for r in the_plan.runs if r.label == "ddtree budget=8 topk_cap=8 TP4"]
    assert other.status == "planned"
    assert the_plan.totals == {"runs": 23, "points": 161, "skipped_points": 23 + 6}


def test_retry_quarantined_plans_it_anyway():
    text = EXAMPLE.read_text().replace("retry_quarantined: false", "retry_quarantined: true")
    the_plan = plan(spec_of(text), demo_catalog(), quarantines())
    (run,) = [r for r in the_plan.runs if r.label == "ddtree budget=8 topk_cap=8 TP1"]
    assert run.status == "planned"
    assert run.retry_quarantined is True
    assert run.quarantine.id == 7
    assert the_plan.totals["skipped_points"] == 23


def test_retry_quarantined_can_name_the_configurations_to_retry():
    quarantined = quarantines() + [Quarantine("ddtree", {"budget": 12, "topk_cap": 8}, 1, "cuda_illegal_instruction", SIGNATURE)]
    text = EXAMPLE.read_text().replace("retry_quarantined: false", "retry_quarantined: [{method: ddtree, budget: 12, tp: 1}]")
    runs = {r.label: r for r in plan(spec_of(text), demo_catalog(), quarantined).runs}
    assert runs["ddtree budget=12 topk_cap=8 TP1"].status == "planned"
    assert runs["ddtree budget=12 topk_cap=8 TP1"].retry_quarantined is True
    assert runs["ddtree budget=8 topk_cap=8 TP1"].status == "skipped"
    assert runs["ddtree budget=8 topk_cap=8 TP1"].retry_quarantined is False


def test_it_refuses_a_sweep_of_more_than_10000_points():
    lengths = ", ".join(str(n) for n in range(100, 100 + 100 * 60, 100))  # 60 lengths
    text = EXAMPLE.read_text().replace("[3000, 8000, 16000, 25000, 30000, 32700]", f"[{lengths}]")
    text = text.replace("concurrency: [1]", "concurrency: [1, 2, 4, 8, 16, 32, 64, 128]")
    with pytest.raises(SpecError) as exc:
        plan(spec_of(text), demo_catalog())
    points = 23 * (1 + 60) * 8
    assert points > MAX_POINTS
    assert str(exc.value).startswith(f"this sweep would plan {points:,} points (23 runs x 488 points each); the limit is 10,000")


def test_plan_json_has_the_documented_shape():
    data = plan(example_spec(), demo_catalog()).to_dict()
    assert set(data) == {"runs", "totals"}
    assert data["totals"] == {"runs": 23, "points": 161, "skipped_points": 23}
    ddtree = [r for r in data["runs"] if r["method"] == "ddtree"][0]
    assert ddtree == {
        "method": "ddtree",
        "params": {"budget": 8, "topk_cap": 8},
        "tp": 1,
        "status": "planned",
        "reason": "",
        "points": ddtree["points"],
    }
    assert list(ddtree["points"][1]) == ["workload", "prompt_tokens", "concurrency", "request_rate", "status", "reason"]
    assert ddtree["points"][0]["prompt_tokens"] is None


@pytest.mark.parametrize("args, label", [
    (("long-context", 32000, 4), "long-context, 32,000 tokens, c=4"),
    (("fibonacci", None, 1, None, "fixed"), "fibonacci, fixed prompt, c=1"),
    (("sharegpt", None, 8, None, "dataset"), "sharegpt, dataset, c=8"),
    (("sharegpt", None, 64, 2.5, "dataset"), "sharegpt, dataset, 2.5 req/s (cap 64)"),
    (("random", None, 2, None, "synthetic"), "random, c=2"),  # an import that did not say its length
])
def test_a_point_is_named_by_workload_length_and_load(args, label):
    assert point_label(*args) == label


# --- a plan that would measure nothing --------------------------------------------------

SEARCH = EXAMPLE.with_name("capacity-search-sim.yaml")


def all_skipped(**changes):
    data = {
        "name": "all-skipped", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
        "tp": [1], "methods": ["autoregressive", {"ddtree": {"budget": [8]}}],
        "workloads": [{"long-context": {"prompt_tokens": [32700, 40000]}}], "concurrency": [1, 2], **changes,
    }
    return validate(data, demo_catalog())


def test_a_plan_whose_every_point_is_skipped_says_why_counting_each_cause():
    the_plan = plan(all_skipped(), demo_catalog(), quarantines())
    assert the_plan.nothing_to_measure == (
        "nothing to measure: all 8 points are skipped — 4 exceed the context (prompts of 32,700 to 40,000 "
        "+ 256 new tokens + 16 margin > 32,768), 4 quarantined")


def test_a_single_point_beyond_the_context_is_said_with_its_numbers():
    spec = all_skipped(methods=["autoregressive"], workloads=[{"long-context": {"prompt_tokens": [32700]}}],
                       concurrency=[1], options={"context_margin_tokens": 0})
    assert plan(spec, demo_catalog()).nothing_to_measure == (
        "nothing to measure: the only point is skipped — 1 exceeds the context "
        "(prompt 32,700 + 256 new tokens > 32,768)")


def test_a_plan_with_a_point_to_measure_has_nothing_to_say():
    assert plan(example_spec(), demo_catalog(), quarantines()).nothing_to_measure == ""
    # One point that fits is enough.
    spec = all_skipped(workloads=[{"long-context": {"prompt_tokens": [3000, 40000]}}])
    assert plan(spec, demo_catalog(), quarantines()).nothing_to_measure == ""


def test_a_capacity_search_measures_nothing_when_its_probes_exceed_the_context_or_every_run_is_quarantined():
    text = SEARCH.read_text()
    assert plan(spec_of(text), demo_catalog()).nothing_to_measure == ""  # a search plans no point, yet measures
    long = text.replace("workloads: [fibonacci]", "workloads: [{long-context: {prompt_tokens: [32700]}}]")
    assert plan(spec_of(long), demo_catalog()).nothing_to_measure == (
        "nothing to measure: every probe of the capacity search exceeds the context "
        "(prompt 32,700 + 64 new tokens + 16 margin > 32,768)")
    only_ddtree = text.replace("  - autoregressive\n", "")
    quarantined = [Quarantine("ddtree", {"budget": 15, "topk_cap": 8}, 1, "cuda_illegal_instruction", SIGNATURE)]
    assert plan(spec_of(only_ddtree), demo_catalog(), quarantined).nothing_to_measure == (
        "nothing to measure: the only configuration is quarantined, and a capacity search plans no other point")


def test_a_search_probes_shape_is_read_from_the_stored_spec():
    data = spec_of(SEARCH.read_text().replace(
        "workloads: [fibonacci]", "workloads: [{long-context: {prompt_tokens: [3000]}}]")).to_dict()
    assert search_shape(data) == ("long-context", 3000, 64)
    assert search_shape(spec_of(SEARCH.read_text()).to_dict()) == ("fibonacci", None, 64)
