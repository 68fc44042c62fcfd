"""The makespan of a sweep's runs under a packing policy, by simulating what the workers do.
Pure: no Django, no processes.

The same rules as the workers (runs.worker): tasks are sent in queue order (largest TP
first under ``pack``); each host has ``slots`` worker processes, and a free slot takes the
next task of the queue the host's workers share; a run then waits until it can lease its
GPUs (:func:`sweepcore.gpus.gpus_needed`: the whole host under ``exclusive``, its TP under
``pack``), the runs waiting on one host served in :func:`sweepcore.gpus.serve_order`, its
GPUs chosen by :func:`sweepcore.gpus.choose`; it holds them for its duration, gives them
back and its slot takes the next task. ``lease_gap_s`` models the time from a release to
the next lease (the workers poll every second).

:func:`ideal` is the GPU-seconds the runs need (duration x TP) spread over every GPU;
:func:`simulate` returns the makespan and each run's placement. ``bench/makespan.py``
feeds it the durations a real run measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sweepcore import gpus


@dataclass(frozen=True)
class RunSpec:
    """A run as the scheduler sees it."""

    run: int
    tp: int
    duration: float  # seconds it holds its GPUs


@dataclass(frozen=True)
class Placement:
    run: int
    host: int
    gpus: tuple
    start: float
    end: float


def queue_order(runs: Sequence[RunSpec], packing: str) -> list[RunSpec]:
    """The order the runs' tasks are sent in (sweepcore.gpus.send_order, as runs.lifecycle
    sends them)."""
    return [run for run, _ in gpus.send_order([(r, r.tp) for r in runs], packing)]


def ideal(runs: Sequence[RunSpec], gpu_count: int, hosts: int = 1) -> float:
    """The makespan of a perfect packing: every GPU busy until the last run ends."""
    return sum(r.duration * r.tp for r in runs) / (gpu_count * hosts)


def simulate(runs: Sequence[RunSpec], gpu_count: int, packing: str, hosts: int = 1, slots: int | None = None,
             lease_gap_s: float = 0.0, longest_first: bool = False,
             take_what_fits: bool = False) -> tuple[float, list[Placement]]:
    """(makespan, placements) of ``runs`` on ``hosts`` hosts of ``gpu_count`` GPUs each.
    ``longest_first``: send the runs by GPU-seconds (duration x TP), largest first, instead
    of the workers' order -- what knowing each run's duration in advance would allow.
    ``take_what_fits``: a host takes from the queue only a run that fits its free GPUs now
    (the first in queue order that does), instead of its slots each holding a task until
    its GPUs are free -- the rule several hosts sharing one queue need (a host's idle slots
    must not hold runs another host could start)."""
    slots = gpu_count if slots is None else slots
    too_big = [r.run for r in runs if r.tp > gpu_count]
    if too_big:
        raise ValueError(f"run(s) {too_big} need more GPUs than a host has ({gpu_count})")
    queue = sorted(runs, key=lambda r: -r.duration * r.tp) if longest_first else list(queue_order(runs, packing))
    t = 0.0
    held = [dict() for _ in range(hosts)]  # host -> {gpu: end time}
    waiting = [[] for _ in range(hosts)]  # host -> [RunSpec] that a slot took, in take order
    busy_slots = [0] * hosts
    placements: list[Placement] = []
    running: list[tuple[float, int, RunSpec, tuple]] = []  # (end, host, run, gpus)

    def start(h, run, chosen):
        end = t + run.duration
        for g in chosen:
            held[h][g] = end
        running.append((end, h, run, tuple(chosen)))
        placements.append(Placement(run.run, h, tuple(chosen), t, end))

    while queue or any(waiting) or running:
        progressed = True
        while progressed:
            progressed = False
            for h in range(hosts):
                if take_what_fits:
                    # The first queued run that fits this host's free GPUs starts at once.
                    while busy_slots[h] < slots:
                        free = [g for g in range(gpu_count) if g not in held[h]]
                        pick = next(((r, c) for r in queue
                                     if (c := gpus.choose(free, gpus.gpus_needed(packing, r.tp, gpu_count),
                                                          gpu_count)) is not None), None)
                        if pick is None:
                            break
                        queue.remove(pick[0])
                        busy_slots[h] += 1
                        start(h, *pick)
                        progressed = True
                    continue
                # Free slots take the next tasks, and hold them until their GPUs are free.
                while busy_slots[h] < slots and queue:
                    waiting[h].append(queue.pop(0))
                    busy_slots[h] += 1
                # The first waiting run in serve order leases when its GPUs are free.
                while waiting[h]:
                    need_of = {r.run: gpus.gpus_needed(packing, r.tp, gpu_count) for r in waiting[h]}
                    first_id, need = gpus.serve_order([(r.run, need_of[r.run]) for r in waiting[h]])[0]
                    chosen = gpus.choose([g for g in range(gpu_count) if g not in held[h]], need, gpu_count)
                    if chosen is None:
                        break
                    run = next(r for r in waiting[h] if r.run == first_id)
                    waiting[h].remove(run)
                    start(h, run, chosen)
                    progressed = True
        if not running:
            break
        # Advance to the next release (and every other one by then).
        t = min(item[0] for item in running) + lease_gap_s
        for item in [item for item in running if item[0] <= t]:
            running.remove(item)
            _, h, _, chosen = item
            for g in chosen:
                held[h].pop(g, None)
            busy_slots[h] -= 1
    makespan = max((p.end for p in placements), default=0.0)
    return makespan, placements
