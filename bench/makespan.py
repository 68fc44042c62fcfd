#!/usr/bin/env python3
"""The makespan of the example sweep under each packing policy, against the ideal.

1. **Measure** what each run of ``examples/qwen3.6-27b-sm120.yaml`` needs: the sweep (with
   three requests a point instead of its until_stable, as the worker test runs it) is run
   exclusive, in-process (the executor, real simengine servers at ``--scale`` x real time),
   and each run's GPU lease span is read back from the stored leases, in the model's time
   (wall seconds / scale): start-up, warmup, points, teardown -- what the run holds its GPUs
   for on the GPU host simengine models. Crashed runs count with the time they held them.
2. **Schedule** those runs with the workers' own rules (``sweepcore.packing.simulate``:
   the queue order, the slots, the lease order and GPU choice of runs.worker), exclusive and
   packed, on one 8-GPU host and on two, with a 1-second gap from a release to the next
   lease (the workers poll every second), and print makespan / ideal (the ideal: every GPU
   busy until the last run ends, GPU-seconds / GPUs).
3. With ``--real-pack``, also run the sweep packed for real, on one host and then on two
   alike simulated hosts (``hosts: [a, b]``), one worker with 8 slots per host, and print
   each makespan from the stored leases against the ideal of its own runs. On a
   machine with fewer cores than the runs it packs (this one has 2) the servers and clients
   share the CPU, so the runs themselves get slower and the verdicts say so: a measure of
   this machine, not of the policy.

Usage: ``.venv/bin/python bench/makespan.py [--scale 0.02] [--real-pack]`` (~3 min; +~4 min
with ``--real-pack``). Runs in a throwaway data folder (SQLite, filesystem broker).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXAMPLE = ROOT / "examples" / "qwen3.6-27b-sm120.yaml"
HOST = "sim-8x-rtxpro6000"
HOST_B = "sim-8x-rtxpro6000-b"  # alike the first: a sweep may share its runs between the two
LEASE_GAP_S = 1.0


def setup(data_dir):
    os.environ["SWEEPLAB_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sweeplab.settings")
    for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
        os.environ.pop(key, None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    call_command("seed_demo", stdout=StringIO())


def example_spec(packing, name, hosts=(HOST,)):
    from benchmarks.catalog import load_catalog
    from sweepcore.spec import load_yaml, validate

    data = load_yaml(EXAMPLE.read_text(encoding="utf-8"), source=str(EXAMPLE))
    del data["until_stable"]
    data["requests_per_point"] = 3
    data["name"] = name
    data["engine"] = "sim-makespan"
    data.setdefault("options", {})["packing"] = packing
    if len(hosts) > 1:
        del data["host"]
        data["hosts"] = list(hosts)
    return validate(data, load_catalog())


def scaled_engine(scale):
    from benchmarks.models import Engine

    base = Engine.objects.get(name="sglang-sim")
    Engine.objects.update_or_create(name="sim-makespan", defaults={
        "kind": base.kind, "method_args": base.method_args, "readiness_timeout_s": 120,
        "argv_template": [*base.argv_template, "--time-scale", str(scale)]})


def lease_spans(sweep):
    """{run id: (tp, first lease, last release)} of a finished sweep."""
    from runs.models import GpuLease

    spans = {}
    for lease in GpuLease.objects.filter(run__sweep=sweep).select_related("run"):
        tp, start, end = spans.get(lease.run_id, (lease.run.tp, lease.leased_at, lease.released_at))
        spans[lease.run_id] = (tp, min(start, lease.leased_at), max(end, lease.released_at))
    return spans


def verdict_counts(sweep):
    from runs.models import Point

    counts = {}
    for validity in Point.objects.filter(run__sweep=sweep).exclude(validity="").values_list("validity", flat=True):
        counts[validity] = counts.get(validity, 0) + 1
    return counts


def real_pack(hosts, data_dir):
    """The example packed for real on `hosts`, one worker (8 slots) each; returns the sweep."""
    from runs.lifecycle import create_sweep, launch_sweep

    packed, _ = create_sweep(example_spec("pack", f"makespan-pack-{len(hosts)}", hosts))
    env = {**os.environ, "SWEEPLAB_DATA_DIR": str(data_dir), "SWEEPLAB_TAKE_POLL_S": str(LEASE_GAP_S)}
    workers = [subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "worker", "--host", host],
                                cwd=ROOT, env=env, stdout=open(data_dir / f"worker-{host}.log", "wb"),
                                stderr=subprocess.STDOUT, start_new_session=True) for host in hosts]
    try:
        time.sleep(5)
        launch_sweep(packed)
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            packed.refresh_from_db()
            if packed.status in ("done", "cancelled"):
                break
            time.sleep(2)
    finally:
        for worker in workers:
            os.kill(worker.pid, signal.SIGTERM)  # the leader only: Celery shuts its pool down itself
        for worker in workers:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
    return packed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.02, help="simengine's time scale (default 0.02)")
    parser.add_argument("--real-pack", action="store_true", help="also run the sweep packed through a real worker")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="sweeplab-makespan-"))
    try:
        setup(data_dir)
        from runs.lifecycle import create_sweep, launch_sweep
        from runs.results.gantt import sweep_gantt
        from runs.worker.executor import execute_run
        from sweepcore.packing import RunSpec, ideal, simulate

        scaled_engine(args.scale)
        started = time.monotonic()
        sweep, _ = create_sweep(example_spec("exclusive", "makespan-exclusive"))
        for run_id in launch_sweep(sweep, enqueue=False):
            execute_run(run_id, worker_id="bench")
        spans = lease_spans(sweep)
        runs = [RunSpec(run_id, tp, (end - start).total_seconds() / args.scale)
                for run_id, (tp, start, end) in sorted(spans.items())]
        print(f"Measured {len(runs)} runs of {EXAMPLE.name} (3 requests a point) exclusive on simengine at "
              f"{args.scale:g}x in {time.monotonic() - started:.0f} s; model time each run held its GPUs:")
        for tp in sorted({r.tp for r in runs}):
            held = [r.duration for r in runs if r.tp == tp]
            print(f"  TP{tp}: {len(held)} runs, {min(held):.0f}-{max(held):.0f} s, {sum(held):.0f} s in all")
        print(f"\nScheduled with the workers' rules (8 slots per host, {LEASE_GAP_S:g} s from a release to the next "
              f"lease), model time:")
        print(f"{'hosts':>5} {'packing':<9} {'makespan s':>10} {'ideal s':>8} {'makespan/ideal':>14}")
        rows = (
            (1, "exclusive", {}, "the workers' rules"),
            (1, "pack", {}, "the workers' rules"),
            (1, "pack", {"longest_first": True}, "longest GPU-time first (durations known in advance)"),
            (2, "exclusive", {"take_what_fits": True}, "a host takes the next run that fits its free GPUs"),
            (2, "pack", {}, "each slot holds the next task until its GPUs are free (one host's rule)"),
            (2, "pack", {"take_what_fits": True}, "a host takes the next run that fits its free GPUs"),
        )
        for hosts, packing, how, words in rows:
            best = ideal(runs, 8, hosts)
            makespan, _ = simulate(runs, 8, packing, hosts=hosts, lease_gap_s=LEASE_GAP_S, **how)
            print(f"{hosts:>5} {packing:<9} {makespan:>10.0f} {best:>8.0f} {makespan / best:>14.2f}  {words}")

        if args.real_pack:
            base = verdict_counts(sweep)
            for hosts in ([HOST], [HOST, HOST_B]):
                packed = real_pack(hosts, data_dir)
                gantt = sweep_gantt(packed)
                print(f"\nPacked for real on {len(hosts)} host(s), one worker with 8 slots each, on this machine "
                      f"({os.cpu_count()} cores): makespan {gantt['makespan_s'] / args.scale:.0f} s model time against "
                      f"an ideal of {gantt['ideal_s'] / args.scale:.0f} s for its own runs ({gantt['ratio']:.2f}x); "
                      f"verdicts {verdict_counts(packed)} (the exclusive runs': {base})")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
