"""Arrival-time and send-time stamping: the load generator's only hooks into aiohttp's
and asyncio's private names.

Three hooks, each checked when installed and when used, so that a renamed private makes
the load fail with :class:`StampingError` instead of silently measuring with a coarser
clock:

* ``loop._selector`` is wrapped by :class:`PollStampSelector`, which stamps the return of
  every poll (:func:`install_poll_stamp`);
* ``TCPConnector._factory`` (a ``functools.partial`` of
  ``aiohttp.client_proto.ResponseHandler``) is replaced so that every connection's
  protocol is a :class:`StampingHandler` (:func:`stamping_connector`);
* ``ResponseHandler.data_received`` is overridden to stamp the bytes it is handed; a
  response read with no stamp taken since its request was sent raises
  (:meth:`StampingHandler.since`).

The send time comes from aiohttp's public tracing (:func:`send_stamp_trace`).
"""

from __future__ import annotations

import functools
import time
from typing import Callable

import aiohttp
from aiohttp.client_proto import ResponseHandler


class StampingError(RuntimeError):
    """A hook into aiohttp or asyncio could not be installed or did not take effect."""


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


class StampingHandler(ResponseHandler):
    """aiohttp's connection protocol, stamping when bytes come off the socket.

    ``rx_time`` is when the latest bytes reached the process: the return of the event
    loop's poll that reported them (see :class:`PollStampSelector`), else the
    ``perf_counter()`` at which the transport handed them to the protocol.  Either is
    taken before aiohttp parses the bytes, wakes the reading task and that task gets its
    turn on the loop.  ``readany()`` drains everything fed so far, so the data it returns
    arrived no later than the ``rx_time`` read right after it.
    """

    rx_time = 0.0

    def __init__(self, loop) -> None:
        super().__init__(loop)
        self._stamp_loop = loop  # our own reference: aiohttp's _loop is not ours to read

    def data_received(self, data: bytes) -> None:
        if data:  # aiohttp calls it with b"" to resume its parser: no bytes arrived then
            sel = self._stamp_loop._selector
            self.rx_time = sel.t if isinstance(sel, PollStampSelector) else time.perf_counter()
        super().data_received(data)

    def since(self, t0: float) -> float:
        """Seconds from ``t0`` (the send, ``perf_counter()``) to the latest bytes' arrival.

        Bytes of a response arrive after its request was sent, so a stamp older than
        ``t0`` means no hook stamped them: aiohttp no longer feeds this protocol through
        ``data_received``, or the loop no longer polls through ``loop._selector``.
        """
        rx = self.rx_time
        if rx < t0:
            raise StampingError(
                "response bytes were read but none was stamped since the request was sent: "
                "aiohttp no longer calls ResponseHandler.data_received, or asyncio no longer "
                "polls through loop._selector"
            )
        return rx - t0


def stamping_connector(**kwargs) -> aiohttp.TCPConnector:
    """A ``TCPConnector(**kwargs)`` whose connections use :class:`StampingHandler`.

    Raises :class:`StampingError` when aiohttp no longer builds its protocols from a
    ``_factory`` partial of ``ResponseHandler``.
    """
    connector = aiohttp.TCPConnector(**kwargs)
    use_stamping_handler(connector)
    return connector


def use_stamping_handler(connector: aiohttp.BaseConnector) -> None:
    """Make ``connector`` build :class:`StampingHandler` protocols (see :func:`stamping_connector`)."""
    factory = getattr(connector, "_factory", None)
    if not (isinstance(factory, functools.partial) and factory.func is ResponseHandler):
        raise StampingError(
            f"{type(connector).__name__}._factory is {factory!r}, not a functools.partial of "
            "aiohttp.client_proto.ResponseHandler: arrival times could not be stamped"
        )
    connector._factory = functools.partial(StampingHandler, *factory.args, **factory.keywords)


def handler_of(response: aiohttp.ClientResponse) -> StampingHandler | None:
    """The stamping protocol ``response`` is read from.

    None when aiohttp has already released the connection: the whole response came with
    its headers and is buffered, so the ``perf_counter()`` at reading bounds its arrival.
    Raises :class:`StampingError` for a connection whose protocol does not stamp.
    """
    conn = response.connection
    proto = conn.protocol if conn is not None else None
    if proto is None:
        return None
    if not isinstance(proto, StampingHandler):
        raise StampingError(
            f"the response is read from a {type(proto).__name__}, not a StampingHandler: "
            "aiohttp no longer builds connections through TCPConnector._factory"
        )
    return proto


async def _on_chunk_sent(session, ctx, params) -> None:
    holder = ctx.trace_request_ctx
    if holder is not None:
        holder[0] = time.perf_counter()


def send_stamp_trace() -> aiohttp.TraceConfig:
    """A trace that stamps the moment a request's body is handed to the socket.

    aiohttp fires ``on_request_chunk_sent`` as it writes each chunk of the body.  Pass a
    one-element list as ``trace_request_ctx``; its item becomes that ``perf_counter()``
    (the last chunk's, for a body written in several).
    """
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_on_chunk_sent)
    return trace
