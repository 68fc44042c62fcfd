"""Arrival-time stamping: the load generator's one hook into asyncio's private names.

``loop._selector`` is wrapped by :class:`PollStampSelector`, which stamps the return of
every poll (:func:`install_poll_stamp`); the connections of :mod:`sweepcore.loadgen.http1`
read that stamp for each read before they parse it.  The hook is checked when installed
and when used: a loop without the private raises :class:`StampingError`, and response
bytes read with a stamp older than their request's send (the loop no longer polls
through the wrapper) make the load fail with it too, instead of silently measuring with
a coarser clock.  The send time is taken by the connection itself, right after the whole
request is handed to the socket (:meth:`sweepcore.loadgen.http1.Connection.send`).
"""

from __future__ import annotations

import time
from typing import Callable


class StampingError(RuntimeError):
    """The hook into asyncio could not be installed or did not take effect."""


class PollStampSelector:
    """Wraps an event loop's selector; ``t`` is the ``perf_counter()`` its last poll returned.

    Every socket that poll reported readable had its bytes in the kernel by then, so
    ``t`` bounds their arrival from above without the time the loop then spends reading
    and parsing the other ready sockets of the same batch (hundreds of microseconds at
    high concurrency).  Everything else is delegated to the wrapped selector.
    """

    def __init__(self, inner):
        self._inner = inner
        self.t = time.perf_counter()

    def select(self, timeout=None):
        ev = self._inner.select(timeout)
        self.t = time.perf_counter()
        return ev

    def __getattr__(self, name):
        return getattr(self._inner, name)


def install_poll_stamp(loop) -> Callable[[], None]:
    """Wrap ``loop``'s selector; returns the undo.  Raises :class:`StampingError` for a
    loop without one (not asyncio's selector event loop, or a renamed private)."""
    inner = getattr(loop, "_selector", None)
    if isinstance(inner, PollStampSelector):
        return lambda: None  # a load already running on this loop installed it
    if inner is None or not callable(getattr(inner, "select", None)):
        raise StampingError(
            f"{type(loop).__name__} has no _selector with a select() to stamp its polls; "
            "the load generator needs asyncio's selector event loop"
        )
    loop._selector = PollStampSelector(inner)

    def undo() -> None:
        if isinstance(loop._selector, PollStampSelector):
            loop._selector = inner

    return undo
