"""Nothing waits for a person (issue 19): resume measures again the runs a fault outside
their configuration ended, never a stored point; each live worker's periodic check
(runs.worker.watch) sends again, once, the task of a queued run nobody claimed and of a
run whose worker stopped heartbeating, and the worker taking it over kills the server
the dead one left; the sweep page says when a run waits for a worker that is not there."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks.catalog import load_catalog
from benchmarks.models import Host, Sweep, SweepStatus
from runs import lifecycle
from runs.lifecycle import SweepStateError, create_sweep, launch_sweep, refresh_sweep_status, resume_sweep, start_after
from runs.models import Point, PointStatus, RequestRecord, Run, RunEvent, RunEventKind, RunStatus
from runs.results.waiting import waiting_sentence
from runs.worker import watch
from runs.worker.executor import RunExecutor
from runs.worker.store import RunStore
from sweepcore.failures import Failure
from sweepcore.kinds import FailureKind
from sweepcore.spec import validate

HOST = "sim-8x-rtxpro6000"


def spec(name, tp=(1,), points=(1000, 2000, 3000)):
    return validate(
        {"name": name, "host": HOST, "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B", "tp": list(tp),
         "methods": ["autoregressive"], "workloads": [{"long-context": {"prompt_tokens": list(points)}}]},
        load_catalog(),
    )


def launched(name, **kw):
    sweep, _ = create_sweep(spec(name, **kw))
    launch_sweep(sweep, enqueue=False)
    sweep.refresh_from_db()
    return sweep


@pytest.fixture
def sent(monkeypatch):
    """The tasks sent to host queues, as (task name, host, kwargs)."""
    calls = []
    monkeypatch.setattr(lifecycle, "send_to_host",
                        lambda name, host, countdown=None, **kwargs: calls.append((name, host, kwargs)))
    return calls


def host():
    return Host.objects.get(name=HOST)


# --- resume ----------------------------------------------------------------------------------


def one_point_stored_then(sweep, end):
    """The sweep's first run claimed, its first point stored ok, then `end(store)`; the
    sweep's status refreshed as the executor does."""
    run = sweep.runs.order_by("position").first()
    store = RunStore(run.pk, "w:1")
    assert store.claim()
    first = store.pending_points()[0]
    store.store_point(first, "ok", "", timezone.now(), None, {"completed": 3, "output_throughput": 42.0})
    end(store)
    refresh_sweep_status(sweep.pk)
    sweep.refresh_from_db()
    return run, first


def test_resume_measures_again_what_an_internal_error_left_and_never_a_stored_point(catalog):
    sweep = launched("internal")
    cause = "Sweeplab internal error: OperationalError: terminating connection due to administrator command"
    run, first = one_point_stored_then(sweep, lambda store: store.fail_internally(FailureKind.INTERNAL, cause))
    assert sweep.status == SweepStatus.DONE
    assert Run.objects.get(pk=run.pk).status == RunStatus.FAILED
    stored = Point.objects.filter(pk=first.pk).values("status", "output_throughput", "finished_at").get()

    assert resume_sweep(sweep, enqueue=False) == [run.pk]
    sweep.refresh_from_db()
    again = Run.objects.get(pk=run.pk)
    assert (sweep.status, again.status, again.failure_kind, again.failure_cause) == ("queued", "queued", "", "")
    assert Point.objects.filter(pk=first.pk).values("status", "output_throughput", "finished_at").get() == stored
    event = RunEvent.objects.filter(run=run, kind=RunEventKind.RESUMED).get()
    assert event.message.startswith("queued again by resume: it ended failed (internal: Sweeplab internal error")
    # The new attempt measures only the points not stored.
    store = RunStore(run.pk, "w:2")
    assert store.claim()
    assert [p.prompt_tokens for p in store.pending_points()] == [2000, 3000]


def test_resume_measures_again_a_hung_run_but_not_a_crash_of_the_configuration(catalog):
    hung = launched("hung")
    failure = Failure(FailureKind.HUNG, "health probe failed: timed out; the process is alive but not answering", ())
    run, first = one_point_stored_then(hung, lambda store: store.record_crash(None, "the previous point", failure))
    assert hung.status == SweepStatus.DONE
    assert resume_sweep(hung, enqueue=False) == [run.pk]
    assert set(Point.objects.filter(run=run).exclude(pk=first.pk).values_list("status", flat=True)) == {"planned"}

    # The point the hang cut off is measured again, its stalled requests dropped; the
    # timeline says so.
    cut = Point.objects.filter(run=run).exclude(pk=first.pk).order_by("position").first()
    RequestRecord.objects.bulk_create(RequestRecord(point=cut, index=i, send_time=1.0 + i) for i in range(2))
    hung.refresh_from_db()
    run = Run.objects.get(pk=run.pk)
    Point.objects.filter(pk=cut.pk).update(status="timeout", reason="no token for 60 s: the server stopped answering")
    Run.objects.filter(pk=run.pk).update(status="crashed", failure_kind="hung", failure_cause="the process is alive "
                                         "but not answering")
    Sweep.objects.filter(pk=hung.pk).update(status="done")
    hung.refresh_from_db()
    assert resume_sweep(hung, enqueue=False) == [run.pk]
    assert Point.objects.filter(pk=cut.pk).values_list("status", "reason").get() == ("planned", "")
    assert not RequestRecord.objects.filter(point=cut).exists()
    assert Point.objects.filter(pk=first.pk).values_list("status", flat=True).get() == "ok"
    event = RunEvent.objects.filter(run=run, kind=RunEventKind.RESUMED).order_by("-at", "-pk").first()
    assert event.message.endswith("its point long-context, 2,000 tokens, c=1 was cut off by the hang "
                                  "(no token for 60 s: the server stopped answering): measured again")
    assert event.data["measured_again"] == cut.position

    crashed = launched("illegal")
    failure = Failure(FailureKind.CUDA_ILLEGAL_INSTRUCTION, "CUDA error: an illegal instruction was encountered", ())
    one_point_stored_then(crashed, lambda store: store.record_crash(None, "the previous point", failure))
    with pytest.raises(SweepStateError, match="failed or crashed for a reason of its configuration"):
        resume_sweep(crashed, enqueue=False)


def test_resume_sends_the_runs_it_queues_again(catalog, sent, django_capture_on_commit_callbacks):
    sweep = launched("send")
    run, _ = one_point_stored_then(sweep, lambda store: store.fail_internally(FailureKind.DISK_FULL, "no space left"))
    with django_capture_on_commit_callbacks(execute=True):
        resume_sweep(sweep)
    assert sent == [("runs.execute_run", HOST, {"run_id": run.pk})]
    assert Run.objects.get(pk=run.pk).sent_at is not None


# --- the periodic check: a lost task sent again, once ----------------------------------------


def test_a_queued_run_nobody_claimed_is_sent_again_once(catalog, sent):
    sweep = launched("lost", points=(1000,))
    (run,) = sweep.runs.all()
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(sent_at=now - timedelta(seconds=200))  # sent, then lost with the broker
    idle = now - timedelta(seconds=60)
    assert [run_id for run_id, _ in watch.check([host()], "w1@a", now, idle_since=idle)] == [run.pk]
    assert sent == [("runs.execute_run", HOST, {"run_id": run.pk})]
    # Another worker's check, or this one's next, sends nothing more.
    watch.check([host()], "w2@b", now, idle_since=idle)
    watch.check([host()], "w1@a", now + timedelta(seconds=15), idle_since=idle)
    assert len(sent) == 1
    event = RunEvent.objects.filter(run=run, kind=RunEventKind.QUEUED).order_by("-id").first()
    assert event.message == (f"re-sent to host.{HOST}: no worker claimed it within 200 s of its sending while a "
                             f"worker of the host was free (the task was lost: a broker restarted?)")
    # Lost again: sent again after another requeue_after (120 s).
    watch.check([host()], "w1@a", now + timedelta(seconds=121), idle_since=idle)
    assert len(sent) == 2


def test_a_queued_run_is_not_sent_again_while_it_waits_its_turn_or_is_held_back(
        catalog, sent, django_capture_on_commit_callbacks):
    sweep = launched("busy", points=(1000,))
    (run,) = sweep.runs.all()
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(sent_at=now - timedelta(seconds=600))
    watch.check([host()], "w@a", now, idle_since=None)  # every slot busy: the queue moves when one frees
    watch.check([host()], "w@a", now, idle_since=now)  # a slot free only since now: its message may be coming
    assert sent == []
    # Held behind another sweep (start_after): never sent, so never sent again, until the other ends.
    other = launched("other", points=(1000,))
    held, _ = create_sweep(spec("held", points=(1000,)))
    launch_sweep(held, enqueue=False)
    start_after(held, other)
    watch.check([host()], "w@a", now + timedelta(seconds=700), idle_since=now)
    assert [kwargs["run_id"] for _, _, kwargs in sent] == [run.pk]  # `busy`'s, at last; not `held`'s
    # The task that was to send them lost: once the other sweep has been finished a while.
    Run.objects.filter(sweep=other).update(status=RunStatus.DONE)
    refresh_sweep_status(other.pk)
    Sweep.objects.filter(pk=other.pk).update(finished_at=now)
    with django_capture_on_commit_callbacks(execute=True):
        watch.check([host()], "w@a", now + timedelta(seconds=130), idle_since=now)
    assert sent[-1] == ("runs.execute_run", HOST, {"run_id": held.runs.get().pk})


def test_a_live_worker_records_its_host_and_marks_a_sweep_whose_runs_all_ended_done(catalog):
    sweep = launched("ended", points=(1000,))
    Run.objects.filter(sweep=sweep).update(status=RunStatus.DONE)
    Sweep.objects.filter(pk=sweep.pk).update(status=SweepStatus.RUNNING)
    watch.check([host()], "w@a", timezone.now())
    assert Sweep.objects.get(pk=sweep.pk).status == SweepStatus.DONE
    assert host().last_worker == "w@a" and host().last_heartbeat_at is not None


# --- the periodic check: a dead worker's run taken over, its server killed -------------------


@pytest.fixture
def orphan():
    """A process group as a dead worker's server leaves it: `sleep` in a session of its own."""
    argv = [sys.executable, "-c", "import time; time.sleep(600)", "sweeplab-test-orphan"]
    proc = subprocess.Popen(argv, start_new_session=True)
    yield proc, argv
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def driven_by_a_dead_worker(name, orphan):
    """The one run of a new sweep, running its server `orphan` for worker dead@a:1."""
    proc, argv = orphan
    sweep = launched(name, points=(1000, 2000))
    run = sweep.runs.get()
    store = RunStore(run.pk, "dead@a:1")
    assert store.claim()
    store.set_run(status=RunStatus.RUNNING, pid=proc.pid, argv=argv)
    return sweep, run


def test_a_run_whose_worker_died_is_sent_again_and_taken_over_killing_its_server(catalog, sent, orphan):
    proc, _ = orphan
    _, run = driven_by_a_dead_worker("dead", orphan)
    beat = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=beat, sent_at=beat - timedelta(minutes=1))
    now = timezone.now()
    watch.check([host()], "w@a", now, idle_since=None)
    assert sent == []  # every slot busy
    watch.check([host()], "w@a", now, idle_since=now)
    watch.check([host()], "w2@b", now, idle_since=now)
    assert sent == [("runs.execute_run", HOST, {"run_id": run.pk})]
    event = RunEvent.objects.filter(run=run, kind=RunEventKind.QUEUED).order_by("-id").first()
    assert event.message.startswith(f"re-sent to host.{HOST}: its worker dead@a:1 stopped heartbeating at ")

    executor = RunExecutor(run.pk, "w@a:2")
    assert executor.claim()
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    taken = RunEvent.objects.get(run=run, kind=RunEventKind.RESUMED).message
    clock = f"{timezone.localtime(beat):%Y-%m-%d %H:%M:%S}"
    assert taken == f"taken over: its worker dead@a:1 stopped heartbeating at {clock}; its server (pgid {proc.pid}) was killed"


def test_a_dead_workers_run_of_a_cancelled_sweep_is_cancelled_and_its_server_killed(catalog, orphan):
    proc, _ = orphan
    sweep, run = driven_by_a_dead_worker("dead-cancelled", orphan)
    lifecycle.cancel_sweep(sweep)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    watch.check([host()], "w@a", timezone.now())
    proc.wait(timeout=10)
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert set(Point.objects.filter(run=run).values_list("status", flat=True)) == {PointStatus.NOT_RUN}


def test_a_server_whose_leader_died_is_killed_through_its_group():
    from sweepcore.server import group_members, kill_leftover

    # A leader that starts a child in its group and exits: the child is what is left.
    leader = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; subprocess.Popen(['sleep', '600']); "
                                                     "sys.exit(0)"], start_new_session=True)
    leader.wait(timeout=10)
    assert [name for _, name in group_members(leader.pid)] == ["sleep"]
    assert kill_leftover(leader.pid, ["python", "whatever"])
    deadline = time.monotonic() + 5
    while group_members(leader.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(leader.pid) == []
    assert not kill_leftover(leader.pid, ["python"])  # nothing left of it


# --- the sweep page: a run waiting for a worker that is not there ----------------------------


def test_the_page_says_a_run_lost_its_worker_and_that_no_worker_is_alive(catalog):
    sweep = launched("orphaned", points=(1000,))
    run = sweep.runs.get()
    assert RunStore(run.pk, "dead@a:1").claim()
    beat = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, heartbeat_at=beat)
    Sweep.objects.filter(pk=sweep.pk).update(status=SweepStatus.RUNNING)
    Host.objects.filter(name=HOST).update(last_heartbeat_at=beat)
    sweep.refresh_from_db()
    runs = list(Run.objects.filter(sweep=sweep))
    clock = f"{timezone.localtime(beat):%Y-%m-%d %H:%M:%S}"
    said = waiting_sentence(sweep, runs)
    assert said.startswith(f"Run autoregressive TP1: its worker stopped heartbeating at {clock}; the next live worker "
                           f"of host {HOST} takes it over. No worker of host {HOST} has been seen since ")
    assert said.endswith(f": start one with `python manage.py worker --host {HOST}`.")
    # A live worker's periodic check records it: the page says only that it takes the run over.
    watch.check([host()], "w@a", timezone.now())
    assert waiting_sentence(sweep, runs) == (f"Run autoregressive TP1: its worker stopped heartbeating at {clock}; the "
                                             f"next live worker of host {HOST} takes it over.")


# --- a broker away when the web tier sends, and the check that outlives its errors -----------


def test_a_launch_while_the_broker_is_away_is_stored_and_sent_later(catalog, monkeypatch,
                                                                    django_capture_on_commit_callbacks):
    from kombu.exceptions import OperationalError as BrokerUnreachable

    def down(*args, **kwargs):
        raise BrokerUnreachable("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(lifecycle, "send_to_host", down)
    sweep, _ = create_sweep(spec("broker-down", points=(1000,)))
    with django_capture_on_commit_callbacks(execute=True):
        launch_sweep(sweep)
    run = Run.objects.get(sweep=sweep)
    assert run.status == RunStatus.QUEUED and run.sent_at is not None
    said = RunEvent.objects.filter(run=run, kind=RunEventKind.QUEUED).order_by("-id").first().message
    assert said.startswith(f"could not be sent to host.{HOST} (OperationalError: Error 111 connecting")
    calls = []
    monkeypatch.setattr(lifecycle, "send_to_host", lambda name, host, countdown=None, **kw: calls.append(kw))
    now = timezone.now()
    watch.check([host()], "w@a", now + timedelta(seconds=121), idle_since=now)
    assert calls == [{"run_id": run.pk}]


def test_the_workers_check_outlives_a_failing_database(catalog, monkeypatch):
    from django.db import OperationalError

    from runs.tasks import Watch

    checker = Watch("w@a", [f"host.{HOST}", "celery"], slots=1)
    checker.once()
    assert host().last_worker == "w@a"
    assert checker.idle_since is not None  # no task runs in this process: its slot is free

    def fail(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(watch, "check", fail)
    checker.once()  # logged, not raised: the next check looks again
