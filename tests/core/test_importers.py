"""The importers' parsers (sweepcore.importers), pure: detection, the field mapping from
the tools' own field names (see sweepcore/importers/), and malformed files refused with the
line and field that is wrong. Storing an import: tests/web/test_importers.py."""

import json

import pytest

from sweepcore import importers
from sweepcore.importers import ImportFileError
from tests.import_samples import ONE_BATCH_FILE, SGLANG_FILE, VLLM_FILE


def text(path):
    return path.read_text()


def parse(path, fmt=None, name=None):
    return importers.parse(name or path.name, text(path), fmt)


# -- Detection ------------------------------------------------------------------------------


@pytest.mark.parametrize("path, fmt", [
    (VLLM_FILE, "vllm"), (SGLANG_FILE, "sglang"), (ONE_BATCH_FILE, "sglang-one-batch"),
])
def test_the_format_is_detected_from_the_fields(path, fmt):
    assert importers.detect_format(path.name, text(path)) == fmt
    # The name does not matter: the fields do.
    assert importers.detect_format("results.txt", text(path)) == fmt


def test_a_file_of_no_known_format_is_refused_listing_the_formats():
    with pytest.raises(ImportFileError) as exc:
        importers.detect_format("other.json", json.dumps({"hello": 1, "world": [2]}))
    message = str(exc.value)
    assert message.startswith("other.json: not a result file of a known format")
    for fmt in importers.FORMATS:
        assert fmt in message
    with pytest.raises(ImportFileError, match="known formats: vllm, sglang, sglang-one-batch"):
        importers.parse("x.json", text(VLLM_FILE), "guidellm")


def test_a_pretty_printed_vllm_document_is_read_too():
    pretty = json.dumps(json.loads(text(VLLM_FILE)), indent=2)
    assert importers.detect_format("r.json", pretty) == "vllm"
    assert importers.parse("r.json", pretty).points[0].metrics["completed"] == 4


# -- vLLM -----------------------------------------------------------------------------------


def test_vllm_fields_map_to_ours():
    result = parse(VLLM_FILE)
    raw = json.loads(text(VLLM_FILE))
    assert result.format == "vllm" and len(result.points) == 1
    p = result.points[0]
    m = p.metrics
    assert m["completed"] == 4 and m["failed"] == 1
    assert m["total_token_throughput"] == raw["total_token_throughput"]
    assert m["output_throughput"] == raw["output_throughput"]
    for stat in ("mean", "median", "std", "p99"):
        assert m[f"{stat}_e2el_ms"] == raw[f"{stat}_e2el_ms"]
        assert m[f"{stat}_ttft_ms"] == raw[f"{stat}_ttft_ms"]
    assert m["p99_tpot_ms"] == raw["p99_tpot_ms"] and m["p99_itl_ms"] == raw["p99_itl_ms"]
    assert m["max_output_tokens_per_s"] == 96.0
    # Spec decode: the acceptance length is ours, the rest is kept, the run is speculative.
    assert m["accept_length"] == 2.84
    assert p.method == "speculative" and p.params == {}
    assert p.extra["spec_decode_num_drafts"] == 23
    assert p.extra["spec_decode_acceptance_rate"] == 61.25
    assert p.extra["spec_decode_per_position_acceptance_rates"] == [0.826, 0.609, 0.391]
    # Unmapped fields are kept under their own names; the arrays became request records.
    assert p.extra["burstiness"] == 1.0 and p.extra["p99_client_queue_time_ms"] == 450.7
    assert p.extra["tokenizer_id"] == "Qwen/Qwen3.6-27B"
    assert "ttfts" not in p.extra and "generated_texts" not in p.extra
    # Settings: closed loop at max_concurrency, the random dataset's exact prompt length.
    assert (p.workload, p.workload_kind, p.prompt_tokens, p.concurrency) == ("random", "synthetic", 1024, 2)
    assert p.request_rate is None and p.max_new_tokens == 16
    assert p.model == "Qwen/Qwen3.6-27B" and p.engine_kind == "vllm" and p.tp is None
    assert p.measured_at.isoformat() == "2026-01-15T09:30:12+00:00"


def test_vllm_detailed_arrays_become_request_records():
    p = parse(VLLM_FILE).points[0]
    raw = json.loads(text(VLLM_FILE))
    assert len(p.requests) == 5
    first = p.requests[0]
    assert first.send_time == raw["start_times"][0]
    assert first.prompt_tokens == 1024 and first.output_tokens == 16
    assert first.chunk_offsets[0] == pytest.approx(raw["ttfts"][0])
    assert first.chunk_offsets[-1] == pytest.approx(raw["ttfts"][0] + sum(raw["itls"][0]))
    assert first.chunk_tokens == [1] * 16 and first.error_kind == ""
    failed = p.requests[3]
    assert failed.error_kind == "imported_error" and "maximum context length" in failed.error
    assert failed.output_tokens == 0 and failed.chunk_offsets == []
    # decode_tok_s, which no file has, comes from the records with sweepcore.metrics.
    speeds = sorted(15 / sum(raw["itls"][i]) for i in (0, 1, 2, 4))
    assert p.metrics["decode_tok_s"] == pytest.approx((speeds[1] + speeds[2]) / 2)  # the median
    assert p.extra["computed_from_requests"] == ["decode_tok_s"]


def test_vllm_without_details_or_dataset_name():
    raw = json.loads(text(VLLM_FILE))
    for name in ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors",
                 "dataset_name"):
        raw.pop(name)
    raw["request_rate"] = 4.0
    raw["max_concurrency"] = None
    p = importers.parse("plain.json", json.dumps(raw)).points[0]
    assert p.requests == [] and "decode_tok_s" not in p.metrics
    assert p.workload == "unnamed-dataset" and p.workload_kind == "dataset" and p.prompt_tokens is None
    # Open loop: the rate is a setting of the point and of its run's parameters.
    assert p.request_rate == 4.0 and p.params == {"request_rate": 4.0}
    assert p.concurrency == 5 and p.extra["concurrency_unbounded"] is True
    assert p.max_new_tokens == 16  # total_output_tokens / completed


def vllm_summary(**changes):
    """The sample vLLM file as `--save-result` writes it without `--save-detailed`: the
    summary figures, no per-request arrays."""
    raw = json.loads(text(VLLM_FILE))
    for name in ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"):
        raw.pop(name)
    raw.update(changes)
    return importers.parse("summary.json", json.dumps({k: v for k, v in raw.items() if v is not None})).points[0]


def test_a_vllm_summary_of_a_random_dataset_takes_its_mean_prompt_length_as_the_length():
    p = vllm_summary()
    # vLLM writes no input length: 4096 input tokens over 4 completed requests.
    assert (p.workload, p.workload_kind, p.prompt_tokens, p.actual_prompt_tokens) == ("random", "synthetic", 1024, 1024)
    assert p.extra["prompt_tokens_from"] == "mean prompt length of the completed requests"
    assert vllm_summary(total_input_tokens=None).prompt_tokens is None  # nothing to take it from


def test_a_dataset_point_stores_its_mean_prompt_length_as_measured_ones_do():
    p = vllm_summary(dataset_name=None, total_input_tokens=4100)
    assert (p.workload, p.prompt_tokens, p.actual_prompt_tokens) == ("unnamed-dataset", None, 1025)
    assert "prompt_tokens_from" not in p.extra
    raw = json.loads(text(VLLM_FILE))
    raw.update(dataset_name="sharegpt", input_lens=[100, 200, 300, 1000, 400])  # the 4th request failed
    detailed = importers.parse("detailed.json", json.dumps(raw)).points[0]
    assert (detailed.prompt_tokens, detailed.actual_prompt_tokens) == (None, 250)


def test_vllm_append_result_holds_one_run_per_line():
    raw = json.loads(text(VLLM_FILE))
    second = dict(raw, max_concurrency=4)
    body = json.dumps(raw) + "\n" + json.dumps(second) + "\n"
    result = importers.parse("appended.json", body)
    assert [p.concurrency for p in result.points] == [2, 4] and [p.line for p in result.points] == [1, 2]


# -- SGLang bench_serving -------------------------------------------------------------------


def test_sglang_bench_serving_fields_map_to_ours():
    result = parse(SGLANG_FILE)
    assert result.format == "sglang" and len(result.points) == 3
    lines = [json.loads(line) for line in text(SGLANG_FILE).splitlines()]
    for p, raw in zip(result.points, lines):
        m = p.metrics
        assert m["total_token_throughput"] == raw["total_throughput"]
        for stat in ("mean", "median", "std", "p90", "p99"):
            assert m[f"{stat}_e2el_ms"] == raw[f"{stat}_e2e_latency_ms"]
        assert m["p99_ttft_ms"] == raw["p99_ttft_ms"] and m["p99_itl_ms"] == raw["p99_itl_ms"]
        assert m["accept_length"] == 3.41
        assert "server-wide" in p.extra["accept_length_source"]
        assert p.extra["p95_itl_ms"] == raw["p95_itl_ms"]
        assert p.extra["concurrency"] == raw["concurrency"]
        assert p.extra["total_output_tokens_retokenized"] == raw["total_output_tokens_retokenized"]
        assert m.get("failed") is None  # bench_serving does not count failures without details
        # server_info: TP and the speculative method and its parameters.
        assert p.tp == 4 and p.method == "ddtree"
        assert p.server_info["speculative_algorithm"] == "DDTREE"
        assert p.model == "Qwen/Qwen3.6-27B" and p.engine_kind == "sglang" and p.engine_version == "0.5.6"
        assert (p.workload, p.prompt_tokens, p.max_new_tokens) == ("random", 2000, 256)
    first, second, third = result.points
    assert [p.line for p in result.points] == [1, 2, 3]
    assert (first.concurrency, first.request_rate, first.params) == (1, None, {"budget": 15, "topk_cap": 8})
    assert (second.concurrency, second.request_rate) == (4, None)
    assert third.request_rate == 8.0 and third.params == {"budget": 15, "topk_cap": 8, "request_rate": 8.0}
    assert third.concurrency == 200 and third.extra["concurrency_unbounded"] is True


def test_sglang_output_details_become_request_records():
    raw = json.loads(text(SGLANG_FILE).splitlines()[0])
    raw.update(completed=2, input_lens=[2000, 2000, 2000], output_lens=[4, 4, 0],
               ttfts=[0.09, 0.1, 0.0], itls=[[0.007, 0.007, 0.008], [0.007, 0.006, 0.007], []],
               generated_texts=["a", "b", ""], errors=["", "", "Connection reset by peer"])
    p = importers.parse("d.jsonl", json.dumps(raw) + "\n").points[0]
    assert len(p.requests) == 3 and p.metrics["failed"] == 1
    assert p.requests[2].error == "Connection reset by peer" and p.requests[0].send_time is None
    assert p.requests[0].chunk_offsets == pytest.approx([0.09, 0.097, 0.104, 0.112])


# -- SGLang bench_one_batch_server ----------------------------------------------------------


def test_sglang_one_batch_fields_map_to_ours():
    result = parse(ONE_BATCH_FILE)
    assert result.format == "sglang-one-batch" and len(result.points) == 3
    one, eight, big = result.points
    assert [p.concurrency for p in result.points] == [1, 8, 32]
    assert all((p.workload, p.prompt_tokens, p.max_new_tokens) == ("random", 1024, 32) for p in result.points)
    assert eight.metrics["completed"] == 8 and eight.metrics["failed"] == 0
    assert eight.metrics["duration"] == 3.0517
    assert eight.metrics["total_token_throughput"] == 2768.29  # overall_throughput
    assert eight.metrics["output_throughput"] == pytest.approx(8 * 32 / 3.0517)  # ours: over the latency
    assert eight.extra["output_throughput"] == 118.98  # SGLang's own is kept
    assert eight.metrics["server_decode_tok_s"] == pytest.approx(180.9 / 8)
    assert eight.extra["last_gen_throughput"] == 180.9 and eight.extra["run_name"] == "qwen27b-tp1"
    assert "mean_ttft_ms" not in eight.metrics  # the last request's TTFT is no batch statistic
    # Batch size 1 with a ttft: that one request's statistics.
    assert one.metrics["mean_ttft_ms"] == pytest.approx(891.3) and one.metrics["p99_e2el_ms"] == pytest.approx(2134.2)
    assert one.metrics["decode_tok_s"] == pytest.approx(31 / (2.1342 - 0.8913))
    assert one.method == "autoregressive" and one.tp is None and one.model is None


def test_one_batch_acc_length_marks_speculation():
    line = json.loads(text(ONE_BATCH_FILE).splitlines()[1])
    line["acc_length"] = 3.2
    p = importers.parse("o.jsonl", json.dumps(line)).points[0]
    assert p.metrics["accept_length"] == 3.2 and p.method == "speculative"


# -- Malformed files ------------------------------------------------------------------------


def test_invalid_json_names_the_line_and_column():
    lines = text(SGLANG_FILE).splitlines()
    lines[1] = lines[1].replace('"completed": ', '"completed": ,')
    with pytest.raises(ImportFileError) as exc:
        importers.parse("results.jsonl", "\n".join(lines))
    assert str(exc.value).startswith("results.jsonl line 2 column ")
    assert "invalid JSON" in str(exc.value)
    with pytest.raises(ImportFileError, match=r"^r\.json line 3 column \d+: invalid JSON"):
        importers.parse("r.json", '{\n  "completed": 1,\n  "duration": ,\n}')


def test_a_wrong_type_names_the_line_and_field():
    lines = text(SGLANG_FILE).splitlines()
    raw = json.loads(lines[2])
    raw["mean_ttft_ms"] = "fast"
    lines[2] = json.dumps(raw)
    with pytest.raises(ImportFileError) as exc:
        importers.parse("results.jsonl", "\n".join(lines))
    assert str(exc.value) == "results.jsonl line 3: field 'mean_ttft_ms': expected a number, got \"fast\""


def test_a_wrong_item_of_a_detailed_array_names_its_index():
    raw = json.loads(text(VLLM_FILE))
    raw["ttfts"][2] = "slow"
    with pytest.raises(ImportFileError) as exc:
        importers.parse("result.json", json.dumps(raw))
    assert str(exc.value) == "result.json: field 'ttfts[2]': expected a number >= 0, got \"slow\""
    raw = json.loads(text(VLLM_FILE))
    raw["itls"] = raw["itls"][:4]
    with pytest.raises(ImportFileError, match=r"field 'itls': expected 5 items \(one per request\), got 4"):
        importers.parse("result.json", json.dumps(raw))


@pytest.mark.parametrize("path, field, fmt", [
    (VLLM_FILE, "completed", "vllm"),
    (SGLANG_FILE, "duration", "sglang"),
    (ONE_BATCH_FILE, "latency", "sglang-one-batch"),
])
def test_a_missing_required_field_is_named(path, field, fmt):
    lines = text(path).splitlines()
    raw = json.loads(lines[-1])
    raw.pop(field)
    lines[-1] = json.dumps(raw)
    with pytest.raises(ImportFileError) as exc:
        importers.parse(path.name, "\n".join(lines), fmt)
    where = f"{path.name} line {len(lines)}" if len(lines) > 1 or path.suffix == ".jsonl" else path.name
    assert str(exc.value) == f"{where}: field {field!r}: missing (a number is required)" or \
        str(exc.value) == f"{where}: field {field!r}: missing (an integer is required)"


def test_other_malformed_cases():
    with pytest.raises(ImportFileError, match="the file is empty"):
        importers.parse("e.jsonl", "\n\n")
    with pytest.raises(ImportFileError, match=r"^a\.jsonl line 2: expected a JSON object, got a list of 2"):
        importers.parse("a.jsonl", text(ONE_BATCH_FILE).splitlines()[0] + "\n[1, 2]\n", "sglang-one-batch")
    with pytest.raises(ImportFileError, match="not UTF-8 text"):
        importers.parse("b.json", b"\xff\xfe{")
    with pytest.raises(ImportFileError, match=r"field 'batch_size': expected an integer >= 1, got 0"):
        line = json.loads(text(ONE_BATCH_FILE).splitlines()[0])
        importers.parse("c.jsonl", json.dumps(dict(line, batch_size=0)))
    with pytest.raises(ImportFileError, match=r"field 'request_rate': expected a number or \"inf\", got true"):
        importers.parse("d.json", json.dumps(dict(json.loads(text(VLLM_FILE)), request_rate=True)))
