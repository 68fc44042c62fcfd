"""sweepcore.loadgen.apis: the registry and each API's request body (pure)."""

import pytest

from sweepcore.kinds import RequestErrorKind
from sweepcore.loadgen import API_PATHS, API_REGISTRY, APIS, LoadConfig, build_body, classify_error_text


def config(api, **kw):
    return LoadConfig(base_url="http://x", api=api, model="m", max_tokens=8, **kw)


def test_every_api_has_a_path_a_body_and_a_request_function():
    assert APIS == ("openai-completions", "openai-chat", "sglang-generate")
    assert API_PATHS == {"openai-completions": "/v1/completions", "openai-chat": "/v1/chat/completions",
                         "sglang-generate": "/generate"}
    for api in API_REGISTRY.values():
        assert callable(api.build_body) and callable(api.request)


def test_openai_bodies_stream_with_usage_and_take_extra_keys_last():
    body = build_body(config("openai-completions", extra_body={"ignore_eos": True, "max_tokens": 4}), "hi")
    assert body == {"model": "m", "max_tokens": 4, "stream": True, "prompt": "hi", "ignore_eos": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    body = build_body(config("openai-chat", continuous_usage=False), "hi")
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["stream_options"] == {"include_usage": True}


def test_sglang_body_puts_extra_keys_into_sampling_params_unless_top_level():
    cfg = config("sglang-generate", extra_body={"ignore_eos": True, "rid": "r1",
                                                 "sampling_params": {"temperature": 0}})
    assert build_body(cfg, [1, 2, 3]) == {
        "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True},
        "stream": True, "input_ids": [1, 2, 3], "rid": "r1"}
    assert build_body(cfg, "hi")["text"] == "hi"
    assert cfg.extra_body == {"ignore_eos": True, "rid": "r1", "sampling_params": {"temperature": 0}}


@pytest.mark.parametrize("text", [
    "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
    "request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it",
])
def test_too_long_answers_are_context_overflow(text):
    assert classify_error_text(text, RequestErrorKind.HTTP_ERROR) == RequestErrorKind.CONTEXT_OVERFLOW
    assert classify_error_text("CUDA out of memory", RequestErrorKind.HTTP_ERROR) == "http_error"
