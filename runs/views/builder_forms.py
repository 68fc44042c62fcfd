"""The builder's form view of a spec: the controls the server renders for a spec's data,
and how the values posted back edit that data.

The form is drawn from the spec's data (the "base", which travels with it as JSON), and
a control writes into the data only when its posted value differs from the one it was
drawn with: fields nobody touched keep their value as written, and keys the form does
not know are kept. A value that does not parse goes into the data as typed (a list that
is not all integers stays a string), so the spec's validator names what is wrong with
it at its field path. A new host or engine also takes out the TP sizes and methods it
cannot run, and the form says what went and why.
"""

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.models import EngineKind
from sweepcore import capacity
from sweepcore.gpus import gpus_text, host_text
from sweepcore.methods import methods_for
from sweepcore.metrics import LATENCY_NAMES, STABLE_METRICS, metric_label
from sweepcore.slo import SLO_KEYS
from sweepcore.spec import (
    DEFAULTS,
    FIELDS,
    METHOD_PARAMS,
    OPEN_LOOP_MAX_CONCURRENCY,
    OPTION_DEFAULTS,
    UNTIL_STABLE_KEYS,
    WORKLOAD_SYNTHETIC,
)

OPTION_FIELDS = (
    ("context_margin_tokens", "Context margin (tokens)"),
    ("retries", "Re-launches of a crashed run"),
    ("stall_timeout_s", "Stall timeout (s)"),
    ("first_token_timeout_s", "First-token timeout (s)"),
    ("cooldown_s", "Cooldown between search probes (s)"),
)
RETRY_CHOICES = (("no", "skip them"), ("all", "retry them all"), ("some", "retry the ones ticked in the plan"))
PACKING_CHOICES = (("exclusive", "one run per host at a time"), ("pack", "several runs per host, each on its own GPUs"))
LISTS = ("methods", "workloads", "exclude", "slo")  # what the form adds to and removes from (slo: a mapping)
NOT_EDITABLE = "{path} is not in a form the form can edit: edit it in the YAML view."
CLOSED_LOOP, OPEN_LOOP = "closed", "open"
LOOP_CHOICES = (
    (CLOSED_LOOP, "closed loop: clients that each send when their last answer ends"),
    (OPEN_LOOP, "open loop: requests arrive at a rate, whatever the server does"),
)
OPEN_LOOP_KEYS = ("request_rate", "burstiness", "max_concurrency")  # what a closed loop must not have
SEARCH_CHOICES = (
    ("", "off: measure the listed loads"),
    (capacity.REQUEST_RATE, "over request rate (an open loop)"),
    (capacity.CONCURRENCY, "over concurrency (a closed loop)"),
)
# The limits "+ Add limit" offers first: the two the README's example sets, then the rest.
SLO_ADD_ORDER = ("ttft_p99_ms", "tpot_p99_ms", *SLO_KEYS)
_INT = re.compile(r"-?\d+")
_DECIMAL = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


# --- values as the controls show them, and back -----------------------------------------


def text(value):
    """A scalar as a text control shows it."""
    if value is None:
        return ""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def list_text(value):
    """[1, 4, 8] -> "1, 4, 8"."""
    return ", ".join(text(v) for v in value) if isinstance(value, list) else text(value)


def parse_list(typed):
    """"1, 4, 8" -> [1, 4, 8]; anything that is not a list of integers goes as typed."""
    parts = [p for p in re.split(r"[\s,]+", typed.strip()) if p]
    return [int(p) for p in parts] if all(_INT.fullmatch(p) for p in parts) else typed.strip()


def number_text(value):
    """A number as a number field shows it: 2000.0 -> "2000" (the spec normalises limits and
    rates to floats; a field left alone writes nothing back, so the data keeps its 2000.0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return text(value)


def numbers_text(value):
    return ", ".join(number_text(v) for v in value) if isinstance(value, list) else text(value)


def parse_real(typed):
    """"64" -> 64, "0.5" -> 0.5, "" -> None, anything else as typed (the validator names it;
    "nan" and "inf" too, which float() would take)."""
    typed = typed.strip()
    if not typed:
        return None
    if _INT.fullmatch(typed):
        return int(typed)
    return float(typed) if _DECIMAL.fullmatch(typed) else typed


def parse_real_list(typed):
    """"0.5, 1, 2" -> [0.5, 1, 2]; anything that is not a list of numbers goes as typed."""
    parts = [p for p in re.split(r"[\s,]+", typed.strip()) if p]
    return [parse_real(p) for p in parts] if all(_DECIMAL.fullmatch(p) for p in parts) else typed.strip()


def parse_number(typed):
    """"64" -> 64, "" -> None (the field is left out), anything else as typed."""
    typed = typed.strip()
    if not typed:
        return None
    return int(typed) if _INT.fullmatch(typed) else typed


def rule_text(rule):
    """{method: ddtree, budget: 64, tp: 1} -> "method=ddtree budget=64 tp=1"."""
    return " ".join(f"{k}={text(v)}" for k, v in rule.items()) if isinstance(rule, dict) else list_text(rule)


def parse_rule(typed):
    rule = {}
    for part in re.split(r"[\s,]+", typed.strip()):
        if part:
            key, _, value = part.partition("=")
            rule[key] = int(value) if value.isdigit() else value
    return rule


def ordered(data):
    """The spec's fields in the documented order, then any others as they came."""
    return {**{k: data[k] for k in FIELDS if k in data}, **{k: v for k, v in data.items() if k not in FIELDS}}


# --- list entries as the form edits them ------------------------------------------------


def method_entry(item):
    """(name, params) of a methods entry, or None when it is not a name or {name: params}."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, dict) and len(item) == 1:
        ((name, params),) = item.items()
        return name, dict(params) if isinstance(params, dict) else {}
    return None


def method_item(name, params):
    params = {k: v for k, v in params.items() if v is not None}
    return {name: params} if params or METHOD_PARAMS.get(name) else name


def workload_entry(item):
    """(name, prompt_tokens or None) of a workloads entry, or None when the form cannot edit it."""
    if isinstance(item, str):
        return item, None
    if isinstance(item, dict) and len(item) == 1:
        ((name, body),) = item.items()
        return name, body.get("prompt_tokens") if isinstance(body, dict) else None
    return None


def workload_item(name, lengths, kind):
    if kind != WORKLOAD_SYNTHETIC and lengths in (None, []):
        return name
    return {name: {"prompt_tokens": [] if lengths is None else lengths}}


def tp_choices(host, current):
    """Powers of two up to the host's GPU count, the count itself, and any size already chosen."""
    most = max(host.gpu_count if host else 1, 1)
    sizes = {most, *(n for n in current if isinstance(n, int) and not isinstance(n, bool))}
    n = 1
    while n <= most:
        sizes.add(n)
        n *= 2
    return sorted(sizes)


def host_of(data, catalog):
    """The host the form is drawn for: ``host``, or the first of a shared ``hosts`` list."""
    shared = data.get("hosts") if isinstance(data.get("hosts"), list) else []
    return catalog.hosts.get(data.get("host") or (text(shared[0]) if shared else None))


def tp_hint(host):
    if host is None:
        return "choose a host first"
    return f"up to the host's {gpus_text(host.gpu_count)}" if host.gpu_count else "TP 1 only on a CPU host"


def kind_label(kind):
    """An engine kind in words ("llama.cpp"), or as stored when the models do not know it."""
    return EngineKind(kind).label if kind in EngineKind.values else text(kind)


def _them(names):
    return "it" if len(names) == 1 else "them"


def fit_tp(data, host):
    """Take out the TP sizes the host cannot give (a CPU host: all but 1); returns what
    went and why, or "". A list that is not all integers is left to the validator."""
    tp = data.get("tp", DEFAULTS["tp"])
    if not isinstance(tp, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in tp):
        return ""
    most = max(host.gpu_count, 1)
    dropped = [n for n in tp if n > most]
    if not dropped:
        return ""
    kept = [n for n in tp if n <= most]
    data["tp"] = kept or [most]  # a run needs one size: the largest the host has
    why = (f"host {host.name} has {gpus_text(host.gpu_count)}" if host.gpu_count
           else "a CPU host runs one server process per run, at TP 1")
    instead = f"; TP{most} instead" if not kept and host.gpu_count else ""
    return f"removed {', '.join(f'TP{n}' for n in dropped)}: {why}{instead}"


def fit_methods(data, engine):
    """Take out the methods the engine cannot run; returns what went and why, or "". A name
    the spec does not know stays, for the validator to name; when nothing is left, the
    engine's first method (autoregressive) is put in."""
    items = data.get("methods")
    if not isinstance(items, list):
        return ""

    def cannot(item):
        entry = method_entry(item)
        return entry is not None and entry[0] in METHOD_PARAMS and entry[0] not in engine.methods

    dropped = list(dict.fromkeys(method_entry(item)[0] for item in items if cannot(item)))
    if not dropped:
        return ""
    kept, instead = [item for item in items if not cannot(item)], ""
    if not kept and engine.methods:
        kept, instead = [method_item(engine.methods[0], {})], f"; {engine.methods[0]} instead"
    data["methods"] = kept
    runnable = methods_for(engine.kind)
    reasons = []
    for names, why in (([n for n in dropped if n not in runnable], f"{kind_label(engine.kind)} cannot run"),
                       ([n for n in dropped if n in runnable], f"engine {engine.name} is not set up to run")):
        if names:
            reasons.append(f"removed {', '.join(names)}: {why} {_them(names)}")
    return "; ".join(reasons) + instead


def fit_to_host_and_engine(before, data, catalog):
    """After the host or the engine changed: what the new host or engine cannot run is taken
    out of the data, so that the plan takes the spec as it now is. Returns a note for each
    path where something went ({"tp": ..., "methods": ...})."""
    if all(before.get(key) == data.get(key) for key in ("host", "hosts", "engine")):
        return {}
    host, engine = host_of(data, catalog), catalog.engines.get(data.get("engine"))
    notes = {"tp": fit_tp(data, host) if host else "", "methods": fit_methods(data, engine) if engine else ""}
    return {path: note for path, note in notes.items() if note}


def set_key(data, key, value):
    if value is None:
        data.pop(key, None)
    else:
        data[key] = value


def set_option(data, key, value):
    options = data.get("options") if isinstance(data.get("options"), dict) else {}
    set_key(options, key, value)
    set_key(data, "options", options or None)


def set_steady_state(data, key, value):
    shares = data.get("steady_state") if isinstance(data.get("steady_state"), dict) else {}
    set_key(shares, key, value)
    set_key(data, "steady_state", shares or None)


def entries(data, key):
    return data.get(key) if isinstance(data.get(key), list) else []


# --- the form's parts -------------------------------------------------------------------


class _ErrorSlot:
    """Something drawn with a spec path shows that path's errors in an element of its own."""

    @property
    def slot(self):
        """The id of the element that shows this thing's errors."""
        return "fe-" + re.sub(r"[^A-Za-z0-9_-]+", "-", self.path)


@dataclass
class Control(_ErrorSlot):
    """One control: ``id`` is also its POST name; ``path`` is the spec path its errors name.
    ``write(data, posted)`` puts a changed value into the data."""

    id: str
    path: str
    label: str
    write: Callable
    value: object = ""  # the text shown, the option selected, or the list of checks ticked
    kind: str = "text"  # text | select | checks
    choices: list = field(default_factory=list)  # (value, text) of a select's options or of checks
    placeholder: str = ""
    hint: str = ""
    bare: bool = False  # no label of its own (inside a row); ``label`` is its aria-label
    inline: bool = False  # a labelled field inside a row
    rerender: bool = False  # a change that changes the form itself: the server draws it again
    param: str = ""
    note: str = ""  # what the last edit changed here by itself, and why
    errors: list = field(default_factory=list)

    def posted(self, post):
        return post.getlist(self.id) if self.kind == "checks" else post.get(self.id)


@dataclass
class Row(_ErrorSlot):
    """A list entry (a method, a workload, an exclusion): its controls and a Remove button."""

    path: str
    key: str  # the list it is an entry of
    index: int
    controls: list
    cls: str = ""
    note: str = ""
    editable: bool = True
    errors: list = field(default_factory=list)


@dataclass
class Group:
    """Controls side by side (``row``) or one under the other; with a ``summary``, folded
    away under it (``open``: unfolded, as when they hold values)."""

    controls: list
    row: bool = True
    summary: str = ""
    open: bool = False


@dataclass
class Section(_ErrorSlot):
    title: str
    blocks: list
    path: str = ""
    hint: str = ""
    add: str = ""  # the list "+ Add" appends to
    add_label: str = ""
    add_cls: str = "small"
    note: str = ""  # what the last edit changed here by itself, and why
    errors: list = field(default_factory=list)


def _select(id, path, label, names, value, write, **kw):
    names = list(names)
    if value not in (None, "") and value not in names:
        names.insert(0, value)  # a name the catalog does not know still shows, to be corrected
    choices = ([("", "— choose —")] if value in (None, "") else []) + [(text(n), text(n)) for n in names]
    return Control(id, path, label, write, value=text(value), kind="select", choices=choices, **kw)


def _basics(data, catalog):
    shared = data.get("hosts") if isinstance(data.get("hosts"), list) else []
    host = host_of(data, catalog)
    engine = catalog.engines.get(data.get("engine"))
    model = catalog.models.get(data.get("model"))
    current_tp = data.get("tp", DEFAULTS["tp"])
    current_tp = current_tp if isinstance(current_tp, list) else []

    def name_of(key, blank_deletes):
        return lambda d, v: set_key(d, key, None if blank_deletes and not v else v)

    def write_tp(d, ticked):
        d["tp"] = sorted(int(v) for v in ticked if v.isdigit())

    return Section("Sweep", [
        Group([
            Control("f-name", "name", "Name", name_of("name", False), value=text(data.get("name"))),
            Control("f-description", "description", "Description", name_of("description", True),
                    value=text(data.get("description"))),
        ], row=False),
        Group([
            _select("f-host", "host", "Host", catalog.hosts, data.get("host"), name_of("host", True), rerender=True,
                    hint=(host_text(host.gpu_count, host.gpu_model) if host else "")
                    + (f"; shared with hosts: {', '.join(map(text, shared))} (edit in YAML)" if shared else "")),
            _select("f-engine", "engine", "Engine", [n for n, e in catalog.engines.items() if e.launchable],
                    data.get("engine"), name_of("engine", True),
                    rerender=True, hint=kind_label(engine.kind) if engine else ""),
            _select("f-model", "model", "Model", catalog.models, data.get("model"), name_of("model", True),
                    rerender=True, hint=f"context {model.context_length} tokens" if model else ""),
        ]),
        Group([
            Control("f-tp", "tp", "Tensor-parallel sizes", write_tp, kind="checks",
                    value=[str(n) for n in tp_choices(host, current_tp) if n in current_tp],
                    choices=[(str(n), f"TP{n}") for n in tp_choices(host, current_tp)],
                    hint=tp_hint(host)),
        ], row=False),
    ])


def _method_row(i, item, offered):
    path = f"methods[{i}]"
    entry = method_entry(item)
    if entry is None:
        return Row(path, "methods", i, [], cls="method-row", note=NOT_EDITABLE.format(path=path), editable=False)
    name, params = entry

    def write_name(d, v):
        defaults = {p.name: p.default for p in METHOD_PARAMS.get(v, ()) if not p.swept and p.default is not None}
        d["methods"][i] = method_item(v, defaults)

    def write_param(param):
        def write(d, v):
            current = method_entry(d["methods"][i])
            if current is None or current[0] != name:  # the method was changed in the same post
                return
            if param.swept and param.default is not None and not v.strip():
                current[1][param.name] = None  # left empty: the method's default (method_item drops it)
            else:
                current[1][param.name] = parse_list(v) if param.swept else parse_number(v)
            d["methods"][i] = method_item(name, current[1])

        return write

    controls = [_select(f"f-method-{i}", path, f"Method {i + 1}", offered, name, write_name, bare=True, rerender=True)]
    for p in METHOD_PARAMS.get(name, ()):
        controls.append(Control(
            f"f-method-{i}-{p.name}", f"{path}.{name}.{p.name}",
            p.name.replace("_", " ") + (" (list)" if p.swept else ""), write_param(p),
            value=list_text(params.get(p.name)) if p.swept else text(params.get(p.name)),
            placeholder=text(p.default) if p.default is not None else "e.g. 8, 12, 15", inline=True, param=p.name,
        ))
    return Row(path, "methods", i, controls, cls="method-row")


def _methods(data, catalog):
    engine = catalog.engines.get(data.get("engine"))
    offered = list(engine.methods) if engine else list(METHOD_PARAMS)
    rows = [_method_row(i, item, offered) for i, item in enumerate(entries(data, "methods"))]
    return Section("Methods", rows, path="methods", add="methods", add_label="+ Add method", add_cls="small add-method")


def _workload_row(i, item, catalog):
    path = f"workloads[{i}]"
    entry = workload_entry(item)
    if entry is None:
        return Row(path, "workloads", i, [], cls="workload-row", note=NOT_EDITABLE.format(path=path), editable=False)
    name, lengths = entry
    workload = catalog.workloads.get(name)
    kind = workload.kind if workload else ""

    def write_name(d, v):
        d["workloads"][i] = workload_item(v, None, getattr(catalog.workloads.get(v), "kind", ""))

    def write_lengths(d, v):
        if workload_entry(d["workloads"][i]) == entry:  # not renamed in the same post
            d["workloads"][i] = workload_item(name, parse_list(v), kind)

    controls = [_select(f"f-workload-{i}", path, f"Workload {i + 1}", catalog.workloads, name, write_name,
                        bare=True, rerender=True)]
    note = ""
    if kind == WORKLOAD_SYNTHETIC or lengths is not None:
        controls.append(Control(f"f-workload-{i}-prompt_tokens", f"{path}.{name}.prompt_tokens",
                                "prompt tokens (list)", write_lengths, value=list_text(lengths),
                                placeholder="e.g. 1000, 4000, 16000", inline=True))
    elif kind:
        note = f"{kind} prompts"
    return Row(path, "workloads", i, controls, cls="workload-row", note=note)


def _workloads(data, catalog):
    rows = [_workload_row(i, item, catalog) for i, item in enumerate(entries(data, "workloads"))]
    return Section("Workloads", rows, path="workloads", add="workloads", add_label="+ Add workload",
                   add_cls="small add-workload")


def search_body(data):
    """The ``search: {max_goodput: {...}}`` body the form edits, or None (no search, or one
    in a shape the form cannot edit)."""
    search = data.get("search")
    if isinstance(search, dict) and list(search) == ["max_goodput"] and isinstance(search["max_goodput"], dict):
        return search["max_goodput"]
    return None


def search_metric(data):
    """The load a search varies (request_rate or concurrency), or "" when there is none."""
    metric = (search_body(data) or {}).get("metric")
    return metric if metric in capacity.SEARCH_METRICS else ""


def loop_kind(data):
    """Open loop when the spec lists rates (an empty list too: the user is to fill it in) or
    searches over them; closed loop otherwise."""
    if data.get("request_rate") is not None or search_metric(data) == capacity.REQUEST_RATE:
        return OPEN_LOOP
    return CLOSED_LOOP


def switch_loop(data, kind):
    """Make the data the other kind of loop. The keys of the loop left would make the spec
    invalid, so they go; an open loop gets an empty list of rates, for the validator to ask
    for them (no rate is made up)."""
    if kind == OPEN_LOOP:
        data.pop("concurrency", None)
        if data.get("request_rate") is None and not search_metric(data):
            data["request_rate"] = []
    else:
        for key in OPEN_LOOP_KEYS:
            data.pop(key, None)


def _load(data):
    kind, searched = loop_kind(data), search_metric(data)

    def write(key, parse):
        # A list of the other loop's kind is not written: the loop was switched in the same post.
        def write_key(d, v):
            if loop_kind(d) == kind:
                set_key(d, key, parse(v))

        return write_key

    def write_kind(d, v):
        if v in (OPEN_LOOP, CLOSED_LOOP):
            switch_loop(d, v)

    def concurrency(v):
        return parse_list(v) if v.strip() else None

    def rates(v):
        if v.strip():
            return parse_real_list(v)
        return None if searched else []  # emptied without a search: still an open loop, with no rates yet

    def shown(key, own_kind):
        # A list the loop (or the search, which picks the loads) does not take is drawn only
        # while the data has it, for the validator's "remove it" to show at it and the field
        # to be emptied.
        return key in data or (not searched and kind == own_kind)

    controls = []
    if not searched:
        controls.append(Control("f-loop", "load", "Load", write_kind, value=kind, kind="select",
                                choices=list(LOOP_CHOICES), rerender=True))
    if shown("concurrency", CLOSED_LOOP):
        controls.append(Control("f-concurrency", "concurrency", "Concurrency (list)", write("concurrency", concurrency),
                                value=list_text(data.get("concurrency")),
                                placeholder=list_text(DEFAULTS["concurrency"])))
    if shown("request_rate", OPEN_LOOP):
        controls.append(Control("f-request_rate", "request_rate", "Request rates (req/s, list)",
                                write("request_rate", rates), value=numbers_text(data.get("request_rate")),
                                placeholder="e.g. 0.5, 1, 2, 4", hint="Poisson arrivals at each rate"))
    if kind == OPEN_LOOP:
        controls += [
            Control("f-burstiness", "burstiness", "Burstiness", write("burstiness", parse_real),
                    value=number_text(data.get("burstiness")), placeholder=number_text(DEFAULTS["burstiness"]),
                    hint="gamma shape of the gaps: 1 Poisson, below 1 burstier"),
            Control("f-max_concurrency", "max_concurrency", "Most requests in flight",
                    write("max_concurrency", parse_number), value=text(data.get("max_concurrency")),
                    placeholder=str(OPEN_LOOP_MAX_CONCURRENCY)),
        ]
    timing = Control("f-duration_s", "duration_s", "Duration per point (s)",
                     lambda d, v: set_key(d, "duration_s", parse_real(v)), value=number_text(data.get("duration_s")),
                     hint="optional: send for this long instead of a number of requests")
    hint = ""
    if searched:
        hint = {capacity.REQUEST_RATE: "The capacity search picks the request rates (an open loop).",
                capacity.CONCURRENCY: "The capacity search picks the concurrency levels (a closed loop)."}[searched]
    shares = data.get("steady_state") if isinstance(data.get("steady_state"), dict) else {}
    steady = [
        Control(f"f-steady_state-{key}", f"steady_state.{key}", label,
                lambda d, v, key=key: set_steady_state(d, key, parse_real(v)), value=number_text(shares.get(key)),
                placeholder="0", hint=hint_text)
        for key, label, hint_text in (
            ("skip_first", "Leave out the first share of requests",
             "e.g. 0.2: sent under the load while the batch fills, not in the statistics"),
            ("skip_last", "Leave out the last share of requests", "e.g. 0.1: while the batch drains"),
        )
    ]
    return Section("Load", [
        Group([*controls, timing]),
        Group([
            Control(f"f-{key}", key, label, lambda d, v, key=key: set_key(d, key, parse_number(v)),
                    value=text(data.get(key)), placeholder=text(DEFAULTS[key]))
            for key, label in (("max_new_tokens", "Max new tokens"), ("requests_per_point", "Requests per point"),
                               ("repeats", "Repeats of the load per point"), ("warmup_requests", "Warmup requests"))
        ]),
        Group(steady),
    ], hint=hint)


def slo_label(key):
    """"ttft_p99_ms" -> "p99 TTFT (ms)"; a key the spec does not know as it is."""
    if key not in SLO_KEYS:
        return text(key)
    latency, level, _ = key.split("_")
    return f"{level} {LATENCY_NAMES[latency]} (ms)"


def _slo_row(i, key, limit, taken):
    path = f"slo.{key}"

    def write_key(d, v):
        limits = d.get("slo")
        if list(limits)[i] != key or v in limits:  # a limit another row has is not offered
            return
        d["slo"] = {(v if k == key else k): value for k, value in limits.items()}

    def write_limit(d, v):
        limits = d.get("slo")
        limits[list(limits)[i]] = parse_real(v)  # by position: the row may be renamed in the same post

    offered = [k for k in SLO_KEYS if k == key or k not in taken]
    if key not in SLO_KEYS:
        offered.insert(0, key)  # a key the spec does not know still shows, to be corrected
    return Row(path, "slo", i, [
        Control(f"f-slo-{i}", path, f"Limit {i + 1}", write_key, value=text(key), kind="select",
                choices=[(text(k), slo_label(k)) for k in offered], bare=True, rerender=True),
        Control(f"f-slo-{i}-ms", path, f"{slo_label(key)}, at most", write_limit, value=number_text(limit),
                placeholder="e.g. 2000", bare=True),
    ], cls="slo-row")


def _slo(data):
    limits = {} if data.get("slo") is None else data["slo"]
    if isinstance(limits, dict):
        rows = [_slo_row(i, key, limit, limits) for i, (key, limit) in enumerate(limits.items())]
        more = len(limits) < len(SLO_KEYS)
    else:
        rows, more = [Row("slo", "slo", 0, [], note=NOT_EDITABLE.format(path="slo"), editable=False)], False
    return Section("SLO", rows, path="slo", add="slo" if more else "", add_label="+ Add limit",
                   hint="Latency limits a request must meet: each point gets its goodput (requests per second "
                        "that met them all) and the share that did.")


def _search(data):
    search = data.get("search")
    body = search_body(data)
    if search is not None and body is None:
        row = Row("search", "search", 0, [], note=NOT_EDITABLE.format(path="search"), editable=False)
        return Section("Capacity search", [row], path="search")
    body = body or {}
    metric = search_metric(data)
    path = "search.max_goodput"

    def write_metric(d, v):
        if not v:
            d.pop("search", None)
            if metric == capacity.REQUEST_RATE:
                switch_loop(d, OPEN_LOOP)  # the loads it picked were rates: the open loop stays
            return
        current = search_body(d) or {}
        d["search"] = {"max_goodput": _search_ordered({**current, "metric": v})}
        # The search picks the loads: the lists go, and with them the other loop's keys.
        d.pop("concurrency", None)
        d.pop("request_rate", None)
        if v == capacity.CONCURRENCY:
            switch_loop(d, CLOSED_LOOP)

    def write(key, parse):
        def write_key(d, v):
            current = search_body(d)
            if current is None:
                return  # turned off in the same post: its numbers are not written
            current[key] = parse(v)
            if current[key] is None:
                del current[key]
            d["search"] = {"max_goodput": _search_ordered(current)}

        return write_key

    controls = [Control("f-search-metric", f"{path}.metric", "Search the highest load that meets the SLO",
                        write_metric, value=text(body.get("metric", "")), kind="select",
                        choices=_search_choices(body.get("metric")), rerender=True)]
    blocks = [Group(controls)]
    if body:  # its numbers are drawn with a metric the validator refuses too, for their own errors
        rates = metric != capacity.CONCURRENCY
        unit = " (req/s)" if rates else ""
        blocks.append(Group([
            Control("f-search-low", f"{path}.low", f"Lowest {'rate' if rates else 'concurrency'}{unit}",
                    write("low", parse_real), value=number_text(body.get("low")), placeholder="0.25" if rates else "1"),
            Control("f-search-high", f"{path}.high", f"Highest {'rate' if rates else 'concurrency'}{unit}",
                    write("high", parse_real), value=number_text(body.get("high")), placeholder="64" if rates else "128"),
            Control("f-search-resolution", f"{path}.resolution",
                    "Resolution (relative: 0.1 for 10 %)" if rates else "Resolution (requests)",
                    write("resolution", parse_real), value=number_text(body.get("resolution")),
                    placeholder=number_text(capacity.DEFAULT_RESOLUTION[capacity.REQUEST_RATE if rates
                                                                         else capacity.CONCURRENCY])),
        ]))
        advanced = [
            Control("f-search-saturation", f"{path}.saturation", "Saturated below this throughput growth",
                    write("saturation", parse_real), value=number_text(body.get("saturation")),
                    placeholder=number_text(capacity.DEFAULT_SATURATION),
                    hint="relative, for a doubled load (0.05 for 5 %)"),
            Control("f-search-max_probes", f"{path}.max_probes", "Most probes per run",
                    write("max_probes", parse_number), value=text(body.get("max_probes")),
                    placeholder=str(capacity.DEFAULT_MAX_PROBES)),
        ]
        blocks.append(Group(advanced, summary="Advanced", open=any(c.value for c in advanced)))
    return Section("Capacity search", blocks, path="search",
                   hint="Per run, from the lowest load: double it while the SLO holds, then bisect to the "
                        "resolution. Needs an SLO and one workload at one prompt length.")


def _search_choices(metric):
    choices = list(SEARCH_CHOICES)
    if metric not in (None, *capacity.SEARCH_METRICS):
        choices.insert(1, (text(metric), text(metric)))  # shown to be corrected
    return choices


def _search_ordered(body):
    return {k: body[k] for k in capacity.SEARCH_KEYS if k in body} | {
        k: v for k, v in body.items() if k not in capacity.SEARCH_KEYS}


def parse_fraction(typed):
    """"0.05" -> 0.05, "" -> None, anything else as typed (the validator names it)."""
    typed = typed.strip()
    if not typed:
        return None
    try:
        return float(typed)
    except ValueError:
        return typed


def _until_stable(data):
    """The adaptive stop: off (no metric chosen), or a metric, its interval's relative
    half-width and the request bounds."""
    until = data.get("until_stable") if isinstance(data.get("until_stable"), dict) else {}

    def write(key, parse):
        def write_key(d, v):
            current = d.get("until_stable") if isinstance(d.get("until_stable"), dict) else {}
            if key == "metric" and not v:
                d.pop("until_stable", None)  # off
                return
            if not current and key != "metric":
                return  # no metric chosen: the rule is off, its numbers are not written
            current[key] = parse(v)
            if current[key] is None:
                del current[key]
            d["until_stable"] = {k: current[k] for k in UNTIL_STABLE_KEYS if k in current} | {
                k: v for k, v in current.items() if k not in UNTIL_STABLE_KEYS}

        return write_key

    metric = until.get("metric", "")
    return Section("Until stable", [Group([
        Control("f-until_stable-metric", "until_stable.metric", "Send until stable on", write("metric", str),
                value=metric if isinstance(metric, str) else text(metric), kind="select",
                choices=[("", "off: send requests per point"), *((m, metric_label(m)) for m in STABLE_METRICS)]),
        Control("f-until_stable-rel_ci", "until_stable.rel_ci", "95 % interval within ± (fraction of the median)",
                write("rel_ci", parse_fraction), value=text(until.get("rel_ci")), placeholder="0.05"),
        Control("f-until_stable-min_requests", "until_stable.min_requests", "At least (requests)",
                write("min_requests", parse_number), value=text(until.get("min_requests")), placeholder="5"),
        Control("f-until_stable-max_requests", "until_stable.max_requests", "At most (requests)",
                write("max_requests", parse_number), value=text(until.get("max_requests")), placeholder="50"),
    ])], path="until_stable",
        hint="Instead of a fixed number of requests, keep sending until the metric's 95 % interval is "
             "this narrow, or until the most requests were sent.")


def _exclusions(data):
    def write(i):
        def write_rule(d, v):
            d["exclude"][i] = parse_rule(v)

        return write_rule

    rows = [
        Row(f"exclude[{i}]", "exclude", i, [Control(f"f-exclude-{i}", f"exclude[{i}]", f"Exclusion {i + 1}", write(i),
                                                    value=rule_text(rule), placeholder="method=ddtree budget=64 tp=1",
                                                    bare=True)])
        for i, rule in enumerate(entries(data, "exclude"))
    ]
    return Section("Exclusions", rows, path="exclude",
                   hint="Configurations not to run, as key=value pairs: method, tp and method parameters.",
                   add="exclude", add_label="+ Add exclusion")


def _options(data):
    options = data.get("options") if isinstance(data.get("options"), dict) else {}
    retry = options.get("retry_quarantined")

    def write_retry(d, v):
        if v == "all":
            set_option(d, "retry_quarantined", True)
        elif v == "some":
            set_option(d, "retry_quarantined", retry if isinstance(retry, list) else [])
        else:
            set_option(d, "retry_quarantined", None)

    def write(key):
        parse = parse_real if key == "cooldown_s" else parse_number  # a cooldown may be a fraction of a second
        return lambda d, v: set_option(d, key, parse(v))

    def write_packing(d, v):
        if v == OPTION_DEFAULTS["packing"] and "packing" not in options:
            return  # the default, left alone: nothing written
        set_option(d, "packing", v or None)

    retry_value = "all" if retry is True else "some" if isinstance(retry, list) and retry else "no"
    return Section("Options", [Group([
        Control("f-retry_quarantined", "options.retry_quarantined", "Quarantined configurations", write_retry,
                value=retry_value, kind="select", choices=list(RETRY_CHOICES)),
        Control("f-option-packing", "options.packing", "Runs on a host", write_packing,
                value=text(options.get("packing", OPTION_DEFAULTS["packing"])), kind="select",
                choices=list(PACKING_CHOICES)),
        *(Control(f"f-option-{key}", f"options.{key}", label, write(key), value=number_text(options.get(key)),
                  placeholder=text(OPTION_DEFAULTS[key]))
          for key, label in OPTION_FIELDS),
    ])], path="options")


class SpecForm:
    """The form of one spec's data against a catalog; ``notes``: what an edit took out by
    itself, by path, shown where it was (see ``fit_to_host_and_engine``)."""

    def __init__(self, data, catalog, notes=None):
        self.data = data
        self.catalog = catalog
        self.sections = [
            _basics(data, catalog), _methods(data, catalog), _workloads(data, catalog), _load(data), _slo(data),
            _search(data), _until_stable(data), _exclusions(data), _options(data),
        ]
        self.fit_notes = {}  # those of the last ``edited``
        shown = self.with_path()
        for path, note in (notes or {}).items():
            if path in shown:
                shown[path].note = note

    def controls(self):
        for section in self.sections:
            for block in section.blocks:
                yield from block.controls

    def with_path(self):
        """Everything that shows the errors of a path, by path (the first one drawn wins)."""
        found = {}
        for section in self.sections:
            for thing in (section, *section.blocks, *(c for b in section.blocks for c in b.controls)):
                if getattr(thing, "path", "") and thing.path not in found:
                    found[thing.path] = thing
        return found

    def edited(self, post):
        """The data with the posted values of the controls that changed; a new host or engine
        also takes out what it cannot run (``fit_notes`` say what)."""
        data = copy.deepcopy(self.data)
        for control in self.controls():
            posted = control.posted(post)
            if posted is not None and posted != control.value:
                control.write(data, posted)
        self.fit_notes = fit_to_host_and_engine(self.data, data, self.catalog)
        return ordered(data)

    def place(self, errors):
        """Put each error on the nearest thing that shows its path or a parent of it; returns
        the errors placed nowhere."""
        targets = self.with_path()
        for thing in targets.values():
            thing.errors = []
        unplaced = []
        for error in errors:
            path = error["path"]
            while path and path not in targets:
                path = parent_path(path)
            if path:
                targets[path].errors.append({**error, "shown_path": error["path"] if path != error["path"] else ""})
            else:
                unplaced.append(error)
        return unplaced


def parent_path(path):
    """"methods[2].ddtree.budget" -> "methods[2].ddtree" -> "methods[2]" -> "methods" -> ""."""
    m = re.fullmatch(r"(.*)(\.[^.\[\]]+|\[\d+\])", path)
    return m.group(1) if m else ""


def add_entry(data, key, catalog):
    """``+ Add``: a new entry at the end of a list, with the first thing the catalog offers."""
    items = list(entries(data, key))
    if key == "methods":
        engine = catalog.engines.get(data.get("engine"))
        offered = list(engine.methods) if engine else list(METHOD_PARAMS)
        items.append(method_item(offered[0] if offered else "autoregressive", {}))
    elif key == "workloads":
        items.append(next(iter(catalog.workloads), ""))
    elif key == "slo":
        add_limit(data)
        return
    else:
        items.append({})
    data[key] = items


def add_limit(data):
    """``+ Add limit``: the first latency the SLO does not limit yet, with no number: the
    validator asks for one at its field."""
    limits = data.get("slo") if isinstance(data.get("slo"), dict) else {}
    key = next((k for k in SLO_ADD_ORDER if k not in limits), None)
    if key is not None:
        data["slo"] = {**limits, key: None}


def remove_entry(data, key, index):
    if key == "slo":
        limits = data.get("slo") if isinstance(data.get("slo"), dict) else {}
        set_key(data, "slo", {k: v for i, (k, v) in enumerate(limits.items()) if i != index} or None)
        return
    items = list(entries(data, key))
    if 0 <= index < len(items):
        del items[index]
    set_key(data, key, items if items or key != "exclude" else None)


def retry_ticked(data, shown, ticked):
    """options.retry_quarantined after the plan's "retry anyway" ticks: the configurations
    ticked, and any others the list named (true names every one shown)."""
    options = data.get("options") if isinstance(data.get("options"), dict) else {}
    before = options.get("retry_quarantined")
    before = shown if before is True else before if isinstance(before, list) else []
    chosen = [rule for rule in before if rule not in shown] + ticked
    set_option(data, "retry_quarantined", chosen or None)
