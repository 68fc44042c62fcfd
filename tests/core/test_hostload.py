"""sweepcore.hostload: who else used the host while a point was measured."""

import os
import subprocess
import sys
import time

import pytest

from sweepcore import hostload
from sweepcore.hostload import ProcCpu, Snapshot
from sweepcore.telemetry import GpuProcess


def snap(at, procs, total=0, steal=0, load=(0.5, 0.4, 0.3)):
    return Snapshot(at, {p.pid: p for p in procs}, total, steal, load)


def test_parse_stat_reads_a_name_with_spaces_and_parentheses():
    line = "4242 (my (odd) name) R 1 4242 4242 0 -1 4194304 0 0 0 0 150 25 10 5 20 0 1 0 100 0 0"
    assert hostload.parse_stat(line) == ("my (odd) name", 4242, 175, 100)  # utime + stime, not the children's
    assert hostload.parse_stat("garbage") is None


def test_host_load_counts_only_other_processes_as_shares_of_a_core():
    before = snap(0.0, [ProcCpu(10, "server", 500, 1000), ProcCpu(11, "server-worker", 500, 50),
                        ProcCpu(20, "client", 20, 300), ProcCpu(30, "hog", 30, 0), ProcCpu(40, "kworker/0:1", 0, 0)],
                  total=10_000, steal=100)
    after = snap(2.0, [ProcCpu(10, "server", 500, 1190), ProcCpu(11, "server-worker", 500, 250),
                       ProcCpu(20, "client", 20, 400), ProcCpu(30, "hog", 30, 200), ProcCpu(40, "kworker/0:1", 0, 150),
                       ProcCpu(50, "newcomer", 50, 20)],
                 total=10_400, steal=140)
    load = hostload.host_load(before, after, own_pids={20}, own_pgids={500}, cpu_count=2, clock_ticks=100)
    # hog: 200 ticks in 2 s at 100 ticks/s = a whole core; newcomer counts from zero.
    assert [(p.name, round(p.cores, 3)) for p in load.foreign] == [("hog", 1.0), ("newcomer", 0.1)]
    assert load.foreign_cores == pytest.approx(1.1)
    assert load.steal_share == pytest.approx(0.1)
    assert load.loadavg_1m == 0.5 and load.cpu_count == 2


def test_a_reused_pid_under_another_name_counts_from_zero():
    before = snap(0.0, [ProcCpu(30, "old", 30, 5000)])
    after = snap(1.0, [ProcCpu(30, "new", 30, 40)])
    load = hostload.host_load(before, after, clock_ticks=100)
    assert [(p.name, p.cores) for p in load.foreign] == [("new", 0.4)]


def test_a_real_busy_loop_beside_us_is_seen_and_named():
    hog = subprocess.Popen([sys.executable, "-c", "while 1: pass"], start_new_session=True)
    try:
        time.sleep(0.3)
        before = hostload.snapshot()
        time.sleep(1.0)
        after = hostload.snapshot()
    finally:
        hog.kill()
        hog.wait()
    load = hostload.host_load(before, after, own_pids={os.getpid()})
    seen = {p.pid: p for p in load.foreign}
    assert hog.pid in seen
    assert seen[hog.pid].cores > 0.3  # a core, shared with whatever else runs
    assert os.getpid() not in seen


class FakeNvml:
    def __init__(self, procs, utils):
        self.procs, self.utils = procs, utils

    def processes(self, index):
        return [p for p in self.procs if p.gpu_index == index]

    def process_utilization(self, index):
        return self.utils.get(index, {})


def test_gpu_foreign_lists_other_processes_on_the_runs_gpus_with_their_utilisation():
    own = os.getpid()
    nvml = FakeNvml([GpuProcess(0, own, 1000.0), GpuProcess(1, 999_999_991, 500.0), GpuProcess(2, 999_999_992, 10.0)],
                    {1: {999_999_991: 37.0}})
    found = hostload.gpu_foreign(nvml, [0, 1], own_pids={own})
    assert [(p.pid, p.gpu_index, p.gpu_util_pct, p.name) for p in found] == [(999_999_991, 1, 37.0, "pid 999999991")]


def test_a_process_whose_name_changed_is_still_the_same_process_by_its_start_time():
    before = snap(0.0, [ProcCpu(30, "worker-a", 30, 5000, started=777)])
    after = snap(1.0, [ProcCpu(30, "worker-b", 30, 5040, started=777)])
    load = hostload.host_load(before, after, clock_ticks=100)
    assert [(p.name, p.cores) for p in load.foreign] == [("worker-b", 0.4)]
