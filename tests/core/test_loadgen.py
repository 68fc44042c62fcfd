"""sweepcore.loadgen against crafted in-process servers and the bench/stub_server.py process."""

import asyncio
import json
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web

from sweepcore.loadgen import LoadConfig, classify_error_text, run_load, run_load_sync

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "bench" / "stub_server.py"


@contextmanager
def stub(*args):
    """Start bench/stub_server.py on a free loopback port; kill it at the end."""
    p = subprocess.Popen([sys.executable, str(STUB), "--port", "0", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("LISTENING"), p.stderr.read()
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        p.kill()
        p.wait(timeout=5)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# --------------------------------------------------------------- crafted in-process server

def sse(obj):
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


async def serve_once(handler, config_kw, n=1):
    """Run an aiohttp app with ``handler`` at /v1/completions and /generate; load it."""
    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    app.router.add_post("/generate", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        cfg = LoadConfig(base_url=f"http://127.0.0.1:{port}", model="m", prompts=["hi"],
                         max_tokens=8, num_requests=n, **config_kw)
        return await run_load(cfg)
    finally:
        await runner.cleanup()


def stream_handler(parts, delay=0.0, status=200):
    async def handler(request):
        await request.read()
        if status != 200:
            return web.Response(status=status, body=parts, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for p in parts:
            await resp.write(p)
            if delay:
                await asyncio.sleep(delay)
        await resp.write_eof()
        return resp
    return handler


def completion(text, usage=None, finish=None, spaces=False):
    d = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    if usage is not None:
        d["usage"] = {"prompt_tokens": 3, "completion_tokens": usage, "total_tokens": 3 + usage}
    return sse(json.dumps(d, separators=(", ", ": ") if spaces else (",", ":")).encode())


def final_usage(n, prompt=3):
    return sse({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": n}})


def test_usage_only_source_spreads_final_count_over_chunks():
    parts = [completion(" a"), completion(" b"), completion(" c", finish="length"),
             final_usage(6), sse(b"[DONE]")]
    r = asyncio.run(serve_once(stream_handler(parts, delay=0.01), {})).results[0]
    assert r.error_kind == ""
    assert r.token_count_source == "usage"
    assert r.chunk_tokens == [2, 2, 2] and r.output_tokens == 6
    assert r.prompt_tokens == 3 and r.finish_reason == "length"
    assert r.chunk_offsets == sorted(r.chunk_offsets) and r.chunk_offsets[2] - r.chunk_offsets[0] >= 0.015


def test_no_usage_counts_content_chunks_and_skips_empty_ones():
    parts = [sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
             sse({"choices": [{"delta": {"content": "x"}, "finish_reason": None}]}),
             sse({"choices": [{"delta": {"content": "y"}, "finish_reason": "stop"}]}),
             sse(b"[DONE]")]
    r = asyncio.run(serve_once(stream_handler(parts), {"api": "openai-chat"})).results[0]
    assert (r.error_kind, r.token_count_source, r.output_tokens, r.finish_reason) == ("", "chunks", 2, "stop")
    assert r.prompt_tokens is None


def test_server_cumulative_counts_with_multi_token_chunks_and_json_spaces():
    parts = [completion(" a b", usage=2, spaces=True), completion(" c", usage=3, spaces=True),
             completion(" d e f", usage=6, finish="length", spaces=True),
             sse(json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6}},
                            separators=(", ", ": ")).encode()), sse(b"[DONE]")]
    r = asyncio.run(serve_once(stream_handler(parts, delay=0.005), {})).results[0]
    assert r.token_count_source == "server_cumulative"
    assert r.chunk_tokens == [2, 1, 3] and r.output_tokens == 6 and r.prompt_tokens == 3


def test_long_sse_line_over_64k_split_across_reads():
    big = "z" * 300_000  # SGLang's cumulative text makes such lines at long outputs
    ev = sse({"text": big, "meta_info": {"prompt_tokens": 9, "completion_tokens": 1, "finish_reason": None}})
    ev2 = sse({"text": big + "!", "meta_info": {"prompt_tokens": 9, "completion_tokens": 2,
                                               "finish_reason": {"type": "length", "length": 2},
                                               "spec_verify_ct": 1}})
    parts = [ev[:1000], ev[1000:70_000], ev[70_000:], ev2, sse(b"[DONE]")]
    r = asyncio.run(serve_once(stream_handler(parts, delay=0.002), {"api": "sglang-generate"})).results[0]
    assert r.error_kind == "", r.error
    assert r.chunk_tokens == [1, 1] and r.prompt_tokens == 9
    assert r.finish_reason == "length" and r.spec_verify_ct == 1


@pytest.mark.parametrize("body", [
    # vLLM (older serving_engine text, ErrorResponse without an "error" wrapper)
    {"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you "
     "requested 5000 tokens (4900 in the messages, 100 in the completion). Please reduce the length "
     "of the messages or completion.", "type": "BadRequestError", "param": None, "code": 400},
    # llama-cpp-python server/errors.py
    {"error": {"message": "This model's maximum context length is 2048 tokens. However, you requested "
               "2100 tokens (2000 in the messages, 100 in the completion).", "type": "invalid_request_error",
               "param": "messages", "code": "context_length_exceeded"}},
    # llama.cpp server
    {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
               "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}},
])
def test_context_overflow_400_bodies(body):
    h = stream_handler(json.dumps(body).encode(), status=400)
    r = asyncio.run(serve_once(h, {})).results[0]
    assert r.http_status == 400 and r.error_kind == "context_overflow"
    assert r.error.startswith("HTTP 400: ")


def test_other_400_is_http_error_and_unrelated_text_not_overflow():
    h = stream_handler(b'{"error":{"message":"unknown model m"}}', status=404)
    r = asyncio.run(serve_once(h, {})).results[0]
    assert (r.http_status, r.error_kind) == (404, "http_error")
    assert "unknown model" in r.error
    assert classify_error_text("Requested tokens (9437) exceed context window of 8192", "x") == "context_overflow"
    assert classify_error_text("CUDA out of memory", "error_in_stream") == "error_in_stream"


def test_stream_that_ends_without_done_or_finish_is_connection_lost():
    parts = [completion(" a", usage=1), completion(" b", usage=2)]
    r = asyncio.run(serve_once(stream_handler(parts), {})).results[0]
    assert r.error_kind == "connection_lost_mid_stream" and r.output_tokens == 2


def test_connection_refused_is_kept_and_counted():
    cfg = LoadConfig(base_url=f"http://127.0.0.1:{free_port()}", model="m", prompts=["x"],
                     max_tokens=4, concurrency=2, num_requests=3)
    lr = run_load_sync(cfg)
    assert len(lr.results) == 3
    assert {r.error_kind for r in lr.results} == {"connection_refused"}
    s = lr.summary()
    assert s["failed"] == 3 and s["errors"]["connection_refused"]["count"] == 3


def test_config_validation():
    with pytest.raises(ValueError):
        LoadConfig(base_url="http://127.0.0.1:1", api="nope", prompts=["x"], num_requests=1).validate()
    with pytest.raises(ValueError):
        LoadConfig(base_url="http://127.0.0.1:1", prompts=["x"], num_requests=1).validate()  # no model
    with pytest.raises(ValueError):
        LoadConfig(base_url="http://127.0.0.1:1", model="m", prompts=["x"]).validate()


# --------------------------------------------------------------- the stub server process

@pytest.mark.slow
def test_three_apis_against_stub_with_multi_token_chunks_and_spec():
    with stub("--ttft-ms", "20", "--itl-ms", "2", "--tokens-per-chunk", "4", "--spec-accept") as url:
        for api in ("openai-completions", "openai-chat", "sglang-generate"):
            lr = run_load_sync(LoadConfig(base_url=url, api=api, model="stub-model",
                                          prompts=["one two three"], max_tokens=10,
                                          concurrency=3, num_requests=6, warmup=2))
            assert len(lr.results) == 6 and len(lr.warmup_results) == 2
            for r in lr.results:
                assert r.error_kind == "", (api, r.error)
                assert r.token_count_source == "server_cumulative"
                assert r.chunk_tokens == [4, 4, 2] and r.output_tokens == 10
                assert r.prompt_tokens == 4  # BOS + 3 words, as the stub counts
                assert r.finish_reason == "length"
                # The stub waits 20 ms, then 2 ms per token: no chunk can arrive sooner.
                # How close to those delays we stamp is bench/timing_accuracy.py's to
                # measure; a loaded CI machine only ever adds to them.
                assert 0.019 < r.chunk_offsets[0] < 0.5
                gaps = [b - a for a, b in zip(r.chunk_offsets, r.chunk_offsets[1:])]
                assert 0.0075 < gaps[0] < 0.5 and 0.0035 < gaps[1] < 0.5
            s = lr.summary()
            assert s["completed"] == 6 and s["total_output_tokens"] == 60
            assert 1.8 < s["median_itl_ms"] < 100
            if api == "sglang-generate":
                assert lr.spec_verify_ct == [3] * 6
                assert s["accept_length"] == pytest.approx(10 / 3)
            else:
                assert s["accept_length"] is None
            assert lr.event_loop_lag_p99_ms is not None and lr.client_cpu_s > 0


@pytest.mark.slow
def test_faults_are_classified_against_stub():
    with stub("--ttft-ms", "5", "--itl-ms", "5") as url:
        cases = {
            "in-stream-error": "error_in_stream",
            "http-500": "http_error",
            "drop": "connection_lost_mid_stream",
            "stall": "timeout_stall",
            "no-first-token": "timeout_first_token",
            "empty": "empty_response",
        }
        for fault, kind in cases.items():
            lr = run_load_sync(LoadConfig(base_url=url, model="stub-model", prompts=["x"], max_tokens=20,
                                          num_requests=1, timeout_first_token=0.4, timeout_stall=0.3,
                                          extra_body={"stub_fault": fault}))
            r = lr.results[0]
            assert r.error_kind == kind, (fault, r.error_kind, r.error)
            assert r.error
            assert lr.summary()["failed"] == 1
        lr = run_load_sync(LoadConfig(base_url=url, model="stub-model", prompts=["x"], max_tokens=200,
                                      num_requests=1, timeout_total=0.3))
        assert lr.results[0].error_kind == "timeout_total"
        # sglang-generate takes the fault from sampling_params
        lr = run_load_sync(LoadConfig(base_url=url, api="sglang-generate", prompts=["x"], max_tokens=20,
                                      num_requests=1, extra_body={"stub_fault": "in-stream-error"}))
        assert lr.results[0].error_kind == "error_in_stream"


@pytest.mark.slow
@pytest.mark.parametrize("style,marker", [("sglang", "Requested token count exceeds"),
                                          ("vllm", "This model's maximum context length is 64"),
                                          ("llamacpp", "exceeds the available context size")])
def test_context_overflow_texts_from_stub(style, marker):
    with stub("--context-len", "64", "--overflow-style", style) as url:
        long = " ".join(["w"] * 80)
        # llama.cpp rejects only a prompt that alone exceeds n_ctx
        prompt = long if style == "llamacpp" else "a b c"
        lr = run_load_sync(LoadConfig(base_url=url, model="stub-model", prompts=[prompt], max_tokens=62,
                                      num_requests=1))
        r = lr.results[0]
        assert (r.http_status, r.error_kind) == (400, "context_overflow") and marker in r.error
        # SGLang's streaming /generate: HTTP 200, then the error inside the stream
        lr = run_load_sync(LoadConfig(base_url=url, api="sglang-generate", prompts=[long], max_tokens=4,
                                      num_requests=1))
        r = lr.results[0]
        assert (r.http_status, r.error_kind) == (200, "context_overflow")
        assert "is longer than the model's context length (64 tokens)" in r.error


@pytest.mark.slow
def test_open_loop_rate_duration_and_concurrency_cap():
    with stub("--ttft-ms", "30", "--itl-ms", "1") as url:
        t = time.perf_counter()
        lr = run_load_sync(LoadConfig(base_url=url, model="stub-model", prompts=["x"], max_tokens=5,
                                      concurrency=4, num_requests=40, request_rate=100.0, seed=3))
        assert len(lr.results) == 40 and all(r.ok for r in lr.results)
        sends = sorted(r.send_time for r in lr.results)
        span = sends[-1] - sends[0]
        assert 0.15 < span < 1.5  # ~0.39 s at 100 req/s
        # never more than 4 in flight
        events = sorted([(r.send_time, 1) for r in lr.results] +
                        [(r.send_time + r.chunk_offsets[-1], -1) for r in lr.results])
        inflight = peak = 0
        for _, d in events:
            inflight += d
            peak = max(peak, inflight)
        assert peak <= 4
        # duration mode, closed loop
        lr = run_load_sync(LoadConfig(base_url=url, model="stub-model", prompts=["x"], max_tokens=5,
                                      concurrency=2, duration=0.4))
        assert 6 <= len(lr.results) <= 40 and 0.35 < lr.duration < 1.2
        assert time.perf_counter() - t < 10
