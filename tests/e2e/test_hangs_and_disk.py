"""Hangs end quickly, and a server log that cannot be written fails its run with the path
(issue 19): real simengine processes frozen with SIGSTOP mid-stream or while prompts are
sized, and log folders on a full disk (a small tmpfs where this machine lets us mount one,
else a patched free-space reading or a folder that cannot be made)."""

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from runs.models import Run, RunEvent
from runs.worker.executor import RunExecutor
from sweepcore import servermetrics
from tests.e2e.processes import unavailable, wait_for
from tests.e2e.test_executor import catalog, events, run_inline, scaled_engine, spec, statuses  # noqa: F401

STALL_S = 2
HANG_PROBE_S = 3
# What a hang may cost beyond the stall timeout and the probe: the point's own
# bookkeeping, the teardown (SIGTERM, SIGCONT, exit) and a busy test machine.
SLACK_S = 8


@pytest.fixture
def slow_engine(catalog):
    """simengine at 1/10 of real time, so that a 512-token answer streams for ~2 s: long
    enough to freeze it mid-stream."""
    return scaled_engine(0.1)


@pytest.fixture
def quick_probe(monkeypatch):
    monkeypatch.setenv("SWEEPLAB_HANG_PROBE_S", str(HANG_PROBE_S))


def hang_spec(engine, **overrides):
    return spec(engine=engine.name, workloads=["fibonacci", {"long-context": {"prompt_tokens": [1000, 2000]}}],
                max_new_tokens=512, requests_per_point=3,
                options={"stall_timeout_s": STALL_S, "first_token_timeout_s": 600}, **overrides)


def alive(pid):
    """Whether process `pid` runs (a zombie waiting to be reaped does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not stat[stat.rindex(")") + 2:].startswith("Z")


def running_requests(port):
    try:
        return servermetrics.scrape(f"http://127.0.0.1:{port}", timeout=2).total("sglang:num_running_reqs") or 0
    except servermetrics.ScrapeError:
        return 0


def in_thread(target):
    """Run `target` beside the run (its own database connection, closed after)."""
    def body():
        try:
            target()
        finally:
            connection.close()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def tokens_sent(port):
    """(first tokens, later tokens) the server has sent to its clients: the counts of its TTFT
    and inter-token-latency histograms; (0, 0) when /metrics cannot be read."""
    try:
        read = servermetrics.scrape(f"http://127.0.0.1:{port}", timeout=2)
    except servermetrics.ScrapeError:
        return 0, 0
    return (read.total("sglang:time_to_first_token_seconds_count") or 0,
            read.total("sglang:inter_token_latency_seconds_count") or 0)


def failed_probes_after_freezing(monkeypatch, frozen):
    """The health probes that found the server silent once `frozen` has its pid (a list that
    grows as the executor probes)."""
    from sweepcore.engines.base import EngineAdapter

    failed, original = [], EngineAdapter.healthy

    def healthy(self, base_url, *args, **kwargs):
        ok, detail = original(self, base_url, *args, **kwargs)
        if not ok and "pid" in frozen:
            failed.append(detail)
        return ok, detail

    monkeypatch.setattr(EngineAdapter, "healthy", healthy)
    return failed


def freeze_mid_stream(frozen, failed_probes=None):
    """Once the first point's first request streams (its 512 tokens take ~2 s), SIGSTOP the
    server: `frozen` gets the pid and the time. With `failed_probes` (a list), SIGCONT it once
    the executor's health probe has found it silent."""
    def first_point_streaming():
        # The warmup's one request gave the server its first first-token; the point's first
        # request gives the second.
        started = RunEvent.objects.filter(kind="point_started").first()
        if started is None or not running_requests(started.run.port):
            return None
        first, later = tokens_sent(started.run.port)
        return (started.run, later) if first >= 2 else None

    def freeze():
        streaming = wait_for(first_point_streaming, timeout=120, interval=0.05)
        assert streaming, "the first point never streamed"
        run, later = streaming
        # A token more since: the first chunk has been written to the client, which keeps it.
        assert wait_for(lambda: tokens_sent(run.port)[1] > later, timeout=30, interval=0.01), "no second token"
        os.kill(run.pid, signal.SIGSTOP)
        frozen.update(pid=run.pid, at=time.time())
        if failed_probes is not None:
            assert wait_for(lambda: failed_probes, timeout=60, interval=0.05), "the server was never probed"
            os.kill(run.pid, signal.SIGCONT)
            frozen["thawed"] = time.time()

    return in_thread(freeze)


# --- hangs ------------------------------------------------------------------------------


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_server_frozen_mid_stream_ends_its_run_hung_within_the_stall_timeout_and_probe(slow_engine, quick_probe):
    frozen = {}
    freezer = freeze_mid_stream(frozen)
    sweep = run_inline(hang_spec(slow_engine))
    freezer.join(timeout=5)
    run = Run.objects.get(sweep=sweep)
    assert run.status == "crashed" and run.failure_kind == "hung", run.failure_cause
    assert "the process is alive but not answering" in run.failure_cause
    assert statuses(run) == ["timeout", "not_run", "not_run"]
    # Not a first-token timeout (600 s) per request still to send: one stall, one probe.
    assert run.finished_at.timestamp() - frozen["at"] < STALL_S + HANG_PROBE_S + SLACK_S
    point = run.points.get(status="timeout")
    assert point.validity == "invalid"
    # The stalled request is kept with its error; nothing more was sent to the frozen server.
    stalled = point.requests.get(error_kind="timeout_stall")
    assert stalled.error.startswith("no token for 2 s") and stalled.chunk_offsets
    assert sorted(point.requests.values_list("index", flat=True)) == list(range(stalled.index + 1))
    assert point.reason.startswith(f"the server stopped answering during this point: request {stalled.index} "
                                   f"timed out (no token for 2 s"), point.reason
    assert f"did not answer its health probe: /health did not answer within {HANG_PROBE_S}" in point.reason
    assert {"stalled", "probe_failed", "crashed", "teardown"} <= set(events(run))
    assert not alive(frozen["pid"])


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_server_frozen_before_a_first_token_ends_its_run_hung_within_the_stall_timeout_and_probe(
        catalog, quick_probe, monkeypatch):
    sized = []
    original = RunExecutor.prompts_for

    def freeze_once_the_first_points_prompts_are_sized(self, point, count):
        built = original(self, point, count)
        sized.append(point)
        if len(sized) == 2:  # the warmup's prompt first, then the first point's
            os.kill(self.server.process.pid, signal.SIGSTOP)
            sized.append(time.time())
        return built

    monkeypatch.setattr(RunExecutor, "prompts_for", freeze_once_the_first_points_prompts_are_sized)
    # A first-token limit of 600 s: what ends the point is the stall timeout and the probe.
    sweep = run_inline(spec(options={"stall_timeout_s": STALL_S, "first_token_timeout_s": 600}))
    run = Run.objects.get(sweep=sweep)
    assert run.status == "crashed" and run.failure_kind == "hung", run.failure_cause
    assert statuses(run) == ["timeout", "not_run", "not_run"]
    assert run.finished_at.timestamp() - sized[2] < STALL_S + HANG_PROBE_S + SLACK_S
    (waited,) = run.points.order_by("position").first().requests.all()
    assert waited.error_kind == "timeout_first_token" and not waited.chunk_offsets
    assert re.match(r"no first token for \d+\.\d s, and the server did not answer its health check", waited.error)
    assert "and the server did not answer its health check: /health did not answer within" in waited.error
    assert not alive(run.pid)


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_frozen_server_that_answers_again_before_the_probe_gives_up_goes_on(slow_engine, monkeypatch):
    monkeypatch.setenv("SWEEPLAB_HANG_PROBE_S", "15")
    frozen = {}
    failed_probes = failed_probes_after_freezing(monkeypatch, frozen)
    freezer = freeze_mid_stream(frozen, failed_probes)
    sweep = run_inline(hang_spec(slow_engine))
    freezer.join(timeout=5)
    run = Run.objects.get(sweep=sweep)
    assert "thawed" in frozen
    # Thawed after a probe found it silent (within its 15 s), so the run's probe saw it answer again.
    assert failed_probes and run.status == "done", (failed_probes, run.failure_cause)
    # The point keeps its stalled request as failed, says so, and is not drawn as clean.
    assert statuses(run) == ["timeout", "ok", "ok"]
    point = run.points.order_by("position").first()
    assert "the point stopped sending" in point.reason
    assert point.reason.endswith("the server answered its health probe again, so the run went on")
    assert point.requests.filter(error_kind="timeout_stall").count() == 1
    assert point.validity != "valid"
    said = list(RunEvent.objects.filter(run=run, kind="stalled").values_list("message", flat=True))
    assert len(said) == 2 and said[1].endswith("the server answered its health probe again; going on")


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_server_frozen_while_prompts_are_sized_ends_its_run_hung(catalog, quick_probe, monkeypatch):
    sized = []
    original = RunExecutor.prompts_for

    def freeze_at_the_first_point(self, point, count):
        sized.append(point)
        if len(sized) == 2:  # the warmup's prompt first, then the first point's
            os.kill(self.server.process.pid, signal.SIGSTOP)
            sized.append(time.time())
        return original(self, point, count)

    monkeypatch.setattr(RunExecutor, "prompts_for", freeze_at_the_first_point)
    sweep = run_inline(spec())
    run = Run.objects.get(sweep=sweep)
    assert run.status == "crashed" and run.failure_kind == "hung", run.failure_cause
    assert statuses(run) == ["timeout", "not_run", "not_run"]
    point = run.points.order_by("position").first()
    assert "while sizing prompts" in point.reason and "did not answer its health probe" in point.reason
    assert point.requests.count() == 0
    # The token counter's wait (the stall timeout), a moment for an exit, the probe.
    assert run.finished_at.timestamp() - sized[2] < STALL_S + 2 + HANG_PROBE_S + SLACK_S
    assert not alive(run.pid)


# --- full disks and missing folders ------------------------------------------------------


def tmpfs(path, size):
    """Mount a tmpfs of `size` at `path`, or skip the test saying why it cannot be."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        unavailable(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        unavailable(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {done.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs, unmounted after."""
    mount = tmp_path / "small-disk"
    tmpfs(mount, "4m")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False, timeout=30)


def fill(folder):
    """Write into `folder` until its disk is full."""
    block = b"\0" * 65536
    with open(folder / "filler", "ab", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError:
            pass
    with open(folder / "filler-tail", "ab", buffering=0) as f:  # the last partial block
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass


def assert_failed_before_launch(run, kind, *words):
    assert run.status == "failed" and run.failure_kind == kind, (run.status, run.failure_kind, run.failure_cause)
    for word in words:
        assert word in run.failure_cause, run.failure_cause
    assert "Traceback" not in run.failure_cause and "internal error" not in run.failure_cause
    assert set(statuses(run)) == {"not_run"}
    assert "launched" not in events(run)


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_log_disk_with_too_little_room_fails_preflight_naming_the_folder(catalog, settings, tmp_path, monkeypatch):
    import shutil

    settings.SERVER_LOG_DIR = tmp_path / "logs"
    real = shutil.disk_usage
    monkeypatch.setattr("sweepcore.server.shutil.disk_usage",
                        lambda path: real(path)._replace(free=10 * 1024 * 1024))
    run = Run.objects.get(sweep=run_inline(spec(workloads=["fibonacci"])))
    folder = tmp_path / "logs" / f"sweep-{run.sweep_id}"
    assert_failed_before_launch(run, "disk_full", f"no space left on {folder}: 10.0 MiB free",
                                "at least 64 MiB (SWEEPLAB_LOG_MIN_FREE_MIB)")
    assert "preflight_failed" in events(run)


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_log_folder_that_cannot_be_made_fails_preflight_naming_it(catalog, settings, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    settings.SERVER_LOG_DIR = tmp_path / "a-file" / "logs"
    run = Run.objects.get(sweep=run_inline(spec(workloads=["fibonacci"])))
    folder = tmp_path / "a-file" / "logs" / f"sweep-{run.sweep_id}"
    assert_failed_before_launch(run, "log_unwritable", f"the server log {folder} could not be written: Not a directory")


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_full_disk_at_launch_fails_the_run_with_the_log_path_not_a_traceback(catalog, settings, small_disk):
    settings.SERVER_LOG_DIR = small_disk
    settings.SWEEPLAB_LOG_MIN_FREE_MIB = 0  # past the preflight: the launch's own write meets the full disk
    fill(small_disk)
    run = Run.objects.get(sweep=run_inline(spec(workloads=["fibonacci"])))
    assert run.status == "failed" and run.failure_kind == "disk_full", run.failure_cause
    assert run.failure_cause.startswith(f"no space left on {small_disk}/sweep-{run.sweep_id}/run-")
    assert run.failure_cause.endswith(".log: the server log could not be written")
    assert set(statuses(run)) == {"not_run"}
    assert "launched" not in events(run)


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_disk_that_fills_mid_run_fails_the_run_after_the_point_and_tears_the_server_down(
        catalog, settings, small_disk, monkeypatch):
    settings.SERVER_LOG_DIR = small_disk
    settings.SWEEPLAB_LOG_MIN_FREE_MIB = 1
    measured = []
    original = RunExecutor.measure

    def fill_after_the_first_point(self, point):
        if measured:
            fill(small_disk)
        measured.append(point)
        return original(self, point)

    monkeypatch.setattr(RunExecutor, "measure", fill_after_the_first_point)
    run = Run.objects.get(sweep=run_inline(spec()))
    folder = Path(run.log_path).parent
    assert run.status == "failed" and run.failure_kind == "disk_full", run.failure_cause
    assert run.failure_cause.startswith(f"no space left on {folder}: the server log could not be written")
    # What was measured is kept; the rest is not_run with the reason.
    assert statuses(run) == ["ok", "not_run", "not_run"]
    assert run.points.order_by("position").last().reason.startswith(f"not run: no space left on {folder}")
    assert "teardown" in events(run) and not alive(run.pid)


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_log_folder_removed_mid_run_fails_the_run_naming_the_log(catalog, settings, tmp_path, monkeypatch):
    import shutil

    settings.SERVER_LOG_DIR = tmp_path / "logs"
    measured = []
    original = RunExecutor.measure

    def remove_after_the_first_point(self, point):
        if measured:
            shutil.rmtree(tmp_path / "logs")
        measured.append(point)
        return original(self, point)

    monkeypatch.setattr(RunExecutor, "measure", remove_after_the_first_point)
    run = Run.objects.get(sweep=run_inline(spec()))
    assert run.status == "failed" and run.failure_kind == "log_unwritable", run.failure_cause
    assert run.failure_cause == (f"the server log {run.log_path} is gone (its folder was removed): "
                                 f"the server log could not be written")
    assert statuses(run) == ["ok", "not_run", "not_run"]
    assert not alive(run.pid)
