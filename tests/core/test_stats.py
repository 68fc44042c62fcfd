"""sweepcore.stats: intervals of the median and the significance of a difference."""

import random

import pytest

from sweepcore import stats


def lognormal(rng, n, median=1.0, sigma=0.3):
    return [median * rng.lognormvariate(0, sigma) for _ in range(n)]


def test_median_ci_needs_six_values():
    assert stats.median_ci([1, 2, 3, 4, 5]) is None
    assert stats.median_ci([1, 2, 3, 4, 5, 6]) is not None


def test_median_ci_of_six_values_is_their_range():
    # With six values only the whole range reaches 95 % (96.9 %); the next pair, 78 %,
    # is interpolated towards but the interval stays inside the range.
    lo, hi = stats.median_ci([6, 1, 5, 2, 4, 3])
    assert 1 <= lo < 2 and 5 < hi <= 6


def test_median_ci_brackets_the_sample_median_and_narrows_with_n():
    rng = random.Random(3)
    small, large = lognormal(rng, 10), lognormal(rng, 200)
    for values in (small, large):
        lo, hi = stats.median_ci(values)
        ordered = sorted(values)
        median = (ordered[len(values) // 2 - 1] + ordered[len(values) // 2]) / 2
        assert lo <= median <= hi
    assert (stats.median_ci(large)[1] - stats.median_ci(large)[0]) < (stats.median_ci(small)[1] - stats.median_ci(small)[0])


@pytest.mark.parametrize("n", [8, 20, 45])
def test_median_ci_covers_the_true_median_95_percent_of_the_time(n):
    rng = random.Random(n)
    trials = 3000
    covered = 0
    for _ in range(trials):
        lo, hi = stats.median_ci(lognormal(rng, n, median=7.0))
        covered += lo <= 7.0 <= hi
    # 3000 trials: the standard error of the coverage is 0.4 %.
    assert 0.935 <= covered / trials <= 0.965


def test_median_ci_ignores_missing_values():
    assert stats.median_ci([None, 1, 2, 3, 4, 5, 6, float("nan")]) == stats.median_ci([1, 2, 3, 4, 5, 6])


def test_pooled_median_ci_resamples_whole_groups():
    rng = random.Random(5)
    # Each group is one request's gaps: all alike within a request, different between.
    groups = [[rng.lognormvariate(0, 0.3)] * 50 for _ in range(30)]
    lo, hi = stats.pooled_median_ci(groups)
    assert lo < 1.0 < hi
    # Treating the 1,500 gaps as independent would give a far narrower interval.
    flat = stats.median_ci([g for group in groups for g in group])
    assert (hi - lo) > 3 * (flat[1] - flat[0])


def test_pooled_median_ci_is_seeded():
    groups = [[i, i + 1, i + 2] for i in range(10)]
    assert stats.pooled_median_ci(groups) == stats.pooled_median_ci(groups)
    assert stats.pooled_median_ci(groups[:5]) is None


@pytest.mark.parametrize("seed", range(6))
def test_pooled_medians_at_once_are_np_median_of_each_resample(seed):
    """The bootstrap's medians taken at once equal np.median of each resample's groups
    concatenated, to the bit: ties, empty and odd/even pools included."""
    import numpy as np

    rng = random.Random(seed)
    arrays = []
    for _ in range(rng.choice([6, 7, 40, 133])):
        size = rng.choice([1, 2, 3, 16, rng.randint(1, 40)])
        values = [round(rng.random(), 1) for _ in range(size)] if seed % 2 else \
            [rng.lognormvariate(0, 1) for _ in range(size)]
        arrays.append(np.asarray(values))
    draw = np.random.default_rng(seed)
    picks = [draw.integers(0, len(arrays), len(arrays)) for _ in range(300)]
    expected = [np.median(np.concatenate([arrays[j] for j in pick])) for pick in picks]
    assert stats._pooled_medians(arrays, iter(picks)).tolist() == expected


def test_pooled_median_ci_is_the_same_whatever_the_block_of_resamples_taken_at_once(monkeypatch):
    rng = random.Random(3)
    groups = [[rng.lognormvariate(0, 0.5) for _ in range(rng.randint(0, 20))] for _ in range(60)]
    default = stats.pooled_median_ci(groups)
    monkeypatch.setattr(stats, "POOLED_BLOCK", 1)  # one resample at a time
    assert stats.pooled_median_ci(groups) == default
    monkeypatch.setattr(stats, "POOLED_BLOCK", 10**9)  # all at once
    assert stats.pooled_median_ci(groups) == default


def test_relative_half_width():
    assert stats.relative_half_width((95.0, 105.0), 100.0) == pytest.approx(0.05)
    assert stats.relative_half_width(None, 100.0) is None
    assert stats.relative_half_width((1.0, 2.0), 0) is None


def test_ratio_ci_contains_the_true_ratio():
    rng = random.Random(8)
    lo, hi = stats.ratio_ci(lognormal(rng, 40, 10.0, 0.2), lognormal(rng, 40, 13.0, 0.2))
    assert lo < 1.3 < hi
    assert stats.ratio_ci([1, 2, 3], lognormal(rng, 40)) is None


def test_identical_distributions_are_the_same_within_noise():
    rng = random.Random(11)
    c = stats.compare_samples(lognormal(rng, 30), lognormal(rng, 30), higher_is_better=True)
    assert c.verdict == stats.Verdict.SAME
    assert c.p_value >= 0.05
    assert c.reason.startswith("within noise: ±") and c.noise_pct > 0


@pytest.mark.parametrize("higher_is_better, verdict", [(True, "better"), (False, "worse")])
def test_a_30_percent_increase_is_significant(higher_is_better, verdict):
    rng = random.Random(12)
    c = stats.compare_samples(lognormal(rng, 20, 10.0, 0.2), lognormal(rng, 20, 13.0, 0.2),
                              higher_is_better=higher_is_better)
    assert c.verdict == verdict
    assert c.p_value < 0.05
    assert c.ratio_ci[0] < 1.3 < c.ratio_ci[1]


def test_a_30_percent_decrease_of_a_speed_is_worse():
    rng = random.Random(13)
    c = stats.compare_samples(lognormal(rng, 20, 13.0, 0.2), lognormal(rng, 20, 10.0, 0.2), higher_is_better=True)
    assert c.verdict == "worse"


def test_too_few_requests_is_insufficient():
    c = stats.compare_samples([1, 2, 3, 4], [10, 11, 12, 13, 14], higher_is_better=True, min_requests=5)
    assert c.verdict == "insufficient"
    assert "4 vs 5 requests" in c.reason and c.p_value is None


def test_a_side_that_is_not_valid_is_insufficient_whatever_the_difference():
    a, b = list(range(10, 40)), list(range(100, 130))
    c = stats.compare_samples(a, b, higher_is_better=True, value_valid=False)
    assert c.verdict == "insufficient" and "this point is not valid" in c.reason
    c = stats.compare_samples(a, b, higher_is_better=True, baseline_valid=False, value_valid=False)
    assert "neither point" in c.reason
