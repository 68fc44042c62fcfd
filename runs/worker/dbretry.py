"""One way for the worker side to outlive a database that goes away for a while (PostgreSQL
restarted, a connection dropped, SQLite locked): a call that fails with a connection error
closes the thread's connection (Django opens a new one on the next query) and is tried
again after a growing pause, within a time budget; past it the error is raised.

Only a whole transaction is tried again: inside an atomic block a failed statement has
spoilt the transaction, so the call is made once and its error goes up to the outermost
call that retries (RunStore's writes are each one transaction: see `retrying`)."""

import functools
import logging
import os
import threading
import time
from contextlib import contextmanager

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

#: What a dropped or refused database connection raises (Django wraps the driver's errors).
DB_ERRORS = (OperationalError, InterfaceError)

#: The first pause between two tries, and the longest.
FIRST_PAUSE_S = 0.5
LONGEST_PAUSE_S = 5.0


_local = threading.local()


def retry_budget_s():
    """Seconds a worker keeps trying one database call before it gives up
    (SWEEPLAB_DB_RETRY_S, default 300): a restart takes seconds, an outage longer than this
    leaves the run to be taken over once the database is back. Inside `budget(s)`, s."""
    override = getattr(_local, "budget_s", None)
    return override if override is not None else float(os.environ.get("SWEEPLAB_DB_RETRY_S", 300))


@contextmanager
def budget(seconds):
    """The calls made in this block (in this thread) try for at most `seconds`: for writes
    that matter less than the time they would hold up (a teardown's timeline events)."""
    before = getattr(_local, "budget_s", None)
    _local.budget_s = seconds
    try:
        yield
    finally:
        _local.budget_s = before


def reconnect():
    """Drop this thread's connection, so that the next query opens a new one."""
    try:
        connection.close()
    except DB_ERRORS:
        pass  # closing a dead connection can fail too; it is gone either way


def pauses(first=None, longest=None):
    """first, 2·first, 4·first … at most `longest` (default FIRST_PAUSE_S, LONGEST_PAUSE_S), for ever."""
    pause = FIRST_PAUSE_S if first is None else first
    longest = LONGEST_PAUSE_S if longest is None else longest
    while True:
        yield pause
        pause = min(pause * 2, longest)


class Stopped(Exception):
    """The retries were stopped from outside (the `stop` event was set)."""


def call_with_retry(fn, *args, what=None, budget_s=None, stop=None, longest_pause_s=None, **kwargs):
    """`fn(*args, **kwargs)`, tried again on a connection error (DB_ERRORS) after
    reconnecting and a pause (`pauses`, at most `longest_pause_s`), for at most `budget_s`
    seconds (retry_budget_s); then the last error is raised. `stop`: a threading.Event
    that, once set, ends the pauses (raising Stopped). Inside an atomic block `fn` is
    called once."""
    if connection.in_atomic_block:
        return fn(*args, **kwargs)
    what = what or getattr(fn, "__qualname__", repr(fn))
    deadline = time.monotonic() + (retry_budget_s() if budget_s is None else budget_s)
    for tries, pause in enumerate(pauses(longest=longest_pause_s), start=1):
        try:
            return fn(*args, **kwargs)
        except DB_ERRORS as exc:
            reconnect()
            if time.monotonic() + pause > deadline:
                log.error("database unreachable during %s after %d tries; giving up: %s", what, tries, exc)
                raise
            log.warning("database unreachable during %s (%s); trying again in %.1f s", what,
                        str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, pause)
        if stop is None:
            time.sleep(pause)
        elif stop.wait(pause):
            raise Stopped(what)


def retrying(fn):
    """A method or function whose every call goes through `call_with_retry`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return call_with_retry(fn, *args, what=fn.__qualname__, **kwargs)

    return wrapper
