#!/usr/bin/env python3
"""Sweeplab's intervals and verdicts held against a known truth.

The stub (bench/stub_server.py) runs with ``--itl-jitter lognormal:SIGMA``: every
request's chunks are ``itl * exp(N(0, SIGMA))`` apart, the factor drawn once per request,
so the population median of a request's TPOT is exactly ``--itl-ms`` and that of its
decode speed exactly ``1000 / itl`` tok/s.  Every point is measured by
:mod:`sweepcore.loadgen` (closed loop) and summarised by :func:`sweepcore.metrics.summarize`
as a sweep would be.  Four parts:

1. **coverage**: ``--trials`` points of ``--requests`` requests each; how often the 95 %
   interval of the decode speed and of the TPOT median (``summarize(...)["intervals"]``)
   contains the true median (should be 0.93-0.97), with its binomial standard error; the
   median relative bias of the point medians; the client's own timing error per request
   (measured TPOT minus the gap the stub used for that request, from ``/stats/requests``).
2. **same configuration**: the coverage points taken in pairs (two identical
   configurations measured one after the other by the same worker): how often
   :func:`sweepcore.stats.compare_samples` says ``same`` (should be >= 0.95).
3. **a real difference**: ``--diff-pairs`` pairs of a point at ``itl`` and one at
   ``itl * --diff-factor`` (30 % slower by default): how often the verdict is the right
   ``worse``.
4. **until_stable**: for each SIGMA of ``--stable-sigmas``, ``--stable-trials`` points
   that send requests until the decode speed's interval is within ``--rel-ci`` of its
   median (``LoadConfig.keep_going`` + :func:`sweepcore.metrics.stability`) or
   ``--max-requests`` were sent: the requests at the decision, and how often it hit the cap.

Points run in ``--workers`` processes at once (each its own client: a point's requests
only ever share a client with their own point); the stubs are not load-dependent, so
the workers do not change each other's truth.  Every point is also judged by
:func:`sweepcore.validity.judge` (without the host load: other processes on a shared
development machine are not what this measures), and the verdicts are counted.

The seeds make the stubs' draws reproducible in order, but which request gets which draw
depends on arrival order, so two runs differ by their sampling noise.

Usage: ``python bench/validity.py [--trials 400] [--workers 4] [--quick]`` (loopback only;
~5 minutes on 2 cores with the defaults, ~30 s with ``--quick``).

``--simulate-rules`` runs none of that: it holds the significance rule itself (and the
stricter ones it was chosen from) against seeded lognormal samples, through
:func:`sweepcore.stats.compare_samples` and :func:`sweepcore.stats.median_ci`
(``simulate_rules``; ~1.5 min of CPU).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from peers import Stub  # noqa: E402

from sweepcore import metrics, stats, validity  # noqa: E402
from sweepcore.loadgen import LoadConfig, run_load_sync  # noqa: E402

# --- pure helpers (tested in tests/core/test_bench_validity.py) ----------------------------


def binomial_se(successes: int, trials: int) -> float:
    """Standard error of a proportion ``successes / trials``."""
    if trials <= 0:
        raise ValueError("no trials")
    p = successes / trials
    return math.sqrt(p * (1 - p) / trials)


def contains(interval, truth: float) -> bool | None:
    """Whether ``[lo, hi]`` contains ``truth``; None for no interval."""
    if not interval:
        return None
    lo, hi = interval
    return lo <= truth <= hi


def quantile(values, q: float) -> float | None:
    """Linear-interpolation quantile (q in 0..1), None for no values."""
    return metrics.percentile(list(values), q * 100)


def stable_keep_going(metric: str, rel_ci: float, min_requests: int, decided: list):
    """A ``LoadConfig.keep_going`` for until_stable: go on while fewer than
    ``min_requests`` completed or the interval's relative half-width is above ``rel_ci``
    (or not there yet).  The first "stop" appends (completed, half-width) to ``decided``."""

    def keep_going(results) -> bool:
        if decided:
            return False
        rel, n = metrics.stability(metric, results)
        if n >= min_requests and rel is not None and rel <= rel_ci:
            decided.append((n, rel))
            return False
        return True

    return keep_going


# --- the significance rule, simulated (no stub, no client) -------------------------------------

#: The rules held against each other: (label, called different?, found the slower one?), each
#: from one compare_samples call ``c`` and the two medians' intervals ``ia`` / ``ib``.
RULES = (
    ("Mann-Whitney at 0.05", lambda c, ia, ib: c.p_value < 0.05, lambda c, ia, ib: c.p_value < 0.05 and c.diff_pct > 0),
    ("Mann-Whitney at 0.01", lambda c, ia, ib: c.p_value < 0.01, lambda c, ia, ib: c.p_value < 0.01 and c.diff_pct > 0),
    ("compare_samples (Mann-Whitney at 0.05 and the ratio's interval leaving 1 out)",
     lambda c, ia, ib: c.verdict != stats.Verdict.SAME, lambda c, ia, ib: c.verdict == stats.Verdict.WORSE),
    ("non-overlapping 95 % intervals of the two medians",
     lambda c, ia, ib: ib[0] > ia[1] or ib[1] < ia[0], lambda c, ia, ib: ib[0] > ia[1]),
)


def simulate_rules(test_pairs: int, rule_pairs: int, n: int, sigma: float, factor: float, seed: int) -> dict:
    """What the significance rules do with lognormal TPOT-like values of known truth (seeded,
    so the same arguments print the same rates): the share of ``test_pairs`` identical pairs
    in which compare_samples' Mann-Whitney test alone rejects at 0.05, and for each rule of
    RULES the share of ``rule_pairs`` identical pairs it calls different and of as many
    pairs whose second side is ``factor`` × slower that it calls ``worse``."""
    import numpy as np  # only here: the measuring parts do not need it

    rng = np.random.default_rng(seed)
    draw = lambda pairs: np.exp(rng.normal(0.0, sigma, (pairs, 2, n)))  # noqa: E731
    rejected = sum(stats.compare_samples(a, b, higher_is_better=False, min_requests=1).p_value < 0.05
                   for a, b in draw(test_pairs))
    out = {"test_alone": rejected / test_pairs, "rules": {label: [0, 0] for label, _, _ in RULES}}
    for which, pairs in enumerate((draw(rule_pairs), draw(rule_pairs) * np.array([1.0, factor])[:, None])):
        for a, b in pairs:
            c = stats.compare_samples(a, b, higher_is_better=False, min_requests=1)
            ia, ib = stats.median_ci(a), stats.median_ci(b)
            for label, different, found in RULES:
                out["rules"][label][which] += bool((different, found)[which](c, ia, ib))
    out["rules"] = {label: (d / rule_pairs, f / rule_pairs) for label, (d, f) in out["rules"].items()}
    return out


def report_rules(a) -> None:
    t0 = time.perf_counter()
    r = simulate_rules(a.sim_test_pairs, a.sim_pairs, a.requests, a.sigma, a.diff_factor, a.seed)
    print(f"significance rules on simulated samples: {a.requests} lognormal values a side, sigma {a.sigma:g}, "
          f"seed {a.seed}")
    print(f"   Mann-Whitney alone at 0.05, {a.sim_test_pairs} identical pairs: rejects {r['test_alone'] * 100:.1f} %")
    print(f"   {a.sim_pairs} identical pairs called different / {a.sim_pairs} pairs "
          f"{(a.diff_factor - 1) * 100:.0f} % apart called worse:")
    for label, (different, found) in r["rules"].items():
        print(f"   {label:80s} {different * 100:4.1f} % / {found * 100:4.1f} %")
    print(f"time: {time.perf_counter() - t0:.0f} s")


# --- one point, in a worker process ----------------------------------------------------------


@dataclass
class Point:
    """What a worker sends back of one measured point (plain data)."""

    tag: str
    sent: int
    decode: list  # per completed request, tok/s
    tpot_ms: list  # per completed request
    keys: list  # the prompt of each completed request, for the stub's records
    median_decode: float | None
    median_tpot_ms: float | None
    decode_ci: list | None
    tpot_ci: list | None
    duration: float
    lag_p99_ms: float | None
    client_cpu: float
    validity: str
    reasons: list
    decided: tuple | None = None  # until_stable: (completed, half-width) when it stopped
    final_rel: float | None = None
    measure_s: float = 0.0
    extra: dict = field(default_factory=dict)


def measure(url: str, tag: str, requests: int, concurrency: int, tokens: int,
            stable: tuple | None = None) -> Point:
    """One point of ``requests`` requests (the cap under until_stable, ``stable`` =
    (rel_ci, min_requests)), each prompt distinct (``tag`` + index)."""
    prompts = [f"{tag} request {i}" for i in range(requests)]
    decided: list = []
    keep_going = stable_keep_going("decode_tok_s", stable[0], stable[1], decided) if stable else None
    t0 = time.perf_counter()
    lr = run_load_sync(LoadConfig(base_url=url, model="stub-model", prompts=prompts, max_tokens=tokens,
                                  concurrency=concurrency, num_requests=requests, keep_going=keep_going))
    took = time.perf_counter() - t0
    summary = lr.summary()
    verdict = validity.judge(lr.results, summary, client_cpu_share=lr.client_cpu_fraction,
                             asked_output_tokens=tokens)
    ok = [r for r in lr.results if metrics.is_success(r)]
    iv = summary["intervals"]
    return Point(
        tag=tag, sent=len(lr.results),
        decode=[metrics.request_decode_tok_s(r) for r in ok],
        tpot_ms=[metrics.request_tpot(r) * 1000 for r in ok],
        keys=[prompts[r.index % len(prompts)] for r in ok],
        median_decode=summary["decode_tok_s"], median_tpot_ms=summary["median_tpot_ms"],
        decode_ci=iv.get("decode_tok_s"), tpot_ci=iv.get("median_tpot_ms"),
        duration=lr.duration, lag_p99_ms=lr.event_loop_lag_p99_ms, client_cpu=lr.client_cpu_fraction,
        validity=verdict.validity, reasons=[r.code for r in verdict.reasons],
        decided=decided[0] if decided else None,
        final_rel=metrics.stability("decode_tok_s", lr.results)[0] if stable else None,
        measure_s=took,
    )


def measure_pair(a: tuple, b: tuple) -> tuple[Point, Point]:
    """Two points one after the other (same worker): ``a`` then ``b``, each measure()'s args."""
    return measure(*a), measure(*b)


# --- the parts ----------------------------------------------------------------------------


def fmt(x, spec=".3f", none="–"):
    return none if x is None else format(x, spec)


def verdict_line(points: list[Point]) -> str:
    counts = Counter(p.validity for p in points)
    reasons = Counter(code for p in points for code in p.reasons)
    line = ", ".join(f"{k} {counts[k]}" for k in ("valid", "suspect", "invalid") if counts[k])
    if reasons:
        line += "; reasons: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common())
    return line


def client_error(points: list[Point], stub: Stub) -> tuple[int, float | None, float | None, float | None]:
    """(requests matched, median, p99 of |error| in µs, median relative error) of measured
    TPOT against the gap the stub used for that request."""
    gap = {r[0]: r[5] for r in stub.requests() if len(r) > 5}
    errs, rel = [], []
    for p in points:
        for key, tpot in zip(p.keys, p.tpot_ms):
            if key in gap:
                errs.append((tpot - gap[key]) * 1000)
                rel.append((tpot - gap[key]) / gap[key])
    if not errs:
        return 0, None, None, None
    return (len(errs), statistics.median(errs), quantile([abs(e) for e in errs], 0.99),
            statistics.median(rel))


def compare(a: Point, b: Point, metric: str, alpha: float) -> stats.Comparison:
    values = {"decode_tok_s": (a.decode, b.decode), "median_tpot_ms": (a.tpot_ms, b.tpot_ms)}[metric]
    return stats.compare_samples(values[0], values[1], higher_is_better=metrics.higher_is_better(metric),
                                 alpha=alpha, min_requests=validity.Thresholds().min_requests)


def report_coverage(points: list[Point], itl_ms: float, stub: Stub, args) -> None:
    truth = {"decode_tok_s": 1000.0 / itl_ms, "median_tpot_ms": itl_ms}
    print(f"\n1. coverage of the 95 % intervals of the median: {len(points)} points of {args.requests} requests "
          f"at concurrency {args.concurrency}, {args.tokens} tokens, itl {itl_ms:g} ms x lognormal "
          f"sigma {args.sigma:g}")
    print(f"   true medians: decode {truth['decode_tok_s']:.2f} tok/s, TPOT {itl_ms:g} ms")
    for metric, get_ci, get_med in (("decode_tok_s", lambda p: p.decode_ci, lambda p: p.median_decode),
                                    ("median_tpot_ms", lambda p: p.tpot_ci, lambda p: p.median_tpot_ms)):
        hits = [contains(get_ci(p), truth[metric]) for p in points]
        with_ci = [h for h in hits if h is not None]
        covered = sum(with_ci)
        bias = statistics.median((get_med(p) - truth[metric]) / truth[metric] for p in points)
        widths = [(get_ci(p)[1] - get_ci(p)[0]) / 2 / truth[metric] for p in points if get_ci(p)]
        cov = covered / len(with_ci) if with_ci else None
        valid = [h for h, p in zip(hits, points) if h is not None and p.validity == "valid"]
        print(f"   {metric:15s} coverage {fmt(cov)} ± {fmt(binomial_se(covered, len(with_ci)) if with_ci else None)} "
              f"(SE; {covered}/{len(with_ci)}; {len(hits) - len(with_ci)} without an interval; valid points only "
              f"{fmt(sum(valid) / len(valid) if valid else None)} of {len(valid)}), "
              f"median half-width ±{statistics.median(widths) * 100:.1f} %, "
              f"median bias of the point median {bias * 100:+.2f} %")
    n, med_us, p99_us, rel = client_error(points, stub)
    print(f"   client timing: measured TPOT - the stub's gap, over {n} requests: median {fmt(med_us, '+.1f')} µs "
          f"({fmt(None if rel is None else rel * 100, '+.3f')} %), p99 |error| {fmt(p99_us, '.1f')} µs")
    print(f"   point verdicts (validity.judge, host load left out): {verdict_line(points)}")
    print(f"   point window: median {statistics.median(p.duration for p in points):.2f} s; "
          f"client event-loop lag p99, median over points {fmt(statistics.median(p.lag_p99_ms or 0 for p in points), '.2f')} ms")


def report_pairs(pairs: list[tuple[Point, Point]], expect: str, title: str, alpha: float) -> None:
    print(f"\n{title}")
    for metric in ("decode_tok_s", "median_tpot_ms"):
        verdicts = Counter()
        ps = []
        both_valid = right_valid = 0
        for a, b in pairs:
            c = compare(a, b, metric, alpha)
            verdicts[c.verdict] += 1
            if a.validity == b.validity == "valid":
                both_valid += 1
                right_valid += c.verdict == expect
            if c.verdict == stats.Verdict.SAME and c.noise_pct is not None:
                ps.append(c.noise_pct)
        right = verdicts[expect]
        line = ", ".join(f"{v} {verdicts[v]}" for v in stats.Verdict.ALL if verdicts[v])
        noise = f"; median 'within noise' ±{statistics.median(ps):.1f} %" if ps else ""
        print(f"   {metric:15s} '{expect}' {right}/{len(pairs)} = {right / len(pairs):.3f} "
              f"± {binomial_se(right, len(pairs)):.3f} (SE)  [{line}]{noise}; both points valid: "
              f"{right_valid}/{both_valid}")


def report_stable(sigma: float, points: list[Point], itl_ms: float, args) -> None:
    decided = [p.decided[0] for p in points if p.decided]
    at_cap = [p for p in points if not p.decided]
    used = [p.decided[0] if p.decided else p.sent for p in points]
    truth = 1000.0 / itl_ms
    covered = [contains(p.decode_ci, truth) for p in points]
    covered = [c for c in covered if c is not None]
    rels = [p.final_rel for p in points if p.final_rel is not None]
    print(f"   sigma {sigma:<5g} requests at the stop: median {statistics.median(used):g}, "
          f"p90 {quantile(used, 0.9):g} (sent incl. in flight: median {statistics.median(p.sent for p in points):g}); "
          f"hit max_requests {len(at_cap)}/{len(points)}; half-width at the end: median "
          f"±{fmt(None if not rels else statistics.median(rels) * 100, '.1f')} %; "
          f"coverage of the final interval {sum(covered)}/{len(covered)}"
          + (f"; stable ones stopped at {min(decided)}–{max(decided)}" if decided else ""))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=400, help="coverage points (taken in pairs for part 2)")
    p.add_argument("--requests", type=int, default=20, help="requests per coverage point")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--tokens", type=int, default=24, help="output tokens per request")
    p.add_argument("--itl-ms", type=float, default=10.0)
    p.add_argument("--sigma", type=float, default=0.25, help="lognormal sigma of the per-request gap")
    p.add_argument("--diff-pairs", type=int, default=200)
    p.add_argument("--diff-factor", type=float, default=1.3, help="the slower point's itl / itl")
    p.add_argument("--stable-trials", type=int, default=40, help="until_stable points per sigma")
    p.add_argument("--stable-sigmas", default="0.1,0.25,0.5")
    p.add_argument("--rel-ci", type=float, default=0.05)
    p.add_argument("--min-requests", type=int, default=5)
    p.add_argument("--max-requests", type=int, default=50)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--workers", type=int, default=4, help="points measured at once, one process each")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--skip", default="", help="comma-separated parts to skip: coverage,diff,stable")
    p.add_argument("--quick", action="store_true", help="a smoke run: 20 trials, 10 pairs, 4 stable trials")
    p.add_argument("--simulate-rules", action="store_true",
                   help="only simulate the significance rules on --requests lognormal values of --sigma a side "
                        "(no stub): the README's rates behind compare_samples")
    p.add_argument("--sim-test-pairs", type=int, default=20000, help="identical pairs for the test alone")
    p.add_argument("--sim-pairs", type=int, default=1000, help="pairs of each kind for the table of rules")
    a = p.parse_args(argv)
    if a.quick:
        a.trials, a.diff_pairs, a.stable_trials = 20, 10, 4
    try:
        sigmas = [float(s) for s in a.stable_sigmas.split(",") if s.strip()]
    except ValueError:
        p.error(f"--stable-sigmas takes numbers separated by commas, not {a.stable_sigmas!r}")
    skip = {s.strip() for s in a.skip.split(",") if s.strip()}
    if skip - {"coverage", "diff", "stable"}:
        p.error(f"--skip takes coverage, diff, stable; not {', '.join(sorted(skip - {'coverage', 'diff', 'stable'}))}")
    if a.trials < 2 or a.trials % 2:
        p.error("--trials must be an even number >= 2 (part 2 takes them in pairs)")
    if a.requests < stats.MIN_CI_SAMPLES:
        p.error(f"--requests must be at least {stats.MIN_CI_SAMPLES} for an interval")
    for name in ("concurrency", "tokens", "diff_pairs", "stable_trials", "workers", "max_requests"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.tokens < 2:
        p.error("--tokens must be >= 2 (a decode speed needs two tokens)")

    if a.simulate_rules:
        if min(a.sim_test_pairs, a.sim_pairs) < 1:
            p.error("--sim-test-pairs and --sim-pairs must be >= 1")
        report_rules(a)
        return 0
    print(f"bench/validity.py: {os.cpu_count()} cores, {a.workers} worker processes, alpha {a.alpha:g}")
    started = time.perf_counter()
    timings = {}
    slow_itl = a.itl_ms * a.diff_factor
    stubs = {}
    try:
        stubs["base"] = Stub("--itl-ms", str(a.itl_ms), "--itl-jitter", f"lognormal:{a.sigma}", "--seed", str(a.seed))
        stubs["slow"] = Stub("--itl-ms", str(slow_itl), "--itl-jitter", f"lognormal:{a.sigma}",
                             "--seed", str(a.seed + 1))
        for i, s in enumerate(sigmas):
            stubs[f"sigma{s}"] = Stub("--itl-ms", str(a.itl_ms), "--itl-jitter", f"lognormal:{s}",
                                      "--seed", str(a.seed + 2 + i))
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=a.workers, mp_context=ctx) as pool:
            base = stubs["base"].url
            if "coverage" not in skip:
                t0 = time.perf_counter()
                pairs = list(pool.map(measure_pair, *zip(*[
                    ((base, f"cov {2 * j}", a.requests, a.concurrency, a.tokens),
                     (base, f"cov {2 * j + 1}", a.requests, a.concurrency, a.tokens))
                    for j in range(a.trials // 2)])))
                timings["coverage + same-configuration pairs"] = time.perf_counter() - t0
                report_coverage([pt for pair in pairs for pt in pair], a.itl_ms, stubs["base"], a)
                report_pairs(pairs, stats.Verdict.SAME,
                             f"2. two identical configurations measured one after the other: {len(pairs)} pairs "
                             f"(compare_samples: Mann-Whitney at alpha {a.alpha:g} and the ratio's interval leaving 1 out)", a.alpha)
            if "diff" not in skip:
                t0 = time.perf_counter()
                slow = stubs["slow"].url
                pairs = list(pool.map(measure_pair, *zip(*[
                    ((base, f"diff {j} base", a.requests, a.concurrency, a.tokens),
                     (slow, f"diff {j} slow", a.requests, a.concurrency, a.tokens))
                    for j in range(a.diff_pairs)])))
                timings["real difference"] = time.perf_counter() - t0
                report_pairs(pairs, stats.Verdict.WORSE,
                             f"3. a real difference: itl {a.itl_ms:g} ms (baseline) vs {slow_itl:g} ms "
                             f"({(a.diff_factor - 1) * 100:+.0f} % TPOT), {len(pairs)} pairs, "
                             f"{a.requests} requests each", a.alpha)
                print(f"   point verdicts: {verdict_line([pt for pair in pairs for pt in pair])}")
            if "stable" not in skip:
                t0 = time.perf_counter()
                print(f"\n4. until_stable: decode_tok_s, rel_ci {a.rel_ci:g}, min {a.min_requests}, max "
                      f"{a.max_requests} requests, concurrency {a.concurrency}, {a.stable_trials} points per sigma")
                jobs = {s: [pool.submit(measure, stubs[f"sigma{s}"].url, f"stable {s} {j}", a.max_requests,
                                        a.concurrency, a.tokens, (a.rel_ci, a.min_requests))
                            for j in range(a.stable_trials)] for s in sigmas}
                everything = []
                for s in sigmas:
                    points = [f.result() for f in jobs[s]]
                    everything += points
                    report_stable(s, points, a.itl_ms, a)
                print(f"   point verdicts: {verdict_line(everything)}")
                timings["until_stable"] = time.perf_counter() - t0
    except RuntimeError as e:
        print(f"bench/validity.py: {e}", file=sys.stderr)
        return 1
    finally:
        for s in stubs.values():
            s.close()
    print("\ntime: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
          + f"; total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
