"""Spec -> planned runs and points. Pure functions.

A run is one server configuration: (method, parameter values, TP), minus exclusions.
A point is one measurement of a run: workload x prompt length x concurrency (a closed
loop) or x request rate (an open loop, its concurrency the cap on requests in flight). A
capacity search plans no points: its probes are measured points added as it goes.

At plan time two things are decided, each with its numbers in the reason:
- the context cap: prompt_tokens + max_new_tokens + margin above the model's declared
  context length is ``skipped`` (the executor re-checks against the server's real
  context length and KV capacity once it is up);
- quarantine: a configuration matching an active KnownFailure for the host's GPU kind is
  ``skipped`` with the failure's signature, unless the spec's options.retry_quarantined is true or names the configuration.
"""

import json
from dataclasses import dataclass, field

from sweepcore.kinds import PointStatus, RunStatus
from sweepcore.methods import config_label
from sweepcore.spec import MAX_POINTS, WORKLOAD_DATASET, WORKLOAD_FIXED, SpecError, configurations


@dataclass(frozen=True)
class Quarantine:
    """An active KnownFailure, as planning needs it."""

    method: str
    params: dict
    tp: int
    failure_kind: str
    signature: str
    id: int | None = None


@dataclass
class PlannedPoint:
    workload: str
    prompt_tokens: int | None
    concurrency: int
    max_new_tokens: int
    status: str = PointStatus.PLANNED
    reason: str = ""
    request_rate: float | None = None  # None: a closed loop at `concurrency`


@dataclass
class PlannedRun:
    method: str
    params: dict
    tp: int
    status: str = RunStatus.PLANNED
    reason: str = ""
    quarantine: Quarantine | None = None
    retry_quarantined: bool = False
    points: list = field(default_factory=list)

    @property
    def label(self):
        return config_label(self.method, self.params, self.tp)


@dataclass
class Plan:
    runs: list
    warnings: list = field(default_factory=list)
    # Why it would measure nothing (nothing_to_measure), in words; "" when it measures something.
    nothing_to_measure: str = ""

    @property
    def totals(self):
        points = [p for r in self.runs for p in r.points]
        return {
            "runs": len(self.runs),
            "points": len(points),
            "skipped_points": sum(p.status == PointStatus.SKIPPED for p in points),
        }

    def to_dict(self):
        """The shape `sweep plan --json` prints."""
        return {
            "runs": [
                {
                    "method": r.method,
                    "params": r.params,
                    "tp": r.tp,
                    "status": r.status,
                    "reason": r.reason,
                    "points": [
                        {
                            "workload": p.workload,
                            "prompt_tokens": p.prompt_tokens,
                            "concurrency": p.concurrency,
                            "request_rate": p.request_rate,
                            "status": p.status,
                            "reason": p.reason,
                        }
                        for p in r.points
                    ],
                }
                for r in self.runs
            ],
            "totals": self.totals,
        }


def canonical_params(params):
    """One string per parameter set: the key of quarantine and history lookups."""
    return json.dumps(params or {}, sort_keys=True, separators=(",", ":"))


# What a point of a workload without a target length is measured on, in words.
LENGTH_OF_KIND = {WORKLOAD_FIXED: "fixed prompt", WORKLOAD_DATASET: "dataset"}


def point_label(workload, prompt_tokens, concurrency, request_rate=None, workload_kind=None):
    """How a point is named where it stands alone (the admin, messages): its workload, its
    prompt length (or what sets it: a fixed prompt, a dataset) and its load, e.g.
    ``fibonacci, fixed prompt, c=4``, ``long-context, 32,000 tokens, 2 req/s (cap 64)``."""
    parts = [workload]
    if prompt_tokens is not None:
        parts.append(f"{prompt_tokens:,} tokens")
    elif workload_kind in LENGTH_OF_KIND:
        parts.append(LENGTH_OF_KIND[workload_kind])
    parts.append(f"c={concurrency}" if request_rate is None else f"{request_rate:g} req/s (cap {concurrency})")
    return ", ".join(parts)


def matches(rule, method, params, tp):
    """An exclusion matches a configuration when every key it gives is equal."""
    for key, value in rule.items():
        if key == "method":
            if method != value:
                return False
        elif key == "tp":
            if tp != value:
                return False
        elif params.get(key) != value:
            return False
    return True


CONTEXT_CAP_PREFIX = "context cap:"
QUARANTINE_PREFIX = "quarantined:"


def context_cap_reason(prompt_tokens, max_new_tokens, margin, context_length, model_name):
    """Why a point cannot fit the declared context, or "" when it fits."""
    total = prompt_tokens + max_new_tokens + margin
    if total <= context_length:
        return ""
    return (
        f"{CONTEXT_CAP_PREFIX} {prompt_tokens} + {max_new_tokens} + {margin} > {context_length} "
        f"(prompt + max_new_tokens + margin = {total} tokens; {model_name} has a context of "
        f"{context_length})"
    )


def quarantine_reason(q):
    return f"{QUARANTINE_PREFIX} {q.failure_kind} seen before on this configuration and GPU kind: {q.signature}"


def plan(spec, catalog, quarantines=()):
    """Plan a validated Spec. Raises SpecError when it would plan more than MAX_POINTS."""
    model = catalog.models[spec.model]
    margin = spec.options["context_margin_tokens"]
    retry = spec.options["retry_quarantined"]  # True, False or a list of configuration rules

    configs, used_rules = [], set()
    for method, params in configurations(spec):
        for tp in spec.tp:
            hit = [i for i, rule in enumerate(spec.exclude) if matches(rule, method, params, tp)]
            used_rules.update(hit)
            if not hit:
                configs.append((method, params, tp))

    if spec.search:
        loads = []  # the search adds its probes as it measures them
    elif spec.request_rate is not None:
        loads = [(spec.in_flight_cap, rate) for rate in spec.request_rate]
    else:
        loads = [(c, None) for c in spec.concurrency]
    point_shapes = [
        (w.workload, length, c, rate)
        for w in spec.workloads
        for length in (w.prompt_tokens if w.prompt_tokens is not None else (None,))
        for c, rate in loads
    ]
    total_points = len(configs) * len(point_shapes)
    if total_points > MAX_POINTS:
        raise SpecError(
            f"this sweep would plan {total_points:,} points ({len(configs)} runs x "
            f"{len(point_shapes)} points each); the limit is {MAX_POINTS:,}: sweep fewer "
            "parameter values, TP sizes, prompt lengths, concurrency levels or request rates, or split it"
        )

    by_config = {(q.method, canonical_params(q.params), q.tp): q for q in quarantines}
    runs = []
    for method, params, tp in configs:
        run = PlannedRun(method=method, params=params, tp=tp)
        q = by_config.get((method, canonical_params(params), tp))
        if q is not None:
            run.quarantine = q
            if retry is True or (isinstance(retry, list) and any(matches(r, method, params, tp) for r in retry)):
                run.retry_quarantined = True
            else:
                run.status = RunStatus.SKIPPED
                run.reason = quarantine_reason(q)
        for workload, length, concurrency, rate in point_shapes:
            point = PlannedPoint(workload, length, concurrency, spec.max_new_tokens, request_rate=rate)
            if run.status == RunStatus.SKIPPED:
                point.status, point.reason = PointStatus.SKIPPED, run.reason
            elif length is not None:
                reason = context_cap_reason(length, spec.max_new_tokens, margin, model.context_length, model.name)
                if reason:
                    point.status, point.reason = PointStatus.SKIPPED, reason
            run.points.append(point)
        runs.append(run)

    warnings = [
        f"exclude[{i}]: matches no configuration of this sweep"
        for i in range(len(spec.exclude))
        if i not in used_rules
    ]
    probe = None
    if spec.search:
        # A search plans no points, so the cap has nothing to skip: say it here instead.
        lengths = [length for w in spec.workloads for length in (w.prompt_tokens or ())]
        probe = PlannedPoint(spec.workloads[0].workload, lengths[0] if lengths else None, 1, spec.max_new_tokens)
        reason = lengths and context_cap_reason(lengths[0], spec.max_new_tokens, margin, model.context_length,
                                                model.name)
        if reason:
            warnings.append(f"search: every probe would be skipped by the {reason}")
    return Plan(runs=runs, warnings=warnings,
                nothing_to_measure=nothing_to_measure(runs, model.context_length, margin, probe))


def search_shape(spec_data):
    """(workload, prompt tokens or None, max new tokens) of a capacity search's probes, from
    a spec as stored (Spec.to_dict): its one workload at its one prompt length."""
    workload = spec_data["workloads"][0]
    name, lengths = (workload, None) if isinstance(workload, str) else next(iter(workload.items()))
    length = lengths["prompt_tokens"][0] if lengths and lengths.get("prompt_tokens") else None
    return name, length, int(spec_data.get("max_new_tokens", 256))


def _beyond_context(points, context_length, margin):
    """Why these points exceed the context, with the numbers: "prompt 32,700 + 256 new tokens
    + 16 margin > 32,768" (from the shortest prompt of several: the others exceed it too)."""
    lengths = sorted({p.prompt_tokens for p in points if p.prompt_tokens is not None})
    prompt = f"prompt {lengths[0]:,}" if len(lengths) == 1 else f"prompts of {lengths[0]:,} to {lengths[-1]:,}"
    new = max(p.max_new_tokens for p in points)
    added = f" + {margin:,} margin" if margin else ""
    return f"{prompt} + {new:,} new tokens{added} > {context_length:,}"


def _plural(n, one, many):
    return one if n == 1 else many


def nothing_to_measure(runs, context_length, margin, search_probe=None):
    """Why a plan would measure nothing, in words, or "" when it measures at least one point.

    `runs` are its PlannedRuns (a fresh plan's, or a stored sweep's read back); `context_length`
    and `margin` the declared context and the spec's margin, for the numbers. A capacity
    search plans no points: `search_probe` is then a PlannedPoint of its probes' shape, and
    the search measures something when one of its runs is not skipped and its probes fit.
    The skips are counted by cause: "nothing to measure: all 12 points are skipped — 8 exceed
    the context (prompt 32,700 + 256 new tokens + 16 margin > 32,768), 4 quarantined"."""
    if not runs:
        return "nothing to measure: the plan has no configuration"
    live = [r for r in runs if r.status != RunStatus.SKIPPED]
    if search_probe is not None:
        if not live:
            every = "the only configuration is" if len(runs) == 1 else f"all {len(runs):,} configurations are"
            return f"nothing to measure: {every} quarantined, and a capacity search plans no other point"
        prompt = search_probe.prompt_tokens
        if prompt is not None and prompt + search_probe.max_new_tokens + margin > context_length:
            return (f"nothing to measure: every probe of the capacity search exceeds the context "
                    f"({_beyond_context([search_probe], context_length, margin)})")
        return ""
    if any(p.status == PointStatus.PLANNED for r in live for p in r.points):
        return ""
    points = [p for r in runs for p in r.points]
    if not points:
        return "nothing to measure: the plan has no point"
    quarantined = sum(len(r.points) for r in runs if r.status == RunStatus.SKIPPED)
    capped = [p for r in live for p in r.points if p.reason.startswith(CONTEXT_CAP_PREFIX)]
    others = [p for r in live for p in r.points if not p.reason.startswith(CONTEXT_CAP_PREFIX)]
    causes = []
    if capped:
        causes.append(f"{len(capped):,} {_plural(len(capped), 'exceeds', 'exceed')} the context "
                      f"({_beyond_context(capped, context_length, margin)})")
    if quarantined:
        causes.append(f"{quarantined:,} quarantined")
    if others:
        reasons = sorted({p.reason for p in others if p.reason})
        causes.append(f"{len(others):,} {others[0].status}" + (f" ({reasons[0]})" if len(reasons) == 1 else ""))
    every = "the only point is" if len(points) == 1 else f"all {len(points):,} points are"
    return f"nothing to measure: {every} skipped — {', '.join(causes)}"
