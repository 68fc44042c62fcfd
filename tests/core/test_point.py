"""sweepcore.point: a point's decisions that need no server: its status from its requests,
why it stopped early, when an until_stable rule has seen enough, what ended a run."""

from sweepcore.kinds import INFRASTRUCTURE_FAILURES, FailureKind
from sweepcore.loadgen import RequestResult
from sweepcore.point import internal_failure, keep_going_until_stable, point_status, stability_note, stall_note


def result(**kw):
    return RequestResult(index=0, **kw)


def test_a_point_is_ok_only_when_every_request_produced_tokens():
    assert point_status([result(output_tokens=5), result(output_tokens=3)], True)[0] == "ok"
    assert point_status([result(output_tokens=0, error_kind="empty_response", error="zero")], True)[0] == "failed"
    assert point_status([], True)[0] == "failed"


def test_a_lost_connection_or_a_dead_server_makes_the_point_crashed():
    lost = result(output_tokens=3, error_kind="connection_lost_mid_stream", error="lost")
    assert point_status([result(output_tokens=5), lost], True)[0] == "crashed"
    assert point_status([result(output_tokens=5)], server_alive=False)[0] == "crashed"


def test_refusals_and_timeouts_have_their_own_status():
    overflow = result(error_kind="context_overflow", error="HTTP 400: The input (40000 tokens) is longer")
    status, reason = point_status([overflow], True)
    assert status == "context_overflow" and "40000 tokens" in reason
    stall = result(output_tokens=4, error_kind="timeout_stall", error="no token for 2 s")
    assert point_status([result(output_tokens=5), stall], True) == (
        "timeout", "1 of 2 requests timed out: no token for 2 s"
    )


def test_a_point_stopped_by_a_stall_says_so_and_what_the_probe_found():
    stall = RequestResult(index=1, output_tokens=4, error_kind="timeout_stall", error="no token for 2 s")
    ended = RequestResult(index=2, error_kind="stopped_after_stall", error="the load stopped sending")
    results = [result(output_tokens=5), stall, ended]
    assert point_status(results, True)[0] == "timeout"  # the requests ended with it are failed, not dropped
    assert stall_note(stall, results, "/health did not answer within 5s (probed for 10 s)") == (
        "request 1 timed out (no token for 2 s); the point stopped sending, ending 1 request(s) in flight "
        "unfinished, and the server did not answer its health probe: /health did not answer within 5s "
        "(probed for 10 s)")
    assert stall_note(stall, [stall], "") == (
        "request 1 timed out (no token for 2 s); the point stopped sending; the server answered its health probe "
        "again, so the run went on")


def steady(n, send_gap):
    """n requests of 11 tokens, 10 ms apart each (100 tok/s decode), sent send_gap s apart."""
    return [RequestResult(index=i, send_time=1000.0 + i * send_gap, chunk_offsets=[0.05 + 0.01 * k for k in range(11)],
                          chunk_tokens=[1] * 11, output_tokens=11) for i in range(n)]


UNTIL = {"metric": "decode_tok_s", "rel_ci": 0.05, "min_requests": 5, "max_requests": 50}


def test_until_stable_stops_once_the_interval_is_narrow_and_the_window_long_enough():
    stable, words = stability_note(UNTIL, steady(6, send_gap=0.2), min_duration_s=1.0)
    assert stable and words == "stable: decode_tok_s ±0.0 % after 6 requests (limit ±5 %)"


def test_until_stable_keeps_going_while_the_window_is_shorter_than_the_verdicts_minimum():
    # Narrow interval, but 6 requests within 0.2 s: the verdict would call that window short.
    stable, words = stability_note(UNTIL, steady(6, send_gap=0.01), min_duration_s=1.0)
    assert not stable and "a 0.20 s window (at least 1 s)" in words
    assert not stability_note(UNTIL, steady(4, send_gap=0.5), min_duration_s=1.0)[0]  # fewer than min_requests


def test_until_stable_stops_sending_once_the_server_is_gone():
    keep_going = keep_going_until_stable(UNTIL, min_duration_s=1.0)
    assert keep_going(steady(3, send_gap=0.2))
    lost = RequestResult(index=3, send_time=1001.0, error_kind="connection_lost_mid_stream", error="lost")
    assert not keep_going(steady(3, send_gap=0.2) + [lost])


def test_sweeplab_s_own_faults_are_infrastructure_failures():
    kind, cause = internal_failure(OSError(28, "No space left on device", "/data/logs/run-1.log"))
    assert kind == FailureKind.DISK_FULL and cause == "no space left on /data/logs/run-1.log: No space left on device"
    kind, cause = internal_failure(KeyError("x"))
    assert kind == FailureKind.INTERNAL and cause == "Sweeplab internal error: KeyError: 'x'"
    assert {FailureKind.DISK_FULL, FailureKind.INTERNAL, FailureKind.HUNG} <= INFRASTRUCTURE_FAILURES
    assert FailureKind.CUDA_ILLEGAL_INSTRUCTION not in INFRASTRUCTURE_FAILURES
