"""hostload charges a parent only for the part of a reaped child's run inside the window."""

from sweepcore.hostload import ProcCpu, Snapshot, host_load, parse_stat, parse_stat_fields

TICKS = 100  # per second


def stat_line(pid, name, ppid, pgid, utime, stime, cutime, cstime):
    # fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    return f"{pid} ({name}) S {ppid} {pgid} {pgid} 0 -1 0 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0"


def snap(at, *procs):
    return Snapshot(at, {p.pid: p for p in procs}, 0, 0, (0.5, 0.5, 0.5))


def proc(pid, name, ppid, own, children=0):
    return ProcCpu(pid, name, pid, own + children, ppid, children)


def test_stat_fields_split_a_process_own_time_from_its_reaped_childrens():
    assert parse_stat_fields(stat_line(42, "ba sh)", 7, 40, 10, 5, 300, 20)) == ("ba sh)", 7, 40, 335, 320)
    assert parse_stat(stat_line(42, "bash", 7, 40, 10, 5, 300, 20)) == ("bash", 40, 335)
    assert parse_stat_fields("garbage") is None


def test_a_long_child_reaped_during_the_window_counts_only_for_its_time_inside_it():
    # A shell's 30-second command (3000 ticks before the window) ends 1 s into a 2 s window.
    before = snap(0.0, proc(10, "bash", 1, own=50), proc(11, "pytest", 10, own=3000))
    after = snap(2.0, proc(10, "bash", 1, own=50, children=3100))
    load = host_load(before, after, clock_ticks=TICKS)
    [bash] = load.foreign
    assert bash.pid == 10 and abs(bash.cores - 0.5) < 1e-9  # 100 ticks in 2 s, not 3100


def test_a_child_born_and_reaped_inside_the_window_counts_whole():
    before = snap(0.0, proc(10, "bash", 1, own=50))
    after = snap(2.0, proc(10, "bash", 1, own=60, children=150))
    [bash] = host_load(before, after, clock_ticks=TICKS).foreign
    assert abs(bash.cores - (10 + 150) / TICKS / 2.0) < 1e-9


def test_a_process_running_through_the_window_counts_its_own_time():
    before = snap(0.0, proc(20, "python", 1, own=1000))
    after = snap(4.0, proc(20, "python", 1, own=1400))
    [hog] = host_load(before, after, clock_ticks=TICKS).foreign
    assert hog.name == "python" and abs(hog.cores - 1.0) < 1e-9


def test_a_recycled_pid_counts_from_zero():
    before = snap(0.0, proc(30, "old", 1, own=5000))
    after = snap(1.0, proc(30, "new", 1, own=20))
    [new] = host_load(before, after, clock_ticks=TICKS).foreign
    assert new.name == "new" and abs(new.cores - 0.2) < 1e-9
