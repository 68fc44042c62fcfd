"""A point's measurement judged without a server or a database: its status from its
requests, why it stopped early, when an ``until_stable`` rule has seen enough, the repeats of
a point pooled into one load, and what ended a run that was Sweeplab's own fault. The worker
(runs/worker/executor.py) does the I/O and calls these; issue 34 moves the rest of a point's
decisions here.
"""

import errno

from sweepcore import loadgen, metrics
from sweepcore.kinds import FailureKind, PointStatus, RequestErrorKind

CONNECTION_ERRORS = {RequestErrorKind.CONNECTION_REFUSED, RequestErrorKind.CONNECTION_LOST_MID_STREAM}
TIMEOUT_ERRORS = {RequestErrorKind.TIMEOUT_FIRST_TOKEN, RequestErrorKind.TIMEOUT_STALL, RequestErrorKind.TIMEOUT_TOTAL}


def point_status(results, server_alive):
    """(status, reason) of a measured point from its request results.

    A point is ``ok`` only when every request succeeded with output tokens. A server
    that died during it makes it ``crashed`` (the caller handles the rest of the run)."""
    errors = [r for r in results if r.error_kind]
    lost = [r for r in errors if r.error_kind in CONNECTION_ERRORS]
    if not server_alive or lost:
        example = lost[0].error if lost else "the server process exited"
        return PointStatus.CRASHED, f"the server died during this point: {example}"
    overflow = [r for r in errors if r.error_kind == "context_overflow"]
    if overflow:
        return PointStatus.CONTEXT_OVERFLOW, f"the server refused the length: {overflow[0].error}"
    timeouts = [r for r in errors if r.error_kind in TIMEOUT_ERRORS]
    if timeouts:
        return PointStatus.TIMEOUT, f"{len(timeouts)} of {len(results)} requests timed out: {timeouts[0].error}"
    if errors:
        kinds = sorted({r.error_kind for r in errors})
        return PointStatus.FAILED, f"{len(errors)} of {len(results)} requests failed ({', '.join(kinds)}): {errors[0].error}"
    if not results or not sum(r.output_tokens for r in results):
        return PointStatus.FAILED, "no output tokens"
    return PointStatus.OK, ""


def internal_failure(exc):
    """(failure kind, cause) of an exception of Sweeplab's own that ended a run: a full
    disk says so and where, anything else is an internal error. Both are
    sweepcore.kinds.INFRASTRUCTURE_FAILURES: resume measures the run's remaining points."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        where = f" on {exc.filename}" if exc.filename else ""
        return FailureKind.DISK_FULL, f"no space left{where}: {exc.strerror or exc}"
    return FailureKind.INTERNAL, f"Sweeplab internal error: {exc.__class__.__name__}: {exc}"


def measured_window(results):
    """Wall seconds from the first send to the last token arrived so far."""
    sent = [r.send_time for r in results]
    if not sent:
        return 0.0
    ends = [r.send_time + (r.chunk_offsets[-1] if r.chunk_offsets else 0.0) for r in results]
    return max(ends) - min(sent)


def stability_note(until, results, min_duration_s=0.0):
    """(stable, words) for an ``until_stable`` rule over a load's results so far. Stable
    also needs a window of at least ``min_duration_s`` (the verdict's own minimum), so
    that the rule never stops on evidence the verdict would call thin."""
    metric, limit = until["metric"], until["rel_ci"]
    rel, n = metrics.stability(metric, results)
    window = measured_window(results)
    stable = rel is not None and n >= until["min_requests"] and rel <= limit and window >= min_duration_s
    spread = f"±{rel * 100:.1f} %" if rel is not None else f"without an interval ({n} completed)"
    if stable:
        return True, f"stable: {metric} {spread} after {n} requests (limit ±{limit * 100:g} %)"
    short = f", a {window:.2f} s window (at least {min_duration_s:g} s)" if window < min_duration_s else ""
    return False, (f"max_requests: {len(results)} requests sent, {metric} still {spread}{short} "
                   f"(limit ±{limit * 100:g} %)")


def keep_going_until_stable(until, min_duration_s=0.0):
    """LoadConfig.keep_going for an ``until_stable`` rule: send while the metric's
    interval is wider than asked, fewer than min_requests completed or the window is
    shorter than the verdict's minimum -- and never once a request lost its connection
    (the server is gone: more requests would only be refused)."""
    def keep_going(results):
        if any(r.error_kind in CONNECTION_ERRORS for r in results):
            return False
        return not stability_note(until, results, min_duration_s)[0]
    return keep_going


def stall_note(stalled, results, hang):
    """Why a point stopped sending early: `stalled` (a RequestResult) met a silence limit;
    `hang` is what the health probe then said ('' when the server answered)."""
    ended = sum(r.error_kind == RequestErrorKind.STOPPED_AFTER_STALL for r in results)
    ended_words = f", ending {ended} request(s) in flight unfinished" if ended else ""
    said = f"request {stalled.index} timed out ({stalled.error}); the point stopped sending{ended_words}"
    if hang:
        return f"{said}, and the server did not answer its health probe: {hang}"
    return f"{said}; the server answered its health probe again, so the run went on"


def pooled_result(loads):
    """One LoadResult of several loads sent back to back (the repeats of a point): their
    requests together, the measured windows added (the pauses between repeats are not
    measured), the client's own figures over all of them."""
    if len(loads) == 1:
        return loads[0]
    duration = sum(load.duration for load in loads)
    lags = [lag for load in loads for lag in load.lag_samples_ms]
    cpu = sum(load.client_cpu_s for load in loads)
    p99 = metrics.percentile(lags, 99)
    return loadgen.LoadResult(
        results=[r for load in loads for r in load.results],
        duration=duration,
        start_time=loads[0].start_time,
        lag_samples_ms=lags,
        event_loop_lag_p99_ms=p99,
        client_cpu_s=cpu,
        client_cpu_fraction=cpu / duration if duration > 0 else 0.0,
        client_bound=any(load.client_bound for load in loads),
    )


def repeat_figures(load, time_scale=None):
    """One repeat's own figures, kept in point.extra["repeats"] (model time when simulated)."""
    summary = load.summary()
    if time_scale:
        summary = metrics.to_model_time(summary, time_scale)
    return {key: summary[key] for key in ("duration", "completed", "output_throughput", "request_throughput",
                                          "decode_tok_s")}


def forces_length(extra_body):
    """Whether the engine's request body forces the output length (ignore_eos or a
    logit_bias that bans the end tokens), so that every request returns max_new_tokens."""
    return bool(extra_body.get("ignore_eos") or extra_body.get("logit_bias"))
