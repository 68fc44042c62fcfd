"""The sweep spec: its YAML format, validation with messages that name the field path,
and the normalised form that round-trips to YAML.

Pure: no Django. Names are checked against a ``Catalog`` (what hosts, engines, models and
workloads exist), which the caller builds from the database (``benchmarks.catalog``).

    name: qwen3.6-27b-sm120-ddtree
    host: sim-8x-rtxpro6000 # or hosts: [sim-8x-a, sim-8x-b]: identical hosts (same GPU model
                            # and count) sharing the sweep's runs, each taking one that fits
    engine: sglang-sim
    model: Qwen/Qwen3.6-27B
    tp: [1, 4, 8]
    methods:
      - autoregressive
      - dflash: {block_size: [16]}
      - ddtree: {budget: [8, 12, 15], topk_cap: 8}
    workloads:
      - fibonacci
      - long-context: {prompt_tokens: [3000, 8000]}
    max_new_tokens: 256
    concurrency: [1]        # closed loop: this many clients, each sends when its last answer ends
    request_rate: [0.5, 1]  # or open loop: arrivals per second (Poisson; burstiness: gamma shape
                            # as in vLLM), at most max_concurrency in flight; not with concurrency
    duration_s: 60          # optional: send for this long per point instead of requests_per_point
    slo: {ttft_p99_ms: 2000, tpot_p99_ms: 200}   # optional: goodput and attainment per point
    search: {max_goodput: {metric: request_rate, low: 0.25, high: 64}}
                            # optional (needs slo): per run, the highest load meeting the SLO
    requests_per_point: 3
    repeats: 1              # the load sent this many times back to back, pooled in one point
    until_stable: {metric: decode_tok_s, rel_ci: 0.05, min_requests: 5, max_requests: 50}
                            # optional: replaces requests_per_point; send until the metric's
                            # 95 % interval is within ±rel_ci of its median (or max_requests)
    warmup_requests: 1
    steady_state: {skip_first: 0.2, skip_last: 0.1}
                            # optional: these shares of each point's requests (by send order)
                            # are sent under the same load but left out of its statistics:
                            # the batch filling and draining (sweepcore.metrics)
    exclude:
      - {method: ddtree, budget: 64, tp: 1}
    options: {retry_quarantined: false, context_margin_tokens: 16, retries: 0,
              stall_timeout_s: 60, first_token_timeout_s: 600,
              cooldown_s: 2,        # seconds between two probes of a capacity search
              packing: exclusive}   # or pack: several runs share a host, each on its own GPUs
"""

import difflib
import json
from dataclasses import dataclass, field

import yaml

from sweepcore import capacity, slo
from sweepcore.files import FileProblem, read_text, within_roots
from sweepcore.gpus import PACKING, gpus_text, host_text
from sweepcore.methods import METHOD_PARAMS, METHODS, PARAM_NAMES, config_label
from sweepcore.metrics import STABLE_METRICS

# --- the catalog the spec is checked against ------------------------------------------

WORKLOAD_FIXED = "fixed"
WORKLOAD_SYNTHETIC = "synthetic"
WORKLOAD_DATASET = "dataset"


@dataclass(frozen=True)
class HostInfo:
    name: str
    gpu_count: int
    compute_capability: str = ""
    gpu_model: str = ""
    data_roots: tuple = ()  # folders an imported workload's data set may be read from


@dataclass(frozen=True)
class EngineInfo:
    name: str
    kind: str
    methods: tuple  # method names it can launch
    launchable: bool = True  # False: no command line (an engine an import made to file results)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    context_length: int


@dataclass(frozen=True)
class WorkloadInfo:
    name: str
    kind: str  # WORKLOAD_FIXED, WORKLOAD_SYNTHETIC or WORKLOAD_DATASET
    dataset_path: str = ""
    # Made by an import: its dataset path came from an uploaded file, so a host reads it only
    # inside that host's data roots (an admin's workload is the admin's choice).
    imported: bool = False


@dataclass
class Catalog:
    hosts: dict = field(default_factory=dict)
    engines: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)
    workloads: dict = field(default_factory=dict)


FIELDS = (
    "name",
    "description",
    "host",
    "hosts",
    "engine",
    "model",
    "tp",
    "methods",
    "workloads",
    "max_new_tokens",
    "concurrency",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration_s",
    "slo",
    "search",
    "requests_per_point",
    "repeats",
    "until_stable",
    "warmup_requests",
    "steady_state",
    "exclude",
    "options",
)
REQUIRED = ("name", "host", "engine", "model", "methods", "workloads")  # host: or hosts
DEFAULTS = {
    "description": "",
    "tp": [1],
    "max_new_tokens": 256,
    "concurrency": [1],
    "burstiness": 1.0,
    "requests_per_point": 3,
    "repeats": 1,
    "warmup_requests": 1,
    "exclude": [],
}
#: The keys of ``until_stable``; each is required.
UNTIL_STABLE_KEYS = ("metric", "rel_ci", "min_requests", "max_requests")
UNTIL_STABLE_EXAMPLE = "{metric: decode_tok_s, rel_ci: 0.05, min_requests: 5, max_requests: 50}"
#: The keys of ``steady_state``: the shares of a point's requests left out at each end.
STEADY_STATE_KEYS = ("skip_first", "skip_last")
STEADY_STATE_EXAMPLE = "{skip_first: 0.2, skip_last: 0.1}"
#: At least this share of a point's requests stays measured.
STEADY_STATE_MIN_MEASURED = 0.5

OPTION_DEFAULTS = {
    # Run quarantined configurations (KnownFailure) instead of skipping them: true for all,
    # or a list of configuration rules ({method, tp, parameters}) naming the ones to retry.
    "retry_quarantined": False,
    # Tokens kept free between prompt + max_new_tokens and the context length.
    "context_margin_tokens": 16,
    # Re-launches of a crashed configuration before it is concluded crashed.
    "retries": 0,
    # A request that gets no token for this long has stalled (a hung server).
    "stall_timeout_s": 60,
    # A request that gets no first token for this long has timed out (prefill included).
    "first_token_timeout_s": 600,
    # Seconds of quiet between two probes of a capacity search (the server drains).
    "cooldown_s": 2,
    # exclusive: one run per host at a time (it leases every GPU); pack: a run leases its
    # TP's GPUs, and a host runs as many at once as its GPUs allow (sweepcore.gpus).
    "packing": "exclusive",
}

#: The open loop's cap on requests in flight when the spec gives no max_concurrency: the
#: client's sockets are finite; a point that needed more waits, and its send lag says so.
OPEN_LOOP_MAX_CONCURRENCY = 1024


# --- limits ---------------------------------------------------------------------------
# Every bound of a spec, in one place (README "Limits" lists them). Each fits the database
# column its value goes to, so a spec that validates can be stored; each is far beyond a
# real benchmark, so only a mistake (or an attack) meets one, and it is then refused with
# its field and the bound instead of failing later in the database, the planner or a worker.

#: The largest value of a PositiveIntegerField column (PostgreSQL ``integer``): the bound of
#: any integer a spec holds that has no smaller one of its own.
INT_COLUMN_MAX = 2**31 - 1
#: A spec's text (YAML or JSON) is refused beyond this size, before it is parsed.
SPEC_MAX_BYTES = 1 << 20
#: Lists and mappings inside one another; the deepest field of a valid spec nests 5. A
#: parser recurses per level, so a deeper text is refused as it is read.
SPEC_MAX_DEPTH = 32
#: Values in a spec, each YAML alias counted as what it repeats (an alias of an alias of
#: a list repeats it exponentially: "billion laughs").
SPEC_MAX_VALUES = 100_000
#: Items of one list: tp, concurrency, request_rate, prompt_tokens, a swept parameter,
#: methods, workloads, hosts.
MAX_LIST_ITEMS = 256
#: Rules of ``exclude`` and of ``options.retry_quarantined``.
MAX_RULES = 1_000
#: Runs of one sweep (configurations x TP sizes), and its points in all (sweepcore.plan
#: counts them after exclusions; validation bounds a run's points first, before any is made).
MAX_RUNS = 2_000
MAX_POINTS = 10_000
MAX_TP = 1_024
#: A method parameter (a budget, a block size, a draft length).
MAX_PARAM = 1_000_000
MAX_PROMPT_TOKENS = 10_000_000
MAX_NEW_TOKENS = 1_000_000
#: Requests in flight at once: concurrency, max_concurrency, a search over concurrency.
#: The client holds one socket per request in flight; a worker checks its own open-files
#: limit against the run's load before it starts (sweepcore.loadgen.runner.open_files_problem).
MAX_IN_FLIGHT = 4_096
#: requests_per_point and until_stable's requests.
MAX_REQUESTS_PER_POINT = 1_000_000
MAX_WARMUP_REQUESTS = 10_000
MAX_REPEATS = 100
MAX_REQUEST_RATE = 100_000
MAX_BURSTINESS = 1_000
MAX_DURATION_S = 86_400
#: options.stall_timeout_s, first_token_timeout_s and cooldown_s.
MAX_TIMEOUT_S = 86_400
MAX_RETRIES = 100
#: A latency limit of ``slo``, in milliseconds (a day).
MAX_SLO_MS = 86_400_000
#: search.max_goodput.max_probes.
MAX_PROBES = 1_000
#: Characters of a name: a sweep's (benchmarks.models.Sweep.name is a column of this many),
#: and a text that looks a name up (a page's query parameter, an API filter).
MAX_NAME_CHARS = 200
#: Characters of free text a person writes: a spec's description, a curation reason or note.
MAX_TEXT_CHARS = 10_000
#: PostgreSQL stores no NUL character in a text or JSON column (SQLite does): every text
#: that reaches the database is refused with one, on both (``text_problem``).
NUL = "\x00"

#: (what, bound) of every limit above, for the README's table and its test.
LIMITS = (
    ("spec text (YAML or JSON), bytes", SPEC_MAX_BYTES),
    ("nesting of lists and mappings, levels", SPEC_MAX_DEPTH),
    ("values in a spec (YAML aliases expanded)", SPEC_MAX_VALUES),
    ("items of one list", MAX_LIST_ITEMS),
    ("exclude / retry_quarantined rules", MAX_RULES),
    ("runs of a sweep", MAX_RUNS),
    ("points of a sweep", MAX_POINTS),
    ("tp", MAX_TP),
    ("a method parameter", MAX_PARAM),
    ("prompt_tokens", MAX_PROMPT_TOKENS),
    ("max_new_tokens", MAX_NEW_TOKENS),
    ("concurrency, max_concurrency, search over concurrency", MAX_IN_FLIGHT),
    ("requests_per_point, until_stable requests", MAX_REQUESTS_PER_POINT),
    ("warmup_requests", MAX_WARMUP_REQUESTS),
    ("repeats", MAX_REPEATS),
    ("request_rate, search over request_rate (req/s)", MAX_REQUEST_RATE),
    ("burstiness", MAX_BURSTINESS),
    ("duration_s", MAX_DURATION_S),
    ("stall_timeout_s, first_token_timeout_s, cooldown_s", MAX_TIMEOUT_S),
    ("retries", MAX_RETRIES),
    ("an slo limit (ms)", MAX_SLO_MS),
    ("search max_probes", MAX_PROBES),
    ("name, characters", MAX_NAME_CHARS),
    ("description, characters", MAX_TEXT_CHARS),
    ("any other integer", INT_COLUMN_MAX),
)


def beyond(maximum, unit=""):
    """How a bound is said in a message: "up to 1,000,000 items (Sweeplab's limit)"."""
    return f"up to {maximum:,}{' ' + unit if unit else ''} (Sweeplab's limit)"


def text_problem(text, most=None):
    """Why ``text`` cannot be stored, in words ("" when it can): a NUL character anywhere
    (``NUL``), or more than ``most`` characters. Said after the field's name: "name: at most
    200 characters (got 250)", "name: may not contain a NUL character"."""
    if NUL in text:
        return "may not contain a NUL character"
    if most is not None and len(text) > most:
        return f"at most {most:,} characters (got {len(text):,})"
    return ""


# --- the validated spec ---------------------------------------------------------------


@dataclass(frozen=True)
class MethodSpec:
    method: str
    params: dict  # swept params -> list of ints, scalar params -> int


@dataclass(frozen=True)
class WorkloadSpec:
    workload: str
    prompt_tokens: tuple | None  # None: the workload's own prompts (fixed, dataset)


@dataclass(frozen=True)
class Spec:
    name: str
    description: str
    host: str
    engine: str
    model: str
    tp: tuple
    methods: tuple
    workloads: tuple
    max_new_tokens: int
    concurrency: tuple
    requests_per_point: int
    warmup_requests: int
    exclude: tuple  # of dicts
    options: dict
    repeats: int = 1
    until_stable: dict | None = None  # {metric, rel_ci, min_requests, max_requests}
    request_rate: tuple | None = None  # open loop: req/s per point; None: closed loop
    burstiness: float = 1.0
    max_concurrency: int | None = None  # the open loop's cap; None: OPEN_LOOP_MAX_CONCURRENCY
    duration_s: float | None = None
    slo: dict | None = None  # sweepcore.slo: {"ttft_p99_ms": 2000.0, ...}
    search: dict | None = None  # sweepcore.capacity: {"max_goodput": {metric, low, high, ...}}
    steady_state: dict | None = None  # {"skip_first": 0.2, "skip_last": 0.1}: the ramp left out
    hosts: tuple = ()  # every host the runs may go to, ``host`` first; () or one: ``host`` alone

    @property
    def open_loop(self):
        """The points are open loop: the spec lists rates, or its search picks them."""
        return self.request_rate is not None or (self.search_spec is not None
                                                  and self.search_spec.metric == "request_rate")

    @property
    def in_flight_cap(self):
        """The open loop's cap on requests in flight (stored as the points' concurrency)."""
        return self.max_concurrency or OPEN_LOOP_MAX_CONCURRENCY

    @property
    def search_spec(self):
        return capacity.parse_search(self.search) if self.search else None

    def to_dict(self):
        """The normalised spec in the YAML format, defaults filled in."""
        methods = [
            m.method if not m.params else {m.method: {k: _plain(v) for k, v in m.params.items()}}
            for m in self.methods
        ]
        workloads = [
            w.workload if w.prompt_tokens is None else {w.workload: {"prompt_tokens": list(w.prompt_tokens)}}
            for w in self.workloads
        ]
        data = {
            "name": self.name,
            "description": self.description,
            "host": self.host,
            "hosts": list(self.hosts) if len(self.hosts) > 1 else None,
            "engine": self.engine,
            "model": self.model,
            "tp": list(self.tp),
            "methods": methods,
            "workloads": workloads,
            "max_new_tokens": self.max_new_tokens,
            "concurrency": list(self.concurrency),
            "request_rate": list(self.request_rate) if self.request_rate is not None else None,
            "burstiness": self.burstiness,
            "max_concurrency": self.max_concurrency,
            "duration_s": self.duration_s,
            "slo": dict(self.slo) if self.slo else None,
            "search": _plain_search(self.search),
            "requests_per_point": self.requests_per_point,
            "repeats": self.repeats,
            "until_stable": dict(self.until_stable) if self.until_stable else None,
            "warmup_requests": self.warmup_requests,
            "steady_state": dict(self.steady_state) if self.steady_state else None,
            "exclude": [dict(e) for e in self.exclude],
            "options": dict(self.options),
        }
        if not data["description"]:
            del data["description"]
        if data["hosts"]:  # several hosts: `hosts` names them all, `host` (the first) is implied
            del data["host"]
        for key in ("hosts", "until_stable", "request_rate", "max_concurrency", "duration_s", "slo", "search",
                    "steady_state"):
            if data[key] is None:
                del data[key]
        if self.open_loop or self.search:  # max_concurrency caps an open loop; a search picks its loads
            del data["concurrency"]
        if not self.open_loop:
            del data["burstiness"]
        return data


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _plain_search(search):
    return {kind: dict(body) for kind, body in search.items()} if search else None


class SpecError(Exception):
    """Invalid input. ``errors`` is a list of "path: what was expected, what was given"."""

    def __init__(self, errors):
        self.errors = list(errors) if not isinstance(errors, str) else [errors]
        super().__init__("\n".join(self.errors))


# --- YAML -----------------------------------------------------------------------------


class _TooDeep(Exception):
    """A YAML text nests deeper than SPEC_MAX_DEPTH; ``mark`` is where."""

    def __init__(self, mark):
        super().__init__()
        self.mark = mark


def _too_deep_text():
    return f"lists and mappings nested deeper than {SPEC_MAX_DEPTH} levels (Sweeplab's limit)"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (PyYAML keeps the last one silently), and
    lists and mappings nested deeper than SPEC_MAX_DEPTH as they are read: PyYAML composes
    them by recursion, so a deep one would end in a RecursionError."""

    depth = 0

    def compose_node(self, parent, index):
        nested = self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent)
        if nested:
            self.depth += 1
            if self.depth > SPEC_MAX_DEPTH:
                raise _TooDeep(self.peek_event().start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            if nested:
                self.depth -= 1


def _construct_mapping(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping",
                node.start_mark,
                f"found the key {key!r} twice",
                key_node.start_mark,
            )
        seen[key] = True
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _check_size(text, source):
    """A text beyond SPEC_MAX_BYTES is refused before it is parsed (parsing is what costs)."""
    size = len(text.encode("utf-8")) if len(text) <= SPEC_MAX_BYTES else None
    if size is None or size > SPEC_MAX_BYTES:
        got = f"{size:,} bytes" if size is not None else f"more than {SPEC_MAX_BYTES:,} bytes"
        raise SpecError(f"{source}: {got}; a spec may be {beyond(SPEC_MAX_BYTES, "bytes")}")


def check_shape(data, source="spec", max_depth=SPEC_MAX_DEPTH, max_values=SPEC_MAX_VALUES):
    """Refuse data nested deeper than ``max_depth`` or holding more than ``max_values``
    values (an alias repeated counts each time), walking it without recursion and stopping
    at the first bound met, so that neither a deep nor a self-repeating input costs more
    than the bounds."""
    stack, seen = [(data, 0)], 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if max_values is not None and seen > max_values:
            raise SpecError(f"{source}: more than {max_values:,} values (Sweeplab's limit; "
                            f"a YAML alias counts as what it repeats)")
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth + 1 > max_depth:
            raise SpecError(f"{source}: lists and mappings nested deeper than {max_depth} levels (Sweeplab's limit)")
        stack.extend((child, depth + 1) for child in children)
    return data


def load_yaml(text, source="spec"):
    """Parse YAML text into plain data, or raise SpecError naming the line and column (or
    the limit of SPEC_MAX_BYTES, SPEC_MAX_DEPTH or SPEC_MAX_VALUES it goes beyond)."""
    _check_size(text, source)
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except _TooDeep as exc:
        raise SpecError(f"{source}: line {exc.mark.line + 1}, column {exc.mark.column + 1}: {_too_deep_text()}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}: line {mark.line + 1}, column {mark.column + 1}" if mark else source
        problem = exc.problem or exc.context or "not valid YAML"
        raise SpecError(f"{where}: {problem} (malformed YAML)") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{source}: not valid YAML: {exc}") from None
    return check_shape(data, source)


def load_json(text, source="spec"):
    """Parse a spec sent as JSON, refusing what load_yaml refuses (size, depth, values)
    with a SpecError; text that is not JSON raises ValueError, for the caller's words."""
    _check_size(text, source)
    try:
        data = json.loads(text)
    except RecursionError:  # json's C reader stops at ~1,000 levels, before SPEC_MAX_DEPTH's check
        raise SpecError(f"{source}: {_too_deep_text()}") from None
    return check_shape(data, source)


class _TopLevel(dict):
    pass


class _SpecDumper(yaml.SafeDumper):
    """Field order kept; short lists and flat mappings inline, as people write them."""


def _represent_list(dumper, value):
    flow = len(value) <= 16 and all(isinstance(v, (int, float, str)) for v in value)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


def _represent_dict(dumper, value):
    flow = all(isinstance(v, (int, float, str, bool)) or v is None for v in value.values())
    return dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=flow)


def _represent_top_level(dumper, value):
    return dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=False)


_SpecDumper.add_representer(list, _represent_list)
_SpecDumper.add_representer(dict, _represent_dict)
_SpecDumper.add_representer(_TopLevel, _represent_top_level)


def dump_yaml(data):
    """YAML text for a spec dict."""
    return yaml.dump(_TopLevel(data), Dumper=_SpecDumper, sort_keys=False, allow_unicode=True, width=100)


def load_spec_file(path, catalog):
    """Read, parse and validate a spec file; SpecError on any problem."""
    try:
        text = read_text(path, "a sweep file", SPEC_MAX_BYTES)
    except FileProblem as exc:
        raise SpecError(str(exc)) from None
    return validate(load_yaml(text, source=str(path)), catalog)


# --- validation -----------------------------------------------------------------------


def describe(value):
    """How a wrong value is shown in a message."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class _Checker:
    def __init__(self):
        self.errors = []

    def error(self, path, message):
        self.errors.append(f"{path}: {message}")

    def unknown_keys(self, path, data, allowed):
        for key in data:
            if key in allowed:
                continue
            where = f"{path}.{key}" if path else str(key)
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.error(where, f"unknown field{hint}; expected one of {', '.join(allowed)}")

    def string(self, path, value):
        if not isinstance(value, str) or not value.strip():
            self.error(path, f"expected a non-empty string, got {describe(value)}")
            return None
        return value.strip()

    def text(self, path, value, most, required=False):
        """A text of at most ``most`` characters and no NUL (``text_problem``): stripped and
        non-empty when ``required``, else as written; None when it is wrong."""
        if required:
            value = self.string(path, value)
            if value is None:
                return None
        elif not isinstance(value, str):
            self.error(path, f"expected a string, got {describe(value)}")
            return None
        problem = text_problem(value, most)
        if problem:
            self.error(path, problem)
            return None
        return value

    def positive_int(self, path, value, minimum=1, maximum=INT_COLUMN_MAX):
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        if not _is_int(value) or value < minimum:
            self.error(path, f"expected {what}, got {describe(value)}")
            return None
        if value > maximum:
            self.error(path, f"expected {what} {beyond(maximum)}, got {value}")
            return None
        return value

    def positive_number(self, path, value, maximum):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
            self.error(path, f"expected a positive number, got {describe(value)}")
            return None
        if value > maximum:
            self.error(path, f"expected a positive number {beyond(maximum)}, got {value}")
            return None
        return float(value)

    def list_length(self, path, value, most=MAX_LIST_ITEMS):
        """False (and the error said) when a list has more than ``most`` items."""
        if len(value) > most:
            self.error(path, f"expected a list of {beyond(most, "items")}, got {len(value):,}")
            return False
        return True

    def number_list(self, path, value, unit, maximum):
        """A non-empty list of distinct positive numbers (``unit`` names them in messages)."""
        expected = f"expected a list of positive numbers ({unit})"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            self.error(path, f"{expected}, got {value} (write [{value}])")
            return None
        if not isinstance(value, list) or not value:
            self.error(path, f"{expected}, got {'an empty list' if value == [] else describe(value)}")
            return None
        if not self.list_length(path, value):
            return None
        numbers = []
        for i, v in enumerate(value):
            number = self.positive_number(f"{path}[{i}]", v, maximum)
            if number is None:
                return None
            if number in numbers:
                self.error(path, f"{v} is listed twice")
                return None
            numbers.append(number)
        return tuple(numbers)

    def int_list(self, path, value, maximum=INT_COLUMN_MAX):
        """A non-empty list of distinct positive integers, each at most ``maximum``."""
        expected = "expected a list of positive integers"
        if _is_int(value):
            self.error(path, f"{expected}, got {value} (write [{value}])")
            return None
        if not isinstance(value, list):
            self.error(path, f"{expected}, got {describe(value)}")
            return None
        if not value:
            self.error(path, f"{expected}, got an empty list")
            return None
        if not self.list_length(path, value):
            return None
        bad = [v for v in value if not _is_int(v) or v < 1]
        if bad:
            self.error(path, f"{expected}, got {describe(bad[0])} among them")
            return None
        over = [v for v in value if v > maximum]
        if over:
            self.error(path, f"expected positive integers {beyond(maximum)}, got {over[0]} among them")
            return None
        repeated = sorted({v for v in value if value.count(v) > 1})
        if repeated:
            self.error(path, f"{repeated[0]} is listed twice")
            return None
        return tuple(value)

    def mapping(self, path, value, what):
        if not isinstance(value, dict):
            self.error(path, f"expected {what}, got {describe(value)}")
            return None
        return value

    def catalog_name(self, path, value, known, noun):
        name = self.string(path, value)
        if name is None:
            return None
        if name not in known:
            listed = ", ".join(sorted(known)) or "none yet"
            self.error(path, f"unknown {noun} {name!r}; known {noun}s: {listed}")
            return None
        return name


def host_names(data, host):
    """The hosts a stored (normalised) spec's runs may go to: its ``hosts``, or its one
    ``host`` (the sweep's own, given)."""
    return list((data or {}).get("hosts") or [host])


def _hosts(check, data, catalog):
    """(host, hosts) of ``host: a`` or ``hosts: [a, b, ...]``: several hosts share the runs only
    when they are alike (the same GPU model and count: a run's verdicts, quarantines and
    history key on the GPU kind, and each host must be able to take any run)."""
    if "hosts" not in data:
        name = check.catalog_name("host", data["host"], catalog.hosts, "host") if "host" in data else None
        return name, ()
    if "host" in data:
        check.error("hosts", "give host (one) or hosts (a list), not both")
        return None, ()
    listed = data["hosts"]
    if not isinstance(listed, list) or not listed:
        check.error("hosts", f"expected a non-empty list of host names, got {describe(listed)}")
        return None, ()
    if not check.list_length("hosts", listed):
        return None, ()
    names = [check.catalog_name(f"hosts[{i}]", item, catalog.hosts, "host") for i, item in enumerate(listed)]
    if None in names:
        return None, ()
    if len(set(names)) != len(names):
        check.error("hosts", f"lists a host twice: {', '.join(names)}")
        return None, ()
    first = catalog.hosts[names[0]]
    for i, name in enumerate(names[1:], start=1):
        other = catalog.hosts[name]
        if (other.gpu_model, other.gpu_count) != (first.gpu_model, first.gpu_count):
            check.error(f"hosts[{i}]", f"host {name!r} ({host_text(other.gpu_count, other.gpu_model)}) differs from "
                                       f"host {first.name!r} ({host_text(first.gpu_count, first.gpu_model)}): "
                                       f"the hosts of one sweep must be alike")
            return None, ()
    return names[0], tuple(names) if len(names) > 1 else ()


def _single_key_item(check, path, item, what):
    """A list item written `name` or `name: {...}`; returns (name, body or None)."""
    if isinstance(item, str):
        return item, None
    if isinstance(item, dict) and len(item) == 1:
        name, body = next(iter(item.items()))
        if not isinstance(name, str):
            check.error(path, f"expected {what}, got {describe(name)}")
            return None, None
        if body is None:
            body = {}
        if not isinstance(body, dict):
            check.error(f"{path}.{name}", f"expected a mapping of parameters, got {describe(body)}")
            return None, None
        return name, body
    check.error(path, f"expected {what}, got {describe(item)}")
    return None, None


def _methods(check, value, engine):
    check_path = "methods"
    if not isinstance(value, list) or not value:
        got = "an empty list" if value == [] else describe(value)
        check.error(check_path, f"expected a list of methods, got {got}")
        return ()
    if not check.list_length(check_path, value):
        return ()
    methods = []
    for i, item in enumerate(value):
        path = f"methods[{i}]"
        name, body = _single_key_item(
            check, path, item, f"a method ({', '.join(METHOD_PARAMS)}) or a mapping such as {{ddtree: {{budget: [15]}}}}"
        )
        if name is None:
            continue
        if name not in METHOD_PARAMS:
            close = difflib.get_close_matches(name, METHOD_PARAMS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            check.error(path, f"unknown method {name!r}{hint}; known methods: {', '.join(METHOD_PARAMS)}")
            continue
        if engine is not None and name not in engine.methods:
            check.error(
                path,
                f"engine {engine.name!r} cannot run {name}; it runs {', '.join(engine.methods)}",
            )
            continue
        specs = METHOD_PARAMS[name]
        body = body or {}
        check.unknown_keys(f"{path}.{name}", body, [p.name for p in specs] or ["(no parameters)"])
        params = {}
        for param in specs:
            ppath = f"{path}.{name}.{param.name}"
            if param.name not in body:
                if param.default is None:
                    check.error(ppath, "required" + (" (a list of positive integers)" if param.swept else ""))
                else:
                    params[param.name] = [param.default] if param.swept else param.default
                continue
            if param.swept:
                parsed = check.int_list(ppath, body[param.name], MAX_PARAM)
            else:
                parsed = check.positive_int(ppath, body[param.name], maximum=MAX_PARAM)
            if parsed is not None:
                params[param.name] = parsed
        if len(params) == len(specs):
            spec = MethodSpec(name, params)
            if _combinations(spec) > MAX_RUNS:
                check.error(f"{path}.{name}", f"sweeps {_combinations(spec):,} configurations; a sweep may plan "
                                              f"{beyond(MAX_RUNS, "runs")}")
                continue
            rule = METHODS[name].rule
            if rule is not None and not _expand(spec):
                check.error(f"{path}.{name}", f"no combination of these values has {rule[1]}")
                continue
            methods.append(spec)
    return tuple(methods)


def _workloads(check, value, catalog):
    if not isinstance(value, list) or not value:
        got = "an empty list" if value == [] else describe(value)
        check.error("workloads", f"expected a list of workloads, got {got}")
        return ()
    if not check.list_length("workloads", value):
        return ()
    workloads, seen = [], {}
    for i, item in enumerate(value):
        path = f"workloads[{i}]"
        name, body = _single_key_item(check, path, item, "a workload name or `name: {prompt_tokens: [...]}`")
        if name is None:
            continue
        info = catalog.workloads.get(name)
        if info is None:
            listed = ", ".join(sorted(catalog.workloads)) or "none yet"
            check.error(path, f"unknown workload {name!r}; known workloads: {listed}")
            continue
        if name in seen:
            check.error(path, f"workload {name!r} is listed twice (also workloads[{seen[name]}])")
            continue
        seen[name] = i
        body = body or {}
        check.unknown_keys(f"{path}.{name}", body, ["prompt_tokens"])
        if info.kind == WORKLOAD_SYNTHETIC:
            if "prompt_tokens" not in body:
                check.error(
                    f"{path}.{name}.prompt_tokens",
                    f"required: {name!r} builds prompts of an exact length, so list the lengths",
                )
                continue
            lengths = check.int_list(f"{path}.{name}.prompt_tokens", body["prompt_tokens"], MAX_PROMPT_TOKENS)
            if lengths is not None:
                workloads.append(WorkloadSpec(name, lengths))
        else:
            if "prompt_tokens" in body:
                kind = "a fixed prompt" if info.kind == WORKLOAD_FIXED else "a dataset"
                check.error(f"{path}.{name}.prompt_tokens", f"{name!r} is {kind}; it takes no prompt_tokens")
                continue
            workloads.append(WorkloadSpec(name, None))
    return tuple(workloads)


def not_launchable(engine_name):
    """Why a sweep on an engine without a command line cannot be launched."""
    return (f"engine {engine_name!r} has no command line to launch (an import made it to file results); "
            f"an admin gives it one, or pick another engine")


def _imported_datasets(check, workloads, catalog, host_names):
    """A workload an import made reads the dataset path the uploaded file named: a host reads
    it only inside that host's data roots (its admin's choice). Checked here on the text of
    the path (the files are on the host); the worker checks it again, symlinks resolved."""
    for i, workload in enumerate(workloads):
        info = catalog.workloads[workload.workload]
        if not (info.imported and info.kind == WORKLOAD_DATASET):
            continue
        for name in host_names:
            roots = catalog.hosts[name].data_roots
            if not within_roots(info.dataset_path, roots, resolve=False):
                check.error(f"workloads[{i}]", f"workload {workload.workload!r} was made by an import: its dataset path "
                                               f"is information only, outside host {name!r}'s data roots "
                                               f"({', '.join(roots) or 'none are set'}); an admin sets a host's "
                                               f"data roots, or makes the workload")
                break


def _config_rules(check, path, value, example, empty_message):
    """A list of configuration rules (exclusions, quarantine retries): each a mapping of
    method, tp and method parameters, matching the configurations where all are equal."""
    if not isinstance(value, list):
        check.error(path, f"expected a list of mappings such as {example}, got {describe(value)}")
        return ()
    if not check.list_length(path, value, MAX_RULES):
        return ()
    allowed = ["method", "tp", *PARAM_NAMES]
    rules = []
    for i, item in enumerate(value):
        item_path = f"{path}[{i}]"
        if check.mapping(item_path, item, f"a mapping such as {example}") is None:
            continue
        if not item:
            check.error(item_path, empty_message)
            continue
        before = len(check.errors)
        check.unknown_keys(item_path, item, allowed)
        for key, val in item.items():
            if key == "method":
                if val not in METHOD_PARAMS:
                    check.error(f"{item_path}.method", f"expected one of {', '.join(METHOD_PARAMS)}, got {describe(val)}")
            elif key in allowed:
                check.positive_int(f"{item_path}.{key}", val, maximum=MAX_TP if key == "tp" else MAX_PARAM)
        if len(check.errors) == before:
            rules.append(dict(item))
    return tuple(rules)


def _exclusions(check, value):
    return _config_rules(
        check, "exclude", value, "{method: ddtree, budget: 64, tp: 1}", "an empty exclusion would drop every configuration"
    )


def _options(check, value):
    if check.mapping("options", value, "a mapping of options") is None:
        return dict(OPTION_DEFAULTS)
    check.unknown_keys("options", value, list(OPTION_DEFAULTS))
    options = dict(OPTION_DEFAULTS)
    if "retry_quarantined" in value:
        retry = value["retry_quarantined"]
        if isinstance(retry, bool):
            options["retry_quarantined"] = retry
        elif isinstance(retry, list):
            options["retry_quarantined"] = [
                dict(rule) for rule in _config_rules(
                    check, "options.retry_quarantined", retry, "{method: ddtree, budget: 8, tp: 1}",
                    "an empty rule would retry every quarantined configuration: write true for that",
                )
            ]
        else:
            check.error(
                "options.retry_quarantined",
                f"expected true, false or a list of configurations such as [{{method: ddtree, budget: 8, tp: 1}}], "
                f"got {describe(retry)}",
            )
    for key, minimum, maximum in (("context_margin_tokens", 0, MAX_PROMPT_TOKENS), ("retries", 0, MAX_RETRIES),
                                  ("stall_timeout_s", 1, MAX_TIMEOUT_S), ("first_token_timeout_s", 1, MAX_TIMEOUT_S)):
        if key in value:
            parsed = check.positive_int(f"options.{key}", value[key], minimum=minimum, maximum=maximum)
            if parsed is not None:
                options[key] = parsed
    if "packing" in value:
        if value["packing"] in PACKING:
            options["packing"] = value["packing"]
        else:
            check.error("options.packing", f"expected one of {', '.join(PACKING)}, got {describe(value['packing'])}")
    if "cooldown_s" in value:
        cooldown = value["cooldown_s"]
        if isinstance(cooldown, bool) or not isinstance(cooldown, (int, float)) or not 0 <= cooldown < float("inf"):
            check.error("options.cooldown_s", f"expected a number of seconds >= 0, got {describe(cooldown)}")
        elif cooldown > MAX_TIMEOUT_S:
            check.error("options.cooldown_s", f"expected a number of seconds {beyond(MAX_TIMEOUT_S)}, got {cooldown}")
        else:
            options["cooldown_s"] = cooldown
    return options


def _until_stable(check, value):
    """The adaptive stop: {metric, rel_ci, min_requests, max_requests}, all required."""
    path = "until_stable"
    if check.mapping(path, value, f"a mapping such as {UNTIL_STABLE_EXAMPLE}") is None:
        return None
    before = len(check.errors)
    check.unknown_keys(path, value, list(UNTIL_STABLE_KEYS))
    for key in UNTIL_STABLE_KEYS:
        if key not in value:
            check.error(f"{path}.{key}", f"required (as in {UNTIL_STABLE_EXAMPLE})")
    metric = value.get("metric")
    if "metric" in value and metric not in STABLE_METRICS:
        check.error(f"{path}.metric", f"expected one of {', '.join(STABLE_METRICS)}, got {describe(metric)}")
    rel_ci = value.get("rel_ci")
    if "rel_ci" in value:
        if isinstance(rel_ci, bool) or not isinstance(rel_ci, (int, float)) or not 0 < rel_ci < 1:
            check.error(f"{path}.rel_ci", f"expected a fraction of the median between 0 and 1 (0.05 for ±5 %), "
                                          f"got {describe(rel_ci)}")
    least, most = (check.positive_int(f"{path}.{key}", value[key], maximum=MAX_REQUESTS_PER_POINT)
                   if key in value else None for key in ("min_requests", "max_requests"))
    if least is not None and most is not None and most < least:
        check.error(f"{path}.max_requests", f"expected at least min_requests ({least}), got {most}")
    if len(check.errors) != before:
        return None
    return {"metric": metric, "rel_ci": float(rel_ci), "min_requests": least, "max_requests": most}


def _steady_state(check, value, repeats, until_stable):
    """The shares of each point's requests left out at its start and end:
    {skip_first, skip_last}, each optional (0), together at most half."""
    path = "steady_state"
    if check.mapping(path, value, f"a mapping such as {STEADY_STATE_EXAMPLE}") is None:
        return None
    before = len(check.errors)
    check.unknown_keys(path, value, list(STEADY_STATE_KEYS))
    shares = {}
    for key in STEADY_STATE_KEYS:
        share = value.get(key, 0)
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
            check.error(f"{path}.{key}", f"expected a share of the point's requests, at least 0 and below 1 "
                                         f"(0.2 for 20 %), got {describe(share)}")
        else:
            shares[key] = float(share)
    if len(shares) == 2 and shares["skip_first"] + shares["skip_last"] > 1 - STEADY_STATE_MIN_MEASURED:
        total = shares["skip_first"] + shares["skip_last"]
        check.error(path, f"skip_first + skip_last is {total:g}: at most {1 - STEADY_STATE_MIN_MEASURED:g}, so "
                          f"that at least half of each point's requests are measured")
    if repeats is not None and repeats > 1:
        check.error(path, "leaves out the ramp of one load per point; with repeats each repeat ramps up and down "
                          "again: give one of them (more requests_per_point instead of repeats)")
    if until_stable is not None:
        check.error(path, "needs a point's requests known before they are counted; until_stable decides as they "
                          "come: give requests_per_point or duration_s")
    if len(check.errors) != before:
        return None
    return shares if any(shares.values()) else None


def _load(check, data, values, until_stable, workloads):
    """How each point's load arrives and what it must meet: the open loop's rates, burst
    shape and cap, the time per point, the SLO and the capacity search."""
    request_rate = burstiness = max_concurrency = duration_s = slo_limits = search = None
    if data.get("request_rate") is not None:
        request_rate = check.number_list("request_rate", data["request_rate"], "requests per second",
                                         MAX_REQUEST_RATE)
        if "concurrency" in data:
            check.error("concurrency", "give concurrency (a closed loop) or request_rate (an open loop), not both; "
                                       "the open loop's cap on requests in flight is max_concurrency")
    burstiness = check.positive_number("burstiness", values["burstiness"], MAX_BURSTINESS)
    if data.get("max_concurrency") is not None:
        max_concurrency = check.positive_int("max_concurrency", data["max_concurrency"], maximum=MAX_IN_FLIGHT)
    if data.get("duration_s") is not None:
        duration_s = check.positive_number("duration_s", data["duration_s"], MAX_DURATION_S)
        if until_stable is not None:
            check.error("duration_s", "give duration_s or until_stable, not both: each decides when a point stops")
    if data.get("slo") is not None:
        problems = slo.slo_errors(data["slo"])
        for problem in problems:
            check.errors.append(problem)
        if not problems:
            slo_limits = slo.normalise(data["slo"])
    if data.get("search") is not None:
        problems = capacity.search_errors(data["search"])
        check.errors.extend(problems)
        if not problems:
            found = capacity.parse_search(data["search"])
            search = found.to_dict()
            if "slo" not in data:
                check.error("search", f"a capacity search looks for the highest load that meets an SLO: "
                                      f"give slo too, such as {slo.SLO_EXAMPLE}")
            searched = {"request_rate": "request rates", "concurrency": "concurrency levels"}[found.metric]
            if found.metric in data:
                check.error(found.metric, f"the search picks the {searched} (search.max_goodput.metric is "
                                          f"{found.metric}): remove {found.metric}")
            other = "concurrency" if found.metric == "request_rate" else "request_rate"
            if data.get(other) is not None:
                check.error(other, f"a search over {found.metric} measures only its own probes: remove {other}")
            shapes = sum(len(w.prompt_tokens or (None,)) for w in workloads)
            if shapes > 1:
                check.error("search", f"a capacity search runs on one workload at one prompt length; this spec has "
                                      f"{shapes} (split it into one sweep per workload)")
    # Decided by what was written, valid or not, so that a list still being typed does not
    # turn the open loop's own fields into errors of a closed one.
    open_loop = data.get("request_rate") is not None or (search is not None and found.metric == "request_rate")
    if open_loop and until_stable is not None:
        check.error("until_stable", "stops a closed loop once its figure is stable; an open loop sends on its "
                                    "schedule: give requests_per_point or duration_s")
    if not open_loop:
        for key in ("max_concurrency", "burstiness"):
            if data.get(key) is not None:
                check.error(key, "applies to an open loop only (request_rate, or a search over it); "
                                 "a closed loop's load is its concurrency")
    return {"request_rate": request_rate, "burstiness": burstiness or 1.0, "max_concurrency": max_concurrency,
            "duration_s": duration_s, "slo": slo_limits, "search": search}


def validate(data, catalog):
    """Check plain data (parsed YAML or JSON) against the format and the catalog.

    Returns a Spec, or raises SpecError listing every problem found."""
    check = _Checker()
    if not isinstance(data, dict):
        raise SpecError(f"expected a mapping of sweep fields ({', '.join(REQUIRED)}, …), got {describe(data)}")
    check.unknown_keys("", data, list(FIELDS))
    for key in REQUIRED:
        if key not in data and not (key == "host" and "hosts" in data):
            check.error(key, "required")
    values = {**DEFAULTS, **{k: v for k, v in data.items() if k in FIELDS}}

    name = check.text("name", values.get("name"), MAX_NAME_CHARS, required=True) if "name" in data else None
    description = check.text("description", values["description"], MAX_TEXT_CHARS) or ""
    host_name, hosts = _hosts(check, data, catalog)
    engine_name = check.catalog_name("engine", data["engine"], catalog.engines, "engine") if "engine" in data else None
    model_name = check.catalog_name("model", data["model"], catalog.models, "model") if "model" in data else None
    host = catalog.hosts.get(host_name)
    engine = catalog.engines.get(engine_name)
    if engine is not None and not engine.launchable:
        check.error("engine", not_launchable(engine.name))

    tp = check.int_list("tp", values["tp"], MAX_TP)
    if tp is not None and host is not None:
        most = max(host.gpu_count, 1)
        for i, size in enumerate(tp):
            if size > most:
                gpus = gpus_text(host.gpu_count) if host.gpu_count else "no GPU (TP 1 only)"
                check.error(f"tp[{i}]", f"{size} is more than host {host.name!r} has: {gpus}")

    methods = _methods(check, values["methods"], engine) if "methods" in data else ()
    workloads = _workloads(check, values["workloads"], catalog) if "workloads" in data else ()
    _imported_datasets(check, workloads, catalog, hosts or ((host_name,) if host_name else ()))
    max_new_tokens = check.positive_int("max_new_tokens", values["max_new_tokens"], maximum=MAX_NEW_TOKENS)
    concurrency = check.int_list("concurrency", values["concurrency"], MAX_IN_FLIGHT)
    requests_per_point = check.positive_int("requests_per_point", values["requests_per_point"],
                                            maximum=MAX_REQUESTS_PER_POINT)
    repeats = check.positive_int("repeats", values["repeats"], maximum=MAX_REPEATS)
    until_stable = _until_stable(check, values["until_stable"]) if values.get("until_stable") is not None else None
    load = _load(check, data, values, until_stable, workloads)
    warmup_requests = check.positive_int("warmup_requests", values["warmup_requests"], minimum=0,
                                         maximum=MAX_WARMUP_REQUESTS)
    steady_state = (_steady_state(check, data["steady_state"], repeats, until_stable)
                    if data.get("steady_state") is not None else None)
    exclude = _exclusions(check, values["exclude"])
    options = _options(check, values.get("options", {}))

    if not _plan_size(check, methods, tp, workloads, load["request_rate"] or concurrency, load["search"]):
        raise SpecError(check.errors)
    seen = {}
    for i, m in enumerate(methods):
        for config in _expand(m):
            key = (config[0], tuple(sorted(config[1].items())))
            if key in seen and seen[key] != i:
                check.error(f"methods[{i}]", f"repeats a configuration of methods[{seen[key]}]: {config_label(*config)}")
                break
            seen[key] = i

    if check.errors:
        raise SpecError(check.errors)
    return Spec(
        name=name,
        description=description,
        host=host_name,
        hosts=hosts,
        engine=engine_name,
        model=model_name,
        tp=tp,
        methods=methods,
        workloads=workloads,
        max_new_tokens=max_new_tokens,
        concurrency=concurrency,
        requests_per_point=requests_per_point,
        warmup_requests=warmup_requests,
        exclude=exclude,
        options=options,
        repeats=repeats,
        until_stable=until_stable,
        steady_state=steady_state,
        **load,
    )


def _combinations(method_spec):
    """How many configurations a method's swept parameters make, before its rule (if any)
    drops some: counted without making them, so that a bound can be checked first."""
    count = 1
    for param in METHOD_PARAMS[method_spec.method]:
        if param.swept:
            count *= len(method_spec.params[param.name])
    return count


def _plan_size(check, methods, tp, workloads, loads, search):
    """False (and the error said) when the sweep would plan more than MAX_RUNS runs, or a
    run more than MAX_POINTS points: the planner makes each one, so the bounds are checked
    on their counts first (sweepcore.plan then bounds the points of all runs, after the
    exclusions)."""
    runs = sum(_combinations(m) for m in methods) * len(tp or ())
    if runs > MAX_RUNS:
        check.error("methods", f"{runs:,} runs (configurations x TP sizes); a sweep may plan {beyond(MAX_RUNS, "runs")}")
        return False
    points = 0 if search else sum(len(w.prompt_tokens or (None,)) for w in workloads) * len(loads or ())
    if points > MAX_POINTS:
        check.error("workloads", f"{points:,} points a run (workloads and lengths x loads); a sweep may plan "
                                 f"{beyond(MAX_POINTS, "points")}")
        return False
    return True


def _expand(method_spec):
    """(method, params) for every value of its swept parameters, scalars applied to all."""
    combos = [{}]
    for param in METHOD_PARAMS[method_spec.method]:
        value = method_spec.params[param.name]
        values = value if param.swept else (value,)
        combos = [{**c, param.name: v} for c in combos for v in values]
    rule = METHODS[method_spec.method].rule
    return [(method_spec.method, c) for c in combos if rule is None or rule[0](c)]


def configurations(spec):
    """Every (method, params) the spec names, in spec order, before TP and exclusions."""
    return [config for m in spec.methods for config in _expand(m)]
