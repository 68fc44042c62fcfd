"""A sweep's life: created from a validated spec with its planned runs and points, then
launched, cancelled, resumed and re-run, its status following its runs.

Runs are enqueued by task name on the host's queue once the transaction commits; nothing
here imports runs.tasks (the workers' side). Each run records when its task was last sent
(``Run.sent_at``; None while it is held back), so that the workers' periodic check
(runs.worker.watch) can send again the task of a run nobody claimed."""

import logging

from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerUnreachable

from benchmarks.catalog import active_quarantines, load_catalog
from benchmarks.models import LLM, Engine, Host, Sweep, SweepSource, SweepStatus, Workload
from runs.managers import stale_after
from runs.models import AFTER_SWEEP, Point, PointStatus, RequestRecord, Run, RunEvent, RunEventKind, RunStatus
from sweepcore.gpus import EXCLUSIVE, send_order
from sweepcore.kinds import INFRASTRUCTURE_FAILURES, FailureKind
from sweepcore.plan import (
    CONTEXT_CAP_PREFIX,
    PlannedPoint,
    PlannedRun,
    canonical_params,
    nothing_to_measure,
    plan,
    search_shape,
)
from sweepcore.spec import host_names, not_launchable
from sweeplab.celery import EXECUTE_RUN, START_SWEEP_AFTER, TAKE_RUN, send_to_host

log = logging.getLogger(__name__)

#: What sending a task raises when the broker cannot be reached (Redis down: kombu's
#: OperationalError; the filesystem broker's folder unwritable: OSError).
BROKER_ERRORS = (BrokerUnreachable, OSError)


def plan_spec(spec, catalog=None):
    """The plan of a validated spec against the current catalog and quarantines."""
    catalog = catalog or load_catalog()
    host = Host.objects.get(name=spec.host)
    engine = Engine.objects.get(name=spec.engine)
    llm = LLM.objects.get(name=spec.model)
    return plan(spec, catalog, active_quarantines(engine, llm, host))


@transaction.atomic
def create_sweep(spec, owner=None, catalog=None):
    """Store a draft sweep with its planned runs and points; returns (sweep, plan)."""
    the_plan = plan_spec(spec, catalog)
    sweep = Sweep.objects.create(
        name=spec.name,
        spec=spec.to_dict(),
        host=Host.objects.get(name=spec.host),
        engine=Engine.objects.get(name=spec.engine),
        llm=LLM.objects.get(name=spec.model),
        owner=owner,
    )
    workloads = {w.name: w for w in Workload.objects.filter(name__in=[w.workload for w in spec.workloads])}
    runs = Run.objects.bulk_create(
        Run(
            sweep=sweep,
            position=i,
            method=r.method,
            params=r.params,
            params_key=canonical_params(r.params),
            tp=r.tp,
            status=r.status,
            reason=r.reason,
            known_failure_id=r.quarantine.id if r.quarantine else None,
            retry_quarantined=r.retry_quarantined,
        )
        for i, r in enumerate(the_plan.runs)
    )
    Point.objects.bulk_create(
        Point(
            run=run,
            position=j,
            workload=workloads[p.workload],
            prompt_tokens=p.prompt_tokens,
            max_new_tokens=p.max_new_tokens,
            concurrency=p.concurrency,
            request_rate=p.request_rate,
            burstiness=spec.burstiness if p.request_rate is not None else None,
            status=p.status,
            reason=p.reason,
        )
        for run, planned in zip(runs, the_plan.runs)
        for j, p in enumerate(planned.points)
    )
    return sweep, the_plan


FINISHED_RUN = (RunStatus.DONE, RunStatus.CRASHED, RunStatus.FAILED, RunStatus.SKIPPED)
ACTIVE_RUN = (RunStatus.QUEUED, RunStatus.STARTING, RunStatus.RUNNING)
IN_FLIGHT_RUN = (RunStatus.STARTING, RunStatus.RUNNING)
# Runs that resume queues (again): never started, or stopped by a cancel.
UNSTARTED_RUN = (RunStatus.PLANNED, RunStatus.CANCELLED)
# Ended runs that resume queues again when their failure kind is an infrastructure one.
FAILED_RUN = (RunStatus.CRASHED, RunStatus.FAILED)


def ended_by_infrastructure(run):
    """Whether `run` ended failed or crashed for a reason outside its configuration
    (sweepcore.kinds.INFRASTRUCTURE_FAILURES): resume measures what it did not store."""
    return run.status in FAILED_RUN and run.failure_kind in INFRASTRUCTURE_FAILURES


#: Why a point of a cancelled sweep was not measured: the points of its runs that had not
#: started, and those a running run had not reached when it stopped at a point boundary.
#: Resume plans them again.
CANCELLED_POINT_REASON = "the sweep was cancelled before this point was measured (resume measures it)"


# --- what each action allows ------------------------------------------------------------
# One rule per action, in words: the sweep page offers an action when its refusal is "",
# and launch_sweep / cancel_sweep / resume_sweep (behind the page, the API and the CLI)
# raise SweepStateError with the same words otherwise.


def stored_nothing_to_measure(sweep):
    """sweepcore.plan.nothing_to_measure of a stored sweep's runs and points, as planned."""
    runs = {
        r["id"]: PlannedRun(r["method"], r["params"], r["tp"], status=r["status"], reason=r["reason"])
        for r in Run.objects.filter(sweep=sweep).order_by("position", "id")
        .values("id", "method", "params", "tp", "status", "reason")
    }
    points = (Point.objects.filter(run__sweep=sweep, from_search=False).order_by("run_id", "position")
              .values("run_id", "workload__name", "prompt_tokens", "concurrency", "max_new_tokens", "status",
                      "reason", "request_rate"))
    for p in points:
        runs[p["run_id"]].points.append(PlannedPoint(
            p["workload__name"], p["prompt_tokens"], p["concurrency"], p["max_new_tokens"], status=p["status"],
            reason=p["reason"], request_rate=p["request_rate"]))
    spec = sweep.spec or {}
    margin = int((spec.get("options") or {}).get("context_margin_tokens", 16))
    probe = None
    if spec.get("search"):
        workload, prompt_tokens, max_new_tokens = search_shape(spec)
        probe = PlannedPoint(workload, prompt_tokens, 1, max_new_tokens)
    return nothing_to_measure(list(runs.values()), sweep.llm.context_length, margin, probe)


def launch_refusal(sweep, point_counts=None):
    """Why `sweep` cannot be launched, or "": only a draft is, and only when its plan has a
    point to measure. `point_counts`: its points per status, when the caller has counted
    them (the sweep page): a draft's points are as its plan made them, planned or skipped,
    so one that is not skipped is something to measure, and only a draft without one has
    its plan read back for the reason."""
    if sweep.status != SweepStatus.DRAFT:
        return f"sweep {sweep.pk} is {sweep.status}; only a draft can be launched (resume continues one)"
    if not sweep.engine.argv_template:
        return not_launchable(sweep.engine.name)
    if point_counts is None:
        measurable = Point.objects.filter(run__sweep=sweep, run__status=RunStatus.PLANNED,
                                          status=PointStatus.PLANNED).exists()
    else:
        measurable = any(status != PointStatus.SKIPPED for status in point_counts)
    return "" if measurable else stored_nothing_to_measure(sweep)


def cancel_refusal(sweep):
    """Why `sweep` cannot be cancelled, or "": only a queued or running one is."""
    if sweep.status == SweepStatus.DRAFT:
        return f"sweep {sweep.pk} is a draft: it has nothing to cancel (launch it, or delete it in the admin)"
    if sweep.status in (SweepStatus.DONE, SweepStatus.CANCELLED):
        return f"sweep {sweep.pk} is already {sweep.status}"
    return ""


def resume_refusal(sweep, runs, now, workers_restarted=False):
    """Why resuming `sweep` would queue nothing, or "". `runs`: its runs (status,
    heartbeat_at and failure_kind). Resume queues what stopped without finishing: the runs
    of a cancelled sweep that had not finished, runs never started, runs whose worker
    stopped heartbeating (a new worker takes them over), and runs that ended failed or
    crashed for a reason outside their configuration (ended_by_infrastructure: a database
    or disk fault, a hang, a model path gone). Runs waiting in the queue, and runs driven by
    a live worker, need nothing; unless `workers_restarted`: the host's workers were all
    started again (`make run`), so the tasks they held are lost and every claim is dead."""
    if sweep.status == SweepStatus.DRAFT:
        return f"sweep {sweep.pk} is a draft; launch it first"
    if any(ended_by_infrastructure(r) for r in runs):
        return ""
    unfinished = [r for r in runs if r.status not in FINISHED_RUN]
    if not unfinished:
        return (f"sweep {sweep.pk} has nothing to resume: every run of it has ended (done, skipped, or failed or "
                f"crashed for a reason of its configuration); re-run a run to measure it again")
    if sweep.status == SweepStatus.CANCELLED or workers_restarted:
        return ""
    stale_before = now - stale_after()
    if any(r.status in UNSTARTED_RUN or (r.status in IN_FLIGHT_RUN and (r.heartbeat_at is None or
                                                                         r.heartbeat_at < stale_before))
           for r in unfinished):
        return ""
    n = len(unfinished)
    return (f"sweep {sweep.pk} has nothing to resume: its {n} unfinished run{'s are' if n > 1 else ' is'} queued or "
            f"driven by a live worker (a run whose worker stopped can be resumed once its heartbeat is "
            f"{stale_after().total_seconds():g} s old)")


def action_refusals(sweep, runs, point_counts, now=None):
    """{"launch", "cancel", "resume"}: why each is refused, "" where it is offered (the
    sweep page's buttons). `runs` and `point_counts` (points per status) are the page's own."""
    return {
        "launch": launch_refusal(sweep, point_counts),
        "cancel": cancel_refusal(sweep),
        "resume": resume_refusal(sweep, runs, now or timezone.now()),
    }


def queued_on(sweep):
    """Where a sweep's runs are queued, in words."""
    hosts = host_names(sweep.spec, sweep.host.name)
    return f"host.{hosts[0]}" if len(hosts) == 1 else f"hosts {', '.join(hosts)} (each takes the next run that fits)"


def _enqueue(sweep, run_ids):
    """After commit (a worker must find the runs queued): on one host, one `runs.execute_run`
    task per run on its queue, in sweepcore.gpus.send_order (packed: largest TP first); on
    several, one `runs.take_run` token per run, spread over their queues (the token's
    worker takes whichever run fits its host: runs.worker.store.run_to_take). The runs'
    `sent_at` is now. A broker that cannot be reached is said in each run's timeline, not
    raised: the sweep is stored, and the workers' periodic check sends the runs again."""
    hosts = host_names(sweep.spec, sweep.host.name)
    packing = ((sweep.spec or {}).get("options") or {}).get("packing", EXCLUSIVE)
    if packing != EXCLUSIVE:
        tps = dict(Run.objects.filter(pk__in=run_ids).values_list("id", "tp"))
        run_ids = [run_id for run_id, _ in send_order([(run_id, tps.get(run_id, 1)) for run_id in run_ids], packing)]
    sweep_id = sweep.pk
    Run.objects.filter(pk__in=run_ids).update(sent_at=timezone.now())

    def send():
        try:
            for i, run_id in enumerate(run_ids):
                if len(hosts) == 1:
                    send_to_host(EXECUTE_RUN, hosts[0], run_id=run_id)
                else:
                    send_to_host(TAKE_RUN, hosts[i % len(hosts)], sweep_id=sweep_id, host=hosts[i % len(hosts)])
        except BROKER_ERRORS as exc:
            log.error("sweep %s: its runs could not be sent to %s: %s", sweep_id, queued_on(sweep), exc)
            now = timezone.now()
            RunEvent.objects.bulk_create(
                RunEvent(run_id=run_id, at=now, kind=RunEventKind.QUEUED,
                         message=f"could not be sent to {queued_on(sweep)} ({exc.__class__.__name__}: {exc}); a "
                                 f"worker's periodic check sends it again once the broker answers")
                for run_id in run_ids)

    transaction.on_commit(send)


def send_run(run_id, sweep_id, spec, sweep_host, here):
    """Send the task of one queued (or taken-over) run again, now, from a worker of host
    `here` (runs.worker.watch): `runs.execute_run` on the queue of its sweep's host, or, for
    a sweep several hosts share, a `runs.take_run` token on `here`'s queue (a live one)."""
    hosts = host_names(spec, sweep_host)
    if len(hosts) == 1:
        send_to_host(EXECUTE_RUN, hosts[0], run_id=run_id)
        return f"host.{hosts[0]}"
    send_to_host(TAKE_RUN, here, sweep_id=sweep_id, host=here)
    return f"host.{here}"


def _queue_runs(sweep, runs, message):
    now = timezone.now()
    run_ids = list(runs.values_list("id", flat=True))
    runs.update(status=RunStatus.QUEUED, sent_at=None)
    RunEvent.objects.bulk_create(RunEvent(run_id=i, at=now, kind=RunEventKind.QUEUED, message=message) for i in run_ids)
    return run_ids


@transaction.atomic
def launch_sweep(sweep, enqueue=True):
    """Queue every planned run on its host, after the transaction commits. Returns the
    run ids queued. Refused (SweepStateError, launch_refusal) unless the sweep is a draft
    with a point to measure."""
    sweep = Sweep.objects.select_for_update().get(pk=sweep.pk)
    refusal = launch_refusal(sweep)
    if refusal:
        raise SweepStateError(refusal)
    runs = Run.objects.filter(sweep=sweep, status=RunStatus.PLANNED).order_by("position")
    run_ids = _queue_runs(sweep, runs, f"queued on {queued_on(sweep)}")
    sweep.status = SweepStatus.QUEUED
    sweep.launched_at = timezone.now()
    sweep.save(update_fields=["status", "launched_at"])
    if enqueue:
        _enqueue(sweep, run_ids)
    return run_ids


def enqueue_queued_runs(sweep_id):
    """Send the tasks of the runs a launch or resume queued without sending them
    (``enqueue=False``). Returns their ids."""
    sweep = Sweep.objects.select_related("host").get(pk=sweep_id)
    run_ids = list(
        Run.objects.filter(sweep=sweep, status=RunStatus.QUEUED).order_by("position").values_list("id", flat=True)
    )
    now = timezone.now()
    RunEvent.objects.bulk_create(
        RunEvent(run_id=i, at=now, kind=RunEventKind.QUEUED, message=f"sent to {queued_on(sweep)}") for i in run_ids
    )
    _enqueue(sweep, run_ids)
    return run_ids


def start_after(sweep, other):
    """Have the runs `sweep` queued without sending (``enqueue=False``) sent once `other`
    is finished: one `runs.start_sweep_after` task on `other`'s host queue, behind its
    runs, after commit. Two sweeps on hosts that share one machine would measure each
    other. Each held run's timeline says so (a QUEUED event whose data names the other
    sweep: runs.results.waiting reads it)."""
    host, sweep_id, other_id = other.host.name, sweep.pk, other.pk
    now = timezone.now()
    RunEvent.objects.bulk_create(
        RunEvent(run_id=i, at=now, kind=RunEventKind.QUEUED, data={AFTER_SWEEP: other_id},
                 message=f"held back until sweep #{other_id} ({other.name}) is finished: both measure on one machine")
        for i in Run.objects.filter(sweep_id=sweep_id, status=RunStatus.QUEUED).values_list("id", flat=True)
    )
    transaction.on_commit(lambda: send_to_host(START_SWEEP_AFTER, host, sweep_id=sweep_id, after_sweep_id=other_id))


def enqueue_after(sweep_id, after_sweep_id):
    """`enqueue_queued_runs` once the other sweep is finished; None while it is queued
    or running."""
    status = Sweep.objects.filter(pk=after_sweep_id).values_list("status", flat=True).first()
    if status in (SweepStatus.QUEUED, SweepStatus.RUNNING):
        return None
    return enqueue_queued_runs(sweep_id)


@transaction.atomic
def cancel_sweep(sweep):
    """No new runs start, and their points are not_run; a running one stops at its next
    point boundary (its points not reached become not_run then: runs.worker.executor).
    Refused (SweepStateError, cancel_refusal) unless the sweep is queued or running.
    Returns how many waiting runs were cancelled."""
    sweep = Sweep.objects.select_for_update().get(pk=sweep.pk)
    refusal = cancel_refusal(sweep)
    if refusal:
        raise SweepStateError(refusal)
    sweep.status = SweepStatus.CANCELLED
    sweep.finished_at = timezone.now()
    sweep.save(update_fields=["status", "finished_at"])
    waiting = list(Run.objects.filter(sweep=sweep, status__in=[RunStatus.PLANNED, RunStatus.QUEUED])
                   .values_list("id", flat=True))
    now = timezone.now()
    RunEvent.objects.bulk_create(
        RunEvent(run_id=i, at=now, kind=RunEventKind.CANCELLED, message="the sweep was cancelled before this run started")
        for i in waiting
    )
    Point.objects.filter(run_id__in=waiting, status=PointStatus.PLANNED).update(
        status=PointStatus.NOT_RUN, reason=CANCELLED_POINT_REASON)
    return Run.objects.filter(pk__in=waiting).update(status=RunStatus.CANCELLED, finished_at=now)


@transaction.atomic
def resume_sweep(sweep, enqueue=True, workers_restarted=False):
    """Re-enqueue every run that is not finished: the points a cancel left not_run are
    planned again, the runs it cancelled queued again. A run interrupted mid-way (its
    worker killed, its host rebooted) continues with the points it has not stored; a run
    still driven by a live worker is left to it (the claim refuses a fresh heartbeat).
    A run that ended failed or crashed for a reason outside its configuration
    (ended_by_infrastructure) is queued again as it is, its points not measured (not_run)
    planned again, and a hung run's point the hang cut off (hung_point) too: the new
    attempt measures only those, never one measured to its end.
    Refused (SweepStateError, resume_refusal) when that would queue nothing."""
    sweep = Sweep.objects.select_for_update().get(pk=sweep.pk)
    runs = list(Run.objects.filter(sweep=sweep).only("id", "status", "heartbeat_at", "failure_kind", "failure_cause")
                .order_by("position", "id"))
    refusal = resume_refusal(sweep, runs, timezone.now(), workers_restarted)
    if refusal:
        raise SweepStateError(refusal)
    unfinished = [r for r in runs if r.status not in FINISHED_RUN]
    again = [r for r in runs if ended_by_infrastructure(r)]
    Point.objects.filter(run_id__in=[r.pk for r in unfinished if r.status == RunStatus.CANCELLED] + [r.pk for r in again],
                         status=PointStatus.NOT_RUN).update(status=PointStatus.PLANNED, reason="")
    cut_off = {r.pk: hung_point(r) for r in again if r.failure_kind == FailureKind.HUNG}
    waiting = Run.objects.filter(pk__in=[r.pk for r in unfinished if r.status not in IN_FLIGHT_RUN])
    in_flight = [r.pk for r in unfinished if r.status in IN_FLIGHT_RUN]
    queued = _queue_runs(sweep, waiting.order_by("position", "id"), "queued again by resume")
    queued += _queue_again(sweep, again, {run_id: p for run_id, p in cut_off.items() if p is not None})
    run_ids = sorted(set(queued) | set(in_flight))
    if sweep.status in (SweepStatus.DONE, SweepStatus.CANCELLED):
        sweep.status = SweepStatus.RUNNING if in_flight else SweepStatus.QUEUED
        sweep.finished_at = None
        sweep.save(update_fields=["status", "finished_at"])
    if enqueue:
        _enqueue(sweep, run_ids)
    return run_ids




def hung_point(run):
    """The point of a run that ended hung which the hang cut off: its last point ended
    `timeout` (the stalled request's server stopped answering, the run ended there), or
    None. A hang is a fault outside the configuration, so resume measures it again."""
    return (Point.objects.filter(run=run, status=PointStatus.TIMEOUT, from_search=False)
            .select_related("workload").order_by("-position").first())


def _queue_again(sweep, runs, cut_off):
    """Queue again runs that ended by an infrastructure failure (ended_by_infrastructure),
    their failure cleared and said in their timeline; `cut_off`: run id -> the point a
    hang cut off (hung_point), planned again, its requests dropped (the timeline keeps
    what happened). Returns their ids."""
    now = timezone.now()

    def again(point):
        if point is None:
            return ""
        return f"; its point {point.label} was cut off by the hang ({point.reason[:200] or 'timeout'}): measured again"

    RunEvent.objects.bulk_create(
        RunEvent(run_id=r.pk, at=now, kind=RunEventKind.RESUMED,
                 message=f"queued again by resume: it ended {r.status} ({r.failure_kind}: {r.failure_cause[:300]}), "
                         f"a fault outside its configuration; it measures the points it did not store"
                         f"{again(cut_off.get(r.pk))}",
                 data={"ended": r.status, "failure_kind": r.failure_kind,
                       **({"measured_again": cut_off[r.pk].position} if r.pk in cut_off else {})})
        for r in runs)
    if cut_off:
        points = [p.pk for p in cut_off.values()]
        RequestRecord.objects.filter(point_id__in=points).delete()
        Point.objects.filter(pk__in=points).update(status=PointStatus.PLANNED, reason="")
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(failure_kind="", failure_cause="", failure_log="",
                                                            finished_at=None)
    return _queue_runs(sweep, Run.objects.filter(pk__in=[r.pk for r in runs]).order_by("position", "id"),
                       "queued again by resume")


def queue_new_attempts(runs, message):
    """A new attempt of each run (same sweep and configuration, attempt + 1, ``retry_of``
    the old one) with its points planned again, queued on the sweep's host after commit.
    A point the context cap skipped stays skipped; a quarantined run is retried anyway.
    Active runs are refused: they are still being measured; so are runs of imported
    sweeps: their numbers come from a file, no host here can measure them again."""
    imported = [r for r in runs if r.sweep.source == SweepSource.IMPORTED]
    if imported:
        names = ", ".join(f"run {r.pk}" for r in imported)
        raise SweepStateError(f"{names} of imported sweep(s) cannot be re-run: their results come from a file")
    active = [r for r in runs if r.status in ACTIVE_RUN]
    if active:
        names = ", ".join(f"run {r.pk} ({r.get_status_display().lower()})" for r in active)
        raise SweepStateError(f"{names} still in progress: wait for it to finish or cancel its sweep")
    drafts = [r for r in runs if r.sweep.status == SweepStatus.DRAFT]
    if drafts:
        raise SweepStateError(f"run {drafts[0].pk} belongs to draft sweep {drafts[0].sweep_id}: launch the sweep instead")
    new_runs = []
    for old in runs:
        latest = Run.objects.latest_attempt(old)
        run = Run.objects.create(
            sweep_id=old.sweep_id, position=old.position, method=old.method, params=old.params, tp=old.tp,
            attempt=latest + 1, retry_of=old, status=RunStatus.PLANNED, known_failure=old.known_failure,
            retry_quarantined=old.retry_quarantined or old.known_failure_id is not None,
        )
        Point.objects.bulk_create(
            Point(
                run=run, position=p.position, workload_id=p.workload_id, prompt_tokens=p.prompt_tokens,
                max_new_tokens=p.max_new_tokens, concurrency=p.concurrency, request_rate=p.request_rate,
                burstiness=p.burstiness,
                **({"status": p.status, "reason": p.reason} if p.reason.startswith(CONTEXT_CAP_PREFIX) else {}),
            )
            # A search's probes are not copied: the new attempt searches again.
            for p in old.points.filter(from_search=False).order_by("position")
        )
        new_runs.append(run)
    by_sweep = {}
    for run in new_runs:
        by_sweep.setdefault(run.sweep_id, []).append(run.pk)
    for sweep_id, run_ids in by_sweep.items():
        sweep = Sweep.objects.select_for_update().select_related("host").get(pk=sweep_id)
        _queue_runs(sweep, Run.objects.filter(pk__in=run_ids), message)
        if sweep.status in (SweepStatus.DONE, SweepStatus.CANCELLED):
            sweep.status = SweepStatus.QUEUED
            sweep.finished_at = None
            sweep.save(update_fields=["status", "finished_at"])
        _enqueue(sweep, run_ids)
    return new_runs


def refresh_sweep_status(sweep_id):
    """A sweep's status follows its runs (a cancelled one stays cancelled)."""
    statuses = set(Run.objects.filter(sweep_id=sweep_id).values_list("status", flat=True))
    if statuses and statuses <= set(FINISHED_RUN):
        Sweep.objects.filter(pk=sweep_id).exclude(status__in=[SweepStatus.CANCELLED, SweepStatus.DRAFT]).update(
            status=SweepStatus.DONE, finished_at=timezone.now()
        )
    elif statuses & {RunStatus.STARTING, RunStatus.RUNNING} or (statuses & set(FINISHED_RUN)):
        Sweep.objects.filter(pk=sweep_id, status=SweepStatus.QUEUED).update(status=SweepStatus.RUNNING)


class SweepStateError(Exception):
    """The sweep is not in a state that allows this action."""
