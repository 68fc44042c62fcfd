"""A run whose load needs more open files than its worker may open ends `failed` in
preflight with the numbers, never as a run of failed requests that looks like a dying
server (sweepcore.loadgen.open_files_problem)."""

from pathlib import Path

import pytest

from benchmarks.catalog import load_catalog
from runs.lifecycle import create_sweep
from runs.worker.executor import PreflightFailed, RunExecutor
from sweepcore.loadgen import runner
from sweepcore.spec import load_spec_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen3.6-27b-sm120.yaml"


def executor_of_first_run(concurrency):
    """The executor of the example's first run, as a claim would have it, its points at
    ``concurrency`` (no model path: the test reads the open-files check, not the files)."""
    sweep = create_sweep(load_spec_file(EXAMPLE, load_catalog()))[0]
    sweep.llm.path = sweep.llm.draft_model_path = ""
    sweep.llm.save()
    run = sweep.runs.order_by("position").first()
    run.points.update(concurrency=concurrency)
    run.host = sweep.host
    executor = RunExecutor(run.pk, "test:1")
    executor.run = run
    return executor


@pytest.fixture
def nofile_limit(monkeypatch):
    """This process may open 1,024 files, and may not raise that."""
    monkeypatch.setattr(runner.resource, "getrlimit", lambda which: (1024, 1024))


def test_a_load_beyond_the_workers_open_files_fails_preflight_with_the_numbers(catalog, nofile_limit):
    with pytest.raises(PreflightFailed) as exc:
        executor_of_first_run(4096).preflight()
    assert exc.value.kind == "preflight"
    assert exc.value.reason == (
        "concurrency 4,096 needs about 4,352 open files (a socket per request in flight and 256 more); this worker "
        "may open 1,024 (ulimit -n): raise the worker's limit (ulimit -n, systemd LimitNOFILE=) or lower the "
        "concurrency")


def test_a_load_within_them_passes_and_says_so(catalog, nofile_limit):
    checked = executor_of_first_run(512).preflight()
    assert "open files: up to 512 requests in flight fit this worker's limit" in checked
