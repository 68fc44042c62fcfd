"""Comparisons that know the noise: ``GET /api/compare?run=A&run=B&metric=decode_tok_s``,
the compare page's rows of a run comparison with their verdicts."""

from typing import Annotated, Literal

from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError

from runs.api.results import POINT_METRICS, POINT_VALUES, PointOut, point_out
from runs.api.schemas import DENIED, ErrorOut
from runs.models import Point
from runs.queryparams import MAX_ID
from runs.results import compare as compare_lib
from runs.results import evidence
from runs.results.compare_groups import MissingSelection, compare_groups

router = Router()

MAX_SELECTED = 20
SELECTED_ID = Annotated[int, Field(ge=1, le=MAX_ID)]


class CompareQuery(Schema):
    # Out of these bounds (fewer than two runs, an id that is no id, an unknown metric) the
    # answer is ninja's 422 naming the field, as everywhere in the API.
    run: list[SELECTED_ID] = Field(..., min_length=2, max_length=MAX_SELECTED,
                                   description="two or more run ids, once per run (?run=A&run=B): the first is "
                                               "the baseline")
    metric: Literal[compare_lib.METRICS] = Field(
        compare_lib.DEFAULT_METRIC, description="a point metric (docs/metrics.md), e.g. decode_tok_s, median_ttft_ms")


class CompareRowOut(Schema):
    label: str = Field(description="the matched configuration and point")
    group: str = Field(description="the run (or sweep) compared with the baseline")
    point: PointOut | None = Field(description="the compared point; null: no matching point")
    baseline_point: PointOut | None
    baseline: float | None = Field(description="the baseline's value of the metric (null: none)")
    value: float | None
    diff_pct: float | None = Field(description="(value - baseline) / |baseline| × 100")
    verdict: str | None = Field(description='"better", "worse", "same" (within noise) or "insufficient"; '
                                            "null: one side has no value")
    p_value: float | None = Field(description="two-sided Mann-Whitney U test of the per-request values")
    reason: str = Field(description='the verdict in words, e.g. "within noise: ±3.1 % (Mann-Whitney p = 0.4 ≥ 0.05)"')
    ratio_ci: list[float] | None = Field(description="95 % bootstrap interval of median(value) / median(baseline)")
    basis: str | None = Field(description='what was tested: "requests", "repeats", or null (not tested)')


class CompareOut(Schema):
    metric: str
    alpha: float
    min_requests: int
    groups: list[dict]
    rows: list[CompareRowOut]


@router.get("/compare", response={200: CompareOut, **DENIED, 404: ErrorOut}, tags=["results"])
def compare(request, query: Query[CompareQuery]):
    """Two or more runs matched point by point (workload, prompt length, concurrency) on one
    metric, against the first: ``better`` / ``worse`` only when the difference is
    significant (Mann-Whitney U on the points' per-request values at
    SWEEPLAB_SIGNIFICANCE_ALPHA, and the ratio of medians' interval leaving 1 out), ``same`` within the noise, ``insufficient`` when a side is
    not valid or has too few requests. A row per matched point and run after the first."""
    try:
        groups = compare_groups("run", query.run, query.metric)
    except MissingSelection as exc:
        raise HttpError(404, str(exc).rstrip(".")) from None
    alpha, min_requests = evidence.alpha(), evidence.min_requests()
    rows = compare_lib.compare(groups, query.metric, mode="run", alpha=alpha, min_requests=min_requests)
    ids_shown = {cell["point"] for row in rows for cell in row["cells"] if cell["point"] is not None}
    points = {row["id"]: point_out(row)
              for row in Point.objects.filter(pk__in=ids_shown).values(*POINT_VALUES, *POINT_METRICS)}
    out = []
    for row in rows:
        base = row["cells"][0]
        for group, cell in zip(groups[1:], row["cells"][1:]):
            out.append({
                "label": row["label"], "group": group["label"],
                "point": points.get(cell["point"]), "baseline_point": points.get(base["point"]),
                "baseline": base["value"], "value": cell["value"], "diff_pct": cell["pct"],
                "verdict": cell["verdict"], "p_value": cell["p_value"], "reason": cell["verdict_reason"] or "",
                "ratio_ci": cell["ratio_ci"], "basis": cell["basis"],
            })
    return {
        "metric": query.metric, "alpha": alpha, "min_requests": min_requests,
        "groups": [{"id": g["id"], "label": g["label"], "detail": g["detail"]} for g in groups],
        "rows": out,
    }
