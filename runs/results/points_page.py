"""The points table as the sweep page renders it (templates/runs/partials/points_table.html):
one answer of ``points_table`` with its columns in display order and what a click on each
header sorts by next, each row's measured values in column order, and the pager."""

from runs.results.points_table import DEFAULT_PER_PAGE, MAX_PER_PAGE, METRIC_COLUMNS, points_table
from sweepcore.metrics import higher_is_better

PER_PAGE_CHOICES = (50, DEFAULT_PER_PAGE, 200, MAX_PER_PAGE)

# The columns before the measured ones: (sort column, header, numeric).
LEADING_COLUMNS = (
    ("run", "Configuration", False),
    ("workload", "Workload", False),
    ("prompt_tokens", "Prompt tokens", True),
    ("concurrency", "Concurrency", True),
    ("status", "Status", False),
)
# Short headers of the measured columns, for a wide table (sweepcore.metrics names them in full).
METRIC_HEADERS = {
    "decode_tok_s": "Decode (tok/s)",
    "server_decode_tok_s": "Server's decode (tok/s)",
    "output_throughput": "Output (tok/s)",
    "median_ttft_ms": "TTFT median (ms)",
    "p99_ttft_ms": "TTFT p99 (ms)",
    "median_tpot_ms": "TPOT median (ms)",
    "p99_itl_ms": "ITL p99 (ms)",
    "median_e2el_ms": "E2E median (ms)",
    "accept_length": "Accept length",
    "duration": "Duration (s)",
}


def headers(sort):
    """The header cells for the current ``sort``: aria-sort, the arrow, and ``next``, the
    sort a click asks for (the other direction of the current column; a new column starts
    with its best values, so speeds start with the fastest)."""
    current, descending = sort.lstrip("-"), sort.startswith("-")
    columns = (*LEADING_COLUMNS, *((name, METRIC_HEADERS[name], True) for name in METRIC_COLUMNS))
    cells = []
    for name, label, numeric in columns:
        active = name == current
        if active:
            following = name if descending else f"-{name}"
        else:
            following = f"-{name}" if name in METRIC_COLUMNS and higher_is_better(name) else name
        cells.append({
            "sort": name,
            "label": label,
            "numeric": numeric,
            "aria_sort": ("descending" if descending else "ascending") if active else "none",
            "arrow": (" ▼" if descending else " ▲") if active else "",
            "next": following,
        })
    return cells


def points_page(sweep_id, params):
    """The partial's context for ``params`` (from ``parse_query``); raises TableQueryError
    as points_table does."""
    data = points_table(sweep_id, params)
    total, page, per_page = data["total"], data["page"], data["per_page"]
    return {
        **data,
        "sweep_id": sweep_id,
        "params": params,
        "headers": headers(data["sort"]),
        "rows": [{**row, "measured": [row[name] for name in METRIC_COLUMNS]} for row in data["rows"]],
        "first": (page - 1) * per_page + 1 if total else 0,
        "last": min(total, page * per_page),
        "previous_page": page - 1 if page > 1 else None,
        "next_page": page + 1 if page < data["pages"] else None,
        "per_page_choices": PER_PAGE_CHOICES,
    }
