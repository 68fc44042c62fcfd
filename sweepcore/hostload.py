"""What else ran on the host while a point was measured.  Pure Python, no Django.

A point's numbers describe the server only if nothing else competed with it for the CPU
or its GPUs.  :func:`snapshot` reads, from ``/proc``, every process's CPU time (its own
plus its reaped children's), the host's CPU steal and the load average; two snapshots,
taken around the measurement, give :func:`host_load`: the share of one core each *other*
process used in between (processes neither in the server's process group nor ours),
the steal share and the load averages.  On a GPU host, :func:`gpu_foreign` lists the
processes other than the server's that NVML saw on the run's GPUs, with their SM
utilisation where the driver reports it.

A process that started and ended between the two snapshots is not seen itself: its
parent's children's time counts it once reaped.  A child that was already running at the
first snapshot and was reaped before the second counts only for what it used in between
(its time up to the first snapshot is taken off its parent's), so a shell whose long
command ends during a point is not charged that command's whole run.  Reading ``/proc``
takes a few milliseconds.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class ProcCpu:
    pid: int
    name: str
    pgid: int
    ticks: int  # utime + stime + cutime + cstime
    ppid: int = 0
    children_ticks: int = 0  # cutime + cstime: reaped children's time


@dataclass(frozen=True)
class Snapshot:
    at: float  # time.monotonic()
    procs: dict  # pid -> ProcCpu
    cpu_total_ticks: int
    cpu_steal_ticks: int
    loadavg: tuple  # 1, 5, 15 minutes


@dataclass(frozen=True)
class ForeignProcess:
    pid: int
    name: str
    cores: float  # share of one core over the window (1.0 = a whole core)
    gpu_index: int | None = None
    gpu_util_pct: float | None = None  # SM utilisation on that GPU, where NVML reports it


@dataclass(frozen=True)
class HostLoad:
    """The host beside one measurement window."""

    seconds: float
    cpu_count: int
    foreign: list = field(default_factory=list)  # ForeignProcess, the busiest first
    foreign_cores: float = 0.0  # all other processes together, in cores
    steal_share: float | None = None  # of all CPU time on the host
    loadavg_1m: float | None = None
    gpu_foreign: list = field(default_factory=list)  # ForeignProcess with a gpu_index

    def as_dict(self) -> dict:
        return asdict(self)


def parse_stat_fields(text: str) -> tuple[str, int, int, int, int] | None:
    """(name, ppid, pgid, ticks, children's ticks) from a /proc/<pid>/stat line (ticks:
    utime + stime + cutime + cstime; children's: cutime + cstime); None when it cannot be
    read."""
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < 0:
        return None
    name = text[open_ + 1:close]
    rest = text[close + 2:].split()
    try:
        # rest[0] is field 3 (state); ppid is field 4, pgrp field 5, utime..cstime fields 14..17.
        ppid, pgid = int(rest[1]), int(rest[2])
        own = int(rest[11]) + int(rest[12])
        children = int(rest[13]) + int(rest[14])
    except (IndexError, ValueError):
        return None
    return name, ppid, pgid, own + children, children


def parse_stat(text: str) -> tuple[str, int, int] | None:
    """(name, pgid, ticks) from a /proc/<pid>/stat line; None when it cannot be read."""
    fields_ = parse_stat_fields(text)
    return None if fields_ is None else (fields_[0], fields_[2], fields_[3])


def read_procs(proc: str = "/proc") -> dict:
    procs = {}
    for entry in os.scandir(proc):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:  # it exited while we looked
            continue
        parsed = parse_stat_fields(text)
        if parsed:
            pid = int(entry.name)
            name, ppid, pgid, ticks, children = parsed
            procs[pid] = ProcCpu(pid, name, pgid, ticks, ppid, children)
    return procs


def read_cpu_ticks(proc: str = "/proc") -> tuple[int, int]:
    """(all ticks, steal ticks) of the host from /proc/stat's first line."""
    try:
        first = Path(proc, "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return 0, 0
    values = [int(v) for v in first[1:] if v.isdigit()]
    # user nice system idle iowait irq softirq steal guest guest_nice: guest time is
    # already counted in user time, so the total stops at steal.
    total = sum(values[:8])
    steal = values[7] if len(values) > 7 else 0
    return total, steal


def read_loadavg(proc: str = "/proc") -> tuple:
    try:
        return tuple(float(v) for v in Path(proc, "loadavg").read_text().split()[:3])
    except (OSError, ValueError):
        return ()


def snapshot(proc: str = "/proc") -> Snapshot:
    total, steal = read_cpu_ticks(proc)
    return Snapshot(time.monotonic(), read_procs(proc), total, steal, read_loadavg(proc))


def host_load(before: Snapshot, after: Snapshot, *, own_pids=(), own_pgids=(),
              gpu_foreign: list | None = None, cpu_count: int | None = None,
              clock_ticks: int = CLOCK_TICKS) -> HostLoad:
    """What processes other than ours used between two snapshots.

    ``own_pids``: the client (this process); ``own_pgids``: the server's process group
    (a server's workers share it).  A process first seen in ``after`` counts from zero.
    """
    seconds = max(after.at - before.at, 1e-9)
    own_pids, own_pgids = set(own_pids), set(own_pgids)
    # Children running at the first snapshot and gone at the second were reaped in
    # between: their parent's children's time now holds their whole run, of which only
    # what came after the first snapshot belongs to the window.
    reaped_before: dict = {}
    for pid, was in before.procs.items():
        now = after.procs.get(pid)
        if now is None or now.name != was.name:
            reaped_before[was.ppid] = reaped_before.get(was.ppid, 0) + was.ticks
    foreign = []
    for pid, now in after.procs.items():
        if pid in own_pids or now.pgid in own_pgids:
            continue
        was = before.procs.get(pid)
        if was is not None and was.name == now.name:
            own = (now.ticks - now.children_ticks) - (was.ticks - was.children_ticks)
            children = now.children_ticks - was.children_ticks - reaped_before.get(pid, 0)
            used = own + max(children, 0)
        else:
            used = now.ticks
        if used <= 0:
            continue
        foreign.append(ForeignProcess(pid, now.name, used / clock_ticks / seconds))
    foreign.sort(key=lambda p: p.cores, reverse=True)
    total = after.cpu_total_ticks - before.cpu_total_ticks
    steal = (after.cpu_steal_ticks - before.cpu_steal_ticks) / total if total > 0 else None
    return HostLoad(
        seconds=seconds,
        cpu_count=cpu_count or os.cpu_count() or 1,
        foreign=foreign[:10],
        foreign_cores=sum(p.cores for p in foreign),
        steal_share=steal,
        loadavg_1m=after.loadavg[0] if after.loadavg else None,
        gpu_foreign=list(gpu_foreign or []),
    )


def process_name(pid: int, proc: str = "/proc") -> str:
    try:
        return Path(proc, str(pid), "comm").read_text().strip()
    except OSError:
        return f"pid {pid}"


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def gpu_foreign(nvml, gpu_indices, own_pgids=(), own_pids=()) -> list:
    """Processes other than ours on these GPUs, as NVML sees them now (``nvml``: an open
    :class:`sweepcore.telemetry.Nvml`), with their SM utilisation where reported."""
    own_pgids, own_pids = set(own_pgids), set(own_pids)
    found = []
    for index in gpu_indices:
        utils = nvml.process_utilization(index)
        for p in nvml.processes(index):
            if p.pid in own_pids or process_group(p.pid) in own_pgids:
                continue
            found.append(ForeignProcess(p.pid, process_name(p.pid), 0.0, index, utils.get(p.pid)))
    return found
