"""The capacity search: the highest load at which a configuration still meets its SLO.
Pure: no Django, no I/O.

    search: {max_goodput: {metric: request_rate, low: 0.25, high: 64}}
            # optional: resolution (request_rate: 0.1, relative; concurrency: 1, requests),
            #           saturation (0.05), max_probes (20)

The load is the open loop's ``request_rate`` (req/s) or the closed loop's ``concurrency``.
The search is a step function over the probes measured so far, not a loop: the executor
asks :func:`next_load`, measures and stores that point, and asks again with the longer
history, until it answers None; :func:`conclude` then says what the capacity is and why the
search stopped. A resumed run rebuilds the history from its stored points, so the decision
depends on the *set* of probes, never on their order. Probes outside [low, high] belong to
another search and are ignored; two probes at one load count as one that meets the SLO only
if both do.

Algorithm
---------
1. Probe ``low``. If it misses the SLO there is no capacity in the range
   (``slo_missed_at_low``).
2. Bracketing: double the load (concurrency: an integer, doubled) while the SLO holds; the
   step that would pass ``high`` probes ``high`` itself, once. The SLO holding at ``high``
   ends the search (``reached_high``: the capacity is at least ``high``). Doubling finds the
   edge in log2(capacity/low) probes whatever the scale: a configuration's capacity is unknown
   to within orders of magnitude before it is measured (long prompts on one GPU against short
   ones on eight), and a fixed step would either crawl or overshoot.
3. Saturation: while bracketing, if the output throughput grew by less than ``saturation``
   (relative) over the previous passing probe although the load doubled, the server is
   saturated: more load only queues, the SLO will fail on queueing alone, and the probes
   that find where would measure the queue, not the server. The search stops
   (``saturated``) and the capacity is the highest load probed that meets the SLO.
4. Bisection between the highest load that meets the SLO and the lowest that misses it: the
   geometric midpoint for request rates (the bracket shrinks by the same ratio each step;
   rounded to the fewest significant digits that keep it within 1 % of the bracket's log
   width of the exact midpoint, so loads read 5.66, not 5.656854…), the integer midpoint for
   concurrency, until the bracket is within the resolution (``resolution``): rates
   ``fails_at / load <= 1 + resolution``, concurrency ``fails_at - load <= resolution``.
5. A probe on which the server failed (died, stopped answering) ends the search at once
   (``server_failed``): the capacity is the highest load below it that meets the SLO. A
   probe that meets the SLO above a load where it failed (noise) does not move the
   bracket: the bisection stays below the lowest failing load.
6. ``max_probes`` bounds everything (``probe_limit``); the capacity is then the bracket's
   lower end.

Cost: bracketing takes at most ceil(log2(high/low)) + 1 probes and bisection about
log2(log 2 / log(1 + resolution)) more (3 at 10 %) for rates, log2(bracket / resolution) for
concurrency: about log2(high/low) + log2(1/resolution) in all (at most 12 for 0.25..64 req/s
at 10 %, where a geometric grid of the same resolution needs 60 points). :func:`search_probes_bound`
gives the worst case, :func:`grid_probes` the grid's count.
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sweepcore.kinds import LabelledStrEnum

SEARCH_BODY_EXAMPLE = "{metric: request_rate, low: 0.25, high: 64}"
SEARCH_EXAMPLE = f"{{max_goodput: {SEARCH_BODY_EXAMPLE}}}"
#: What the search maximises; the spec's ``search`` mapping names exactly one.
OBJECTIVES = ("max_goodput",)
REQUEST_RATE = "request_rate"
CONCURRENCY = "concurrency"
#: The loads a search can vary: the open loop's arrival rate, the closed loop's concurrency.
SEARCH_METRICS = (REQUEST_RATE, CONCURRENCY)
SEARCH_KEYS = ("metric", "low", "high", "resolution", "saturation", "max_probes")
REQUIRED_KEYS = ("metric", "low", "high")
#: Resolution when none is given: relative for request rates, in requests for concurrency.
DEFAULT_RESOLUTION = {REQUEST_RATE: 0.1, CONCURRENCY: 1}
DEFAULT_SATURATION = 0.05
DEFAULT_MAX_PROBES = 20
# A rounded bisection midpoint stays within this share of the bracket's log width of the
# exact geometric midpoint, so each step still shrinks the bracket to at most 0.51 of it.
_ROUNDING_SHARE = 0.01
# Bracketing loads are low * 2**k; this absorbs float error when telling a doubling apart.
_DOUBLED = 2 * (1 - 1e-9)


class StopReason(LabelledStrEnum):
    """Why a capacity search stopped (stored on the run beside its capacity)."""

    RESOLUTION = "resolution", "resolution reached"
    SATURATED = "saturated", "server saturated"
    SERVER_FAILED = "server_failed", "server failed"
    SLO_MISSED_AT_LOW = "slo_missed_at_low", "SLO missed at the lowest load"
    REACHED_HIGH = "reached_high", "SLO holds at the highest load"
    PROBE_LIMIT = "probe_limit", "probe limit reached"


@dataclass(frozen=True)
class SearchSpec:
    """A capacity search's settings: the spec's ``search: {max_goodput: {...}}``, defaults
    filled in (:func:`parse_search`)."""

    metric: str  # REQUEST_RATE or CONCURRENCY
    low: float  # concurrency: an int
    high: float  # concurrency: an int
    resolution: float  # request_rate: relative (0.1 = 10 %); concurrency: requests (an int)
    saturation: float = DEFAULT_SATURATION  # relative throughput growth below which a doubling saturates
    max_probes: int = DEFAULT_MAX_PROBES

    def to_dict(self):
        """The normalised ``search`` mapping in the spec's format, defaults filled in."""
        return {
            "max_goodput": {
                "metric": self.metric,
                "low": self.low,
                "high": self.high,
                "resolution": self.resolution,
                "saturation": self.saturation,
                "max_probes": self.max_probes,
            }
        }


@dataclass(frozen=True)
class Probe:
    """One measured point of a search, as the search needs it."""

    load: float  # request rate (req/s) or concurrency
    meets_slo: bool
    goodput: float | None  # req/s that met the SLO
    output_throughput: float | None  # tok/s
    server_failed: bool = False  # the server died or stopped answering during the probe


@dataclass(frozen=True)
class Capacity:
    """What a finished search found. ``load`` is the highest load that meets the SLO below
    the lowest that misses it (None when none does), ``probe`` the point measured there,
    ``fails_at`` the lowest load where the SLO failed or the server did (None when nothing
    failed)."""

    load: float | None
    probe: Probe | None
    stopped_because: StopReason
    message: str  # in words, with the numbers
    fails_at: float | None = None

    def as_dict(self):
        """JSON-able, for storage."""
        return {
            "load": self.load,
            "goodput": self.probe.goodput if self.probe else None,
            "output_throughput": self.probe.output_throughput if self.probe else None,
            "fails_at": self.fails_at,
            "stopped_because": str(self.stopped_because),
            "message": self.message,
        }


# --- validation -----------------------------------------------------------------------


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def search_errors(value, path="search"):
    """Every problem with a ``search`` mapping, as "path: what was expected, got what"."""
    # Imported here, not at the top: spec.py validates a sweep's ``search`` with this function,
    # and a module-level import each way would be a cycle.
    from sweepcore.spec import MAX_IN_FLIGHT, MAX_PROBES, MAX_REQUEST_RATE, beyond, describe

    errors = []

    def error(where, message):
        errors.append(f"{where}: {message}")

    if not isinstance(value, dict):
        error(path, f"expected a mapping such as {SEARCH_EXAMPLE}, got {describe(value)}")
        return errors
    if not value:
        error(path, f"expected one objective ({', '.join(OBJECTIVES)}) as in {SEARCH_EXAMPLE}, got an empty mapping")
        return errors
    for key in value:
        if key not in OBJECTIVES:
            close = difflib.get_close_matches(str(key), OBJECTIVES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            error(f"{path}.{key}", f"unknown objective{hint}; expected one of {', '.join(OBJECTIVES)}")
    if errors:
        return errors
    objective, body = next(iter(value.items()))
    path = f"{path}.{objective}"
    if not isinstance(body, dict):
        error(path, f"expected a mapping such as {SEARCH_BODY_EXAMPLE}, got {describe(body)}")
        return errors

    for key in body:
        if key not in SEARCH_KEYS:
            close = difflib.get_close_matches(str(key), SEARCH_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            error(f"{path}.{key}", f"unknown field{hint}; expected one of {', '.join(SEARCH_KEYS)}")
    for key in REQUIRED_KEYS:
        if key not in body:
            error(f"{path}.{key}", f"required (as in {SEARCH_BODY_EXAMPLE})")

    metric = body.get("metric")
    if "metric" in body and metric not in SEARCH_METRICS:
        error(f"{path}.metric", f"expected one of {', '.join(SEARCH_METRICS)}, got {describe(metric)}")
        metric = None
    bounds = {}
    for key in ("low", "high"):
        if key not in body:
            continue
        bound = body[key]
        most = MAX_IN_FLIGHT if metric == CONCURRENCY else MAX_REQUEST_RATE
        if metric == CONCURRENCY and not (_is_int(bound) and bound >= 1):
            error(f"{path}.{key}", f"expected a positive integer (a concurrency), got {describe(bound)}")
        elif metric != CONCURRENCY and not (_is_number(bound) and bound > 0):
            error(f"{path}.{key}", f"expected a positive number, got {describe(bound)}")
        elif bound > most:
            error(f"{path}.{key}", f"expected a load {beyond(most)}, got {bound}")
        else:
            bounds[key] = bound
    if len(bounds) == 2 and not bounds["low"] < bounds["high"]:
        error(f"{path}.high", f"expected more than low ({bounds['low']}), got {bounds['high']}")

    if "resolution" in body:
        resolution = body["resolution"]
        if metric == CONCURRENCY and not (_is_int(resolution) and resolution >= 1):
            error(f"{path}.resolution", f"expected a positive integer (requests of concurrency), "
                                        f"got {describe(resolution)}")
        elif metric == CONCURRENCY and resolution > MAX_IN_FLIGHT:
            error(f"{path}.resolution", f"expected a concurrency step {beyond(MAX_IN_FLIGHT)}, got {resolution}")
        elif metric == REQUEST_RATE and not (_is_number(resolution) and 0 < resolution <= 1):
            error(f"{path}.resolution", f"expected a relative step above 0 and at most 1 (0.1 for 10 %), "
                                        f"got {describe(resolution)}")
    if "saturation" in body:
        saturation = body["saturation"]
        if not (_is_number(saturation) and 0 <= saturation < 1):
            error(f"{path}.saturation", f"expected a relative throughput growth of at least 0 and below 1 "
                                        f"(0.05 for 5 %), got {describe(saturation)}")
    if "max_probes" in body:
        max_probes = body["max_probes"]
        if not (_is_int(max_probes) and max_probes >= 2):
            error(f"{path}.max_probes", f"expected an integer >= 2, got {describe(max_probes)}")
        elif max_probes > MAX_PROBES:
            error(f"{path}.max_probes", f"expected probes {beyond(MAX_PROBES)}, got {max_probes}")
    return errors


def parse_search(value):
    """The SearchSpec of a ``search`` mapping for which :func:`search_errors` found nothing
    (ValueError listing the problems otherwise)."""
    errors = search_errors(value)
    if errors:
        raise ValueError("\n".join(errors))
    body = value[OBJECTIVES[0]]
    metric = body["metric"]
    return SearchSpec(
        metric=metric,
        low=body["low"],
        high=body["high"],
        resolution=body.get("resolution", DEFAULT_RESOLUTION[metric]),
        saturation=body.get("saturation", DEFAULT_SATURATION),
        max_probes=body.get("max_probes", DEFAULT_MAX_PROBES),
    )


# --- the search -----------------------------------------------------------------------


@dataclass(frozen=True)
class _State:
    """The search's position, from the set of probes in range."""

    probes: dict  # load -> Probe (the worst of those at that load)
    fails_at: float | None  # lowest load where the SLO or the server failed
    holds_at: float | None  # highest load below fails_at that meets the SLO
    server_failed_at: float | None  # lowest load where the server failed


def _failed(probe):
    return probe.server_failed or not probe.meets_slo


def _state(spec, probes):
    by_load = {}
    for probe in probes:
        if not spec.low <= probe.load <= spec.high:
            continue
        known = by_load.get(probe.load)
        # The worse of two probes at one load stands for it: a server failure, then a miss.
        if known is None or (probe.server_failed, _failed(probe)) > (known.server_failed, _failed(known)):
            by_load[probe.load] = probe
    failing = [load for load, p in by_load.items() if _failed(p)]
    fails_at = min(failing, default=None)
    holds_at = max(
        (load for load, p in by_load.items() if not _failed(p) and (fails_at is None or load < fails_at)),
        default=None,
    )
    server_failed_at = min((load for load, p in by_load.items() if p.server_failed), default=None)
    return _State(by_load, fails_at, holds_at, server_failed_at)


def _as_load(spec, load):
    """A load as the search hands it out: an int for concurrency (stored ones may come back
    as floats), a float for request rates."""
    if load is None:
        return None
    return int(load) if spec.metric == CONCURRENCY else float(load)


def _load_text(spec, load):
    if spec.metric == CONCURRENCY:
        return f"concurrency {int(load)}"
    return f"{load:g} req/s"


def _resolution_text(spec):
    return f"{spec.resolution * 100:g} %" if spec.metric == REQUEST_RATE else f"{spec.resolution}"


def _bracket_text(spec, state):
    """Where the SLO holds and where it fails, in words."""
    if state.holds_at is None:
        return "no load meets the SLO"
    holds = f"SLO holds at {_load_text(spec, state.holds_at)}"
    if state.fails_at is None:
        return holds
    return f"{holds} and fails at {_load_text(spec, state.fails_at)}"


def _within_resolution(spec, low, high):
    if spec.metric == CONCURRENCY:
        return high - low <= spec.resolution
    return high / low <= (1 + spec.resolution) * (1 + 1e-12)  # 1.1099 / 1.009 is 1.1000000000000003


def _doubled(spec, load):
    """The next bracketing load: twice ``load``, at most ``high``."""
    if spec.metric == CONCURRENCY:
        return min(2 * int(load), int(spec.high))
    return min(2 * load, spec.high)


def _midpoint(spec, low, high):
    """The bisection's next load, strictly between ``low`` and ``high``."""
    if spec.metric == CONCURRENCY:
        return (int(low) + int(high)) // 2
    exact = math.sqrt(low * high)
    tolerance = _ROUNDING_SHARE * math.log(high / low)
    for digits in range(1, 18):
        rounded = float(f"{exact:.{digits}g}")
        if abs(math.log(rounded / exact)) <= tolerance:
            return rounded
    return exact


def _saturation(spec, state):
    """(previous, latest) passing probes when the latest doubling saturated, else None."""
    latest = state.probes[state.holds_at]
    below = [load for load, p in state.probes.items() if not _failed(p) and load < state.holds_at]
    if not below:
        return None
    previous = state.probes[max(below)]
    if latest.load < _DOUBLED * previous.load:
        return None
    if latest.output_throughput is None or previous.output_throughput is None:
        return None
    if latest.output_throughput < previous.output_throughput * (1 + spec.saturation):
        return previous, latest
    return None


def _decide(spec, probes):
    """(the next load, None) while the search goes on; (None, Capacity) once it is over."""
    state = _state(spec, probes)

    def over(reason, message):
        probe = state.probes[state.holds_at] if state.holds_at is not None else None
        return None, Capacity(_as_load(spec, state.holds_at), probe, reason, message, _as_load(spec, state.fails_at))

    if state.server_failed_at is not None:
        where = f"the server failed at {_load_text(spec, state.server_failed_at)}"
        if state.holds_at is None:
            return over(StopReason.SERVER_FAILED, f"{where}; no load below it meets the SLO")
        if state.fails_at < state.server_failed_at:  # the SLO failed first, lower down
            return over(StopReason.SERVER_FAILED, f"{where}; {_bracket_text(spec, state)}")
        return over(StopReason.SERVER_FAILED, f"{where}; SLO holds at {_load_text(spec, state.holds_at)}")

    if state.holds_at is None:
        if spec.low not in state.probes:
            load = spec.low
        else:
            return over(
                StopReason.SLO_MISSED_AT_LOW,
                f"SLO fails already at the lowest load, {_load_text(spec, spec.low)}: "
                f"no capacity between {_load_text(spec, spec.low)} and {_load_text(spec, spec.high)}",
            )
    elif state.fails_at is None:
        if state.holds_at >= spec.high:
            return over(
                StopReason.REACHED_HIGH,
                f"SLO holds at the highest load, {_load_text(spec, spec.high)}: the capacity is at least that "
                f"(raise high to search further)",
            )
        saturated = _saturation(spec, state)
        if saturated is not None:
            previous, latest = saturated
            # previous > 0 here, or latest (>= 0) could not be below it
            growth = latest.output_throughput / previous.output_throughput - 1
            return over(
                StopReason.SATURATED,
                f"the server is saturated: output throughput {previous.output_throughput:.0f} tok/s at "
                f"{_load_text(spec, previous.load)}, {latest.output_throughput:.0f} tok/s at "
                f"{_load_text(spec, latest.load)} ({growth * 100:+.1f} % for twice the load, less than "
                f"{spec.saturation * 100:g} %); the capacity is {_load_text(spec, latest.load)}, the highest load "
                f"probed, where the SLO still holds",
            )
        load = _doubled(spec, state.holds_at)
    else:
        if _within_resolution(spec, state.holds_at, state.fails_at):
            return over(StopReason.RESOLUTION, f"{_bracket_text(spec, state)} (resolution {_resolution_text(spec)})")
        load = _midpoint(spec, state.holds_at, state.fails_at)

    if len(state.probes) >= spec.max_probes:
        return over(
            StopReason.PROBE_LIMIT,
            f"stopped after {len(state.probes)} probes (max_probes {spec.max_probes}); {_bracket_text(spec, state)}",
        )
    return _as_load(spec, load), None


def next_load(spec: SearchSpec, probes: Sequence[Probe]):
    """The load to probe next (an int for concurrency), or None when the search is over."""
    load, _ = _decide(spec, probes)
    return load


def conclude(spec: SearchSpec, probes: Sequence[Probe]) -> Capacity:
    """The capacity a finished search found; ValueError while :func:`next_load` still has a
    load to probe."""
    load, capacity = _decide(spec, probes)
    if capacity is None:
        raise ValueError(f"the search is not over: it would probe {_load_text(spec, load)} next")
    return capacity


# --- cost -----------------------------------------------------------------------------


def _bracketing_loads(spec):
    """Every load bracketing can probe: low, its doublings below high, and high."""
    loads = [spec.low]
    while loads[-1] < spec.high:
        loads.append(_doubled(spec, loads[-1]))
    return loads


def _bisection_probes(spec, low, high):
    """The most probes bisection needs to bring the bracket (low, high) within the resolution."""
    steps = 0
    if spec.metric == CONCURRENCY:
        width = high - low
        while width > spec.resolution:
            width = math.ceil(width / 2)
            steps += 1
    else:
        log_width, target = math.log(high / low), math.log(1 + spec.resolution)
        while log_width > target:
            log_width *= 0.5 + _ROUNDING_SHARE
            steps += 1
    return steps


def search_probes_bound(spec: SearchSpec) -> int:
    """An upper bound of the probes a search over ``spec`` takes on a server whose SLO holds
    up to some load and fails above it: every bracketing load, then the bisection of the
    widest bracket they leave; ``max_probes`` at most."""
    loads = _bracketing_loads(spec)
    widest = max((_bisection_probes(spec, a, b) for a, b in itertools.pairwise(loads)), default=0)
    return min(len(loads) + widest, spec.max_probes)


def grid_probes(spec: SearchSpec) -> int:
    """The probes a fixed grid over [low, high] of the search's resolution needs: geometric
    for request rates (each load 1 + resolution times the previous), integer steps of the
    resolution for concurrency."""
    if spec.metric == CONCURRENCY:
        return math.ceil((spec.high - spec.low) / spec.resolution) + 1
    return math.ceil(math.log(spec.high / spec.low) / math.log(1 + spec.resolution)) + 1
