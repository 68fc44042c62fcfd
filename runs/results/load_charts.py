"""Querysets -> Chart.js datasets: a sweep's curves against load and its Pareto view (issue 15).

Load curves (only for a sweep with open-loop points or capacity-search probes): per workload
and prompt length, one chart per metric -- median and p99 TTFT and TPOT, any other latency
an SLO limits, output throughput -- against the load: the request rate of the open-loop
points (req/s), or the concurrency of the closed-loop points where a capacity search
varied it, on a logarithmic axis (searches bracket by doubling). One line per
configuration, coloured, labelled and judged as every comparison chart
(runs.results.charts): each item carries its interval, verdict and n, a suspect value is
drawn hollow on a dashed line, and a point without a value (failed, crashed, invalid) is a
marker at the baseline, never a value. Under an open loop the stored latencies count from
each request's *scheduled* send, so queueing in the client counts (vllm#54101); the
tooltip adds the figure from the actual send and how late the client sent.

Each chart carries its ``annotations``: the SLO limit of its metric, a horizontal line, and
the capacity of each configuration whose search ran on this workload, a vertical line at
``Run.capacity["load"]`` in the configuration's colour (its capacity point also says so in
its tooltip).

The Pareto view, per workload and prompt length: output tok/s per GPU
(``output_throughput / tp``) against tok/s per user (``1000 / median_tpot_ms``) of every ok
point that is not invalid, whatever its load; one dataset per method and TP (the method's
registry colour, a shade and a point style per TP), and the front (sweepcore.pareto) as a
line. The front is drawn through valid and unjudged points only: a suspect point is shown
(hollow) but never makes the front. Every item names its configuration, its load, its
verdict, and how to send the same load again (sweepcore.reproduce). The Pareto charts are
small multiples of one group (``"group": "pareto"``, ``groupTitle``, ``panel`` the workload
and length with the counts), drawn side by side with one legend.

The JSON shape (``load_charts``)::

    {"sweep": id,
     "legend": [...], "configs": [...],            # as runs.results.charts
     "slo": {"ttft_p99_ms": 2000.0, ...},           # the sweep's limits ({} without)
     "charts": [{...runs.results.charts' chart keys, "type": "line" | "scatter",
                 "annotations": [{"kind": "slo" | "capacity", "axis": "y" | "x", "value",
                                  "label", "color", "config" (capacity only)}]}]}

Data items are runs.results.charts' value items plus ``"notes": [text]`` (tooltip lines:
search probe, SLO met or missed and by what, goodput, send-based figures, send lag);
Pareto items add ``"config"``, ``"load"`` (in words), ``"front"`` (bool) and
``"reproduce": {"loadtest", "vllm"}`` (command lines) or, where a point cannot be
reproduced, ``"reproduce": null`` and ``"reproduceNote"``. The front is a dataset of kind
``"front"``. Four queries whatever the size of the sweep.
"""

from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from django.db.models import Q

from benchmarks.models import Sweep
from runs.models import Point, PointStatus, Run, Validity
from runs.results.charts import (
    _chart,
    _evidence,
    _failure,
    _item,
    _markers,
    _method_colour,
    hsl,
    legend,
    load_configs,
    significant,
)
from sweepcore import reproduce
from sweepcore.engines import get_adapter
from sweepcore.methods import REGISTRY
from sweepcore.metrics import LATENCIES, METRIC_NAMES, interval_of, metric_label
from sweepcore.pareto import pareto_front
from sweepcore.slo import point_field

# The load axes: the open loop's request rate, or the concurrency a capacity search varied.
RATE = "request_rate"
CONCURRENCY = "concurrency"
AXES = {
    RATE: ("request rate (req/s)", "req/s"),
    CONCURRENCY: ("concurrency (requests in flight)", "in flight"),
}
CURVE_FIELDS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms")
THROUGHPUT = "output_throughput"
SLO_COLOUR = "#c62828"
FRONT_COLOUR = "#1f2933"
# A point style per TP (in the sweep's TP order): the shade alone is hard to tell apart.
TP_POINT_STYLES = ("circle", "rect", "triangle", "rectRot", "rectRounded", "crossRot")
SHADE_LIGHTNESS = (30, 62)  # a method's TPs from dark to light, in %
# Where the worker's servers listen (runs.worker.executor launches them on the host itself).
SERVER_HOST = "127.0.0.1"

POINT_FIELDS = (
    "id", "run_id", "position", "status", "reason",
    "workload__name", "workload__kind", "workload__prompt", "workload__dataset_path", "extra",
    "prompt_tokens", "actual_prompt_tokens", "max_new_tokens", "concurrency",
    "request_rate", "burstiness", "from_search",
    "completed", "failed", "output_throughput",
    *(f"{stat}_{metric}_ms" for metric in LATENCIES for stat in ("median", "p90", "p99")),
    "validity", "validity_reasons", "intervals", "simulated_time_scale",
    "goodput", "slo_attainment", "slo_met", "slo_checks",
    "send_lag_median_ms", "send_lag_p99_ms", "send_lag_max_ms", "send_based",
)


@dataclass
class Series:
    """A configuration with what the load charts need of its run, and its points."""

    config: object  # runs.results.charts.Config
    capacity: dict
    base_url: str | None  # where its server listened; None: it never did here
    api: str | None  # how the load generator talked to it (its engine adapter's); None: no adapter
    forced_by: str  # how the sweep forced the output length: "ignore_eos", "logit_bias" or ""
    points: list = dataclass_field(default_factory=list)


def _client_side(kind, server_info):
    """(api, how the output length was forced) as the executor sent the requests: the
    engine adapter's API and request body."""
    try:
        adapter = get_adapter(kind)
    except ValueError:  # an engine kind without an adapter
        return None, ""
    body = adapter.extra_body(1, server_info or {})
    return adapter.api, "ignore_eos" if body.get("ignore_eos") else ("logit_bias" if body.get("logit_bias") else "")


def load(sweep_id):
    """The sweep and its series: four queries (the sweep, the runs twice, the points)."""
    sweep = Sweep.objects.select_related("engine", "llm").only(
        "spec", "engine__kind", "llm__name", "llm__path").get(pk=sweep_id)
    configs = load_configs(sweep_id=sweep_id)
    runs = {row["id"]: row for row in Run.objects.filter(pk__in=[c.run_id for c in configs]).values(
        "id", "capacity", "port", "server_info")} if configs else {}
    series = {}
    for config in configs:
        run = runs[config.run_id]
        series[config.run_id] = Series(
            config, run["capacity"] or {}, f"http://{SERVER_HOST}:{run['port']}" if run["port"] else None,
            *_client_side(sweep.engine.kind, run["server_info"]),
        )
    points = Point.objects.filter(run_id__in=list(series), excluded=False).order_by("position", "id")
    for point in points.values(*POINT_FIELDS) if series else ():
        series[point["run_id"]].points.append(point)
    return sweep, list(series.values())


def has_load_curves(sweep_id):
    """Whether the sweep has load curves (open-loop points or search probes): one query."""
    return Point.objects.filter(run__sweep_id=sweep_id, excluded=False).filter(
        Q(request_rate__isnull=False) | Q(from_search=True)).exists()


# -- Load curves ---------------------------------------------------------------------------


def _x(point, axis):
    """The point's load on ``axis``, or None when it is not on that axis."""
    if axis == RATE:
        return point["request_rate"]
    return point["concurrency"] if point["request_rate"] is None else None


def _axes(series):
    points = [p for s in series for p in s.points]
    axes = []
    if any(p["request_rate"] is not None for p in points):
        axes.append(RATE)
    if any(p["from_search"] and p["request_rate"] is None for p in points):
        axes.append(CONCURRENCY)
    return axes


def _shape(point):
    return point["workload__name"], point["prompt_tokens"]


def _shape_label(shape):
    workload, prompt_tokens = shape
    return workload if prompt_tokens is None else f"{workload} {prompt_tokens}"


def _groups(series, axis):
    """(group key, label) -> {run id: [(x, point)]}: per workload and prompt length, and
    under an open loop per concurrency cap and burstiness where the sweep has several."""
    on_axis = [(s, p, _x(p, axis)) for s in series for p in s.points if _x(p, axis) is not None]
    caps = {p["concurrency"] for _, p, _ in on_axis} if axis == RATE else set()
    bursts = {p["burstiness"] for _, p, _ in on_axis} if axis == RATE else set()
    groups = defaultdict(lambda: defaultdict(list))
    for s, point, x in on_axis:
        key = _shape(point)
        label = _shape_label(key)
        if len(caps) > 1:
            key += (point["concurrency"],)
            label += f", at most {point['concurrency']} in flight"
        if len(bursts) > 1:
            key += (point["burstiness"],)
            label += f", burstiness {point['burstiness']}"
        groups[(key, label)][s.config.run_id].append((x, point))
    return groups


def _number(value):
    return f"{significant(value):g}"


def _curve_notes(point, field, axis, capacity_point):
    """The tooltip lines of a load-curve item beyond its value and evidence."""
    if point["status"] != PointStatus.OK:
        return []
    notes = []
    if point["id"] == capacity_point:
        notes.append("capacity: the highest load found that meets the SLO")
    elif point["from_search"]:
        notes.append("a probe of the capacity search")
    if point["slo_met"] is not None:
        missed = [f"{key} {_number(check['observed'])} > {_number(check['limit'])}" if check.get("observed") is not None
                  else f"{key} beyond any limit (failed requests count as infinite)"
                  for key, check in (point["slo_checks"] or {}).items() if check.get("met") is False]
        notes.append("meets the SLO" if point["slo_met"] else "misses the SLO" + (": " + ", ".join(missed) if missed
                                                                                  else ""))
    if point["goodput"] is not None:
        share = f" ({point['slo_attainment'] * 100:.0f} % of requests within every limit)" \
            if point["slo_attainment"] is not None else ""
        notes.append(f"goodput {_number(point['goodput'])} req/s{share}")
    if axis == RATE:
        sent = (point["send_based"] or {}).get(field)
        if sent is not None:
            notes.append(f"from the scheduled send; from the actual send: {_number(sent)} ms")
        if point["send_lag_p99_ms"] is not None:
            lag = [f"median {_number(point['send_lag_median_ms'])} ms"] if point["send_lag_median_ms"] is not None \
                else []
            lag.append(f"p99 {_number(point['send_lag_p99_ms'])} ms")
            if point["send_lag_max_ms"] is not None:
                lag.append(f"max {_number(point['send_lag_max_ms'])} ms")
            notes.append("the client sent late by " + ", ".join(lag))
    return notes


def _capacity_lines(series, axis, runs_in_group, group_points):
    """The vertical capacity lines of the configurations whose search ran in this group."""
    lines = []
    unit = AXES[axis][1]
    for s in series:
        capacity = s.capacity
        if capacity.get("metric") != axis or capacity.get("load") is None or s.config.run_id not in runs_in_group:
            continue
        point_id = capacity.get("point")
        here = point_id in group_points if point_id is not None else any(
            p["from_search"] for _, p in runs_in_group[s.config.run_id])
        if here:
            lines.append({"kind": "capacity", "axis": "x", "value": capacity["load"],
                          "label": f"capacity {s.config.label}: {_number(capacity['load'])} {unit}",
                          "color": s.config.colour, "config": s.config.label})
    return lines


def _slo_lines(slo, field):
    # An ITL limit is checked on each request's own gaps (sweepcore.slo), stricter than
    # the pooled column drawn: the line says so, the tooltips give the check's own figure.
    checked = " (checked per request)" if field.endswith("_itl_ms") else ""
    return [{"kind": "slo", "axis": "y", "value": limit,
             "label": f"SLO: {METRIC_NAMES[field][0]} ≤ {_number(limit)} ms{checked}", "color": SLO_COLOUR}
            for key, limit in slo.items() if point_field(key) == field]


def curve_chart(series, axis, field, runs_in_group, slo, chart_id, title):
    """One metric against the load, a line per configuration, in one group."""
    group_points = {p["id"] for points in runs_in_group.values() for _, p in points}
    datasets, failures = [], []
    for s in series:
        points = sorted(runs_in_group.get(s.config.run_id, ()), key=lambda e: (e[0], e[1]["position"]))
        if not points:
            continue
        data = []
        for x, point in points:
            item = _item(x, point, field)
            item["notes"] = _curve_notes(point, field, axis, s.capacity.get("point"))
            data.append(item)
            failure = _failure(point)
            if failure:
                failures.append((x, s.config.label, *failure))
        datasets.append(s.config.dataset("line", data))
        if axis == RATE and field.endswith(SEND_BASED_SUFFIXES):
            datasets.append(_send_based_dataset(s.config, points, field))
    chart = _chart(chart_id, "line", title, AXES[axis][0], metric_label(field), datasets + _markers(failures),
                   x_type="logarithmic")
    chart["annotations"] = _slo_lines(slo, field) + _capacity_lines(series, axis, runs_in_group, group_points)
    return chart


# The latencies an open loop counts from the scheduled send, drawn beside the same latency
# from the actual send: the gap between the two lines is the client's own queue.
SEND_BASED_SUFFIXES = ("_ttft_ms", "_e2el_ms")


def _send_based_dataset(config, points, field):
    """The configuration's `field` from the actual send (the point's ``send_based``), a
    dashed line beside its schedule-based one."""
    data = []
    for x, point in points:
        sent = (point["send_based"] or {}).get(field) if point["status"] == PointStatus.OK else None
        data.append({"x": x, "y": significant(sent) if sent is not None else None, **_evidence(point),
                     "notes": ["from the actual send: what a client that does not count its own queue reports"]})
    dataset = config.dataset("line", data)
    dataset.update(kind="send_based", label=f"{config.label} (from the actual send)", sendBased=True)
    return dataset


def _curve_fields(slo):
    """The metrics charted against load: the four latency percentiles, any other latency an
    SLO limits, then output throughput."""
    limited = [point_field(key) for key in slo]
    return [*CURVE_FIELDS, *dict.fromkeys(f for f in limited if f not in CURVE_FIELDS), THROUGHPUT]


def curve_charts(series, slo):
    charts = []
    for axis in _axes(series):
        for (_, label), runs_in_group in _groups(series, axis).items():
            for field in _curve_fields(slo):
                name = METRIC_NAMES[field][0]
                against = AXES[axis][0].split(" (")[0]
                # TTFT and E2EL count from the send; under an open loop, from the scheduled one.
                scheduled = " (from the scheduled send)" if axis == RATE and field.endswith(("ttft_ms", "e2el_ms")) \
                    else ""
                title = f"{name[0].upper()}{name[1:]} against {against}{scheduled}: {label}"
                charts.append(curve_chart(series, axis, field, runs_in_group, slo,
                                          f"load:{axis}:{field}:{label}", title))
    return charts


# -- The Pareto view ------------------------------------------------------------------------


def _load_text(point):
    if point["request_rate"] is None:
        text = f"concurrency {point['concurrency']}"
    else:
        burstiness = point["burstiness"]
        arrivals = "Poisson" if burstiness in (None, 1, 1.0) else f"burstiness {_number(burstiness)}"
        text = f"{_number(point['request_rate'])} req/s ({arrivals}), at most {point['concurrency']} in flight"
    return text + (", a capacity-search probe" if point["from_search"] else "")


def _reproduce(sweep, s, point):
    """(the command lines, None) or (None, why there are none)."""
    if s.base_url is None:
        return None, "no command: the run's server never listened here (imported, or not launched)"
    if s.api is None:
        return None, f"no command: no engine adapter for {sweep.engine.kind!r}"
    # The requests the point sent and left out as its ramp (the sweep's steady_state).
    ramp = (point["extra"] or {}).get("ramp") or {"first": 0, "last": 0}
    ramp_sent = bool(ramp["first"] or ramp["last"])
    shares = (sweep.spec or {}).get("steady_state") or {}
    load = reproduce.PointLoad(
        base_url=s.base_url, api=s.api, model=sweep.llm.name,
        workload_kind=point["workload__kind"], max_tokens=point["max_new_tokens"],
        num_requests=(point["completed"] or 0) + (point["failed"] or 0) + ramp["first"] + ramp["last"],
        concurrency=point["concurrency"],
        request_rate=point["request_rate"], burstiness=point["burstiness"] or 1.0,
        ignore_eos=s.forced_by == "ignore_eos",
        prompt_tokens=point["prompt_tokens"] if point["prompt_tokens"] is not None else point["actual_prompt_tokens"],
        prompt=point["workload__prompt"] or "", dataset_path=point["workload__dataset_path"] or "",
        tokenizer=sweep.llm.path, skip_first=shares.get("skip_first", 0.0) if ramp_sent else 0.0,
        skip_last=shares.get("skip_last", 0.0) if ramp_sent else 0.0,
    )
    try:
        lines = {"loadtest": reproduce.command_line(reproduce.loadtest_argv(load)),
                 "vllm": reproduce.command_line(reproduce.vllm_bench_argv(load))}
    except ValueError as exc:
        return None, f"no command: {exc}"
    notes = []
    if s.forced_by == "logit_bias":
        notes.append("the sweep forced the output length by banning end-of-generation tokens (logit_bias); "
                     "these commands cannot, so answers may end early")
    if ramp_sent:
        notes.append(f"vllm bench serve counts every request: its figures include the {ramp['first'] + ramp['last']} "
                     f"this point left out as its ramp")
    return lines, "; ".join(notes)


def _tp_styles(series):
    """The shade of each (method, TP) and the point style of each TP."""
    tps = sorted({s.config.tp for s in series})
    styles = {tp: TP_POINT_STYLES[i % len(TP_POINT_STYLES)] for i, tp in enumerate(tps)}
    colours = {}
    for method in {s.config.method for s in series}:
        own = sorted({s.config.tp for s in series if s.config.method == method})
        hue, saturation = _method_colour(method)
        low, high = SHADE_LIGHTNESS
        for i, tp in enumerate(own):
            lightness = (low + high) // 2 if len(own) == 1 else round(low + i * (high - low) / (len(own) - 1))
            colours[(method, tp)] = hsl(hue, saturation, lightness)
    return colours, styles


def _method_order(method):
    order = [m.name for m in REGISTRY]
    return order.index(method) if method in order else len(order)


def pareto_chart(sweep, series, shape, chart_id, title):
    """Output tok/s per GPU against tok/s per user of one workload and prompt length."""
    colours, styles = _tp_styles(series)
    groups = defaultdict(list)  # (method, tp) -> items
    candidates, invalid = [], 0
    for s in series:
        for point in s.points:
            if _shape(point) != shape or point["status"] != PointStatus.OK:
                continue
            if not point["output_throughput"] or not point["median_tpot_ms"] or point["median_tpot_ms"] <= 0:
                continue
            if point["validity"] == Validity.INVALID:
                invalid += 1
                continue
            per_user, per_gpu = 1000.0 / point["median_tpot_ms"], point["output_throughput"] / s.config.tp
            lines, note = _reproduce(sweep, s, point)
            notes = [f"load: {_load_text(point)}"]
            ci = interval_of(point["intervals"], "median_tpot_ms")
            if ci and ci[0] > 0:
                notes.append(f"tok/s per user 95 % CI {_number(1000.0 / ci[1])}–{_number(1000.0 / ci[0])}")
            # A suspect one's verdict and reasons are the tooltip's own lines (charts.js).
            if point["validity"] == Validity.VALID:
                notes.append("verdict: valid")
            elif not point["validity"]:
                notes.append("not judged (no verdict stored)")
            item = {"x": significant(per_user), "y": significant(per_gpu), "yMin": None, "yMax": None,
                    **_evidence(point), "config": s.config.label, "load": _load_text(point), "front": False,
                    "notes": notes, "reproduce": lines, "reproduceNote": note}
            groups[(s.config.method, s.config.tp)].append(item)
            if point["validity"] != Validity.SUSPECT:
                candidates.append((per_user, per_gpu, item))
    front = [candidates[i][2] for i in pareto_front([(x, y) for x, y, _ in candidates])]
    for item in front:
        item["front"] = True
        item["notes"].append("on the Pareto front")
    datasets = []
    for method, tp in sorted(groups, key=lambda k: (_method_order(k[0]), k[1])):
        datasets.append({"kind": "value", "type": "scatter", "label": f"{method} TP{tp}", "method": method, "tp": tp,
                         "data": sorted(groups[(method, tp)], key=lambda i: (i["x"], i["y"])),
                         "pointStyle": styles[tp], "backgroundColor": colours[(method, tp)],
                         "borderColor": colours[(method, tp)]})
    if front:
        datasets.append({"kind": "front", "type": "line", "label": "Pareto front",
                         "data": [{"x": i["x"], "y": i["y"], "config": i["config"], "load": i["load"]} for i in front],
                         "backgroundColor": FRONT_COLOUR, "borderColor": FRONT_COLOUR})
    drawn = sum(len(items) for items in groups.values())
    parts = [f"{drawn} point{'s' if drawn != 1 else ''}", f"{len(front)} on the front"]
    if invalid:
        parts.append(f"{invalid} invalid left out")
    chart = _chart(chart_id, "scatter", f"{title} ({', '.join(parts)})", "tok/s per user: 1000 / median TPOT (tok/s)",
                   "output tok/s per GPU (tok/s)", datasets, x_type="linear")
    # Small multiples: one panel per workload and length under one title, one legend (charts.js).
    chart.update(group=PARETO_GROUP, groupTitle=PARETO_TITLE, panel=f"{_shape_label(shape)} ({', '.join(parts)})")
    chart["annotations"] = []
    return chart


PARETO_GROUP = "pareto"
PARETO_TITLE = "Pareto: output tok/s per GPU against tok/s per user"


def pareto_charts(sweep, series):
    shapes = []
    for s in series:
        for point in s.points:
            if point["status"] == PointStatus.OK and _shape(point) not in shapes:
                shapes.append(_shape(point))
    return [pareto_chart(sweep, series, shape, f"pareto:{_shape_label(shape)}",
                         f"{PARETO_TITLE}, {_shape_label(shape)}")
            for shape in shapes]


def load_charts(sweep_id):
    """The sweep's curves against load (when it has open-loop points or search probes) and
    its Pareto view, Chart.js-ready (the module docstring's shape)."""
    sweep, series = load(sweep_id)
    slo = dict((sweep.spec or {}).get("slo") or {})
    return {
        "sweep": sweep_id,
        "legend": legend(),
        "configs": [s.config.identity() for s in series],
        "slo": slo,
        "charts": curve_charts(series, slo) + pareto_charts(sweep, series),
    }
