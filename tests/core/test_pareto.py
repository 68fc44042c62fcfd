"""sweepcore.pareto: the points no other point beats on both axes."""

import random

import pytest

from sweepcore.pareto import pareto_front


def brute_force(points):
    """The front by definition: every pair compared."""
    def dominates(q, p):
        return q[0] >= p[0] and q[1] >= p[1] and (q[0] > p[0] or q[1] > p[1])
    return {i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)}


def test_no_points_and_one_point():
    assert pareto_front([]) == []
    assert pareto_front([(3.0, 4.0)]) == [0]


def test_dominated_points_are_left_out_and_the_front_is_ordered_by_x():
    points = [(10.0, 100.0), (20.0, 80.0), (15.0, 70.0), (5.0, 120.0), (20.0, 60.0), (1.0, 50.0)]
    # (15, 70) loses to (20, 80); (20, 60) to (20, 80) at the same x; (1, 50) to all but none.
    assert pareto_front(points) == [3, 0, 1]


def test_a_point_beaten_on_one_axis_and_tied_on_the_other_is_dominated():
    assert pareto_front([(10.0, 5.0), (10.0, 7.0)]) == [1]
    assert pareto_front([(8.0, 7.0), (10.0, 7.0)]) == [1]


def test_equal_points_do_not_dominate_each_other():
    assert pareto_front([(10.0, 5.0), (4.0, 9.0), (10.0, 5.0)]) == [1, 0, 2]


def test_a_point_better_on_both_axes_is_the_whole_front():
    assert pareto_front([(1.0, 2.0), (3.0, 1.0), (5.0, 6.0), (2.0, 5.0)]) == [2]


def test_agrees_with_the_definition_on_random_points():
    rng = random.Random(7)
    for _ in range(200):
        # Few distinct values, so that ties on one axis are common.
        points = [(float(rng.randint(0, 6)), float(rng.randint(0, 6))) for _ in range(rng.randint(1, 12))]
        front = pareto_front(points)
        assert set(front) == brute_force(points)
        assert [points[i] for i in front] == sorted(points[i] for i in front)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_value_that_is_not_a_finite_number_is_refused(bad):
    with pytest.raises(ValueError, match="not a finite point"):
        pareto_front([(1.0, 2.0), (bad, 1.0)])
