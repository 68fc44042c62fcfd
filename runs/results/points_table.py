"""The sweep page's points table: one page of a sweep's points, sorted and filtered in SQL.

``parse_query`` validates the GET parameters (``PointsTableForm``, raising ``TableQueryError``
with a message the page can show); ``points_table`` answers them in four queries whatever the
number of points: the sweep's runs, the statuses and workloads present, the count, and the page.

A metric of a point that is not ``ok`` is never a value: it is ``None`` in the rows and
sorts as a missing value (last, in both directions), and the row carries the point's
status and reason instead.

Every row carries the point's evidence (runs.results.evidence.point_evidence): ``validity``,
``validity_reasons``, ``n``, ``<m>_ci`` and ``simulated_time_scale``, ``stop_reason``; plus
``ci``: ``{column: [lo, hi]}`` for the METRIC_COLUMNS that have an interval (an ok point
only); and ``buckets``: ``{column: [lo, hi]}`` for the server's own medians, the bucket of
its histogram that holds each (``hi`` None: the +Inf bucket). Filters: ``validity`` (one
verdict) and ``valid_only`` (hides suspect, invalid and unjudged points); ``n`` (the sample
size) is a sort column.
"""

import math

from django.core.exceptions import ValidationError
from django.db.models import Case, F, FloatField, IntegerField, Q, Value, When

from benchmarks.models import Method
from runs.models import Point, PointStatus, Run, Validity
from runs.queryparams import ChoiceListParam, ChoiceParam, FlagParam, IntegerParam, QueryError, QueryForm, TextParam
from runs.results.charts import config_label
from runs.results.evidence import EVIDENCE_VALUES, SERVER_HISTOGRAMS, histogram_bucket, point_evidence
from sweepcore.metrics import interval_of

DEFAULT_PER_PAGE = 100
MAX_PER_PAGE = 500
DEFAULT_SORT = "run"

# The measured columns the table shows and sorts by (sweepcore.metrics.FIELDS names).
# The server's own figures (server_*) sit beside ours, empty where it reports none.
METRIC_COLUMNS = (
    "decode_tok_s",
    "server_decode_tok_s",
    "output_throughput",
    "median_ttft_ms",
    "server_median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "median_itl_ms",
    "server_median_itl_ms",
    "p99_itl_ms",
    "median_e2el_ms",
    "accept_length",
    "duration",
)
# The measured columns the sweep page shows until the user chooses others (its column
# chooser, ``cols``): the speeds and the latencies users compare first, narrow enough for
# a 1440 px screen without sideways scrolling (TPOT's median is left out: it is the decode
# speed's inverse). points-table.json sends every column.
DEFAULT_COLUMNS = (
    "decode_tok_s",
    "output_throughput",
    "median_ttft_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "accept_length",
)
# Sortable column -> what it sorts by. "run" and "config" both mean plan order of the runs.
SORT_COLUMNS = {
    "run": "run__position",
    "config": "run__position",
    "workload": "workload__name",
    "prompt_tokens": "prompt_tokens",
    "concurrency": "concurrency",
    "status": "status",
    "validity": "validity",
    "n": "completed",
    **{name: name for name in METRIC_COLUMNS},
}
# Ties fall back to the plan order, so a page boundary never moves between requests.
PLAN_ORDER = ("run__position", "run_id", "position", "id")
# A run's points that died with their server carry the run's cause when they have none.
RUN_CAUSED = (PointStatus.CRASHED, PointStatus.NOT_RUN)

# The bucket of the server's histogram behind each of its medians, read out of its view.
BUCKET_LOOKUPS = {column: f"server_metrics__{key}__bucket" for column, key in SERVER_HISTOGRAMS.items()}

ROW_FIELDS = (
    "id", "run_id", "position", "workload__name", "prompt_tokens", "actual_prompt_tokens",
    "concurrency", "max_new_tokens", "status", "reason", *METRIC_COLUMNS, *EVIDENCE_VALUES,
    *BUCKET_LOOKUPS.values(),
)


class TableQueryError(QueryError):
    """A parameter of the points table that cannot be answered; the message says which."""


class PointsTableForm(QueryForm):
    """The table's GET parameters (a sort column, filters, a page)."""

    query_error = TableQueryError

    sort = TextParam(DEFAULT_SORT, strip=True)  # a column of SORT_COLUMNS, "-" first for descending
    status = ChoiceParam(PointStatus.values, "status")
    workload = TextParam(strip=True)
    method = ChoiceParam(Method.values, "method")
    tp = IntegerParam()
    run = IntegerParam()
    validity = ChoiceParam(Validity.values, "verdict")
    valid_only = FlagParam()
    q = TextParam(strip=True)
    cols = ChoiceListParam(METRIC_COLUMNS, "column", DEFAULT_COLUMNS)  # the page's shown measured columns
    page = IntegerParam(1)
    per_page = IntegerParam(DEFAULT_PER_PAGE, maximum=MAX_PER_PAGE)

    def clean_sort(self):
        sort = self.cleaned_data["sort"]
        if sort.lstrip("-") not in SORT_COLUMNS:
            raise ValidationError(
                f"unknown sort column {sort.lstrip('-')!r}: choose one of {', '.join(SORT_COLUMNS)} "
                "(prefix - for descending)"
            )
        return sort


def parse_query(query):
    """The validated table parameters of a GET query (a QueryDict or a plain dict)."""
    return dict(PointsTableForm.parse(query))


def _ordering(sort):
    descending = sort.startswith("-")
    column = sort.lstrip("-")
    if column in METRIC_COLUMNS:
        # Only an ok point has a value; every other one sorts with the missing values.
        key = Case(When(status=PointStatus.OK, then=F(column)), default=Value(None), output_field=FloatField())
    elif column == "validity":
        # Best first (valid, suspect, invalid), unjudged points last.
        key = Case(
            *(When(validity=value, then=Value(rank)) for rank, value in enumerate(Validity.values)),
            default=Value(None), output_field=IntegerField(),
        )
    elif column == "status":
        # The order statuses are declared in (planned, ok, then the failures), not alphabetical.
        key = Case(
            *(When(status=value, then=Value(rank)) for rank, value in enumerate(PointStatus.values)),
            output_field=IntegerField(),
        )
    else:
        key = F(SORT_COLUMNS[column])
    first = key.desc(nulls_last=True) if descending else key.asc(nulls_last=True)
    return (first, *PLAN_ORDER)


def _run_row(run):
    return {"id": run["id"], "position": run["position"], "label": run["label"], "method": run["method"],
            "tp": run["tp"], "status": run["status"]}


def points_table(sweep_id, params):
    """One page of the sweep's points for ``params`` (from ``parse_query``): four queries."""
    runs = {}
    for run in (
        Run.objects.filter(sweep_id=sweep_id)
        .order_by("position", "id")
        .values("id", "position", "method", "params", "tp", "status", "reason", "failure_cause")
    ):
        run["label"] = config_label(run["method"], run["params"], run["tp"])
        runs[run["id"]] = run
    if params["run"] is not None and params["run"] not in runs:
        raise TableQueryError(f"run {params['run']} is not a run of sweep {sweep_id}")

    points = Point.objects.filter(run__sweep_id=sweep_id)
    present = set(points.values_list("status", "workload__name", "validity").distinct().order_by())
    if params["status"]:
        points = points.filter(status=params["status"])
    if params["workload"]:
        points = points.filter(workload__name=params["workload"])
    if params["method"]:
        points = points.filter(run__method=params["method"])
    if params["tp"] is not None:
        points = points.filter(run__tp=params["tp"])
    if params["run"] is not None:
        points = points.filter(run_id=params["run"])
    if params["validity"]:
        points = points.filter(validity=params["validity"])
    if params["valid_only"]:
        points = points.filter(validity=Validity.VALID)
    if params["q"]:
        # The configuration label is made in Python (from JSON params), so match it here.
        needle = params["q"].casefold()
        labelled = [rid for rid, run in runs.items() if needle in run["label"].casefold()]
        points = points.filter(Q(run_id__in=labelled) | Q(reason__icontains=params["q"]))

    total = points.count()
    per_page = params["per_page"]
    pages = max(1, math.ceil(total / per_page))
    page = min(params["page"], pages)  # a page past the end (after a filter) shows the last one
    start = (page - 1) * per_page
    rows = []
    if total:
        for point in points.order_by(*_ordering(params["sort"])).values(*ROW_FIELDS)[start:start + per_page]:
            run = runs[point["run_id"]]
            ok = point["status"] == PointStatus.OK
            reason = point["reason"]
            if not ok and not reason and point["status"] in RUN_CAUSED:
                reason = run["failure_cause"] or run["reason"]
            rows.append({
                "id": point["id"],
                "run": point["run_id"],
                "run_position": run["position"],
                "config": run["label"],
                "method": run["method"],
                "tp": run["tp"],
                "workload": point["workload__name"],
                "prompt_tokens": point["prompt_tokens"],
                "actual_prompt_tokens": point["actual_prompt_tokens"],
                "concurrency": point["concurrency"],
                "max_new_tokens": point["max_new_tokens"],
                "status": point["status"],
                "status_display": str(PointStatus(point["status"]).label),
                "reason": "" if ok else reason,
                **{name: point[name] if ok else None for name in METRIC_COLUMNS},
                **point_evidence(point),
                "ci": {name: ci for name in METRIC_COLUMNS if ok and (ci := interval_of(point["intervals"], name))},
                "buckets": {name: bucket for name, lookup in BUCKET_LOOKUPS.items()
                            if ok and (bucket := histogram_bucket(point[lookup]))},
            })
    statuses = {status for status, _, _ in present}
    validities = {validity for _, _, validity in present}
    return {
        "rows": rows,
        "total": total,
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "sort": params["sort"],
        "columns": list(SORT_COLUMNS),
        "choices": {
            "statuses": [{"value": v, "label": str(label)} for v, label in PointStatus.choices if v in statuses],
            "workloads": sorted({workload for _, workload, _ in present}),
            "validities": [{"value": v, "label": str(label)} for v, label in Validity.choices if v in validities],
            "methods": sorted({run["method"] for run in runs.values()}),
            "tps": sorted({run["tp"] for run in runs.values()}),
            "runs": [_run_row(run) for run in runs.values()],
        },
    }
