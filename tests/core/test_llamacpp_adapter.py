"""The llama.cpp adapter's pure parts, on texts copied from llama-cpp-python 0.3.36's
server and the llama.cpp it vendors."""

import signal

import pytest

from sweepcore.engines import LaunchValues, get_adapter
from sweepcore.engines.llamacpp import EOG_LOG, parse_perf
from sweepcore.failures import classify
from sweepcore.loadgen import RequestResult

ADAPTER = get_adapter("llamacpp")
TEMPLATE = ["{python}", "-m", "llama_cpp.server", "--model", "{model_path}", "--n_ctx", "{context_length}",
            "--host", "{host}", "--port", "{port}"]
FRAGMENTS = {"prompt-lookup": ["--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens",
                               "{num_pred_tokens}"]}

# One completion's timing lines, as the server prints them with verbose on (the default).
PERF = """\
llama_perf_context_print:        load time =       0.17 ms
llama_perf_context_print: prompt eval time =    7657.78 ms /   984 tokens (    7.78 ms per token,   128.50 tokens per second)
llama_perf_context_print:        eval time =    1475.09 ms /    63 runs   (   23.41 ms per token,    42.71 tokens per second)
llama_perf_context_print:       total time =    9210.00 ms /  1047 tokens
llama_perf_context_print:    graphs reused =         62
INFO:     127.0.0.1:42444 - "POST /v1/completions HTTP/1.1" 200 OK
"""


def values(method="autoregressive", **params):
    return LaunchValues("/venv/bin/python", "/m/SmolLM2.gguf", "127.0.0.1", 8080, 1, 2048, method, params)


def test_it_launches_prompt_lookup_and_never_lets_requests_interrupt_each_other():
    argv = ADAPTER.argv(TEMPLATE, FRAGMENTS, values("prompt-lookup", num_pred_tokens=4))
    assert argv == ["/venv/bin/python", "-m", "llama_cpp.server", "--model", "/m/SmolLM2.gguf", "--n_ctx", "2048",
                    "--host", "127.0.0.1", "--port", "8080", "--draft_model", "prompt-lookup-decoding",
                    "--draft_model_num_pred_tokens", "4", "--interrupt_requests", "False"]
    # An admin who set it explicitly keeps their value.
    explicit = ADAPTER.argv(TEMPLATE + ["--interrupt_requests=True"], FRAGMENTS, values())
    assert explicit.count("--interrupt_requests=True") == 1 and "False" not in explicit


def test_every_request_generates_max_tokens_greedily():
    log = ("print_info: EOS token             = 2 '<|im_end|>'\nprint_info: EOG token             = 0 '<|endoftext|>'\n"
           "print_info: EOG token             = 2 '<|im_end|>'\nprint_info: EOG token             = 4 '<reponame>'\n")
    info = {"eog_token_ids": [0, 2, 4]}
    assert [int(t) for t in EOG_LOG.findall(log)] == [0, 2, 4]
    assert ADAPTER.extra_body(128, info) == {"temperature": 0.0, "logit_bias": {"0": -100.0, "2": -100.0, "4": -100.0}}
    # Without the load log there is nothing to ban: the answers may then end early.
    assert ADAPTER.extra_body(128, {}) == {"temperature": 0.0}


def test_the_context_length_is_what_llama_cpp_logged_else_the_argv():
    log = "llama_context: constructing llama_context\nllama_context: n_ctx                 = 4096\n" \
          "llama_context: n_ctx_seq             = 4096\nprint_info: n_ctx_train           = 8192\n"
    argv = ["python", "-m", "llama_cpp.server", "--n_ctx", "2048"]
    assert ADAPTER.limits("http://x", argv, log).context_length == 4096
    assert ADAPTER.limits("http://x", argv, "no such line").context_length == 2048
    assert ADAPTER.limits("http://x", ["python", "--n_ctx=1024"], "").context_length == 1024
    # One sequence at a time owns the KV cache: nothing to divide by concurrency.
    assert ADAPTER.limits("http://x", argv, log).kv_capacity_tokens is None


def test_it_sums_the_timing_lines_of_every_completion_of_a_point():
    sums = parse_perf(PERF + PERF.replace("1475.09 ms /    63", "1500.00 ms /    64"))
    assert sums == {"completions": 2, "prompt_eval_ms": pytest.approx(2 * 7657.78), "prompt_eval_tokens": 1968,
                    "eval_ms": pytest.approx(2975.09), "eval_runs": 127, "total_ms": pytest.approx(18420.0)}


def test_the_servers_decode_speed_is_its_eval_rate_for_autoregressive_runs_only():
    ar = ADAPTER.server_reported(PERF, "autoregressive")
    assert ar["server_decode_tok_s"] == pytest.approx(63 / 1.47509)
    assert ar["server_reported"]["source"] == "llama_perf_context_print"
    # Speculative verify batches count as prompt eval there: no decode speed to report.
    lookup = ADAPTER.server_reported(PERF, "prompt-lookup")
    assert "server_decode_tok_s" not in lookup and lookup["server_reported"]["eval_runs"] == 63
    assert ADAPTER.server_reported("INFO: nothing timed\n", "autoregressive") == {}


def test_a_streamed_context_refusal_becomes_context_overflow_from_the_log():
    log = ('  File "llama_cpp/llama.py", line 1345, in _create_completion\n    raise ValueError(\n'
           "ValueError: Requested tokens (2101) exceed context window of 2048\n")
    dropped = RequestResult(index=0, error_kind="connection_lost_mid_stream", error="stream ended without [DONE]")
    streamed = RequestResult(index=1, error_kind="connection_lost_mid_stream", error="reset")
    streamed.chunk_offsets.append(0.1)  # it had output: a real drop, not a refusal
    ok = RequestResult(index=2)
    ADAPTER.relabel_failures([dropped, streamed, ok], log)
    assert dropped.error_kind == "context_overflow"
    assert "Requested tokens (2101) exceed context window of 2048" in dropped.error
    assert (streamed.error_kind, ok.error_kind) == ("connection_lost_mid_stream", "")


def test_an_empty_stream_without_a_refusal_in_the_log_stays_a_lost_connection():
    dropped = RequestResult(index=0, error_kind="connection_lost_mid_stream", error="x")
    ADAPTER.relabel_failures([dropped], PERF)
    assert dropped.error_kind == "connection_lost_mid_stream"


@pytest.mark.parametrize(
    ("log", "returncode", "kind", "says"),
    [
        ("/project/vendor/llama.cpp/ggml/src/ggml-cpu/ops.cpp:5120: GGML_ASSERT(ne00 == ne01) failed\n"
         "/lib/libggml-base.so(+0x16a7b) [0x7f5c]\n", -signal.SIGABRT, "ggml_assert", "GGML_ASSERT(ne00 == ne01) failed"),
        ("llama_model_load: error loading model: tensor 'token_embd.weight' data is not within the file bounds, "
         "model is corrupted or incomplete\nllama_model_load_from_file_impl: failed to load model\n"
         "Traceback (most recent call last):\nValueError: Failed to load model from file: /tmp/trunc.gguf\n",
         1, "model_load", "model is corrupted or incomplete"),
        ("Traceback (most recent call last):\nValueError: Model path does not exist: /dev/shm/SmolLM2.gguf\n",
         1, "model_missing", "/dev/shm/SmolLM2.gguf"),
        ("INFO:     127.0.0.1:1 - \"POST /v1/completions HTTP/1.1\" 200 OK\n", -signal.SIGKILL, "killed", "SIGKILL"),
    ],
)
def test_it_knows_llama_cpps_crash_signatures(log, returncode, kind, says):
    failure = classify(log, returncode, extra_rules=ADAPTER.log_rules)
    assert failure.kind == kind and says in failure.cause


def test_a_llama_cpp_assertion_is_quarantined_a_model_that_does_not_load_is_not():
    assert classify("x.cpp:1: GGML_ASSERT(a) failed\n", -6, ADAPTER.log_rules).deterministic
    assert not classify("llama_model_load: error loading model: x\n", 1, ADAPTER.log_rules).deterministic
