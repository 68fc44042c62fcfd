"""`python manage.py sweep validate|plan|create|run FILE`, `sweep launch|cancel|resume|show ID`.

Invalid input exits with status 2 and its message on stderr, never a traceback."""

import json
import os
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, transaction

from benchmarks.catalog import load_catalog
from benchmarks.models import Sweep, SweepStatus
from runs.lifecycle import (
    SweepStateError,
    cancel_sweep,
    create_sweep,
    launch_sweep,
    plan_spec,
    queued_on,
    resume_sweep,
)
from runs.models import PointStatus, Run, RunStatus
from runs.results.exports import sweep_as_dict
from runs.worker.executor import execute_run
from sweepcore.spec import SpecError, load_spec_file

POLL_S = 1.0

EXIT_INVALID = 2


def plan_warnings(the_plan):
    """A plan's warnings, and why launching it would be refused when it measures nothing."""
    refused = [f"{the_plan.nothing_to_measure}; launching it is refused"] if the_plan.nothing_to_measure else []
    return refused + the_plan.warnings


class Command(BaseCommand):
    help = "Validate, plan and store sweep files."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        validate = sub.add_parser("validate", help="check a sweep file and say what is wrong")
        validate.add_argument("file")
        plan = sub.add_parser("plan", help="show the runs and points a sweep file plans")
        plan.add_argument("file")
        plan.add_argument("--json", action="store_true", dest="as_json", help="print the plan as JSON")
        create = sub.add_parser("create", help="store a draft sweep with its plan")
        create.add_argument("file")
        create.add_argument("--owner", help="username of the sweep's owner")
        run = sub.add_parser("run", help="create a sweep, launch it and wait for it to finish")
        run.add_argument("file")
        run.add_argument("--owner", help="username of the sweep's owner")
        run.add_argument("--inline", action="store_true", help="execute the runs in this process, no broker")
        run.add_argument("--json", action="store_true", dest="as_json", help="print the results as JSON")
        for action, text in (
            ("launch", "queue a draft sweep's runs on its host"),
            ("cancel", "stop a sweep: no new runs; the running one stops at its next point"),
            ("resume", "re-enqueue what stopped without finishing (cancelled, or its worker died); stored points are kept"),
        ):
            sub.add_parser(action, help=text).add_argument("sweep_id", type=int)
        show = sub.add_parser("show", help="a sweep's runs and points with their results")
        show.add_argument("sweep_id", type=int)
        show.add_argument("--json", action="store_true", dest="as_json", help="print as JSON")

    def handle(self, *args, action, **options):
        try:
            getattr(self, f"do_{action}")(**options)
        except SpecError as exc:
            for line in exc.errors:
                self.stderr.write(line)
            sys.exit(EXIT_INVALID)
        except SweepStateError as exc:
            self.stderr.write(str(exc))
            sys.exit(EXIT_INVALID)
        except DatabaseError as exc:
            raise CommandError(
                f"the database is not ready ({exc.__class__.__name__}: {exc}); "
                "run `python manage.py migrate` and `python manage.py seed_demo`"
            ) from None

    def load(self, path):
        catalog = load_catalog()
        return load_spec_file(path, catalog), catalog

    def do_validate(self, file, **options):
        spec, catalog = self.load(file)
        the_plan = plan_spec(spec, catalog)
        totals = the_plan.totals
        self.stdout.write(
            f"{file}: valid. {totals['runs']} runs, {totals['points']} points "
            f"({totals['skipped_points']} skipped)."
        )
        self.warn(plan_warnings(the_plan))

    def do_plan(self, file, as_json=False, **options):
        spec, catalog = self.load(file)
        the_plan = plan_spec(spec, catalog)
        if as_json:
            self.stdout.write(json.dumps(the_plan.to_dict(), indent=2))
        else:
            self.print_plan(spec, the_plan)
        self.warn(plan_warnings(the_plan))

    def do_create(self, file, owner=None, **options):
        user = self.owner(owner)
        spec, catalog = self.load(file)
        sweep, the_plan = create_sweep(spec, owner=user, catalog=catalog)
        totals = the_plan.totals
        self.stdout.write(
            f"Created draft sweep {sweep.pk} ({sweep.name}): {totals['runs']} runs, "
            f"{totals['points']} points ({totals['skipped_points']} skipped)."
        )
        self.stdout.write(f"{settings.SWEEPLAB_BASE_URL}{sweep.get_absolute_url()}")
        self.warn(plan_warnings(the_plan))

    def get_sweep(self, sweep_id):
        sweep = Sweep.objects.select_related("host").filter(pk=sweep_id).first()
        if sweep is None:
            raise SpecError(f"no sweep {sweep_id}")
        return sweep

    def do_launch(self, sweep_id, **options):
        sweep = self.get_sweep(sweep_id)
        run_ids = launch_sweep(sweep)
        self.stdout.write(f"Sweep {sweep.pk}: {len(run_ids)} runs queued on {queued_on(sweep)}.")

    def do_cancel(self, sweep_id, **options):
        sweep = self.get_sweep(sweep_id)
        cancelled = cancel_sweep(sweep)
        self.stdout.write(f"Sweep {sweep.pk} cancelled: {cancelled} waiting runs will not start; a running one stops at its next point.")

    def do_resume(self, sweep_id, **options):
        sweep = self.get_sweep(sweep_id)
        run_ids = resume_sweep(sweep)
        self.stdout.write(f"Sweep {sweep.pk}: {len(run_ids)} unfinished runs queued again; stored points are kept.")

    def do_show(self, sweep_id, as_json=False, **options):
        sweep = self.get_sweep(sweep_id)
        if as_json:
            self.stdout.write(json.dumps(sweep_as_dict(sweep), indent=2))
        else:
            self.print_results(sweep)

    def do_run(self, file, owner=None, inline=False, as_json=False, **options):
        user = self.owner(owner)
        spec, catalog = self.load(file)
        with transaction.atomic():  # a launch refused stores no draft either
            sweep, the_plan = create_sweep(spec, owner=user, catalog=catalog)
            run_ids = launch_sweep(sweep, enqueue=not inline)
        self.warn(the_plan.warnings)
        progress = self.stderr if as_json else self.stdout
        progress.write(f"Sweep {sweep.pk} ({sweep.name}): {len(run_ids)} runs to execute"
                       f"{' in this process' if inline else f' on {queued_on(sweep)}'}; "
                       f"{settings.SWEEPLAB_BASE_URL}{sweep.get_absolute_url()}")
        reporter = Progress(progress, sweep.pk)
        try:
            if inline:
                for run_id in run_ids:
                    execute_run(run_id, worker_id=f"inline:{os.getpid()}")
                    reporter.update()
            else:
                while True:
                    reporter.update()
                    sweep.refresh_from_db(fields=["status"])
                    if sweep.status in (SweepStatus.DONE, SweepStatus.CANCELLED):
                        break
                    time.sleep(POLL_S)
        except KeyboardInterrupt:
            progress.write(f"\nStopped waiting. Sweep {sweep.pk} goes on; `sweep cancel {sweep.pk}` stops it.")
            sys.exit(130)
        reporter.update(final=True)
        if as_json:
            self.stdout.write(json.dumps(sweep_as_dict(sweep), indent=2))
        else:
            self.print_results(sweep)

    def owner(self, owner):
        if not owner:
            return None
        user = get_user_model().objects.filter(username=owner).first()
        if user is None:
            raise SpecError(f"--owner: no user named {owner!r}")
        return user

    def print_results(self, sweep):
        data = sweep_as_dict(sweep)
        self.stdout.write(f"Sweep {data['sweep']} {sweep.name}: {data['status']}")
        for run in data["runs"]:
            label = " ".join([run["method"], *[f"{k}={v}" for k, v in run["params"].items()], f"TP{run['tp']}"])
            cause = f": {run['failure_kind']}: {run['failure_cause']}" if run["failure_kind"] else ""
            self.stdout.write(f"  {label:<36} {run['status']}{cause}")
            if run["capacity"]:
                self.stdout.write(f"    capacity: {run['capacity']['message']}")
            for p in run["points"]:
                length = p["prompt_tokens"] if p["prompt_tokens"] is not None else "-"
                load = f"x{p['concurrency']:<3}" if p["request_rate"] is None else f"{p['request_rate']:g}/s"
                head = f"    {p['workload']:<14} {length!s:>6} {load:<6} {p['status']:<16}"
                if p["status"] == PointStatus.OK:
                    accept = f"  accept {p['accept_length']:.2f}" if p["accept_length"] else ""
                    decode = f"{p['decode_tok_s']:8.1f}" if p["decode_tok_s"] is not None else f"{'-':>8}"
                    ttft = f"{p['mean_ttft_ms']:8.1f}" if p["mean_ttft_ms"] is not None else f"{'-':>8}"
                    ci = p["decode_tok_s_ci"]
                    spread = f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else ""
                    verdict = ""
                    if p["validity"] and p["validity"] != "valid":
                        verdict = f"  {p['validity'].upper()}: " + "; ".join(
                            f"{r['code']}: {r['message']}" for r in p["validity_reasons"])
                    simulated = f"  simulated at {p['simulated_time_scale']:g}x" if p["simulated_time_scale"] else ""
                    goodput = ""
                    if p["slo_met"] is not None:
                        goodput = (f"  SLO {'met' if p['slo_met'] else 'missed'}, goodput {p['goodput']:.2f} req/s "
                                   f"({p['slo_attainment'] * 100:.0f} %)") if p["goodput"] is not None else ""
                    self.stdout.write(f"{head} {decode} tok/s{spread} n={p['n']}  TTFT {ttft} ms{accept}"
                                      f"{goodput}{simulated}{verdict}")
                else:
                    self.stdout.write(f"{head} {p['reason']}")

    def warn(self, warnings):
        for line in warnings:
            self.stderr.write(f"warning: {line}")

    def print_plan(self, spec, the_plan):
        totals = the_plan.totals
        self.stdout.write(
            f"{spec.name}: {spec.model} with {spec.engine} on {spec.host}: "
            f"{totals['runs']} runs, {totals['points']} points ({totals['skipped_points']} skipped)"
        )
        if spec.search:
            found = spec.search_spec
            limits = ", ".join(f"{key} {value:g}" for key, value in spec.slo.items())
            self.stdout.write(
                f"Capacity search in every run: the highest {found.metric} from {found.low:g} to {found.high:g} "
                f"that meets the SLO ({limits}), each probe a stored point, at most {found.max_probes} probes"
            )
        width = max([len(r.label) for r in the_plan.runs] + [13])
        self.stdout.write(f"{'#':>4}  {'configuration':<{width}}  {'status':<8}  points planned")
        skips = {}
        for i, run in enumerate(the_plan.runs, 1):
            planned = sum(p.status == "planned" for p in run.points)
            note = "  (quarantined; retrying as asked)" if run.retry_quarantined else ""
            self.stdout.write(f"{i:>4}  {run.label:<{width}}  {run.status:<8}  {planned}/{len(run.points)}{note}")
            if run.reason:
                self.stdout.write(f"{'':>6}{run.reason}")
                continue
            for p in run.points:
                if p.status != "planned":
                    length = f" {p.prompt_tokens} tokens" if p.prompt_tokens is not None else ""
                    skips.setdefault((f"{p.workload}{length} x{p.concurrency}", p.reason), []).append(run.label)
        if skips:
            measured = sum(not r.reason for r in the_plan.runs)
            self.stdout.write("Skipped points:")
            for (point, reason), labels in skips.items():
                where = f"in all {measured} runs" if len(labels) == measured else "in " + ", ".join(labels)
                self.stdout.write(f"  {point} {where}: {reason}")


class Progress:
    """Progress of a sweep: a bar on a terminal, a line per finished run otherwise."""

    def __init__(self, out, sweep_id):
        self.out = out
        self.sweep_id = sweep_id
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.reported = set()

    def update(self, final=False):
        runs = list(Run.objects.filter(sweep_id=self.sweep_id).order_by("position"))
        done = [r for r in runs if r.status in (RunStatus.DONE, RunStatus.CRASHED, RunStatus.FAILED, RunStatus.SKIPPED, RunStatus.CANCELLED)]
        if self.tty:
            width = 30
            filled = int(width * len(done) / len(runs)) if runs else width
            current = next((r.config_label for r in runs if r.status in (RunStatus.STARTING, RunStatus.RUNNING)), "")
            self.out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {len(done)}/{len(runs)} runs {current:<40}", ending="")
            if final:
                self.out.write("")
            self.out.flush()
            return
        for i, run in enumerate(runs, 1):
            if run in done and run.pk not in self.reported:
                self.reported.add(run.pk)
                cause = f" ({run.failure_kind}: {run.failure_cause})" if run.failure_kind else (
                    f" ({run.reason})" if run.reason else ""
                )
                self.out.write(f"run {i}/{len(runs)} {run.config_label}: {run.status}{cause}")
