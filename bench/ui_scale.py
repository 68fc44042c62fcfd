#!/usr/bin/env python3
"""How fast the browser's data endpoints answer on a big database.

Seeds ``--runs`` runs x ``--points-per-run`` points x ``--requests-per-point`` request
records (default 500 x 40 x 3) and measures, in-process, the server time of:

* the sweep detail page (HTML) of the largest sweep,
* its ``progress.json`` (the live sweep page's data, polled every few seconds),
* its ``charts.json`` (the comparison charts: the overview the page loads, each chart
  family the page fetches when it is opened, ``?family=ID``, and one chart of the
  per-point latency family, ``?chart=ID``),
* its ``points-table.json`` (the paginated points table) where the URL name
  ``sweep-points-table`` exists,
* ``history.json`` for the series that has the most points, and the history page.

Per endpoint it prints the median and max over ``--repeat`` requests (after one warmup),
the SQL queries of one request (``CaptureQueriesContext``, in a request of its own so the
capture does not slow the timed ones), the same count on the smallest sweep (a constant
query count shows as two equal numbers) and the response size in bytes. Target: under
300 ms each.

What is timed: ``django.test.Client.get`` in this process, logged in as the seeded admin:
URL routing, every middleware (session and user lookups included), the view, template
rendering and JSON encoding. Not timed: the network, HTTP parsing and the WSGI server.

Databases. By default a throwaway SQLite file in a fresh temporary directory (also used as
SWEEPLAB_DATA_DIR, so var/ and the developer's database are never touched), removed at the
end unless ``--keep``. With ``--database-url postgres://user@host:port/name`` the database
is created when missing; the script refuses (exit 2) to seed a database that already holds
sweeps, so it cannot mix its rows into real data: drop it or pick a fresh name.

Usage::

    .venv/bin/python bench/ui_scale.py [--database-url URL] [--runs 500] [--points-per-run 40]
                                       [--requests-per-point 3] [--repeat 7] [--keep]

Exit status 0 whatever the timings (it is a measurement); 1 when seeding failed, 2 when
the database is refused.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from io import StringIO
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET_MS = 300.0

# -- What is seeded ---------------------------------------------------------------------

HOST = "sim-8x-rtxpro6000"
ENGINE = "sglang-sim"
MODEL = "Qwen/Qwen3.6-27B"
CONTEXT_LENGTH = 32768
MAX_NEW_TOKENS = 256
CONTEXT_MARGIN = 16
TPS = (1, 2, 4, 8)
DFLASH_BLOCK_SIZES = (2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32)
DDTREE_BUDGETS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 28, 32, 40, 48, 56, 64)
DDTREE_TOPK_CAPS = (4, 8)
CRASHING_BUDGETS = (8, 12)  # CUDA illegal instruction on SM120 (DESIGN.md)
# The configurations every small (repeated) sweep measures: the history series.
REPEATED_CONFIGS = (
    ("autoregressive", {}, 1),
    ("autoregressive", {}, 8),
    ("dflash", {"block_size": 16}, 1),
    ("ddtree", {"budget": 15, "topk_cap": 8}, 1),
    ("ddtree", {"budget": 15, "topk_cap": 8}, 8),
)
SMALL_SWEEP_RUNS = len(REPEATED_CONFIGS)
BIG_SWEEP_SHARE = 0.6
CONCURRENCY_ORDER = (1, 4, 16, 2, 8, 32, 64)
PROMPT_LENGTHS = (1000, 2000, 3000, 4000, 6000, 8000, 12000, 16000, 20000, 25000, 30000, 32700)
FIBONACCI_PROMPT_TOKENS = 61
CRASH_CAUSE = "CUDA error: an illegal instruction was encountered"
T_END = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


def configurations():
    """Every configuration of the big sweep, in plan order: (method, params, tp)."""
    methods = [("autoregressive", {})]
    methods += [("dflash", {"block_size": b}) for b in DFLASH_BLOCK_SIZES]
    methods += [("ddtree", {"budget": b, "topk_cap": k}) for b in DDTREE_BUDGETS for k in DDTREE_TOPK_CAPS]
    return [(method, params, tp) for method, params in methods for tp in TPS]


def point_shapes(n):
    """The first n measurement points of a run: (workload, prompt_tokens, concurrency)."""
    shapes = []
    for concurrency in CONCURRENCY_ORDER:
        shapes.append(("fibonacci", None, concurrency))
        shapes.extend(("long-context", length, concurrency) for length in PROMPT_LENGTHS)
    extra = 1
    while len(shapes) < n:  # more points than the grid: more concurrencies
        concurrency = 64 + 16 * extra
        shapes.append(("fibonacci", None, concurrency))
        shapes.extend(("long-context", length, concurrency) for length in PROMPT_LENGTHS)
        extra += 1
    return shapes[:n]


def accept_length(method, params):
    if method == "dflash":
        return 1 + 3.2 * (1 - math.exp(-params["block_size"] / 8))
    if method == "ddtree":
        return 1 + 4.6 * (1 - math.exp(-params["budget"] / 12)) - 0.05 * (8 - params["topk_cap"]) / 4
    return None


def point_metrics(rng, method, params, tp, prompt_tokens, concurrency, requests, slowdown=1.0):
    """Plausible aggregates of an ok point (every metric column filled)."""
    from sweepcore.metrics import STATS as LATENCY_STATISTICS

    base = {1: 28.0, 2: 50.0, 4: 90.0, 8: 150.0}[tp]
    accept = accept_length(method, params)
    speedup = 1.0 if accept is None else accept * (0.8 if method == "dflash" else 0.74)
    length = prompt_tokens or FIBONACCI_PROMPT_TOKENS
    noise = rng.gauss(1.0, 0.015)
    per_request = base * speedup / (1 + length / 40000) / (1 + 0.04 * (concurrency - 1)) * noise / slowdown
    tpot = 1000 / per_request
    ttft = (30 + length / (3000 * tp ** 0.8) * 1000) * (1 + 0.1 * (concurrency - 1)) * rng.gauss(1.0, 0.03)
    itl = tpot * (accept or 1.0)
    e2el = ttft + tpot * (MAX_NEW_TOKENS - 1)
    waves = math.ceil(requests / concurrency)
    duration = waves * e2el / 1000
    total_out = MAX_NEW_TOKENS * requests
    total_in = length * requests
    row = {
        "completed": requests,
        "failed": 0,
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": requests / duration,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "decode_tok_s": per_request,
        "max_output_tokens_per_s": total_out / duration * 1.15,
        "accept_length": accept and accept * rng.gauss(1.0, 0.01),
        "server_decode_tok_s": per_request * 1.01,
        "event_loop_lag_p99_ms": rng.uniform(0.2, 2.0),
    }
    shape = {"mean": 1.0, "median": 0.98, "std": 0.05, "p90": 1.08, "p99": 1.2}
    for metric, value in (("ttft", ttft), ("tpot", tpot), ("itl", itl), ("e2el", e2el)):
        for stat in LATENCY_STATISTICS:
            row[f"{stat}_{metric}_ms"] = value * shape[stat]
    return row, ttft / 1000, itl / 1000, max(1, round(accept or 1))


def _offsets(ttft_s, itl_s, tokens_per_chunk):
    chunks = math.ceil(MAX_NEW_TOKENS / tokens_per_chunk)
    offsets = [round(ttft_s + j * itl_s, 4) for j in range(chunks)]
    counts = [tokens_per_chunk] * (chunks - 1) + [MAX_NEW_TOKENS - tokens_per_chunk * (chunks - 1)]
    return offsets, counts


class Seeder:
    """Builds the rows in memory, then writes them with bulk_create (``sweep``), or fills a
    sweep that ``runs.lifecycle.create_sweep`` planned as if a worker had measured it
    (``finish``)."""

    def __init__(self, points_per_run, requests_per_point, rng):
        from benchmarks.models import LLM, Engine, Host, Workload

        self.points_per_run = points_per_run
        self.requests_per_point = requests_per_point
        self.rng = rng
        self.host = Host.objects.get(name=HOST)
        self.engine = Engine.objects.get(name=ENGINE)
        self.llm = LLM.objects.get(name=MODEL)
        self.workloads = {w.name: w for w in Workload.objects.filter(name__in=["fibonacci", "long-context"])}
        self.shapes = point_shapes(points_per_run)
        self.counts = {"sweeps": 0, "runs": 0, "points": 0, "requests": 0, "telemetry": 0, "events": 0}
        self.point_status = {}

    def spec(self, name, configs):
        methods = {}
        for method, params, *_ in configs:
            entry = methods.setdefault(method, {})
            for key, value in params.items():
                entry.setdefault(key, [])
                if value not in entry[key]:
                    entry[key].append(value)
        lengths = sorted({s[1] for s in self.shapes if s[1] is not None})
        return {
            "name": name,
            "host": HOST,
            "engine": ENGINE,
            "model": MODEL,
            "tp": sorted({c[2] for c in configs}),
            "methods": [m if not p else {m: p} for m, p in methods.items()],
            "workloads": ["fibonacci", {"long-context": {"prompt_tokens": lengths}}],
            "max_new_tokens": MAX_NEW_TOKENS,
            "concurrency": sorted({s[2] for s in self.shapes}),
            "requests_per_point": self.requests_per_point,
            "warmup_requests": 1,
            "options": {"retry_quarantined": False, "context_margin_tokens": CONTEXT_MARGIN},
        }

    def sweep(self, name, configs, created_at, engine_version, owner, *, running=False, slowdown=None):
        """One sweep, its runs, points, request records, telemetry and events.

        ``configs``: (method, params, tp, attempt). With ``running``, the last runs are
        still planned and one is half-way through its points."""
        from benchmarks.models import Sweep, SweepStatus
        from runs.models import Point, PointStatus, Run, RunStatus
        from sweepcore.plan import canonical_params

        rng = self.rng
        sweep = Sweep.objects.create(
            name=name, spec=self.spec(name, configs), host=self.host, engine=self.engine, llm=self.llm,
            owner=owner, status=SweepStatus.RUNNING if running else SweepStatus.DONE,
            launched_at=created_at + timedelta(minutes=1),
            finished_at=None if running else created_at + timedelta(hours=len(configs)),
        )
        Sweep.objects.filter(pk=sweep.pk).update(created_at=created_at)
        n = len(configs)
        planned_from = n - max(1, n // 20) if running and n > 1 else n
        plans = []
        for position, (method, params, tp, attempt) in enumerate(configs):
            plan = {"status": RunStatus.DONE, "crash_at": None, "measured": len(self.shapes)}
            if position > planned_from:
                plan.update(status=RunStatus.PLANNED, measured=0)
            elif position == planned_from and running:
                plan.update(status=RunStatus.RUNNING, measured=len(self.shapes) // 2)
            elif method == "ddtree" and params["budget"] in CRASHING_BUDGETS and attempt == 1:
                plan.update(status=RunStatus.CRASHED, crash_at=rng.randint(1, max(1, len(self.shapes) - 1)))
            elif method == "dflash" and params["block_size"] == 32 and tp == 1:
                plan.update(status=RunStatus.FAILED, measured=0)
            plans.append(plan)
        runs = [Run(sweep=sweep, position=position, method=method, params=params, params_key=canonical_params(params),
                    tp=tp, attempt=attempt) for position, (method, params, tp, attempt) in enumerate(configs)]
        self._ran(sweep, runs, plans, created_at + timedelta(minutes=2), engine_version)
        Run.objects.bulk_create(runs, batch_size=500)
        Run.objects.filter(sweep=sweep).update(created_at=created_at)

        points, rows = [], []
        for run, plan in zip(runs, plans):
            for position, (workload, prompt_tokens, concurrency) in enumerate(self.shapes):
                row = {"run": run, "position": position, "workload": self.workloads[workload],
                       "prompt_tokens": prompt_tokens, "max_new_tokens": MAX_NEW_TOKENS,
                       "concurrency": concurrency}
                length = prompt_tokens or FIBONACCI_PROMPT_TOKENS
                if length + MAX_NEW_TOKENS + CONTEXT_MARGIN > CONTEXT_LENGTH:
                    row.update(status=PointStatus.SKIPPED, reason=(
                        f"prompt {length} + {MAX_NEW_TOKENS} new + {CONTEXT_MARGIN} margin tokens "
                        f"> {CONTEXT_LENGTH} usable context"))
                rows.append((run, plan, row))
        point_plans = self._measured(rows, slowdown)
        points = [Point(**row) for _, _, row in rows]
        Point.objects.bulk_create(points, batch_size=1000)
        self._records_telemetry_events(runs, plans, points, point_plans)
        self._count(runs, points)
        return sweep

    def finish(self, sweep, kv_capacity_per_gpu=180000):
        """Fill a sweep that ``create_sweep`` planned (its runs and points planned, the context
        cap's points skipped) as an exclusive worker on the simulated host would have left it:
        done, the DDTree budgets of CRASHING_BUDGETS crashed at their first point (the rest of
        theirs not run), the points beyond a run's KV cache (``kv_capacity_per_gpu`` x TP
        tokens) skipped, every other point measured; with request records, telemetry, events
        and each run's lease of the host's GPUs, one run after another. Seconds for the
        example's 23 runs, where a worker takes minutes."""
        from benchmarks.models import Sweep, SweepStatus
        from runs.models import GpuLease, Point, PointStatus, Run, RunStatus

        runs = list(Run.objects.filter(sweep=sweep).order_by("position"))
        points = list(Point.objects.filter(run__sweep=sweep).select_related("workload").order_by("run__position",
                                                                                                  "position"))
        by_run = {}
        for point in points:
            by_run.setdefault(point.run_id, []).append(point)
        margin = sweep.spec.get("options", {}).get("context_margin_tokens", CONTEXT_MARGIN)
        plans, rows = [], []
        for run in runs:
            mine = by_run.get(run.pk, [])
            plan = {"status": RunStatus.DONE, "crash_at": None, "measured": len(mine)}
            if run.method == "ddtree" and run.params.get("budget") in CRASHING_BUDGETS:
                first = next((p.position for p in mine if p.status != PointStatus.SKIPPED), None)
                plan.update(status=RunStatus.CRASHED, crash_at=first)
            plans.append(plan)
            kv = kv_capacity_per_gpu * run.tp
            for point in mine:
                row = {field: getattr(point, field) for field in ("position", "prompt_tokens", "max_new_tokens",
                                                                  "concurrency", "status", "reason")}
                row["workload"] = point.workload
                length = point.prompt_tokens or FIBONACCI_PROMPT_TOKENS
                if point.status != PointStatus.SKIPPED and length + point.max_new_tokens + margin > kv:
                    row.update(status=PointStatus.SKIPPED, reason=(
                        f"prompt {length} + {point.max_new_tokens} new + {margin} margin tokens "
                        f"> the server's KV capacity of {kv} tokens"))
                elif point.status != PointStatus.SKIPPED:
                    row.pop("status")
                    row.pop("reason")
                rows.append((run, plan, row))
        # It ran until now: launched a minute after it was made, each run taking as long as _ran says.
        took = timedelta(minutes=sum(3 + plan["measured"] * 0.5 for plan in plans))
        start = datetime.now(timezone.utc) - took
        self._ran(sweep, runs, plans, start, f"{ENGINE} 0.5.2")
        for run in runs:
            run.kv_capacity_tokens = kv_capacity_per_gpu * run.tp if run.context_length else None
        Run.objects.bulk_update(runs, RUN_FIELDS, batch_size=500)
        point_plans = self._measured(rows, None, failed_share=0)  # simengine answers every request
        updated = []
        for point, (_, _, row) in zip(points, rows):
            for field, value in row.items():
                setattr(point, field, value)
            updated.append(point)
        Point.objects.bulk_update(updated, POINT_FIELDS, batch_size=500)
        self._records_telemetry_events(runs, plans, points, point_plans)
        leases = [GpuLease(host=sweep.host, gpu_index=gpu, run=run, worker=run.claimed_by, leased_at=run.started_at,
                           released_at=run.finished_at, release_reason="teardown")
                  for run in runs for gpu in range(sweep.host.gpu_count)]
        GpuLease.objects.bulk_create(leases, batch_size=1000)
        Sweep.objects.filter(pk=sweep.pk).update(
            status=SweepStatus.DONE, created_at=start - timedelta(minutes=2), launched_at=start - timedelta(minutes=1),
            finished_at=max(r.finished_at for r in runs))
        sweep.refresh_from_db()
        self._count(runs, points)
        return sweep

    def _ran(self, sweep, runs, plans, clock, engine_version):
        """Each run's outcome and course (``RUN_FIELDS``) as its plan says, one after another
        from ``clock``; keeps each plan's start time."""
        from runs.models import RunStatus

        for run, plan in zip(runs, plans):
            started = clock if plan["status"] != RunStatus.PLANNED else None
            minutes = 2 + plan["measured"] * 0.5
            finished = clock + timedelta(minutes=minutes) if plan["status"] not in (
                RunStatus.PLANNED, RunStatus.RUNNING) else None
            clock += timedelta(minutes=minutes + 1)
            failed = plan["status"] == RunStatus.FAILED
            crashed = plan["status"] == RunStatus.CRASHED
            ran = started is not None
            tp, method, position = run.tp, run.method, run.position
            fields = dict(
                status=plan["status"],
                reason="server out of memory at startup" if failed else "",
                failure_kind="cuda_illegal_instruction" if crashed else "cuda_oom" if failed else "",
                failure_cause=CRASH_CAUSE if crashed else "torch.OutOfMemoryError: CUDA out of memory" if failed else "",
                failure_log=f"[rank0] RuntimeError: {CRASH_CAUSE}\n" if crashed else "",
                argv=["python", "-m", "simengine", "--model-path", MODEL, "--tp-size", str(tp)] + (
                    ["--speculative-algorithm", method.upper()] if method != "autoregressive" else []),
                engine_version=engine_version if ran else "",
                server_info={"version": engine_version, "tp_size": tp} if ran and not failed else {},
                context_length=CONTEXT_LENGTH if ran and not failed else None,
                kv_capacity_tokens=180000 * tp if ran and not failed else None,
                log_path=f"/nonexistent/ui-scale/sweep-{sweep.pk}/run-{position}.log" if ran else "",
                claimed_by="worker@sim-8x-rtxpro6000" if ran else "",
                claimed_at=started, started_at=started, finished_at=finished,
                # A running run's worker is alive: it beat just now (a stale beat is a dead
                # worker's, which the sweep page says).
                heartbeat_at=finished or (datetime.now(timezone.utc) if plan["status"] == RunStatus.RUNNING
                                          else started),
            )
            for field, value in fields.items():
                setattr(run, field, value)
            plan["started"] = started

    def _measured(self, rows, slowdown, failed_share=0.01):
        """Fill each point's row (``(run, plan, row)`` in the order they ran) as its run's plan
        says it ended, a skipped one left as it is, about ``failed_share`` of the measured ones
        failed (HTTP 500); returns, per row, what its request records need (None: no request
        was sent)."""
        from runs.models import PointStatus, RunStatus

        rng = self.rng
        extras, clock = [], {}
        for run, plan, row in rows:
            t = clock.get(id(run), plan["started"])
            position, prompt_tokens, concurrency = row["position"], row["prompt_tokens"], row["concurrency"]
            length = prompt_tokens or FIBONACCI_PROMPT_TOKENS
            extra = None
            if row.get("status") == PointStatus.SKIPPED:
                pass
            elif plan["status"] == RunStatus.FAILED:
                row.update(status=PointStatus.NOT_RUN, reason="the server did not start")
            elif plan["crash_at"] is not None and position == plan["crash_at"]:
                row.update(status=PointStatus.CRASHED, reason=f"the server died: {CRASH_CAUSE}",
                           completed=0, failed=self.requests_per_point,
                           errors={"server_disconnected": {"count": self.requests_per_point,
                                                           "example": "Server disconnected"}})
                extra = ("crashed", 0.2, 0.02, 1)
            elif plan["crash_at"] is not None and position > plan["crash_at"]:
                row.update(status=PointStatus.NOT_RUN, reason="its server died at an earlier point")
            elif position >= plan["measured"]:
                row.update(status=PointStatus.PLANNED)
            else:
                metrics, ttft_s, itl_s, per_chunk = point_metrics(
                    rng, run.method, run.params, run.tp, prompt_tokens, concurrency, self.requests_per_point,
                    slowdown=(slowdown or {}).get(run.method, 1.0))
                if rng.random() < failed_share:  # a point whose requests errored
                    row.update(status=PointStatus.FAILED, reason="1 of its requests failed: HTTP 500",
                               completed=self.requests_per_point - 1, failed=1,
                               errors={"http_500": {"count": 1, "example": "HTTP 500: Internal Server Error"}})
                    extra = ("failed", ttft_s, itl_s, per_chunk)
                else:
                    row.update(status=PointStatus.OK, reason="", actual_prompt_tokens=length, **metrics)
                    extra = ("ok", ttft_s, itl_s, per_chunk)
            if extra is not None:
                duration = row.get("duration") or 1.0
                row.update(started_at=t, finished_at=t + timedelta(seconds=duration))
                clock[id(run)] = t + timedelta(seconds=duration + 2)
            extras.append(extra)
        return extras

    def _records_telemetry_events(self, runs, plans, points, point_plans):
        from runs.models import RequestRecord, RunEvent, RunStatus, TelemetrySample

        rng = self.rng
        records = []
        for point, extra in zip(points, point_plans):
            if extra is None:
                continue
            kind, ttft_s, itl_s, per_chunk = extra
            offsets, counts = _offsets(ttft_s, itl_s, per_chunk)
            send = point.started_at.timestamp()
            for index in range(self.requests_per_point):
                if kind == "crashed" or (kind == "failed" and index == self.requests_per_point - 1):
                    cut = 3 if kind == "crashed" and index == 0 else 0
                    records.append(RequestRecord(
                        point=point, index=index, send_time=send + index * 0.001,
                        chunk_offsets=offsets[:cut], chunk_tokens=counts[:cut],
                        prompt_tokens=point.prompt_tokens or FIBONACCI_PROMPT_TOKENS,
                        output_tokens=sum(counts[:cut]), token_count_source="usage",
                        http_status=200 if kind == "crashed" else 500,
                        error_kind="server_disconnected" if kind == "crashed" else "http_500",
                        error="Server disconnected" if kind == "crashed" else "HTTP 500: Internal Server Error",
                    ))
                else:
                    records.append(RequestRecord(
                        point=point, index=index, send_time=send + index * 0.001,
                        chunk_offsets=offsets, chunk_tokens=counts,
                        prompt_tokens=point.actual_prompt_tokens or point.prompt_tokens or FIBONACCI_PROMPT_TOKENS,
                        output_tokens=MAX_NEW_TOKENS, token_count_source="usage", finish_reason="length",
                        http_status=200,
                        spec_verify_ct=math.ceil(MAX_NEW_TOKENS / per_chunk) if per_chunk > 1 else None,
                    ))
        RequestRecord.objects.bulk_create(records, batch_size=2000)
        self.counts["requests"] += len(records)

        samples, events = [], []
        for run, plan in zip(runs, plans):
            if plan["started"] is None:
                continue
            end = run.finished_at or run.started_at + timedelta(minutes=5)
            step = (end - run.started_at) / 6
            for i in range(6):
                samples.append(TelemetrySample(
                    run=run, at=run.started_at + step * i, gpu_index=0,
                    memory_used_mib=80000 + rng.uniform(-500, 500), memory_total_mib=97887,
                    utilization_pct=rng.uniform(70, 99), power_w=rng.uniform(350, 590),
                    temperature_c=rng.uniform(55, 78), sm_clock_mhz=rng.uniform(2200, 2600),
                ))
            events.append(RunEvent(run=run, at=run.started_at, kind="launched", message="server launched"))
            if plan["status"] == RunStatus.FAILED:
                events.append(RunEvent(run=run, at=end, kind="startup_failed", message=run.failure_cause))
                continue
            events.append(RunEvent(run=run, at=run.started_at + timedelta(seconds=40), kind="ready"))
            if plan["status"] == RunStatus.CRASHED:
                events.append(RunEvent(run=run, at=end, kind="crashed", message=CRASH_CAUSE))
            elif run.finished_at:
                events.append(RunEvent(run=run, at=end, kind="finished", message="run finished"))
        TelemetrySample.objects.bulk_create(samples, batch_size=2000)
        RunEvent.objects.bulk_create(events, batch_size=2000)
        self.counts["telemetry"] += len(samples)
        self.counts["events"] += len(events)

    def _count(self, runs, points):
        for key, n_rows in (("sweeps", 1), ("runs", len(runs)), ("points", len(points))):
            self.counts[key] += n_rows
        for p in points:
            self.point_status[p.status] = self.point_status.get(p.status, 0) + 1


#: What ``Seeder._ran`` sets on a run, and ``Seeder._measured`` may set on a point.
RUN_FIELDS = ["status", "reason", "failure_kind", "failure_cause", "failure_log", "argv", "engine_version",
              "server_info", "context_length", "kv_capacity_tokens", "log_path", "claimed_by", "claimed_at",
              "started_at", "finished_at", "heartbeat_at"]
POINT_FIELDS = ["status", "reason", "completed", "failed", "errors", "started_at", "finished_at",
                "actual_prompt_tokens", "duration", "total_input_tokens", "total_output_tokens",
                "request_throughput", "output_throughput", "total_token_throughput", "decode_tok_s",
                "max_output_tokens_per_s", "accept_length", "server_decode_tok_s", "event_loop_lag_p99_ms",
                *(f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el")
                  for stat in ("mean", "median", "std", "p90", "p99"))]


def seed(runs=500, points_per_run=40, requests_per_point=3, random_seed=1):
    """Seed the demo catalog and ``runs`` runs; return what the measurement needs.

    One big running sweep holds BIG_SWEEP_SHARE of the runs (the worst case of the sweep
    pages); the rest are small sweeps of the same few configurations a day apart, with
    engine versions that change over time and one slowdown of ddtree (the history series)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction

    call_command("seed_demo", stdout=StringIO())
    user = get_user_model().objects.get(username="admin")
    rng = random.Random(random_seed)
    seeder = Seeder(points_per_run, requests_per_point, rng)
    big_n = max(1, round(runs * BIG_SWEEP_SHARE)) if runs > 1 else runs
    rest = runs - big_n
    n_small = math.ceil(rest / SMALL_SWEEP_RUNS)
    all_configs = configurations()
    big_configs = [(*all_configs[i % len(all_configs)], 1 + i // len(all_configs)) for i in range(big_n)]
    with transaction.atomic():
        small = []
        for i in range(n_small):
            size = min(SMALL_SWEEP_RUNS, rest - i * SMALL_SWEEP_RUNS)
            version = f"sglang-sim 0.5.{2 + i // 8}"
            regressed = i >= n_small * 3 // 4  # a later engine version is slower on ddtree
            small.append(seeder.sweep(
                f"nightly qwen3.6-27b #{i + 1}", [(*c, 1) for c in REPEATED_CONFIGS[:size]],
                T_END - timedelta(days=n_small - i + 1), version, user,
                slowdown={"ddtree": 1.15} if regressed else None,
            ))
        big = seeder.sweep(
            "qwen3.6-27b-sm120 full grid", big_configs, T_END - timedelta(days=1),
            f"sglang-sim 0.5.{2 + n_small // 8}", user, running=True,
        )
    return {"user": user, "big_sweep": big, "small_sweep": min(small, key=lambda s: s.pk) if small else big,
            "counts": seeder.counts, "point_status": seeder.point_status, "series": largest_series()}


def largest_series():
    """The history.json query of the series with the most ok points (one GROUP BY)."""
    from django.db.models import Count

    from runs.models import Point, PointStatus

    row = (
        Point.objects.filter(status=PointStatus.OK)
        .values("run__sweep__llm__name", "run__sweep__engine__name", "run__sweep__host__gpu_model",
                "run__method", "run__params_key", "run__tp", "workload__name", "prompt_tokens", "concurrency")
        .annotate(n=Count("id"))
        .order_by("-n", "run__method", "run__params_key", "run__tp", "concurrency")
        .first()
    )
    if row is None:
        return None
    query = {
        "model": row["run__sweep__llm__name"], "engine": row["run__sweep__engine__name"],
        "gpu": row["run__sweep__host__gpu_model"], "method": row["run__method"],
        "params": row["run__params_key"], "tp": row["run__tp"], "workload": row["workload__name"],
        "concurrency": row["concurrency"], "metric": "decode_tok_s",
    }
    if row["prompt_tokens"] is not None:
        query["prompt_tokens"] = row["prompt_tokens"]
    return {"query": query, "points": row["n"]}


# -- Measuring ----------------------------------------------------------------------------


def endpoints(seeded, sweep=None):
    """(name, url) of every endpoint measured, for the given sweep (default: the largest)."""
    from urllib.parse import urlencode

    from django.urls import NoReverseMatch, reverse

    sweep = sweep or seeded["big_sweep"]
    out = [
        ("sweep detail page (HTML)", reverse("sweep-detail", args=[sweep.pk])),
        ("progress.json", reverse("sweep-progress", args=[sweep.pk])),
        ("charts.json", reverse("sweep-charts", args=[sweep.pk])),
    ]
    out.extend(chart_family_endpoints(sweep))
    try:
        out.append(("points-table.json", reverse("sweep-points-table", args=[sweep.pk])))
    except NoReverseMatch:
        pass
    if seeded["series"] is not None:
        query = urlencode(seeded["series"]["query"])
        out.append(("history.json", f"{reverse('history-data')}?{query}"))
        out.append(("history page (HTML)", f"{reverse('history')}?{query}"))
    return out


def chart_family_endpoints(sweep):
    """charts.json of each on-demand family (runs.results.charts.FAMILIES) and of one latency chart
    (the first the overview lists), as the page fetches them when they are opened."""
    from urllib.parse import urlencode

    from django.urls import reverse

    from runs.results.charts import FAMILIES, sweep_charts

    url = reverse("sweep-charts", args=[sweep.pk])
    out = [(f"charts.json ?family={name}", f"{url}?{urlencode({'family': name})}") for name in FAMILIES]
    listed = {f["id"]: f["charts"] for f in sweep_charts(sweep.pk)["families"]}
    if listed.get("latency"):
        out.append(("charts.json ?chart=<latency>", f"{url}?{urlencode({'chart': listed['latency'][0]['id']})}"))
    return out


def count_queries(client, url):
    """(queries, bytes, status) of one request."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    return len(ctx.captured_queries), len(response.content), response.status_code


def measure(client, url, repeat=7):
    """One warmup, one request counting queries, then ``repeat`` timed requests."""
    client.get(url)
    queries, size, status = count_queries(client, url)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        response.content  # noqa: B018 - a streaming response would be consumed here
    return {"url": url, "status": status, "queries": queries, "bytes": size,
            "median_ms": statistics.median(times), "max_ms": max(times), "times_ms": times}


def measure_all(seeded, repeat=7, client=None):
    """Rows of the table: every endpoint on the largest sweep, and its query count on the
    smallest sweep (history endpoints: the same series)."""
    if client is None:
        from django.test import Client

        # Not "testserver": this process does not run Django's test environment.
        client = Client(SERVER_NAME="localhost")
    client.force_login(seeded["user"])
    small = dict(endpoints(seeded, seeded["small_sweep"]))
    rows = []
    for name, url in endpoints(seeded):
        row = {"endpoint": name, **measure(client, url, repeat)}
        row["queries_small"] = count_queries(client, small[name])[0]
        rows.append(row)
    return rows


def format_table(rows):
    header = f"{'endpoint':<33} {'status':>6} {'median ms':>10} {'max ms':>9} {'queries':>8} {'(small)':>8} {'bytes':>11}"
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r['endpoint']:<33} {r['status']:>6} {r['median_ms']:>10.1f} {r['max_ms']:>9.1f} "
                     f"{r['queries']:>8} {r['queries_small']:>8} {r['bytes']:>11,}")
    lines.append("")
    for r in rows:
        ok = r["median_ms"] < TARGET_MS
        verdict = "OK  " if ok else "MISS"
        note = "" if r["max_ms"] < TARGET_MS else f" (max {r['max_ms']:.0f} ms over)"
        const = "constant queries" if r["queries"] == r["queries_small"] else \
            f"queries differ by sweep size ({r['queries_small']} vs {r['queries']})"
        lines.append(f"{verdict} {r['endpoint']}: median {r['median_ms']:.1f} ms "
                     f"{'<' if ok else '>='} {TARGET_MS:.0f} ms target{note}; {const}")
    return "\n".join(lines)


# -- Standalone: environment, database, main -----------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="postgres://... (created when missing); default: a temporary SQLite")
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--points-per-run", type=int, default=40)
    parser.add_argument("--requests-per-point", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1, help="random seed of the metric noise")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (SQLite file)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.points_per_run < 1 or args.requests_per_point < 1 or args.repeat < 1:
        parser.error("--runs, --points-per-run, --requests-per-point and --repeat must be >= 1")
    return args


def ensure_postgres_database(url):
    """Create the PostgreSQL database of ``url`` when it does not exist."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise SystemExit(f"{url}: the database name is missing")
    params = {"dbname": "postgres", "host": parts.hostname or None, "port": parts.port or None,
              "user": unquote(parts.username or "") or None, "password": unquote(parts.password or "") or None}
    with psycopg.connect(**{k: v for k, v in params.items() if v is not None}, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            return True
    return False


def configure(database_url, data_dir):
    """Point settings at the chosen database and a private data folder, then set Django up."""
    os.environ["DATABASE_URL"] = database_url
    os.environ["SWEEPLAB_DATA_DIR"] = str(data_dir)
    os.environ["SWEEPLAB_BROKER_DIR"] = str(Path(data_dir) / "broker")
    os.environ["SWEEPLAB_HTTPS"] = "0"  # the in-process client speaks plain HTTP
    os.environ["DEBUG"] = "0"  # production settings: DEBUG's query log would slow every query
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["DJANGO_SETTINGS_MODULE"] = "sweeplab.settings"
    import django

    from sweeplab.settings import prepare_data_dir

    prepare_data_dir()  # what manage.py does: the folder and the secret key force_login needs
    django.setup()


def refuse_if_in_use():
    """A reason not to seed this database, or None."""
    from django.db import connection

    if "benchmarks_sweep" not in connection.introspection.table_names():
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM benchmarks_sweep")
        n = cursor.fetchone()[0]
    if n:
        return (f"the database already holds {n} sweep(s); ui_scale.py seeds only an empty database "
                "(drop it, or pass a fresh name: it is created)")
    return None


def main(argv=None):
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="sweeplab-ui-scale-"))
    try:
        if args.database_url:
            if urlsplit(args.database_url).scheme in ("postgres", "postgresql", "pgsql"):
                created = ensure_postgres_database(args.database_url)
                print(f"database: {args.database_url} ({'created' if created else 'exists'})")
            else:
                print(f"database: {args.database_url}")
            url = args.database_url
        else:
            url = f"sqlite:///{tmp / 'ui_scale.sqlite3'}"
            print(f"database: throwaway SQLite {tmp / 'ui_scale.sqlite3'}")
        configure(url, tmp / "data")
        from django.core.management import call_command
        from django.db import connection

        reason = refuse_if_in_use()
        if reason:
            print(f"refused: {reason}", file=sys.stderr)
            return 2
        start = time.perf_counter()
        call_command("migrate", verbosity=0, interactive=False)
        print(f"migrations: {time.perf_counter() - start:.1f} s ({connection.vendor})")
        start = time.perf_counter()
        try:
            seeded = seed(args.runs, args.points_per_run, args.requests_per_point, args.seed)
        except Exception as exc:  # a measurement without data means nothing
            import traceback

            traceback.print_exc()
            print(f"seeding failed: {exc}", file=sys.stderr)
            return 1
        seconds = time.perf_counter() - start
        c = seeded["counts"]
        print(f"seeded in {seconds:.1f} s: {c['sweeps']} sweeps, {c['runs']} runs, {c['points']} points "
              f"({', '.join(f'{k} {v}' for k, v in sorted(seeded['point_status'].items()))}), "
              f"{c['requests']} request records, {c['telemetry']} telemetry samples, {c['events']} run events")
        big, small = seeded["big_sweep"], seeded["small_sweep"]
        from runs.models import Point

        print(f"largest sweep: #{big.pk} ({big.runs.count()} runs, "
              f"{Point.objects.filter(run__sweep=big).count()} points); "
              f"smallest (query-count check): #{small.pk} ({small.runs.count()} runs)")
        if seeded["series"]:
            s = seeded["series"]
            print(f"history series ({s['points']} ok points): "
                  + " ".join(f"{k}={v}" for k, v in s["query"].items()))
        print(f"\ntimed: django.test.Client in-process, median/max of {args.repeat} after 1 warmup; "
              f"queries of one request (largest sweep; '(small)': smallest sweep)\n")
        rows = measure_all(seeded, args.repeat)
        print(format_table(rows))
        return 0
    finally:
        if args.keep:
            print(f"\nkept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
