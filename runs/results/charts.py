"""Querysets -> Chart.js datasets: the comparison charts of a sweep (or of chosen runs).

Everything comes from two queries (the runs, then their points, only the needed columns);
the rest is arithmetic in Python, so the query count does not grow with the number of runs.

A point that did not produce a measurement (crashed, skipped, timeout, not_run, failed,
context_overflow) is never drawn as a zero: value datasets carry ``None`` there and the point
appears in a separate *marker* dataset (one per status) with its reason, which the page draws
in a lane of its own under the value axis (static/js/charts.js), a row per series.

Charts come in families. The *overview* (decode speed, speedup, accept length) is always
sent; the others (``FAMILIES``: against prompt length, latency per point, against
concurrency) grow with the points of a big sweep, so ``build_charts`` only lists them (id
and title) and builds them when asked for: ``family=ID`` (every chart of one family) or
``chart=ID`` (one chart). Each chart is built by one function, whichever way it is asked for.
The page fetches a family whole when it is opened if ``at_once`` (at most
``FAMILY_AT_ONCE`` charts), else one chart at a time: drawing 40 charts of 300
configurations at once would stall the browser.

The JSON shape (``build_charts``)::

    {"sweep": id | None,
     "legend": [{"status", "label", "meaning", "pointStyle", "color"}],   # marker meanings
     "configs": [{"config", "method", "tp", "params", "run", "sweep", "color",
                  "legend": {"group", "item"}}],  # once each; legend: grouped by method
     "families": [{"id", "title", "at_once", "charts": [{"id", "title"}]}],  # groups, on demand
     "family": "overview" | family id | None (one chart),         # what "charts" holds
     "omitted": [{"id", "title", "reason"}],  # no value, no marker: named with why, not drawn
     "charts": [{"id", "family", "type": "bar" | "line", "title",
                 "group", "groupTitle", "panel": "TP4" | None,  # small multiples (below)
                 "x": {"label", "type": "category" | "linear"}, "y": {"label", "type"},
                 "labels": [...],            # category charts only
                 "datasets": [{"kind": "value" | "marker", "type": "bar" | "line" | "scatter",
                               "label", "data", "backgroundColor", "borderColor", ...}]}]}

Small multiples by TP: when the configurations have several TPs, every chart of a
configuration family (decode, speedup, against prompt length, latency, against concurrency)
is drawn once per TP, ``<id>@TP<n>``, all with the same x categories, grouped under
``group`` (the id they share; ``chart=<group>`` answers all its panels) and drawn side by
side. A configuration has the same colour in every panel (one per method and parameter
values, told apart: ``PALETTE``); its legend entry (``configs[].legend``) groups it by method.

A value dataset of a configuration is labelled with the configuration (``configs[].config``,
unique within the answer); its method, TP, parameters, run and sweep are in ``configs``.
Values are rounded to 4 significant digits. Line datasets leave their line style (width,
point radius, no fill, gaps at missing values) to charts.js. Marker datasets carry
``status`` and data items ``{"x", "y", "config", "status", "reason"}``.

The evidence of every value (issue 13)
--------------------------------------
Every data item of a value dataset (bar and line charts alike; the accept-length lines
excepted, whose values are means over several points) is an object in the
chartjs-chart-error-bars format, plus the point's evidence::

    {"x": category label | number, "y": value | null,
     "yMin": lo | null, "yMax": hi | null,   # 95 % interval of the value (error bar); null: none
     "validity": "valid" | "suspect" | "",   # "" = not judged (imported, or measured before
                                             # verdicts); draw "suspect" hatched or greyed
     "reasons": "code: message; ..." ,       # the verdict's reasons, for the tooltip
     "n": completed requests | null,
     "simulated": time scale | null}         # not null: the value is in the model's time

The interval of a bar or line value comes from ``Point.intervals`` where the chart's metric
has one (decode speed, the latency medians); other metrics (p99, mean TTFT, throughput)
have ``yMin`` = ``yMax`` = null. An ``invalid`` point is never a value: its ``y`` is null
and it is a marker of status ``"invalid"`` (legend included) whose ``reason`` is its
reasons. A speedup item also carries the test of the two points' per-request decode
speeds (sweepcore.stats: ``yMin``/``yMax`` = the 95 % bootstrap interval of the ratio of
medians)::

    {..., "verdict": "better" | "worse" | "same" | "insufficient",
     "pValue": p | null, "verdictReason": "within noise: ±3.1 % (...)" | "...",
     "baselineN": n of the autoregressive point | null}

Its ``validity`` is the worse of the two points' (a suspect baseline makes a suspect
speedup) and its ``reasons`` name which side each reason belongs to. The "valid only"
toggle hides items whose ``validity`` is not "valid".
"""

from collections import defaultdict, namedtuple
from functools import partial

from benchmarks.models import SweepSource
from runs.models import Point, PointStatus, Run, Validity
from runs.results import evidence
from sweepcore.methods import AUTOREGRESSIVE, METHODS, REGISTRY, config_label
from sweepcore.metrics import interval_of, metric_label
from sweepcore.stats import compare_samples, ratio_ci

# -- The palette: one place. A hue per method (sweepcore.methods); shades per parameter value / TP.

OTHER_METHOD_COLOUR = (160, 45)  # a method the registry gives no colour
SHADE_LIGHTNESS = (32, 68)  # darkest and lightest shade, in %
# A configuration's colour: one per method and parameter values, the same at every TP (so
# that the TP panels read alike) and told apart from its neighbours at a glance: shades of
# one hue per method were near-identical for six DDTree budgets. The autoregressive
# baseline is a neutral slate; the others take Tableau's categorical palette (ten hues,
# then their lighter and darker partners) in legend order.
BASELINE_COLOUR = "#5f6b7a"
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f",
    "#2a5783", "#b6992d", "#8cd17d", "#d37295", "#499894", "#f1a340", "#a0cbe8", "#b9735a", "#8a5fa8",
    "#c4a000", "#86bcb6",
)

# Markers for points without a measurement: colour as the status badges, a shape each.
MARKER_STATUSES = {
    PointStatus.CRASHED.value: ("#8e1b1b", "crossRot", "the server died during this point"),
    PointStatus.FAILED.value: ("#c62828", "triangle", "the requests of this point errored"),
    PointStatus.TIMEOUT.value: ("#b26a00", "rectRot", "the point ran out of time"),
    PointStatus.CONTEXT_OVERFLOW.value: ("#e0603a", "rect", "the server refused the prompt length"),
    PointStatus.SKIPPED.value: ("#6d5bb0", "circle", "skipped by a cap or a quarantine"),
    PointStatus.NOT_RUN.value: ("#8a939e", "cross", "not run: its server died earlier, or the sweep was cancelled"),
}
NO_BASELINE = "no_baseline"
NO_BASELINE_MARKER = ("#5c6670", "dash", "no ok autoregressive baseline in the same sweep at this TP and point")
# A measured point whose verdict is invalid: a marker with its reasons, never a bar.
INVALID = "invalid"
INVALID_MARKER = ("#6b1f7a", "star", "invalid measurement: its number cannot be trusted, never drawn as a value")
EXTRA_MARKERS = {NO_BASELINE: NO_BASELINE_MARKER, INVALID: INVALID_MARKER}
MARKER_RADIUS = 7

POINT_FIELDS = (
    "id",
    "run_id",
    "workload__name",
    "prompt_tokens",
    "concurrency",
    "position",
    "status",
    "reason",
    "decode_tok_s",
    "output_throughput",
    "mean_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "accept_length",
    "validity",
    "validity_reasons",
    "intervals",
    "completed",
    "simulated_time_scale",
)
LATENCY_SERIES = (
    ("median_tpot_ms", "TPOT median"),
    ("p99_tpot_ms", "TPOT p99"),
    ("median_itl_ms", "ITL median"),
    ("p99_itl_ms", "ITL p99"),
)
# Chart families sent on demand (id -> title): the page lists their charts and fetches a
# family when it is opened. The overview is always sent.
OVERVIEW = "overview"
FAMILIES = {
    "prompt_length": "Decode speed and TTFT against prompt length",
    "latency": "TPOT and ITL, median and p99, per point",
    "concurrency": "Output throughput against concurrency",
}
FAMILY_AT_ONCE = 12  # a family with more charts is opened one chart at a time


def hsl(hue, saturation, lightness, alpha=None):
    if alpha is None:
        return f"hsl({hue}, {saturation}%, {lightness}%)"
    return f"hsla({hue}, {saturation}%, {lightness}%, {alpha})"


def shades(method, count):
    """``count`` shades of the method's colour, darkest first (the accept-length lines: a shade per TP)."""
    hue, saturation = _method_colour(method)
    low, high = SHADE_LIGHTNESS
    if count <= 1:
        return [hsl(hue, saturation, (low + high) // 2)]
    step = (high - low) / (count - 1)
    return [hsl(hue, saturation, round(low + i * step)) for i in range(count)]


def _method_colour(method):
    entry = METHODS.get(method)
    return entry.colour if entry is not None and entry.colour is not None else OTHER_METHOD_COLOUR


def _lookahead(method):
    """The registry's look-ahead parameter of a method (sweepcore.methods.Lookahead), or None."""
    entry = METHODS.get(method)
    return entry.lookahead if entry is not None else None


def _sort_value(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def _params_order(params):
    return tuple((key, _sort_value(value)) for key, value in sorted((params or {}).items()))


# -- Loading (the only two queries) ---------------------------------------------------------


class Config:
    """One configuration (the latest attempt of a method, parameters and TP)."""

    def __init__(self, row):
        self.run_id = row["id"]
        self.sweep_id = row["sweep_id"]
        self.method = row["method"]
        self.params = row["params"] or {}
        self.tp = row["tp"]
        self.position = row["position"]
        # Imported from a result file: its points say no more than the file did.
        self.imported = row["sweep__source"] == SweepSource.IMPORTED
        self.label = config_label(self.method, self.params, self.tp)
        self.attempt_shown = None  # the attempt, when the label names it (_disambiguate)
        self.colour = None
        self.legend = None
        self.points = {}  # (workload, prompt_tokens, concurrency) -> point row

    def dataset(self, chart_type, data):
        """A value dataset of this configuration (its identity is in ``configs``, once)."""
        return {"kind": "value", "type": chart_type, "label": self.label, "data": data,
                "backgroundColor": self.colour, "borderColor": self.colour}

    def identity(self):
        return {"config": self.label, "method": self.method, "tp": self.tp, "params": self.params,
                "run": self.run_id, "sweep": self.sweep_id, "color": self.colour, "legend": self.legend}


class Configs(list):
    """The configurations of an answer (a list that can hold what is loaded for them once)."""


def load(sweep_id=None, run_ids=None):
    """The configurations and their points: exactly two queries."""
    configs = load_configs(sweep_id=sweep_id, run_ids=run_ids)
    by_run = {config.run_id: config for config in configs}
    points = (
        Point.objects.filter(run_id__in=list(by_run), excluded=False)
        .order_by("position", "id")
        .values(*POINT_FIELDS)
    )
    for point in points if by_run else ():
        key = (point["workload__name"], point["prompt_tokens"], point["concurrency"])
        by_run[point["run_id"]].points[key] = point
    return configs


def load_configs(sweep_id=None, run_ids=None):
    """The configurations, labelled and coloured, without their points: one query."""
    runs = Run.objects.filter(excluded=False)
    if sweep_id is not None:
        runs = runs.filter(sweep_id=sweep_id)
    if run_ids is not None:
        run_ids = list(run_ids)
        runs = runs.filter(pk__in=run_ids)
    rows = runs.order_by("position", "attempt", "id").values(
        "id", "sweep_id", "method", "params", "params_key", "tp", "position", "attempt", "sweep__source"
    )
    if run_ids is None:
        latest = {}
        for row in rows:  # a retry replaces the attempt before it
            latest[(row["method"], row["params_key"], row["tp"])] = row
        chosen = sorted(latest.values(), key=lambda r: (r["position"], r["id"]))
    else:
        # Chosen runs are all shown, in the order given: the same configuration in two
        # sweeps (last week's and this week's) is exactly what such a selection compares.
        order = {run_id: i for i, run_id in enumerate(run_ids)}
        chosen = sorted(rows, key=lambda r: order[r["id"]])
    configs = Configs(Config(row) for row in chosen)
    _disambiguate(configs, chosen)
    _colour(configs)
    return configs


def _disambiguate(configs, rows):
    """Labels that tell the runs apart: the sweep when they come from several, the attempt
    when one configuration appears twice in one sweep."""
    if len({c.sweep_id for c in configs}) > 1:
        for config in configs:
            config.label = f"#{config.sweep_id} {config.label}"
    seen = defaultdict(int)
    for config in configs:
        seen[config.label] += 1
    attempts = {row["id"]: row["attempt"] for row in rows}
    for config in configs:
        if seen[config.label] > 1:
            config.attempt_shown = attempts[config.run_id]
            config.label = f"{config.label} attempt {config.attempt_shown}"


def _look_key(config):
    """What a configuration's colour and legend entry stand for: its sweep, method and
    parameters (and attempt, where the label names one), whatever its TP."""
    return (config.sweep_id, config.method, _params_order(config.params), config.attempt_shown)


def _method_rank(method):
    return next((i for i, m in enumerate(REGISTRY) if m.name == method), len(REGISTRY))


def _colour(configs):
    """A colour per (sweep, method, parameters), in legend order (registry order of the
    methods, then parameter values): the same in every chart and at every TP."""
    keys = sorted({_look_key(c) for c in configs}, key=lambda k: (_method_rank(k[1]), k[1], k[2], k[0], k[3]))
    colours, others = {}, iter(range(len(keys)))
    for key in keys:
        if key[1] == AUTOREGRESSIVE and BASELINE_COLOUR not in colours.values():
            colours[key] = BASELINE_COLOUR
        else:
            colours[key] = PALETTE[next(others) % len(PALETTE)]
    for config in configs:
        config.colour = colours[_look_key(config)]
    _legend_entries(configs)


def _legend_entries(configs):
    """Each configuration's place in the legend, grouped by method: ``group`` names the
    method with the parameters its configurations share (and the one that varies), ``item``
    the values that tell it apart, e.g. group "ddtree topk_cap=8 · budget", item "15"."""
    groups = defaultdict(list)
    for config in configs:
        groups[(config.sweep_id, config.method)].append(config)
    several_sweeps = len({c.sweep_id for c in configs}) > 1
    for (sweep_id, method), group in groups.items():
        keys = sorted({k for c in group for k in c.params})
        fixed = [k for k in keys if len({repr(c.params.get(k)) for c in group}) == 1 and all(k in c.params for c in group)]
        varying = [k for k in keys if k not in fixed]
        head = " ".join([f"#{sweep_id}"] * several_sweeps + [method] + [f"{k}={group[0].params[k]}" for k in fixed])
        if len(varying) == 1:
            head += f" · {varying[0]}"
        for config in group:
            if len(varying) == 1:
                item = str(config.params.get(varying[0], "–"))
            else:
                item = " ".join(f"{k}={config.params[k]}" for k in varying if k in config.params)
            if config.attempt_shown is not None:
                item = f"{item} attempt {config.attempt_shown}".strip()
            config.legend = {"group": head, "item": item}


# -- Helpers ----------------------------------------------------------------------------------


def _is_ok(point):
    return point is not None and point["status"] == PointStatus.OK


def _measured(point):
    """An ok point whose number may be drawn: not invalid."""
    return _is_ok(point) and point["validity"] != Validity.INVALID


def significant(value, digits=4):
    """``value`` rounded to ``digits`` significant digits (None stays None)."""
    if value is None:
        return None
    return float(f"{value:.{digits}g}")


def _ok_value(point, field):
    return significant(point[field]) if _measured(point) else None


def _evidence(point):
    """The evidence keys of a data item (see the module docstring)."""
    if point is None:
        return {"validity": "", "reasons": "", "n": None, "simulated": None}
    return {"validity": point["validity"] if point["validity"] != Validity.INVALID else "",
            "reasons": evidence.reasons_text(point["validity_reasons"]), "n": point["completed"],
            "simulated": point["simulated_time_scale"]}


def _item(x, point, field):
    """A value data item: the point's value of ``field`` with its interval and evidence."""
    value = _ok_value(point, field) if point is not None else None
    ci = interval_of(point["intervals"], field) if value is not None else None
    return {"x": x, "y": value, "yMin": significant(ci[0]) if ci else None,
            "yMax": significant(ci[1]) if ci else None, **_evidence(point)}


def _markers(entries, y=0):
    """Marker datasets, one per status, from (x, config label, status, reason) tuples, or
    (x, config label, status, reason, series) where the marker belongs to a series that is
    not one configuration (the page draws markers in a lane, a row per series)."""
    by_status = defaultdict(list)
    for x, label, status, reason, *series in entries:
        item = {"x": x, "y": y, "config": label, "status": status, "reason": reason}
        if series:
            item["series"] = series[0]
        by_status[status].append(item)
    datasets = []
    for status, (colour, style, meaning) in {**MARKER_STATUSES, **EXTRA_MARKERS}.items():
        if by_status.get(status):
            datasets.append({
                "kind": "marker",
                "type": "scatter",
                "status": status,
                "label": _status_label(status),
                "data": by_status[status],
                "pointStyle": style,
                "pointRadius": MARKER_RADIUS,
                "pointHoverRadius": MARKER_RADIUS + 2,
                "backgroundColor": colour,
                "borderColor": colour,
                "borderWidth": 2,
            })
    return datasets


def _status_label(status):
    if status == NO_BASELINE:
        return "No baseline"
    if status == INVALID:
        return "Invalid"
    return str(PointStatus(status).label)


def _failure(point, field=None):
    """(status, reason) when a point has no value to draw: it failed, or its measurement is
    invalid (the reason is then its verdict's reasons); else None. With ``field``, an invalid
    point that has no value of it at all (an imported summary has no decode speed) withholds
    nothing from that chart: no marker there."""
    if point is not None and point["status"] in MARKER_STATUSES:
        return point["status"], point["reason"] or _status_label(point["status"])
    if _is_ok(point) and point["validity"] == Validity.INVALID and (field is None or point[field] is not None):
        return INVALID, evidence.reasons_text(point["validity_reasons"]) or INVALID_MARKER[2]
    return None


def legend():
    return [
        {"status": status, "label": _status_label(status), "meaning": meaning,
         "pointStyle": style, "color": colour}
        for status, (colour, style, meaning) in {**MARKER_STATUSES, **EXTRA_MARKERS}.items()
    ]


def _shapes(configs):
    """Every (workload, prompt_tokens, concurrency) measured, in plan order."""
    order = {}
    for config in configs:
        for key, point in config.points.items():
            order[key] = min(order.get(key, point["position"]), point["position"])
    workload_first = {}
    for (workload, _, _), position in order.items():
        workload_first[workload] = min(workload_first.get(workload, position), position)
    return sorted(
        order,
        key=lambda k: (workload_first[k[0]], k[0], k[1] is not None, k[1] or 0, k[2]),
    )


def _point_label(shape, many_concurrencies):
    workload, prompt_tokens, concurrency = shape
    label = workload if prompt_tokens is None else f"{workload} {prompt_tokens}"
    return f"{label} c{concurrency}" if many_concurrencies else label


def _chart(chart_id, chart_type, title, x_label, y_label, datasets, labels=None, x_type="category",
           y_type="linear", **extra):
    chart = {
        "id": chart_id,
        "type": chart_type,
        "title": title,
        "x": {"label": x_label, "type": x_type},
        "y": {"label": y_label, "type": y_type, "beginAtZero": True},
        "datasets": datasets,
    }
    if labels is not None:
        chart["labels"] = labels
    chart.update(extra)
    return chart


# -- The charts ------------------------------------------------------------------------------
# Each family function lists its charts as Entry(family, id, title, build); ``build(id,
# title)`` makes the chart, and is only called for the charts an answer holds.

# ``metric``: the value the chart draws, to say why in words when it has none (build_charts'
# "omitted"); None for a chart of several (latency).
Entry = namedtuple("Entry", "family id title build group panel metric", defaults=(None, None, None))

DECODE_TITLE = "Decode speed per configuration"
SPEEDUP_TITLE = "Speedup over autoregressive at the same TP and point"


def decode_chart(configs, shapes, many, chart_id="decode_tok_s", title=DECODE_TITLE):
    labels = [_point_label(s, many) for s in shapes]
    datasets, failures = [], []
    for config in configs:
        data = []
        for shape, label in zip(shapes, labels):
            point = config.points.get(shape)
            data.append(_item(label, point, "decode_tok_s"))
            failure = _failure(point, "decode_tok_s")
            if failure:
                failures.append((label, config.label, *failure))
        datasets.append(config.dataset("bar", data))
    return _chart(
        chart_id, "bar", title, "workload and prompt length (tokens)",
        metric_label("decode_tok_s"), datasets + _markers(failures), labels=labels,
    )


def decode_samples(configs):
    """The per-request decode speeds of every drawable point of these configurations: one
    query, made once (the overview makes it whether or not it has a speedup chart, so that
    its query count does not depend on the sweep's methods)."""
    configs = getattr(configs, "parent", configs)  # a TP's subset shares its parent's
    if not hasattr(configs, "decode_samples"):
        points = [p for c in configs for p in c.points.values() if _measured(p)]
        configs.decode_samples = evidence.load_samples(points, "decode_tok_s")
    return configs.decode_samples


def speedup_chart(configs, shapes, many, chart_id="speedup", title=SPEEDUP_TITLE):
    labels = [_point_label(s, many) for s in shapes]
    # The baseline is the autoregressive run of the configuration's own sweep at its TP: in a
    # selection of runs from several sweeps, another sweep's run is no baseline.
    baselines = {(c.sweep_id, c.tp): c for c in configs if c.method == AUTOREGRESSIVE}
    datasets, failures = [], []
    samples = partial(decode_samples, configs)
    for config in configs:
        if config.method == AUTOREGRESSIVE:
            continue
        baseline = baselines.get((config.sweep_id, config.tp))
        data = []
        for shape, label in zip(shapes, labels):
            point = config.points.get(shape)
            base = baseline.points.get(shape) if baseline else None
            item = {"x": label, "y": None, "yMin": None, "yMax": None, **_evidence(point), "verdict": None,
                    "pValue": None, "verdictReason": "", "baselineN": None}
            if _measured(point) and _measured(base) and point["decode_tok_s"] and base["decode_tok_s"]:
                item.update(_speedup(point, base, samples(), baseline.label))
            data.append(item)
            failure = _failure(point, "decode_tok_s")
            if failure:
                failures.append((label, config.label, *failure))
            elif _is_ok(point) and point["decode_tok_s"] is not None and item["y"] is None:
                if baseline is None:
                    why = f"no autoregressive run at TP{config.tp} in sweep #{config.sweep_id}"
                elif base is None:
                    why = f"{baseline.label} has no point here"
                else:
                    detail = "no decode speed" if _is_ok(base) else base["status"]
                    if base["status"] in MARKER_STATUSES:
                        detail = base["reason"] or _status_label(base["status"])
                    elif _is_ok(base) and base["validity"] == Validity.INVALID:
                        detail = "invalid: " + (evidence.reasons_text(base["validity_reasons"]) or "no reason stored")
                    why = f"{baseline.label} is not ok here: {detail}"
                failures.append((label, config.label, NO_BASELINE, why))
        datasets.append(config.dataset("bar", data))
    return _chart(
        chart_id, "bar", title, "workload and prompt length (tokens)", "speedup (×)",
        datasets + _markers(failures), labels=labels, baseline=1.0,
    )


def _speedup(point, base, samples, baseline_label):
    """The speedup of ``point`` over the autoregressive ``base``: its value, the 95 %
    interval of the ratio of their medians and the significance test of their per-request
    decode speeds (the data item keys of the module docstring)."""
    a, b = samples.get(base["id"], []), samples.get(point["id"], [])
    interval = ratio_ci(a, b)
    valid = (base["validity"] == Validity.VALID, point["validity"] == Validity.VALID)
    unjudged = [f"{name} is {side['validity'] or 'not judged'}"
                for name, side, ok in (("the baseline", base, valid[0]), ("this point", point, valid[1])) if not ok]
    found = compare_samples(a, b, higher_is_better=True, alpha=evidence.alpha(), min_requests=evidence.min_requests(),
                            baseline_valid=valid[0], value_valid=valid[1], not_valid_reason="; ".join(unjudged))
    validity = "suspect" if Validity.SUSPECT in (base["validity"], point["validity"]) else (
        "valid" if all(valid) else "")
    reasons = []
    for prefix, side in (("", point), (f"baseline {baseline_label}: ", base)):
        text = evidence.reasons_text(side["validity_reasons"])
        if text:
            reasons.append(prefix + text)
    return {
        "y": significant(point["decode_tok_s"] / base["decode_tok_s"]),
        "yMin": significant(interval[0]) if interval else None,
        "yMax": significant(interval[1]) if interval else None,
        "validity": validity, "reasons": "; ".join(reasons), "verdict": found.verdict, "pValue": found.p_value,
        "verdictReason": found.reason, "baselineN": base["completed"],
    }


def _line_per_config(configs, xs_of, field):
    """Line datasets {x, y} per configuration plus failure entries, over ``xs_of`` shapes."""
    datasets, failures = [], []
    for config in configs:
        data = []
        for x, shape in xs_of:
            point = config.points.get(shape)
            if point is None:
                continue
            data.append(_item(x, point, field))
            failure = _failure(point, field)
            if failure:
                failures.append((x, config.label, *failure))
        if data:
            datasets.append(config.dataset("line", data))
    return datasets, failures


def prompt_length_chart(configs, xs_of, field, chart_id, title):
    datasets, failures = _line_per_config(configs, xs_of, field)
    return _chart(chart_id, "line", title, "prompt length (tokens)", metric_label(field),
                  datasets + _markers(failures), x_type="linear")


def prompt_length_charts(configs, shapes, many):
    """tok/s and TTFT against prompt tokens: per workload with prompt lengths (and concurrency)."""
    groups = defaultdict(list)
    for shape in shapes:
        workload, prompt_tokens, concurrency = shape
        if prompt_tokens is not None:
            groups[(workload, concurrency)].append((prompt_tokens, shape))
    entries = []
    for (workload, concurrency), xs_of in groups.items():
        suffix = f":c{concurrency}" if many else ""
        at = f" at concurrency {concurrency}" if many else ""
        for chart_id, field, title in (
            ("decode_vs_prompt", "decode_tok_s", "Decode speed against prompt length"),
            ("ttft_vs_prompt", "mean_ttft_ms", "Mean TTFT against prompt length"),
        ):
            entries.append(Entry("prompt_length", f"{chart_id}:{workload}{suffix}", f"{title}: {workload}{at}",
                                 partial(prompt_length_chart, configs, xs_of, field), metric=field))
    return entries


def latency_chart(configs, shape, chart_id, title):
    """TPOT and ITL median and p99 of one point, grouped per configuration."""
    labels = [name for _, name in LATENCY_SERIES]
    datasets, failures = [], []
    for config in configs:
        point = config.points.get(shape)
        if point is None:
            continue
        datasets.append(config.dataset("bar", [_item(label, point, field)
                                               for (field, _), label in zip(LATENCY_SERIES, labels)]))
        for (field, _), label in zip(LATENCY_SERIES, labels):
            failure = _failure(point, field)
            if failure:
                failures.append((label, config.label, *failure))
    return _chart(chart_id, "bar", title, "statistic", "latency (ms)", datasets + _markers(failures),
                  labels=labels)


def latency_charts(configs, shapes, many):
    """One chart per point."""
    entries = []
    for shape in shapes:
        point_label = _point_label(shape, many)
        entries.append(Entry("latency", f"latency:{point_label}", f"TPOT and ITL, median and p99: {point_label}",
                             partial(latency_chart, configs, shape)))
    return entries


def _accept_lines(configs, workload):
    """(method, tp) -> [(parameter value, mean accept length, failure, config)] of a workload."""
    lines = defaultdict(list)
    for config in configs:
        lookahead = _lookahead(config.method)
        if lookahead is None or lookahead.param not in config.params:
            continue
        points = [p for (w, _, _), p in config.points.items() if w == workload]
        if not points:
            continue
        values = [p["accept_length"] for p in points if _measured(p) and p["accept_length"] is not None]
        value = significant(sum(values) / len(values)) if values else None
        failed = [_failure(p, "accept_length") for p in points if _failure(p, "accept_length")]
        failure = failed[0] if value is None and failed else None
        lines[(config.method, config.tp)].append((config.params[lookahead.param], value, failure, config))
    return lines


def accept_length_chart(lines, chart_id, title):
    """Mean accept length per run against its DDTree budget / DFlash block size."""
    datasets, failures = [], []
    tps = defaultdict(list)
    for method, tp in sorted(lines):
        tps[method].append(tp)
    for (method, tp), entries in sorted(lines.items()):
        entries.sort(key=lambda e: _sort_value(e[0]))
        colour = shades(method, len(tps[method]))[tps[method].index(tp)]  # a shade per TP
        label = f"{method} TP{tp} ({_lookahead(method).label})"
        datasets.append({
            "kind": "value", "type": "line", "label": label,
            "method": method, "tp": tp, "parameter": _lookahead(method).param,
            "data": [{"x": x, "y": value, "config": config.label} for x, value, _, config in entries],
            "backgroundColor": colour, "borderColor": colour,
        })
        failures.extend((x, config.label, *failure, label) for x, _, failure, config in entries if failure)
    return _chart(chart_id, "line", title, "DDTree budget / DFlash block size (tokens)",
                  metric_label("accept_length"), datasets + _markers(failures), x_type="linear")


def accept_length_charts(configs, shapes, many):
    """Per workload that has speculative runs."""
    entries = []
    for workload in dict.fromkeys(shape[0] for shape in shapes):
        lines = _accept_lines(configs, workload)
        if lines:
            entries.append(Entry(
                OVERVIEW, f"accept_length:{workload}",
                f"Speculative accept length against DDTree budget / DFlash block size: {workload}",
                partial(accept_length_chart, lines), metric="accept_length",
            ))
    return entries


def concurrency_chart(configs, xs_of, chart_id, title):
    datasets, failures = _line_per_config(configs, xs_of, "output_throughput")
    return _chart(chart_id, "line", title, "concurrency (requests in flight)", metric_label("output_throughput"),
                  datasets + _markers(failures), x_type="linear")


def concurrency_charts(configs, shapes, many):
    """Output throughput against concurrency, per workload and prompt length."""
    if not many:
        return []
    groups = defaultdict(list)
    for shape in shapes:
        groups[(shape[0], shape[1])].append((shape[2], shape))
    entries = []
    for (workload, prompt_tokens), xs_of in groups.items():
        if len({x for x, _ in xs_of}) < 2:
            continue
        label = workload if prompt_tokens is None else f"{workload} {prompt_tokens}"
        entries.append(Entry("concurrency", f"throughput_vs_concurrency:{label}",
                             f"Output throughput against concurrency: {label}",
                             partial(concurrency_chart, configs, sorted(xs_of)), metric="output_throughput"))
    return entries


def overview_charts(configs, shapes, many):
    """Decode speed, and the speedup over autoregressive where there is both."""
    entries = [Entry(OVERVIEW, "decode_tok_s", DECODE_TITLE, partial(decode_chart, configs, shapes, many),
                     metric="decode_tok_s")]
    if any(c.method == AUTOREGRESSIVE for c in configs) and any(c.method != AUTOREGRESSIVE for c in configs):
        entries.append(Entry(OVERVIEW, "speedup", SPEEDUP_TITLE, partial(speedup_chart, configs, shapes, many),
                             metric="decode_tok_s"))
    return entries


# Families whose charts are drawn once per TP, side by side (small multiples), when the
# configurations have several: one chart of 23 configurations had a legend that ate its plot.
PER_TP = (overview_charts, prompt_length_charts, latency_charts, concurrency_charts)


def _subset(configs, tp):
    """The configurations of one TP, sharing what is loaded once for all (decode_samples)."""
    subset = Configs(c for c in configs if c.tp == tp)
    subset.parent = configs
    return subset


def _panels(family, configs, shapes, many):
    """``family``'s entries, one per TP (``id@TPn``, grouped under the id they share) when the
    configurations have several TPs, else as they are (each its own group). Every panel
    has the same x categories (``shapes``), so that they read alike."""
    tps = sorted({c.tp for c in configs})
    if len(tps) < 2:
        return [entry._replace(group=entry.id) for entry in family(configs, shapes, many)]
    per_tp = [(tp, family(_subset(configs, tp), shapes, many)) for tp in tps]
    order = {}
    for _, entries in per_tp:
        for entry in entries:
            order.setdefault(entry.id, len(order))
    panels = [
        entry._replace(id=f"{entry.id}@TP{tp}", title=f"{entry.title} · TP{tp}", group=entry.id, panel=f"TP{tp}")
        for tp, entries in per_tp for entry in entries
    ]
    return sorted(panels, key=lambda entry: order[entry.group])  # stable: TP order within a group


def chart_entries(configs):
    """Every chart of these configurations, in page order, not built yet."""
    shapes = _shapes(configs)
    if not shapes:
        return []
    # The concurrency is in a point's category where the sweep has several, and for an
    # imported point, which nothing else on the page describes.
    many = len({shape[2] for shape in shapes}) > 1 or any(c.imported for c in configs)
    entries = []
    for family in (overview_charts, prompt_length_charts, latency_charts, accept_length_charts, concurrency_charts):
        if family in PER_TP:
            entries.extend(_panels(family, configs, shapes, many))
        else:  # the accept-length lines are per TP already: one chart per workload, side by side
            entries.extend(entry._replace(group="accept_length") for entry in family(configs, shapes, many))
    return entries


class UnknownChart(LookupError):
    """A family or chart id that these runs do not have."""


def build_charts(sweep_id=None, run_ids=None, family=None, chart=None):
    """The comparison charts of a sweep, or of the given runs (in that order, from any
    sweeps), as Chart.js-ready dicts: the overview (default), every chart of ``family``, or
    the chart ``chart`` (a group id: all its TP panels). The other families are listed
    (ids and titles of their groups) in every answer. Raises UnknownChart for a family or
    chart id that is not there."""
    if family is not None and family != OVERVIEW and family not in FAMILIES:
        raise UnknownChart(f"no chart family “{family}” (there are {', '.join([OVERVIEW, *FAMILIES])})")
    configs = load(sweep_id=sweep_id, run_ids=run_ids)
    entries = chart_entries(configs)
    if chart is not None:
        chosen = [entry for entry in entries if chart in (entry.id, entry.group)]
        if not chosen:
            raise UnknownChart(f"no chart “{chart}” here")
    else:
        family = family or OVERVIEW
        chosen = [entry for entry in entries if entry.family == family]
        if family == OVERVIEW and entries:
            decode_samples(configs)
    built = [(entry, _built(entry)) for entry in chosen]
    listed, counts = defaultdict(dict), defaultdict(int)
    for entry in entries:
        if entry.family != OVERVIEW:
            counts[entry.family] += 1
            listed[entry.family].setdefault(entry.group, {"id": entry.group, "title": _group_title(entry)})
    return {
        "sweep": sweep_id,
        "legend": legend(),
        "configs": [config.identity() for config in configs],
        "families": [{"id": key, "title": title, "at_once": counts[key] <= FAMILY_AT_ONCE,
                      "charts": list(listed[key].values())} for key, title in FAMILIES.items() if listed[key]],
        "family": family if chart is None else None,
        "charts": [chart for _, chart in built if _drawable(chart)],
        # Charts with nothing to draw (no value, no marker: an import without decode speeds,
        # a sweep before its first point), named with why rather than drawn as empty axes.
        "omitted": [{"id": chart["id"], "title": chart["title"], "reason": why_not_drawn(configs, entry.metric)}
                    for entry, chart in built if not _drawable(chart)],
    }


# Values computed from request records, and what an imported file lacks without them.
FROM_REQUESTS = {
    "decode_tok_s": "the imported summaries have no per-request timings, which decode speed is computed from "
                    "(vllm bench serve writes them with --save-detailed, SGLang bench_serving with --output-details)",
}


def why_not_drawn(configs, metric):
    """Why a chart of ``metric`` has nothing to draw, in words: nothing measured yet, an
    import without the request records the value comes from, or no point with that value."""
    measured = [(config, point) for config in configs for point in config.points.values() if _is_ok(point)]
    if not measured:
        return "no point has been measured yet"
    if metric is None:
        return "no measured point has a value for it"
    if metric in FROM_REQUESTS and all(config.imported for config, _ in measured):
        return FROM_REQUESTS[metric]
    return f"no measured point has a {metric_label(metric)}"


def _drawable(chart):
    """Whether a chart has a value or a marker to draw."""
    return any(
        dataset["data"] if dataset["kind"] == "marker" else any(
            (item.get("y") if isinstance(item, dict) else item) is not None for item in dataset["data"])
        for dataset in chart["datasets"]
    )


def _group_title(entry):
    return entry.title.removesuffix(f" · {entry.panel}") if entry.panel else entry.title


def _built(entry):
    """An entry's chart, with the group it is drawn in (a row of TP panels) and its panel."""
    return {**entry.build(entry.id, entry.title), "family": entry.family, "group": entry.group,
            "groupTitle": _group_title(entry), "panel": entry.panel}


def every_chart(sweep_id=None, run_ids=None):
    """Every chart, overview and families, in page order (for tests and scripts: the page
    itself asks for a family when it is opened)."""
    configs = load(sweep_id=sweep_id, run_ids=run_ids)
    return [_built(entry) for entry in chart_entries(configs)]


def sweep_charts(sweep_id, family=None, chart=None):
    return build_charts(sweep_id=sweep_id, family=family, chart=chart)


def run_charts(run_ids, family=None, chart=None):
    return build_charts(run_ids=run_ids, family=family, chart=chart)
