"""sweepcore.loadgen.sse: framing across reads and the three token-count sources (pure)."""

import json

from sweepcore.loadgen import RequestResult
from sweepcore.loadgen.sse import StreamScan, spread, stream_error


def event(obj) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def completion(text, usage=None, finish=None):
    d = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    if usage is not None:
        d["usage"] = {"prompt_tokens": 3, "completion_tokens": usage}
    return event(d)


def scan(reads, usage_chunk=True):
    """Feed ``reads`` (bytes, arrival) in order; return the scan and its record."""
    res = RequestResult(index=0)
    s = StreamScan(res, usage_chunk)
    for data, now in reads:
        if s.over:
            break
        s.feed(data, now)
    s.count()
    return s, res


def test_a_line_split_over_reads_arrives_with_the_read_that_completes_it():
    ev = completion(" a", usage=1)
    s, res = scan([(ev[:7], 0.1), (ev[7:-3], 0.2), (ev[-3:], 0.3), (completion(" b", usage=2), 0.4)])
    assert res.chunk_offsets == [0.3, 0.4] and res.chunk_tokens == [1, 1]
    assert res.token_count_source == "server_cumulative"


def test_events_of_one_read_share_its_arrival_and_done_ends_the_stream():
    s, res = scan([(completion(" a", usage=2) + completion(" b", usage=5, finish="length")
                    + b"data: [DONE]\n\n" + completion(" c", usage=9), 0.5)])
    assert s.done and s.finish == "length"
    assert res.chunk_offsets == [0.5, 0.5] and res.chunk_tokens == [2, 3] and res.output_tokens == 5
    assert res.prompt_tokens == 3


def test_the_final_usage_chunk_tops_up_cumulative_counts_and_is_no_token_chunk():
    final = event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
    s, res = scan([(completion(" a", usage=1), 0.1), (completion(" b", usage=2), 0.2), (final, 0.3)])
    assert res.chunk_offsets == [0.1, 0.2] and res.chunk_tokens == [1, 3]
    # sglang-generate has no such chunk: there the same line is one more token chunk
    s, res = scan([(completion(" a", usage=1), 0.1), (final, 0.3)], usage_chunk=False)
    assert res.chunk_tokens == [1, 3]


def test_usage_only_spreads_the_total_and_drops_chunks_left_empty():
    final = event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    s, res = scan([(completion(" a"), 0.1), (completion(" b"), 0.2), (completion(" c"), 0.3), (final, 0.4)])
    assert res.token_count_source == "usage"
    assert res.chunk_offsets == [0.1, 0.2] and res.chunk_tokens == [1, 1]
    assert spread(7, 3) == [3, 2, 2]


def test_without_counts_each_content_chunk_is_one_token_and_empty_content_none():
    chat = [event({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
            event({"choices": [{"delta": {"content": "x"}}]}),
            event({"choices": [{"delta": {"reasoning_content": "y"}, "finish_reason": "stop"}]})]
    s, res = scan([(b"".join(chat), 0.2)])
    assert res.token_count_source == "chunks" and res.chunk_tokens == [1, 1] and s.finish == "stop"


def test_sglang_meta_info_gives_counts_finish_type_and_spec_verify_ct():
    ev = event({"text": "ab", "meta_info": {"prompt_tokens": 9, "completion_tokens": 4,
                                            "finish_reason": {"type": "length", "length": 4},
                                            "spec_verify_ct": 2}})
    s, res = scan([(ev, 0.1)], usage_chunk=False)
    assert (res.output_tokens, res.prompt_tokens, res.spec_verify_ct, s.finish) == (4, 9, 2, "length")


def test_an_error_event_ends_the_scan_with_its_text():
    err = event({"error": {"message": "boom", "type": "internal", "code": 500}})
    s, res = scan([(completion(" a", usage=1) + err + completion(" b", usage=2), 0.1)])
    assert s.over and s.error == "boom type=internal code=500" and res.output_tokens == 1
    assert stream_error(b'{"object":"error","message":"too long"}') == "too long"
    assert stream_error(b'{"text":"an \\"error\\" in the output"}') is None


def test_events_read_the_same_in_pieces_of_any_shape_and_with_crlf_line_ends():
    evs = [completion(" a", usage=1), completion(" b", usage=2, finish="length"), b"data: [DONE]\n\n"]
    lf = b"".join(evs)
    crlf = lf.replace(b"\n", b"\r\n")
    for stream in (lf, crlf):
        for k in range(1, len(stream)):
            res = RequestResult(index=0)
            s = StreamScan(res, True)
            s.feed_pieces([stream[:k], stream[k:]], 0.5)
            s.count()
            assert (res.chunk_tokens, s.done, s.finish) == ([1, 1], True, "length"), (stream[:k], stream[k:])


def test_a_token_whose_text_says_error_is_a_token():
    s, res = scan([(completion('"error"', usage=1) + completion(" error", usage=2, finish="length"), 0.1)])
    assert s.error is None and res.chunk_tokens == [1, 1] and s.finish == "length"
