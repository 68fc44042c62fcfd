"""Bad input at the spec's edges: every number has a bound that fits its database column,
lists and the plan are bounded, and a text too large, too deep or self-repeating is refused
with the limit named, fast, before anything recurses or expands (sweepcore.spec's limits)."""

import json
from pathlib import Path

import pytest

from sweepcore import spec as spec_mod
from sweepcore.plan import plan
from sweepcore.spec import SpecError, load_json, load_spec_file, load_yaml, validate
from tests.core.catalogs import demo_catalog

README = Path(__file__).resolve().parents[2] / "README.md"

CLOSED = {
    "name": "edge", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
    "tp": [1], "methods": ["autoregressive"], "workloads": ["fibonacci"],
}


def errors_of(data):
    with pytest.raises(SpecError) as exc:
        validate(data, demo_catalog())
    return exc.value.errors


def search(metric, **body):
    return {"search": {"max_goodput": {"metric": metric, "low": 1, "high": 8, **body}}, "slo": {"ttft_p99_ms": 500}}


def test_a_spec_at_every_bound_is_valid_and_plans():
    data = {
        **CLOSED,
        "tp": [1, 8],
        "methods": ["autoregressive", {"ddtree": {"budget": [spec_mod.MAX_PARAM], "topk_cap": 8}}],
        "workloads": [{"long-context": {"prompt_tokens": [1000, spec_mod.MAX_PROMPT_TOKENS]}}],
        "max_new_tokens": spec_mod.MAX_NEW_TOKENS,
        "concurrency": [1, spec_mod.MAX_IN_FLIGHT],
        "requests_per_point": spec_mod.MAX_REQUESTS_PER_POINT,
        "repeats": spec_mod.MAX_REPEATS,
        "warmup_requests": spec_mod.MAX_WARMUP_REQUESTS,
        "options": {"retries": spec_mod.MAX_RETRIES, "stall_timeout_s": spec_mod.MAX_TIMEOUT_S,
                    "first_token_timeout_s": spec_mod.MAX_TIMEOUT_S, "cooldown_s": spec_mod.MAX_TIMEOUT_S,
                    "context_margin_tokens": spec_mod.MAX_PROMPT_TOKENS},
    }
    spec = validate(data, demo_catalog())
    assert spec.max_new_tokens == spec_mod.MAX_NEW_TOKENS and spec.concurrency == (1, spec_mod.MAX_IN_FLIGHT)
    assert plan(spec, demo_catalog()).totals["points"] == 2 * 2 * 2 * 2  # runs x lengths x concurrency


def test_every_bound_fits_the_integer_column_its_value_goes_to():
    bounds = [bound for _, bound in spec_mod.LIMITS]
    assert max(bounds) == spec_mod.INT_COLUMN_MAX == 2**31 - 1
    assert spec_mod.OPEN_LOOP_MAX_CONCURRENCY <= spec_mod.MAX_IN_FLIGHT


@pytest.mark.parametrize("field", ["prompt_tokens", "max_new_tokens", "concurrency"])
def test_a_number_of_10_to_the_18_is_refused_with_its_path_and_bound(field):
    huge = 10**18
    data = {
        "prompt_tokens": {**CLOSED, "workloads": [{"long-context": {"prompt_tokens": [huge]}}]},
        "max_new_tokens": {**CLOSED, "max_new_tokens": huge},
        "concurrency": {**CLOSED, "concurrency": [huge]},
    }[field]
    bound = {"prompt_tokens": "10,000,000", "max_new_tokens": "1,000,000", "concurrency": "4,096"}[field]
    path = "workloads[0].long-context.prompt_tokens" if field == "prompt_tokens" else field
    (error,) = errors_of(data)
    assert error.startswith(f"{path}: expected ") and f"up to {bound} (Sweeplab's limit), got {huge}" in error


@pytest.mark.parametrize(
    ("changes", "path", "bound"),
    [
        ({"tp": [spec_mod.MAX_TP + 1]}, "tp", "1,024"),
        ({"methods": [{"ddtree": {"budget": [spec_mod.MAX_PARAM + 1]}}]}, "methods[0].ddtree.budget", "1,000,000"),
        ({"requests_per_point": 10**9}, "requests_per_point", "1,000,000"),
        ({"repeats": spec_mod.MAX_REPEATS + 1}, "repeats", "100"),
        ({"warmup_requests": spec_mod.MAX_WARMUP_REQUESTS + 1}, "warmup_requests", "10,000"),
        ({"concurrency": None, "request_rate": [1e9]}, "request_rate[0]", "100,000"),
        ({"concurrency": None, "request_rate": [1], "burstiness": 1e9}, "burstiness", "1,000"),
        ({"concurrency": None, "request_rate": [1], "max_concurrency": 100000}, "max_concurrency", "4,096"),
        ({"duration_s": 10**7}, "duration_s", "86,400"),
        ({"until_stable": {"metric": "decode_tok_s", "rel_ci": 0.05, "min_requests": 5, "max_requests": 10**12}},
         "until_stable.max_requests", "1,000,000"),
        ({"options": {"stall_timeout_s": 10**9}}, "options.stall_timeout_s", "86,400"),
        ({"options": {"retries": 10**9}}, "options.retries", "100"),
        ({"options": {"cooldown_s": 1e9}}, "options.cooldown_s", "86,400"),
        ({"slo": {"ttft_p99_ms": 1e12}}, "slo.ttft_p99_ms", "86,400,000"),
        ({"exclude": [{"method": "ddtree", "budget": 10**18}]}, "exclude[0].budget", "1,000,000"),
        ({"concurrency": None, **search("concurrency", high=100000)}, "search.max_goodput.high", "4,096"),
        ({"concurrency": None, **search("request_rate", high=1e9)}, "search.max_goodput.high", "100,000"),
        ({"concurrency": None, **search("concurrency", max_probes=10**6)}, "search.max_goodput.max_probes", "1,000"),
    ],
)
def test_every_number_beyond_its_bound_is_refused_with_its_path_and_bound(changes, path, bound):
    data = {**CLOSED, **changes}
    data = {k: v for k, v in data.items() if v is not None}
    errors = errors_of(data)
    assert any(e.startswith(f"{path}: ") and f"{bound} (Sweeplab's limit)" in e for e in errors), errors


def test_a_list_longer_than_the_limit_is_refused_without_looking_at_its_items():
    (error,) = errors_of({**CLOSED, "concurrency": list(range(1, 10_001))})
    assert error == "concurrency: expected a list of up to 256 items (Sweeplab's limit), got 10,000"
    assert errors_of({**CLOSED, "exclude": [{"tp": 1}] * 1001})[0].startswith("exclude: expected a list of up to 1,000")


def no_configurations_made(monkeypatch):
    """sweepcore.spec's maker of configurations (the planner's too) fails the test if called:
    a bound refused on counts must come before anything is made (timing cannot tell, as
    2,048 small objects take milliseconds)."""
    def refuse(method_spec):
        raise AssertionError(f"the configurations of {method_spec.method} were made before the refusal")

    monkeypatch.setattr(spec_mod, "_expand", refuse)


def test_a_sweep_of_too_many_runs_is_refused_before_its_configurations_are_made(monkeypatch):
    methods = [{"ddtree": {"budget": list(range(1, 257)), "topk_cap": 8}},
               {"dflash": {"block_size": list(range(1, 257))}}]
    no_configurations_made(monkeypatch)
    errors = errors_of({**CLOSED, "tp": [1, 2, 4, 8], "methods": methods})
    assert errors == ["methods: 2,048 runs (configurations x TP sizes); a sweep may plan up to 2,000 runs "
                      "(Sweeplab's limit)"]


def test_a_run_of_too_many_points_is_refused_before_they_are_made(monkeypatch):
    data = {**CLOSED, "workloads": [{"long-context": {"prompt_tokens": list(range(1, 257))}}],
            "concurrency": list(range(1, 257))}
    no_configurations_made(monkeypatch)  # points are made from configurations (sweepcore.plan)
    (error,) = errors_of(data)
    assert error == "workloads: 65,536 points a run (workloads and lengths x loads); a sweep may plan up to 10,000 " \
                    "points (Sweeplab's limit)"


def nested(depth, open_="[", close="]"):
    return open_ * depth + close * depth


@pytest.mark.parametrize("depth", [40, 10_000])
def test_yaml_nested_deeper_than_the_limit_is_refused_while_read_naming_the_limit(depth, monkeypatch):
    # Refused as PyYAML composes the nodes: before any Python object is built from them,
    # and before the check of the loaded data (which would name no line).
    def not_reached(*args, **kwargs):
        raise AssertionError("the deep YAML was read to its end before the refusal")

    monkeypatch.setattr(spec_mod._StrictLoader, "construct_document", not_reached)
    monkeypatch.setattr(spec_mod, "check_shape", not_reached)
    with pytest.raises(SpecError) as exc:
        load_yaml(f"name: deep\nmethods: {nested(depth)}\n", source="s.yaml")
    # The 32nd "[" of the list: the spec's own mapping is the first level.
    assert str(exc.value) == ("s.yaml: line 2, column 41: lists and mappings nested deeper than 32 levels "
                              "(Sweeplab's limit)")


@pytest.mark.parametrize("depth", [40, 900, 10_000])
def test_json_nested_deeper_than_the_limit_is_refused_naming_the_limit(depth):
    with pytest.raises(SpecError) as exc:
        load_json(json.dumps({"name": "deep"})[:-1] + f', "methods": {nested(depth)}}}')
    assert str(exc.value) == "spec: lists and mappings nested deeper than 32 levels (Sweeplab's limit)"


def test_a_spec_nested_to_the_limit_still_loads():
    assert load_yaml(f"methods: {nested(31)}\n")["methods"] == json.loads(nested(31))
    assert load_json(json.dumps({"methods": json.loads(nested(31))}))


class CountedList(list):
    """A list that counts every item read from it (CountedList.reads, over all of them)."""

    reads = 0

    def __iter__(self):
        for item in super().__iter__():
            CountedList.reads += 1
            yield item


def counted_sequence(loader, node):
    data = CountedList()
    yield data
    data.extend(loader.construct_sequence(node))


def test_yaml_aliases_that_repeat_a_list_exponentially_are_refused_at_the_bound(monkeypatch):
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    # Every list the YAML makes counts its reads: of the ~10^9 values the aliases repeat, the
    # refusal reads the bound's worth (100,000) and a stack's, not all of them.
    loader = type("CountingLoader", (spec_mod._StrictLoader,), {})
    loader.add_constructor("tag:yaml.org,2002:seq", counted_sequence)
    monkeypatch.setattr(spec_mod, "_StrictLoader", loader)
    monkeypatch.setattr(CountedList, "reads", 0)
    with pytest.raises(SpecError) as exc:
        load_yaml("\n".join(lines) + "\n")
    assert spec_mod.SPEC_MAX_VALUES < CountedList.reads < spec_mod.SPEC_MAX_VALUES + 1000, CountedList.reads
    assert str(exc.value) == ("spec: more than 100,000 values (Sweeplab's limit; a YAML alias counts as what it "
                              "repeats)")


def test_a_spec_text_beyond_the_limit_is_refused_before_it_is_parsed(tmp_path):
    text = "name: big\ndescription: " + "x" * spec_mod.SPEC_MAX_BYTES + "\n"
    for load in (load_yaml, load_json):
        with pytest.raises(SpecError, match=r"^spec: more than 1,048,576 bytes; a spec may be up to 1,048,576 bytes \(Sweeplab's limit\)$"):
            load(text)
    big = tmp_path / "big.yaml"
    big.write_text(text)
    with pytest.raises(SpecError) as exc:
        load_spec_file(big, demo_catalog())
    assert str(exc.value) == (f"{big}: more than 1,048,576 bytes; a sweep file may be up to 1,048,576 bytes "
                              f"(Sweeplab's limit)")


# -- Texts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "most", "problem"), [
    ("a" * 200, 200, ""),
    ("", 200, ""),
    ("a" * 201, 200, "at most 200 characters (got 201)"),
    ("a" * 12_345, 10_000, "at most 10,000 characters (got 12,345)"),
    ("a\x00b", 200, "may not contain a NUL character"),
    ("\x00" * 300, 200, "may not contain a NUL character"),  # the NUL first: said whatever the length
    ("a" * 10**6, None, ""),
    ("\x00", None, "may not contain a NUL character"),
    ("é" * 200, 200, ""),  # characters, not bytes, as the columns count them
])
def test_text_problem_says_why_a_text_cannot_be_stored(text, most, problem):
    assert spec_mod.text_problem(text, most) == problem


@pytest.mark.parametrize(("changes", "error"), [
    ({"name": "n" * 201}, "name: at most 200 characters (got 201)"),
    ({"name": "  " + "n" * 200 + "  "}, None),  # stripped first
    ({"name": "a\x00b"}, "name: may not contain a NUL character"),
    ({"description": "x\x00"}, "description: may not contain a NUL character"),
    ({"description": "d" * 10_001}, "description: at most 10,000 characters (got 10,001)"),
    ({"description": "d" * 10_000}, None),
    ({"description": 3}, "description: expected a string, got 3"),
    ({"host": "sim\x00"}, "host: unknown host 'sim\\x00'; known hosts: "),  # looked up, not stored
])
def test_a_spec_text_beyond_its_limit_is_refused_with_its_field(changes, error):
    data = {**CLOSED, **changes}
    if error is None:
        spec = validate(data, demo_catalog())
        assert len(spec.name) <= spec_mod.MAX_NAME_CHARS and len(spec.description) <= spec_mod.MAX_TEXT_CHARS
        return
    (found,) = errors_of(data)
    assert found.startswith(error), found


def test_a_nul_written_as_a_yaml_or_json_escape_is_refused():
    for data in (load_yaml('name: "a\\0b"\n'), load_json('{"name": "a\\u0000b"}')):
        assert data["name"] == "a\x00b"
        assert "name: may not contain a NUL character" in errors_of({**CLOSED, **data})


def test_the_readme_states_every_limit():
    text = README.read_text()
    for what, bound in spec_mod.LIMITS:
        assert f"| {what} | {bound:,} |" in text, what


# -- Requests in flight and the worker's open files ---------------------------------------


class Limits:
    """resource's getrlimit / setrlimit for RLIMIT_NOFILE, with limits of the test's own."""

    def __init__(self, soft, hard, settable=True):
        self.soft, self.hard, self.settable = soft, hard, settable

    def getrlimit(self, which):
        return self.soft, self.hard

    def setrlimit(self, which, limits):
        if not self.settable:
            raise ValueError("not allowed")
        self.soft = limits[0]


@pytest.fixture
def nofile(monkeypatch):
    from sweepcore.loadgen import runner

    def install(soft, hard, settable=True):
        limits = Limits(soft, hard, settable)
        monkeypatch.setattr(runner.resource, "getrlimit", limits.getrlimit)
        monkeypatch.setattr(runner.resource, "setrlimit", limits.setrlimit)
        return limits

    return install


def test_a_load_within_the_open_files_limit_is_fine(nofile):
    from sweepcore.loadgen import open_files_problem

    nofile(20_000, 20_000)
    assert open_files_problem(spec_mod.MAX_IN_FLIGHT) is None


def test_the_soft_open_files_limit_is_raised_as_far_as_the_hard_one_allows(nofile):
    from sweepcore.loadgen import open_files_problem

    limits = nofile(1024, 8192)
    assert open_files_problem(4096) is None and limits.soft == 4096 + 256


def test_a_load_beyond_the_open_files_limit_is_refused_with_the_numbers(nofile):
    from sweepcore.loadgen import open_files_problem

    nofile(1024, 2048)
    assert open_files_problem(4096) == ("concurrency 4,096 needs about 4,352 open files (a socket per request in "
                                        "flight and 256 more); this worker may open 2,048 (ulimit -n)")
    nofile(1024, 8192, settable=False)
    assert open_files_problem(4096).endswith("this worker may open 1,024 (ulimit -n)")
