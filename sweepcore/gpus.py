"""Which of a host's free GPUs a run takes. Pure: no Django, no NVML.

A run at TP k needs k GPUs that talk fast to each other: on one NVLink domain or PCIe
switch where the host reports its topology (``groups``: sets of GPU indices that share
one, from NVML, smallest first), otherwise in the aligned blocks servers are usually
wired in (TP2 on 0-1, 2-3, ...; TP4 on 0-3 or 4-7), which is also what keeps a host
packable: a TP1 run placed on GPU 3 would leave no free TP4 block on 0-3.

:func:`choose` picks, among the candidate sets of k free GPUs, one inside the tightest
group that holds k free GPUs (best fit: the group with the fewest free GPUs left over,
so larger free groups stay whole for larger runs); without groups, a wholly free aligned
block in the busiest neighbourhood (a buddy allocator: the enclosing blocks of twice,
four times ... its size with the fewest free GPUs), then the lowest. With no group or
block that fits it takes the lowest k free GPUs: a run on GPUs that talk slowly is still a
run, and the caller records which GPUs it got.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: ``options.packing``: ``exclusive`` (a run leases every GPU of its host: one run per host at
#: a time) or ``pack`` (a run leases its TP's GPUs; the host runs as many at once as fit).
EXCLUSIVE = "exclusive"
PACK = "pack"
PACKING = (EXCLUSIVE, PACK)


def gpus_text(gpu_count: int) -> str:
    """A number of GPUs in words: "1 GPU", "8 GPUs", "no GPUs"."""
    return f"{gpu_count} GPU{'' if gpu_count == 1 else 's'}" if gpu_count else "no GPUs"


def host_text(gpu_count: int, gpu_model: str = "") -> str:
    """What a host runs servers on: "8 × NVIDIA RTX PRO 6000", or "CPU host, no GPUs"."""
    if not gpu_count:
        return "CPU host, no GPUs"
    return f"{gpu_count} × {gpu_model}" if gpu_model else gpus_text(gpu_count)


def gpus_needed(packing: str, tp: int, gpu_count: int) -> int:
    """The GPUs a run leases on a host with ``gpu_count`` GPUs (0 on a CPU host)."""
    if not gpu_count:
        return 0
    return gpu_count if packing == EXCLUSIVE else min(tp, gpu_count)


def send_order(runs: Sequence[tuple], packing: str) -> list[tuple]:
    """The order a sweep's run tasks are sent in: the plan's, largest TP first when packed
    (a host's worker slots take them in that order, so the runs that need the most GPUs
    start while the host is still free). ``runs``: (run, tp) pairs in plan order."""
    return sorted(runs, key=lambda pair: -pair[1]) if packing == PACK else list(runs)


def serve_order(waiting: Sequence[tuple]) -> list[tuple]:
    """The runs waiting for a host's GPUs in the order they are served: the largest need
    first (a TP8 run is not starved by TP1 runs that would always find one GPU free), the
    given order (the queue's) within a need. ``waiting``: (run, GPUs it needs) pairs; only
    the first may lease."""
    return sorted(waiting, key=lambda pair: -pair[1])


def aligned_blocks(gpu_count: int, size: int) -> list[frozenset[int]]:
    """The aligned blocks of ``size`` GPUs (``size`` rounded up to a power of two) of a host
    with ``gpu_count`` GPUs: [0, size), [size, 2 size), ... that fit in it."""
    width = 1
    while width < size:
        width *= 2
    return [frozenset(range(start, start + width)) for start in range(0, gpu_count - width + 1, width)]


def choose(free: Iterable[int], count: int, gpu_count: int,
           groups: Sequence[Iterable[int]] = ()) -> list[int] | None:
    """``count`` of the ``free`` GPU indices of a host with ``gpu_count`` GPUs, sorted, or
    None when fewer are free. ``groups``: the host's fast-interconnect domains, if known."""
    free_set = set(free)
    if count < 1:
        raise ValueError(f"a run takes at least one GPU, not {count}")
    if len(free_set) < count:
        return None
    if groups:
        fitting = [frozenset(g) for g in groups if len(frozenset(g) & free_set) >= count]
        if fitting:
            # Best fit: the group that leaves the fewest of its free GPUs unused, then the lowest.
            best = min(fitting, key=lambda g: (len(g & free_set) - count, min(g)))
            return sorted(best & free_set)[:count]
        return sorted(free_set)[:count]
    blocks = [b for b in aligned_blocks(gpu_count, count) if b <= free_set]
    if not blocks:
        return sorted(free_set)[:count]

    def crowding(block):
        # The free GPUs of each enclosing block, smallest first: a block in a busier
        # neighbourhood is taken first, so that wholly free larger blocks stay whole.
        width, key = len(block) * 2, []
        while width <= gpu_count:
            start = min(block) // width * width
            key.append(len(free_set & set(range(start, start + width))))
            width *= 2
        return key, min(block)

    return sorted(min(blocks, key=crowding))[:count]


def groups_from_links(gpu_count: int, close) -> list[frozenset[int]]:
    """A host's fast-interconnect groups (``choose``'s ``groups``) from ``close(i, j)``: whether
    GPUs i and j talk fast (NVLink, or one PCIe switch), as NVML reports it. The connected
    sets, smallest first; [] when the topology tells nothing to choose by (every GPU in one
    group, or none linked to another)."""
    group_of = {i: frozenset([i]) for i in range(gpu_count)}
    for i in range(gpu_count):
        for j in range(i + 1, gpu_count):
            if group_of[i] is not group_of[j] and close(i, j):
                merged = group_of[i] | group_of[j]
                for k in merged:
                    group_of[k] = merged
    groups = sorted(set(group_of.values()), key=lambda g: (len(g), min(g)))
    if len(groups) <= 1 or all(len(g) == 1 for g in groups):
        return []
    return groups


def visible_devices(indices: Iterable[int]) -> str:
    """``CUDA_VISIBLE_DEVICES`` for these GPUs: "2,3"."""
    return ",".join(str(i) for i in sorted(indices))


def parse_visible_devices(value: str | None) -> list[int] | None:
    """The GPU indices of a ``CUDA_VISIBLE_DEVICES`` value ("2,3" -> [2, 3]); None when it
    is unset or empty; ValueError for anything that is not a list of indices."""
    if value is None or not value.strip():
        return None
    try:
        indices = [int(part) for part in value.split(",")]
    except ValueError:
        raise ValueError(f"CUDA_VISIBLE_DEVICES={value!r}: expected GPU indices such as 0,1") from None
    if any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        raise ValueError(f"CUDA_VISIBLE_DEVICES={value!r}: expected distinct GPU indices >= 0")
    return indices


def overlapping_leases(leases: Iterable[tuple]) -> list[tuple]:
    """Pairs of leases that held one GPU at the same time. ``leases``: (host, gpu, start,
    end or None while held, holder) tuples; returns ((host, gpu), holder_a, holder_b)."""
    by_gpu: dict[tuple, list] = {}
    for host, gpu, start, end, holder in leases:
        by_gpu.setdefault((host, gpu), []).append((start, end, holder))
    clashes = []
    for key, spans in by_gpu.items():
        spans.sort(key=lambda s: s[0])
        held_until, holder = None, None  # the latest end so far (None: still held), and whose
        for start, end, who in spans:
            if holder is not None and (held_until is None or start < held_until):
                clashes.append((key, holder, who))
            if holder is None or (held_until is not None and (end is None or end > held_until)):
                held_until, holder = end, who
    return clashes
