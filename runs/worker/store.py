"""The database writes of the worker side: the claim and heartbeat of a run, its timeline
(RunEvent), its fields, its points with their request records, its GPU telemetry and the
quarantine of a configuration that failed deterministically.

Every write is idempotent or guarded by the claim, so a redelivered task or a resumed run
never measures a stored point again nor stores it twice. Every call goes through
runs.worker.dbretry (`retrying`): a database restarted under a run costs it a pause, not
the run; each write is one transaction, tried again as a whole, so a point is stored
whole or not at all."""

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import IntegrityError, connection, models, transaction
from django.db.models import F
from django.utils import timezone

from benchmarks.models import Host, KnownFailure, Sweep, SweepStatus, Workload
from runs.managers import stale_after
from runs.worker.dbretry import retrying
from runs.models import (
    GpuLease,
    Point,
    PointStatus,
    RequestRecord,
    Run,
    RunEvent,
    RunEventKind,
    RunStatus,
    TelemetrySample,
)
from sweepcore import gpus, metrics
from sweepcore.kinds import Validity
from sweepcore.spec import OPEN_LOOP_MAX_CONCURRENCY

#: What backs a point's numbers, stored beside them by `RunStore.store_point`.
EVIDENCE_FIELDS = ("validity", "validity_reasons", "intervals", "simulated_time_scale", "stop_reason", "host_load",
                   "co_runs")
NO_EVIDENCE = {"validity": "", "validity_reasons": [], "intervals": {}, "simulated_time_scale": None,
               "stop_reason": "", "host_load": {}, "co_runs": []}


#: Seconds between two looks, by a worker of a sweep shared by several hosts, for a run that
#: fits its free GPUs (runs.tasks.take_run).
TAKE_POLL_S = float(os.environ.get("SWEEPLAB_TAKE_POLL_S", 5))
IN_FLIGHT = (RunStatus.STARTING, RunStatus.RUNNING)


def heartbeat_interval(most_s=5.0):
    """Seconds between two heartbeats of a live run: at most `most_s`, and a quarter of the
    stale time, so that a live worker is never taken for dead between two beats."""
    return min(most_s, stale_after().total_seconds() / 4)


class ClaimLost(Exception):
    """Another worker has taken the run over (this one was taken for dead): what this one
    would write is no longer its to write."""


@retrying
def seconds_until_stale(run_id):
    """For a run claimed by a worker that may have died: how long until its heartbeat is
    stale enough to take over. None when there is nothing to wait for."""
    run = Run.objects.in_flight().filter(pk=run_id).first()
    if run is None or run.heartbeat_at is None:
        return None
    left = (run.heartbeat_at + stale_after() - timezone.now()).total_seconds()
    return max(1.0, left + 1.0)


@retrying
def record_host_heartbeat(host_id, worker_name):
    """A worker consuming the host's queue is alive."""
    Host.objects.filter(pk=host_id).update(last_heartbeat_at=timezone.now(), last_worker=worker_name)


def take_back_gpus(host_id, now):
    """Give back the GPUs of a host held by runs that no longer run: a run that ended (or
    was queued again) without giving them back, or one whose worker stopped heartbeating
    (it died: its claim is stale too, and the next worker takes the run over). Returns how
    many leases were taken back."""
    live = GpuLease.objects.filter(host_id=host_id, released_at__isnull=True)
    ended = live.exclude(run__status__in=[RunStatus.STARTING, RunStatus.RUNNING]).update(
        released_at=now, release_reason="taken back: its run had ended without giving it back")
    stale = live.filter(run__heartbeat_at__lt=now - stale_after()).update(
        released_at=now, release_reason="taken back: its run's worker stopped heartbeating")
    return ended + stale


def gpu_queue(host_id, now):
    """The runs of a host waiting for GPUs, first to be served first: claimed, alive (a
    fresh heartbeat) and holding no lease, in sweepcore.gpus.serve_order (the largest need
    first), then the oldest sweep, then the plan's order. (run id, GPUs it needs) pairs."""
    holding = GpuLease.objects.filter(released_at__isnull=True).values("run_id")
    waiting = (Run.objects.in_flight()
               .filter(host_id=host_id, heartbeat_at__gte=now - stale_after())
               .exclude(pk__in=holding)
               .order_by("sweep_id", "position", "id")
               .values_list("id", "tp", "sweep__spec", "host__gpu_count"))
    needs = [(run_id, gpus.gpus_needed(((spec or {}).get("options") or {}).get("packing", gpus.EXCLUSIVE), tp, count))
             for run_id, tp, spec, count in waiting]
    return gpus.serve_order(needs)


def run_to_take(sweep_id, host, now, groups=()):
    """For a worker of `host` holding a token of a sweep its runs share with other hosts
    (runs.tasks.take_run): the run to drive now and, when there is none, how long to wait.

    Returns (run id, None): the first of the sweep's takeable runs (queued, or in flight
    under a stale heartbeat: its worker or host died) in sweepcore.gpus.send_order that fits
    the host's free GPUs now (in one of its fast-interconnect `groups`, if known);
    (None, seconds): none fits now, look again then (soon while
    runs wait; when only live runs are left, once the first of them could go stale);
    (None, None): nothing is left to take (every run finished, or the sweep cancelled)."""
    sweep = Sweep.objects.filter(pk=sweep_id).values("status", "spec").first()
    if sweep is None or sweep["status"] not in (SweepStatus.QUEUED, SweepStatus.RUNNING):
        return None, None
    packing = ((sweep["spec"] or {}).get("options") or {}).get("packing", gpus.EXCLUSIVE)
    stale_before = now - stale_after()
    unfinished = list(Run.objects.filter(sweep_id=sweep_id)
                      .filter(models.Q(status=RunStatus.QUEUED) | models.Q(status__in=IN_FLIGHT))
                      .order_by("position", "id").values_list("id", "tp", "status", "heartbeat_at"))
    if not unfinished:
        return None, None
    takeable = [(run_id, tp) for run_id, tp, status, beat in unfinished
                if status == RunStatus.QUEUED or beat is None or beat < stale_before]
    take_back_gpus(host.pk, now)
    held = set(GpuLease.objects.filter(host=host, released_at__isnull=True).values_list("gpu_index", flat=True))
    free = [i for i in range(host.gpu_count) if i not in held]
    for run_id, tp in gpus.send_order(takeable, packing):
        need = gpus.gpus_needed(packing, tp, host.gpu_count)
        if tp <= max(host.gpu_count, 1) and (not need or gpus.choose(free, need, host.gpu_count, groups) is not None):
            return run_id, None
    if takeable:
        return None, TAKE_POLL_S
    beats = [beat for _, _, status, beat in unfinished if beat is not None]
    first_stale = (min(beats) + stale_after() - now).total_seconds() if beats else 0.0
    return None, min(max(TAKE_POLL_S, first_stale + 1.0), stale_after().total_seconds())


@dataclass(frozen=True)
class LeaseAnswer:
    """What `RunStore.lease_gpus` got: the GPUs leased (None: none this time) and why not."""

    gpus: list | None
    held: dict = field(default_factory=dict)  # gpu index -> run id of the live leases seen
    taken_back: int = 0  # stale leases given back on the way
    behind: int | None = None  # the waiting run served first, when that is why


def jsonable(value):
    """`value` as a JSON column stores it (what JSON cannot hold, as text)."""
    return json.loads(json.dumps(value, default=str))


class RunStore:
    """The writes of one executor for one run, as `worker_id`. `run` is loaded by a
    successful `claim`, with its sweep's host, engine and model."""

    def __init__(self, run_id, worker_id, host_id=None):
        self.run_id = run_id
        self.worker_id = worker_id
        self.host_id = host_id  # where it runs: one of its sweep's hosts (None: the sweep's own)
        self.previous_host_id = None  # where it ran before this claim (a takeover), if anywhere
        self.previous = {}  # the claim this one replaced: claimed_by, heartbeat_at, status, pid, argv
        self.run = None
        self._owning = False  # inside an `owned` block

    # claim and heartbeat -------------------------------------------------------------

    @retrying
    def claim(self):
        """Take the run (see RunManager.claim). Returns whether it is ours. Tried again
        whole after a dropped connection: a claim that committed before the connection
        dropped is this worker's own, which the claim takes again."""
        now = timezone.now()
        before = Run.objects.filter(pk=self.run_id).values(
            "sweep__host_id", "host_id", "claimed_by", "heartbeat_at", "status", "pid", "argv").first() or {}
        if before.get("claimed_by") != self.worker_id:
            self.previous_host_id = before.get("host_id")
            self.previous = {key: before.get(key) for key in ("claimed_by", "heartbeat_at", "status", "pid", "argv")}
        host_id = self.host_id or before.get("sweep__host_id")
        if not Run.objects.claim(self.run_id, self.worker_id, now, now - stale_after(), host_id):
            return False
        self.run = Run.objects.select_related("host", "sweep__engine", "sweep__llm").get(pk=self.run_id)
        return True

    @property
    def host(self):
        """The host the run was claimed on (one of its sweep's hosts)."""
        return self.run.host

    # GPU leases ----------------------------------------------------------------------------

    @retrying
    def lease_gpus(self, count, groups=()):
        """Lease `count` GPUs of the run's host for the run (sweepcore.gpus.choose picks them,
        inside one of the host's fast-interconnect `groups` where it reported them) when it
        is the first of the host's waiting runs (`gpu_queue`) and they are free. Returns a
        LeaseAnswer."""
        host = self.host
        now = timezone.now()
        taken_back = take_back_gpus(host.pk, now)
        held = dict(GpuLease.objects.filter(host=host, released_at__isnull=True).values_list("gpu_index", "run_id"))
        queue = gpu_queue(host.pk, now)
        if queue and queue[0][0] != self.run_id and any(run_id == self.run_id for run_id, _ in queue):
            return LeaseAnswer(None, held, taken_back, behind=queue[0][0])
        free = [i for i in range(host.gpu_count) if i not in held]
        chosen = gpus.choose(free, count, host.gpu_count, groups)
        if chosen is None:
            return LeaseAnswer(None, held, taken_back)
        # Stamped after the read that found them free: a release that read saw had already
        # committed, so its released_at is earlier, and the record never shows two holders.
        leased_at = timezone.now()
        try:
            with transaction.atomic():
                GpuLease.objects.bulk_create(
                    GpuLease(host=host, gpu_index=i, run_id=self.run_id, worker=self.worker_id, leased_at=leased_at)
                    for i in chosen
                )
        except IntegrityError:  # another worker leased one of them between our read and our insert
            return LeaseAnswer(None, held, taken_back)
        return LeaseAnswer(chosen, held, taken_back)

    @retrying
    def co_runs(self, start, end):
        """The other runs that held GPUs of this run's host at some moment between `start`
        and `end` (sorted ids): what shared the host with a point measured then."""
        overlapping = (GpuLease.objects.filter(host_id=self.run.host_id, leased_at__lt=end)
                       .filter(models.Q(released_at__isnull=True) | models.Q(released_at__gt=start))
                       .exclude(run_id=self.run_id))
        return sorted(set(overlapping.values_list("run_id", flat=True)))

    @retrying
    def release_gpus(self, reason):
        """Give back the GPUs this worker leased for the run; returns how many leases were
        live. (A worker taken for dead gives back only its own, never the new owner's.)"""
        return GpuLease.objects.filter(run_id=self.run_id, worker=self.worker_id, released_at__isnull=True).update(
            released_at=timezone.now(), release_reason=reason[:300])

    @retrying
    def take_back_leases(self, reason):
        """At a takeover: give back the GPUs the run's previous worker leased (they went with
        its server); returns how many."""
        return (GpuLease.objects.filter(run_id=self.run_id, released_at__isnull=True).exclude(worker=self.worker_id)
                .update(released_at=timezone.now(), release_reason=reason[:300]))

    def heartbeat(self):
        """Renew the claim; False once another worker has taken the run over. (Called
        from the heartbeat thread through dbretry.call_with_retry, which its stop ends.)"""
        return Run.objects.heartbeat(self.run_id, self.worker_id, timezone.now())

    @retrying
    def touch(self):
        """A sign of life between points, from the executor's own thread; raises ClaimLost
        once another worker has taken the run over."""
        if not self.heartbeat():
            raise ClaimLost()

    @contextmanager
    def owned(self):
        """A transaction in which the run is still this worker's (its row locked, so that no
        takeover commits in between); raises ClaimLost, writing nothing, once it is not.
        Every write of the run and its points goes through it: a worker taken for dead must
        not mark the new owner's points not_run, nor end the run it now drives. Nested, the
        outer block's check and lock hold: it is checked once."""
        if self._owning:
            yield
            return
        with transaction.atomic():
            if not Run.objects.select_for_update().filter(pk=self.run_id, claimed_by=self.worker_id).exists():
                raise ClaimLost()
            self._owning = True
            try:
                yield
            finally:
                self._owning = False

    @staticmethod
    def close_connection():
        """The heartbeat thread's database connection, closed when the thread ends."""
        connection.close()

    @retrying
    def sweep_cancelled(self):
        sweep = self.run.sweep
        sweep.refresh_from_db(fields=["status"])
        return sweep.status == SweepStatus.CANCELLED

    @retrying
    def mark_sweep_running(self):
        """The run's sweep is running once one of its runs starts."""
        Sweep.objects.filter(pk=self.run.sweep_id, status=SweepStatus.QUEUED).update(status=SweepStatus.RUNNING)

    # the run ---------------------------------------------------------------------------

    @retrying
    def event(self, kind, message="", **data):
        RunEvent.objects.create(run_id=self.run_id, at=timezone.now(), kind=kind, message=message, data=data)

    @retrying
    def set_run(self, **fields):
        with self.owned():
            for key, value in fields.items():
                setattr(self.run, key, value)
            self.run.save(update_fields=list(fields))

    @retrying
    def set_server_facts(self, limits, engine_version, server_info):
        """What the running server said about itself."""
        self.set_run(
            context_length=limits.context_length,
            kv_capacity_tokens=limits.kv_capacity_tokens,
            engine_version=engine_version[:200],
            server_info=jsonable(server_info),
        )

    @retrying
    def finish(self, status, **fields):
        self.set_run(status=status, finished_at=timezone.now(), **fields)

    @retrying
    def finish_unstarted(self, status, kind, cause, point_reason, failure=None):
        """The run ends before measuring anything more: its planned points are not_run."""
        with self.owned():
            self.points_not_run(point_reason)
            self.finish(status, failure_kind=kind, failure_cause=cause,
                        failure_log="\n".join(failure.lines) if failure else "")

    @retrying
    def fail_internally(self, kind, cause):
        """A fault of Sweeplab's own or of the machine (`kind`: one of
        sweepcore.kinds.INFRASTRUCTURE_FAILURES), not the server's: say so, keep what was
        stored (resume measures the rest)."""
        with self.owned():
            self.event(RunEventKind.FINISHED, cause)
            self.points_not_run(cause)
            self.finish(RunStatus.FAILED, failure_kind=kind, failure_cause=cause)

    @retrying
    def finish_measured(self):
        """Every point measured: the run is done."""
        with self.owned():
            self.event(RunEventKind.FINISHED, "all points measured")
            self.finish(RunStatus.DONE)

    @retrying
    def finish_cancelled(self, point_reason):
        """Stopped at a point boundary by a cancel: the points not reached are not_run."""
        with self.owned():
            self.event(RunEventKind.CANCELLED, "the sweep was cancelled; stopped at a point boundary")
            self.points_not_run(point_reason)
            self.finish(RunStatus.CANCELLED)

    @staticmethod
    @retrying
    def reload(point):
        """`point` read again from the database."""
        point.refresh_from_db()

    @retrying
    def record_crash(self, point, where, failure, point_status=PointStatus.CRASHED):
        """The server died or hung: the point in flight (if any) is `point_status` (crashed;
        a hang's timeout), the rest not_run, the run crashed."""
        with self.owned():
            cause = failure.cause
            if point is not None:
                what = "stopped answering" if point_status == PointStatus.TIMEOUT else "died"
                said = f"the server {what} during this point: {cause}"
                Point.objects.filter(pk=point.pk).update(status=point_status, reason=said, finished_at=timezone.now())
                # Judged already when its requests were stored; otherwise there is nothing to judge.
                Point.objects.filter(pk=point.pk, validity="").update(
                    validity=Validity.INVALID, validity_reasons=[{"code": "crashed", "message": said[:500]}],
                )
            self.points_not_run(f"server died during {where}: {cause}")
            self.event(RunEventKind.CRASHED, cause, failure_kind=failure.kind, lines=list(failure.lines))
            self.finish(RunStatus.CRASHED, failure_kind=failure.kind, failure_cause=cause,
                        failure_log="\n".join(failure.lines))

    @retrying
    def prepare_retry(self):
        """Another launch measures again what the last one crashed in or never reached: those
        points are planned again, without the verdict or the server's view of the last try."""
        with self.owned():
            Point.objects.filter(run_id=self.run_id, status__in=[PointStatus.CRASHED, PointStatus.NOT_RUN]).update(
                status=PointStatus.PLANNED, reason="", server_metrics={}, **NO_EVIDENCE
            )
            self.set_run(status=RunStatus.STARTING, failure_kind="", failure_cause="", failure_log="")

    def quarantine(self, failure):
        """Record (or count again) the KnownFailure of this configuration on this kind of
        GPU, link the run to it and say so. Returns it."""
        run, sweep = self.run, self.run.sweep
        now = timezone.now()
        key = {
            "engine_kind": sweep.engine.kind, "llm": sweep.llm, "method": run.method,
            "params_key": run.params_key, "tp": run.tp, "compute_capability": self.host.compute_capability,
        }
        kf = self.count_known_failure(key, failure, now)
        self.set_run(known_failure=kf)
        self.event(
            RunEventKind.QUARANTINED,
            f"{run.config_label} on compute capability {self.host.compute_capability or 'cpu'} is quarantined: "
            f"{failure.signature}",
            known_failure=kf.pk,
        )
        return kf

    @retrying
    def count_known_failure(self, key, failure, now):
        """The KnownFailure of `key` (engine kind, model, configuration, GPU kind), created
        or counted once more, in one transaction."""
        run = self.run
        with transaction.atomic():
            kf, created = KnownFailure.objects.select_for_update().get_or_create(
                **key,
                defaults={"params": run.params, "failure_kind": failure.kind, "signature": failure.signature,
                          "first_seen_at": now, "last_seen_at": now},
            )
            if not created:
                KnownFailure.objects.filter(pk=kf.pk).update(
                    seen_count=F("seen_count") + 1, last_seen_at=now, failure_kind=failure.kind,
                    signature=failure.signature, active=True,
                )
        return kf

    # points ------------------------------------------------------------------------------

    @retrying
    def pending_points(self):
        """The planned points still to measure, in plan order (a resumed run skips stored
        ones; a capacity search's probes are the search's to pick up)."""
        return list(
            Point.objects.filter(run_id=self.run_id, status=PointStatus.PLANNED, from_search=False)
            .select_related("workload")
            .order_by("position")
        )

    # the capacity search's probes ------------------------------------------------------

    @staticmethod
    @retrying
    def point_template(workload_name, prompt_tokens, max_new_tokens):
        """An unsaved point of the search's series: what the warmup's prompt is built for."""
        return Point(workload=Workload.objects.get(name=workload_name), prompt_tokens=prompt_tokens,
                     max_new_tokens=max_new_tokens, concurrency=1)

    @retrying
    def search_points(self):
        return list(Point.objects.filter(run_id=self.run_id, from_search=True).order_by("position"))

    @retrying
    def probe_point(self, template, metric, load, spec):
        """The point of one probe at `load` (a request rate or a concurrency), created
        after the run's last point, or the one a previous try left unmeasured."""
        if metric == "request_rate":
            shape = {"request_rate": load, "concurrency": spec.get("max_concurrency") or OPEN_LOOP_MAX_CONCURRENCY,
                     "burstiness": float(spec.get("burstiness", 1.0))}
        else:
            shape = {"request_rate": None, "concurrency": int(load), "burstiness": None}
        with self.owned():
            last = Point.objects.filter(run_id=self.run_id).order_by("-position").values_list("position", flat=True)
            point, _ = Point.objects.get_or_create(
                run_id=self.run_id, workload_id=template.workload_id, prompt_tokens=template.prompt_tokens,
                concurrency=shape["concurrency"], request_rate=shape["request_rate"],
                defaults={"position": (last.first() or 0) + 1, "max_new_tokens": template.max_new_tokens,
                          "burstiness": shape["burstiness"], "from_search": True},
            )
        return Point.objects.select_related("workload").get(pk=point.pk)

    @retrying
    def invalid_probe_loads(self, metric):
        """The loads of the search's measured probes whose verdict is invalid, ascending."""
        points = Point.objects.filter(run_id=self.run_id, from_search=True, status=PointStatus.OK,
                                      validity=Validity.INVALID)
        field = "request_rate" if metric == "request_rate" else "concurrency"
        return sorted(points.values_list(field, flat=True))

    @retrying
    def search_point_at(self, metric, load):
        """The measured probe at `load`, or None."""
        points = Point.objects.filter(run_id=self.run_id, from_search=True)
        if metric == "request_rate":
            points = points.filter(request_rate=load)
        else:
            points = points.filter(concurrency=int(load), request_rate__isnull=True)
        return points.order_by("position").first()

    @retrying
    def points_not_run(self, reason):
        with self.owned():
            Point.objects.filter(run_id=self.run_id, status=PointStatus.PLANNED).update(
                status=PointStatus.NOT_RUN, reason=reason
            )

    @retrying
    def skip_point(self, point, reason):
        with self.owned():
            Point.objects.filter(pk=point.pk).update(status=PointStatus.SKIPPED, reason=reason)

    @retrying
    def store_point(self, point, status, reason, started, result, summary, prompt_tokens=None, evidence=None,
                    server_metrics=None, slo_outcome=None):
        """Upsert the measured point with its metrics (`summary`: what sweepcore.metrics
        summarized; keys that are no column go to `extra`; its intervals are in
        `evidence`) and replace its request records. `evidence`: the point's verdict and
        what backs it, {validity, validity_reasons, intervals, simulated_time_scale,
        stop_reason, host_load} (see RunExecutor.evidence). `server_metrics`: the server's
        own view of the point (sweepcore.servermetrics.point_view), None where it has none.
        `slo_outcome`: the point against the sweep's SLO (sweepcore.slo.SLOOutcome), None
        without one."""
        fields = {"status": status, "reason": reason, "started_at": started, "finished_at": timezone.now(),
                  "actual_prompt_tokens": prompt_tokens,
                  # Always written: a point measured again keeps no view of an earlier attempt.
                  "server_metrics": jsonable(server_metrics) if server_metrics else {},
                  "goodput": slo_outcome.goodput if slo_outcome else None,
                  "slo_attainment": slo_outcome.slo_attainment if slo_outcome else None,
                  "slo_met": slo_outcome.slo_met if slo_outcome else None,
                  "slo_checks": jsonable(slo_outcome.checks) if slo_outcome else {}}
        for key, value in (evidence or {}).items():
            if key not in EVIDENCE_FIELDS:
                raise ValueError(f"not a point evidence field: {key!r}")
            fields[key] = jsonable(value) if isinstance(value, (dict, list)) else value
        extra = {}
        for key, value in (summary or {}).items():
            if key == "intervals":  # stored with the evidence
                continue
            if key in metrics.FIELDS or key == "errors":  # errors: a mapping with a column of its own
                fields[key] = value
            elif key == "send_based":  # an open loop's latencies from the send: a mapping, its own column
                fields[key] = jsonable(value) if value else {}
            else:
                extra[key] = value
        if extra:
            fields["extra"] = jsonable(extra)
        with self.owned():
            Point.objects.update_or_create(
                run_id=self.run_id, workload_id=point.workload_id, prompt_tokens=point.prompt_tokens,
                concurrency=point.concurrency, request_rate=point.request_rate, defaults=fields,
            )
            RequestRecord.objects.filter(point_id=point.pk).delete()
            if result is not None:
                RequestRecord.objects.bulk_create(
                    RequestRecord(point_id=point.pk, **{name: getattr(r, name) for name in metrics.REQUEST_FIELDS})
                    for r in result.results
                )

    # telemetry ---------------------------------------------------------------------------

    @retrying
    def save_telemetry(self, samples):
        """A sweepcore.telemetry.Sampler's sink (called from its thread)."""
        TelemetrySample.objects.bulk_create(
            TelemetrySample(
                run_id=self.run_id, at=timezone.datetime.fromtimestamp(s.at, tz=timezone.get_current_timezone()),
                gpu_index=s.gpu_index, memory_used_mib=s.memory_used_mib, memory_total_mib=s.memory_total_mib,
                utilization_pct=s.utilization_pct, power_w=s.power_w, temperature_c=s.temperature_c,
                sm_clock_mhz=s.sm_clock_mhz,
            )
            for s in samples
        )
