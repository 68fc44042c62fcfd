"""`manage.py demo`: the two demo sweeps of `make run`, queued once, one after the other."""

from io import StringIO

import pytest
from django.core.management import call_command

from benchmarks.models import Sweep
from runs.lifecycle import enqueue_after
from runs.management.commands import demo as demo_command
from runs.management.commands.demo import missing_engine
from runs.models import Point, Run
from runs.tasks import start_sweep_after
from sweeplab.celery import app


@pytest.fixture(autouse=True)
def engines_built(monkeypatch):
    """Whether var/engines/vllm-cpu is there depends on the checkout (CI builds it beside
    the tests): these tests say which."""
    monkeypatch.setattr(demo_command, "missing_engine", lambda name: "")


def demo():
    out = StringIO()
    call_command("demo", stdout=out)
    return out.getvalue()


def sent_tasks(monkeypatch):
    """The tasks handed to the broker, as (task name, queue, kwargs)."""
    sent = []
    monkeypatch.setattr(
        app, "send_task", lambda name, args=None, kwargs=None, queue=None, **options: sent.append((name, queue, kwargs))
    )
    return sent


def test_it_queues_the_simulated_demo_then_the_real_one_then_vllm_behind_them(catalog, monkeypatch, django_capture_on_commit_callbacks):
    sent = sent_tasks(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        out = demo()
    simulated = Sweep.objects.get(name="qwen3.6-27b-sm120-ddtree")
    real = Sweep.objects.get(name="smollm2-cpu-prompt-lookup")
    assert (simulated.host.name, simulated.engine.name) == ("sim-8x-rtxpro6000", "sglang-sim-demo")
    assert simulated.engine.argv_template[-2:] == ["--time-scale", "0.1"]
    # Cut down from the example: two budgets that crash and two that run, at most 30 requests.
    assert simulated.spec["until_stable"]["max_requests"] == 30
    assert simulated.runs.filter(method="ddtree").count() == 4 * 3 - 1  # budget 64 is excluded at TP1
    assert (real.host.name, real.engine.name) == ("local-cpu", "llamacpp-cpu")
    assert real.status == simulated.status == "queued"
    # The simulated sweep's runs go to its host; the real sweep's runs wait: one task, on
    # the simulated host's queue behind them, sends them when the simulated sweep is done.
    queued_sim = Run.objects.filter(sweep=simulated, status="queued").count()
    assert [name for name, _, _ in sent] == ["runs.execute_run"] * queued_sim + ["runs.start_sweep_after"] * 3
    assert sent[-3][1:] == ("host.sim-8x-rtxpro6000", {"sweep_id": real.pk, "after_sweep_id": simulated.pk})
    # The vLLM sweep waits for the llama.cpp one, on the same CPU host.
    vllm = Sweep.objects.get(name="smollm2-vllm-cpu-ngram")
    assert (vllm.host.name, vllm.engine.name, vllm.status) == ("local-cpu", "vllm-cpu", "queued")
    assert sent[-2][1:] == ("host.local-cpu", {"sweep_id": vllm.pk, "after_sweep_id": real.pk})
    # The capacity search waits for the vLLM one: a search per configuration, no planned points.
    searched = Sweep.objects.get(name="capacity-ar-vs-ddtree")
    assert (searched.host.name, searched.engine.name, searched.status) == ("sim-8x-rtxpro6000", "sglang-sim-demo",
                                                                          "queued")
    assert sent[-1][1:] == ("host.local-cpu", {"sweep_id": searched.pk, "after_sweep_id": vllm.pk})
    assert searched.spec["search"]["max_goodput"]["metric"] == "concurrency"
    assert [r.method for r in searched.runs.order_by("position")] == ["autoregressive", "ddtree"]
    assert not Point.objects.filter(run__sweep=searched).exists()
    assert "2 runs, each a capacity search; starts when the vllm one is done" in out
    assert "starts when the real one is done" in out
    # autoregressive and n-gram with 2 and 4 tokens, each on fibonacci and code-edit at 1 and 4.
    assert [r.params for r in vllm.runs.order_by("position")] == [
        {}, *({"num_speculative_tokens": n, "prompt_lookup_max": 4, "prompt_lookup_min": 2} for n in (2, 4))]
    assert all(r.points.count() == 4 for r in vllm.runs.all())
    assert f"/sweeps/{real.pk}/" in out and f"/sweeps/{simulated.pk}/" in out
    assert "starts when the simulated one is done" in out
    # 4 configurations x (fibonacci + 3 lengths) x 2 concurrencies; 2100 tokens is beyond n_ctx.
    assert Run.objects.filter(sweep=real, status="queued").count() == 4
    beyond = real.runs.first().points.filter(prompt_tokens=2100)
    assert beyond.count() == 2 and all("2100 + 64 + 16 > 2048" in p.reason for p in beyond)


def test_the_waiting_sweep_starts_once_the_one_before_is_done(catalog, monkeypatch, django_capture_on_commit_callbacks):
    demo()
    simulated = Sweep.objects.get(name="qwen3.6-27b-sm120-ddtree")
    real = Sweep.objects.get(name="smollm2-cpu-prompt-lookup")
    sent = sent_tasks(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        assert enqueue_after(real.pk, simulated.pk) is None
    assert sent == []
    Sweep.objects.filter(pk=simulated.pk).update(status="done")
    with django_capture_on_commit_callbacks(execute=True):
        result = start_sweep_after.apply(kwargs={"sweep_id": real.pk, "after_sweep_id": simulated.pk})
    runs = list(Run.objects.filter(sweep=real).order_by("position").values_list("id", flat=True))
    assert result.get() == runs
    assert sent == [("runs.execute_run", "host.local-cpu", {"run_id": i}) for i in runs]


def test_it_queues_nothing_twice_and_resumes_an_interrupted_demo(catalog, monkeypatch, django_capture_on_commit_callbacks):
    demo()
    simulated = Sweep.objects.get(name="qwen3.6-27b-sm120-ddtree")
    real = Sweep.objects.get(name="smollm2-cpu-prompt-lookup")
    Sweep.objects.filter(pk=simulated.pk).update(status="done")
    Sweep.objects.filter(pk=real.pk).update(status="running")  # `make run` stopped mid-way
    sent = sent_tasks(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        out = demo()
    assert Sweep.objects.count() == 4
    assert "unfinished: resumed" in out and "done already" in out
    # Nothing to wait for: the real sweep's runs go straight to its host; the vLLM sweep
    # still waits behind it.
    assert [name for name, _, _ in sent] == ["runs.execute_run"] * 4 + ["runs.start_sweep_after"] * 2


def test_without_vllms_environment_its_demo_is_left_out_in_one_line_and_the_next_waits_for_the_one_before(
        catalog, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(demo_command, "missing_engine",
                        lambda name: "var/engines/vllm-cpu/bin/python is missing" if name == "vllm-cpu" else "")
    sent = sent_tasks(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        out = demo()
    assert not Sweep.objects.filter(engine__name="vllm-cpu").exists()
    assert [line.split()[:2] for line in out.splitlines() if "skipped:" in line] == [["vllm", "skipped:"]]
    assert "var/engines/vllm-cpu/bin/python is missing" in out
    real = Sweep.objects.get(name="smollm2-cpu-prompt-lookup")
    searched = Sweep.objects.get(name="capacity-ar-vs-ddtree")
    assert sent[-1][1:] == ("host.local-cpu", {"sweep_id": searched.pk, "after_sweep_id": real.pk})
    assert "starts when the real one is done" in out.splitlines()[-1]


def test_an_engine_without_its_own_interpreter_or_with_it_present_is_not_missing(catalog, tmp_path):
    from benchmarks.models import Engine

    assert missing_engine("llamacpp-cpu") == ""
    vllm = Engine.objects.get(name="vllm-cpu")
    vllm.python = str(tmp_path / "absent" / "python")
    vllm.save()
    assert "absent/python is missing" in missing_engine("vllm-cpu")
    vllm.python = str(tmp_path)
    vllm.save()
    assert missing_engine("vllm-cpu") == ""
