"""The verdict on a measured point: ``valid``, ``suspect`` or ``invalid``, with the
reasons.  Pure Python, no Django.

:func:`judge` applies every rule whose evidence exists and returns the worst severity
with one :class:`Reason` per rule broken (a machine-readable ``code`` and a sentence).
Each threshold is a field of :class:`Thresholds`; the settings (``SWEEPLAB_VALIDITY``)
override them, and docs/metrics.md lists them.

==================  ========  =========================================================
code                severity  when
==================  ========  =========================================================
client_bound        invalid   the client's event-loop lag p99 or its CPU share over the
                              limit: the number describes the client, not the server
failed_requests     invalid   the share of failed requests is over the limit
                    suspect   some requests failed, within the limit
nothing_completed   invalid   no request completed
below_resolution    invalid   too many of the point's chunks arrived closer together
                              than the client can stamp (a simulator at a tiny time
                              scale; two chunks in one read)
host_busy           suspect   another process used more than a share of a core
cpu_steal           suspect   the hypervisor stole more than a share of the CPU time
gpu_shared          suspect   another process used the run's GPUs
few_requests        suspect   fewer completed requests than ``min_requests``
short_window        suspect   a measured window shorter than ``min_duration_s``
output_length       suspect   completed requests returned another number of tokens
                              than asked (ignore_eos / logit_bias not honoured)
prompt_mismatch     suspect   the server counted another prompt length than asked
server_disagrees    suspect   the server's own decode speed differs from ours by more
                              than a share
==================  ========  =========================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Iterable, Mapping

from sweepcore.kinds import Validity
from sweepcore.metrics import _get, is_success

VALID, SUSPECT, INVALID = Validity.VALID, Validity.SUSPECT, Validity.INVALID
_RANK = {VALID: 0, SUSPECT: 1, INVALID: 2}


@dataclass(frozen=True)
class Thresholds:
    client_lag_p99_ms: float = 5.0
    client_cpu_share: float = 0.9  # of one core
    max_failed_share: float = 0.05
    min_chunk_gap_ms: float = 0.1  # closer than this, two chunks cannot be told apart
    max_unresolved_share: float = 0.05  # of a point's chunk gaps
    foreign_cpu_share: float = 0.25  # of one core, by any one other process
    steal_share: float = 0.05
    foreign_gpu_util_pct: float = 5.0
    min_requests: int = 5
    min_duration_s: float = 1.0
    server_client_rel_diff: float = 0.2

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> "Thresholds":
        """Defaults overridden by ``values``; an unknown name is a ValueError."""
        values = dict(values or {})
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown validity threshold(s): {', '.join(unknown)}; known: {', '.join(known)}")
        defaults = cls()
        return cls(**{name: type(getattr(defaults, name))(values.get(name, getattr(defaults, name)))
                      for name in known})


@dataclass(frozen=True)
class Reason:
    code: str
    message: str
    severity: str

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message}


@dataclass(frozen=True)
class PointVerdict:
    validity: str
    reasons: tuple

    def reasons_json(self) -> list[dict]:
        return [r.as_dict() for r in self.reasons]


def chunk_gaps(records: Iterable[Any]) -> list[float]:
    """Wall seconds between consecutive token-carrying chunks of each completed request."""
    gaps: list[float] = []
    for r in records:
        if not is_success(r):
            continue
        offs = _get(r, "chunk_offsets") or []
        gaps.extend(b - a for a, b in zip(offs, offs[1:]))
    return gaps


def judge(
    records: Iterable[Any] | None,
    summary: Mapping[str, Any],
    *,
    thresholds: Thresholds = Thresholds(),
    client_cpu_share: float | None = None,
    host: Any = None,
    asked_output_tokens: int | None = None,
    asked_prompt_tokens: int | None = None,
    server_prompt_tokens: Iterable[int] = (),
) -> PointVerdict:
    """The verdict on one measured point.

    ``records``: its requests (RequestResult, rows or dicts; None for an import without
    them); ``summary``: its metrics as :func:`sweepcore.metrics.summarize` names them (in
    wall time); ``host``: a :class:`sweepcore.hostload.HostLoad` or its dict; the asked
    lengths are what the point requested."""
    t = thresholds
    reasons: list[Reason] = []

    def add(code: str, severity: str, message: str) -> None:
        reasons.append(Reason(code, message, severity))

    completed = int(summary.get("completed") or 0)
    failed = int(summary.get("failed") or 0)
    total = completed + failed

    # The client.
    lag = summary.get("event_loop_lag_p99_ms")
    if lag is not None and lag > t.client_lag_p99_ms:
        add("client_bound", INVALID,
            f"the client's event loop lagged {lag:.2f} ms p99 (limit {t.client_lag_p99_ms:g} ms)")
    elif client_cpu_share is not None and client_cpu_share > t.client_cpu_share:
        add("client_bound", INVALID,
            f"the client used {client_cpu_share:.0%} of a core (limit {t.client_cpu_share:.0%})")
    elif summary.get("client_bound") and lag is None and client_cpu_share is None:
        add("client_bound", INVALID, "the client was saturated during the measurement")

    # Errors.
    if total and completed == 0:
        add("nothing_completed", INVALID, f"none of the {total} requests completed")
    elif failed:
        share = failed / total
        severity = INVALID if share > t.max_failed_share else SUSPECT
        add("failed_requests", severity,
            f"{failed} of {total} requests failed ({share:.0%}; limit {t.max_failed_share:.0%})")

    # Timing resolution.
    if records is not None:
        records = list(records)
        gaps = chunk_gaps(records)
        if gaps:
            close = sum(1 for g in gaps if g * 1000 < t.min_chunk_gap_ms)
            share = close / len(gaps)
            if share > t.max_unresolved_share:
                add("below_resolution", INVALID,
                    f"{share:.0%} of the chunk gaps were under {t.min_chunk_gap_ms:g} ms, closer than the client "
                    f"can stamp (limit {t.max_unresolved_share:.0%})")

    # The host.
    if host is not None:
        host = host if isinstance(host, Mapping) else host.as_dict()
        busy = [p for p in host.get("foreign") or [] if p["cores"] > t.foreign_cpu_share]
        if busy:
            named = ", ".join(f"{p['name']} (pid {p['pid']}) {p['cores']:.0%} of a core" for p in busy[:3])
            load = host.get("loadavg_1m")
            add("host_busy", SUSPECT,
                f"other processes used the CPU during the measurement: {named} (limit "
                f"{t.foreign_cpu_share:.0%} of a core{f'; load average {load:.2f}' if load is not None else ''})")
        steal = host.get("steal_share")
        if steal is not None and steal > t.steal_share:
            add("cpu_steal", SUSPECT, f"the hypervisor stole {steal:.0%} of the CPU time (limit {t.steal_share:.0%})")
        on_gpu = [p for p in host.get("gpu_foreign") or []
                  if p.get("gpu_util_pct") is None or p["gpu_util_pct"] > t.foreign_gpu_util_pct]
        if on_gpu:
            named = ", ".join(
                f"{p['name']} (pid {p['pid']}) on GPU {p['gpu_index']}"
                + (f" at {p['gpu_util_pct']:.0f} % SM" if p.get("gpu_util_pct") is not None else "")
                for p in on_gpu[:3])
            add("gpu_shared", SUSPECT, f"other processes used the run's GPUs: {named}")

    # Evidence.
    if 0 < completed < t.min_requests:
        add("few_requests", SUSPECT, f"only {completed} requests completed (at least {t.min_requests} wanted)")
    duration = summary.get("duration")
    if duration is not None and completed and duration < t.min_duration_s:
        add("short_window", SUSPECT,
            f"the measured window was {duration:.2f} s (at least {t.min_duration_s:g} s wanted)")
    if records is not None and asked_output_tokens:
        outs = [int(_get(r, "output_tokens") or 0) for r in records if is_success(r)]
        off = [o for o in outs if o != asked_output_tokens]
        if off:
            add("output_length", SUSPECT,
                f"{len(off)} of {len(outs)} requests returned {min(off)}–{max(off)} output tokens, not the "
                f"{asked_output_tokens} asked (ignore_eos / logit_bias not honoured)")

    # Server and client.
    counted = sorted(set(server_prompt_tokens))
    if asked_prompt_tokens is not None and counted and counted != [asked_prompt_tokens]:
        add("prompt_mismatch", SUSPECT,
            f"the server counted {', '.join(map(str, counted))} prompt tokens where {asked_prompt_tokens} were asked")
    ours, theirs = summary.get("decode_tok_s"), summary.get("server_decode_tok_s")
    if ours and theirs:
        diff = abs(theirs - ours) / ours
        if diff > t.server_client_rel_diff:
            add("server_disagrees", SUSPECT,
                f"the server reported {theirs:.1f} tok/s decode, we measured {ours:.1f} ({diff:.0%} apart; "
                f"limit {t.server_client_rel_diff:.0%})")

    worst = max((r.severity for r in reasons), key=_RANK.__getitem__, default=VALID)
    return PointVerdict(worst, tuple(reasons))


def thresholds_doc() -> dict:
    """The default thresholds, for docs and the API."""
    return asdict(Thresholds())
