#!/usr/bin/env python3
"""The fault suite (issue 19): what a deployment meets, tried on a real deployment.

It starts PostgreSQL and Redis of its own (private instances on free loopback ports, in
folders of their own: tests/e2e/services.py; the machine's own PostgreSQL and Redis are
never restarted, and the suite checks they answer as before at its end), migrates and
seeds a database there, and starts the web server (``manage.py runserver``) and a worker
for the simulated 8-GPU host (``manage.py worker``) on them, with the server logs on a
small tmpfs of its own. Then, once per fault, it creates and launches a small simulated
sweep through the API (3 runs x 3 points, 3 requests each, simengine at 1/10 of real
time) and meets it with the fault while a run is in flight:

* ``none``: no fault (what an undisturbed sweep looks like on this machine);
* ``redis-restart``: Redis killed (without persistence: the queued runs' tasks go with
  it) and started again 5 s later;
* ``postgres-restart``: PostgreSQL restarted fast (every connection terminated);
* ``postgres-stop``: PostgreSQL stopped for 10 s;
* ``worker-sigkill``: the worker and its pool SIGKILLed mid-run (its server orphaned),
  then a new worker started, as a supervisor (systemd, Kubernetes) would;
* ``server-sigstop``: the run's server frozen mid-stream (SIGSTOP) and left frozen: the
  run ends crashed (hung) within the stall timeout and a probe; then ``resume``, as the
  sweep page offers, measures what the hang cut off;
* ``disk-full``: the log disk filled mid-run; once room is made, ``resume``;
* ``oversized-input``: while the sweep runs, the API is sent what the issue's probe sent
  (specs nested 10,000 deep, numbers of 10^18, a 5 MB spec, a concurrency no worker can
  open, 10^9 requests per point, an import over the size limit): each must be a fast 4xx
  in JSON; and a 50 MB vLLM result file of a million request records, within the size
  limit: imported with a bounded sample of its records. The web server's peak memory is
  printed before and after.

It prints one row per fault: whether the sweep finished (every run done), the planned
points without a stored measurement (lost; a point stored with fewer request records
than it sent counts too), points or request records stored twice (duplicated), runs still
queued or in flight (stuck), servers left running after the sweep settled (left), and
the recovery time: from the end of the fault (the service back, the new worker started,
the resume sent; for a frozen server, the freeze) to the next point stored. Then the
oversized inputs' answers, and the machine's own services as found and as left.

Usage::

    .venv/bin/python bench/faults.py [--only FAULT ...] [--json FILE] [--keep]

Exit status 0 when every row is "finished, 0 lost, 0 duplicated, 0 stuck, 0 left" and every
oversized input got the answer it should, in JSON; 1 otherwise; 2 when it cannot start (the
reason printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.e2e.processes import simengine_pids, wait_for  # noqa: E402 - after the path

HOST = "sim-8x-rtxpro6000"
TIME_SCALE = "0.1"
STALL_S = 3
REQUESTS = 3
SPEC = {
    "host": HOST, "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B", "tp": [1],
    "methods": ["autoregressive", {"ddtree": {"budget": [15]}}, {"dflash": {"block_size": [16]}}],
    "workloads": [{"long-context": {"prompt_tokens": [1000, 2000, 3000]}}],
    "max_new_tokens": 512, "requests_per_point": REQUESTS,
    "options": {"stall_timeout_s": STALL_S, "first_token_timeout_s": 30},
}
# The worker's recovery settings, short so that the suite takes minutes (the defaults are
# for a deployment: README "What survives an outage"). The recovery times below follow them.
WORKER_ENV = {
    "SWEEPLAB_STALE_CLAIM_S": "6",      # a run whose worker stopped heartbeating is taken over after this
    "SWEEPLAB_REQUEUE_AFTER_S": "8",    # a queued run nobody claimed is sent again after this
    "SWEEPLAB_WATCH_INTERVAL_S": "1",   # each worker's periodic check
    "SWEEPLAB_HANG_PROBE_S": "3",       # the health probe after a stall
    "SWEEPLAB_LOG_MIN_FREE_MIB": "1",   # the preflight's room on the log disk (a 16 MiB tmpfs here)
}
SETTLE_TIMEOUT_S = 300
CLEAN = "finished, 0 lost, 0 duplicated, 0 stuck, 0 left"


# --- the counts (pure: tests/core/test_fault_tally.py) -----------------------------------


@dataclass
class Tally:
    finished: bool
    lost: int
    duplicated: int
    stuck: int
    detail: list[str] = field(default_factory=list)


def tally(sweep_status, runs, points, records):
    """What a settled sweep kept. `runs`: dicts with id, method, params, tp, status;
    `points`: dicts with id, run_id, position, status, from_search; `records`: point id ->
    (records stored, distinct request indexes). A planned point is the configuration's
    (method, params, tp) and its position: lost when no run measured it ok with a record
    per request sent, duplicated when more than one did (a re-run of a stored point) or
    when its records repeat a request."""
    active = {"planned", "queued", "starting", "running"}
    config = {r["id"]: (r["method"], json.dumps(r["params"], sort_keys=True), r["tp"]) for r in runs}
    measured, planned, detail = {}, set(), []
    duplicated = 0
    for p in points:
        if p["from_search"] or p["status"] == "skipped":
            continue
        key = (config[p["run_id"]], p["position"])
        planned.add(key)
        stored, distinct = records.get(p["id"], (0, 0))
        if stored != distinct:
            duplicated += 1
            detail.append(f"point {p['id']}: {stored} request records for {distinct} requests")
        if p["status"] == "ok":
            if stored < 1:
                detail.append(f"point {p['id']}: ok without its request records")
                continue
            measured.setdefault(key, []).append(p["id"])
    for key, ids in measured.items():
        if len(ids) > 1:
            duplicated += len(ids) - 1
            detail.append(f"{key[0][0]} position {key[1]}: measured by points {ids}")
    lost = len(planned - set(measured))
    for key in sorted(planned - set(measured)):
        states = [p["status"] for p in points if (config[p["run_id"]], p["position"]) == key]
        detail.append(f"{key[0][0]} TP{key[0][2]} position {key[1]}: not measured ({', '.join(states)})")
    stuck = sum(1 for r in runs if r["status"] in active)
    finished = sweep_status == "done" and all(r["status"] == "done" for r in runs)
    return Tally(finished, lost, duplicated, stuck, detail)


@dataclass
class Row:
    fault: str
    finished: bool
    lost: int
    duplicated: int
    stuck: int
    left: int
    recovery_s: float | None
    recovered_by: str
    sweep_id: int | None = None
    wall_s: float = 0.0
    note: str = ""
    detail: list[str] = field(default_factory=list)

    @property
    def clean(self):
        return self.finished and not (self.lost or self.duplicated or self.stuck or self.left)


def table(rows):
    head = ["fault", "sweep finished", "points lost", "points duplicated", "runs stuck", "processes left",
            "recovery time", "recovered by", "sweep wall time"]
    body = [[r.fault, "yes" if r.finished else "no", str(r.lost), str(r.duplicated), str(r.stuck), str(r.left),
             "—" if r.recovery_s is None else f"{r.recovery_s:.1f} s", r.recovered_by, f"{r.wall_s:.0f} s"]
            for r in rows]
    return markdown(head, body)


def markdown(head, body):
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "| " + " | ".join("-" * w for w in widths) + " |", *map(line, body)])


# --- the deployment ------------------------------------------------------------------------


class Deployment:
    """Web + worker on private PostgreSQL and Redis, the server logs on a small tmpfs."""

    def __init__(self, stack, folder):
        from tests.e2e.services import free_port, private_postgres, private_redis

        self.folder = folder
        self.pg = stack.enter_context(private_postgres())
        self.redis = stack.enter_context(private_redis())
        self.log_disk = folder / "log-disk"
        self.log_disk.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(self.log_disk)],
                                 capture_output=True, text=True)
        self.tmpfs_error = mounted.stderr.strip() if mounted.returncode else ""
        if not self.tmpfs_error:
            stack.callback(subprocess.run, ["umount", "-l", str(self.log_disk)], check=False)
        self.web_port = free_port()
        self.env = {**os.environ, "DATABASE_URL": self.pg.url, "CELERY_BROKER_URL": self.redis.url,
                    "SWEEPLAB_DATA_DIR": str(folder / "data"), "SWEEPLAB_LOG_DIR": str(self.log_disk),
                    "SWEEPLAB_HTTPS": "0", "DJANGO_SETTINGS_MODULE": "sweeplab.settings", **WORKER_ENV}
        self.web = self.worker = None
        self.workers_started = 0
        stack.callback(self.stop)

    def manage(self, *args):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=600)
        if done.returncode:
            raise SystemExit(f"faults: manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")

    def start(self):
        from tests.e2e.services import wait_port

        self.manage("migrate", "--noinput")
        self.manage("seed_demo")
        self.web = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.web_port}", "--noreload", "--insecure"],
            cwd=ROOT, env=self.env, stdout=open(self.folder / "web.log", "ab"), stderr=subprocess.STDOUT,
            start_new_session=True)
        self.start_worker()
        if not wait_port(self.web_port, timeout=60):
            raise SystemExit(f"faults: the web server did not start:\n{(self.folder / 'web.log').read_text()[-3000:]}")

    def start_worker(self):
        self.workers_started += 1
        self.worker = subprocess.Popen(
            [sys.executable, "manage.py", "worker", "--host", HOST, "--slots", "2"], cwd=ROOT, env=self.env,
            stdout=open(self.folder / f"worker-{self.workers_started}.log", "ab"), stderr=subprocess.STDOUT,
            start_new_session=True)

    def kill_worker(self):
        """SIGKILL the worker and its pool (its process group): its server, in a session of
        its own, is orphaned."""
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(timeout=10)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.web_port}"

    def worker_log(self):
        return (self.folder / f"worker-{self.workers_started}.log").read_text(errors="replace")

    def stop(self):
        for proc in (self.worker, self.web):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


def setup_django(env):
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "SWEEPLAB_DATA_DIR", "SWEEPLAB_LOG_DIR", "DJANGO_SETTINGS_MODULE",
                *WORKER_ENV):
        os.environ[key] = env[key]
    import django

    django.setup()


def db(read, default=None):
    """`read()` on the database, or `default` while the database is away (the suite's own
    reads during an outage reconnect after it)."""
    from django.db import connection
    from django.db.utils import InterfaceError, OperationalError

    try:
        return read()
    except (OperationalError, InterfaceError):
        connection.close()
        return default


class Api:
    """The API as a script uses it: a bearer token of an operator."""

    def __init__(self, base):
        import requests
        from django.contrib.auth.models import Group, User

        from runs.models import ApiToken
        from runs.tokens import new_token

        user = User.objects.create_user("faults", password=None)
        user.groups.add(Group.objects.get(name="operator"))
        token, digest = new_token()
        ApiToken.objects.create(user=user, name="fault suite", prefix=token[:12], key_hash=digest)
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def post(self, path, timeout=120, **kwargs):
        return self.session.post(self.base + path, timeout=timeout, **kwargs)

    def launch(self, name):
        response = self.post("/api/sweeps?launch=true", json={"name": name, **SPEC})
        if response.status_code != 201:
            raise SystemExit(f"faults: the sweep was refused ({response.status_code}): {response.text[:2000]}")
        return response.json()["id"]

    def resume(self, sweep_id):
        response = self.post(f"/api/sweeps/{sweep_id}/resume")
        if response.status_code != 200:
            raise RuntimeError(f"resume answered {response.status_code}: {response.text[:500]}")


# --- what the suite watches ----------------------------------------------------------------


def settled(sweep_id):
    from benchmarks.models import Sweep

    return db(lambda: Sweep.objects.filter(pk=sweep_id, status__in=["done", "cancelled"]).exists(), False)


def run_in_flight(sweep_id, after_points=1):
    """The sweep's run in flight once `after_points` points are stored ok, else None."""
    from runs.models import Point, Run

    def read():
        if Point.objects.filter(run__sweep_id=sweep_id, status="ok").count() < after_points:
            return None
        return Run.objects.filter(sweep_id=sweep_id, status="running").exclude(pid=None).first()

    return db(read)


def streaming(run):
    """Whether `run`'s server is streaming a request now (its own metrics say so)."""
    from sweepcore import servermetrics

    try:
        return (servermetrics.scrape(f"http://127.0.0.1:{run.port}", timeout=2).total("sglang:num_running_reqs") or 0) > 0
    except servermetrics.ScrapeError:
        return False


def first_point_after(sweep_id, moment):
    """Seconds from `moment` (epoch) to the first point of the sweep stored ok after it."""
    from datetime import datetime, timezone

    from runs.models import Point

    at = datetime.fromtimestamp(moment, tz=timezone.utc)
    first = db(lambda: Point.objects.filter(run__sweep_id=sweep_id, status="ok", finished_at__gt=at)
               .order_by("finished_at").values_list("finished_at", flat=True).first())
    return None if first is None else first.timestamp() - moment


def median_gap(sweep_id):
    """The median time between two points of the sweep stored one after the other, s."""
    import statistics

    from runs.models import Point

    at = [t.timestamp() for t in Point.objects.filter(run__sweep_id=sweep_id, status="ok")
          .order_by("finished_at").values_list("finished_at", flat=True)]
    return statistics.median(b - a for a, b in zip(at, at[1:])) if len(at) > 1 else None


def sweep_tally(sweep_id):
    from django.db.models import Count

    from benchmarks.models import Sweep
    from runs.models import Point, RequestRecord, Run

    sweep = Sweep.objects.get(pk=sweep_id)
    runs = list(Run.objects.filter(sweep_id=sweep_id).order_by("position", "attempt")
                .values("id", "method", "params", "tp", "status"))
    points = list(Point.objects.filter(run__sweep_id=sweep_id).order_by("run_id", "position")
                  .values("id", "run_id", "position", "status", "from_search"))
    records = {row["point_id"]: (row["n"], row["distinct"]) for row in
               RequestRecord.objects.filter(point__run__sweep_id=sweep_id).values("point_id")
               .annotate(n=Count("id"), distinct=Count("index", distinct=True)).order_by("point_id")}
    return tally(sweep.status, runs, points, records)


# --- the faults ---------------------------------------------------------------------------
# Each meets the launched sweep while a run is in flight and returns (when the fault
# ended, epoch seconds; what recovered it; a note).


class FaultError(Exception):
    """The fault could not be applied as meant (the sweep ended first, ...)."""


def mid_run(sweep_id, after_points=1, timeout=120):
    run = wait_for(lambda: run_in_flight(sweep_id, after_points), timeout=timeout, interval=0.1)
    if run is None:
        raise FaultError(f"no run in flight after {after_points} point(s) within {timeout} s")
    return run


def no_fault(dep, api, sweep_id):
    return time.time(), "—", ""


def redis_restart(dep, api, sweep_id):
    mid_run(sweep_id)
    dep.redis.restart(down_s=5)
    return time.time(), "itself (the worker's periodic check sends the lost runs again)", "down 5 s"


def postgres_restart(dep, api, sweep_id):
    mid_run(sweep_id)
    dep.pg.restart()
    return time.time(), "itself (database writes retried)", "fast restart"


def postgres_stop(dep, api, sweep_id):
    mid_run(sweep_id)
    dep.pg.stop()
    time.sleep(10)
    dep.pg.start()
    return time.time(), "itself (database writes retried)", "down 10 s"


def worker_sigkill(dep, api, sweep_id):
    run = mid_run(sweep_id)
    orphan = run.pid
    dep.kill_worker()
    alive = orphan in simengine_pids()
    dep.start_worker()
    return time.time(), "itself (the new worker takes the stale run over)", \
        f"the killed worker's server (pid {orphan}) {'was orphaned' if alive else 'died with it'}; a new worker started"


def server_sigstop(dep, api, sweep_id):
    from runs.models import Run

    run = mid_run(sweep_id)
    if not wait_for(lambda: streaming(run), timeout=60, interval=0.05):
        raise FaultError("the run's server never streamed a request")
    time.sleep(0.3)
    os.kill(run.pid, signal.SIGSTOP)
    frozen = time.time()
    ended = wait_for(lambda: db(lambda: Run.objects.filter(pk=run.pk, status__in=["crashed", "failed", "done"])
                                .values_list("status", "failure_kind").first()), timeout=120)
    hung_after = time.time() - frozen
    if not wait_for(lambda: settled(sweep_id), timeout=SETTLE_TIMEOUT_S):
        raise FaultError("the sweep did not settle after the hang")
    api.resume(sweep_id)
    return frozen, "resume (the hung run measures what the hang cut off)", \
        f"frozen for good; its run ended {ended and '/'.join(ended)} {hung_after:.1f} s after the freeze " \
        f"(stall timeout {STALL_S} s + probe {WORKER_ENV['SWEEPLAB_HANG_PROBE_S']} s)"


def disk_full(dep, api, sweep_id):
    from runs.models import Run

    if dep.tmpfs_error:
        raise FaultError(f"cannot mount a tmpfs here: {dep.tmpfs_error}")
    mid_run(sweep_id)
    filler = dep.log_disk / "filler"
    with open(filler, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass
    if not wait_for(lambda: settled(sweep_id), timeout=SETTLE_TIMEOUT_S):
        raise FaultError("the sweep did not settle on the full disk")
    failed = db(lambda: list(Run.objects.filter(sweep_id=sweep_id, failure_kind="disk_full")
                             .order_by("position").values_list("failure_cause", flat=True)), [])
    filler.unlink()
    api.resume(sweep_id)
    cause = failed[0] if failed else "no run failed disk_full"
    return time.time(), "resume once room was made", f"{len(failed)} run(s) failed disk_full: {cause[:160]}"


# --- oversized input -------------------------------------------------------------------------


def nested(depth, leaf):
    return "[" * depth + leaf + "]" * depth


def vllm_result_file(records):
    """A `vllm bench serve --save-result` file of `records` requests (what the probe sent:
    52 MB for a million)."""
    n = records
    return json.dumps({
        "date": "20261206-120000", "backend": "vllm", "model_id": "Qwen/Qwen3.6-27B", "tokenizer_id": "Qwen/Qwen3.6-27B",
        "num_prompts": n, "dataset_name": "random", "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 64,
        "duration": 100.0, "completed": n, "failed": 0, "total_input_tokens": 1024 * n, "total_output_tokens": 16 * n,
        "request_throughput": n / 100, "output_throughput": 16 * n / 100, "total_token_throughput": 1040 * n / 100,
        "input_lens": [1024] * n, "output_lens": [16] * n, "ttfts": [0.2] * n, "itls": [[0.02] * 3] * n,
        "latencies": [0.5] * n, "start_times": [1.0] * n, "generated_texts": [""] * n, "errors": [""] * n,
    }).encode()


def oversized_inputs():
    """(what, method path, request kwargs, the answer wanted)."""
    spec = lambda **over: {"name": "oversized", **SPEC, **over}  # noqa: E731
    big_spec = json.dumps(spec(description="x" * (5 << 20)))
    return [
        ("JSON spec nested 10,000 deep", "/api/sweeps/plan",
         {"data": nested(10000, "1"), "headers": {"Content-Type": "application/json"}}, 400),
        ("YAML spec nested 10,000 deep", "/api/sweeps/plan",
         {"data": nested(10000, "1"), "headers": {"Content-Type": "application/yaml"}}, 400),
        ("prompt_tokens 10^18", "/api/sweeps",
         {"json": spec(workloads=[{"long-context": {"prompt_tokens": [10 ** 18]}}])}, 400),
        ("max_new_tokens 10^18", "/api/sweeps", {"json": spec(max_new_tokens=10 ** 18)}, 400),
        ("concurrency 100,000", "/api/sweeps?launch=true",
         {"json": spec(concurrency=[100000])}, 400),
        ("requests_per_point 10^9", "/api/sweeps?launch=true", {"json": spec(requests_per_point=10 ** 9)}, 400),
        ("a 5 MB spec", "/api/sweeps", {"data": big_spec, "headers": {"Content-Type": "application/json"}}, 413),
        ("an 80 MB import", "/api/imports",
         {"files": {"file": ("big.json", b" " * (80 << 20))}, "data": {"host": HOST}}, 413),
        # Within the size limit: imported, its summary from every request, an even sample
        # of them stored (sweepcore.importers: MAX_REQUESTS_PER_POINT).
        ("an import of 1,000,000 request records", "/api/imports",
         {"files": {"file": ("million.json", vllm_result_file(1_000_000))}, "data": {"host": HOST}}, 201),
    ]


def peak_rss_mib(pid):
    """The peak resident memory of `pid` and its children so far (VmHWM), MiB."""
    total = 0
    for p in [pid, *children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def children(pid):
    try:
        return [int(c) for t in Path(f"/proc/{pid}/task").iterdir()
                for c in (t / "children").read_text().split()]
    except OSError:
        return []


def oversized_input(dep, api, sweep_id, answers):
    mid_run(sweep_id)
    before = peak_rss_mib(dep.web.pid)
    for what, path, kwargs, wanted in oversized_inputs():
        started = time.monotonic()
        try:
            response = api.post(path, timeout=300, **kwargs)
            took = time.monotonic() - started
            try:
                body = response.json()
                said = (body.get("detail") or "; ".join(f"{e['path']}: {e['message']}" for e in body.get("errors", []))
                        or f"{body.get('message', '')} (stored {body.get('requests', 0):,} of "
                           f"{body.get('requests_in_file', 0):,} request records)")
                is_json = True
            except ValueError:
                said, is_json = response.text[:200], False
            answers.append({"input": what, "status": response.status_code, "wanted": wanted, "json": is_json,
                            "seconds": round(took, 2), "message": str(said)[:160]})
        except Exception as exc:  # noqa: BLE001 - a refused connection is what is reported
            answers.append({"input": what, "status": None, "wanted": wanted, "json": False,
                            "seconds": round(time.monotonic() - started, 2), "message": f"{type(exc).__name__}: {exc}"})
    after = peak_rss_mib(dep.web.pid)
    return time.time(), "—", f"web server's peak memory {before:.0f} MiB before, {after:.0f} MiB after"


FAULTS = {
    "none": no_fault,
    "redis-restart": redis_restart,
    "postgres-restart": postgres_restart,
    "postgres-stop": postgres_stop,
    "worker-sigkill": worker_sigkill,
    "server-sigstop": server_sigstop,
    "disk-full": disk_full,
    "oversized-input": oversized_input,
}


def run_case(dep, api, name, answers):
    from runs.models import Run, RunEvent

    before = simengine_pids()
    started = time.time()
    sweep_id = api.launch(f"faults: {name}")
    inject = FAULTS[name]
    try:
        if name == "oversized-input":
            end, by, note = inject(dep, api, sweep_id, answers)
        else:
            end, by, note = inject(dep, api, sweep_id)
    except (FaultError, RuntimeError) as exc:
        end, by, note = time.time(), "—", f"the fault was not applied as meant: {exc}"
    wait_for(lambda: settled(sweep_id), timeout=SETTLE_TIMEOUT_S, interval=0.5)
    wall = time.time() - started
    # Once settled, a run's server is torn down at once: give it a few seconds to exit.
    wait_for(lambda: not (simengine_pids() - before), timeout=20, interval=0.5)
    left = len(simengine_pids() - before)
    counts = wait_for(lambda: db(lambda: sweep_tally(sweep_id)), timeout=30)
    recovery = None if name in ("none", "oversized-input") else first_point_after(sweep_id, end)
    resent = db(lambda: RunEvent.objects.filter(run__sweep_id=sweep_id, message__startswith="re-sent").count(), 0)
    if resent:
        note += f"; {resent} task(s) re-sent by the periodic check"
    if name == "none":
        gap = db(lambda: median_gap(sweep_id))
        note = f"undisturbed, a point stored every {gap:.1f} s (median): the recovery times below include one"
    row = Row(name, counts.finished, counts.lost, counts.duplicated, counts.stuck, left, recovery, by, sweep_id, wall,
              note, counts.detail)
    if not row.clean:
        runs = db(lambda: list(Run.objects.filter(sweep_id=sweep_id).order_by("position")
                               .values_list("status", "failure_kind", "failure_cause")), [])
        row.detail += [f"run: {status} {kind} {cause[:200]}" for status, kind, cause in runs]
        if not settled(sweep_id):
            api.post(f"/api/sweeps/{sweep_id}/cancel")  # so that the next case has the host
            wait_for(lambda: settled(sweep_id), timeout=120)
    return row


def shared_services():
    """Whether the machine's own PostgreSQL and Redis answer (the suite never touches them)."""
    pg = subprocess.run(["pg_isready", "-h", "127.0.0.1", "-p", "5432"], capture_output=True).returncode == 0
    redis = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", "6379", "ping"], capture_output=True,
                           text=True).stdout.strip() == "PONG"
    return {"postgresql 127.0.0.1:5432": "up" if pg else "down", "redis 127.0.0.1:6379": "up" if redis else "down"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(FAULTS), help="these faults only (default: all)")
    parser.add_argument("--json", type=Path, help="also write the rows and answers to this file")
    parser.add_argument("--keep", action="store_true", help="keep the suite's folder (logs, worker output)")
    args = parser.parse_args(argv)
    names = args.only or list(FAULTS)
    found = shared_services()
    folder = Path(tempfile.mkdtemp(prefix="sweeplab-faults-"))
    rows, answers = [], []
    try:
        with ExitStack() as stack:
            try:
                dep = Deployment(stack, folder)
            except BaseException as exc:  # pytest.skip from the services: say why, exit 2
                if type(exc).__name__ == "Skipped":
                    print(f"faults: cannot start: {exc}", file=sys.stderr)
                    return 2
                raise
            dep.start()
            setup_django(dep.env)
            from benchmarks.models import Engine

            engine = Engine.objects.get(name="sglang-sim")
            engine.argv_template = [*engine.argv_template, "--time-scale", TIME_SCALE]
            engine.save(update_fields=["argv_template"])
            api = Api(dep.url)
            print(f"faults: web {dep.url}, PostgreSQL {dep.pg.url}, Redis {dep.redis.url} (private), "
                  f"logs on {dep.log_disk} ({'16 MiB tmpfs' if not dep.tmpfs_error else 'no tmpfs: ' + dep.tmpfs_error})",
                  flush=True)
            for name in names:
                row = run_case(dep, api, name, answers)
                rows.append(row)
                print(f"  {name}: {'clean' if row.clean else 'NOT CLEAN'} in {row.wall_s:.0f} s; {row.note}", flush=True)
                for line in row.detail:
                    print(f"      {line}", flush=True)
            workers = dep.workers_started
            dep.stop()
        left_after = simengine_pids()
    finally:
        if args.keep:
            print(f"faults: kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    print()
    print(f"Fault suite, {time.strftime('%Y-%m-%d %H:%M')}; worker settings: "
          + ", ".join(f"{k}={v}" for k, v in WORKER_ENV.items()) + f"; simengine at {TIME_SCALE} x real time; "
          f"{workers} worker start(s)")
    print()
    print(table(rows))
    notes = [f"- {r.fault}: {r.note}" for r in rows if r.note]
    if notes:
        print()
        print("\n".join(notes))
    refused_ok = all(a["status"] == a["wanted"] and a["json"] for a in answers)
    if answers:
        print()
        print(markdown(["oversized input", "answer", "wanted", "JSON", "time", "message"],
                       [[a["input"], a["status"], a["wanted"], "yes" if a["json"] else "no", f"{a['seconds']:.2f} s",
                         a["message"][:110]] for a in answers]))
    found_after = shared_services()
    print()
    print("The machine's own services: " + ", ".join(f"{k} {v} before, {found_after[k]} after" for k, v in found.items()))
    if left_after:
        print(f"simengine servers alive after the suite stopped: {sorted(left_after)}")
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows], "answers": answers,
                                         "services_before": found, "services_after": found_after}, indent=2))
    return 0 if all(r.clean for r in rows) and refused_ok and found == found_after else 1


if __name__ == "__main__":
    sys.exit(main())
