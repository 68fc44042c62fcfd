"""Service-level objectives: latency limits for a point, which of its requests met them,
and its goodput.  Pure Python, no Django.

A spec gives limits the way MLPerf's server scenario does, a percentile of a latency::

    slo: {ttft_p99_ms: 2000, tpot_p99_ms: 200}

Keys are ``{ttft,tpot,itl,e2el}_{p50,p90,p99}_ms`` (:data:`SLO_KEYS`); values are
positive milliseconds of the model's time (a simulated point's records are in wall time
and are converted: see ``time_scale`` in :func:`evaluate`).

Per request
-----------
A request **meets** the SLO when it completed (:func:`sweepcore.metrics.is_success`) and
each of its latencies is within every limit on it.  Its latencies are the ones the
point's statistics are computed from (:mod:`sweepcore.metrics`): TTFT and E2EL from the
scheduled arrival under an open loop (``request_ttft_scheduled``,
``request_e2el_scheduled``), TPOT; for ``itl_pXX_ms`` its own pXX over its inter-token
gaps.  A latency the request has none of (TPOT and ITL of a one-token answer) limits
nothing.  A failed request is a miss.

Per point
---------
``total_requests`` is every measured request, failed ones included; ``met_requests``
those that met the SLO; ``slo_attainment = met / total``; ``goodput = met / duration``
requests per second (vLLM's ``--goodput``, DistServe's definition).

``slo_met`` says whether the point as a whole meets the SLO: for every key, the key's
percentile over **all** requests, a failed request counting as an infinite latency, is
within the limit.  Percentiles are :func:`sweepcore.metrics.percentile`, the
interpolation of the point's stored ``p99_ttft_ms`` and the rest, so that with no failure
the observed TTFT, TPOT and E2EL percentiles are the point's own.  The ITL check is the
percentile over requests of each request's own percentile, which is stricter than the
point's ``p99_itl_ms`` (that one pools every gap of every request).

With failures the interpolation decides: pXX sits at rank ``XX/100 * (n-1)`` of the
sorted values, and any weight on an infinite value makes it infinite.  Of 100 requests
p99 lies between the 99th and 100th values (rank 98.01), so **one failure among 100
misses any p99 limit**; of 101 requests the rank is exactly 99, the 100th value, so one
failure among 101 leaves p99 a completed request's latency.  An infinite percentile is
reported as ``observed: None``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from sweepcore import metrics

#: The percentiles a limit can be put on.
SLO_PERCENTILES: tuple[int, ...] = (50, 90, 99)

#: Every key an ``slo`` mapping accepts: ``{ttft,tpot,itl,e2el}_{p50,p90,p99}_ms``.
SLO_KEYS: tuple[str, ...] = tuple(f"{m}_p{p}_ms" for m in metrics.LATENCIES for p in SLO_PERCENTILES)

SLO_EXAMPLE = "{ttft_p99_ms: 2000, tpot_p99_ms: 200}"


def _split(key: str) -> tuple[str, int]:
    """("ttft", 99) for "ttft_p99_ms"."""
    latency, level, _ = key.split("_")
    return latency, int(level[1:])


def point_field(key: str) -> str:
    """The point column that holds a key's percentile, for the charts and tables that draw
    a limit beside it: ``ttft_p99_ms`` -> ``p99_ttft_ms``, ``tpot_p50_ms`` ->
    ``median_tpot_ms`` (p50 is the stored median). For ITL the column pools every gap of
    every request, looser than the per-request check (module docstring). ValueError for a
    key not in SLO_KEYS."""
    if key not in SLO_KEYS:
        raise ValueError(f"not an SLO key: {key!r}")
    latency, level = _split(key)
    return f"{'median' if level == 50 else f'p{level}'}_{latency}_ms"


def _suggestion(key: Any) -> str | None:
    """The key meant by a misspelt one; the point's own field order (``p99_ttft_ms``)
    is recognised before close spellings."""
    text = str(key)
    parts = text.removesuffix("_ms").split("_")
    if len(parts) == 2 and (swapped := f"{parts[1]}_{parts[0]}_ms") in SLO_KEYS:
        return swapped
    close = difflib.get_close_matches(text, SLO_KEYS, n=1)
    return close[0] if close else None


def _is_limit(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


def slo_errors(value: Any, path: str = "slo") -> list[str]:
    """Every problem of an ``slo`` mapping, as "path: what was expected, what was given";
    empty when it is valid."""
    # Imported here: sweepcore.spec, which owns how a wrong value is shown, may check a
    # spec's slo with this module.
    from sweepcore.spec import MAX_SLO_MS, beyond, describe

    if not isinstance(value, Mapping):
        return [f"{path}: expected a mapping of latency limits such as {SLO_EXAMPLE}, got {describe(value)}"]
    if not value:
        return [f"{path}: expected at least one latency limit, such as {SLO_EXAMPLE}"]
    errors = []
    for key, limit in value.items():
        if key not in SLO_KEYS:
            meant = _suggestion(key)
            hint = f" (did you mean {meant!r}?)" if meant else ""
            errors.append(f"{path}.{key}: unknown key{hint}; expected one of {', '.join(SLO_KEYS)}")
        elif not _is_limit(limit):
            errors.append(f"{path}.{key}: expected a positive number of milliseconds, got {describe(limit)}")
        elif limit > MAX_SLO_MS:
            errors.append(f"{path}.{key}: expected a number of milliseconds {beyond(MAX_SLO_MS)}, got {limit}")
    return errors


def normalise(value: Mapping[str, Any]) -> dict[str, float]:
    """The limits as floats in :data:`SLO_KEYS` order; call after ``slo_errors(value) == []``."""
    return {key: float(value[key]) for key in SLO_KEYS if key in value}


@dataclass(frozen=True)
class SLOOutcome:
    """How a point did against an SLO (see the module docstring)."""

    goodput: float | None  # requests/s that met every limit; None when the duration is unknown or 0
    slo_attainment: float | None  # met / every request sent, failed ones included; None with no requests
    slo_met: bool | None  # every key's percentile, failures as +inf, within its limit; None with no requests
    met_requests: int
    total_requests: int
    # key -> {"limit": ms, "observed": ms (None: +inf, or no request has that latency),
    #         "met": bool (None: no request has that latency)}
    checks: dict

    def as_dict(self) -> dict:
        """JSON-able, for storage."""
        return asdict(self)


def _latency_of(key: str) -> Callable[[Any], float | None]:
    """A request's latency in seconds that ``key`` limits (None where it has none)."""
    latency, level = _split(key)
    if latency == "itl":
        return lambda rec: metrics.percentile(metrics.request_itls(rec), level)
    return {"ttft": metrics.request_ttft_scheduled, "tpot": metrics.request_tpot,
            "e2el": metrics.request_e2el_scheduled}[latency]


def evaluate(records: Iterable[Any], duration_s: float | None, slo: Mapping[str, float], *,
             time_scale: float | None = None) -> SLOOutcome:
    """How the point of ``records`` (RequestResults, dicts or stored rows, every measured
    request) did against ``slo`` (limits in model-time ms).  ``duration_s``: the wall
    seconds of its measurement.  ``time_scale``: the simulator's time scale the records
    were measured at (see :func:`sweepcore.metrics.to_model_time`): latencies are divided
    by it and the goodput multiplied by it.  ValueError for an invalid ``slo``."""
    errors = slo_errors(slo)
    if errors:
        raise ValueError("; ".join(errors))
    if time_scale is not None and not time_scale > 0:
        raise ValueError(f"time scale must be > 0, not {time_scale!r}")
    to_model_ms = 1000.0 / (time_scale or 1.0)
    limits = normalise(slo)
    recs = list(records)
    ok = [r for r in recs if metrics.is_success(r)]
    failed = len(recs) - len(ok)

    # Each completed request's latencies in model ms, by key (None: it has none).
    latencies = {key: _latency_of(key) for key in limits}
    rows = [{key: None if (v := latency(r)) is None else v * to_model_ms for key, latency in latencies.items()}
            for r in ok]
    met = sum(all(v is None or v <= limits[key] for key, v in row.items()) for row in rows)

    checks = {}
    for key, limit in limits.items():
        values = [row[key] for row in rows if row[key] is not None] + [math.inf] * failed
        at = metrics.percentile(values, _split(key)[1])
        checks[key] = {
            "limit": limit,
            "observed": at if at is not None and math.isfinite(at) else None,
            "met": None if at is None else at <= limit,
        }

    total = len(recs)
    return SLOOutcome(
        goodput=met / duration_s * (time_scale or 1.0) if duration_s is not None and duration_s > 0 else None,
        slo_attainment=met / total if total else None,
        slo_met=all(check["met"] is not False for check in checks.values()) if total else None,
        met_requests=met,
        total_requests=total,
        checks=checks,
    )
