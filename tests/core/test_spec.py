from dataclasses import replace
from pathlib import Path

import pytest

from sweepcore.spec import EngineInfo, SpecError, WorkloadInfo, dump_yaml, load_spec_file, load_yaml, validate
from tests.core.catalogs import demo_catalog

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

BASE = """\
name: t
host: sim-8x-rtxpro6000
engine: sglang-sim
model: Qwen/Qwen3.6-27B
tp: [1]
methods: [autoregressive]
workloads: [fibonacci]
"""


def errors_of(text):
    with pytest.raises(SpecError) as exc:
        validate(load_yaml(text), demo_catalog())
    return exc.value.errors


def with_line(line):
    return BASE + line + "\n"


@pytest.mark.parametrize("name", ["qwen3.6-27b-sm120.yaml", "smollm2-cpu.yaml", "capacity-search-sim.yaml"])
def test_the_example_files_validate(name):
    spec = load_spec_file(EXAMPLES / name, demo_catalog())
    assert spec.name


def test_it_fills_defaults_and_keeps_scalar_params():
    text = BASE.replace("methods: [autoregressive]\n", "methods:\n  - ddtree: {budget: [8, 12]}\n")
    spec = validate(load_yaml(text), demo_catalog())
    assert spec.methods[0].params == {"budget": (8, 12), "topk_cap": 8}
    assert spec.max_new_tokens == 256
    assert spec.concurrency == (1,)
    assert spec.options == {
        "retry_quarantined": False, "context_margin_tokens": 16, "retries": 0,
        "stall_timeout_s": 60, "first_token_timeout_s": 600, "cooldown_s": 2,
        "packing": "exclusive",
    }


def test_the_spec_round_trips_through_yaml():
    spec = load_spec_file(EXAMPLES / "qwen3.6-27b-sm120.yaml", demo_catalog())
    text = dump_yaml(spec.to_dict())
    again = validate(load_yaml(text), demo_catalog())
    assert again == spec
    assert dump_yaml(again.to_dict()) == text


def test_it_rejects_an_unknown_key_and_suggests_the_right_one():
    (error,) = errors_of(with_line("concurency: [1]"))
    assert error.startswith("concurency: unknown field (did you mean 'concurrency'?)")


def test_it_rejects_an_unknown_method_parameter():
    text = BASE.replace("methods: [autoregressive]", "methods:\n  - ddtree: {budget: [8], topk: 8}")
    (error,) = errors_of(text)
    assert error.startswith("methods[0].ddtree.topk: unknown field (did you mean 'topk_cap'?)")


def test_it_rejects_a_comma_string_where_a_list_is_expected():
    text = BASE.replace(
        "methods: [autoregressive]",
        "methods:\n  - autoregressive\n  - dflash: {block_size: [16]}\n  - ddtree: {budget: '8,12', topk_cap: 8}",
    )
    assert errors_of(text) == ["methods[2].ddtree.budget: expected a list of positive integers, got '8,12'"]


@pytest.mark.parametrize(
    "line, message",
    [
        ("max_new_tokens: many", "max_new_tokens: expected a positive integer, got 'many'"),
        ("max_new_tokens: 0", "max_new_tokens: expected a positive integer, got 0"),
        ("max_new_tokens: true", "max_new_tokens: expected a positive integer, got true"),
        ("concurrency: 4", "concurrency: expected a list of positive integers, got 4 (write [4])"),
        ("concurrency: [1, -2]", "concurrency: expected a list of positive integers, got -2 among them"),
        ("concurrency: [2, 2]", "concurrency: 2 is listed twice"),
        ("warmup_requests: -1", "warmup_requests: expected an integer >= 0, got -1"),
        ("options: {retry_quarantined: maybe}", "options.retry_quarantined: expected true, false or a list of "
         "configurations such as [{method: ddtree, budget: 8, tp: 1}], got 'maybe'"),
        ("options: {retry_quarantined: [{budget: x}]}", "options.retry_quarantined[0].budget: expected a positive integer, got 'x'"),
        ("options: {retry_quarantined: [{}]}", "options.retry_quarantined[0]: an empty rule would retry every "
         "quarantined configuration: write true for that"),
        ("exclude: [{}]", "exclude[0]: an empty exclusion would drop every configuration"),
        ("exclude: [{method: beam}]", "exclude[0].method: expected one of autoregressive, dflash, ddtree, prompt-lookup, ngram, got 'beam'"),
    ],
)
def test_it_rejects_wrong_types(line, message):
    assert errors_of(with_line(line)) == [message]


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("methods: [autoregressive]", "methods: []", "methods: expected a list of methods, got an empty list"),
        ("workloads: [fibonacci]", "workloads: []", "workloads: expected a list of workloads, got an empty list"),
        ("tp: [1]", "tp: []", "tp: expected a list of positive integers, got an empty list"),
    ],
)
def test_it_rejects_empty_lists(old, new, message):
    assert errors_of(BASE.replace(old, new)) == [message]


def test_it_rejects_tp_above_the_hosts_gpu_count():
    assert errors_of(BASE.replace("tp: [1]", "tp: [1, 4, 16]")) == [
        "tp[2]: 16 is more than host 'sim-8x-rtxpro6000' has: 8 GPUs"
    ]


def test_hosts_that_differ_are_said_in_words():
    errors = errors_of(BASE.replace("host: sim-8x-rtxpro6000\n", "hosts: [sim-8x-rtxpro6000, local-cpu]\n"))
    assert ("hosts[1]: host 'local-cpu' (CPU host, no GPUs) differs from host 'sim-8x-rtxpro6000' "
            "(8 × NVIDIA RTX PRO 6000 Blackwell): the hosts of one sweep must be alike") in errors


def test_a_cpu_host_takes_tp_1_only():
    text = BASE.replace("sim-8x-rtxpro6000", "local-cpu").replace("sglang-sim", "llamacpp-cpu")
    text = text.replace("tp: [1]", "tp: [1, 2]")
    assert errors_of(text) == ["tp[1]: 2 is more than host 'local-cpu' has: no GPU (TP 1 only)"]


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("host: sim-8x-rtxpro6000", "host: gpu-9", "host: unknown host 'gpu-9'; known hosts: local-cpu, sim-4x-h200, sim-8x-rtxpro6000, sim-8x-rtxpro6000-b"),
        ("engine: sglang-sim", "engine: vllm-9", "engine: unknown engine 'vllm-9'; known engines: llamacpp-cpu, sglang-sim"),
        ("model: Qwen/Qwen3.6-27B", "model: Llama-9", "model: unknown model 'Llama-9'; known models: Qwen/Qwen3.6-27B, SmolLM2-135M-Instruct"),
        ("workloads: [fibonacci]", "workloads: [poetry]", "workloads[0]: unknown workload 'poetry'; known workloads: fibonacci, long-context, sharegpt"),
    ],
)
def test_it_rejects_unknown_catalog_names(old, new, message):
    assert errors_of(BASE.replace(old, new)) == [message]


def test_it_rejects_a_method_the_engine_cannot_run():
    text = BASE.replace("methods: [autoregressive]", "methods:\n  - prompt-lookup: {num_pred_tokens: [4]}")
    assert errors_of(text) == [
        "methods[0]: engine 'sglang-sim' cannot run prompt-lookup; it runs autoregressive, dflash, ddtree"
    ]


def test_it_requires_the_swept_parameter():
    text = BASE.replace("methods: [autoregressive]", "methods: [ddtree]")
    assert errors_of(text) == ["methods[0].ddtree.budget: required (a list of positive integers)"]


def test_it_requires_prompt_lengths_for_a_synthetic_workload_and_refuses_them_for_a_fixed_one():
    text = BASE.replace("workloads: [fibonacci]", "workloads:\n  - long-context\n  - fibonacci: {prompt_tokens: [10]}")
    assert errors_of(text) == [
        "workloads[0].long-context.prompt_tokens: required: 'long-context' builds prompts of an exact length, so list the lengths",
        "workloads[1].fibonacci.prompt_tokens: 'fibonacci' is a fixed prompt; it takes no prompt_tokens",
    ]


def test_it_rejects_a_repeated_configuration():
    text = BASE.replace(
        "methods: [autoregressive]", "methods:\n  - ddtree: {budget: [8, 15]}\n  - ddtree: {budget: [15, 32]}"
    )
    assert errors_of(text) == ["methods[1]: repeats a configuration of methods[0]: ddtree budget=15 topk_cap=8"]


def test_it_lists_every_missing_required_field():
    assert errors_of("name: t\n") == [
        "host: required",
        "engine: required",
        "model: required",
        "methods: required",
        "workloads: required",
    ]


def test_it_rejects_a_document_that_is_not_a_mapping():
    assert errors_of("- a\n- b\n") == [
        "expected a mapping of sweep fields (name, host, engine, model, methods, workloads, …), got a list"
    ]


def test_malformed_yaml_names_line_and_column():
    with pytest.raises(SpecError) as exc:
        load_yaml("name: x\n  host: [\n", source="s.yaml")
    assert str(exc.value) == "s.yaml: line 2, column 7: mapping values are not allowed here (malformed YAML)"


def test_a_key_given_twice_is_an_error():
    with pytest.raises(SpecError) as exc:
        load_yaml("name: a\ntp: [1]\nname: b\n", source="s.yaml")
    assert str(exc.value) == "s.yaml: line 3, column 1: found the key 'name' twice (malformed YAML)"


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(SpecError) as exc:
        load_spec_file(tmp_path / "nope.yaml", demo_catalog())
    assert str(exc.value) == f"{tmp_path / 'nope.yaml'}: no such file"


# --- repeats and until_stable -------------------------------------------------------------


def test_repeats_defaults_to_one_and_until_stable_to_none():
    spec = validate(load_yaml(BASE), demo_catalog())
    assert spec.repeats == 1
    assert spec.until_stable is None
    assert spec.to_dict()["repeats"] == 1
    assert "until_stable" not in spec.to_dict()


def test_repeats_and_until_stable_are_kept_and_round_trip_through_yaml():
    text = with_line("repeats: 3\nuntil_stable: {metric: median_tpot_ms, rel_ci: 0.1, min_requests: 6, max_requests: 40}")
    spec = validate(load_yaml(text), demo_catalog())
    assert spec.repeats == 3
    assert spec.until_stable == {"metric": "median_tpot_ms", "rel_ci": 0.1, "min_requests": 6, "max_requests": 40}
    dumped = dump_yaml(spec.to_dict())
    assert "until_stable: {metric: median_tpot_ms, rel_ci: 0.1, min_requests: 6, max_requests: 40}" in dumped
    again = validate(load_yaml(dumped), demo_catalog())
    assert again == spec
    assert dump_yaml(again.to_dict()) == dumped


def test_until_stable_min_requests_may_equal_max_requests():
    text = with_line("until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 8, max_requests: 8}")
    assert validate(load_yaml(text), demo_catalog()).until_stable["max_requests"] == 8


@pytest.mark.parametrize(
    "line, messages",
    [
        ("repeats: 0", ["repeats: expected a positive integer, got 0"]),
        ("repeats: twice", ["repeats: expected a positive integer, got 'twice'"]),
        ("until_stable: 0.05", ["until_stable: expected a mapping such as {metric: decode_tok_s, rel_ci: 0.05, "
                                "min_requests: 5, max_requests: 50}, got 0.05"]),
        ("until_stable: {metric: output_throughput, rel_ci: 0.05, min_requests: 5, max_requests: 50}",
         ["until_stable.metric: expected one of decode_tok_s, median_ttft_ms, median_tpot_ms, median_e2el_ms, "
          "got 'output_throughput'"]),
        ("until_stable: {metric: decode_tok_s, rel_ci: 0, min_requests: 5, max_requests: 50}",
         ["until_stable.rel_ci: expected a fraction of the median between 0 and 1 (0.05 for ±5 %), got 0"]),
        ("until_stable: {metric: decode_tok_s, rel_ci: 5, min_requests: 5, max_requests: 50}",
         ["until_stable.rel_ci: expected a fraction of the median between 0 and 1 (0.05 for ±5 %), got 5"]),
        ("until_stable: {metric: decode_tok_s, rel_ci: 1.0, min_requests: 5, max_requests: 50}",
         ["until_stable.rel_ci: expected a fraction of the median between 0 and 1 (0.05 for ±5 %), got 1.0"]),
        ("until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 0, max_requests: 50}",
         ["until_stable.min_requests: expected a positive integer, got 0"]),
        ("until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 10, max_requests: 9}",
         ["until_stable.max_requests: expected at least min_requests (10), got 9"]),
        ("until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 5}",
         ["until_stable.max_requests: required (as in {metric: decode_tok_s, rel_ci: 0.05, min_requests: 5, "
          "max_requests: 50})"]),
        ("until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 5, max_requests: 50, max_seconds: 9}",
         ["until_stable.max_seconds: unknown field; expected one of metric, rel_ci, min_requests, max_requests"]),
    ],
)
def test_it_rejects_bad_repeats_and_until_stable(line, messages):
    assert errors_of(with_line(line)) == messages


SEVERAL = BASE.replace("host: sim-8x-rtxpro6000\n", "hosts: [sim-8x-rtxpro6000, sim-8x-rtxpro6000-b]\n")


def test_several_alike_hosts_share_a_sweep_and_round_trip():
    spec = validate(load_yaml(SEVERAL), demo_catalog())
    assert spec.host == "sim-8x-rtxpro6000"
    assert spec.hosts == ("sim-8x-rtxpro6000", "sim-8x-rtxpro6000-b")
    data = spec.to_dict()
    assert data["hosts"] == ["sim-8x-rtxpro6000", "sim-8x-rtxpro6000-b"] and "host" not in data
    assert validate(load_yaml(dump_yaml(data)), demo_catalog()) == spec


def test_one_host_is_written_host_and_hosts_of_one_is_the_same():
    one = validate(load_yaml(BASE), demo_catalog())
    listed = validate(load_yaml(BASE.replace("host: sim-8x-rtxpro6000\n", "hosts: [sim-8x-rtxpro6000]\n")),
                      demo_catalog())
    assert one == listed and one.hosts == ()
    assert "hosts" not in one.to_dict() and one.to_dict()["host"] == "sim-8x-rtxpro6000"


@pytest.mark.parametrize("line, path, words", [
    ("hosts: [sim-8x-rtxpro6000, sim-4x-h200]", "hosts[1]", "must be alike"),
    ("hosts: [sim-8x-rtxpro6000, nowhere]", "hosts[1]", "unknown host 'nowhere'"),
    ("hosts: [sim-8x-rtxpro6000, sim-8x-rtxpro6000]", "hosts", "twice"),
    ("hosts: []", "hosts", "non-empty list"),
    ("hosts: sim-8x-rtxpro6000", "hosts", "non-empty list"),
])
def test_hosts_that_cannot_share_a_sweep_are_refused_by_path(line, path, words):
    errors = errors_of(BASE.replace("host: sim-8x-rtxpro6000\n", line + "\n"))
    assert any(e.startswith(f"{path}: ") and words in e for e in errors), errors


def test_host_and_hosts_together_are_refused():
    errors = errors_of(BASE + "hosts: [sim-8x-rtxpro6000, sim-8x-rtxpro6000-b]\n")
    assert len(errors) == 1 and errors[0].startswith("hosts: ") and "not both" in errors[0]


def test_an_engine_without_a_command_line_is_refused_for_launch():
    catalog = demo_catalog()
    catalog.engines["imported-sglang"] = EngineInfo("imported-sglang", "sglang", ("autoregressive",), launchable=False)
    with pytest.raises(SpecError) as refused:
        validate(load_yaml(BASE.replace("engine: sglang-sim", "engine: imported-sglang")), catalog)
    assert refused.value.errors == [
        "engine: engine 'imported-sglang' has no command line to launch (an import made it to file results); "
        "an admin gives it one, or pick another engine",
    ]


def test_a_workload_an_import_made_reads_its_data_set_only_inside_every_hosts_data_roots():
    catalog = demo_catalog()
    catalog.workloads["uploaded"] = WorkloadInfo("uploaded", "dataset", "/data/sets/../../etc/passwd", imported=True)
    catalog.workloads["inside"] = WorkloadInfo("inside", "dataset", "/data/sets/sg.json", imported=True)
    text = BASE.replace("workloads: [fibonacci]", "workloads: [uploaded, inside, sharegpt]")
    with pytest.raises(SpecError) as refused:
        validate(load_yaml(text), catalog)
    assert refused.value.errors == [
        f"workloads[{i}]: workload {name!r} was made by an import: its dataset path is information only, outside "
        "host 'sim-8x-rtxpro6000''s data roots (none are set); an admin sets a host's data roots, or makes the workload"
        for i, name in enumerate(["uploaded", "inside"])
    ]
    for name in ("sim-8x-rtxpro6000", "sim-8x-rtxpro6000-b"):
        catalog.hosts[name] = replace(catalog.hosts[name], data_roots=("/data/sets",))
    spec = validate(load_yaml(text.replace("[uploaded, ", "[")), catalog)  # an admin's workload: their choice
    assert [w.workload for w in spec.workloads] == ["inside", "sharegpt"]
    assert [e.split(":")[0] for e in errors_of_with(catalog, text)] == ["workloads[0]"]
    catalog.hosts["sim-8x-rtxpro6000-b"] = replace(catalog.hosts["sim-8x-rtxpro6000-b"], data_roots=())
    shared = text.replace("[uploaded, ", "[").replace("host: sim-8x-rtxpro6000", "hosts: [sim-8x-rtxpro6000, sim-8x-rtxpro6000-b]")
    (error,) = errors_of_with(catalog, shared)
    assert error.startswith("workloads[0]: ") and "host 'sim-8x-rtxpro6000-b''s data roots (none are set)" in error


def errors_of_with(catalog, text):
    with pytest.raises(SpecError) as refused:
        validate(load_yaml(text), catalog)
    return refused.value.errors
