"""The worker side of tests/e2e/test_outages_real.py's PostgreSQL test, in a process of its
own whose DATABASE_URL is a private cluster the test restarts and stops: a claimed run
heartbeats and stores its points while the database goes away under it. It says each step
on stdout ("stored N") and waits for a line on stdin before the next; the last line is a
JSON summary."""

import json
import os
import sys
import time

import django


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sweeplab.settings")
    from sweeplab import settings as sweeplab_settings

    sweeplab_settings.prepare_data_dir()
    django.setup()
    from io import StringIO

    from django.core.management import call_command
    from django.utils import timezone

    from benchmarks.catalog import load_catalog
    from runs.lifecycle import create_sweep, launch_sweep
    from runs.models import Point, RequestRecord, Run
    from runs.worker.executor import RunExecutor
    from sweepcore.loadgen import RequestResult
    from sweepcore.spec import validate

    call_command("migrate", verbosity=0)
    call_command("seed_demo", stdout=StringIO())
    spec = validate(
        {"name": "pg-outage", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
         "tp": [1], "methods": ["autoregressive"],
         "workloads": [{"long-context": {"prompt_tokens": [1000, 2000, 3000]}}]},
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    (run_id,) = launch_sweep(sweep, enqueue=False)
    executor = RunExecutor(run_id, "child:1")
    assert executor.claim()
    executor.start_heartbeat()
    points = executor.store.pending_points()

    class Load:
        results = [RequestResult(index=i, send_time=10.0 + i, chunk_offsets=[0.1, 0.2], chunk_tokens=[1, 1],
                                 output_tokens=2) for i in range(5)]

    beats = []
    for i, point in enumerate(points):
        executor.store.store_point(point, "ok", "", timezone.now(), Load, {"completed": 5})
        beats.append(Run.objects.get(pk=run_id).heartbeat_at.isoformat())
        print(f"stored {i}", flush=True)
        sys.stdin.readline()
    after_outage = timezone.now()
    time.sleep(2.0)  # a few beats
    run = Run.objects.get(pk=run_id)
    thread, _, lost = executor.heartbeat
    summary = {
        "points": list(Point.objects.filter(run_id=run_id).order_by("position").values_list("status", flat=True)),
        "records": [RequestRecord.objects.filter(point_id=p.pk).count() for p in points],
        "heartbeat_alive": thread.is_alive() and not lost.is_set(),
        "beat_after_outage": run.heartbeat_at > after_outage,
        "status": run.status,
    }
    executor.stop_heartbeat()
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
