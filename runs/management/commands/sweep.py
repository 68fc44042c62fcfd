"""`python manage.py sweep validate|plan|create FILE`.

Invalid input exits with status 2 and its message on stderr, never a traceback."""

import json
import sys

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from benchmarks.catalog import load_catalog
from benchmarks.spec import SpecError, load_spec_file
from runs.sweeps import create_sweep, plan_spec

EXIT_INVALID = 2


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

    def handle(self, *args, action, **options):
        try:
            getattr(self, f"do_{action}")(**options)
        except SpecError as exc:
            for line in exc.errors:
                self.stderr.write(line)
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
        self.warn(the_plan.warnings)

    def do_plan(self, file, as_json=False, **options):
        spec, catalog = self.load(file)
        the_plan = plan_spec(spec, catalog)
        if as_json:
            self.stdout.write(json.dumps(the_plan.to_dict(), indent=2))
        else:
            self.print_plan(spec, the_plan)
        self.warn(the_plan.warnings)

    def do_create(self, file, owner=None, **options):
        user = None
        if owner:
            user = get_user_model().objects.filter(username=owner).first()
            if user is None:
                raise SpecError(f"--owner: no user named {owner!r}")
        spec, catalog = self.load(file)
        sweep, the_plan = create_sweep(spec, owner=user, catalog=catalog)
        totals = the_plan.totals
        self.stdout.write(
            f"Created draft sweep {sweep.pk} ({sweep.name}): {totals['runs']} runs, "
            f"{totals['points']} points ({totals['skipped_points']} skipped)."
        )
        self.stdout.write(f"{settings.SWEEPLAB_BASE_URL}{sweep.get_absolute_url()}")
        self.warn(the_plan.warnings)

    def warn(self, warnings):
        for line in warnings:
            self.stderr.write(f"warning: {line}")

    def print_plan(self, spec, the_plan):
        totals = the_plan.totals
        self.stdout.write(
            f"{spec.name}: {spec.model} with {spec.engine} on {spec.host}: "
            f"{totals['runs']} runs, {totals['points']} points ({totals['skipped_points']} skipped)"
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
