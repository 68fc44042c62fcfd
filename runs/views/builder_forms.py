"""The builder's form view of a spec: the controls the server renders for a spec's data,
and how the values posted back edit that data.

The form is drawn from the spec's data (the "base", which travels with it as JSON), and
a control writes into the data only when its posted value differs from the one it was
drawn with: fields nobody touched keep their value as written, and keys the form does
not know are kept. A value that does not parse goes into the data as typed (a list that
is not all integers stays a string), so the spec's validator names what is wrong with
it at its field path.
"""

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from sweepcore.metrics import STABLE_METRICS, metric_label
from sweepcore.spec import DEFAULTS, FIELDS, METHOD_PARAMS, OPTION_DEFAULTS, UNTIL_STABLE_KEYS, WORKLOAD_SYNTHETIC

OPTION_FIELDS = (
    ("context_margin_tokens", "Context margin (tokens)"),
    ("retries", "Re-launches of a crashed run"),
    ("stall_timeout_s", "Stall timeout (s)"),
    ("first_token_timeout_s", "First-token timeout (s)"),
)
RETRY_CHOICES = (("no", "skip them"), ("all", "retry them all"), ("some", "retry the ones ticked in the plan"))
LISTS = ("methods", "workloads", "exclude")  # the lists the form adds to and removes from
NOT_EDITABLE = "{path} is not in a form the form can edit: edit it in the YAML view."
_INT = re.compile(r"-?\d+")


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


def set_key(data, key, value):
    if value is None:
        data.pop(key, None)
    else:
        data[key] = value


def set_option(data, key, value):
    options = data.get("options") if isinstance(data.get("options"), dict) else {}
    set_key(options, key, value)
    set_key(data, "options", options or None)


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
    """Controls side by side (``row``) or one under the other."""

    controls: list
    row: bool = True


@dataclass
class Section(_ErrorSlot):
    title: str
    blocks: list
    path: str = ""
    hint: str = ""
    add: str = ""  # the list "+ Add" appends to
    add_label: str = ""
    add_cls: str = "small"
    errors: list = field(default_factory=list)


def _select(id, path, label, names, value, write, **kw):
    names = list(names)
    if value not in (None, "") and value not in names:
        names.insert(0, value)  # a name the catalog does not know still shows, to be corrected
    choices = ([("", "— choose —")] if value in (None, "") else []) + [(text(n), text(n)) for n in names]
    return Control(id, path, label, write, value=text(value), kind="select", choices=choices, **kw)


def _basics(data, catalog):
    host = catalog.hosts.get(data.get("host"))
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
                    hint=f"{host.gpu_count} × {host.gpu_model or 'CPU'}" if host else ""),
            _select("f-engine", "engine", "Engine", catalog.engines, data.get("engine"), name_of("engine", True),
                    rerender=True, hint=engine.kind if engine else ""),
            _select("f-model", "model", "Model", catalog.models, data.get("model"), name_of("model", True),
                    rerender=True, hint=f"context {model.context_length} tokens" if model else ""),
        ]),
        Group([
            Control("f-tp", "tp", "Tensor-parallel sizes", write_tp, kind="checks",
                    value=[str(n) for n in tp_choices(host, current_tp) if n in current_tp],
                    choices=[(str(n), f"TP{n}") for n in tp_choices(host, current_tp)],
                    hint=f"up to the host's {host.gpu_count} GPU(s)" if host else "choose a host first"),
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


def _load(data):
    def write(key, parse):
        return lambda d, v: set_key(d, key, parse(v))

    def concurrency(v):
        return parse_list(v) if v.strip() else None

    return Section("Load", [Group([
        Control("f-concurrency", "concurrency", "Concurrency (list)", write("concurrency", concurrency),
                value=list_text(data.get("concurrency")), placeholder=list_text(DEFAULTS["concurrency"])),
        *(Control(f"f-{key}", key, label, write(key, parse_number), value=text(data.get(key)),
                  placeholder=text(DEFAULTS[key]))
          for key, label in (("max_new_tokens", "Max new tokens"), ("requests_per_point", "Requests per point"),
                             ("repeats", "Repeats of the load per point"), ("warmup_requests", "Warmup requests"))),
    ])])


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
        return lambda d, v: set_option(d, key, parse_number(v))

    retry_value = "all" if retry is True else "some" if isinstance(retry, list) and retry else "no"
    return Section("Options", [Group([
        Control("f-retry_quarantined", "options.retry_quarantined", "Quarantined configurations", write_retry,
                value=retry_value, kind="select", choices=list(RETRY_CHOICES)),
        *(Control(f"f-option-{key}", f"options.{key}", label, write(key), value=text(options.get(key)),
                  placeholder=text(OPTION_DEFAULTS[key]))
          for key, label in OPTION_FIELDS),
    ])], path="options")


class SpecForm:
    """The form of one spec's data against a catalog."""

    def __init__(self, data, catalog):
        self.data = data
        self.catalog = catalog
        self.sections = [
            _basics(data, catalog), _methods(data, catalog), _workloads(data, catalog), _load(data),
            _until_stable(data), _exclusions(data), _options(data),
        ]

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
        """The data with the posted values of the controls that changed."""
        data = copy.deepcopy(self.data)
        for control in self.controls():
            posted = control.posted(post)
            if posted is not None and posted != control.value:
                control.write(data, posted)
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
    else:
        items.append({})
    data[key] = items


def remove_entry(data, key, index):
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
