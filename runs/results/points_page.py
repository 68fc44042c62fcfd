"""The points table as the sweep page renders it (templates/runs/partials/points_table.html):
one answer of ``points_table`` with its columns in display order and what a click on each
header sorts by next, each row's verdict (valid / suspect / invalid, with its reasons), its
sample size ``n`` and whether it was simulated, its measured values in column order, each
with its 95 % interval where the metric has one, and the pager."""

from runs.models import Point, Validity
from runs.results.points_table import DEFAULT_PER_PAGE, MAX_PER_PAGE, METRIC_COLUMNS, SORT_COLUMNS, points_table
from sweepcore.metrics import INTERVAL_METRICS, higher_is_better

# The sweep page starts on a short first page (PAGE_PER_PAGE, sent by its form) so that a
# sweep of hundreds of points still reads at a glance; points-table.json keeps its default.
PAGE_PER_PAGE = 20
PER_PAGE_CHOICES = (PAGE_PER_PAGE, 50, DEFAULT_PER_PAGE, 200, MAX_PER_PAGE)

# The columns before the measured ones: (sort column, header, numeric).
LEADING_COLUMNS = (
    ("run", "Configuration", False),
    ("workload", "Workload", False),
    ("prompt_tokens", "Prompt tokens", True),
    ("concurrency", "Concurrency", True),
    ("status", "Status", False),
)
# The evidence columns after the status: (sort column, header, what it holds, numeric); they
# sort where points_table can sort by them.
EVIDENCE_COLUMNS = (
    ("validity", "Verdict", "valid, suspect or invalid (sweepcore.validity), the reasons in its tooltip", False),
    ("n", "n", "completed requests: the sample behind the medians", True),
)
# The evidence fields of a point row (the JSON contract of a point).
EVIDENCE_KEYS = ("validity", "validity_reasons", "n", "simulated_time_scale",
                 *(f"{metric}_ci" for metric in INTERVAL_METRICS))
# The measured columns the server itself reported (empty where it reports none).
SERVER_COLUMNS = frozenset(name for name in METRIC_COLUMNS if name.startswith("server_"))
# Short headers of the measured columns, for a wide table (sweepcore.metrics names them in full).
METRIC_HEADERS = {
    "decode_tok_s": "Decode (tok/s)",
    "server_decode_tok_s": "Server's decode (tok/s)",
    "output_throughput": "Output (tok/s)",
    "median_ttft_ms": "TTFT median (ms)",
    "server_median_ttft_ms": "Server's TTFT median (ms)",
    "p99_ttft_ms": "TTFT p99 (ms)",
    "median_tpot_ms": "TPOT median (ms)",
    "median_itl_ms": "ITL median (ms)",
    "server_median_itl_ms": "Server's ITL median (ms)",
    "p99_itl_ms": "ITL p99 (ms)",
    "median_e2el_ms": "E2E median (ms)",
    "accept_length": "Accept length",
    "duration": "Duration (s)",
}


def shown_columns(cols):
    """The measured columns the page shows, in the table's order, of those chosen."""
    return tuple(name for name in METRIC_COLUMNS if name in cols)


def column_choices(cols):
    """The column chooser's boxes: every measured column with its header and whether it is shown."""
    return [{"name": name, "label": METRIC_HEADERS[name], "checked": name in cols} for name in METRIC_COLUMNS]


def headers(sort, cols=METRIC_COLUMNS):
    """The header cells for the current ``sort`` and the measured columns ``cols``:
    aria-sort, the arrow, and ``next``, the sort a click asks for (the other direction of
    the current column; a new column starts with its best values, so speeds start with the
    fastest)."""
    current, descending = sort.lstrip("-"), sort.startswith("-")
    evidence = tuple((name if name in SORT_COLUMNS else None, label, numeric) for name, label, _, numeric in EVIDENCE_COLUMNS)
    columns = (*LEADING_COLUMNS, *evidence, *((name, METRIC_HEADERS[name], True) for name in shown_columns(cols)))
    titles = {label: title for _, label, title, _ in EVIDENCE_COLUMNS}
    cells = []
    for name, label, numeric in columns:
        if name is None:
            cells.append({"sort": None, "label": label, "title": titles[label], "numeric": numeric})
            continue
        active = name == current
        if active:
            following = name if descending else f"-{name}"
        else:
            most_first = name == "n" or (name in METRIC_COLUMNS and higher_is_better(name))
            following = f"-{name}" if most_first else name
        cells.append({
            "sort": name,
            "label": label,
            "numeric": numeric,
            "aria_sort": ("descending" if descending else "ascending") if active else "none",
            "arrow": (" ▼" if descending else " ▲") if active else "",
            "next": following,
            "title": titles.get(label, ""),
        })
    return cells


def with_evidence(rows):
    """The rows with their evidence fields (EVIDENCE_KEYS), read in one query for those
    that do not carry them yet (runs.results.points_table sends what it has)."""
    missing = [row["id"] for row in rows if any(key not in row for key in EVIDENCE_KEYS)]
    if not missing:
        return rows
    stored = {
        point["id"]: point
        for point in Point.objects.filter(pk__in=missing).values(
            "id", "validity", "validity_reasons", "completed", "intervals", "simulated_time_scale")
    }
    filled = []
    for row in rows:
        point = stored.get(row["id"])
        if point is None:
            filled.append(row)
            continue
        intervals = point["intervals"] or {}
        evidence = {
            "validity": point["validity"],
            "validity_reasons": point["validity_reasons"] or [],
            "n": point["completed"],
            "simulated_time_scale": point["simulated_time_scale"],
            **{f"{metric}_ci": (list(intervals[metric]) if intervals.get(metric) else None)
               for metric in INTERVAL_METRICS},
        }
        filled.append({**evidence, **row})
    return filled


def _display_row(row, cols):
    """A row as the template writes it: its verdict's label and its measured cells, each
    ``{"value", "ci", "bucket", "server"}`` (ci None where the metric has no interval or the
    point none; bucket the server histogram's bucket behind one of its own medians, else
    None; server whether the server reported the figure, so a missing one says so)."""
    ok = row["status"] == "ok"
    validity = row.get("validity") or ""
    buckets = row.get("buckets") or {}
    return {
        **row,
        "validity_display": str(Validity(validity).label) if validity else "",
        "measured": [
            {"value": row[name], "ci": row.get(f"{name}_ci") if ok else None, "bucket": buckets.get(name),
             "server": name in SERVER_COLUMNS}
            for name in shown_columns(cols)
        ],
    }


def points_page(sweep_id, params):
    """The partial's context for ``params`` (from ``parse_query``); raises TableQueryError
    as points_table does."""
    data = points_table(sweep_id, params)
    total, page, per_page = data["total"], data["page"], data["per_page"]
    rows = [_display_row(row, params["cols"]) for row in with_evidence(data["rows"])]
    # Every measured row of the page simulated at one time scale: said once above the table,
    # not per row (a point that was not measured has no figure to read in model time).
    scales = {row["simulated_time_scale"] for row in rows if row["status"] == "ok" or row["simulated_time_scale"] is not None}
    one_scale = scales.pop() if len(scales) == 1 else None
    return {
        **data,
        "sweep_id": sweep_id,
        "params": params,
        "headers": headers(data["sort"], params["cols"]),
        "columns_chosen": column_choices(params["cols"]),
        "rows": rows,
        "one_simulated_scale": one_scale,
        "first": (page - 1) * per_page + 1 if total else 0,
        "last": min(total, page * per_page),
        "previous_page": page - 1 if page > 1 else None,
        "next_page": page + 1 if page < data["pages"] else None,
        "per_page_choices": PER_PAGE_CHOICES,
    }
