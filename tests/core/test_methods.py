"""Every entry of the decoding-method registry (sweepcore.methods) round-trips: a spec naming
it validates, the plan gives its run, each engine kind that can run it builds its argv, charts
label and colour it apart from the others, and the importers map the engine's name for it back
to it. Pure: no Django."""

import json

import pytest
import yaml

from sweepcore import importers
from sweepcore.engines import ADAPTERS, LaunchValues, get_adapter
from sweepcore.engines.base import PLACEHOLDERS
from sweepcore.methods import (
    AUTOREGRESSIVE,
    METHOD_PARAMS,
    METHODS,
    REGISTRY,
    SGLANG,
    SPECULATIVE,
    VLLM,
    config_label,
    imported_method,
    methods_for,
)
from sweepcore.plan import plan
from sweepcore.spec import (
    Catalog,
    EngineInfo,
    HostInfo,
    ModelInfo,
    SpecError,
    WorkloadInfo,
    dump_yaml,
    load_yaml,
    validate,
)

LAUNCHABLE = [m for m in REGISTRY if m.launchable]
TEMPLATES = {
    "sglang": ["{python}", "-m", "sglang.launch_server", "--model-path", "{model_path}", "--tp-size", "{tp}",
               "--host", "{host}", "--port", "{port}"],
    "simulated": ["{python}", "-m", "simengine", "--model-path", "{model_path}", "--tp-size", "{tp}",
                  "--host", "{host}", "--port", "{port}"],
    "vllm": ["vllm", "serve", "{model_path}", "--tensor-parallel-size", "{tp}", "--port", "{port}"],
    "llamacpp": ["{python}", "-m", "llama_cpp.server", "--model", "{model_path}", "--n_ctx", "{context_length}",
                 "--host", "{host}", "--port", "{port}"],
}
LAUNCH = {"python": "/usr/bin/python3", "model_path": "/models/m", "host": "127.0.0.1", "port": 30001, "tp": 1,
          "context_length": 4096}


def sample_params(method):
    """One value per parameter, none of them a default, all different, and keeping the
    method's rule between its parameters (rising values, else falling ones)."""
    rising = {p.name: 3 + 2 * i for i, p in enumerate(method.params)}
    if method.rule is None or method.rule[0](rising):
        return rising
    return {p.name: 3 + 2 * (len(method.params) - 1 - i) for i, p in enumerate(method.params)}


def engine_name(kind):
    return f"{kind}-engine"


def catalog():
    """One engine per kind, running every method the registry says that kind can run."""
    return Catalog(
        hosts={"gpu-host": HostInfo("gpu-host", 8, "9.0", "H200")},
        engines={engine_name(kind): EngineInfo(engine_name(kind), kind, methods_for(kind)) for kind in ADAPTERS},
        models={"m": ModelInfo("m", 32768)},
        workloads={"fibonacci": WorkloadInfo("fibonacci", "fixed")},
    )


def spec_text(method, kind, params):
    body = {p.name: [params[p.name]] if p.swept else params[p.name] for p in method.params}
    entry = {method.name: body} if body else method.name
    return yaml.safe_dump({"name": f"{method.name}-roundtrip", "host": "gpu-host", "engine": engine_name(kind),
                           "model": "m", "methods": [entry], "workloads": ["fibonacci"]})


def rendered(fragment, params):
    """The fragment with the method's parameters filled in (other placeholders kept)."""
    return [str(params[item[1:-1]]) if item[1:-1] in params else item for item in fragment]


@pytest.mark.parametrize("method", LAUNCHABLE, ids=lambda m: m.name)
def test_a_spec_naming_the_method_validates_and_plans_its_run(method):
    params = sample_params(method)
    kind = next(iter(method.engines))
    spec = validate(load_yaml(spec_text(method, kind, params)), catalog())
    assert validate(load_yaml(dump_yaml(spec.to_dict())), catalog()) == spec
    runs = plan(spec, catalog()).runs
    assert [(r.method, r.params, r.tp, r.status) for r in runs] == [(method.name, params, 1, "planned")]
    assert runs[0].label == config_label(method.name, params, 1)


@pytest.mark.parametrize(
    "method, kind", [(m, kind) for m in LAUNCHABLE for kind in m.engines], ids=lambda v: getattr(v, "name", v)
)
def test_each_engine_kind_that_runs_the_method_builds_its_flags(method, kind):
    params = sample_params(method)
    args = method.engines[kind]
    values = LaunchValues(**LAUNCH, method=method.name, params=params, draft_model_path="/models/draft")
    method_args = {method.name: list(args.fragment)} if args.fragment else {}
    argv = get_adapter(kind).argv(TEMPLATES[kind], method_args, values)
    template = rendered(TEMPLATES[kind], LAUNCH)
    assert argv[: len(template)] == template
    fragment = argv[len(template): len(template) + len(args.fragment)]
    if method.name == AUTOREGRESSIVE:
        assert not args.fragment and not any(p in argv for p in ("--speculative-algorithm", "--speculative-config"))
    elif kind == VLLM:
        assert fragment[0] == "--speculative-config"
        config = json.loads(fragment[1])
        assert config["method"] == args.name
        assert {key: config[key] for _, key in args.config_keys} == {key: params[p] for p, key in args.config_keys}
    else:
        assert fragment == rendered(args.fragment, params)
        assert all(str(value) in fragment for value in params.values())


def test_the_argv_builder_types_every_parameter_of_every_method():
    for method in REGISTRY:
        for param in method.params:
            assert PLACEHOLDERS[param.name] is param.type


def test_the_registry_names_only_engine_kinds_that_have_an_adapter():
    assert {kind for m in REGISTRY for kind in m.engines} <= set(ADAPTERS)
    assert all(methods_for(kind)[0] == AUTOREGRESSIVE for kind in ADAPTERS)


def test_a_configuration_is_labelled_alike_from_its_params_or_their_stored_key():
    from sweepcore.plan import canonical_params

    for m in REGISTRY:
        params = sample_params(m)
        assert config_label(m.name, canonical_params(params), 4) == config_label(m.name, params, 4)
    assert config_label("ddtree", '{"topk_cap":8,"budget":12}') == "ddtree budget=12 topk_cap=8"
    assert config_label(AUTOREGRESSIVE, "{}", 1) == config_label(AUTOREGRESSIVE, "", 1) == "autoregressive TP1"


def test_charts_label_and_colour_every_method_apart():
    labels = [config_label(m.name, sample_params(m), 1) for m in REGISTRY]
    assert all(labels) and len(set(labels)) == len(labels)
    assert all(label.startswith(m.name) for m, label in zip(REGISTRY, labels))
    assert len({m.label for m in REGISTRY}) == len(REGISTRY)
    colours = [m.colour for m in LAUNCHABLE]
    assert None not in colours and len(set(colours)) == len(colours)
    for m in REGISTRY:
        if m.lookahead is not None:
            assert next(p for p in m.params if p.name == m.lookahead.param).swept
            assert m.lookahead.label


def sglang_result(server_info, accept_length=None):
    line = {"backend": "sglang", "dataset_name": "random", "random_input_len": 100, "random_output_len": 10,
            "max_concurrency": 1, "completed": 4, "duration": 2.0, "total_throughput": 220.0,
            "mean_e2e_latency_ms": 500.0, "server_info": {"tp_size": 1, **server_info}}
    if accept_length is not None:
        line["accept_length"] = accept_length
    return json.dumps(line) + "\n"


@pytest.mark.parametrize("method", [m for m in REGISTRY if m.imported_params is not None], ids=lambda m: m.name)
def test_the_importers_map_the_engines_name_back_to_the_method(method):
    params = sample_params(method)
    assert set(method.imported_params.values()) == set(method.param_names)
    info = {"speculative_algorithm": method.engines[SGLANG].name}
    info.update({theirs: params[ours] for theirs, ours in method.imported_params.items()})
    point = importers.parse("r.jsonl", sglang_result(info, accept_length=2.5), "sglang").points[0]
    assert (point.method, point.params, point.tp) == (method.name, params, 1)
    assert imported_method(method.engines[SGLANG].name.lower()) is method


def test_a_result_without_speculation_is_autoregressive_and_an_unknown_algorithm_speculative():
    plain = importers.parse("r.jsonl", sglang_result({}), "sglang").points[0]
    assert (plain.method, plain.params) == (AUTOREGRESSIVE, {})
    other = importers.parse("r.jsonl", sglang_result({"speculative_algorithm": "EAGLE3"}, 2.0), "sglang").points[0]
    assert (other.method, other.params) == (SPECULATIVE, {"algorithm": "EAGLE3"})
    assert not METHODS[SPECULATIVE].launchable and SPECULATIVE not in METHOD_PARAMS


def test_a_method_the_importers_do_not_name_is_imported_as_speculative():
    for method in REGISTRY:
        if method.imported_params is None:
            for args in method.engines.values():
                assert args.name == "" or imported_method(args.name) is None


def ngram_spec(**body):
    return yaml.safe_dump({"name": "ngram-window", "host": "gpu-host", "engine": engine_name(VLLM), "model": "m",
                           "methods": [{"ngram": body}], "workloads": ["fibonacci"]})


def test_ngram_configurations_that_break_its_lookup_window_rule_are_left_out_of_the_plan():
    text = ngram_spec(num_speculative_tokens=[2], prompt_lookup_max=[2, 4], prompt_lookup_min=[3])
    runs = plan(validate(load_yaml(text), catalog()), catalog()).runs
    assert [r.params for r in runs] == [{"num_speculative_tokens": 2, "prompt_lookup_max": 4, "prompt_lookup_min": 3}]


def test_an_ngram_window_that_no_combination_can_keep_is_refused_with_the_rule():
    text = ngram_spec(num_speculative_tokens=[2], prompt_lookup_max=[2], prompt_lookup_min=[3])
    with pytest.raises(SpecError, match=r"methods\[0\]\.ngram: no combination .* prompt_lookup_min <= prompt_lookup_max"):
        validate(load_yaml(text), catalog())


def test_ngram_lookup_window_defaults_to_two_to_four_tokens():
    runs = plan(validate(load_yaml(ngram_spec(num_speculative_tokens=[4])), catalog()), catalog()).runs
    assert [r.params for r in runs] == [{"num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}]
