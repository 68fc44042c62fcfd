"""sweepcore.validity: one test per rule, at its threshold (still fine) and beyond it."""

import pytest

from sweepcore.hostload import ForeignProcess, HostLoad
from sweepcore.validity import Thresholds, judge

T = Thresholds()


def record(tokens=32, gap=0.01, ttft=0.05, error_kind="", prompt_tokens=100):
    offs = [ttft + gap * i for i in range(tokens)] if not error_kind else []
    return {"send_time": 0.0, "chunk_offsets": offs, "chunk_tokens": [1] * len(offs),
            "output_tokens": len(offs), "error_kind": error_kind, "prompt_tokens": prompt_tokens}


def summary(**over):
    base = {"completed": 10, "failed": 0, "duration": 5.0, "event_loop_lag_p99_ms": 1.0,
            "decode_tok_s": 100.0, "server_decode_tok_s": None, "client_bound": False}
    return {**base, **over}


def codes(verdict):
    return [r.code for r in verdict.reasons]


def test_a_clean_point_is_valid_with_no_reasons():
    v = judge([record() for _ in range(10)], summary(), asked_output_tokens=32, asked_prompt_tokens=100,
              server_prompt_tokens=[100] * 10, client_cpu_share=0.3,
              host=HostLoad(seconds=5, cpu_count=2, foreign=[ForeignProcess(1, "sshd", 0.01)]))
    assert v.validity == "valid" and v.reasons == ()


@pytest.mark.parametrize("lag, validity", [(T.client_lag_p99_ms, "valid"), (T.client_lag_p99_ms + 0.1, "invalid")])
def test_client_event_loop_lag(lag, validity):
    v = judge(None, summary(event_loop_lag_p99_ms=lag))
    assert v.validity == validity
    if validity == "invalid":
        assert codes(v) == ["client_bound"]
        assert v.reasons[0].message == f"the client's event loop lagged {lag:.2f} ms p99 (limit 5 ms)"


@pytest.mark.parametrize("share, validity", [(T.client_cpu_share, "valid"), (T.client_cpu_share + 0.01, "invalid")])
def test_client_cpu_share(share, validity):
    v = judge(None, summary(), client_cpu_share=share)
    assert v.validity == validity
    assert ("client_bound" in codes(v)) == (validity == "invalid")


def test_a_flag_without_figures_still_marks_the_client_bound():
    v = judge(None, summary(event_loop_lag_p99_ms=None, client_bound=True))
    assert codes(v) == ["client_bound"] and v.validity == "invalid"


def test_failed_share_at_the_limit_is_suspect_beyond_it_invalid():
    at = judge(None, summary(completed=95, failed=5))
    assert at.validity == "suspect" and codes(at) == ["failed_requests"]
    assert "5 of 100 requests failed (5%; limit 5%)" in at.reasons[0].message
    beyond = judge(None, summary(completed=94, failed=6))
    assert beyond.validity == "invalid"


def test_nothing_completed_is_invalid():
    v = judge(None, summary(completed=0, failed=3))
    assert v.validity == "invalid" and codes(v) == ["nothing_completed"]


def test_chunks_closer_than_the_client_can_stamp_are_invalid():
    # 1/50 time: 256 tokens within 0.75 ms.
    fast = [record(tokens=256, gap=0.00075 / 255) for _ in range(10)]
    v = judge(fast, summary())
    assert v.validity == "invalid" and codes(v) == ["below_resolution"]
    assert "100% of the chunk gaps were under 0.1 ms" in v.reasons[0].message


def test_a_few_unresolved_gaps_within_the_share_are_fine():
    # 100 gaps per request, 5 of them 0 (two chunks in one read): 5 % is the limit.
    rec = record(tokens=101)
    offs = rec["chunk_offsets"]
    for i in (10, 30, 50, 70, 90):
        offs[i] = offs[i - 1]
    at = judge([rec], summary())
    assert "below_resolution" not in codes(at)
    offs[95] = offs[94]
    assert "below_resolution" in codes(judge([rec], summary()))


@pytest.mark.parametrize("cores, validity", [(T.foreign_cpu_share, "valid"), (T.foreign_cpu_share + 0.01, "suspect")])
def test_another_process_using_a_share_of_a_core(cores, validity):
    host = HostLoad(seconds=5, cpu_count=2, foreign=[ForeignProcess(4242, "python", cores)], loadavg_1m=1.5)
    v = judge(None, summary(), host=host)
    assert v.validity == validity
    if validity == "suspect":
        assert codes(v) == ["host_busy"]
        assert "python (pid 4242) 26% of a core" in v.reasons[0].message
        assert "load average 1.50" in v.reasons[0].message


def test_host_load_as_stored_json_is_judged_the_same():
    host = HostLoad(seconds=5, cpu_count=2, foreign=[ForeignProcess(7, "make", 1.0)])
    assert judge(None, summary(), host=host.as_dict()) == judge(None, summary(), host=host)


@pytest.mark.parametrize("steal, validity", [(T.steal_share, "valid"), (T.steal_share + 0.01, "suspect")])
def test_cpu_steal(steal, validity):
    v = judge(None, summary(), host=HostLoad(seconds=5, cpu_count=2, steal_share=steal))
    assert v.validity == validity
    assert ("cpu_steal" in codes(v)) == (validity == "suspect")


@pytest.mark.parametrize("util, validity", [(T.foreign_gpu_util_pct, "valid"), (T.foreign_gpu_util_pct + 1, "suspect"),
                                            (None, "suspect")])
def test_another_process_on_the_runs_gpus(util, validity):
    host = HostLoad(seconds=5, cpu_count=2, gpu_foreign=[ForeignProcess(99, "train.py", 0.0, 1, util)])
    v = judge(None, summary(), host=host)
    assert v.validity == validity
    if validity == "suspect":
        assert codes(v) == ["gpu_shared"] and "train.py (pid 99) on GPU 1" in v.reasons[0].message


@pytest.mark.parametrize("completed, validity", [(T.min_requests, "valid"), (T.min_requests - 1, "suspect")])
def test_too_few_requests(completed, validity):
    v = judge(None, summary(completed=completed))
    assert v.validity == validity
    assert ("few_requests" in codes(v)) == (validity == "suspect")


@pytest.mark.parametrize("duration, validity", [(T.min_duration_s, "valid"), (T.min_duration_s - 0.01, "suspect")])
def test_too_short_a_window(duration, validity):
    v = judge(None, summary(duration=duration))
    assert v.validity == validity
    assert ("short_window" in codes(v)) == (validity == "suspect")


def test_output_tokens_other_than_asked_are_suspect():
    recs = [record(tokens=32)] * 9 + [record(tokens=20)]
    v = judge(recs, summary(), asked_output_tokens=32)
    assert codes(v) == ["output_length"] and v.validity == "suspect"
    assert "1 of 10 requests returned 20–20 output tokens, not the 32 asked" in v.reasons[0].message
    assert judge([record(tokens=32)] * 10, summary(), asked_output_tokens=32).validity == "valid"
    assert judge(recs, summary(), asked_output_tokens=None).validity == "valid"  # length not forced


def test_prompt_tokens_counted_differently_by_the_server():
    v = judge(None, summary(), asked_prompt_tokens=512, server_prompt_tokens=[513, 513])
    assert codes(v) == ["prompt_mismatch"] and "counted 513 prompt tokens where 512" in v.reasons[0].message
    assert judge(None, summary(), asked_prompt_tokens=512, server_prompt_tokens=[512]).validity == "valid"


@pytest.mark.parametrize("theirs, validity", [(120.0, "valid"), (121.0, "suspect"), (79.0, "suspect")])
def test_server_reported_decode_speed_against_ours(theirs, validity):
    v = judge(None, summary(decode_tok_s=100.0, server_decode_tok_s=theirs))
    assert v.validity == validity
    assert ("server_disagrees" in codes(v)) == (validity == "suspect")


def test_the_worst_rule_decides_and_every_reason_is_kept():
    v = judge(None, summary(completed=3, failed=1, event_loop_lag_p99_ms=20.0))
    assert v.validity == "invalid"
    assert codes(v) == ["client_bound", "failed_requests", "few_requests"]
    assert v.reasons_json()[0] == {"code": "client_bound", "message": v.reasons[0].message}


def test_thresholds_from_settings_override_the_defaults():
    t = Thresholds.from_mapping({"min_requests": "10", "client_lag_p99_ms": 8})
    assert t.min_requests == 10 and t.client_lag_p99_ms == 8.0 and t.min_duration_s == T.min_duration_s
    assert judge(None, summary(completed=9), thresholds=t).validity == "suspect"
    with pytest.raises(ValueError, match="unknown validity threshold\\(s\\): min_reqs"):
        Thresholds.from_mapping({"min_reqs": 3})
