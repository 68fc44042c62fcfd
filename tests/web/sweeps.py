"""Sweeps with measured points, built in the database for the tests of charts, the points
table and telemetry, and readers of the charts they give."""

from benchmarks.models import LLM, Engine, Host, Sweep, Workload
from runs.models import Point, Run


def make_sweep(name="charts"):
    return Sweep.objects.create(
        name=name,
        spec={"name": name},
        host=Host.objects.get(name="sim-8x-rtxpro6000"),
        engine=Engine.objects.get(name="sglang-sim"),
        llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"),
    )


SHAPES = [("fibonacci", None), ("long-context", 3000), ("long-context", 8000)]


def add_run(sweep, position, method, params, tp, statuses=None, speed=100.0, concurrencies=(1,), attempt=1,
            **metrics):
    """A run with one point per SHAPES x concurrency; ``statuses`` maps a shape index to a status."""
    run = Run.objects.create(sweep=sweep, position=position, method=method, params=params, tp=tp,
                             attempt=attempt, status="done")
    workloads = {w.name: w for w in Workload.objects.all()}
    statuses = statuses or {}
    position = 0
    for concurrency in concurrencies:
        for index, (workload, prompt_tokens) in enumerate(SHAPES):
            status = statuses.get(index, "ok")
            values = {}
            if status == "ok":
                values = {
                    "decode_tok_s": speed * (1 - 0.1 * index),
                    "output_throughput": speed * concurrency * 0.9,
                    "mean_ttft_ms": 50.0 + (prompt_tokens or 0) / 100,
                    "median_tpot_ms": 1000 / speed, "p99_tpot_ms": 1500 / speed,
                    "median_itl_ms": 900 / speed, "p99_itl_ms": 2000 / speed,
                    **metrics,
                }
            Point.objects.create(
                run=run, position=position, workload=workloads[workload], prompt_tokens=prompt_tokens,
                max_new_tokens=256, concurrency=concurrency, status=status,
                reason="" if status == "ok" else f"{status} reason {method} TP{tp} #{index}", **values,
            )
            position += 1
    return run


def charts_by_id(data):
    """The charts of an answer by id, and each group of TP panels (``decode_tok_s@TP1``,
    ``decode_tok_s@TP4``) also under its group id (``decode_tok_s``) as one chart: the
    panels' value datasets in TP order, their markers joined per status."""
    charts = {chart["id"]: chart for chart in data["charts"]}
    groups = {}
    for chart in data["charts"]:
        if chart.get("panel"):
            groups.setdefault(chart["group"], []).append(chart)
    for group, panels in groups.items():
        merged = {**panels[0], "id": group, "title": panels[0]["groupTitle"], "panel": None, "datasets": []}
        markers = {}
        for panel in panels:
            for dataset in panel["datasets"]:
                if dataset["kind"] == "marker":
                    markers.setdefault(dataset["status"], {**dataset, "data": []})["data"].extend(dataset["data"])
                else:
                    merged["datasets"].append(dataset)
        merged["datasets"].extend(markers.values())
        charts[group] = merged
    return charts


def values(chart):
    """The values of each value dataset: a bar chart's ``y`` per category, a line chart's
    ``{"x", "y"}`` (data items also carry their interval and evidence, runs.results.charts)."""
    def plain(item):
        if not isinstance(item, dict) or "yMin" not in item:
            return item
        return item["y"] if chart["type"] == "bar" else {"x": item["x"], "y": item["y"]}
    return {d["label"]: [plain(item) for item in d["data"]] for d in chart["datasets"] if d["kind"] == "value"}
