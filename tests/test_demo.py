"""`manage.py demo`: the two demo sweeps of `make run`, queued once."""

from io import StringIO

import pytest
from django.core.management import call_command

from benchmarks.models import Sweep
from runs.models import Run


@pytest.fixture
def catalog(db):
    call_command("seed_demo", stdout=StringIO())


def demo():
    out = StringIO()
    call_command("demo", stdout=out)
    return out.getvalue()


def test_it_queues_the_real_and_the_simulated_demo_and_says_where_to_watch(catalog, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as sent:
        out = demo()
    real = Sweep.objects.get(name="smollm2-cpu-prompt-lookup")
    simulated = Sweep.objects.get(name="qwen3.6-27b-sm120-ddtree")
    assert (real.host.name, real.engine.name) == ("local-cpu", "llamacpp-cpu")
    assert (simulated.host.name, simulated.engine.name) == ("sim-8x-rtxpro6000", "sglang-sim-demo")
    assert "--time-scale" in simulated.engine.argv_template
    assert real.status == simulated.status == "queued"
    assert len(sent) == 2  # one enqueue per sweep, on commit
    assert f"/sweeps/{real.pk}/" in out and f"/sweeps/{simulated.pk}/" in out
    # 4 configurations x (fibonacci + 4 lengths) x 2 concurrencies; 2100 tokens is beyond n_ctx.
    assert Run.objects.filter(sweep=real).count() == 4
    beyond = real.runs.first().points.filter(prompt_tokens=2100)
    assert beyond.count() == 2 and all("2100 + 128 + 16 > 2048" in p.reason for p in beyond)


def test_it_queues_nothing_twice_and_resumes_an_interrupted_demo(catalog, django_capture_on_commit_callbacks):
    demo()
    real = Sweep.objects.get(name="smollm2-cpu-prompt-lookup")
    simulated = Sweep.objects.get(name="qwen3.6-27b-sm120-ddtree")
    Sweep.objects.filter(pk=simulated.pk).update(status="done")
    Sweep.objects.filter(pk=real.pk).update(status="running")  # `make run` stopped mid-way
    with django_capture_on_commit_callbacks() as sent:
        out = demo()
    assert Sweep.objects.count() == 2
    assert "unfinished: resumed" in out and "done already" in out
    assert len(sent) == 1
