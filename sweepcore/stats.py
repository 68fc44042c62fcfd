"""Spread and significance: the intervals every point carries and the test every
comparison makes.  Pure (NumPy and SciPy only), no Django.

Intervals (95 %, of the median)
-------------------------------
* Per-request metrics (decode speed, TTFT, TPOT, E2EL): a distribution-free
  order-statistic interval -- the ranks k and n-k+1 whose binomial coverage is the
  smallest that still reaches 95 % -- interpolated between that pair and the next
  narrower one (Hettmansperger & Sheather, 1986) so that its coverage is close to 95 %
  rather than anywhere between 95 and 99 %.  It needs at least :data:`MIN_CI_SAMPLES`
  values (with five, even the whole range covers the median only 94 % of the time).
* ITL pools every gap of every request, and the gaps of one request are not
  independent: its interval is a seeded percentile bootstrap that resamples whole
  requests (:data:`BOOTSTRAP_RESAMPLES` resamples, seed :data:`BOOTSTRAP_SEED`).

Significance
------------
:func:`compare_samples` decides ``better`` / ``worse`` only when a two-sided
Mann-Whitney U test on the two points' per-request values rejects "same distribution"
at ``alpha`` *and* the bootstrap interval of the ratio of their medians leaves 1 out;
otherwise ``same`` ("within noise: ±x %", x from the bootstrap interval of
the ratio of medians); ``insufficient`` when either side has fewer than ``min_requests``
values or its verdict is not valid.  The same function answers history's regression
question against a trailing window's pooled requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
MIN_CI_SAMPLES = 6
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261203
#: Above this many pooled values a bootstrap uses fewer resamples (its cost is linear).
BOOTSTRAP_LARGE = 200_000


def _binom_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return float(sps.binom.cdf(k, n, 0.5))


def median_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The interpolated order-statistic interval of the median of ``values``; None with
    fewer than :data:`MIN_CI_SAMPLES` values."""
    xs = sorted(float(v) for v in values if v is not None and math.isfinite(v))
    n = len(xs)
    if n < MIN_CI_SAMPLES:
        return None

    def coverage(k: int) -> float:  # of [x_(k), x_(n-k+1)], ranks from 1
        return 1.0 - 2.0 * _binom_cdf(k - 1, n)

    # k: the largest rank (up to the middle) whose interval still covers ``confidence``;
    # coverage falls as k grows, so it is the run of candidates 2, 3, ... that cover it
    # (their binomial terms in one call: one per k was most of an import's time).
    candidates = np.arange(2, (n + 1) // 2 + 1)
    covers = 1.0 - 2.0 * sps.binom.cdf(candidates - 1, n, 0.5) >= confidence
    k = 1 + (len(covers) if covers.all() else int(np.argmin(covers)))
    lo, hi = xs[k - 1], xs[n - k]
    cov_k = coverage(k)
    if cov_k > confidence and k + 1 <= n - k:
        cov_next = coverage(k + 1)
        share = (cov_k - confidence) / (cov_k - cov_next)
        lam = (n - k) * share / (k + (n - 2 * k) * share)
        lo = lam * xs[k] + (1 - lam) * xs[k - 1]
        hi = lam * xs[n - k - 1] + (1 - lam) * xs[n - k]
    return (lo, hi)


def _rng() -> np.random.Generator:
    return np.random.default_rng(BOOTSTRAP_SEED)


def pooled_median_ci(groups: Sequence[Sequence[float]], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Bootstrap interval of the median of all values pooled, resampling whole groups
    (a request's ITL gaps are one group).  None with fewer than MIN_CI_SAMPLES groups."""
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if len(arrays) < MIN_CI_SAMPLES:
        return None
    total = sum(len(a) for a in arrays)
    resamples = BOOTSTRAP_RESAMPLES if total <= BOOTSTRAP_LARGE else 200
    rng = _rng()
    picks = (rng.integers(0, len(arrays), len(arrays)) for _ in range(resamples))  # one draw each, as ever
    medians = _pooled_medians(arrays, picks)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(medians, [tail, 100 - tail])
    return (float(lo), float(hi))


#: Resamples × pooled values whose medians are taken at once (a few matrices of that many
#: 4-byte counts: about 4 MB each).
POOLED_BLOCK = 1_000_000


def _pooled_medians(arrays: list[np.ndarray], picks) -> np.ndarray:
    """np.median of each pick's groups concatenated, a block of picks at once: a pick's
    pool is every value of group g taken as often as g was picked, so its median is read
    off the values sorted once, each weighted by its group's count in the pick (the middle
    one, or the mean of the middle two, exactly as np.median takes them)."""
    values = np.concatenate(arrays)
    group = np.repeat(np.arange(len(arrays)), [len(a) for a in arrays])
    order = np.argsort(values, kind="stable")
    values, group = values[order], group[order]
    block = max(1, POOLED_BLOCK // len(values))
    medians, counts = [], []
    for pick in picks:
        counts.append(np.bincount(pick, minlength=len(arrays)))
        if len(counts) == block:
            medians.append(_weighted_medians(values, group, counts))
            counts = []
    if counts:
        medians.append(_weighted_medians(values, group, counts))
    return np.concatenate(medians)


def _weighted_medians(values: np.ndarray, group: np.ndarray, counts: list[np.ndarray]) -> np.ndarray:
    ranks = np.cumsum(np.asarray(counts, dtype=np.int32)[:, group], axis=1, dtype=np.int32)  # values up to each
    size = ranks[:, -1]
    lower = (ranks < ((size + 1) // 2)[:, None]).sum(axis=1)  # index of the (size+1)//2-th value
    upper = (ranks < (size // 2 + 1)[:, None]).sum(axis=1)  # of the size//2+1-th
    return np.where(size % 2 == 1, values[lower], (values[lower] + values[upper]) / 2)


def relative_half_width(interval: tuple[float, float] | None, centre: float | None) -> float | None:
    """Half the interval's width over |centre| (0.05 = "±5 %"); None when either is missing."""
    if interval is None or centre is None or centre == 0:
        return None
    return (interval[1] - interval[0]) / 2 / abs(centre)


def ratio_ci(baseline: Sequence[float], value: Sequence[float],
             confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Seeded percentile-bootstrap interval of median(value) / median(baseline), each
    side resampled on its own.  None when either side has fewer than MIN_CI_SAMPLES."""
    a = np.asarray([v for v in baseline if v is not None], dtype=float)
    b = np.asarray([v for v in value if v is not None], dtype=float)
    if len(a) < MIN_CI_SAMPLES or len(b) < MIN_CI_SAMPLES:
        return None
    rng = _rng()
    ma = np.median(a[rng.integers(0, len(a), (BOOTSTRAP_RESAMPLES, len(a)))], axis=1)
    mb = np.median(b[rng.integers(0, len(b), (BOOTSTRAP_RESAMPLES, len(b)))], axis=1)
    keep = ma != 0
    if not keep.any():
        return None
    ratios = mb[keep] / ma[keep]
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return (float(lo), float(hi))


class Verdict:
    """What a comparison concluded (the strings the API and the pages use)."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"
    INSUFFICIENT = "insufficient"
    ALL = ("better", "worse", "same", "insufficient")


@dataclass(frozen=True)
class Comparison:
    verdict: str
    p_value: float | None
    diff_pct: float | None  # (median(value) / median(baseline) - 1) * 100
    ratio_ci: tuple[float, float] | None  # of median(value) / median(baseline)
    reason: str  # the verdict in words

    @property
    def noise_pct(self) -> float | None:
        """The ± of "within noise": the larger distance of the ratio interval from 1."""
        if self.ratio_ci is None:
            return None
        return max(abs(self.ratio_ci[1] - 1), abs(1 - self.ratio_ci[0])) * 100


def compare_samples(baseline: Sequence[float], value: Sequence[float], *, higher_is_better: bool,
                    alpha: float = 0.05, min_requests: int = 5,
                    baseline_valid: bool = True, value_valid: bool = True,
                    not_valid_reason: str = "") -> Comparison:
    """The verdict of ``value`` against ``baseline`` from their per-request samples."""
    a = [float(v) for v in baseline if v is not None and math.isfinite(v)]
    b = [float(v) for v in value if v is not None and math.isfinite(v)]
    ma = float(np.median(a)) if a else None
    mb = float(np.median(b)) if b else None
    diff = (mb / ma - 1) * 100 if (ma and mb is not None) else None
    if not (baseline_valid and value_valid):
        which = "the baseline" if not baseline_valid else "this point"
        if not (baseline_valid or value_valid):
            which = "neither point"
        reason = not_valid_reason or f"{which} is not valid"
        return Comparison(Verdict.INSUFFICIENT, None, diff, None, reason)
    if len(a) < min_requests or len(b) < min_requests:
        return Comparison(Verdict.INSUFFICIENT, None, diff, None,
                          f"{len(a)} vs {len(b)} requests: at least {min_requests} on each side are needed")
    p = float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    interval = ratio_ci(a, b)
    # Both must agree: the rank test, and the interval of the ratio of medians leaving 1
    # out (where there are enough values for one). Either alone calls about 5 % of
    # identical pairs different; together 1.5 % of 200 in bench/validity.py (2.2 % of 1000
    # simulated: bench/validity.py --simulate-rules).
    excludes_one = interval is None or interval[0] > 1 or interval[1] < 1
    if p >= alpha or not excludes_one or diff is None or diff == 0:
        noise = Comparison(Verdict.SAME, p, diff, interval, "").noise_pct
        words = f"within noise: ±{noise:.1f} %" if noise is not None else "within noise"
        why = (f"Mann-Whitney p = {p:.2g} ≥ {alpha:g}" if p >= alpha else
               f"p = {p:.2g}, but the ratio's 95 % interval {interval[0]:.3f}–{interval[1]:.3f} includes 1")
        return Comparison(Verdict.SAME, p, diff, interval, f"{words} ({why})")
    up = diff > 0
    verdict = Verdict.BETTER if up == higher_is_better else Verdict.WORSE
    return Comparison(verdict, p, diff, interval, f"{diff:+.1f} % (Mann-Whitney p = {p:.2g} < {alpha:g})")
