"""The worker outlives its database (issue 19): statements fail as a dropped connection
makes them fail (django.db.OperationalError, raised by the cursor), and the writes of a
run are tried again and go through, whole; the heartbeat thread survives; a run task
that cannot reach the database is tried again, never acknowledged as failed; a run whose
database stays away longer than the retries wait is left in flight (its sweep not
finished), for a worker to take over."""

import threading
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import OperationalError
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from benchmarks.models import Sweep
from runs.models import Point, RequestRecord, Run, RunStatus
from runs.worker import dbretry
from runs.worker.executor import RunExecutor
from runs.worker.store import RunStore
from sweepcore.loadgen import RequestResult
from tests.worker.stores import claimed_store as stored_run


@pytest.fixture
def committed(transactional_db):
    """The demo catalog, committed: retries are made outside any transaction (inside one a
    failed statement spoils it), so these tests run outside the test's own."""
    call_command("seed_demo", stdout=StringIO())


@pytest.fixture(autouse=True)
def quick_pauses(monkeypatch):
    monkeypatch.setattr(dbretry, "FIRST_PAUSE_S", 0.01)
    monkeypatch.setattr(dbretry, "LONGEST_PAUSE_S", 0.05)


class Outage:
    """The next `n` statements whose SQL contains `match` fail as a dropped connection makes
    them fail; `failed` counts those that did."""

    def __init__(self):
        self.left, self.match, self.failed = 0, "", 0
        self.lock = threading.Lock()

    def __call__(self, n, match=""):
        with self.lock:
            self.left, self.match = n, match
        return self

    def hit(self, sql):
        with self.lock:
            if self.left and self.match in sql:
                self.left -= 1
                self.failed += 1
                return True
        return False


@pytest.fixture
def outage(monkeypatch):
    state = Outage()
    real = CursorWrapper._execute

    def execute(self, sql, params, *ignored):
        if state.hit(sql):
            raise OperationalError("terminating connection due to administrator command")
        return real(self, sql, params, *ignored)

    monkeypatch.setattr(CursorWrapper, "_execute", execute)
    return state


def claimed_store(name="outage"):
    return stored_run(name, workloads=[{"long-context": {"prompt_tokens": [1000, 2000, 3000]}}])


class Load:
    """What RunStore.store_point reads of a load: its request results."""

    def __init__(self, n):
        self.results = [RequestResult(index=i, send_time=100.0 + i, chunk_offsets=[0.1, 0.2], chunk_tokens=[1, 1],
                                      output_tokens=2) for i in range(n)]


def test_a_write_is_tried_again_after_a_dropped_connection_and_goes_through(committed, outage):
    store = claimed_store()
    outage(2, "UPDATE")
    store.set_run(status=RunStatus.RUNNING)
    assert outage.failed == 2
    assert Run.objects.get(pk=store.run_id).status == RunStatus.RUNNING


def test_a_point_is_stored_whole_once_when_its_transaction_is_cut_midway(committed, outage):
    store = claimed_store()
    point = store.pending_points()[0]
    # The point's row is written, then its request records fail: the whole transaction goes.
    outage(1, 'INSERT INTO "runs_requestrecord"')
    store.store_point(point, "ok", "", timezone.now(), Load(4), {"completed": 4})
    assert outage.failed == 1
    assert Point.objects.filter(run_id=store.run_id, prompt_tokens=1000).count() == 1
    assert RequestRecord.objects.filter(point=point).count() == 4
    assert Point.objects.get(pk=point.pk).status == "ok"


def test_a_write_gives_up_past_its_budget(committed, outage, monkeypatch):
    store = claimed_store()
    monkeypatch.setenv("SWEEPLAB_DB_RETRY_S", "0.2")
    outage(10_000, "UPDATE")
    with pytest.raises(OperationalError):
        store.set_run(status=RunStatus.RUNNING)
    outage(0)
    assert Run.objects.get(pk=store.run_id).status == RunStatus.STARTING


def test_the_heartbeat_thread_survives_an_outage(committed, outage, monkeypatch):
    monkeypatch.setenv("SWEEPLAB_STALE_CLAIM_S", "1")  # a beat every 0.25 s
    store = claimed_store()
    executor = RunExecutor(store.run_id, "w:1")
    assert executor.claim()
    outage(10_000, "UPDATE")  # nothing is written for a while: every beat fails
    executor.start_heartbeat()
    thread, _, lost = executor.heartbeat
    try:
        time.sleep(1.0)
        failed = outage.failed
        assert failed >= 3 and thread.is_alive() and not lost.is_set()
        before = Run.objects.get(pk=store.run_id).heartbeat_at
        outage(0)  # the database is back
        time.sleep(1.0)
        assert thread.is_alive() and Run.objects.get(pk=store.run_id).heartbeat_at > before
    finally:
        executor.stop_heartbeat()
    assert not thread.is_alive()


def test_a_run_whose_database_stays_away_is_left_in_flight_and_its_sweep_unfinished(committed, monkeypatch):
    store = claimed_store()
    executor = RunExecutor(store.run_id, "w:1")
    assert executor.claim()

    def drive():
        raise OperationalError("could not connect to server: Connection refused")

    monkeypatch.setattr(executor, "drive", drive)
    refreshed = []
    monkeypatch.setattr("runs.worker.executor.refresh_sweep_status", refreshed.append)
    with pytest.raises(OperationalError):
        executor.execute()
    run = Run.objects.get(pk=store.run_id)
    assert run.status == RunStatus.STARTING and run.claimed_by == "w:1"  # in flight, not failed
    assert refreshed == [] and Sweep.objects.get(pk=run.sweep_id).status == "running"
    assert not executor.heartbeat[0].is_alive()
    # Its task, tried again in this worker, takes it back at once: the claim is its own.
    assert RunStore(store.run_id, "w:1").claim()
    assert set(Point.objects.filter(run_id=store.run_id).values_list("status", flat=True)) == {"planned"}


def test_a_run_task_without_its_database_is_tried_again_not_acknowledged_as_failed(committed, monkeypatch):
    from runs import tasks

    calls = []

    def drive(run_id, worker_id=None, host_id=None):
        calls.append(run_id)
        if len(calls) < 3:
            raise OperationalError("could not connect to server: Connection refused")
        return "done"

    monkeypatch.setattr(tasks, "drive", drive)
    result = tasks.execute_run.apply(kwargs={"run_id": 7})
    assert calls == [7, 7, 7] and result.get() == "done"
    assert [tasks.db_wait_s(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
