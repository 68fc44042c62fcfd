"""sweepcore.packing: the makespan of runs under a packing policy, simulated with the
workers' own rules."""

import pytest

from sweepcore.packing import RunSpec, ideal, queue_order, simulate


def runs(*tps_and_durations):
    return [RunSpec(i, tp, d) for i, (tp, d) in enumerate(tps_and_durations)]


def test_exclusive_runs_take_turns_and_packed_ones_share_the_host():
    eight_tp1 = runs(*[(1, 10.0)] * 8)
    assert simulate(eight_tp1, 8, "exclusive")[0] == 80.0
    makespan, placed = simulate(eight_tp1, 8, "pack")
    assert makespan == 10.0 and sorted(p.gpus for p in placed) == [(g,) for g in range(8)]
    assert ideal(eight_tp1, 8) == 10.0


def test_packed_runs_go_largest_first_and_never_share_a_gpu():
    mixed = runs((1, 10.0), (8, 10.0), (4, 10.0), (1, 10.0), (4, 10.0), (2, 5.0), (2, 5.0))
    assert [r.tp for r in queue_order(mixed, "pack")] == [8, 4, 4, 2, 2, 1, 1]
    makespan, placed = simulate(mixed, 8, "pack")
    # TP8 alone, then the two TP4s, then TP2, TP2, TP1, TP1 together; the TP1s' last 5 s
    # leave GPUs idle, which a perfect packing would not.
    assert makespan == 30.0 and ideal(mixed, 8) == 25.0
    for a in placed:
        for b in placed:
            if a is not b and a.host == b.host and a.start < b.end and b.start < a.end:
                assert not set(a.gpus) & set(b.gpus)


def test_two_hosts_halve_a_packable_sweep_and_the_lease_gap_adds_up():
    sixteen = runs(*[(4, 10.0)] * 16)
    assert simulate(sixteen, 8, "pack", hosts=2)[0] == 40.0
    assert simulate(sixteen, 8, "pack")[0] == 80.0
    assert simulate(sixteen, 8, "exclusive", hosts=2)[0] == 80.0
    assert simulate(sixteen, 8, "pack", lease_gap_s=1.0)[0] == 87.0


def test_a_run_larger_than_the_host_is_refused():
    with pytest.raises(ValueError, match="more GPUs than a host has"):
        simulate(runs((16, 1.0)), 8, "pack", slots=1)


def test_hosts_sharing_a_queue_must_take_only_what_fits():
    # Eight TP8 runs then sixteen TP1 runs on two hosts: holding tasks, the first host's
    # slots take every TP8 run and run them one after the other (and, as each ends, a TP1
    # task that then waits behind them) while the other host works through TP1s; taking
    # only what fits splits the TP8s.
    mixed = runs(*[(8, 10.0)] * 8, *[(1, 10.0)] * 16)
    held, _ = simulate(mixed, 8, "pack", hosts=2)
    fits, placed = simulate(mixed, 8, "pack", hosts=2, take_what_fits=True)
    assert held == 90.0 and fits == 50.0 and ideal(mixed, 8, hosts=2) == 50.0
    assert {p.host for p in placed if p.gpus == tuple(range(8))} == {0, 1}
