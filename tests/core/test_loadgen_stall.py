"""A load stops at its first request that meets a silence limit (sweepcore.loadgen.runner,
``stop_on_stall``), so that a hung server costs one stall timeout, not a first-token timeout
per request still to send. Against bench/stub_server.py served on a thread of the test
process: a prompt holding ``stub_fault=KIND`` faults that request alone."""

import time

import pytest

from sweepcore.loadgen import LoadConfig, run_load_sync
from tests.core.bench_modules import load_bench

stub = load_bench("stub_server")

# Limits far apart: a test that waited out a first-token limit would take 30 s, not 0.3.
STALL_S = 0.3
FIRST_TOKEN_S = 30.0


@pytest.fixture(scope="module")
def url():
    base, stop = stub.start_in_thread(["--ttft-ms", "5", "--itl-ms", "5"])
    yield base
    stop()


def load(url, prompts, **overrides):
    """Run a load of `prompts` (prompt i goes to request i); (its result, wall seconds)."""
    config = {"base_url": url, "model": "stub-model", "prompts": prompts, "max_tokens": 20,
              "timeout_stall": STALL_S, "timeout_first_token": FIRST_TOKEN_S, "num_requests": len(prompts)}
    config.update(overrides)
    started = time.monotonic()
    result = run_load_sync(LoadConfig(**config))
    return result, time.monotonic() - started


def kinds(result):
    return [r.error_kind for r in sorted(result.results, key=lambda r: r.index)]


def test_the_prompt_marker_faults_that_request_alone():
    assert stub.fault_in_prompt("write code stub_fault=no-first-token please") == "no-first-token"
    assert stub.fault_in_prompt("write code") == ""


def test_a_stalled_request_stops_the_closed_loop_sending(url):
    result, elapsed = load(url, ["one", "two stub_fault=stall", "three", "four", "five"])
    assert kinds(result) == ["", "timeout_stall"]  # requests 2 to 4 were never sent
    assert result.stopped_by.index == 1 and result.stopped_by.error.startswith("no token for 0.3 s")
    assert elapsed < 5


def test_the_requests_in_flight_when_one_stalls_are_ended_and_kept_as_failed(url):
    prompts = ["one stub_fault=stall", "two stub_fault=no-first-token", "three stub_fault=no-first-token",
               "four", "five", "six"]
    result, elapsed = load(url, prompts, concurrency=3)
    assert kinds(result) == ["timeout_stall", "stopped_after_stall", "stopped_after_stall"]
    ended = [r for r in result.results if r.error_kind == "stopped_after_stall"]
    for r in ended:
        assert "when request 0 timed out (timeout_stall: no token for 0.3 s" in r.error
        assert r.error.endswith("(ended after 0 token chunks)")
    assert result.summary()["failed"] == 3
    assert elapsed < 5  # not the 30 s first-token limit of the two waiting for their first token


def test_a_first_token_timeout_stops_the_load_too(url):
    result, elapsed = load(url, ["one stub_fault=no-first-token", "two", "three"], timeout_first_token=STALL_S)
    assert kinds(result) == ["timeout_first_token"]
    assert result.stopped_by.error_kind == "timeout_first_token"
    assert elapsed < 5


def test_a_request_that_merely_runs_long_does_not_stop_the_load(url):
    result, _ = load(url, ["one", "two", "three"], max_tokens=200, timeout_total=0.2)
    assert kinds(result) == ["timeout_total"] * 3  # the server is answering: every request is sent
    assert result.stopped_by is None


def test_an_open_loop_stops_its_arrivals_at_a_stall(url):
    prompts = ["one", "two", "three stub_fault=stall"] + ["more"] * 7
    result, elapsed = load(url, prompts, num_requests=200, request_rate=20.0, concurrency=4)
    assert result.stopped_by.error_kind == "timeout_stall"
    assert len(result.results) < 20  # 200 arrivals at 20 req/s would take 10 s
    assert elapsed < 5
    assert all(r.error_kind in ("", "timeout_stall", "stopped_after_stall") for r in result.results)


def test_a_stall_in_the_warmup_stops_before_the_measurement(url):
    result, _ = load(url, ["one stub_fault=stall", "two"], warmup=1)
    assert [r.error_kind for r in result.warmup_results] == ["timeout_stall"]
    assert result.results == [] and result.stopped_by is result.warmup_results[0]


def test_without_stop_on_stall_every_request_is_sent(url):
    result, _ = load(url, ["one stub_fault=stall", "two"] * 2, stop_on_stall=False)
    assert kinds(result) == ["timeout_stall", "", "timeout_stall", ""]
    assert result.stopped_by is None


def test_a_stall_is_noticed_after_the_stall_limit_not_the_first_token_one(url):
    # The first token comes at once; the time limit ahead is then the stall's (0.3 s), not
    # the first token's (30 s) the request began with.
    result, elapsed = load(url, ["one stub_fault=stall"])
    assert kinds(result) == ["timeout_stall"] and elapsed < 5


def test_a_first_token_wait_past_the_stall_limit_asks_the_health_check_and_stops_on_no_answer(url):
    asked = []

    def health_check():
        asked.append(time.monotonic())
        return False, "/health did not answer within 5s"

    result, elapsed = load(url, ["one stub_fault=no-first-token", "two", "three"], health_check=health_check)
    (r,) = result.results
    assert r.error_kind == "timeout_first_token" and not r.chunk_offsets
    assert r.error.endswith("s, and the server did not answer its health check: /health did not answer within 5s")
    assert result.stopped_by is r and result.unhealthy == "/health did not answer within 5s"
    assert len(asked) == 1 and elapsed < 5  # not the 30 s first-token limit


def test_a_first_token_wait_goes_on_while_the_health_check_answers(url):
    asked = []

    def health_check():
        asked.append(time.monotonic())
        return True, "ok"

    result, _ = load(url, ["one stub_fault=no-first-token", "two"], health_check=health_check,
                     timeout_stall=0.2, timeout_first_token=1.5)
    # A long prefill is silent too: the request waits out its own first-token limit, the
    # server asked again after each further stall limit.
    (r,) = result.results
    assert r.error_kind == "timeout_first_token" and r.error.startswith("no first token within 1.5 s")
    assert len(asked) >= 2 and result.unhealthy == ""
    assert all(b - a >= 0.2 for a, b in zip(asked, asked[1:]))


def test_a_healthy_load_never_asks_the_health_check(url):
    asked = []
    result, _ = load(url, ["one", "two"], health_check=lambda: asked.append(1) or (True, "ok"))
    assert kinds(result) == ["", ""] and asked == []
