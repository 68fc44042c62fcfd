#!/usr/bin/env python3
"""What a capacity search costs against a fixed grid of the same resolution.

For each configuration and SLO it runs the capacity search the worker runs
(:mod:`sweepcore.capacity`: bracketing by doubling, then bisection) against a real
simengine process: every probe is a closed loop at the probed concurrency for
``--duration`` model seconds, driven by :mod:`sweepcore.loadgen` and judged by
:mod:`sweepcore.slo` exactly as the executor judges a point. It prints each search's
probes, the time they took in the model's time (what the same search would take on the
GPU host simengine models: the probes' measured windows plus the cool-down between them)
and the capacity found beside the simulator's known one
(``simengine.model.max_concurrency_within``); then the grid over the same range at the
same resolution (``sweepcore.capacity.grid_probes``) and its time at the search's own mean
time per probe -- the grid is counted, not run (it would take 10x longer to run), and the
search's probes at high concurrency are its most expensive, so that estimate favours the
search less than a grid run would.

Each probe leaves its ramp out of its statistics as the spec's ``steady_state`` does
(``--skip-first 0.2 --skip-last 0.1``; 0 and 0 measure every request).

Usage: ``python bench/search_cost.py [--scale 0.2] [--duration 40] [--quick]`` (~5 min;
``--quick``: one configuration and SLO, ~40 s). Loopback only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simengine import model  # noqa: E402
from sweepcore import capacity, metrics, slo  # noqa: E402
from sweepcore.loadgen import LoadConfig, run_load_sync  # noqa: E402
from sweepcore.prompts import FIBONACCI_PROMPT  # noqa: E402
from sweepcore.server import ServerProcess, free_port  # noqa: E402

OUTPUT_TOKENS = 64
CONFIGS = {
    "autoregressive": (None, None, ()),
    "ddtree budget 15": ("DDTREE", {"budget": 15}, ("--speculative-algorithm", "DDTREE",
                                                     "--speculative-ddtree-budget", "15")),
}
SLOS = {"tight": {"tpot_p50_ms": 40.0, "ttft_p50_ms": 3000.0}, "loose": {"tpot_p50_ms": 60.0, "ttft_p50_ms": 3000.0}}
SEARCH = {"max_goodput": {"metric": "concurrency", "low": 1, "high": 128, "resolution": 2}}


def simengine(flags, scale, log_dir):
    port = free_port()
    argv = [sys.executable, "-m", "simengine", "--model-path", "Qwen/Qwen3.6-27B", "--context-length", "32768",
            "--host", "127.0.0.1", "--port", str(port), "--time-scale", str(scale), *flags]
    server = ServerProcess(argv, Path(log_dir) / f"simengine-{port}.log", cwd=ROOT).start()
    url = f"http://127.0.0.1:{port}"

    def ready():
        try:
            return requests.get(url + "/health", timeout=5).status_code == 200, ""
        except requests.ConnectionError:
            return False, "not listening yet"

    server.wait_ready(ready, timeout=60)
    return server, url


def probe(url, concurrency, limits, scale, duration, skip):
    """One probe: a closed loop at `concurrency` for `duration` model seconds, its ramp
    (`skip`: the shares left out at each end, as the spec's steady_state) left out, judged
    as the executor judges a point."""
    load = run_load_sync(LoadConfig(
        base_url=url, api="sglang-generate", prompts=[FIBONACCI_PROMPT], max_tokens=OUTPUT_TOKENS,
        concurrency=concurrency, duration=duration * scale, extra_body={"ignore_eos": True}))
    metrics.mark_ramp(load.results, *skip)
    summary = metrics.summarize(load.results, load.duration)
    measured = [r for r in load.results if not metrics.in_ramp(r)]
    outcome = slo.evaluate(measured, metrics.measured_seconds(load.results) or load.duration, limits,
                           time_scale=scale)
    found = capacity.Probe(load=concurrency, meets_slo=bool(outcome.slo_met), goodput=outcome.goodput,
                           output_throughput=summary["output_throughput"] * scale,
                           server_failed=not any(r.ok for r in load.results))
    return found, load.duration / scale, (summary["median_tpot_ms"] or 0) / scale


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.2, help="simengine's time scale (default 0.2)")
    parser.add_argument("--duration", type=float, default=40.0, help="model seconds per probe (default 40)")
    parser.add_argument("--cooldown", type=float, default=2.0, help="model seconds between probes (default 2)")
    parser.add_argument("--skip-first", type=float, default=0.2,
                        help="share of each probe's requests left out at its start (default 0.2; 0 keeps them)")
    parser.add_argument("--skip-last", type=float, default=0.1,
                        help="share left out at its end (default 0.1)")
    parser.add_argument("--quick", action="store_true", help="one configuration and SLO")
    args = parser.parse_args()
    spec = capacity.parse_search(SEARCH)
    prompt_tokens = None
    rows = []
    configs = list(CONFIGS.items())[:1] if args.quick else list(CONFIGS.items())
    with tempfile.TemporaryDirectory() as log_dir:
        for name, (method, params, flags) in configs:
            server, url = simengine(flags, args.scale, log_dir)
            try:
                if prompt_tokens is None:
                    prompt_tokens = requests.post(url + "/tokenize", json={"prompt": FIBONACCI_PROMPT},
                                                  timeout=5).json()["count"]
                for slo_name, limits in list(SLOS.items())[:1 if args.quick else None]:
                    probes, seconds, started = [], [], time.monotonic()
                    while (load := capacity.next_load(spec, probes)) is not None:
                        found, window, tpot_ms = probe(url, int(load), limits, args.scale, args.duration,
                                                       (args.skip_first, args.skip_last))
                        probes.append(found)
                        seconds.append(window + args.cooldown)
                        print(f"  {name:<17} {slo_name:<5} c={int(load):<4} TPOT {tpot_ms:6.1f} ms  "
                              f"{'meets' if found.meets_slo else 'misses'}")
                    answer = capacity.conclude(spec, probes)
                    known = model.max_concurrency_within(
                        model.load_profile(), method, params, 1, prompt_tokens, OUTPUT_TOKENS, "code",
                        tpot_limit_s=limits["tpot_p50_ms"] / 1000, ttft_limit_s=limits["ttft_p50_ms"] / 1000)
                    rows.append((name, slo_name, answer, known, len(probes), sum(seconds),
                                 statistics.mean(seconds), time.monotonic() - started))
            finally:
                server.stop()
    grid = capacity.grid_probes(spec)
    print(f"\nSearch over concurrency {spec.low}..{spec.high}, resolution {spec.resolution:g}; "
          f"{args.duration:g} model s per probe + {args.cooldown:g} s cool-down; ramp left out: first "
          f"{args.skip_first:g}, last {args.skip_last:g}; simengine at {args.scale:g}x, "
          f"{OUTPUT_TOKENS} output tokens, SLO medians")
    print(f"{'configuration':<17} {'SLO':<5} {'found':>5} {'known':>5} {'probes':>6} {'model min':>9} "
          f"{'grid probes':>11} {'grid min*':>9} {'grid/search':>11} {'wall s':>6}")
    for name, slo_name, answer, known, count, total, per_probe, wall in rows:
        grid_minutes = grid * per_probe / 60
        print(f"{name:<17} {slo_name:<5} {answer.load if answer.load is not None else '-':>5} {known:>5} "
              f"{count:>6} {total / 60:>9.1f} {grid:>11} {grid_minutes:>9.1f} {grid_minutes / (total / 60):>11.1f} "
              f"{wall:>6.0f}")
    print("* the grid is counted, not run: its probes times the search's mean model time per probe.")


if __name__ == "__main__":
    main()
