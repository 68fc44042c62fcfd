"""Bad input at an import's edges (sweepcore.importers' limits): what one web request
reads, computes and stores is bounded: request records per point and per file, the size of
what a point keeps in ``extra``, the results of a file; integers beyond their column and
JSON nested too deep are the file's errors, never a crash."""

import json

import pytest

from sweepcore import importers
from sweepcore.importers import ImportFileError, common
from tests.import_samples import ONE_BATCH_FILE, SGLANG_FILE, vllm_detailed


@pytest.fixture
def small_caps(monkeypatch):
    """Caps small enough to meet with a few requests: 10 records a point, 15 a file."""
    monkeypatch.setattr(common, "MAX_REQUESTS_PER_POINT", 10)
    monkeypatch.setattr(common, "MAX_REQUESTS_PER_FILE", 15)


def test_a_point_over_the_record_cap_stores_an_even_sample_and_counts_every_request(small_caps):
    (point,) = importers.parse("big.json", vllm_detailed(100)).points
    assert [r.index for r in point.requests] == list(range(0, 100, 10))  # spread over the run, not its start
    assert point.requests_in_file == 100
    assert point.requests_note.startswith("10 of the file's 100 requests stored, an even sample (Sweeplab stores "
                                          "up to 10 a point and 15 a file)")
    # Counts and lengths are over every request of the file, not the sample.
    assert point.metrics["failed"] == 10 and point.metrics["completed"] == 90
    assert point.actual_prompt_tokens == round(sum(100 + i % 7 for i in range(100) if i % 10 != 9) / 90)
    assert point.max_new_tokens == 2 and point.metrics["decode_tok_s"] is not None


def test_the_files_record_budget_is_shared_by_its_points(small_caps):
    line = json.loads(vllm_detailed(12))
    text = "\n".join(json.dumps({**line, "max_concurrency": c}) for c in (1, 2, 4)) + "\n"
    points = importers.parse("three.jsonl", text).points
    assert [len(p.requests) for p in points] == [5, 5, 5]  # 15 a file, shared evenly
    assert all(p.requests_in_file == 12 for p in points)


def test_a_point_under_the_cap_stores_every_request_and_no_note(small_caps):
    (point,) = importers.parse("small.json", vllm_detailed(8)).points
    assert len(point.requests) == 8 and point.requests_note == ""


def test_a_per_request_array_too_large_for_extra_is_left_out_and_named(monkeypatch):
    monkeypatch.setattr(common, "MAX_EXTRA_FIELD_BYTES", 100)
    (point,) = importers.parse("big.json", vllm_detailed(60)).points
    assert "latencies" not in point.extra and "queue_times" not in point.extra
    assert point.extra["left_out"]["fields"] == {"latencies": "a list of 60 items", "queue_times": "a list of 60 items"}
    assert point.extra["left_out"]["why"] == "each over 100 bytes of JSON (Sweeplab's limit); the file keeps them"
    assert point.extra["tokenizer_id"] == "Qwen/Qwen3.6-27B"  # small fields stay


def test_an_integer_beyond_its_database_column_is_the_files_error():
    with pytest.raises(ImportFileError) as exc:
        importers.parse("huge.json", vllm_detailed(3, max_concurrency=10**18))
    assert str(exc.value) == ("huge.json: field 'max_concurrency': expected an integer up to 2,147,483,647 "
                              "(Sweeplab's limit), got 1000000000000000000")
    with pytest.raises(ImportFileError, match=r"field 'input_lens\[0\]': expected an integer up to 2,147,483,647"):
        importers.parse("huge.json", vllm_detailed(3, input_lens=[10**18, 1, 1]))
    # A setting derived from the file (the mean output length of a summary) is checked too.
    summary = json.loads(vllm_detailed(3))
    for name in ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"):
        summary.pop(name)
    summary.update(completed=1, total_output_tokens=10**15)
    with pytest.raises(ImportFileError, match=r"the point's max_new_tokens comes to 1,000,000,000,000,000"):
        importers.parse("summary.json", json.dumps(summary))


@pytest.mark.parametrize(("depth", "error"), [
    (40, "deep.json: field 'notes': lists and objects nested deeper than 32 levels (Sweeplab's limit)"),
    (10_000, "deep.json line 1: JSON nested too deep to read"),
])
def test_json_nested_too_deep_is_the_files_error_not_a_crash(depth, error):
    text = vllm_detailed(2)[:-1] + f', "notes": {"[" * depth + "]" * depth}}}'
    with pytest.raises(ImportFileError) as exc:
        importers.parse("deep.json", text)
    assert str(exc.value) == error


def test_a_file_of_more_results_than_the_limit_is_refused_before_they_are_parsed(monkeypatch):
    monkeypatch.setattr(common, "MAX_POINTS_PER_FILE", 2)
    lines = SGLANG_FILE.read_text().splitlines()
    assert len(lines) == 3
    with pytest.raises(ImportFileError) as exc:
        importers.parse(SGLANG_FILE.name, "\n".join(lines))
    assert str(exc.value) == f"{SGLANG_FILE.name}: 3 results (lines); a file may hold up to 2 results (Sweeplab's limit): split it"


# -- Texts: none stored with a NUL character (PostgreSQL stores none) -----------------------


def sglang_line(**changes):
    data = json.loads(SGLANG_FILE.read_text().splitlines()[0])
    server_info = {**data["server_info"], **changes.pop("server_info", {})}
    return json.dumps({**data, **changes, "server_info": server_info}) + "\n"


def one_batch_line(**changes):
    return json.dumps({**json.loads(ONE_BATCH_FILE.read_text().splitlines()[0]), **changes}) + "\n"


@pytest.mark.parametrize(("text", "field"), [
    (sglang_line(tag="a\x00"), "tag"),
    (sglang_line(backend="sglang\x00"), "backend"),
    (sglang_line(server_info={"version": "0.5\x00"}), "server_info.version"),
    (sglang_line(server_info={"served_model_name": "Qwen\x00"}), "server_info.served_model_name"),
    (sglang_line(server_info={"internal_states": [{"a": 1}, {"b\x00": 2}]}), "server_info.internal_states[1]"),
    (sglang_line(notes={"deep": ["x", "y\x00"]}), "notes.deep[1]"),
    (sglang_line(dataset_path="/data/\x00.json"), "dataset_path"),
    (one_batch_line(run_name="b\x00"), "run_name"),
    (one_batch_line(run_name={"parts": ["a", "b\x00"]}), "run_name.parts[1]"),
    (vllm_detailed(3, label="run\x00"), "label"),
    (vllm_detailed(3, model_id="Qwen\x00"), "model_id"),
    (vllm_detailed(20, errors=["boom\x00" if i == 9 else "" for i in range(20)]), "errors[9]"),
])
def test_a_text_of_the_file_with_a_nul_is_the_files_error_naming_the_field(text, field):
    name = "bench.jsonl" if text.count("\n") else "bench.json"
    with pytest.raises(ImportFileError) as exc:
        importers.parse(name, text)
    where = "bench.jsonl line 1" if name.endswith("l") else "bench.json"
    assert str(exc.value) == f"{where}: field {field!r}: may not contain a NUL character"


def test_a_nul_in_a_text_that_is_not_stored_is_not_the_files_error():
    """Generated texts are not kept (extra leaves them out): a model may write anything."""
    (point,) = importers.parse("bench.json", vllm_detailed(3, generated_texts=["a\x00", "b", "c"])).points
    assert point.engine_version == "" and "generated_texts" not in point.extra


def test_a_long_engine_version_or_label_is_parsed_as_it_is():
    """Their columns' lengths are the database's (runs.imports checks them against it)."""
    (point, *_) = importers.parse("bench.jsonl", sglang_line(tag="t" * 300, server_info={"version": "v" * 300})).points
    assert point.label == "t" * 300 and point.engine_version == "v" * 300
