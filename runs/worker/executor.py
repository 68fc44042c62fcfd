"""Drives one Run from claim to teardown, so that no crash is ever recorded as a slow
result and one dead configuration never stops the sweep.

    claim -> preflight -> launch -> ready -> context cap -> warmup -> points -> teardown

Orchestration only: the server process is a sweepcore.server.ServerProcess (its own
process group, argv list never a shell, log in a file), the database writes are
runs.worker.store's. Every step writes a RunEvent. When the server dies, the cause is read
from its log tail, the point in flight becomes ``crashed`` and the rest ``not_run``; a
deterministic signature quarantines the configuration (KnownFailure). Points already
stored are never measured again: a resumed run continues with the points it has not stored.
"""

import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from benchmarks.models import FailureKind, SweepStatus, WorkloadKind
from runs.lifecycle import CANCELLED_POINT_REASON, refresh_sweep_status
from runs.models import PointStatus, RunEventKind, RunStatus
from runs.worker import dbretry
from runs.worker.dbretry import DB_ERRORS, Stopped, call_with_retry, reconnect
from runs.worker.store import ClaimLost, RunStore, heartbeat_interval
from sweepcore import (
    capacity,
    failures,
    gpus,
    hostload,
    loadgen,
    metrics,
    prompts,
    servermetrics,
    slo,
    telemetry,
)
from sweepcore.engines import ArgvError, LaunchValues, get_adapter
from sweepcore.point import (
    CONNECTION_ERRORS,
    forces_length,
    internal_failure,
    keep_going_until_stable,
    point_status,
    pooled_result,
    repeat_figures,
    stability_note,
    stall_note,
)
from sweepcore.engines.base import PROBE_TIMEOUT_S
from sweepcore.plan import search_shape
from sweepcore.spec import OPEN_LOOP_MAX_CONCURRENCY
from sweepcore.server import (
    MIB,
    LogUnwritable,
    NotReady,
    ServerExited,
    ServerProcess,
    check_log_dir,
    free_port,
    kill_leftover,
    port_in_use,
)
from sweepcore.validity import INVALID, PointVerdict, Reason, Thresholds, judge

log = logging.getLogger(__name__)

WARMUP_MAX_TOKENS = 16
GPU_RELEASE_TIMEOUT_S = 60
# Seconds between two tries to lease GPUs held by other runs.
GPU_LEASE_POLL_S = float(os.environ.get("SWEEPLAB_GPU_LEASE_POLL_S", 1))
# Launches in all when the port picked is taken before the server binds it.
PORT_ATTEMPTS = 3
# Measurements in all of a capacity probe the verdicts call invalid.
INVALID_PROBE_ATTEMPTS = 2
# Seconds a teardown's timeline event, or the giving back of its GPUs, is tried while the
# database is away (then logged; stale leases are taken back by the next run that needs them).
NOTE_RETRY_S = 10.0


# How long the server's token counter may take to answer, at most (the stall timeout when
# shorter: a server silent for that long may be hung).
TOKENIZE_TIMEOUT_S = 30.0


def hang_probe_s():
    """Seconds a server that left a request without a token for the stall timeout has to
    answer its health probe before it counts as hung (SWEEPLAB_HANG_PROBE_S, default 10)."""
    return float(os.environ.get("SWEEPLAB_HANG_PROBE_S", 10))



_TOPOLOGY = {}


def host_groups(gpu_count):
    """This host's fast-interconnect groups (sweepcore.telemetry.gpu_groups), read from NVML
    once per worker process; [] without NVML (a CPU host, the simulator's machine)."""
    if not gpu_count:
        return []
    if gpu_count not in _TOPOLOGY:
        try:
            _TOPOLOGY[gpu_count] = telemetry.gpu_groups(gpu_count)
        except telemetry.NvmlUnavailable:
            _TOPOLOGY[gpu_count] = []
    return _TOPOLOGY[gpu_count]


# --- the rest of the executor's helpers ------------------------------------------------


def is_local_path(path):
    return path.startswith(("/", "./", "../", "~"))


def engine_python(engine):
    """The engine's own interpreter as an absolute path (relative ones are to the project
    folder), or "" for Sweeplab's own."""
    if not engine.python:
        return ""
    path = Path(engine.python).expanduser()
    return str(path if path.is_absolute() else Path(settings.BASE_DIR) / path)


def point_label(point):
    length = f" {point.prompt_tokens} tokens" if point.prompt_tokens is not None else ""
    load = f" x{point.concurrency}" if point.request_rate is None else f" at {point.request_rate:g} req/s"
    return f"{point.workload.name}{length}{load}"


def in_flight(point):
    """How many of the point's requests the server holds at once, for the KV cap: a
    closed loop's concurrency; an open loop's requests beyond what fits wait in the
    server's queue (that is what its load curve measures), so each must fit alone."""
    return point.concurrency if point.request_rate is None else 1


def probe_of(point):
    """A stored probe point as the capacity search reads it (sweepcore.capacity.Probe)."""
    load = point.request_rate if point.request_rate is not None else point.concurrency
    trusted = point.status == PointStatus.OK and point.validity != INVALID
    return capacity.Probe(
        load=load, meets_slo=bool(trusted and point.slo_met), goodput=point.goodput,
        output_throughput=point.output_throughput, server_failed=point.status == PointStatus.CRASHED,
    )


class ServerDied(Exception):
    """The server is gone or no longer answers; `point` is the one in flight, if any, and
    `point_status` what it becomes (`crashed`; a hang's `timeout`)."""

    def __init__(self, detail, point=None, kind=None, where=None, point_status=PointStatus.CRASHED):
        super().__init__(detail)
        self.detail = detail
        self.point = point
        self.kind = kind  # set when the cause is known without the log (a hang)
        self.where = where or (point_label(point) if point is not None else "the previous point")
        self.point_status = point_status


class PreflightFailed(Exception):
    """The run cannot start on this host: `kind` is its failure kind."""

    def __init__(self, kind, reason):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class StartupTimeout(Exception):
    pass


class LaunchRefused(Exception):
    """The engine's argv template cannot be filled for this configuration."""


class Cancelled(Exception):
    pass


@dataclass
class Server:
    """The server of the current launch and where it answers."""

    process: ServerProcess
    base_url: str
    port: int
    gpus: list


# --- the executor ---------------------------------------------------------------------


def execute_run(run_id, worker_id=None, host_id=None):
    """Claim and drive one run on host `host_id` (default: its sweep's host). Returns its
    final status, or None if it was not ours."""
    worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
    executor = RunExecutor(run_id, worker_id, host_id)
    if not executor.claim():
        return None
    return executor.execute()


class RunExecutor:
    def __init__(self, run_id, worker_id, host_id=None):
        self.run_id = run_id
        self.worker_id = worker_id
        self.store = RunStore(run_id, worker_id, host_id)
        self.run = None
        self.server = None
        self.heartbeat = None
        self.sampler = None
        self.metrics_unreadable = False  # said once per run
        self.leased = []  # the GPUs of the host this run holds (RunStore.lease_gpus)
        self.db_gone = False  # the database stayed unreachable: nothing more is written

    # claim and heartbeat -------------------------------------------------------------

    def claim(self):
        if not self.store.claim():
            log.info("run %s is not ours to take (finished, cancelled or claimed by a live worker)", self.run_id)
            return False
        self.run = self.store.run
        self.store.event(RunEventKind.CLAIMED, f"claimed by {self.worker_id}")
        before = self.store.previous
        if before.get("status") in (RunStatus.STARTING, RunStatus.RUNNING):
            self.store.event(RunEventKind.RESUMED, self.takeover_words(before), previous_worker=before["claimed_by"],
                             previous_host=self.store.previous_host_id)
        # Its earlier leases went with that server: this worker leases again.
        self.store.take_back_leases(f"taken over by {self.worker_id}")
        return True

    def takeover_words(self, before):
        """A takeover of a run whose worker stopped heartbeating, in words; its server, left
        running (on this host only: a pid of another host means nothing here), is killed."""
        beat = before.get("heartbeat_at")
        when = f" at {timezone.localtime(beat):%Y-%m-%d %H:%M:%S}" if beat else ""
        worker = before.get("claimed_by") or "?"
        if self.store.previous_host_id not in (None, self.run.host_id):
            return (f"taken over on host {self.run.host.name} from another host, whose worker {worker} stopped "
                    f"heartbeating{when}")
        words = f"taken over: its worker {worker} stopped heartbeating{when}"
        pid = before.get("pid")
        if not pid:
            return words + "; it had no server running"
        if kill_leftover(pid, before.get("argv") or self.run.argv):
            return f"{words}; its server (pgid {pid}) was killed"
        return f"{words}; its server (pgid {pid}) had already exited"

    def start_heartbeat(self):
        """A thread that renews the claim every heartbeat_interval() until stopped, or until
        another worker has taken the run over (`lost`). It outlives a database that goes
        away: each beat is tried again (dbretry) until it goes through or the thread is
        stopped, and whatever goes wrong is logged, never the end of the thread."""
        stop = threading.Event()
        lost = threading.Event()
        interval = heartbeat_interval()

        def beat():
            try:
                while not stop.wait(interval):
                    try:
                        # Tried every second at most: once the database is back, the first
                        # beat must come before a live worker's check takes the run for dead.
                        ours = call_with_retry(self.store.heartbeat, what=f"the heartbeat of run {self.run_id}",
                                               stop=stop, longest_pause_s=1.0)
                    except Stopped:
                        return
                    except Exception:  # noqa: BLE001 - the next beat tries again
                        log.exception("run %s: a heartbeat failed; trying again in %g s", self.run_id, interval)
                        reconnect()
                        continue
                    if not ours:
                        lost.set()
                        return
            finally:
                self.store.close_connection()

        thread = threading.Thread(target=beat, name=f"heartbeat-run-{self.run_id}", daemon=True)
        thread.start()
        self.heartbeat = (thread, stop, lost)

    def stop_heartbeat(self):
        if self.heartbeat:
            thread, stop, _ = self.heartbeat
            stop.set()
            thread.join(timeout=heartbeat_interval() + 5)

    def check_boundary(self):
        """Between points: still ours, and the sweep not cancelled."""
        if self.heartbeat and self.heartbeat[2].is_set():
            raise ClaimLost()
        if self.store.sweep_cancelled():
            raise Cancelled()
        self.store.touch()

    @property
    def spec(self):
        return self.run.sweep.spec

    @property
    def options(self):
        return self.spec.get("options", {})

    @property
    def adapter(self):
        return get_adapter(self.run.sweep.engine.kind)

    # the run ---------------------------------------------------------------------------

    def execute(self):
        """Drive the claimed run to its end; its final status, or None when another worker
        took it over. Where the database stays unreachable past dbretry's budget, the run is
        left as it is (in flight, its points not stored still planned): its server is torn
        down, its heartbeat stopped first, the sweep left alone, and the error raised (the
        task is tried again); once the database is back the run is taken over, by this
        worker or another, and the point in flight is measured again."""
        run, store = self.run, self.store
        if run.sweep.status == SweepStatus.QUEUED:
            store.mark_sweep_running()
        self.start_heartbeat()
        ended = False  # how the run ended (or that it was lost) is in the database
        try:
            status = self.drive()
            ended = True
            return status
        except DB_ERRORS:
            self.db_gone = True
            log.error("run %s: the database stayed unreachable; stopping here and leaving the run to be taken "
                      "over once it is back", self.run_id)
            self.stop_heartbeat()  # first: a beat now would make the run look driven
            raise
        finally:
            self.teardown()
            self.give_back_gpus()
            self.stop_heartbeat()
            if ended:  # never on a failed write: the sweep is not finished by a run still in flight
                call_with_retry(refresh_sweep_status, run.sweep_id, what=f"the status of sweep {run.sweep_id}")

    def drive(self):
        """The run from its GPU lease to its end (execute's body)."""
        run, store = self.run, self.store
        attempts = 1 + int(self.options.get("retries", 0))
        try:
            self.lease_gpus()
            if run.started_at is None:
                store.set_run(started_at=timezone.now())
            try:
                checked = self.preflight()
            except PreflightFailed as failed:
                store.event(RunEventKind.PREFLIGHT_FAILED, failed.reason)
                store.finish_unstarted(RunStatus.FAILED, failed.kind, failed.reason, f"preflight failed: {failed.reason}")
                return run.status
            store.event(RunEventKind.PREFLIGHT_OK, "; ".join(checked))
            for attempt in range(1, attempts + 1):
                outcome = self.attempt(attempt, attempts)
                if outcome != "retry":
                    break
            return self.run.status
        except Cancelled:
            return self.end_unless_lost(self.cancelled)
        except LogUnwritable as exc:
            return self.end_unless_lost(lambda: self.log_unwritable(exc))
        except ClaimLost:
            return self.lost()
        except DB_ERRORS:
            raise  # execute leaves the run in flight, to be taken over
        except Exception as exc:
            log.exception("run %s: internal error", self.run_id)
            kind, cause = internal_failure(exc)
            return self.end_unless_lost(lambda: store.fail_internally(kind, cause))

    def cancelled(self):
        """Stopped at a point boundary: the points not reached are not_run (resume plans them again)."""
        self.store.finish_cancelled(CANCELLED_POINT_REASON)

    def give_back_gpus(self):
        """At the end of the run: the GPUs it leased are free again. Not while the database is
        gone: they are taken back once the run's heartbeat is stale (take_back_gpus)."""
        if not self.leased or self.db_gone:
            return
        try:
            with dbretry.budget(NOTE_RETRY_S):
                released = self.store.release_gpus("teardown")
            if released:
                self.note(RunEventKind.TEARDOWN, f"GPU(s) {gpus.visible_devices(self.leased)} given back")
        except DB_ERRORS:
            log.error("run %s: its GPU leases could not be given back (the database is unreachable); they are "
                      "taken back once its heartbeat is stale", self.run_id)

    def note(self, kind, message, **data):
        """A timeline event of the teardown: written while the database answers, logged
        otherwise (the server is torn down whatever the database does)."""
        if not self.db_gone:
            try:
                with dbretry.budget(NOTE_RETRY_S):
                    self.store.event(kind, message, **data)
                return
            except DB_ERRORS:
                pass
        log.warning("run %s: %s (not in its timeline: the database is unreachable)", self.run_id, message)

    def log_unwritable(self, exc):
        """The server's log could not be written (a full disk, its folder gone): the run
        fails with the path and the reason; what was stored is kept, the rest not_run."""
        self.store.event(RunEventKind.FINISHED, exc.reason, failure_kind=exc.kind, path=exc.path)
        self.store.finish_unstarted(RunStatus.FAILED, exc.kind, exc.reason, f"not run: {exc.reason}")

    def end_unless_lost(self, end):
        """Call `end` (which records how the run ended); the run's status then, or None when
        another worker had taken it over."""
        try:
            end()
        except ClaimLost:
            return self.lost()
        return self.run.status

    def lost(self):
        """Nothing more to do: the run is another worker's (returns None, as for a run not ours)."""
        log.warning("run %s was taken over by another worker; stopping", self.run_id)

    def attempt(self, attempt, attempts):
        """One launch of the server and the points it measures. Returns "done",
        "crashed", "failed" or "retry"."""
        store = self.store
        try:
            self.start_server()
        except ServerDied as died:
            failure = self.failure_from_log(died)
            if attempt < attempts:
                return self.retry(failure, attempt)
            store.event(RunEventKind.STARTUP_FAILED, failure.cause)
            store.finish_unstarted(RunStatus.CRASHED, failure.kind, failure.cause,
                                   f"server did not start: {failure.cause}", failure)
            self.quarantine(failure)
            return "crashed"
        except StartupTimeout as exc:
            store.event(RunEventKind.STARTUP_FAILED, str(exc))
            store.finish_unstarted(RunStatus.FAILED, FailureKind.STARTUP_TIMEOUT, str(exc), f"server did not start: {exc}")
            return "failed"
        except LaunchRefused as exc:
            store.event(RunEventKind.PREFLIGHT_FAILED, str(exc))
            store.finish_unstarted(RunStatus.FAILED, FailureKind.PREFLIGHT, str(exc), f"not launched: {exc}")
            return "failed"

        store.set_run(status=RunStatus.RUNNING)
        try:
            self.read_server_facts()
            self.start_telemetry()
            points = self.apply_context_cap(store.pending_points())
            template = self.search_template() if self.spec.get("search") else None
            self.warmup(points or ([template] if template is not None else []))
            for point in points:
                self.check_boundary()
                self.measure(point)
            if template is not None:
                self.search_capacity(template)
        except ServerDied as died:
            failure = self.failure_from_log(died)
            store.record_crash(died.point, died.where, failure, died.point_status)
            if attempt < attempts:
                return self.retry(failure, attempt)
            self.quarantine(failure)
            return "crashed"
        store.finish_measured()
        return "done"

    def retry(self, failure, attempt):
        self.store.event(RunEventKind.RETRY, f"attempt {attempt} ended: {failure.cause}; launching again")
        self.teardown()
        self.store.prepare_retry()
        return "retry"

    def quarantine(self, failure):
        if failure.deterministic:
            self.store.quarantine(failure)

    # GPU leases --------------------------------------------------------------------------

    def lease_gpus(self):
        """Lease the run's GPUs on its host before anything else: every GPU under
        options.packing exclusive (one run per host at a time), its TP's under pack.
        While they are held by other runs, or another waiting run comes first, wait (saying
        so once per change), ready to stop at a cancel."""
        host = self.run.host
        packing = self.options.get("packing", gpus.EXCLUSIVE)
        count = gpus.gpus_needed(packing, self.run.tp, host.gpu_count)
        if not count:
            return
        said = None
        groups = host_groups(host.gpu_count)
        while True:
            answer = self.store.lease_gpus(count, groups)
            if answer.taken_back:
                self.store.event(RunEventKind.WAITING_FOR_GPUS,
                                 f"took back {answer.taken_back} GPU lease(s) of host {host.name} from runs that "
                                 f"no longer run (their worker stopped heartbeating, or they ended)")
            if answer.gpus is not None:
                break
            words = self.waiting_words(host, count, answer)
            if words != said:
                self.store.event(RunEventKind.WAITING_FOR_GPUS, words)
                said = words
            self.check_boundary()
            time.sleep(GPU_LEASE_POLL_S)
        self.leased = answer.gpus
        how = "every GPU of the host (packing: exclusive)" if packing == gpus.EXCLUSIVE else f"TP{self.run.tp}"
        if groups and packing != gpus.EXCLUSIVE:
            inside = any(set(self.leased) <= set(g) for g in groups)
            how += ", on one NVLink/PCIe-switch group" if inside else ", across groups: no group had them free"
        self.store.event(RunEventKind.GPUS_LEASED, f"GPU(s) {gpus.visible_devices(self.leased)} of host {host.name} "
                                                  f"leased: {how}", gpus=self.leased)

    @staticmethod
    def waiting_words(host, count, answer):
        if answer.behind is not None:
            return f"waiting for {count} GPU(s) of host {host.name}: run {answer.behind} waits for its GPUs first"
        holders = sorted(set(answer.held.values()))
        free = host.gpu_count - len(answer.held)
        held_by = f"held by run(s) {', '.join(str(r) for r in holders)}" if holders else "taken by another run"
        return f"waiting for {count} GPU(s) of host {host.name}: {free} free, the others {held_by}"

    def run_gpus(self):
        """The GPUs the server runs on: the first TP of those leased."""
        return self.leased[:self.run.tp]

    # preflight ---------------------------------------------------------------------------

    def preflight(self):
        """What was checked, in words; raises PreflightFailed when the run cannot start.
        The port is not among the checks: it is picked at launch (`start_server`)."""
        run, host, llm, engine = self.run, self.run.host, self.run.sweep.llm, self.run.sweep.engine
        checked = []
        for what, path in (("model", llm.path), ("draft model", llm.draft_model_path)):
            if not path:
                continue
            if not is_local_path(path):
                checked.append(f"{what} {path} is not a local path (not checked; the server fetches it)")
                continue
            if not Path(path).expanduser().exists():
                if what == "draft model":
                    raise PreflightFailed(FailureKind.MODEL_MISSING, f"draft model path {path} does not exist on host {host.name}")
                hint = " (/dev/shm is emptied by a reboot)" if path.startswith("/dev/shm") else ""
                raise PreflightFailed(
                    FailureKind.MODEL_MISSING,
                    f"model path {path} does not exist on host {host.name}{hint}: put the model back, then resume the sweep",
                )
            checked.append(f"{what} path {path} exists")
        python = engine_python(engine)
        if python:
            if not os.access(python, os.X_OK):
                raise PreflightFailed(
                    FailureKind.PREFLIGHT,
                    f"engine {engine.name}'s interpreter {python} does not exist or cannot be run on host {host.name}: "
                    f"build its environment (`make engines`), or correct the engine's python in the admin",
                )
            checked.append(f"engine interpreter {python} exists")
        if run.tp > max(host.gpu_count, 1):
            raise PreflightFailed(FailureKind.PREFLIGHT,
                                  f"TP{run.tp} needs {run.tp} GPUs; host {host.name} has {gpus.gpus_text(host.gpu_count)}")
        checked.append(f"TP{run.tp} fits host {host.name} ({gpus.host_text(host.gpu_count, host.gpu_model)})")
        if host.gpu_count and engine.kind != "simulated":
            used = self.run_gpus()
            try:
                busy = telemetry.busy_gpus(used)
            except telemetry.NvmlUnavailable as exc:
                raise PreflightFailed(FailureKind.PREFLIGHT, f"cannot check that the GPUs are idle: {exc}") from None
            if busy:
                listed = ", ".join(f"pid {p.pid} on GPU {p.gpu_index}" for p in busy)
                raise PreflightFailed(FailureKind.PREFLIGHT, f"GPUs are not idle: {listed}; stop those processes or wait")
            checked.append(f"GPU(s) {', '.join(str(g) for g in used)} idle (NVML)")
        elif host.gpu_count:
            checked.append("GPUs not checked: a simulated engine uses none")
        else:
            checked.append("no GPU to check on a CPU host")
        in_flight = self.most_in_flight()
        too_many = loadgen.open_files_problem(in_flight)
        if too_many:
            raise PreflightFailed(FailureKind.PREFLIGHT, f"{too_many}: raise the worker's limit (ulimit -n, systemd "
                                                         f"LimitNOFILE=) or lower the concurrency")
        checked.append(f"open files: up to {in_flight:,} requests in flight fit this worker's limit")
        checked.append(f"port not checked: picked at launch, and a launch that finds it taken is retried on a "
                       f"new one ({PORT_ATTEMPTS} launches at most)")
        checked.append(self.check_log_dir())
        return checked

    def most_in_flight(self):
        """The most requests this run's client holds at once: its points' concurrency (an
        open loop's cap), or its capacity search's highest concurrency or cap."""
        most = self.run.points.aggregate(most=Max("concurrency"))["most"] or 1
        if self.spec.get("search"):
            found = capacity.parse_search(self.spec["search"])
            cap = found.high if found.metric == capacity.CONCURRENCY else (
                self.spec.get("max_concurrency") or OPEN_LOOP_MAX_CONCURRENCY)
            most = max(most, int(cap))
        return most

    def log_dir(self):
        return Path(settings.SERVER_LOG_DIR) / f"sweep-{self.run.sweep_id}"

    def check_log_dir(self):
        """The server log's folder exists (made here) with room for the log, in words."""
        try:
            return check_log_dir(self.log_dir(), settings.SWEEPLAB_LOG_MIN_FREE_MIB * MIB)
        except LogUnwritable as exc:
            raise PreflightFailed(exc.kind, exc.reason) from None

    # launch and readiness ----------------------------------------------------------------

    def start_server(self):
        """Launch the server and wait until it is ready. A free port can be taken by
        another process between our pick and the server's bind: a launch whose log says
        so is torn down and retried on a new port, PORT_ATTEMPTS launches in all."""
        for launch in range(1, PORT_ATTEMPTS + 1):
            self.launch()
            try:
                self.wait_ready()
                return
            except ServerDied:
                taken = port_in_use(self.server.process.tail())
                if taken is None or launch == PORT_ATTEMPTS:
                    raise
                port = self.server.port
                self.store.event(RunEventKind.RETRY, f"port {port} was taken before the server could bind it "
                                                     f"({taken}); launching again on a new port")
                self.teardown()

    def launch(self):
        run, sweep = self.run, self.run.sweep
        port = free_port()
        values = LaunchValues(
            python=engine_python(sweep.engine) or sys.executable,
            model_path=sweep.llm.path,
            model_name=sweep.llm.name,
            host="127.0.0.1",
            port=port,
            tp=run.tp,
            context_length=sweep.llm.context_length,
            method=run.method,
            params=run.params,
            draft_model_path=sweep.llm.draft_model_path,
        )
        try:
            argv = self.adapter.argv(sweep.engine.argv_template, sweep.engine.method_args, values)
        except ArgvError as exc:
            raise LaunchRefused(f"engine {sweep.engine.name} cannot launch this configuration: {exc}") from None
        log_path = self.log_dir() / f"run-{run.pk}-{run.config_label.replace(' ', '_')}.log"
        env = {**os.environ, **(sweep.engine.env or {})}
        used = self.run_gpus()
        if used:  # a simulated engine is told too: simengine pretends to have exactly these
            env["CUDA_VISIBLE_DEVICES"] = gpus.visible_devices(used)
        process = ServerProcess(argv, log_path, env=env, cwd=settings.BASE_DIR).start()
        # NVML (telemetry, idle checks) looks at real GPUs only.
        watched = used if sweep.engine.kind != "simulated" else []
        self.server = Server(process, f"http://127.0.0.1:{port}", port, watched)
        self.store.set_run(argv=argv, port=port, pid=process.pid, log_path=str(log_path))
        visible = f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} " if used else ""
        self.store.event(RunEventKind.LAUNCHED, visible + " ".join(argv), pid=process.pid, port=port,
                         cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES") if used else None)

    def wait_ready(self):
        adapter, server = self.adapter, self.server
        timeout = self.run.sweep.engine.readiness_timeout_s
        try:
            server.process.wait_ready(
                lambda: adapter.is_ready(server.base_url, server.process.tail()), timeout, between=self.check_boundary
            )
        except ServerExited as exc:
            raise ServerDied(str(exc)) from None
        except NotReady as exc:
            raise StartupTimeout(f"not ready within the engine's readiness timeout of {timeout}s (last: {exc.detail})") from None
        self.store.event(RunEventKind.READY, f"ready at {server.base_url}")

    def read_server_facts(self):
        adapter, base = self.adapter, self.server.base_url
        launch_log = self.server.process.tail()
        self.store.set_server_facts(
            adapter.limits(base, self.run.argv, launch_log), adapter.version(base), adapter.server_info(base, launch_log)
        )

    # telemetry ---------------------------------------------------------------------------

    def start_telemetry(self):
        if not self.server.gpus:
            why = "a simulated engine has no GPU to sample" if self.run.sweep.engine.kind == "simulated" else "a CPU host has no GPU"
            self.store.event(RunEventKind.TELEMETRY_UNAVAILABLE, why)
            return
        try:
            with telemetry.Nvml():
                pass
        except telemetry.NvmlUnavailable as exc:
            self.store.event(RunEventKind.TELEMETRY_UNAVAILABLE, str(exc))
            return
        self.sampler = telemetry.Sampler(self.server.gpus, self.store.save_telemetry)
        self.sampler.start()

    # points ------------------------------------------------------------------------------

    def apply_context_cap(self, points):
        """Skip, before anything is sent, the points the running server cannot hold."""
        margin = int(self.options.get("context_margin_tokens", 16))
        kept, skipped = [], []
        for point in points:
            if point.prompt_tokens is None:
                kept.append(point)
                continue
            fit = prompts.check_point(
                prompt_tokens=point.prompt_tokens,
                max_new_tokens=point.max_new_tokens,
                concurrency=in_flight(point),
                context_length=self.run.context_length or self.run.sweep.llm.context_length,
                kv_capacity_tokens=self.run.kv_capacity_tokens,
                margin=margin,
            )
            reason = "" if fit.fits else fit.reason
            if reason:
                self.store.skip_point(point, f"context cap: {reason}")
                skipped.append(point_label(point))
            else:
                kept.append(point)
        if skipped:
            self.store.event(RunEventKind.CONTEXT_CAPPED, f"skipped by the server's context/KV cap: {', '.join(skipped)}")
        return kept

    def prompts_for(self, point, count):
        """`count` prompts for a point and their length, sized by the server's own
        tokenizer. Distinct long-context prompts, so no prefix cache serves a repeat."""
        tokenizer = prompts.ServerTokenizer(self.server.base_url, model=self.run.sweep.llm.name,
                                            timeout=min(TOKENIZE_TIMEOUT_S, self.stall_timeout()))
        workload = point.workload
        if workload.kind == WorkloadKind.FIXED:
            return [workload.prompt] * count, tokenizer.count(workload.prompt)
        if workload.kind == WorkloadKind.SYNTHETIC:
            tokenizer_key = (self.run.sweep.engine_id, self.run.sweep.llm_id)
            built = [prompts.long_context_prompt(point.prompt_tokens, tokenizer.count, seed=i, remember=tokenizer_key)
                     for i in range(count)]
            inexact = [b.tokens for b in built if not b.exact]
            if inexact:
                raise ValueError(f"could not build a prompt of exactly {point.prompt_tokens} tokens (got {inexact[0]})")
            return [b.text for b in built], built[0].tokens
        margin = int(self.options.get("context_margin_tokens", 16))
        limit = prompts.max_prompt_tokens(
            self.run.context_length or self.run.sweep.llm.context_length, self.run.kv_capacity_tokens,
            in_flight(point), point.max_new_tokens, margin,
        )
        # An imported workload's path is the uploaded file's word: read only inside this host's data roots.
        roots = self.run.host.data_roots if workload.imported else None
        chosen = prompts.load_sharegpt(workload.dataset_path, tokenizer.count, num_prompts=count,
                                       max_prompt_tokens=limit, roots=roots)
        if not chosen:
            raise ValueError(f"{workload.dataset_path}: no conversation fits in {limit} prompt tokens")
        return [c.text for c in chosen], round(sum(c.prompt_tokens for c in chosen) / len(chosen))

    def load_config(self, prompt_texts, max_tokens, concurrency, num_requests, request_rate=None, duration=None):
        """A load as the server sees it: `request_rate` and `duration` in wall time."""
        adapter = self.adapter
        return loadgen.LoadConfig(
            base_url=self.server.base_url,
            api=adapter.api,
            model=self.run.sweep.llm.name,
            prompts=prompt_texts,
            max_tokens=max_tokens,
            concurrency=concurrency,
            num_requests=None if duration else num_requests,
            duration=duration,
            request_rate=request_rate,
            burstiness=float(self.spec.get("burstiness", 1.0)),
            timeout_first_token=float(self.options.get("first_token_timeout_s", 600)),
            timeout_stall=self.stall_timeout(),
            extra_body=adapter.extra_body(max_tokens, self.run.server_info),
            # A request with no first token for the stall timeout: is the server hung? (a
            # worker thread asks; nothing here writes to the database)
            health_check=lambda: self.wait_healthy(hang_probe_s()),
        )

    def stall_timeout(self):
        """Seconds without a token after which a request has stalled (options.stall_timeout_s)."""
        return float(self.options.get("stall_timeout_s", 60))

    def probe(self):
        """Between points: the process is alive and /health answers."""
        process = self.server.process
        if not process.alive():
            raise ServerDied(f"the server process exited with status {process.returncode}")
        ok, detail = self.adapter.healthy(self.server.base_url)
        if not ok:
            self.store.event(RunEventKind.PROBE_FAILED, detail)
            time.sleep(0.5)  # a dying process: let it finish exiting so its log is complete
            alive = process.alive()
            raise ServerDied(f"health probe failed: {detail}", kind=FailureKind.HUNG if alive else None)

    def warmup(self, points):
        count = int(self.spec.get("warmup_requests", 0))
        if not count or not points:
            return
        self.probe()
        try:
            texts, _ = self.prompts_for(points[0], 1)
        except (OSError, ValueError, prompts.TokenizerError) as exc:
            self.raise_if_gone(f"while sizing the warmup prompt: {exc}", where="warmup")
            raise
        config = self.load_config(texts, min(WARMUP_MAX_TOKENS, points[0].max_new_tokens), 1, count)
        result = loadgen.run_load_sync(config)
        lost = [r for r in result.results if r.error_kind in CONNECTION_ERRORS]
        if lost or not self.server.process.alive():
            raise ServerDied(f"during warmup: {lost[0].error if lost else 'the server process exited'}", where="warmup")
        if result.stopped_by is not None:
            self.raise_if_gone(f"during warmup: {result.stopped_by.error}", where="warmup", found=result.unhealthy)
        failed = [r for r in result.results if r.error_kind]
        note = f"; {len(failed)} of {count} warmup requests failed: {failed[0].error}" if failed else ""
        self.store.event(RunEventKind.WARMUP_DONE, f"{count} warmup request(s), not measured{note}")

    def request_plan(self):
        """(requests per load, repeats, until_stable or None) from the spec."""
        until = self.spec.get("until_stable")
        repeats = max(1, int(self.spec.get("repeats", 1)))
        count = int(until["max_requests"]) if until else int(self.spec.get("requests_per_point", 1))
        return count, repeats, until

    # the capacity search -----------------------------------------------------------------

    def search_template(self):
        """An unsaved point of the search's workload and length, for the warmup's prompt."""
        return self.store.point_template(*search_shape(self.spec))

    def search_capacity(self, template):
        """Probe loads picked by sweepcore.capacity on this one server, each a stored point,
        until the search is over; store the run's capacity. A resumed run goes on from
        the probes it stored."""
        found = capacity.parse_search(self.spec["search"])
        probes = [probe_of(p) for p in self.store.search_points() if p.status != PointStatus.PLANNED]
        cooldown = float(self.options.get("cooldown_s", 2))
        scale = metrics.simulated_time_scale(self.run.server_info)
        try:
            while (load := capacity.next_load(found, probes)) is not None:
                self.check_boundary()
                point = self.store.probe_point(template, found.metric, load, self.spec)
                if probes:  # between probes: let the server drain, and start from a cold cache
                    time.sleep(cooldown * (scale or 1))
                    note = self.adapter.reset_cache(self.server.base_url)
                    if note:
                        self.store.event(RunEventKind.CACHE_RESET, note, point=point.pk)
                if not self.apply_context_cap([point]):
                    self.store.reload(point)
                    probes.append(capacity.Probe(load=load, meets_slo=False, goodput=None, output_throughput=None))
                    continue
                self.measure_probe(point)
                probes.append(probe_of(point))
        except ServerDied:
            if not any(p.load == load and p.server_failed for p in probes):
                probes.append(capacity.Probe(load=load, meets_slo=False, goodput=None, output_throughput=None,
                                             server_failed=True))
            self.store_capacity(found, probes)
            raise
        self.store_capacity(found, probes)

    def measure_probe(self, point):
        """Measure a probe; one the verdicts call invalid (the client or the machine could
        not keep up) is measured again, up to INVALID_PROBE_ATTEMPTS in all: an untrusted
        number must not set the capacity, and one that stays untrusted counts as a miss."""
        for attempt in range(1, INVALID_PROBE_ATTEMPTS + 1):
            self.measure(point)
            self.store.reload(point)
            if point.status != PointStatus.OK or point.validity != INVALID or attempt == INVALID_PROBE_ATTEMPTS:
                return
            why = "; ".join(r["message"] for r in point.validity_reasons)[:300]
            self.store.event(RunEventKind.RETRY, f"{point_label(point)}: an invalid measurement ({why}); "
                                                 f"measuring it again", point=point.pk)

    def store_capacity(self, found, probes):
        """The run's capacity (Run.capacity) and a timeline event saying it in words."""
        answer = capacity.conclude(found, probes)
        best = self.store.search_point_at(found.metric, answer.load) if answer.load is not None else None
        untrusted = self.store.invalid_probe_loads(found.metric)
        message = answer.message
        if untrusted:
            message += (f"; the measurement at {', '.join(f'{load:g}' for load in untrusted)} stayed invalid after "
                        f"{INVALID_PROBE_ATTEMPTS} attempts and counts as a miss")
        tp = max(1, self.run.tp)
        output = best.output_throughput if best is not None else None
        tpot = best.median_tpot_ms if best is not None else None
        self.store.set_run(capacity={
            "metric": found.metric,
            "load": answer.load,
            "goodput": best.goodput if best is not None else None,
            "output_tok_s": output,
            "tok_s_per_gpu": output / tp if output is not None else None,
            "tok_s_per_user": 1000.0 / tpot if tpot else None,
            "stopped_because": str(answer.stopped_because),
            "message": message,
            "probes": len(probes),
            "invalid_probes": untrusted,
            "point": best.pk if best is not None else None,
            "slo": dict(self.spec.get("slo") or {}),
        })
        self.store.event(RunEventKind.CAPACITY, message, stopped_because=str(answer.stopped_because))

    def measure(self, point):
        self.probe()
        self.server.process.check_log()
        self.store.event(RunEventKind.POINT_STARTED, point_label(point), point=point.pk)
        started = timezone.now()
        count, repeats, until = self.request_plan()
        try:
            texts, prompt_tokens = self.prompts_for(point, count * repeats)
        except (OSError, ValueError, prompts.TokenizerError) as exc:
            self.raise_if_gone(f"while sizing prompts: {exc}", point)
            unmeasured = PointVerdict(INVALID, (Reason("no_requests", f"no request was sent: could not build the "
                                                                     f"prompt: {str(exc)[:200]}", INVALID),))
            self.store.store_point(point, PointStatus.FAILED, f"could not build the prompt: {exc}", started, None, None,
                                   evidence=self.evidence(unmeasured, {}, None, "", {}))
            return
        adapter, process = self.adapter, self.server.process
        scale = metrics.simulated_time_scale(self.run.server_info)
        # The spec's rates and durations are in the model's time; a simulator runs at `scale`.
        rate = point.request_rate / scale if scale and point.request_rate else point.request_rate
        duration = self.spec.get("duration_s")
        duration = duration * scale if scale and duration else duration
        before = self.server_snapshot()
        sampler = servermetrics.GaugeSampler(self.server.base_url, adapter.server_metrics).start() if before else None
        log_start = process.log_size()
        loads, stops, text_of, sent, stalled = [], [], {}, 0, None
        steady = self.spec.get("steady_state")
        thresholds = Thresholds.from_mapping(settings.SWEEPLAB_VALIDITY)
        host_before = hostload.snapshot()
        try:
            for repeat in range(repeats):
                chunk = texts[repeat * count:(repeat + 1) * count] or texts
                config = self.load_config(chunk, point.max_new_tokens, point.concurrency, count, rate, duration)
                if until:
                    config.keep_going = keep_going_until_stable(until, thresholds.min_duration_s)
                load = loadgen.run_load_sync(config)
                if steady:  # the spec allows it with one load per point only
                    metrics.mark_ramp(load.results, steady.get("skip_first", 0), steady.get("skip_last", 0))
                for r in load.results:  # the indices of the point's requests continue across repeats
                    text_of[sent + r.index] = chunk[r.index % len(chunk)]
                    r.index += sent
                sent += len(load.results)  # every index handed out gives one result
                loads.append(load)
                stops.append(stability_note(until, load.results, thresholds.min_duration_s)[1] if until else "")
                stalled = load.stopped_by
                if stalled is not None or (repeat + 1 < repeats and not process.alive()):
                    break
        finally:
            # Never left polling: a worker process outlives its runs.
            gauges = sampler.stop() if sampler is not None else None
        host_after = hostload.snapshot()
        result = pooled_result(loads)
        hang = self.hang_after_stall(stalled, point, loads[-1].unhealthy) if stalled is not None else ""
        point_log = process.log_since(log_start)
        adapter.relabel_failures(result.results, point_log)
        alive = process.alive()
        status, reason = point_status(result.results, alive)
        if stalled is not None and status != PointStatus.CRASHED:
            reason = f"{reason}; {stall_note(stalled, result.results, hang)}"
        view = self.server_view(before, gauges) if alive and not hang else None
        summary = result.summary()
        # None without a view, so a point measured again keeps no earlier medians; wall time,
        # converted to model time with the rest of the summary.
        summary.update(servermetrics.median_fields(view or {}))
        if status == PointStatus.OK:
            if adapter.speculation_from_server_metrics:
                # Answers without per-request speculation counts (vLLM): this point's
                # counter deltas. Otherwise sweepcore.metrics computed it from the answers.
                summary["accept_length"] = ((view or {}).get("spec") or {}).get("accept_length")
            summary.update(adapter.server_reported(point_log, self.run.method))
            notes = [self.token_count_note(point, prompt_tokens, result)]
            if not adapter.streams_usage:
                notes += self.check_token_counts(adapter, point, text_of, prompt_tokens, result, summary)
            reason = "; ".join(note for note in notes if note)
        host = self.host_load(host_before, host_after)
        extra_body = adapter.extra_body(point.max_new_tokens, self.run.server_info)
        verdict = judge(
            result.results, summary,
            thresholds=thresholds,
            client_cpu_share=result.client_cpu_fraction,
            host=host,
            asked_output_tokens=point.max_new_tokens if forces_length(extra_body) else None,
            asked_prompt_tokens=point.prompt_tokens,
            server_prompt_tokens=[r.prompt_tokens for r in result.results if r.prompt_tokens is not None],
        )
        if repeats > 1:
            summary["repeats"] = [repeat_figures(load, scale) for load in loads]
        against = self.spec.get("slo")
        if against:
            measured = [r for r in result.results if not metrics.in_ramp(r)]
            seconds = metrics.measured_seconds(result.results) or result.duration
            outcome = slo.evaluate(measured, seconds, against, time_scale=scale)
        else:
            outcome = None
        stored = metrics.to_model_time(summary, scale) if scale else summary
        stop_reason = self.stop_reason(count, repeats, until, stops)
        if summary.get("ramp"):
            ramp = summary["ramp"]
            stop_reason += (f"; steady state: the first {ramp['first']} and last {ramp['last']} requests were sent "
                            f"under the load but left out of the statistics (the ramp)")
        # The runs that shared the host meanwhile (a packed sweep): their servers' CPU use is
        # in `host` like any other process's, and the point names them.
        co_runs = self.store.co_runs(started, timezone.now()) if self.leased else []
        evidence = self.evidence(verdict, stored.get("intervals") or {}, scale, stop_reason, host, co_runs)
        if view is not None and scale:
            view = servermetrics.to_model_time(view, scale)
        self.store.store_point(point, status, reason, started, result, stored, prompt_tokens, evidence=evidence,
                               server_metrics=view, slo_outcome=outcome)
        self.store.event(RunEventKind.POINT_FINISHED, f"{point_label(point)}: {status}, {verdict.validity}",
                         point=point.pk, status=status, validity=verdict.validity)
        if status == PointStatus.CRASHED:
            # Its requests are stored as evidence; the reason gets the cause from the log.
            raise ServerDied(reason, point=point)
        if hang:
            raise ServerDied(stall_note(stalled, result.results, hang), point=point, kind=FailureKind.HUNG,
                             point_status=PointStatus.TIMEOUT)
        process.check_log()

    def hang_after_stall(self, stalled, point, found=""):
        """A request of the point met a silence limit and the load stopped: probe the
        server (unless the load's health check `found` it silent already). '' when it
        answers (it recovered, or was only slow: the point keeps its timed-out requests and
        the run goes on) or has exited (its point is crashed), else why it counts as hung."""
        self.store.event(RunEventKind.STALLED, f"{point_label(point)}: request {stalled.index} timed out "
                                               f"({stalled.error}); probing the server", point=point.pk)
        hang = self.hung(point, found)
        if not hang and self.server.process.alive():
            self.store.event(RunEventKind.STALLED, f"{point_label(point)}: the server answered its health probe "
                                                   f"again; going on", point=point.pk)
        return hang

    def raise_if_gone(self, doing, point=None, where=None, found=""):
        """After a call to the server failed (e.g. `doing`: sizing prompts): raise ServerDied
        when its process exited (crashed) or it does not answer its health probe (hung: the
        point `timeout`); return when it is up, the failure being the call's own."""
        if self.server.process.wait_exit(2.0):  # a refused call: it may be dying
            raise ServerDied(doing, point, where=where)
        hang = self.hung(point, found)
        if hang:
            raise ServerDied(f"{doing}; the server did not answer its health probe: {hang}", point,
                             kind=FailureKind.HUNG, where=where, point_status=PointStatus.TIMEOUT)
        if not self.server.process.alive():
            raise ServerDied(doing, point, where=where)

    def hung(self, point=None, found=""):
        """Why the server counts as hung -- alive, and no answer to its health probe for
        hang_probe_s() -- or '' (it answered, or it exited: then it is not hung but dead).
        `found`: what a probe just found (the load's health check), so as not to ask twice."""
        ok, detail = (False, found) if found else self.wait_healthy(hang_probe_s())
        if ok or not self.server.process.alive():
            return ""
        self.store.event(RunEventKind.PROBE_FAILED, detail, point=point.pk if point is not None else None)
        return f"{detail} (probed for {hang_probe_s():g} s)"

    def wait_healthy(self, seconds):
        """(ok, detail): probe the server's health until it answers or `seconds` pass."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            ok, detail = self.adapter.healthy(self.server.base_url,
                                              timeout=round(max(0.5, min(PROBE_TIMEOUT_S, left)), 1))
            if ok or deadline - time.monotonic() < 1.0 or not self.server.process.alive():
                return ok, detail
            time.sleep(0.5)

    def server_snapshot(self):
        """A read of the server's /metrics (sweepcore.servermetrics), or None when the
        engine has none or it cannot be read; the first failure of a run is a RunEvent."""
        names = self.adapter.server_metrics
        if names is None:
            return None
        try:
            return servermetrics.scrape(self.server.base_url)
        except servermetrics.ScrapeError as exc:
            if not self.metrics_unreadable:
                self.metrics_unreadable = True
                hint = " (SGLang serves it with --enable-metrics)" if self.adapter.kind in ("sglang", "simulated") else ""
                self.store.event(RunEventKind.TELEMETRY_UNAVAILABLE,
                                 f"the server's /metrics could not be read{hint}: {exc}; its points keep no server view")
            return None

    def server_view(self, before, gauges):
        """The server's own view of the point just measured: its /metrics read again and
        compared with `before` (sweepcore.servermetrics.point_view); None without both reads."""
        if before is None:
            return None
        after = self.server_snapshot()
        if after is None:
            return None
        return servermetrics.point_view(before, after, self.adapter.server_metrics, gauges)

    @staticmethod
    def evidence(verdict, intervals, scale, stop_reason, host, co_runs=()):
        """The point's evidence fields, as RunStore.store_point takes them."""
        return {
            "validity": verdict.validity,
            "validity_reasons": verdict.reasons_json(),
            "intervals": intervals,
            "simulated_time_scale": scale,
            "stop_reason": stop_reason[:300],
            "host_load": host,
            "co_runs": list(co_runs),
        }

    @staticmethod
    def stop_reason(count, repeats, until, stops):
        """Why the point stopped sending, in words."""
        if not until:
            return f"requests_per_point: {count}" if repeats == 1 else f"{repeats} repeats of {count} requests"
        if repeats == 1:
            return stops[0]
        return f"{len(stops)} repeats, each until stable: " + "; ".join(stops)

    def host_load(self, before, after):
        """What else ran beside the measurement (sweepcore.hostload): processes other than
        this worker and the server's process group; on a GPU host, foreign processes on
        the run's GPUs, or why they could not be looked at."""
        own_pids, own_pgids = {os.getpid()}, {self.server.process.pid}
        gpu_foreign, gpu_check = None, None
        if self.server.gpus:
            try:
                with telemetry.Nvml() as nvml:
                    gpu_foreign = hostload.gpu_foreign(nvml, self.server.gpus, own_pgids=own_pgids, own_pids=own_pids)
            except telemetry.NvmlUnavailable as exc:
                gpu_check = f"the run's GPUs were not checked for other processes: {exc}"
        load = hostload.host_load(before, after, own_pids=own_pids, own_pgids=own_pgids,
                                  gpu_foreign=gpu_foreign).as_dict()
        if gpu_check:
            load["gpu_check"] = gpu_check
        return load

    def check_token_counts(self, adapter, point, text_of, prompt_tokens, result, summary):
        """The stream carried no token counts, so they were counted from its chunks:
        repeat the last measured request without streaming (the same body, so the same
        answer) and compare with the server's own usage, output and prompt. Returns
        notes for the point where they differ."""
        last = result.results[-1]
        try:
            server_prompt, server_output = adapter.check_counts(
                self.server.base_url, self.run.sweep.llm.name, text_of[last.index], point.max_new_tokens,
                adapter.extra_body(point.max_new_tokens, self.run.server_info),
            )
        except (OSError, ValueError) as exc:  # requests' errors are OSErrors
            summary["token_count_check"] = {"error": str(exc)[:300]}
            return [f"the token count check request failed: {str(exc)[:200]}"]
        summary["token_count_check"] = {
            "request_index": last.index, "stream_chunk_tokens": last.output_tokens,
            "server_completion_tokens": server_output, "server_prompt_tokens": server_prompt,
        }
        notes = []
        if server_output != last.output_tokens:
            notes.append(f"output tokens counted from the stream's chunks ({last.output_tokens}) differ from the "
                         f"server's count for the same request ({server_output})")
        # A dataset point's prompts differ in length; the others are all of one length.
        if point.workload.kind != WorkloadKind.DATASET and server_prompt != prompt_tokens:
            notes.append(f"the server counted {server_prompt} prompt tokens where its tokenizer gave {prompt_tokens}")
        return notes

    def token_count_note(self, point, counted, result):
        """Say so when the server counted a different prompt length than we built."""
        reported = {r.prompt_tokens for r in result.results if r.prompt_tokens is not None}
        if point.prompt_tokens is not None and counted != point.prompt_tokens:
            return f"prompt built to {counted} tokens, not the {point.prompt_tokens} asked for"
        if reported and reported != {counted}:
            return f"the tokenizer counted {counted} prompt tokens, the generation endpoint reported {sorted(reported)}"
        return ""

    # failures ----------------------------------------------------------------------------

    def failure_from_log(self, died):
        process = self.server.process
        if not died.kind:  # a hang is alive: no exit to wait for
            process.wait_exit(3)  # give a dying process a moment to exit and flush its last lines
        failure = failures.classify(process.tail(), process.returncode, extra_rules=self.adapter.log_rules)
        if died.kind and failure.kind == failures.FailureKind.UNKNOWN:
            return failures.Failure(died.kind, f"{died.detail}; the process is alive but not answering", failure.lines)
        return failure

    # teardown ----------------------------------------------------------------------------

    def teardown(self):
        """Stop the telemetry and the server (its process group), then say how: the server
        goes whatever the database does (`note`)."""
        if self.sampler is not None:
            self.sampler.stop()
            if self.sampler.error:
                self.note(RunEventKind.TELEMETRY_UNAVAILABLE, f"telemetry stopped: {self.sampler.error}")
            self.sampler = None
        server, self.server = self.server, None
        if server is None:
            return
        how = server.process.stop()
        self.note(RunEventKind.TEARDOWN, f"server {how} (exit status {server.process.returncode})")
        left = server.process.leftovers()
        if left:
            listed = ", ".join(f"pid {pid} ({name})" for pid, name in left)
            self.note(RunEventKind.TEARDOWN, f"processes of the server's group still alive after SIGKILL: {listed}")
        if server.gpus:
            try:
                left = telemetry.wait_released(server.gpus, GPU_RELEASE_TIMEOUT_S)
            except telemetry.NvmlUnavailable as exc:
                left = None
                self.note(RunEventKind.GPU_LEAK, f"could not check that the GPUs were released: {exc}")
            if left:
                listed = ", ".join(f"pid {p.pid} on GPU {p.gpu_index}" for p in left)
                self.note(RunEventKind.GPU_LEAK, f"GPU memory still held {GPU_RELEASE_TIMEOUT_S}s after teardown: {listed}")
