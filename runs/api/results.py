"""What came of the sweeps: runs, points with every metric, and raw request records."""

from datetime import datetime

from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError
from pydantic import create_model

from runs.api.schemas import DENIED, FILTER_TEXT, ID, INT_FILTER, ErrorOut, Paging, page
from runs.models import Point, RequestRecord, Run
from runs.results.evidence import CI_KEYS, EVIDENCE_VALUES, point_evidence
from sweepcore import metrics

router = Router()


# --- runs --------------------------------------------------------------------------------


class RunOut(Schema):
    id: int
    sweep: int
    position: int
    method: str
    params: dict
    tp: int
    attempt: int
    host: str | None = Field(description="the host it ran on (one of its sweep's hosts); null until claimed")
    label: str
    status: str
    reason: str
    failure_kind: str
    failure_cause: str
    engine_version: str
    context_length: int | None
    kv_capacity_tokens: int | None
    argv: list
    capacity: dict | None = Field(
        description="the capacity search's answer: {metric, load, goodput, output_tok_s, tok_s_per_gpu, "
                    "tok_s_per_user, stopped_because, message, probes, point, slo}; null without a search")
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
        "tp": run.tp, "attempt": run.attempt, "host": run.host.name if run.host_id else None,
        "label": run.config_label, "status": run.status, "reason": run.reason,
        "failure_kind": run.failure_kind, "failure_cause": run.failure_cause, "engine_version": run.engine_version,
        "context_length": run.context_length, "kv_capacity_tokens": run.kv_capacity_tokens,
        "argv": run.argv if isinstance(run.argv, list) else [], "capacity": run.capacity or None,
        "excluded": run.excluded,
        "exclude_reason": run.exclude_reason, "is_baseline": run.is_baseline, "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


class RunFilters(Schema):
    sweep: int | None = Field(**INT_FILTER)
    status: str | None = Field(**FILTER_TEXT)
    method: str | None = Field(**FILTER_TEXT)
    tp: int | None = Field(**INT_FILTER)
    failure_kind: str | None = Field(**FILTER_TEXT)


RUN_FIELDS = ("id", "sweep_id", "position", "method", "params", "tp", "attempt", "status", "reason", "failure_kind",
              "failure_cause", "engine_version", "context_length", "kv_capacity_tokens", "argv", "capacity", "excluded",
              "exclude_reason", "is_baseline", "started_at", "finished_at", "host__name")


@router.get("/runs", response={200: RunList, 400: ErrorOut, **DENIED}, tags=["results"])
def list_runs(request, filters: Query[RunFilters], paging: Query[Paging]):
    limit, offset = paging.bounds()
    qs = Run.objects.select_related("host").only(*RUN_FIELDS)
    for field in ("sweep", "status", "method", "tp", "failure_kind"):
        value = getattr(filters, field)
        if value is not None and value != "":
            qs = qs.filter(**{"sweep_id" if field == "sweep" else field: value})
    count, items = page(qs.order_by("sweep_id", "position", "attempt", "id"), limit, offset)
    return {"count": count, "items": [run_out(r) for r in items]}


@router.get("/runs/{int:run_id}", response={200: RunOut, **DENIED, 404: ErrorOut}, tags=["results"])
def get_run(request, run_id: ID):
    return run_out(get_object_or_404(Run, pk=run_id))


# --- points ------------------------------------------------------------------------------


def _point_schema():
    fields = {name: (float | None, None) for name in metrics.FIELDS}
    for name in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
        fields[name] = (int | None, None)
    return fields


POINT_METRICS = tuple(_point_schema())


class ReasonOut(Schema):
    code: str
    message: str


class PointBase(Schema):
    id: int
    run: int
    sweep: int
    method: str
    params: dict
    tp: int
    workload: str
    prompt_tokens: int | None
    actual_prompt_tokens: int | None
    concurrency: int = Field(description="a closed loop's clients; an open loop's cap on requests in flight")
    request_rate: float | None = Field(description="an open loop's requests per second; null: a closed loop")
    burstiness: float | None = Field(description="an open loop's gamma shape (1: Poisson)")
    from_search: bool = Field(description="a probe of the run's capacity search")
    max_new_tokens: int
    status: str
    reason: str
    goodput: float | None = Field(description="requests per second that met every SLO limit; null without an SLO")
    slo_attainment: float | None = Field(description="share of the requests that met every SLO limit")
    slo_met: bool | None = Field(description="every SLO limit's percentile (failed requests as misses) within it")
    slo_checks: dict = Field(description='limit -> {"limit", "observed", "met"}; {} without an SLO')
    send_based: dict = Field(description="open loop: TTFT and E2EL from the actual send (the metrics count from "
                                         "the scheduled send); {} for a closed loop")
    excluded: bool
    exclude_reason: str
    is_baseline: bool
    finished_at: datetime | None
    metrics: dict[str, float | int | None]
    extra: dict
    # The evidence (runs.results.evidence): verdict, sample size, intervals, simulated time.
    validity: str = Field(description='"valid", "suspect" or "invalid"; "" until measured (or imported)')
    validity_reasons: list[ReasonOut]
    n: int | None = Field(description="completed requests: the sample size of every statistic")
    simulated_time_scale: float | None = Field(
        description="measured on a simulator at this × real time, stored in model time; null: real time")
    stop_reason: str
    co_runs: list[int] = Field(description="other runs that held GPUs of the same host while this point was "
                                           "measured (a packed sweep); [] when it had the host to itself")
    server_metrics: dict = Field(
        description="the server's own view of the point: its /metrics, deltas over the point (counters, gauge "
                    "maxima, histogram medians with their bucket, speculative counters); {} where it has none")


# One "<metric>_ci": [lo, hi] | null per metric with a 95 % interval of its median.
PointOut = create_model(
    "PointOut", __base__=PointBase,
    **{key: (list[float] | None, Field(None, description="95 % interval of the median: [lo, hi]"))
       for key in CI_KEYS},
)


class PointList(Schema):
    count: int
    items: list[PointOut]


POINT_VALUES = ("id", "run_id", "run__sweep_id", "run__method", "run__params", "run__tp", "workload__name",
                "prompt_tokens", "actual_prompt_tokens", "concurrency", "request_rate", "burstiness", "from_search",
                "max_new_tokens", "status", "reason", "goodput", "slo_attainment", "slo_met", "slo_checks", "send_based",
                "excluded", "exclude_reason", "is_baseline", "finished_at", "extra", "server_metrics",
                *(v for v in EVIDENCE_VALUES if v not in POINT_METRICS))


def point_out(row):
    return {
        "id": row["id"], "run": row["run_id"], "sweep": row["run__sweep_id"], "method": row["run__method"],
        "params": row["run__params"], "tp": row["run__tp"], "workload": row["workload__name"],
        **{k: row[k] for k in ("prompt_tokens", "actual_prompt_tokens", "concurrency", "request_rate", "burstiness",
                               "from_search", "max_new_tokens", "status", "reason", "goodput", "slo_attainment",
                               "slo_met", "slo_checks", "send_based", "excluded", "exclude_reason", "is_baseline",
                               "finished_at", "extra", "server_metrics")},
        "metrics": {m: row[m] for m in POINT_METRICS},
        **point_evidence(row),
    }


class PointFilters(Schema):
    sweep: int | None = Field(**INT_FILTER)
    run: int | None = Field(**INT_FILTER)
    status: str | None = Field(**FILTER_TEXT)
    workload: str | None = Field(**FILTER_TEXT)
    method: str | None = Field(**FILTER_TEXT)
    tp: int | None = Field(**INT_FILTER)


@router.get("/points", response={200: PointList, 400: ErrorOut, **DENIED}, tags=["results"])
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


@router.get("/points/{int:point_id}", response={200: PointOut, **DENIED, 404: ErrorOut}, tags=["results"])
def get_point(request, point_id: ID):
    row = Point.objects.filter(pk=point_id).values(*POINT_VALUES, *POINT_METRICS).first()
    if row is None:
        raise HttpError(404, f"no point {point_id}")
    return point_out(row)


# --- request records ---------------------------------------------------------------------


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
    send_lag: float | None = Field(description="open loop: seconds sent after its scheduled time; null: closed loop")
    in_ramp: bool = Field(description="sent while the load ramped up or down (the sweep's steady_state): "
                                      "not in the point's statistics")


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


@router.get("/points/{int:point_id}/requests", response={200: RequestRecordList, 400: ErrorOut, **DENIED,
                                                     404: ErrorOut}, tags=["results"])
def list_requests(request, point_id: ID, paging: Query[Paging]):
    """The raw request records of a point: every metric can be recomputed from these."""
    if not Point.objects.filter(pk=point_id).exists():
        raise HttpError(404, f"no point {point_id}")
    return request_page(RequestRecord.objects.filter(point_id=point_id), paging)


class RequestFilters(Schema):
    sweep: int | None = Field(**INT_FILTER)
    run: int | None = Field(**INT_FILTER)
    point: int | None = Field(**INT_FILTER)
    error_kind: str | None = Field(**FILTER_TEXT, description="e.g. timeout_stall, http_error (runs/loadgen.py)")
    failed: bool | None = Field(None, description="true: only requests with an error; false: only without")


@router.get("/requests", response={200: RequestRecordList, 400: ErrorOut, **DENIED}, tags=["results"])
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


@router.get("/requests/{int:record_id}", response={200: RequestRecordOut, **DENIED, 404: ErrorOut},
            tags=["results"])
def get_request_record(request, record_id: ID):
    row = RequestRecord.objects.filter(pk=record_id).values(*request_values()).first()
    if row is None:
        raise HttpError(404, f"no request record {record_id}")
    return request_out(row)
