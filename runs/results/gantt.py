"""Which GPUs each run of a sweep held, when: the sweep page's Gantt chart and its makespan
against the ideal (issue 16).

From the stored GPU leases (runs.models.GpuLease), one query. Each GPU of the sweep's hosts
(one, or the several its runs share) is a row; each lease a bar from its start to its release (to now while it is held),
labelled with its run's configuration and marked *used* on the GPUs the server ran on (the
first TP of those it leased: an exclusive run holds the whole host but runs on TP of it).

- **makespan**: the first lease to the last release (or now), wall seconds;
- **ideal**: the GPU-seconds the runs needed (each run's holding time x its TP) over the
  GPUs of all its hosts -- what a perfect packing of these runs, each as long as it took, would take;
- **ratio**: makespan / ideal (1.0 is perfect; an exclusive sweep of TP1 runs on 8 GPUs is
  near 8).

Times are wall time, as the sweep ran (a simulator at a time scale ran faster than the
GPU host it models).
"""

from django.utils import timezone

from benchmarks.models import Host
from runs.models import GpuLease
from sweepcore.methods import config_label
from sweepcore.spec import host_names


def sweep_gantt(sweep):
    """``{"rows", "makespan_s", "ideal_s", "ratio", "running", "gpu_count", "host", "hosts"}``
    for the sweep's leases, or None when it has none (not launched, a CPU host, an import).
    Each row: ``{"host", "gpu", "label", "bars": [{"run", "config", "tp", "start", "end",
    "used", "held"}]}`` with start and end in seconds from the first lease; ``gpu_count``:
    the GPUs of all its hosts."""
    leases = list(
        GpuLease.objects.filter(run__sweep_id=sweep.pk)
        .order_by("leased_at", "gpu_index")
        .values("run_id", "gpu_index", "leased_at", "released_at", "run__tp", "run__method", "run__params",
                "run__position", "host__name")
    )
    if not leases:
        return None
    now = timezone.now()
    origin = min(lease["leased_at"] for lease in leases)

    def seconds(at):
        return (at - origin).total_seconds()

    # One holding per (run, leased_at): the GPUs a run leased at once, the first TP of them used.
    holdings = {}
    for lease in leases:
        end = lease["released_at"] or now
        held = holdings.setdefault((lease["run_id"], lease["leased_at"]),
                                   {"gpus": [], "tp": lease["run__tp"], "start": lease["leased_at"], "end": end})
        held["gpus"].append(lease["gpu_index"])
        held["end"] = max(held["end"], end)

    hosts = host_names(sweep.spec, sweep.host.name)
    names = hosts + sorted({lease["host__name"] for lease in leases} - set(hosts))  # a host since dropped from the spec
    counts = dict(Host.objects.filter(name__in=names).values_list("name", "gpu_count"))
    for lease in leases:
        counts[lease["host__name"]] = max(counts.get(lease["host__name"], 0), lease["gpu_index"] + 1)
    rows, row_of = [], {}
    for name in names:
        for i in range(counts.get(name, 0)):
            row_of[(name, i)] = len(rows)
            rows.append({"host": name, "gpu": i, "label": f"{name} GPU {i}", "bars": []})
    for lease in leases:
        held = holdings[(lease["run_id"], lease["leased_at"])]
        rows[row_of[(lease["host__name"], lease["gpu_index"])]]["bars"].append({
            "run": lease["run_id"],
            "config": config_label(lease["run__method"], lease["run__params"], lease["run__tp"]),
            "tp": lease["run__tp"],
            "start": seconds(lease["leased_at"]),
            "end": seconds(lease["released_at"] or now),
            "used": lease["gpu_index"] in sorted(held["gpus"])[:held["tp"]],
            "held": lease["released_at"] is None,
        })
    makespan = seconds(max(held["end"] for held in holdings.values()))
    gpu_seconds = sum((held["end"] - held["start"]).total_seconds() * held["tp"] for held in holdings.values())
    gpu_count = sum(counts.get(name, 0) for name in hosts) or len(rows)
    ideal = gpu_seconds / max(gpu_count, 1)
    return {
        "host": ", ".join(hosts),
        "hosts": hosts,
        "gpu_count": gpu_count,
        "rows": rows,
        "makespan_s": makespan,
        "ideal_s": ideal,
        "ratio": makespan / ideal if ideal > 0 else None,
        "running": any(lease["released_at"] is None for lease in leases),
    }


def gantt_section(sweep):
    """What the sweep page's GPU chart needs (templates/runs/partials/gantt_section.html):
    the gantt, or None, and the chart's height: title, axis and legend, then a row per GPU,
    its plot at least 230 px tall."""
    gantt = sweep_gantt(sweep)
    return {"gantt": gantt, "gantt_height_px": 110 + max(230, 28 * (gantt["gpu_count"] if gantt else 0))}
