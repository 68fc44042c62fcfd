import json

import pytest

from sweepcore.engines import ArgvError, LaunchValues, get_adapter
from sweepcore.engines.base import render
from sweepcore.engines.vllm import metric_sum, parse_metrics

SGLANG = ["{python}", "-m", "sglang.launch_server", "--model-path", "{model_path}", "--tp-size", "{tp}",
          "--context-length", "{context_length}", "--host", "{host}", "--port", "{port}"]
FRAGMENTS = {
    "dflash": ["--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens", "{block_size}"],
    "ddtree": ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "{budget}",
               "--speculative-ddtree-topk-cap", "{topk_cap}"],
}


def values(method="autoregressive", **params):
    return LaunchValues("/usr/bin/python3", "/models/Qwen3.6-27B", "127.0.0.1", 30001, 4, 32768, method, params)


def test_sglang_argv_appends_the_method_fragment():
    argv = get_adapter("sglang").argv(SGLANG, FRAGMENTS, values("ddtree", budget=15, topk_cap=8))
    assert argv == [
        "/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/models/Qwen3.6-27B", "--tp-size", "4",
        "--context-length", "32768", "--host", "127.0.0.1", "--port", "30001",
        "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "15", "--speculative-ddtree-topk-cap", "8",
    ]
    assert get_adapter("sglang").argv(SGLANG, FRAGMENTS, values())[-1] == "30001"


def test_vllm_builds_its_speculative_config_json():
    template = ["vllm", "serve", "{model_path}", "--tensor-parallel-size", "{tp}", "--port", "{port}"]
    fragments = {"prompt-lookup": ["--speculative-config", "{speculative_config}"]}
    argv = get_adapter("vllm").argv(template, fragments, values("prompt-lookup", num_pred_tokens=4))
    assert argv[-2] == "--speculative-config"
    assert json.loads(argv[-1]) == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}


@pytest.mark.parametrize(
    "template, message",
    [
        (["x", "{model_path.__class__}"], "only plain {name} placeholders"),
        (["x", "{port!r}"], "only plain {name} placeholders"),
        (["x", "{rm_rf}"], "{rm_rf} has no value"),
        ("python -m x", "a list of strings"),
    ],
)
def test_only_plain_known_placeholders_reach_a_command_line(template, message):
    with pytest.raises(ArgvError, match=message.replace("{", r"\{").replace("}", r"\}")):
        render(template, values().as_dict())


def test_values_are_typed_before_they_reach_a_command_line():
    with pytest.raises(ArgvError, match="non-negative integer"):
        render(["{tp}"], {"tp": "4; rm -rf /"})
    with pytest.raises(ArgvError, match="single-line string"):
        render(["{model_path}"], {"model_path": "a\nb"})


def test_a_method_the_engine_has_no_fragment_for_is_refused():
    with pytest.raises(ArgvError, match="no arguments for method 'dflash'"):
        get_adapter("sglang").argv(SGLANG, {}, values("dflash", block_size=16))


def test_vllm_accept_length_comes_from_this_points_counter_deltas():
    before_text = 'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 1000.0\nvllm:spec_decode_num_drafts_total{model_name="m"} 500.0\n'
    after_text = 'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 1300.0\nvllm:spec_decode_num_drafts_total{model_name="m"} 600.0\n'
    adapter = get_adapter("vllm")

    def snapshot(text):
        samples = parse_metrics(text)
        return {"accepted": sum(v for n, _, v in samples if n.endswith("accepted_tokens_total")),
                "drafts": sum(v for n, _, v in samples if n.endswith("drafts_total"))}

    assert adapter.accept_length(snapshot(before_text), snapshot(after_text), None) == pytest.approx(4.0)
    assert adapter.accept_length(snapshot(before_text), snapshot(before_text), None) is None


def test_parse_metrics_reads_labels():
    text = '# HELP x\nvllm:cache_config_info{block_size="16",num_gpu_blocks="2048"} 1.0\n'
    assert parse_metrics(text) == [("vllm:cache_config_info", {"block_size": "16", "num_gpu_blocks": "2048"}, 1.0)]


# vLLM's /metrics as prometheus_client writes it: the counter's family is typed under the
# name without _total, its samples keep the suffix, and a _created sample comes with them.
VLLM_COUNTERS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 600.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e+09
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 400.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 1800.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 1200.0
"""


def test_parse_metrics_keeps_counter_sample_names_with_their_total_suffix():
    samples = parse_metrics(VLLM_COUNTERS)
    names = [n for n, _, _ in samples]
    assert names.count("vllm:spec_decode_num_drafts_total") == 2
    assert "vllm:spec_decode_num_drafts_created" in names
    assert metric_sum(samples, "vllm:spec_decode_num_drafts_total") == 1000.0
    assert metric_sum(samples, "vllm:spec_decode_num_accepted_tokens_total") == 3000.0
    assert metric_sum(samples, "vllm:spec_decode_num_drafts") is None


def test_parse_metrics_keeps_each_samples_labels_and_unescapes_them():
    text = VLLM_COUNTERS + 'vllm:info{path="C:\\\\m",quote="a\\"b",empty=""} 1\n'
    samples = parse_metrics(text)
    assert ("vllm:spec_decode_num_drafts_total", {"engine": "1", "model_name": "m"}, 400.0) in samples
    assert samples[-1] == ("vllm:info", {"path": "C:\\m", "quote": 'a"b', "empty": ""}, 1.0)


def test_vllm_snapshot_sums_the_counters_over_engines(monkeypatch):
    monkeypatch.setattr("sweepcore.engines.vllm.get_text", lambda url: VLLM_COUNTERS)
    assert get_adapter("vllm").spec_snapshot("http://x") == {"accepted": 3000.0, "drafts": 1000.0}
