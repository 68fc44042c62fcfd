"""Exports of any selection of points: points.csv, points.json and requests.jsonl.

The pages, the API and the admin's export action all answer with :func:`export_response`;
the columns are the catalog's identity of each point (``EXPORT_CONFIG_COLUMNS``: its ids;
what it ran on: ``model`` (the sweep's LLM name), ``engine`` and ``engine_kind``, ``host``
(where the run was driven; a run that never recorded one, an old or imported run, is
its sweep's host) and that host's ``gpu_model`` ("" for a CPU host), so that a file read
on its own says which machine and server the numbers are of; then the configuration, the
engine version and the point's settings), then ``sweepcore.metrics.FIELDS``,
then its evidence (runs.results.evidence): ``validity``, ``validity_reasons``, ``n``, the
95 % intervals and ``simulated_time_scale``, ``stop_reason``; then the point against the
sweep's SLO (``goodput``, ``slo_attainment``, ``slo_met``, ``slo_checks``) and an open
loop's ``send_based`` latencies; last ``server_metrics``, the
server's own view of the point (``{}`` where it has none). In points.json an interval
is ``"<m>_ci": [lo, hi] | null``, the reasons a list of ``{"code", "message"}`` and the
view an object; in points.csv an interval is two columns ``<m>_ci_lo``, ``<m>_ci_hi``, the
reasons one text ``code: message; code: message`` and the view JSON text. Every CSV the
app writes passes its text cells through :func:`spreadsheet_safe`.
"""

import csv
import json

from django.db.models import Prefetch
from django.http import JsonResponse, StreamingHttpResponse

from runs.models import Point, RequestRecord, Run, ran_on_field
from runs.results.evidence import CI_KEYS, EVIDENCE_KEYS, EVIDENCE_VALUES, point_evidence, reasons_text
from sweepcore import metrics

EXPORT_KINDS = ("points.csv", "points.json", "requests.jsonl")

# Export column -> the values() lookup (or expression) it comes from. One list for CSV and JSON.
EXPORT_CONFIG_COLUMNS = (
    ("sweep_id", "run__sweep_id"),
    ("run_id", "run_id"),
    ("point_id", "id"),
    ("model", "run__sweep__llm__name"),
    ("engine", "run__sweep__engine__name"),
    ("engine_kind", "run__sweep__engine__kind"),
    ("host", ran_on_field("name", "run__")),
    ("gpu_model", ran_on_field("gpu_model", "run__")),
    ("method", "run__method"),
    ("params", "run__params"),
    ("tp", "run__tp"),
    ("attempt", "run__attempt"),
    ("engine_version", "run__engine_version"),
    ("workload", "workload__name"),
    ("prompt_tokens", "prompt_tokens"),
    ("actual_prompt_tokens", "actual_prompt_tokens"),
    ("concurrency", "concurrency"),
    ("max_new_tokens", "max_new_tokens"),
    ("request_rate", "request_rate"),
    ("burstiness", "burstiness"),
    ("from_search", "from_search"),
    ("status", "status"),
    ("reason", "reason"),
    ("excluded", "excluded"),
)
_BASE_COLUMNS = tuple(name for name, _ in EXPORT_CONFIG_COLUMNS) + metrics.FIELDS
# Last, the point against the sweep's SLO (sweepcore.slo; empty without one), an open
# loop's latencies from the actual send ({} for a closed loop), and the server's own view
# of the point (its /metrics, deltas over the point; {} without).
_VIEW_COLUMNS = ("goodput", "slo_attainment", "slo_met", "slo_checks", "send_based", "server_metrics")
#: points.json's keys; points.csv has the same but each "<m>_ci" as "<m>_ci_lo", "<m>_ci_hi".
EXPORT_COLUMNS = _BASE_COLUMNS + EVIDENCE_KEYS + _VIEW_COLUMNS
CSV_COLUMNS = _BASE_COLUMNS + tuple(
    column for key in EVIDENCE_KEYS for column in ((f"{key}_lo", f"{key}_hi") if key in CI_KEYS else (key,))
) + _VIEW_COLUMNS
_EXTRA_VALUES = tuple(v for v in EVIDENCE_VALUES if v not in metrics.FIELDS) + _VIEW_COLUMNS
_EXPORT_LOOKUPS = tuple(lookup for _, lookup in EXPORT_CONFIG_COLUMNS) + metrics.FIELDS + _EXTRA_VALUES


def export_rows(points_filter):
    """The selected points as dicts keyed by EXPORT_COLUMNS, in plan order: one query."""
    rows = (
        Point.objects.filter(points_filter)
        .order_by("run__sweep_id", "run__position", "run_id", "position", "id")
        .values_list(*_EXPORT_LOOKUPS)
        .iterator(chunk_size=2000)
    )
    for values in rows:
        row = dict(zip(_BASE_COLUMNS + _EXTRA_VALUES, values))
        evidence = point_evidence(row)
        yield {**{c: row[c] for c in _BASE_COLUMNS}, **evidence, **{c: row[c] for c in _VIEW_COLUMNS}}


def csv_row(row):
    """An export row (export_rows) as points.csv's cells, CSV_COLUMNS order."""
    flat = dict(row)
    for key in CI_KEYS:
        lo_hi = flat.pop(key)
        flat[f"{key}_lo"], flat[f"{key}_hi"] = lo_hi if lo_hi else (None, None)
    flat["validity_reasons"] = reasons_text(flat["validity_reasons"])
    for key in ("slo_checks", "send_based", "server_metrics", "co_runs"):
        flat[key] = flat[key] or None  # nothing to say: an empty cell, not "{}" or "[]"
    return [_csv_value(flat[c]) for c in CSV_COLUMNS]


class _Echo:
    def write(self, value):
        return value


#: What a spreadsheet takes for the start of a formula (OWASP, "CSV Injection"): tab and
#: CR too, which some strip before reading the rest.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value):
    """A CSV cell no spreadsheet evaluates: text that would start a formula gets a leading
    apostrophe (shown as text, not run); numbers, dates and other text stay as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return spreadsheet_safe(value)


def _csv_lines(points_filter):
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for row in export_rows(points_filter):
        yield writer.writerow(csv_row(row))


def _request_lines(points_filter):
    records = (
        RequestRecord.objects.filter(point__in=Point.objects.filter(points_filter).values("pk"))
        .order_by("point__run__sweep_id", "point__run__position", "point__run_id", "point__position", "point_id", "index")
        .values("point_id", "point__run_id", *metrics.REQUEST_FIELDS)
        .iterator(chunk_size=2000)
    )
    for record in records:
        line = {"point_id": record.pop("point_id"), "run_id": record.pop("point__run_id"), **record}
        yield json.dumps(line) + "\n"


def export_response(kind, points_filter, name, selection):
    """One export of the points a filter selects: kind is points.csv, points.json or
    requests.jsonl; name is the file name's stem."""
    if kind == "points.csv":
        response = StreamingHttpResponse(_csv_lines(points_filter), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f"attachment; filename={name}-points.csv"
    elif kind == "points.json":
        response = JsonResponse({**selection, "columns": list(EXPORT_COLUMNS), "points": list(export_rows(points_filter))})
        response["Content-Disposition"] = f"inline; filename={name}-points.json"
    else:
        response = StreamingHttpResponse(_request_lines(points_filter), content_type="application/jsonl; charset=utf-8")
        response["Content-Disposition"] = f"attachment; filename={name}-requests.jsonl"
    return response


# The point fields `sweep show --json` and `sweep run --json` print, before the evidence.
SHOW_POINT_FIELDS = ("prompt_tokens", "concurrency", "request_rate", "status", "reason", "completed", "failed",
                     "output_throughput", "decode_tok_s", "mean_ttft_ms", "median_tpot_ms", "accept_length",
                     "goodput", "slo_attainment", "slo_met")


def sweep_as_dict(sweep):
    """The shape `sweep show --json` and `sweep run --json` print: the runs in plan order,
    each with its points and their evidence (runs.results.evidence.point_evidence)."""
    sweep.refresh_from_db(fields=["status"])
    runs = Run.objects.filter(sweep=sweep).select_related("host").order_by("position").prefetch_related(
        Prefetch("points", queryset=Point.objects.select_related("workload").order_by("position"))
    )
    return {
        "sweep": sweep.pk,
        "status": sweep.status,
        "runs": [
            {
                "method": run.method,
                "params": run.params,
                "tp": run.tp,
                "host": run.host.name if run.host_id else None,  # where it ran (null until claimed)
                "status": run.status,
                "failure_kind": run.failure_kind,
                "failure_cause": run.failure_cause,
                # The capacity search's answer (None without a search).
                "capacity": run.capacity or None,
                "points": [
                    {"workload": p.workload.name, **{f: getattr(p, f) for f in SHOW_POINT_FIELDS},
                     **point_evidence(p)}
                    for p in run.points.all()
                ],
            }
            for run in runs
        ],
    }
