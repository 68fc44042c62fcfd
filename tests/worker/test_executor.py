"""The executor's decisions that need no server: a point's status from its requests."""

from runs.worker.executor import point_status
from sweepcore.loadgen import RequestResult


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
