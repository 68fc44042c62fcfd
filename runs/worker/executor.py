"""Drives one Run from claim to teardown, so that no crash is ever recorded as a slow
result and one dead configuration never stops the sweep.

    claim -> preflight -> launch -> ready -> context cap -> warmup -> points -> teardown

Every step writes a RunEvent. The server runs in its own process group (argv list, never
a shell) with its log in a file; when it dies, the cause is read from the log tail, the
point in flight becomes ``crashed`` and the rest ``not_run``; a deterministic signature
quarantines the configuration (KnownFailure). Points already stored are never measured
again: a resumed run continues with the points it has not stored.
"""

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from benchmarks.models import FailureKind, KnownFailure, SweepStatus, WorkloadKind
from runs.models import Point, PointStatus, RequestRecord, Run, RunEvent, RunEventKind, RunStatus, TelemetrySample
from sweepcore import failures, loadgen, metrics, prompts, telemetry
from sweepcore.engines import ArgvError, LaunchValues, get_adapter

log = logging.getLogger(__name__)

HEARTBEAT_S = 5
TERM_GRACE_S = 10
WARMUP_MAX_TOKENS = 16
LOG_TAIL_BYTES = 256 * 1024
LAUNCH_MARK = "=== sweeplab: launching"
READY_POLL_S = 0.5
GPU_RELEASE_TIMEOUT_S = 60

FINISHED_RUN = (RunStatus.DONE, RunStatus.CRASHED, RunStatus.FAILED, RunStatus.SKIPPED)
CONNECTION_ERRORS = {"connection_refused", "connection_lost_mid_stream"}
TIMEOUT_ERRORS = {"timeout_first_token", "timeout_stall", "timeout_total"}


def stale_after():
    """A claim whose heartbeat is older than this may be taken over (the worker died)."""
    return timedelta(seconds=int(os.environ.get("SWEEPLAB_STALE_CLAIM_S", 60)))


# --- pure decisions -------------------------------------------------------------------


def point_status(results, server_alive):
    """(status, reason) of a measured point from its request results.

    A point is ``ok`` only when every request succeeded with output tokens. A server
    that died during it makes it ``crashed`` (the caller handles the rest of the run)."""
    errors = [r for r in results if r.error_kind]
    lost = [r for r in errors if r.error_kind in CONNECTION_ERRORS]
    if not server_alive or lost:
        example = lost[0].error if lost else "the server process exited"
        return PointStatus.CRASHED, f"the server died during this point: {example}"
    overflow = [r for r in errors if r.error_kind == "context_overflow"]
    if overflow:
        return PointStatus.CONTEXT_OVERFLOW, f"the server refused the length: {overflow[0].error}"
    timeouts = [r for r in errors if r.error_kind in TIMEOUT_ERRORS]
    if timeouts:
        return PointStatus.TIMEOUT, f"{len(timeouts)} of {len(results)} requests timed out: {timeouts[0].error}"
    if errors:
        kinds = sorted({r.error_kind for r in errors})
        return PointStatus.FAILED, f"{len(errors)} of {len(results)} requests failed ({', '.join(kinds)}): {errors[0].error}"
    if not results or not sum(r.output_tokens for r in results):
        return PointStatus.FAILED, "no output tokens"
    return PointStatus.OK, ""


def is_local_path(path):
    return path.startswith(("/", "./", "../", "~"))


def point_label(point):
    length = f" {point.prompt_tokens} tokens" if point.prompt_tokens is not None else ""
    return f"{point.workload.name}{length} x{point.concurrency}"


class ServerDied(Exception):
    """The server is gone or no longer answers; `point` is the one in flight, if any."""

    def __init__(self, detail, point=None, kind=None, where=None):
        super().__init__(detail)
        self.detail = detail
        self.point = point
        self.kind = kind  # set when the cause is known without the log (a hang)
        self.where = where or (point_label(point) if point is not None else "the previous point")


class Cancelled(Exception):
    pass


class ClaimLost(Exception):
    pass


@dataclass
class Server:
    proc: subprocess.Popen
    base_url: str
    log_path: Path
    gpus: list


# --- the executor ---------------------------------------------------------------------


def execute_run(run_id, worker_id=None):
    """Claim and drive one run. Returns its final status, or None if it was not ours."""
    worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
    executor = RunExecutor(run_id, worker_id)
    if not executor.claim():
        return None
    return executor.execute()


def seconds_until_stale(run_id):
    """For a run claimed by a worker that may have died: how long until its heartbeat is
    stale enough to take over. None when there is nothing to wait for."""
    run = Run.objects.filter(pk=run_id, status__in=[RunStatus.STARTING, RunStatus.RUNNING]).first()
    if run is None or run.heartbeat_at is None:
        return None
    left = (run.heartbeat_at + stale_after() - timezone.now()).total_seconds()
    return max(1.0, left + 1.0)


class RunExecutor:
    def __init__(self, run_id, worker_id):
        self.run_id = run_id
        self.worker_id = worker_id
        self.run = None
        self.server = None
        self.heartbeat = None
        self.sampler = None

    # claim and heartbeat -------------------------------------------------------------

    def claim(self):
        now = timezone.now()
        updated = (
            Run.objects.filter(pk=self.run_id)
            .filter(
                Q(status=RunStatus.QUEUED)
                | Q(status__in=[RunStatus.STARTING, RunStatus.RUNNING], heartbeat_at__lt=now - stale_after())
            )
            .exclude(sweep__status=SweepStatus.CANCELLED)
            .update(status=RunStatus.STARTING, claimed_by=self.worker_id, claimed_at=now, heartbeat_at=now)
        )
        if updated != 1:
            log.info("run %s is not ours to take (finished, cancelled or claimed by a live worker)", self.run_id)
            return False
        self.run = Run.objects.select_related("sweep__host", "sweep__engine", "sweep__llm").get(pk=self.run_id)
        previous = self.run.pid
        self.event(RunEventKind.CLAIMED, f"claimed by {self.worker_id}")
        if previous:
            self.kill_leftover_server(previous)
        return True

    def kill_leftover_server(self, pid):
        """A takeover: the previous worker died, its server may live on. Kill it only if
        it is the process we launched (same command line)."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return
        if self.run.argv and [a.decode() for a in cmdline if a][: len(self.run.argv)] == self.run.argv:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            self.event(RunEventKind.RESUMED, f"killed the server (pid {pid}) left by the previous worker")

    def start_heartbeat(self):
        stop = threading.Event()
        lost = threading.Event()

        def beat():
            try:
                while not stop.wait(HEARTBEAT_S):
                    updated = Run.objects.filter(pk=self.run_id, claimed_by=self.worker_id).update(
                        heartbeat_at=timezone.now()
                    )
                    if updated != 1:
                        lost.set()
                        return
            finally:
                connection.close()

        thread = threading.Thread(target=beat, name=f"heartbeat-run-{self.run_id}", daemon=True)
        thread.start()
        self.heartbeat = (thread, stop, lost)

    def stop_heartbeat(self):
        if self.heartbeat:
            thread, stop, _ = self.heartbeat
            stop.set()
            thread.join(timeout=HEARTBEAT_S + 5)

    def check_boundary(self):
        """Between points: still ours, and the sweep not cancelled."""
        if self.heartbeat and self.heartbeat[2].is_set():
            raise ClaimLost()
        self.run.sweep.refresh_from_db(fields=["status"])
        if self.run.sweep.status == SweepStatus.CANCELLED:
            raise Cancelled()
        Run.objects.filter(pk=self.run_id).update(heartbeat_at=timezone.now())

    # events and state ----------------------------------------------------------------

    def event(self, kind, message="", **data):
        RunEvent.objects.create(run_id=self.run_id, at=timezone.now(), kind=kind, message=message, data=data)

    def set_run(self, **fields):
        for key, value in fields.items():
            setattr(self.run, key, value)
        self.run.save(update_fields=list(fields))

    @property
    def spec(self):
        return self.run.sweep.spec

    @property
    def options(self):
        return self.spec.get("options", {})

    # the run ---------------------------------------------------------------------------

    def execute(self):
        from runs.lifecycle import refresh_sweep_status

        run = self.run
        sweep = run.sweep
        if sweep.status == SweepStatus.QUEUED:
            type(sweep).objects.filter(pk=sweep.pk, status=SweepStatus.QUEUED).update(status=SweepStatus.RUNNING)
        self.start_heartbeat()
        attempts = 1 + int(self.options.get("retries", 0))
        try:
            if run.started_at is None:
                self.set_run(started_at=timezone.now())
            problem = self.preflight()
            if problem:
                kind, reason = problem
                self.event(RunEventKind.PREFLIGHT_FAILED, reason)
                self.finish_unstarted(RunStatus.FAILED, kind, reason, f"preflight failed: {reason}")
                return run.status
            self.event(RunEventKind.PREFLIGHT_OK, "model, GPUs and port checked")
            for attempt in range(1, attempts + 1):
                outcome = self.attempt(attempt, attempts)
                if outcome != "retry":
                    break
            return self.run.status
        except Cancelled:
            self.event(RunEventKind.CANCELLED, "the sweep was cancelled; stopped at a point boundary")
            self.set_run(status=RunStatus.CANCELLED, finished_at=timezone.now())
            return RunStatus.CANCELLED
        except ClaimLost:
            log.warning("run %s was taken over by another worker; stopping", self.run_id)
            return None
        except Exception as exc:
            # A fault of Sweeplab's own, not the server's: say so, keep what was stored.
            log.exception("run %s: internal error", self.run_id)
            cause = f"Sweeplab internal error: {exc.__class__.__name__}: {exc}"
            self.event(RunEventKind.FINISHED, cause)
            Point.objects.filter(run_id=self.run_id, status=PointStatus.PLANNED).update(
                status=PointStatus.NOT_RUN, reason=cause
            )
            self.set_run(status=RunStatus.FAILED, failure_kind=FailureKind.UNKNOWN, failure_cause=cause,
                         finished_at=timezone.now())
            return RunStatus.FAILED
        finally:
            self.teardown()
            self.stop_heartbeat()
            refresh_sweep_status(sweep.pk)

    def attempt(self, attempt, attempts):
        """One launch of the server and the points it measures. Returns "done",
        "crashed", "failed" or "retry"."""
        try:
            self.launch()
            self.wait_ready()
        except ServerDied as died:
            failure = self.failure_from_log(died)
            if attempt < attempts:
                return self.retry(failure, attempt)
            self.event(RunEventKind.STARTUP_FAILED, failure.cause)
            status = RunStatus.CRASHED
            self.finish_unstarted(status, failure.kind, failure.cause, f"server did not start: {failure.cause}", failure)
            self.quarantine(failure)
            return "crashed"
        except StartupTimeout as exc:
            self.event(RunEventKind.STARTUP_FAILED, str(exc))
            self.finish_unstarted(RunStatus.FAILED, FailureKind.STARTUP_TIMEOUT, str(exc), f"server did not start: {exc}")
            return "failed"
        except LaunchRefused as exc:
            self.event(RunEventKind.PREFLIGHT_FAILED, str(exc))
            self.finish_unstarted(RunStatus.FAILED, FailureKind.PREFLIGHT, str(exc), f"not launched: {exc}")
            return "failed"

        self.set_run(status=RunStatus.RUNNING)
        try:
            self.read_server_facts()
            self.start_telemetry()
            points = self.pending_points()
            points = self.apply_context_cap(points)
            self.warmup(points)
            for point in points:
                self.check_boundary()
                self.measure(point)
        except ServerDied as died:
            failure = self.failure_from_log(died)
            self.record_crash(died, failure)
            if attempt < attempts:
                return self.retry(failure, attempt)
            self.quarantine(failure)
            return "crashed"
        self.event(RunEventKind.FINISHED, "all points measured")
        self.set_run(status=RunStatus.DONE, finished_at=timezone.now())
        return "done"

    def retry(self, failure, attempt):
        self.event(RunEventKind.RETRY, f"attempt {attempt} ended: {failure.cause}; launching again")
        self.teardown()
        Point.objects.filter(run_id=self.run_id, status__in=[PointStatus.CRASHED, PointStatus.NOT_RUN]).update(
            status=PointStatus.PLANNED, reason=""
        )
        self.set_run(status=RunStatus.STARTING, failure_kind="", failure_cause="", failure_log="")
        return "retry"

    # preflight ---------------------------------------------------------------------------

    def preflight(self):
        """(failure kind, reason) when the run cannot start, else None."""
        run, host, llm, engine = self.run, self.run.sweep.host, self.run.sweep.llm, self.run.sweep.engine
        if is_local_path(llm.path) and not Path(llm.path).expanduser().exists():
            hint = " (/dev/shm is emptied by a reboot)" if llm.path.startswith("/dev/shm") else ""
            return (
                FailureKind.MODEL_MISSING,
                f"model path {llm.path} does not exist on host {host.name}{hint}: put the model back, "
                "then resume the sweep",
            )
        if llm.draft_model_path and is_local_path(llm.draft_model_path) and not Path(llm.draft_model_path).expanduser().exists():
            return FailureKind.MODEL_MISSING, f"draft model path {llm.draft_model_path} does not exist on host {host.name}"
        if run.tp > max(host.gpu_count, 1):
            return FailureKind.PREFLIGHT, f"TP{run.tp} needs {run.tp} GPUs; host {host.name} has {host.gpu_count}"
        if host.gpu_count and engine.kind != "simulated":
            try:
                busy = telemetry.busy_gpus(range(run.tp))
            except telemetry.NvmlUnavailable as exc:
                return FailureKind.PREFLIGHT, f"cannot check that the GPUs are idle: {exc}"
            if busy:
                listed = ", ".join(f"pid {p.pid} on GPU {p.gpu_index}" for p in busy)
                return FailureKind.PREFLIGHT, f"GPUs are not idle: {listed}; stop those processes or wait"
        return None

    # launch and readiness ----------------------------------------------------------------

    def launch(self):
        run, sweep = self.run, self.run.sweep
        adapter = get_adapter(sweep.engine.kind)
        port = free_port()
        values = LaunchValues(
            python=sys.executable,
            model_path=sweep.llm.path,
            host="127.0.0.1",
            port=port,
            tp=run.tp,
            context_length=sweep.llm.context_length,
            method=run.method,
            params=run.params,
            draft_model_path=sweep.llm.draft_model_path,
        )
        try:
            argv = adapter.argv(sweep.engine.argv_template, sweep.engine.method_args, values)
        except ArgvError as exc:
            raise LaunchRefused(f"engine {sweep.engine.name} cannot launch this configuration: {exc}") from None
        log_dir = Path(settings.DATA_DIR) / "logs" / f"sweep-{sweep.pk}"
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"run-{run.pk}-{run.config_label.replace(' ', '_')}.log"
        env = {**os.environ, **(sweep.engine.env or {})}
        gpus = list(range(run.tp)) if sweep.host.gpu_count and sweep.engine.kind != "simulated" else []
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
        with open(log_path, "ab") as out:
            out.write(f"\n{LAUNCH_MARK} {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True, cwd=settings.BASE_DIR,
            )
        self.server = Server(proc, f"http://127.0.0.1:{port}", log_path, gpus)
        self.set_run(argv=argv, port=port, pid=proc.pid, log_path=str(log_path))
        self.event(RunEventKind.LAUNCHED, " ".join(argv), pid=proc.pid, port=port)

    def wait_ready(self):
        adapter = get_adapter(self.run.sweep.engine.kind)
        timeout = self.run.sweep.engine.readiness_timeout_s
        deadline = time.monotonic() + timeout
        detail = ""
        while time.monotonic() < deadline:
            if self.server.proc.poll() is not None:
                raise ServerDied(f"exited with status {self.server.proc.returncode} during start-up")
            ready, detail = adapter.is_ready(self.server.base_url, self.log_tail())
            if ready:
                self.event(RunEventKind.READY, f"ready at {self.server.base_url}")
                return
            time.sleep(READY_POLL_S)
            self.check_boundary()
        raise StartupTimeout(f"not ready within the engine's readiness timeout of {timeout}s (last: {detail})")

    def read_server_facts(self):
        adapter = get_adapter(self.run.sweep.engine.kind)
        base = self.server.base_url
        launch_log = self.launch_log()
        limits = adapter.limits(base, self.run.argv, launch_log)
        self.set_run(
            context_length=limits.context_length,
            kv_capacity_tokens=limits.kv_capacity_tokens,
            engine_version=adapter.version(base)[:200],
            server_info=_jsonable(adapter.server_info(base, launch_log)),
        )

    # telemetry ---------------------------------------------------------------------------

    def start_telemetry(self):
        if not self.server.gpus:
            why = "a simulated engine has no GPU to sample" if self.run.sweep.engine.kind == "simulated" else "a CPU host has no GPU"
            self.event(RunEventKind.TELEMETRY_UNAVAILABLE, why)
            return
        run_id = self.run_id

        def sink(samples):
            TelemetrySample.objects.bulk_create(
                TelemetrySample(
                    run_id=run_id, at=timezone.datetime.fromtimestamp(s.at, tz=timezone.get_current_timezone()),
                    gpu_index=s.gpu_index, memory_used_mib=s.memory_used_mib, memory_total_mib=s.memory_total_mib,
                    utilization_pct=s.utilization_pct, power_w=s.power_w, temperature_c=s.temperature_c,
                    sm_clock_mhz=s.sm_clock_mhz,
                )
                for s in samples
            )

        try:
            with telemetry.Nvml():
                pass
        except telemetry.NvmlUnavailable as exc:
            self.event(RunEventKind.TELEMETRY_UNAVAILABLE, str(exc))
            return
        self.sampler = telemetry.Sampler(self.server.gpus, sink)
        self.sampler.start()

    # points ------------------------------------------------------------------------------

    def pending_points(self):
        return list(
            Point.objects.filter(run_id=self.run_id, status=PointStatus.PLANNED)
            .select_related("workload")
            .order_by("position")
        )

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
                concurrency=point.concurrency,
                context_length=self.run.context_length or self.run.sweep.llm.context_length,
                kv_capacity_tokens=self.run.kv_capacity_tokens,
                margin=margin,
            )
            reason = "" if fit.fits else fit.reason
            if reason:
                Point.objects.filter(pk=point.pk).update(status=PointStatus.SKIPPED, reason=f"context cap: {reason}")
                skipped.append(point_label(point))
            else:
                kept.append(point)
        if skipped:
            self.event(RunEventKind.CONTEXT_CAPPED, f"skipped by the server's context/KV cap: {', '.join(skipped)}")
        return kept

    def prompts_for(self, point, count):
        """`count` prompts for a point and their length, sized by the server's own
        tokenizer. Distinct long-context prompts, so no prefix cache serves a repeat."""
        tokenizer = prompts.ServerTokenizer(self.server.base_url, model=self.run.sweep.llm.name)
        workload = point.workload
        if workload.kind == WorkloadKind.FIXED:
            return [workload.prompt] * count, tokenizer.count(workload.prompt)
        if workload.kind == WorkloadKind.SYNTHETIC:
            built = [prompts.long_context_prompt(point.prompt_tokens, tokenizer.count, seed=i) for i in range(count)]
            inexact = [b.tokens for b in built if not b.exact]
            if inexact:
                raise ValueError(f"could not build a prompt of exactly {point.prompt_tokens} tokens (got {inexact[0]})")
            return [b.text for b in built], built[0].tokens
        margin = int(self.options.get("context_margin_tokens", 16))
        limit = prompts.max_prompt_tokens(
            self.run.context_length or self.run.sweep.llm.context_length, self.run.kv_capacity_tokens,
            point.concurrency, point.max_new_tokens, margin,
        )
        chosen = prompts.load_sharegpt(workload.dataset_path, tokenizer.count, num_prompts=count, max_prompt_tokens=limit)
        if not chosen:
            raise ValueError(f"{workload.dataset_path}: no conversation fits in {limit} prompt tokens")
        return [c.text for c in chosen], round(sum(c.prompt_tokens for c in chosen) / len(chosen))

    def load_config(self, prompt_texts, max_tokens, concurrency, num_requests):
        adapter = get_adapter(self.run.sweep.engine.kind)
        return loadgen.LoadConfig(
            base_url=self.server.base_url,
            api=adapter.api,
            model=self.run.sweep.llm.name,
            prompts=prompt_texts,
            max_tokens=max_tokens,
            concurrency=concurrency,
            num_requests=num_requests,
            timeout_first_token=float(self.options.get("first_token_timeout_s", 600)),
            timeout_stall=float(self.options.get("stall_timeout_s", 60)),
            extra_body=adapter.extra_body(max_tokens, self.run.server_info),
        )

    def probe(self):
        """Between points: the process is alive and /health answers."""
        adapter = get_adapter(self.run.sweep.engine.kind)
        if self.server.proc.poll() is not None:
            raise ServerDied(f"the server process exited with status {self.server.proc.returncode}")
        ok, detail = adapter.healthy(self.server.base_url)
        if not ok:
            self.event(RunEventKind.PROBE_FAILED, detail)
            time.sleep(0.5)  # a dying process: let it finish exiting so its log is complete
            alive = self.server.proc.poll() is None
            raise ServerDied(f"health probe failed: {detail}", kind=FailureKind.HUNG if alive else None)

    def warmup(self, points):
        count = int(self.spec.get("warmup_requests", 0))
        if not count or not points:
            return
        self.probe()
        texts, _ = self.prompts_for(points[0], 1)
        config = self.load_config(texts, min(WARMUP_MAX_TOKENS, points[0].max_new_tokens), 1, count)
        result = loadgen.run_load_sync(config)
        lost = [r for r in result.results if r.error_kind in CONNECTION_ERRORS]
        if lost or self.server.proc.poll() is not None:
            raise ServerDied(f"during warmup: {lost[0].error if lost else 'the server process exited'}", where="warmup")
        failed = [r for r in result.results if r.error_kind]
        note = f"; {len(failed)} of {count} warmup requests failed: {failed[0].error}" if failed else ""
        self.event(RunEventKind.WARMUP_DONE, f"{count} warmup request(s), not measured{note}")

    def measure(self, point):
        self.probe()
        self.event(RunEventKind.POINT_STARTED, point_label(point), point=point.pk)
        started = timezone.now()
        count = int(self.spec.get("requests_per_point", 1))
        try:
            texts, prompt_tokens = self.prompts_for(point, count)
        except (OSError, ValueError, prompts.TokenizerError) as exc:
            if self.server_exited(grace=2.0):  # a refused tokenize call: it may be dying
                raise ServerDied(f"while sizing prompts: {exc}", point) from None
            self.store_point(point, PointStatus.FAILED, f"could not build the prompt: {exc}", started, None, None)
            return
        adapter = get_adapter(self.run.sweep.engine.kind)
        before = adapter.spec_snapshot(self.server.base_url)
        log_start = self.log_size()
        result = loadgen.run_load_sync(self.load_config(texts, point.max_new_tokens, point.concurrency, count))
        point_log = self.log_since(log_start)
        adapter.relabel_failures(result.results, point_log)
        alive = self.server.proc.poll() is None
        status, reason = point_status(result.results, alive)
        after = adapter.spec_snapshot(self.server.base_url) if alive and before is not None else None
        summary = result.summary()
        if status == PointStatus.OK:
            if before is not None:
                # Engines whose answers carry no per-request speculation counts (vLLM):
                # this point's counter deltas. Otherwise sweepcore.metrics computed it.
                summary["accept_length"] = adapter.accept_length(before, after, result)
            summary.update(adapter.server_reported(point_log, self.run.method))
            notes = [self.token_count_note(point, prompt_tokens, result)]
            if not adapter.streams_usage:
                notes += self.check_token_counts(adapter, point, texts, prompt_tokens, result, summary)
            reason = "; ".join(note for note in notes if note)
        self.store_point(point, status, reason, started, result, summary, prompt_tokens)
        self.event(RunEventKind.POINT_FINISHED, f"{point_label(point)}: {status}", point=point.pk, status=status)
        if status == PointStatus.CRASHED:
            # Its requests are stored as evidence; the reason gets the cause from the log.
            raise ServerDied(reason, point=point)

    def check_token_counts(self, adapter, point, texts, prompt_tokens, result, summary):
        """The stream carried no token counts, so they were counted from its chunks:
        repeat the last measured request without streaming (the same body, so the same
        answer) and compare with the server's own usage, output and prompt. Returns
        notes for the point where they differ."""
        last = result.results[-1]
        try:
            server_prompt, server_output = adapter.check_counts(
                self.server.base_url, self.run.sweep.llm.name, texts[last.index % len(texts)], point.max_new_tokens,
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

    def store_point(self, point, status, reason, started, result, summary, prompt_tokens=None):
        fields = {"status": status, "reason": reason, "started_at": started, "finished_at": timezone.now(),
                  "actual_prompt_tokens": prompt_tokens}
        extra = {}
        for key, value in (summary or {}).items():
            if key in metrics.FIELDS or key == "errors":  # errors: a mapping with a column of its own
                fields[key] = value
            else:
                extra[key] = value
        if extra:
            fields["extra"] = _jsonable(extra)
        with transaction.atomic():
            Point.objects.update_or_create(
                run_id=self.run_id, workload_id=point.workload_id, prompt_tokens=point.prompt_tokens,
                concurrency=point.concurrency, defaults=fields,
            )
            RequestRecord.objects.filter(point_id=point.pk).delete()
            if result is not None:
                RequestRecord.objects.bulk_create(
                    RequestRecord(point_id=point.pk, **{name: getattr(r, name) for name in metrics.REQUEST_FIELDS})
                    for r in result.results
                )

    # failures ----------------------------------------------------------------------------

    def server_exited(self, grace=0.0):
        """Whether the server process has exited, waiting up to `grace` seconds for it."""
        try:
            self.server.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            return False
        return True

    def log_size(self):
        try:
            return self.server.log_path.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset):
        """What the server logged from byte `offset` on (the log of one point)."""
        try:
            with open(self.server.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def launch_log(self):
        """The log since the current launch (a retry appends to the same file)."""
        return self.log_tail().rsplit(LAUNCH_MARK, 1)[-1]

    def log_tail(self):
        if not self.server:
            return ""
        try:
            with open(self.server.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def failure_from_log(self, died):
        # Give a dying process a moment to exit and flush its last lines.
        try:
            self.server.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        tail = self.log_tail()
        adapter = get_adapter(self.run.sweep.engine.kind)
        failure = failures.classify(tail, self.server.proc.poll(), extra_rules=adapter.log_rules)
        if died.kind and failure.kind == failures.FailureKind.UNKNOWN:
            return failures.Failure(died.kind, f"{died.detail}; the process is alive but not answering", failure.lines)
        return failure

    def record_crash(self, died, failure):
        """The point in flight is crashed, the rest not_run, the run crashed."""
        cause = failure.cause
        if died.point is not None:
            Point.objects.filter(pk=died.point.pk).update(
                status=PointStatus.CRASHED, reason=f"the server died during this point: {cause}",
                finished_at=timezone.now(),
            )
        remaining = Point.objects.filter(run_id=self.run_id, status=PointStatus.PLANNED)
        remaining.update(status=PointStatus.NOT_RUN, reason=f"server died during {died.where}: {cause}")
        self.event(RunEventKind.CRASHED, cause, failure_kind=failure.kind, lines=list(failure.lines))
        self.set_run(
            status=RunStatus.CRASHED, failure_kind=failure.kind, failure_cause=cause,
            failure_log="\n".join(failure.lines), finished_at=timezone.now(),
        )

    def finish_unstarted(self, status, kind, cause, point_reason, failure=None):
        Point.objects.filter(run_id=self.run_id, status=PointStatus.PLANNED).update(
            status=PointStatus.NOT_RUN, reason=point_reason
        )
        self.set_run(
            status=status, failure_kind=kind, failure_cause=cause,
            failure_log="\n".join(failure.lines) if failure else "", finished_at=timezone.now(),
        )

    def quarantine(self, failure):
        if not failure.deterministic:
            return
        sweep = self.run.sweep
        now = timezone.now()
        key = {
            "engine_kind": sweep.engine.kind, "llm": sweep.llm, "method": self.run.method,
            "params_key": self.run.params_key, "tp": self.run.tp,
            "compute_capability": sweep.host.compute_capability,
        }
        with transaction.atomic():
            kf, created = KnownFailure.objects.select_for_update().get_or_create(
                **key,
                defaults={"params": self.run.params, "failure_kind": failure.kind, "signature": failure.signature,
                          "first_seen_at": now, "last_seen_at": now},
            )
            if not created:
                KnownFailure.objects.filter(pk=kf.pk).update(
                    seen_count=F("seen_count") + 1, last_seen_at=now, failure_kind=failure.kind,
                    signature=failure.signature, active=True,
                )
        self.set_run(known_failure=kf)
        self.event(
            RunEventKind.QUARANTINED,
            f"{self.run.config_label} on compute capability {sweep.host.compute_capability or 'cpu'} is quarantined: "
            f"{failure.signature}",
            known_failure=kf.pk,
        )

    # teardown ----------------------------------------------------------------------------

    def teardown(self):
        if self.sampler is not None:
            self.sampler.stop()
            if self.sampler.error:
                self.event(RunEventKind.TELEMETRY_UNAVAILABLE, f"telemetry stopped: {self.sampler.error}")
            self.sampler = None
        server, self.server = self.server, None
        if server is None:
            return
        proc = server.proc
        how = "had already exited"
        if proc.poll() is None:
            how = "stopped with SIGTERM"
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=TERM_GRACE_S)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                how = f"did not stop within {TERM_GRACE_S}s of SIGTERM: killed"
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of its process group
        except ProcessLookupError:
            pass
        proc.wait()
        self.event(RunEventKind.TEARDOWN, f"server {how} (exit status {proc.returncode})")
        if server.gpus:
            try:
                left = telemetry.wait_released(server.gpus, GPU_RELEASE_TIMEOUT_S)
            except telemetry.NvmlUnavailable as exc:
                left = None
                self.event(RunEventKind.GPU_LEAK, f"could not check that the GPUs were released: {exc}")
            if left:
                listed = ", ".join(f"pid {p.pid} on GPU {p.gpu_index}" for p in left)
                self.event(RunEventKind.GPU_LEAK, f"GPU memory still held {GPU_RELEASE_TIMEOUT_S}s after teardown: {listed}")


class StartupTimeout(Exception):
    pass


class LaunchRefused(Exception):
    """The engine's argv template cannot be filled for this configuration."""


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jsonable(value):
    return json.loads(json.dumps(value, default=str))
