"""sweepcore.loadgen against the bench/stub_server.py process."""

import time

import pytest

from sweepcore.loadgen import LoadConfig, run_load_sync
from tests.e2e.processes import stub

# --------------------------------------------------------------- the stub server process

@pytest.mark.agnostic
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
                # The stub waits 20 ms, then 2 ms per token: no chunk can arrive sooner
                # than its delays added up. How close to them we stamp is
                # bench/timing_accuracy.py's to measure; a loaded machine only ever adds to
                # each offset -- not to each gap: a late chunk shortens the gap after it.
                first, second, third = r.chunk_offsets
                assert 0.019 < first < 0.5
                assert first < second and 0.019 + 0.0075 < second < 0.5
                assert second < third and 0.019 + 0.0075 + 0.0035 < third < 0.5
            s = lr.summary()
            assert s["completed"] == 6 and s["total_output_tokens"] == 60
            # Not above 1.8 ms: a late first chunk shortens the gaps after it, as above.
            assert 0 < s["median_itl_ms"] < 100
            if api == "sglang-generate":
                assert lr.spec_verify_ct == [3] * 6
                assert s["accept_length"] == pytest.approx(10 / 3)
            else:
                assert s["accept_length"] is None
            assert lr.event_loop_lag_p99_ms is not None and lr.client_cpu_s > 0


@pytest.mark.agnostic
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
@pytest.mark.agnostic
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


@pytest.mark.agnostic
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


@pytest.mark.agnostic
@pytest.mark.slow
def test_the_interleaving_stub_spreads_each_response_over_many_reads_and_counts_what_ended():
    """bench/client_headroom.py's interleaved mode and its ruler: the same responses as a
    burst, written an event at a time among the other streams', and one /stats/done record
    per completed response."""
    import json
    import urllib.request

    reads = {}
    for args in ((), ("--interleave",)):
        with stub("--tokenize", "none", *args) as url:
            lr = run_load_sync(LoadConfig(base_url=url, model="stub-model", prompts=["one two " * 40],
                                          max_tokens=50, concurrency=8, num_requests=24))
            with urllib.request.urlopen(f"{url}/stats/done", timeout=10) as answer:
                done = json.loads(answer.read())["records"]
            with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
                stats = json.loads(answer.read())
        assert all(r.error_kind == "" and r.output_tokens == 50 and r.prompt_tokens == 81 for r in lr.results), [
            (r.error, r.output_tokens, r.prompt_tokens) for r in lr.results]
        assert len(done) == 24 and {tokens for _, tokens in done} == {50}, done
        assert stats["tokens"] == 24 * 50, stats
        # Distinct arrival stamps of a response: the reads that brought its tokens.
        reads[args] = sum(len(set(r.chunk_offsets)) for r in lr.results)
    # A burst comes in one write, so in a read or two; interleaved, a response's events come
    # over many passes of the stub, so over many more reads.
    assert reads[()] <= 2 * 24 and reads[("--interleave",)] >= 2 * 24, reads
