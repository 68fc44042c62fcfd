"""sweepcore.reproduce: the loadtest and vllm bench serve lines of a measured point's load."""

import shlex
from dataclasses import replace

import pytest

from sweepcore.prompts import CODE_EDIT_PROMPT, FIBONACCI_PROMPT
from sweepcore.reproduce import PointLoad, command_line, loadtest_argv, vllm_bench_argv

OPEN_LOOP = PointLoad(
    base_url="http://127.0.0.1:30001", api="openai-completions", model="Qwen/Qwen3.6-27B", workload_kind="synthetic",
    max_tokens=256, num_requests=120, concurrency=64, request_rate=2.5, burstiness=1.0, ignore_eos=True,
    prompt_tokens=3000, tokenizer="/models/qwen3.6-27b",
)


def options(argv):
    """{flag: value or True} of an argv's options."""
    out, i = {}, 0
    while i < len(argv):
        if argv[i].startswith("--"):
            takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            out[argv[i]] = argv[i + 1] if takes_value else True
            i += 2 if takes_value else 1
        else:
            i += 1
    return out


def test_an_open_loop_point_in_both_commands():
    assert loadtest_argv(OPEN_LOOP) == [
        "python", "manage.py", "loadtest", "--base-url", "http://127.0.0.1:30001", "--api", "openai-completions",
        "--model", "Qwen/Qwen3.6-27B", "--prompt-tokens", "3000", "--max-tokens", "256", "--concurrency", "64",
        "--num-requests", "120", "--request-rate", "2.5", "--burstiness", "1", "--ignore-eos",
    ]
    assert vllm_bench_argv(OPEN_LOOP) == [
        "vllm", "bench", "serve", "--backend", "openai", "--base-url", "http://127.0.0.1:30001",
        "--endpoint", "/v1/completions", "--model", "Qwen/Qwen3.6-27B", "--tokenizer", "/models/qwen3.6-27b",
        "--dataset-name", "random", "--random-input-len", "3000", "--random-output-len", "256",
        "--random-range-ratio", "0", "--num-prompts", "120", "--request-rate", "2.5", "--burstiness", "1",
        "--max-concurrency", "64", "--ignore-eos",
    ]


def test_a_closed_loop_is_an_unlimited_rate_capped_by_its_concurrency_in_vllm():
    closed = replace(OPEN_LOOP, request_rate=None, concurrency=4, ignore_eos=False)
    loadtest = options(loadtest_argv(closed))
    assert "--request-rate" not in loadtest and "--burstiness" not in loadtest and "--ignore-eos" not in loadtest
    assert loadtest["--concurrency"] == "4"
    vllm = options(vllm_bench_argv(closed))
    assert vllm["--request-rate"] == "inf" and vllm["--max-concurrency"] == "4" and "--burstiness" not in vllm
    assert "--ignore-eos" not in vllm


def test_bursty_arrivals_keep_their_shape():
    bursty = replace(OPEN_LOOP, request_rate=8.0, burstiness=0.5)
    assert options(loadtest_argv(bursty))["--request-rate"] == "8"
    assert options(loadtest_argv(bursty))["--burstiness"] == "0.5"
    assert options(vllm_bench_argv(bursty))["--burstiness"] == "0.5"


def test_apis_map_to_vllm_backends_and_endpoints():
    chat = options(vllm_bench_argv(replace(OPEN_LOOP, api="openai-chat")))
    assert (chat["--backend"], chat["--endpoint"]) == ("openai-chat", "/v1/chat/completions")
    # SGLang's native /generate is no vLLM API: its OpenAI completions endpoint instead.
    sglang = replace(OPEN_LOOP, api="sglang-generate")
    assert (options(vllm_bench_argv(sglang))["--backend"], options(vllm_bench_argv(sglang))["--endpoint"]) == (
        "openai", "/v1/completions")
    # Our client's /generate needs no model name.
    assert "--model" not in options(loadtest_argv(sglang))
    assert options(loadtest_argv(sglang))["--api"] == "sglang-generate"
    # The tokenizer is named only where it differs from the served name.
    same = replace(OPEN_LOOP, tokenizer="Qwen/Qwen3.6-27B")
    assert "--tokenizer" not in options(vllm_bench_argv(same))
    with pytest.raises(ValueError, match="unknown api"):
        vllm_bench_argv(replace(OPEN_LOOP, api="grpc"))


def test_fixed_and_dataset_workloads():
    fibonacci = replace(OPEN_LOOP, workload_kind="fixed", prompt=FIBONACCI_PROMPT,
                             prompt_tokens=52)
    assert options(loadtest_argv(fibonacci))["--workload"] == "fibonacci"
    # vLLM has no fixed prompt: random tokens of its measured length.
    assert options(vllm_bench_argv(fibonacci))["--random-input-len"] == "52"
    code_edit = replace(fibonacci, prompt=CODE_EDIT_PROMPT)
    argv = loadtest_argv(code_edit)
    assert argv[argv.index("--prompt") + 1] == CODE_EDIT_PROMPT
    # The shell gives back exactly the prompt, newlines, backticks and quotes included.
    assert shlex.split(command_line(argv)) == argv
    dataset = replace(OPEN_LOOP, workload_kind="dataset", dataset_path="/data/sharegpt.json",
                           prompt_tokens=None)
    assert loadtest_argv(dataset)[loadtest_argv(dataset).index("--workload"):][:4] == [
        "--workload", "dataset", "--dataset", "/data/sharegpt.json"]
    vllm = options(vllm_bench_argv(dataset))
    assert (vllm["--dataset-name"], vllm["--dataset-path"], vllm["--sharegpt-output-len"]) == (
        "sharegpt", "/data/sharegpt.json", "256")
    with pytest.raises(ValueError, match="needs the prompt length"):
        vllm_bench_argv(replace(fibonacci, prompt_tokens=None))
    with pytest.raises(ValueError, match="unknown workload kind"):
        loadtest_argv(replace(OPEN_LOOP, workload_kind="trace"))


def test_a_point_that_left_its_ramp_out_says_so_to_loadtest_only():
    steady = replace(OPEN_LOOP, request_rate=None, skip_first=0.2, skip_last=0.1)
    loadtest = options(loadtest_argv(steady))
    assert (loadtest["--skip-first"], loadtest["--skip-last"]) == ("0.2", "0.1")
    assert "--skip-first" not in options(vllm_bench_argv(steady))
    assert "--skip-first" not in options(loadtest_argv(OPEN_LOOP))
