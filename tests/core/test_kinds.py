"""The kinds and statuses of sweepcore.kinds: StrEnums whose members are their values and
carry a label, and the failure classifier speaks them. Pure: no Django."""

import pytest

from sweepcore.failures import DETERMINISTIC, RULES, classify
from sweepcore.kinds import FailureKind, PointStatus, RunStatus, SweepStatus
from sweepcore.plan import PlannedPoint, PlannedRun

LABELLED = (FailureKind, SweepStatus, RunStatus, PointStatus)


@pytest.mark.parametrize("enum", LABELLED, ids=lambda e: e.__name__)
def test_members_are_their_values_and_carry_a_label(enum):
    for member in enum:
        assert member == member.value and f"{member}" == member.value and isinstance(member, str)
        assert enum(member.value) is member
        assert member.label
    assert len({m.label for m in enum}) == len(enum)


def test_the_statuses_are_the_ones_the_design_names():
    assert [s.value for s in PointStatus] == [
        "planned", "ok", "failed", "crashed", "timeout", "context_overflow", "skipped", "not_run"]
    assert [s.value for s in RunStatus] == [
        "planned", "queued", "starting", "running", "done", "crashed", "failed", "skipped", "cancelled"]
    assert [s.value for s in SweepStatus] == ["draft", "queued", "running", "done", "cancelled"]


def test_the_classifier_answers_with_failure_kinds():
    assert all(isinstance(rule.kind, FailureKind) for rule in RULES)
    assert DETERMINISTIC <= set(FailureKind)
    assert classify("RuntimeError: CUDA error: an illegal instruction was encountered").kind is (
        FailureKind.CUDA_ILLEGAL_INSTRUCTION)
    assert classify("", returncode=-9).kind is FailureKind.KILLED
    assert classify("nothing to see").kind is FailureKind.UNKNOWN


def test_planned_runs_and_points_start_planned():
    assert PlannedRun("autoregressive", {}, 1).status is RunStatus.PLANNED
    assert PlannedPoint("fibonacci", None, 1, 16).status is PointStatus.PLANNED
