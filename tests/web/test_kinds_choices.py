"""The Django choices are built from sweepcore's definitions: the same names, values, labels
and order (so no migration), and the classes keep their names."""

import pytest

from benchmarks import models as benchmarks_models
from runs import models as runs_models
from sweepcore import kinds
from sweepcore.methods import REGISTRY, constant_name


@pytest.mark.parametrize(
    "choices, enum",
    [
        (benchmarks_models.FailureKind, kinds.FailureKind),
        (benchmarks_models.SweepStatus, kinds.SweepStatus),
        (runs_models.RunStatus, kinds.RunStatus),
        (runs_models.PointStatus, kinds.PointStatus),
    ],
    ids=lambda v: v.__name__,
)
def test_the_django_choices_equal_the_enums(choices, enum):
    assert choices.__name__ == enum.__name__
    assert choices.choices == [(m.value, m.label) for m in enum]
    assert [m.name for m in choices] == [m.name for m in enum]
    assert all(choices[m.name] == m for m in enum)


def test_the_method_choices_are_the_registry():
    method = benchmarks_models.Method
    assert method.__name__ == "Method"
    assert method.choices == [(m.name, m.label) for m in REGISTRY]
    assert [m.name for m in method] == [constant_name(m.name) for m in REGISTRY]
    assert method.PROMPT_LOOKUP == "prompt-lookup" and method.SPECULATIVE.label.startswith("Speculative")


def test_the_model_fields_offer_those_choices():
    run = runs_models.Run
    assert run._meta.get_field("status").choices == runs_models.RunStatus.choices
    assert run._meta.get_field("method").choices == benchmarks_models.Method.choices
    assert run._meta.get_field("failure_kind").choices == benchmarks_models.FailureKind.choices
    assert runs_models.Point._meta.get_field("status").choices == runs_models.PointStatus.choices
