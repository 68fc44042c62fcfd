"""The fault suite's counts (bench/faults.py tally): what a settled sweep lost, stored
twice or left in flight, from its runs, points and request records."""

from bench.faults import tally


def run(id, method="autoregressive", params=None, tp=1, status="done"):
    return {"id": id, "method": method, "params": params or {}, "tp": tp, "status": status}


def point(id, run_id, position, status="ok", from_search=False):
    return {"id": id, "run_id": run_id, "position": position, "status": status, "from_search": from_search}


def test_a_sweep_measured_once_each_is_clean():
    runs = [run(1), run(2, "ddtree", {"budget": 15})]
    points = [point(10, 1, 0), point(11, 1, 1), point(20, 2, 0), point(21, 2, 1)]
    records = {10: (3, 3), 11: (3, 3), 20: (3, 3), 21: (3, 3)}
    counts = tally("done", runs, points, records)
    assert (counts.finished, counts.lost, counts.duplicated, counts.stuck, counts.detail) == (True, 0, 0, 0, [])


def test_a_point_not_measured_is_lost_and_says_its_state():
    counts = tally("done", [run(1, status="crashed")], [point(10, 1, 0), point(11, 1, 1, "timeout")],
                   {10: (3, 3), 11: (1, 1)})
    assert (counts.finished, counts.lost, counts.duplicated) == (False, 1, 0)
    assert counts.detail == ["autoregressive TP1 position 1: not measured (timeout)"]


def test_an_ok_point_without_its_records_is_lost():
    counts = tally("done", [run(1)], [point(10, 1, 0)], {})
    assert counts.lost == 1 and counts.detail[0] == "point 10: ok without its request records"


def test_a_point_measured_by_two_attempts_or_with_repeated_records_is_duplicated():
    runs = [run(1, status="failed"), run(2)]  # a re-run attempt of the same configuration
    points = [point(10, 1, 0), point(20, 2, 0), point(21, 2, 1)]
    counts = tally("done", runs, points, {10: (3, 3), 20: (3, 3), 21: (6, 3)})
    assert (counts.lost, counts.duplicated) == (0, 2)
    assert "point 21: 6 request records for 3 requests" in counts.detail
    assert "autoregressive position 0: measured by points [10, 20]" in counts.detail


def test_runs_still_queued_or_in_flight_are_stuck_and_the_sweep_unfinished():
    runs = [run(1, status="running"), run(2, "ddtree", {"budget": 15}, status="queued")]
    counts = tally("running", runs, [point(10, 1, 0), point(20, 2, 0, "planned")], {10: (3, 3)})
    assert (counts.finished, counts.stuck, counts.lost) == (False, 2, 1)


def test_skipped_points_and_search_probes_are_not_planned_measurements():
    points = [point(10, 1, 0), point(11, 1, 1, "skipped"), point(12, 1, 2, "ok", from_search=True)]
    counts = tally("done", [run(1)], points, {10: (3, 3)})
    assert (counts.finished, counts.lost, counts.duplicated) == (True, 0, 0)
