"""sweepcore.loadgen against crafted in-process servers (tests/e2e/test_loadgen.py: against the
stub server process)."""

import asyncio
import itertools
import json

import pytest
from aiohttp import web

from sweepcore.loadgen import LoadConfig, classify_error_text, run_load, run_load_sync
from tests.ports import free_port

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


def test_keep_going_stops_a_closed_loop_once_it_says_so():
    parts = [completion("a", usage=1), completion("b", usage=2, finish="length"), final_usage(2), b"data: [DONE]\n\n"]
    asked = []

    def keep_going(results):
        asked.append(len(results))
        return len(results) < 4

    lr = asyncio.run(serve_once(stream_handler(parts), {"concurrency": 1, "keep_going": keep_going}, n=50))
    # Asked before each request: sent while fewer than 4 had finished, then stopped.
    assert len(lr.results) == 4 and asked == [0, 1, 2, 3, 4]


def test_keep_going_is_refused_for_an_open_loop():
    with pytest.raises(ValueError, match="keep_going needs a closed loop"):
        LoadConfig(base_url="http://127.0.0.1:1", model="m", prompts=["x"], num_requests=5, request_rate=2.0,
                   keep_going=lambda results: True).validate()


# --------------------------------------------------------------- open loop: send lag


def test_an_open_loop_faster_than_its_concurrency_cap_records_a_growing_send_lag():
    # About 60 ms per request (the [DONE] comes after four pauses of 15 ms) with one in
    # flight, against arrivals 10 ms apart (a burstiness of 100: nearly even gaps): each
    # request waits about 50 ms longer than the one before it for the cap.
    parts = [completion("a", usage=1), completion("b", usage=2), completion("c", usage=3, finish="length"),
             final_usage(3), sse(b"[DONE]")]
    lr = asyncio.run(serve_once(stream_handler(parts, delay=0.015),
                                {"concurrency": 1, "request_rate": 100.0, "burstiness": 100.0}, n=8))
    results = sorted(lr.results, key=lambda r: r.index)
    assert [r.error_kind for r in results] == [""] * 8
    lags = [r.send_lag for r in results]
    assert lags[0] < 0.05  # the first arrival finds the cap free
    assert all(later > earlier for earlier, later in itertools.pairwise(lags)), lags
    assert lags[-1] > 0.3  # about 7 x 50 ms
    s = lr.summary()
    assert s["send_lag_max_ms"] == max(lags) * 1000
    # From the schedule the wait counts; from the send it does not.
    assert s["median_ttft_ms"] > 5 * s["send_based"]["median_ttft_ms"]
    assert s["median_ttft_ms"] > s["send_based"]["median_ttft_ms"] + 100
    assert s["median_tpot_ms"] < 50  # between tokens the lag changes nothing


def test_a_closed_loop_has_no_send_lag():
    parts = [completion("a", usage=1), completion("b", usage=2, finish="length"), final_usage(2), sse(b"[DONE]")]
    lr = asyncio.run(serve_once(stream_handler(parts), {"concurrency": 2}, n=4))
    assert [r.send_lag for r in lr.results] == [None] * 4
    s = lr.summary()
    assert (s["send_based"], s["send_lag_median_ms"], s["send_lag_p99_ms"], s["send_lag_max_ms"]) == (None,) * 4


def test_an_open_loop_request_that_could_not_connect_has_the_lag_of_its_attempt():
    # Never sent: its send_time is when it was attempted, so its lag is how late the
    # attempt was, small when nothing held it back -- never a figure from a zero send_time.
    cfg = LoadConfig(base_url=f"http://127.0.0.1:{free_port()}", model="m", prompts=["x"], max_tokens=4,
                     concurrency=1, num_requests=3, request_rate=20.0)
    lr = run_load_sync(cfg)
    assert {r.error_kind for r in lr.results} == {"connection_refused"}
    for r in lr.results:
        assert r.send_time >= lr.start_time and 0.0 <= r.send_lag < 0.5, (r.send_time, r.send_lag)
