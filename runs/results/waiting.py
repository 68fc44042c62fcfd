"""What a sweep's waiting runs wait for, in one sentence (the sweep page's live partial and
progress.json): the sweep it is held behind (runs.lifecycle.start_after), the other sweeps
whose runs hold its host (their GPU leases, their claims, or their tasks ahead of its own in
the host's queue), a run whose worker stopped heartbeating (a live worker's periodic check
takes it over), and a host none of whose workers has been seen lately (each live worker
records itself every few seconds: runs.worker.watch).

Read only while the sweep is queued or running with runs still queued (or claimed and
waiting for GPUs another sweep holds, or claimed by a worker that stopped heartbeating): a
handful of queries, whatever the number of runs."""

from django.db.models import Max, Q
from django.utils import timezone
from django.utils.timesince import timesince

from benchmarks.models import Host, Sweep, SweepStatus
from runs.managers import stale_after
from runs.models import AFTER_SWEEP, GpuLease, Run, RunEvent, RunEventKind, RunStatus
from sweepcore.spec import host_names

ACTIVE_SWEEP = (SweepStatus.QUEUED, SweepStatus.RUNNING)
IN_FLIGHT = (RunStatus.STARTING, RunStatus.RUNNING)

#: How a worker of a host is started (README, "Commands").
WORKER_COMMAND = "python manage.py worker --host {host}"

#: Blocking sweeps named in full; the rest are counted.
NAMED_AT_MOST = 3

# Why another sweep's runs come first, strongest first.
HOLDING, RUNNING, AHEAD = "holding", "running", "ahead"
WHY = {
    HOLDING: "hold the host's GPUs",
    RUNNING: "are running on the host",
    AHEAD: "are ahead of this sweep's in the host's queue",
}


def waiting_sentence(sweep, runs, now=None):
    """Why `sweep`'s waiting runs wait, or None when none does (or nothing holds them back).
    `sweep` with its host and spec; `runs`: its runs (their status), as the page read them.

    "Waiting behind sweep #12 (qwen-full) on host sim-8x-rtxpro6000: its runs hold the host's
    GPUs; this sweep starts when they finish." A sweep held behind another by start_after says
    which; a host without a worker seen lately says so, and how to start one."""
    if sweep.status not in ACTIVE_SWEEP:
        return None
    queued = sum(r.status == RunStatus.QUEUED for r in runs)
    # Claimed, and before its server runs: it may be waiting for GPUs (it leases them first).
    starting = {r.pk for r in runs if r.status == RunStatus.STARTING}
    now = now or timezone.now()
    stale_before = now - stale_after()
    orphaned = [r for r in runs if r.status in IN_FLIGHT and r.heartbeat_at is not None and r.heartbeat_at < stale_before]
    if not queued and not starting and not orphaned:
        return None
    hosts = host_names(sweep.spec, sweep.host.name)
    last_queued = None
    if queued:
        last_queued = (RunEvent.objects.filter(run__sweep=sweep, kind=RunEventKind.QUEUED).order_by("-at", "-id")
                       .values("at", "data").first())
    queued_at = last_queued["at"] if last_queued else (sweep.launched_at or now)
    sentences = []
    after = _held_behind(last_queued) if queued else None
    if after is not None:
        sentences.append(f"Waiting for sweep #{after['id']} ({after['name']}) to finish first: both measure on one "
                         f"machine, so this sweep's runs are sent to {_hosts(hosts)} once it is done.")
    else:
        leases = list(GpuLease.objects.filter(host__name__in=hosts, released_at__isnull=True)
                      .values_list("run_id", "run__sweep_id"))
        # A starting run of this sweep without GPUs waits for them while another sweep holds some.
        starved = len(starting - {run_id for run_id, _ in leases}) if any(
            sweep_id != sweep.pk for _, sweep_id in leases) else 0
        if queued or starved:
            behind = _behind(sweep, hosts, {run_id for run_id, _ in leases}, queued_at)
            if behind:
                sentences.append(_behind_sentence(sweep, behind, queued + starved))
    if orphaned:
        sentences.append(_orphaned_sentence(orphaned, hosts))
        queued_at = min([queued_at] + [r.heartbeat_at for r in orphaned]) if queued else min(r.heartbeat_at for r in orphaned)
    sentences += _missing_workers(hosts, now, queued_at) if queued or orphaned else []
    return " ".join(sentences) or None


def _orphaned_sentence(runs, hosts):
    """Runs whose worker stopped heartbeating: the next live worker takes them over."""
    last = max(r.heartbeat_at for r in runs)
    at = f"{timezone.localtime(last):%Y-%m-%d %H:%M:%S}"
    if len(runs) == 1:
        return (f"Run {runs[0].config_label}: its worker stopped heartbeating at {at}; the next live worker of "
                f"{_hosts(hosts)} takes it over.")
    return (f"{len(runs)} runs' workers stopped heartbeating (the last at {at}); the next live worker of "
            f"{_hosts(hosts)} takes them over.")


def _held_behind(last_queued):
    """The sweep (id, name) the last QUEUED event says this one's runs are held behind, while
    it is still queued or running; else None."""
    data = last_queued["data"] if last_queued and isinstance(last_queued["data"], dict) else {}
    other = data.get(AFTER_SWEEP)
    if not isinstance(other, int):
        return None
    return Sweep.objects.filter(pk=other, status__in=ACTIVE_SWEEP).values("id", "name").first()


def _behind(sweep, hosts, leased, queued_at):
    """The other sweeps whose runs come before this one's on its hosts, strongest reason
    first (holding GPUs, then claimed, then queued earlier), each {"id", "name", "why",
    "hosts"}."""
    runs = (Run.objects.filter(status__in=[RunStatus.QUEUED, *IN_FLIGHT], sweep__status__in=ACTIVE_SWEEP)
            .exclude(sweep_id=sweep.pk)
            .filter(Q(host__name__in=hosts) | Q(host__isnull=True, sweep__host__name__in=hosts))
            .order_by("sweep_id", "position", "id")
            .values("id", "status", "sweep_id", "sweep__name", "sweep__launched_at", "host__name", "sweep__host__name"))
    order = (HOLDING, RUNNING, AHEAD)
    sweeps = {}
    for run in runs:
        if run["id"] in leased:
            why = HOLDING
        elif run["status"] in IN_FLIGHT:
            why = RUNNING
        elif run["sweep__launched_at"] is not None and run["sweep__launched_at"] <= queued_at:
            why = AHEAD
        else:
            continue  # queued after this sweep: behind it, not ahead
        entry = sweeps.setdefault(run["sweep_id"], {"id": run["sweep_id"], "name": run["sweep__name"], "why": why,
                                                    "hosts": []})
        if order.index(why) < order.index(entry["why"]):
            entry["why"] = why
        host = run["host__name"] or run["sweep__host__name"]
        if host not in entry["hosts"]:
            entry["hosts"].append(host)
    return sorted(sweeps.values(), key=lambda s: (order.index(s["why"]), s["id"]))


def _behind_sentence(sweep, behind, waiting):
    named = ", ".join(f"#{s['id']} ({s['name']})" for s in behind[:NAMED_AT_MOST])
    if len(behind) > NAMED_AT_MOST:
        named += f" and {len(behind) - NAMED_AT_MOST} more"
    hosts = sorted({host for s in behind for host in s["hosts"]})
    whys = [WHY[w] for w in (HOLDING, RUNNING, AHEAD) if any(s["why"] == w for s in behind)]
    if sweep.status == SweepStatus.QUEUED:
        starts = "this sweep starts"
    else:
        starts = f"this sweep's {waiting} waiting run{'s start' if waiting > 1 else ' starts'}"
    when = "after them" if whys == [WHY[AHEAD]] else "when they finish"
    if len(behind) == 1:
        return f"Waiting behind sweep {named} on {_hosts(hosts)}: its runs {whys[0]}; {starts} {when}."
    return f"Waiting behind sweeps {named} on {_hosts(hosts)}: their runs {' or '.join(whys)}; {starts} {when}."


def _missing_workers(hosts, now, queued_at):
    """A sentence per host of the sweep no worker of which has been seen lately: neither its
    own heartbeat (a worker sends one when it starts) nor a run it drives has beaten within
    the stale time. A host whose last sign predates the sweep's queueing by less than that is
    given the time to claim (a worker idle since may take the runs any moment)."""
    stale_before = now - stale_after()
    sentences = []
    for host in (Host.objects.filter(name__in=hosts).order_by("name")
                 .annotate(last_run_beat=Max("runs_held__heartbeat_at"))):
        seen = max((t for t in (host.last_heartbeat_at, host.last_run_beat) if t is not None), default=None)
        start = f"start one with `{WORKER_COMMAND.format(host=host.name)}`"
        if seen is None:
            sentences.append(f"No worker of host {host.name} has ever been seen: {start}.")
        elif seen < stale_before and queued_at < stale_before:
            ago = timesince(seen, now).replace("\xa0", " ")
            sentences.append(f"No worker of host {host.name} has been seen since "
                             f"{timezone.localtime(seen):%Y-%m-%d %H:%M} ({ago} ago): {start}.")
    return sentences


def _hosts(hosts):
    return f"host {hosts[0]}" if len(hosts) == 1 else f"hosts {', '.join(hosts)}"
