
import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from benchmarks.models import LLM, Engine, Host, Sweep, Workload
from runs.models import Point, Run
from sweepcore.metrics import LATENCY_FIELDS


@pytest.fixture
def run(catalog):
    sweep = Sweep.objects.create(
        name="s", spec={}, host=Host.objects.get(name="sim-8x-rtxpro6000"),
        engine=Engine.objects.get(name="sglang-sim"), llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"),
    )
    return Run.objects.create(sweep=sweep, position=0, method="ddtree", params={"topk_cap": 8, "budget": 15}, tp=1)


def test_a_run_keys_its_params_canonically(run):
    assert run.params_key == '{"budget":15,"topk_cap":8}'
    assert run.config_label == "ddtree budget=15 topk_cap=8 TP1"
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(sweep=run.sweep, position=1, method="ddtree", params={"budget": 15, "topk_cap": 8}, tp=1)


def point(run, workload, prompt_tokens, **extra):
    return Point.objects.create(
        run=run, position=0, workload=workload, prompt_tokens=prompt_tokens, max_new_tokens=256, concurrency=1, **extra
    )


def test_a_point_is_unique_per_run_workload_length_and_concurrency(run):
    long_context = Workload.objects.get(name="long-context")
    point(run, long_context, 3000)
    point(run, long_context, 8000)
    with pytest.raises(IntegrityError), transaction.atomic():
        point(run, long_context, 3000)


def test_a_fixed_prompt_point_is_unique_too_although_its_length_is_null(run):
    fibonacci = Workload.objects.get(name="fibonacci")
    point(run, fibonacci, None)
    with pytest.raises(IntegrityError), transaction.atomic():
        point(run, fibonacci, None)


def test_upserting_a_point_on_its_natural_key_does_not_duplicate(run):
    fibonacci = Workload.objects.get(name="fibonacci")
    key = {"run": run, "workload": fibonacci, "prompt_tokens": None, "concurrency": 1}
    for value in (10.0, 12.5):
        Point.objects.update_or_create(**key, defaults={"position": 0, "max_new_tokens": 256, "output_throughput": value})
    assert Point.objects.get(**key).output_throughput == 12.5


def test_measured_latencies_are_plain_columns(run):
    assert len(LATENCY_FIELDS) == 20 and "p99_itl_ms" in LATENCY_FIELDS
    fibonacci = Workload.objects.get(name="fibonacci")
    point(run, fibonacci, None, p99_itl_ms=7.5, median_tpot_ms=6.0)
    assert Point.objects.filter(p99_itl_ms__gt=7).count() == 1


def test_an_engine_argv_must_be_a_list_of_strings(db):
    engine = Engine(name="e", kind="vllm", argv_template="vllm serve", method_args={"beam": ["x"]})
    with pytest.raises(ValidationError) as exc:
        engine.full_clean()
    assert set(exc.value.message_dict) == {"argv_template", "method_args"}
