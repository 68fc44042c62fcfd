"""Turning a validated spec into a stored sweep with its planned runs and points."""

from django.db import transaction

from benchmarks.catalog import active_quarantines, load_catalog
from benchmarks.models import LLM, Engine, Host, Sweep, Workload
from benchmarks.plan import canonical_params, plan
from runs.models import Point, Run


def plan_spec(spec, catalog=None):
    """The plan of a validated spec against the current catalog and quarantines."""
    catalog = catalog or load_catalog()
    host = Host.objects.get(name=spec.host)
    engine = Engine.objects.get(name=spec.engine)
    llm = LLM.objects.get(name=spec.model)
    return plan(spec, catalog, active_quarantines(engine, llm, host))


@transaction.atomic
def create_sweep(spec, owner=None, catalog=None):
    """Store a draft sweep with its planned runs and points; returns (sweep, plan)."""
    the_plan = plan_spec(spec, catalog)
    sweep = Sweep.objects.create(
        name=spec.name,
        spec=spec.to_dict(),
        host=Host.objects.get(name=spec.host),
        engine=Engine.objects.get(name=spec.engine),
        llm=LLM.objects.get(name=spec.model),
        owner=owner,
    )
    workloads = {w.name: w for w in Workload.objects.filter(name__in=[w.workload for w in spec.workloads])}
    runs = Run.objects.bulk_create(
        Run(
            sweep=sweep,
            position=i,
            method=r.method,
            params=r.params,
            params_key=canonical_params(r.params),
            tp=r.tp,
            status=r.status,
            reason=r.reason,
            known_failure_id=r.quarantine.id if r.quarantine else None,
            retry_quarantined=r.retry_quarantined,
        )
        for i, r in enumerate(the_plan.runs)
    )
    Point.objects.bulk_create(
        Point(
            run=run,
            position=j,
            workload=workloads[p.workload],
            prompt_tokens=p.prompt_tokens,
            max_new_tokens=p.max_new_tokens,
            concurrency=p.concurrency,
            status=p.status,
            reason=p.reason,
        )
        for run, planned in zip(runs, the_plan.runs)
        for j, p in enumerate(planned.points)
    )
    return sweep, the_plan
