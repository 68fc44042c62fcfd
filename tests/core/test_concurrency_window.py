"""sweepcore.metrics.concurrency_window: the span in which a load held its requests in flight
near their peak, and how many it held on average (SGLang's steady-state window) -- the first
piece of issue 34, what a point's label x64 is checked against."""

import pytest

from sweepcore.metrics import average_in_flight, concurrency_window


def request(send, seconds):
    """A request record: sent at `send`, its last token `seconds` later."""
    return {"send_time": send, "chunk_offsets": [seconds / 2, seconds]}


def closed_loop(concurrency, requests, seconds=1.0, stagger=0.01):
    """`requests` requests of `seconds` each through `concurrency` slots, each slot sending
    its next as its last one ends; the slots start `stagger` apart (a ramp-up)."""
    records = []
    for slot in range(concurrency):
        t = slot * stagger
        for _ in range(slot, requests, concurrency):
            records.append(request(t, seconds))
            t += seconds
    return records


def test_a_plateau_between_a_ramp_and_a_drain_is_the_window():
    records = closed_loop(64, 640)  # ten waves of 64
    window = concurrency_window(records)
    assert window.peak == 64 and window.threshold == 58
    # From the 58th slot's first send to the 7th slot's last request ending, when 57 are left.
    assert window.start == pytest.approx(0.57) and window.end == pytest.approx(10.06)
    assert window.average_in_flight == pytest.approx(64, abs=0.5)


def test_six_requests_at_x64_hold_six_in_flight():
    window = concurrency_window(closed_loop(64, 6))  # the batch of 6 the audit found labelled x64
    assert window.peak == 6 and window.average_in_flight == pytest.approx(6, abs=0.1)


def test_a_drain_longer_than_the_plateau_is_left_out_whatever_the_count():
    # 64 long requests sent at once, 16 of them lasting much longer: the tail holds 16 in flight.
    records = [request(0.0, 1.0) for _ in range(48)] + [request(0.0, 5.0) for _ in range(16)]
    window = concurrency_window(records)
    assert (window.start, window.end, window.average_in_flight) == (0.0, 1.0, 64.0)
    assert average_in_flight(records, 0.0, 5.0) == pytest.approx((48 * 1 + 16 * 5) / 5)


def test_a_ramp_up_is_left_out_and_ties_keep_the_first_span():
    ramp = [request(i * 0.1, 2.0) for i in range(10)]  # in flight: 1, 2, ... 10, then down
    window = concurrency_window(ramp, ratio=1.0)
    assert (window.start, window.end, window.threshold) == pytest.approx((0.9, 2.0, 10))
    two_plateaus = [request(0.0, 1.0), request(0.0, 1.0), request(2.0, 1.0), request(2.0, 1.0)]
    assert (concurrency_window(two_plateaus).start, concurrency_window(two_plateaus).end) == (0.0, 1.0)


def test_requests_without_a_token_hold_no_known_span():
    assert concurrency_window([{"send_time": 1.0, "chunk_offsets": []}]) is None
    assert concurrency_window([]) is None
    assert average_in_flight([request(0.0, 1.0)], 2.0, 2.0) is None
    with pytest.raises(ValueError, match=r"ratio: expected a share in \(0, 1\], got 0"):
        concurrency_window([request(0.0, 1.0)], ratio=0)
