"""Exports of any selection of points: points.csv, points.json and requests.jsonl.

The pages, the API and the admin's export action all answer with :func:`export_response`;
the columns are the catalog's identity of each point, then ``sweepcore.metrics.FIELDS``.
"""

import csv
import json

from django.http import JsonResponse, StreamingHttpResponse

from runs.models import Point, RequestRecord
from sweepcore import metrics

EXPORT_KINDS = ("points.csv", "points.json", "requests.jsonl")

# Export column -> the values() lookup it comes from. One list for CSV and JSON.
EXPORT_CONFIG_COLUMNS = (
    ("sweep_id", "run__sweep_id"),
    ("run_id", "run_id"),
    ("point_id", "id"),
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
    ("status", "status"),
    ("reason", "reason"),
    ("excluded", "excluded"),
)
EXPORT_COLUMNS = tuple(name for name, _ in EXPORT_CONFIG_COLUMNS) + metrics.FIELDS
_EXPORT_LOOKUPS = tuple(lookup for _, lookup in EXPORT_CONFIG_COLUMNS) + metrics.FIELDS

def export_rows(points_filter):
    """The selected points as dicts keyed by EXPORT_COLUMNS, in plan order: one query."""
    rows = (
        Point.objects.filter(points_filter)
        .order_by("run__sweep_id", "run__position", "run_id", "position", "id")
        .values_list(*_EXPORT_LOOKUPS)
        .iterator(chunk_size=2000)
    )
    for row in rows:
        yield dict(zip(EXPORT_COLUMNS, row))


class _Echo:
    def write(self, value):
        return value


def _csv_value(value):
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def _csv_lines(points_filter):
    writer = csv.writer(_Echo())
    yield writer.writerow(EXPORT_COLUMNS)
    for row in export_rows(points_filter):
        yield writer.writerow([_csv_value(row[c]) for c in EXPORT_COLUMNS])


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
