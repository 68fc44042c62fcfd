"""The port race: the executor picks a free port, another process binds it before the
server does. The launch is retried on a new port, a bounded number of times, and the
preflight event says the port was not among its checks."""

import socket

import pytest

from benchmarks.catalog import load_catalog
from benchmarks.models import Engine
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import Run, RunEvent
from runs.worker import executor
from sweepcore.server import free_port
from sweepcore.spec import validate
from tests.e2e.processes import simengine_pids, wait_for


@pytest.fixture
def catalog(catalog):
    """The committed demo catalog, its simulated engine 100 times faster."""
    engine = Engine.objects.get(name="sglang-sim")
    engine.argv_template = engine.argv_template + ["--time-scale", "0.01"]
    engine.readiness_timeout_s = 60
    engine.save()


@pytest.fixture
def taken_port():
    """A port another process listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.fixture(autouse=True)
def no_stray_servers():
    before = simengine_pids()
    yield
    assert wait_for(lambda: not (simengine_pids() - before), timeout=10), "a simengine server was left running"


def run_one(monkeypatch, ports):
    """Run a one-point sweep inline, the executor picking `ports` in turn."""
    monkeypatch.setattr(executor, "free_port", lambda: next(ports))
    spec = validate(
        {
            "name": "port", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
            "tp": [1], "methods": ["autoregressive"], "workloads": ["fibonacci"], "max_new_tokens": 16,
        },
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    (run_id,) = launch_sweep(sweep, enqueue=False)
    executor.execute_run(run_id, worker_id="test")
    return Run.objects.get(pk=run_id)


def events(run, kind):
    return list(RunEvent.objects.filter(run=run, kind=kind).order_by("at", "id").values_list("message", flat=True))


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_port_taken_before_the_server_binds_it_is_retried_on_a_new_one(catalog, monkeypatch, taken_port):
    run = run_one(monkeypatch, iter([taken_port, free_port(), free_port()]))
    assert run.status == "done", run.failure_cause
    assert run.port != taken_port
    assert len(events(run, "launched")) == 2
    (retry,) = events(run, "retry")
    assert retry.startswith(f"port {taken_port} was taken before the server could bind it (")
    assert "address already in use" in retry
    (preflight,) = events(run, "preflight_ok")
    assert "GPUs not checked: a simulated engine uses none" in preflight
    assert "port not checked: picked at launch" in preflight


@pytest.mark.agnostic
@pytest.mark.slow
def test_the_port_retries_are_bounded(catalog, monkeypatch, taken_port):
    run = run_one(monkeypatch, iter([taken_port] * executor.PORT_ATTEMPTS))
    assert run.status == "crashed" and run.failure_kind == "unknown"
    assert "address already in use" in run.failure_cause
    assert len(events(run, "launched")) == executor.PORT_ATTEMPTS
    assert len(events(run, "retry")) == executor.PORT_ATTEMPTS - 1
    assert set(run.points.values_list("status", flat=True)) == {"not_run"}
