"""The JSON API under /api/ (django-ninja: typed endpoints, the OpenAPI schema at
/api/openapi.json built from the same types, so the schema cannot drift from the code).

Authentication: ``Authorization: Bearer <token>`` (an ApiToken, created in the admin) for
scripts and CI, or the browser's session (with CSRF on unsafe methods). The roles of the
pages apply: reading needs a role (viewer, operator or curator: 403 without one);
creating and planning sweeps needs ``benchmarks.add_sweep``; launching, cancelling and
resuming ``benchmarks.launch_sweep``.
Errors are JSON: ``{"detail": "..."}``, or ``{"errors": [{"path", "message"}]}`` for an
invalid spec, with the messages of the CLI.
"""

import hashlib
import json
import secrets
from datetime import datetime, timedelta
from typing import Annotated

from django.db.models import Count, Q
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import Field, File, Form, NinjaAPI, Query, Schema, Status, UploadedFile
from ninja import Path as PathParam
from ninja.errors import HttpError
from ninja.security import HttpBearer, SessionAuth

from benchmarks.catalog import load_catalog
from benchmarks.models import Sweep
from runs.lifecycle import SweepStateError, cancel_sweep, create_sweep, launch_sweep, plan_spec, resume_sweep
from runs.models import ApiToken, Point, RequestRecord, Run
from runs.results.exports import EXPORT_KINDS, export_response
from runs.roles import NO_ROLE, can_read, has_role
from sweepcore import metrics
from sweepcore.spec import SpecError, load_yaml, validate

TOKEN_PREFIX = "swl_"
LAST_USED_RESOLUTION = timedelta(minutes=1)  # last_used_at is written at most this often
MAX_LIMIT = 500
MAX_OFFSET = 2**31 - 1  # the databases' offsets are bounded integers
ID = Annotated[int, PathParam(..., ge=1, le=2**63 - 1)]  # an id fits the database's bigint
SPEC_MAX_BYTES = 1 << 20
# A filter text: no NUL character, which no stored name holds and PostgreSQL refuses.
FILTER_TEXT = {"default": None, "pattern": r"^[^\x00]*$", "max_length": 200}


def new_token():
    """(token, its sha256 hex digest): the token is shown once, the digest is stored."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, hash_token(token)


def hash_token(token):
    return hashlib.sha256(token.encode()).hexdigest()


def reader(user):
    """An authenticated account may use the API only with a role: 403 (before its
    request is even validated) without one."""
    if not can_read(user):
        raise HttpError(403, NO_ROLE)
    return user


class TokenAuth(HttpBearer):
    def authenticate(self, request, token):
        # The lookup is by the digest of what was sent: timing reveals nothing of a token.
        found = (ApiToken.objects.select_related("user").annotate(has_role=has_role("user_id"))
                 .filter(key_hash=hash_token(token)).first())
        if found is None or found.revoked_at is not None or not found.user.is_active:
            return None
        now = timezone.now()
        if found.last_used_at is None or now - found.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=found.pk).update(last_used_at=now)
        found.user.has_role = found.has_role
        request.user = found.user
        return reader(found.user)


class RoleSessionAuth(SessionAuth):
    """The browser's session (CSRF-checked on unsafe methods), with the same role check."""

    def authenticate(self, request, key):
        return reader(request.user) if request.user.is_authenticated else None


api = NinjaAPI(
    title="Sweeplab API",
    version="1",
    description=__doc__,
    auth=[TokenAuth(), RoleSessionAuth()],
    docs_url=None,  # Swagger UI would load from a CDN; the schema is at /api/openapi.json
    urls_namespace="api",
)


class ErrorOut(Schema):
    detail: str


# Every operation: 401 without a valid token or session, 403 without a role (or, for
# the ones that change something, without its permission).
DENIED = {401: ErrorOut, 403: ErrorOut}


class SpecErrorItem(Schema):
    path: str
    message: str


class SpecErrorsOut(Schema):
    errors: list[SpecErrorItem]


def require(request, perm, what):
    if not request.user.has_perm(perm):
        raise HttpError(403, f"you may not {what}: it needs the permission {perm}")


def page(queryset, limit, offset):
    return queryset.count(), queryset[offset:offset + limit]


class Paging(Schema):
    # Bounds in the schema: out of them, the answer is ninja's 422 naming the field.
    limit: int = Field(50, ge=1, le=MAX_LIMIT)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)

    def bounds(self):
        return self.limit, self.offset


# --- sweeps -----------------------------------------------------------------------------


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


@api.get("/sweeps", response={200: SweepList, 400: ErrorOut, **DENIED}, tags=["sweeps"])
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


@api.get("/sweeps/{int:sweep_id}", response={200: SweepDetailOut, **DENIED, 404: ErrorOut}, tags=["sweeps"])
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
    """The validated Spec of a request body, or a 400 with the CLI's messages."""
    if len(request.body) > SPEC_MAX_BYTES:
        raise SpecError(f"spec: more than {SPEC_MAX_BYTES} bytes")
    content_type = (request.content_type or "").lower()
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("spec: the body is not UTF-8 text") from None
    if "yaml" in content_type:
        data = load_yaml(text, source="spec")
    else:
        try:
            data = json.loads(text)
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


@api.post("/sweeps/plan", response={200: PlanOut, 400: SpecErrorsOut, 401: ErrorOut, 403: ErrorOut},
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
    return {**the_plan.to_dict(), "warnings": the_plan.warnings}


@api.post("/sweeps", response={201: SweepDetailOut, 400: SpecErrorsOut, 401: ErrorOut, 403: ErrorOut,
                               409: ErrorOut}, openapi_extra=SPEC_BODY, tags=["sweeps"])
def create(request, launch: bool = False):
    """Store a sweep from a spec as a draft; ``?launch=true`` launches it too."""
    require(request, "benchmarks.add_sweep", "create sweeps")
    if launch:
        require(request, "benchmarks.launch_sweep", "launch sweeps")
    try:
        spec, catalog = spec_from_body(request)
        sweep, _ = create_sweep(spec, owner=request.user, catalog=catalog)
    except SpecError as exc:
        return Status(400, spec_errors(exc))
    if launch:
        try:
            launch_sweep(sweep)
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


ACTION_RESPONSES = {200: SweepDetailOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut}


@api.post("/sweeps/{int:sweep_id}/launch", response=ACTION_RESPONSES, tags=["sweeps"])
def launch(request, sweep_id: ID):
    """Queue a draft's planned runs on its host."""
    return _action(request, sweep_id, launch_sweep, "launch")


@api.post("/sweeps/{int:sweep_id}/cancel", response=ACTION_RESPONSES, tags=["sweeps"])
def cancel(request, sweep_id: ID):
    """No new run starts; a running one stops at its next point."""
    return _action(request, sweep_id, cancel_sweep, "cancel")


@api.post("/sweeps/{int:sweep_id}/resume", response=ACTION_RESPONSES, tags=["sweeps"])
def resume(request, sweep_id: ID):
    """Queue again every run of the sweep that has not finished."""
    return _action(request, sweep_id, resume_sweep, "resume")


EXPORT_RESPONSES = {
    200: {"description": "The export", "content": {
        "text/csv": {"schema": {"type": "string"}}, "application/json": {"schema": {"type": "object"}},
        "application/jsonl": {"schema": {"type": "string"}}}},
}


@api.get("/sweeps/{int:sweep_id}/export/{kind}", response={**DENIED, 404: ErrorOut},
         openapi_extra={"responses": EXPORT_RESPONSES}, tags=["sweeps"])
def export(request, sweep_id: ID, kind: str):
    """``kind``: points.csv, points.json (the points with their configuration) or
    requests.jsonl (the raw request records); the same files as the sweep page's."""

    if kind not in EXPORT_KINDS:
        raise HttpError(404, f"no export {kind!r}: expected one of {', '.join(EXPORT_KINDS)}")
    sweep = get_object_or_404(Sweep.objects.only("pk"), pk=sweep_id)
    return export_response(kind, Q(run__sweep_id=sweep.pk), f"sweep-{sweep.pk}", {"sweep": sweep.pk})


# --- runs, points, request records -------------------------------------------------------


class RunOut(Schema):
    id: int
    sweep: int
    position: int
    method: str
    params: dict
    tp: int
    attempt: int
    label: str
    status: str
    reason: str
    failure_kind: str
    failure_cause: str
    engine_version: str
    context_length: int | None
    kv_capacity_tokens: int | None
    argv: list
    excluded: bool
    exclude_reason: str
    is_baseline: bool
    started_at: datetime | None
    finished_at: datetime | None


class RunList(Schema):
    count: int
    items: list[RunOut]


def run_out(run):
    return {
        "id": run.pk, "sweep": run.sweep_id, "position": run.position, "method": run.method, "params": run.params,
        "tp": run.tp, "attempt": run.attempt, "label": run.config_label, "status": run.status, "reason": run.reason,
        "failure_kind": run.failure_kind, "failure_cause": run.failure_cause, "engine_version": run.engine_version,
        "context_length": run.context_length, "kv_capacity_tokens": run.kv_capacity_tokens,
        "argv": run.argv if isinstance(run.argv, list) else [], "excluded": run.excluded,
        "exclude_reason": run.exclude_reason, "is_baseline": run.is_baseline, "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


class RunFilters(Schema):
    sweep: int | None = Field(None, ge=0, le=2**63 - 1)
    status: str | None = Field(**FILTER_TEXT)
    method: str | None = Field(**FILTER_TEXT)
    tp: int | None = Field(None, ge=0, le=2**63 - 1)
    failure_kind: str | None = Field(**FILTER_TEXT)


RUN_FIELDS = ("id", "sweep_id", "position", "method", "params", "tp", "attempt", "status", "reason", "failure_kind",
              "failure_cause", "engine_version", "context_length", "kv_capacity_tokens", "argv", "excluded",
              "exclude_reason", "is_baseline", "started_at", "finished_at")


@api.get("/runs", response={200: RunList, 400: ErrorOut, **DENIED}, tags=["results"])
def list_runs(request, filters: Query[RunFilters], paging: Query[Paging]):
    limit, offset = paging.bounds()
    qs = Run.objects.only(*RUN_FIELDS)
    for field in ("sweep", "status", "method", "tp", "failure_kind"):
        value = getattr(filters, field)
        if value is not None and value != "":
            qs = qs.filter(**{"sweep_id" if field == "sweep" else field: value})
    count, items = page(qs.order_by("sweep_id", "position", "attempt", "id"), limit, offset)
    return {"count": count, "items": [run_out(r) for r in items]}


@api.get("/runs/{int:run_id}", response={200: RunOut, **DENIED, 404: ErrorOut}, tags=["results"])
def get_run(request, run_id: ID):
    return run_out(get_object_or_404(Run, pk=run_id))


def _point_schema():
    fields = {name: (float | None, None) for name in metrics.FIELDS}
    for name in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
        fields[name] = (int | None, None)
    return fields


POINT_METRICS = tuple(_point_schema())


class PointOut(Schema):
    id: int
    run: int
    sweep: int
    method: str
    params: dict
    tp: int
    workload: str
    prompt_tokens: int | None
    actual_prompt_tokens: int | None
    concurrency: int
    max_new_tokens: int
    status: str
    reason: str
    excluded: bool
    exclude_reason: str
    is_baseline: bool
    finished_at: datetime | None
    metrics: dict[str, float | int | None]
    extra: dict


class PointList(Schema):
    count: int
    items: list[PointOut]


POINT_VALUES = ("id", "run_id", "run__sweep_id", "run__method", "run__params", "run__tp", "workload__name",
                "prompt_tokens", "actual_prompt_tokens", "concurrency", "max_new_tokens", "status", "reason",
                "excluded", "exclude_reason", "is_baseline", "finished_at", "extra")


def point_out(row):
    return {
        "id": row["id"], "run": row["run_id"], "sweep": row["run__sweep_id"], "method": row["run__method"],
        "params": row["run__params"], "tp": row["run__tp"], "workload": row["workload__name"],
        **{k: row[k] for k in ("prompt_tokens", "actual_prompt_tokens", "concurrency", "max_new_tokens", "status",
                               "reason", "excluded", "exclude_reason", "is_baseline", "finished_at", "extra")},
        "metrics": {m: row[m] for m in POINT_METRICS},
    }


class PointFilters(Schema):
    sweep: int | None = Field(None, ge=0, le=2**63 - 1)
    run: int | None = Field(None, ge=0, le=2**63 - 1)
    status: str | None = Field(**FILTER_TEXT)
    workload: str | None = Field(**FILTER_TEXT)
    method: str | None = Field(**FILTER_TEXT)
    tp: int | None = Field(None, ge=0, le=2**63 - 1)


@api.get("/points", response={200: PointList, 400: ErrorOut, **DENIED}, tags=["results"])
def list_points(request, filters: Query[PointFilters], paging: Query[Paging]):
    """Points with their configuration and every metric (the names of docs/metrics.md)."""
    limit, offset = paging.bounds()
    qs = Point.objects.all()
    lookups = {"sweep": "run__sweep_id", "run": "run_id", "status": "status", "workload": "workload__name",
               "method": "run__method", "tp": "run__tp"}
    for field, lookup in lookups.items():
        value = getattr(filters, field)
        if value is not None and value != "":
            qs = qs.filter(**{lookup: value})
    count = qs.count()
    rows = qs.order_by("run__sweep_id", "run__position", "run_id", "position", "id").values(
        *POINT_VALUES, *POINT_METRICS)[offset:offset + limit]
    return {"count": count, "items": [point_out(r) for r in rows]}


@api.get("/points/{int:point_id}", response={200: PointOut, **DENIED, 404: ErrorOut}, tags=["results"])
def get_point(request, point_id: ID):
    row = Point.objects.filter(pk=point_id).values(*POINT_VALUES, *POINT_METRICS).first()
    if row is None:
        raise HttpError(404, f"no point {point_id}")
    return point_out(row)


class RequestRecordOut(Schema):
    id: int
    point: int
    index: int
    send_time: float
    chunk_offsets: list
    chunk_tokens: list
    prompt_tokens: int | None
    output_tokens: int
    token_count_source: str
    finish_reason: str
    http_status: int | None
    error_kind: str
    error: str
    spec_verify_ct: int | None


class RequestRecordList(Schema):
    count: int
    items: list[RequestRecordOut]


def request_values():
    return ("id", "point_id", *metrics.REQUEST_FIELDS)


def request_out(row):
    row["point"] = row.pop("point_id")
    return row


def request_page(qs, paging):
    limit, offset = paging.bounds()
    count = qs.count()
    rows = qs.order_by("point_id", "index", "id").values(*request_values())[offset:offset + limit]
    return {"count": count, "items": [request_out(r) for r in rows]}


@api.get("/points/{int:point_id}/requests", response={200: RequestRecordList, 400: ErrorOut, **DENIED,
                                                  404: ErrorOut}, tags=["results"])
def list_requests(request, point_id: ID, paging: Query[Paging]):
    """The raw request records of a point: every metric can be recomputed from these."""
    if not Point.objects.filter(pk=point_id).exists():
        raise HttpError(404, f"no point {point_id}")
    return request_page(RequestRecord.objects.filter(point_id=point_id), paging)


class RequestFilters(Schema):
    sweep: int | None = Field(None, ge=0, le=2**63 - 1)
    run: int | None = Field(None, ge=0, le=2**63 - 1)
    point: int | None = Field(None, ge=0, le=2**63 - 1)
    error_kind: str | None = Field(**FILTER_TEXT, description="e.g. timeout_stall, http_error (runs/loadgen.py)")
    failed: bool | None = Field(None, description="true: only requests with an error; false: only without")


@api.get("/requests", response={200: RequestRecordList, 400: ErrorOut, **DENIED}, tags=["results"])
def list_request_records(request, filters: Query[RequestFilters], paging: Query[Paging]):
    """Raw request records across points, by point, run, sweep or error, in point order."""
    qs = RequestRecord.objects.all()
    lookups = {"sweep": "point__run__sweep_id", "run": "point__run_id", "point": "point_id",
               "error_kind": "error_kind"}
    for field, lookup in lookups.items():
        value = getattr(filters, field)
        if value is not None and value != "":
            qs = qs.filter(**{lookup: value})
    if filters.failed is not None:
        qs = qs.exclude(error_kind="") if filters.failed else qs.filter(error_kind="")
    return request_page(qs, paging)


@api.get("/requests/{int:record_id}", response={200: RequestRecordOut, **DENIED, 404: ErrorOut}, tags=["results"])
def get_request_record(request, record_id: ID):
    row = RequestRecord.objects.filter(pk=record_id).values(*request_values()).first()
    if row is None:
        raise HttpError(404, f"no request record {record_id}")
    return request_out(row)


# --- imports -----------------------------------------------------------------------------


class ImportOut(Schema):
    created: bool
    message: str
    format: str
    points: int
    requests: int
    sweep: SweepDetailOut


class ImportFields(Schema):
    format: str | None = Field(None, description="vllm, sglang or sglang-one-batch; detected when not given",
                               pattern=r"^[^\x00]*$", max_length=40)
    host: str = Field(..., description="the host that ran the benchmark", pattern=r"^[^\x00]*$", max_length=200)
    model: str | None = Field(**FILTER_TEXT)
    engine: str | None = Field(**FILTER_TEXT)
    tp: int | None = Field(None, ge=1, le=1024)
    workload: str | None = Field(**FILTER_TEXT)


@api.post("/imports", response={200: ImportOut, 201: ImportOut, 400: ErrorOut, 401: ErrorOut, 403: ErrorOut},
          tags=["imports"])
def import_results(request, file: File[UploadedFile], fields: Form[ImportFields]):
    """Import a ``vllm bench serve --save-result`` JSON file or an SGLang ``bench_serving``
    / ``bench_one_batch_server`` JSONL file as a sweep (multipart form). 201: imported;
    200: the same file was imported before (nothing stored); 400: the line and field that
    is wrong, or the unknown host / model, and nothing stored."""
    from runs.forms import IMPORT_MAX_BYTES
    from runs.imports import import_file
    from sweepcore.importers import ImportRefused

    require(request, "benchmarks.add_sweep", "import results")
    if file.size > IMPORT_MAX_BYTES:
        raise HttpError(400, f"{file.name} is {file.size:,} bytes; the limit is {IMPORT_MAX_BYTES:,}")
    try:
        result = import_file(file.name, file.read(), fmt=fields.format or None, host=fields.host,
                             model=fields.model or None, user=request.user, engine=fields.engine or None,
                             tp=fields.tp, workload=fields.workload or None)
    except ImportRefused as exc:
        raise HttpError(400, str(exc)) from None
    body = {"created": result.created, "message": result.message, "format": result.format,
            "points": result.points, "requests": result.requests, "sweep": get_sweep(request, result.sweep.pk)}
    return Status(201 if result.created else 200, body)
