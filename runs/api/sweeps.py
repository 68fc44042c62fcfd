"""Sweeps: list, read, plan, create, launch, cancel, resume, and their exports."""

from datetime import datetime

from django.db import transaction
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from benchmarks.catalog import load_catalog
from benchmarks.models import Sweep
from runs.api.auth import require
from runs.api.schemas import DENIED, FILTER_TEXT, ID, ErrorOut, Paging, page
from runs.lifecycle import SweepStateError, cancel_sweep, create_sweep, launch_sweep, plan_spec, resume_sweep
from runs.models import Point, Run
from runs.results.exports import EXPORT_KINDS, export_response
from sweepcore.spec import SPEC_MAX_BYTES, SpecError, beyond, load_json, load_yaml, validate

router = Router()


class SpecErrorItem(Schema):
    path: str
    message: str


class SpecErrorsOut(Schema):
    errors: list[SpecErrorItem]


class SweepOut(Schema):
    id: int
    name: str
    status: str
    source: str
    host: str
    engine: str
    model: str
    owner: str | None
    created_at: datetime
    launched_at: datetime | None
    finished_at: datetime | None
    runs: int
    url: str


class SweepDetailOut(SweepOut):
    spec: dict
    run_status_counts: dict[str, int]
    point_status_counts: dict[str, int]


class SweepList(Schema):
    count: int
    items: list[SweepOut]


def sweep_out(sweep):
    return {
        "id": sweep.pk, "name": sweep.name, "status": sweep.status, "source": sweep.source,
        "host": sweep.host.name, "engine": sweep.engine.name, "model": sweep.llm.name,
        "owner": sweep.owner.get_username() if sweep.owner else None, "created_at": sweep.created_at,
        "launched_at": sweep.launched_at, "finished_at": sweep.finished_at, "runs": sweep.run_count,
        "url": sweep.get_absolute_url(),
    }


def sweeps_queryset():
    return Sweep.objects.select_related("host", "engine", "llm", "owner").annotate(run_count=Count("runs"))


class SweepFilters(Schema):
    status: str | None = Field(**FILTER_TEXT)
    host: str | None = Field(**FILTER_TEXT)
    engine: str | None = Field(**FILTER_TEXT)
    model: str | None = Field(**FILTER_TEXT)
    name: str | None = Field(**FILTER_TEXT)


@router.get("/sweeps", response={200: SweepList, 400: ErrorOut, **DENIED}, tags=["sweeps"])
def list_sweeps(request, filters: Query[SweepFilters], paging: Query[Paging]):
    """Sweeps, newest first. ``name`` matches a part of the name."""
    limit, offset = paging.bounds()
    qs = sweeps_queryset()
    for field, lookup in (("status", "status"), ("host", "host__name"), ("engine", "engine__name"),
                          ("model", "llm__name"), ("name", "name__icontains")):
        value = getattr(filters, field)
        if value:
            qs = qs.filter(**{lookup: value})
    count, items = page(qs.order_by("-created_at", "-id"), limit, offset)
    return {"count": count, "items": [sweep_out(s) for s in items]}


@router.get("/sweeps/{int:sweep_id}", response={200: SweepDetailOut, **DENIED, 404: ErrorOut}, tags=["sweeps"])
def get_sweep(request, sweep_id: ID):
    sweep = get_object_or_404(sweeps_queryset(), pk=sweep_id)
    runs = Run.objects.filter(sweep=sweep).values("status").annotate(n=Count("id")).order_by("status")
    points = Point.objects.filter(run__sweep=sweep).values("status").annotate(n=Count("id")).order_by("status")
    return {
        **sweep_out(sweep), "spec": sweep.spec,
        "run_status_counts": {r["status"]: r["n"] for r in runs},
        "point_status_counts": {p["status"]: p["n"] for p in points},
    }


SPEC_BODY = {
    "requestBody": {
        "required": True,
        "description": "The sweep spec (the YAML format of the README) as a JSON object, or as YAML text.",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "application/yaml": {"schema": {"type": "string"}},
            "text/yaml": {"schema": {"type": "string"}},
        },
    }
}


def spec_from_body(request):
    """The validated Spec of a request body, or a 400 with the CLI's messages (a 413 when
    the body is larger than a spec may be, before it is parsed)."""
    if len(request.body) > SPEC_MAX_BYTES:
        raise HttpError(413, f"the spec is {len(request.body):,} bytes; a spec may be {beyond(SPEC_MAX_BYTES, "bytes")}")
    content_type = (request.content_type or "").lower()
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("spec: the body is not UTF-8 text") from None
    if "yaml" in content_type:
        data = load_yaml(text, source="spec")
    else:
        try:
            data = load_json(text, source="spec")
        except ValueError as exc:
            raise SpecError(f"spec: not valid JSON ({exc}); send YAML with Content-Type: application/yaml") from None
    catalog = load_catalog()
    return validate(data, catalog), catalog


def spec_errors(exc):
    entries = []
    for line in exc.errors:
        path, sep, message = line.partition(": ")
        entries.append({"path": path if sep else "", "message": message if sep else line})
    return {"errors": entries}


class PlanOut(Schema):
    runs: list[dict]
    totals: dict[str, int]
    warnings: list[str]
    nothing_to_measure: str = Field(description="Why launching it would be refused (it would measure nothing); "
                                                "empty when it measures something.")


@router.post("/sweeps/plan", response={200: PlanOut, 400: SpecErrorsOut, **DENIED, 413: ErrorOut},
             openapi_extra=SPEC_BODY, tags=["sweeps"])
def plan_sweep(request):
    """The plan of a spec (runs, points, skips with their reasons), storing nothing: the
    shape of ``manage.py sweep plan --json``."""
    require(request, "benchmarks.add_sweep", "plan sweeps")
    try:
        spec, catalog = spec_from_body(request)
        the_plan = plan_spec(spec, catalog)
    except SpecError as exc:
        return Status(400, spec_errors(exc))
    return {**the_plan.to_dict(), "warnings": the_plan.warnings, "nothing_to_measure": the_plan.nothing_to_measure}


@router.post("/sweeps", response={201: SweepDetailOut, 400: SpecErrorsOut, **DENIED,
                                  409: ErrorOut, 413: ErrorOut}, openapi_extra=SPEC_BODY, tags=["sweeps"])
def create(request, launch: bool = False):
    """Store a sweep from a spec as a draft; ``?launch=true`` launches it too (409, storing
    nothing, when the launch is refused: a plan that would measure nothing)."""
    require(request, "benchmarks.add_sweep", "create sweeps")
    if launch:
        require(request, "benchmarks.launch_sweep", "launch sweeps")
    try:
        spec, catalog = spec_from_body(request)
        with transaction.atomic():
            sweep, _ = create_sweep(spec, owner=request.user, catalog=catalog)
            if launch:
                launch_sweep(sweep)
    except SpecError as exc:
        return Status(400, spec_errors(exc))
    except SweepStateError as exc:
        raise HttpError(409, str(exc)) from None
    return Status(201, get_sweep(request, sweep.pk))


def _action(request, sweep_id, action, verb):
    require(request, "benchmarks.launch_sweep", f"{verb} sweeps")
    sweep = get_object_or_404(Sweep, pk=sweep_id)
    try:
        action(sweep)
    except SweepStateError as exc:
        raise HttpError(409, str(exc)) from None
    return get_sweep(request, sweep.pk)


ACTION_RESPONSES = {200: SweepDetailOut, **DENIED, 404: ErrorOut, 409: ErrorOut}


@router.post("/sweeps/{int:sweep_id}/launch", response=ACTION_RESPONSES, tags=["sweeps"])
def launch(request, sweep_id: ID):
    """Queue a draft's planned runs on its host; 409 with the reason for anything but a draft,
    or a draft that would measure nothing."""
    return _action(request, sweep_id, launch_sweep, "launch")


@router.post("/sweeps/{int:sweep_id}/cancel", response=ACTION_RESPONSES, tags=["sweeps"])
def cancel(request, sweep_id: ID):
    """No new run starts; a running one stops at its next point; 409 unless queued or running."""
    return _action(request, sweep_id, cancel_sweep, "cancel")


@router.post("/sweeps/{int:sweep_id}/resume", response=ACTION_RESPONSES, tags=["sweeps"])
def resume(request, sweep_id: ID):
    """Queue again what stopped without finishing (cancelled or never started runs, runs whose
    worker stopped heartbeating); 409 with the reason when that is nothing."""
    return _action(request, sweep_id, resume_sweep, "resume")


EXPORT_RESPONSES = {
    200: {"description": "The export", "content": {
        "text/csv": {"schema": {"type": "string"}}, "application/json": {"schema": {"type": "object"}},
        "application/jsonl": {"schema": {"type": "string"}}}},
}


@router.get("/sweeps/{int:sweep_id}/export/{kind}", response={**DENIED, 404: ErrorOut},
            openapi_extra={"responses": EXPORT_RESPONSES}, tags=["sweeps"])
def export(request, sweep_id: ID, kind: str):
    """``kind``: points.csv, points.json (the points with the model, engine, engine kind,
    host and GPU model they ran on, and their configuration: runs.results.exports) or
    requests.jsonl (the raw request records); the same files as the sweep page's."""

    if kind not in EXPORT_KINDS:
        raise HttpError(404, f"no export {kind!r}: expected one of {', '.join(EXPORT_KINDS)}")
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return export_response(kind, Q(run__sweep_id=sweep.pk), f"sweep-{sweep.pk}", {"sweep": sweep.pk})
