"""HTTP/1.1 for the load generator: keep-alive connections whose protocol hands each
response's body straight to its reader, inside ``data_received``.

Why not aiohttp here: a streamed token costs aiohttp's client about half of our CPU per
token (its protocol's ``data_received``, the payload ``StreamReader``'s feed and read,
flow control, and a task wake for every socket read; bench/README.md, issue 17).  This
module reads a stream with one Python call per socket read and wakes the request's task
once, when its response ends.  It speaks only what a load generator needs: one request
at a time per connection (no pipelining), requests written whole, responses framed by
``Transfer-Encoding: chunked``, ``Content-Length`` or the connection's close, no content
coding (no ``Accept-Encoding`` is sent), no redirects, cookies or proxies.  Anything else
in a response is a :class:`ProtocolError`, never guessed at.

Arrival times: each read is stamped, before it is parsed, with the return of the event
loop poll that reported it (:class:`~sweepcore.loadgen.stamping.PollStampSelector`, when
installed on the loop) or else with ``perf_counter()`` on entry.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from urllib.parse import urlsplit

from sweepcore.loadgen.stamping import PollStampSelector

#: Longest response head (status line and headers) or chunk-size line accepted.
MAX_HEAD = 65536
MAX_CHUNK_LINE = 4096
#: Bytes one socket read may take (asyncio's own transports read up to 256 KiB).
READ_BUFFER = 256 * 1024
# Chunk sizes as servers write them (lower-case hex), looked up rather than parsed: a
# dict lookup costs half an int(..., 16) on the per-chunk path; others are parsed.
_CHUNK_SIZES = {b"%x" % n: n for n in range(1, 1 << 13)}

_HEAD, _CHUNKED, _LENGTH, _TO_CLOSE, _IDLE = range(5)


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response this client can read."""


class Exchange:
    """What a connection reports about one request: its response's head, its body as
    it arrives, and how it ended.  Subclassed by the request functions."""

    def head(self, status: int, headers: dict[str, str]) -> None:
        """The status and headers (names lower-cased; repeated ones joined by ", ")."""

    def body(self, pieces: list[bytes], rx: float) -> bool:
        """Body bytes of one read, in pieces (the data of each chunk, in order), and the
        ``perf_counter()`` they arrived at.  Returns True when nothing more of the body
        is wanted (the rest is read and dropped)."""
        return False

    def end(self, error: BaseException | None, response_started: bool) -> None:
        """Called once: the response is complete (``error`` None), or the connection
        failed first (``error``; ``response_started``: some of the response was read)."""


class Connection(asyncio.BufferedProtocol):
    """One keep-alive connection of a :class:`Pool`, reading one response at a time.

    A buffered protocol: the socket is read into the pool's one buffer and only the
    bytes read are copied out (a plain protocol's transport allocates 256 KiB for every
    read and shrinks it to what came; measured: 3.11 -> 3.03 us of CPU per token, one
    run each, bench/README.md)."""

    def __init__(self, pool: Pool, selector: PollStampSelector | None):
        self.pool = pool
        self.sel = selector
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.exchange: Exchange | None = None  # the request in flight; None once it ended
        self.phase = _IDLE
        self.buf = b""  # an incomplete head, chunk-size line or chunk end
        self.left = 0  # _LENGTH: body bytes to come; _CHUNKED: bytes of this chunk to come
        self.in_data = False  # _CHUNKED: inside a chunk's data (else at a size line)
        self.keep_alive = True
        self.started = False  # some of the current response was read
        self.used = 0  # responses read on this connection

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.pool.discard(self)
        if self.phase == _TO_CLOSE:
            self._message_done()  # a body framed by the close is complete now
            return
        ex, self.exchange = self.exchange, None
        if ex is not None:
            why = exc if exc is not None else ConnectionResetError("the server closed the connection")
            ex.end(why, self.started)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.pool.read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(self.pool.read_buffer[:nbytes]))

    def data_received(self, data: bytes) -> None:
        sel = self.sel
        rx = sel.t if sel is not None else time.perf_counter()
        try:
            if self.phase == _CHUNKED and not self.buf:
                self._chunked(data, rx)
            else:
                self._feed(data, rx)
        except ProtocolError as e:
            self._fail(e)

    # ----------------------------------------------------------------------- requests

    def send(self, request: bytes, exchange: Exchange) -> float:
        """Write ``request`` (head and body, whole) and read its response into
        ``exchange``.  Returns the ``perf_counter()`` after the request was handed to
        the socket.  Raises ConnectionError if the connection is closing."""
        t = self.transport
        if self.closed or t is None or t.is_closing():
            raise ConnectionResetError("the connection closed before the request was sent")
        self.exchange = exchange
        self.phase, self.buf, self.started = _HEAD, b"", False
        t.write(request)
        return time.perf_counter()

    def abort(self) -> None:
        """Drop the request in flight (its exchange is not told) and close the connection."""
        self.exchange = None
        self.closed = True
        self.pool.discard(self)
        if self.transport is not None:
            self.transport.abort()

    # ------------------------------------------------------------------------ parsing

    def _feed(self, data: bytes, rx: float) -> None:
        if self.buf:
            data, self.buf = self.buf + data, b""
        while data:
            phase = self.phase
            if phase == _CHUNKED:
                self._chunked(data, rx)
                return
            if phase == _HEAD:
                data = self._head(data)
            elif phase == _LENGTH:
                take = data[: self.left]
                self.left -= len(take)
                data = data[len(take):]
                if take:
                    self._deliver([take], rx)
                if not self.left:
                    self._message_done()
            elif phase == _TO_CLOSE:
                self._deliver([data], rx)
                return
            else:  # _IDLE: bytes nobody asked for
                raise ProtocolError(f"{len(data)} bytes arrived outside a response")

    def _head(self, data: bytes) -> bytes:
        self.started = True
        end = data.find(b"\r\n\r\n")
        if end < 0:
            if len(data) > MAX_HEAD:
                raise ProtocolError(f"response head longer than {MAX_HEAD} bytes")
            self.buf = data
            return b""
        lines = data[:end].decode("latin-1").split("\r\n")
        rest = data[end + 4:]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:200]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise ProtocolError(f"malformed header line: {line[:200]!r}")
            name, value = name.lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if 100 <= status < 200:
            return rest  # an interim answer (100 Continue, 103 Early Hints): the real one follows
        conn = headers.get("connection", "").lower()
        self.keep_alive = parts[0] == "HTTP/1.1" and "close" not in conn
        if self.exchange is not None:
            self.exchange.head(status, headers)
        te = headers.get("transfer-encoding", "").lower()
        if status in (204, 304):
            self._message_done()
            return rest
        if te:
            if te.replace(" ", "").split(",")[-1] != "chunked":
                raise ProtocolError(f"unsupported Transfer-Encoding: {te}")
            self.phase, self.left, self.in_data = _CHUNKED, 0, False
        elif "content-length" in headers:
            cl = headers["content-length"]
            if not cl.isdigit():
                raise ProtocolError(f"bad Content-Length: {cl!r}")
            self.phase, self.left = _LENGTH, int(cl)
            if not self.left:
                self._message_done()
        else:
            self.phase, self.keep_alive = _TO_CLOSE, False
        return rest

    def _chunked(self, data: bytes, rx: float) -> None:
        # The per-read path of a streamed response: a server writes each event as a
        # chunk, so a read holds whole chunks, one or dozens; each chunk's data is
        # handed on as its own slice (no join: the event scan takes a list).
        pieces: list[bytes] = []
        pos, n = 0, len(data)
        try:
            if not self.in_data and not self.left:
                find, sizes = data.find, _CHUNK_SIZES
                while True:  # whole chunks, as long as they last
                    nl = find(b"\r\n", pos)
                    if nl < 0 or nl - pos > 8:
                        break
                    size = sizes.get(data[pos:nl])
                    if size is None:  # a long chunk, an upper-case size, an extension: parsed
                        try:
                            size = int(data[pos:nl], 16)
                        except ValueError:
                            break  # a chunk extension, or garbage: _dechunk says which
                    start = nl + 2
                    end = start + size
                    if size <= 0 or end + 2 > n or not data.startswith(b"\r\n", end):
                        break
                    pieces.append(data[start:end])
                    pos = end + 2
            extra = self._dechunk(data, pos, pieces) if pos < n else 0
        finally:
            if pieces:
                self._deliver(pieces, rx)
        if self.phase == _IDLE and self.left == -3:
            self.left = 0
            self._message_done()
            if extra:
                raise ProtocolError(f"{extra} bytes arrived after the response")

    def _dechunk(self, data: bytes, pos: int, out: list) -> int:
        """The chunks' data in ``data[pos:]`` into ``out``: any split, extensions,
        trailers.  At the end of the message it leaves ``left = -3`` (the caller ends
        the message once the data is delivered) and returns how many bytes came after
        it (0 in a well-behaved stream)."""
        n = len(data)
        while pos < n:
            if self.in_data:
                end = pos + self.left
                if end > n:
                    out.append(data[pos:] if pos else data)
                    self.left = end - n
                    return 0
                out.append(data[pos:end])
                pos = end
                self.in_data = False
                self.left = -2  # the CRLF after the data
            nl = data.find(b"\r\n", pos)
            if nl < 0:
                self.buf = data[pos:]
                if len(self.buf) > MAX_HEAD:
                    raise ProtocolError("chunk-size line or trailers too long")
                return 0
            if self.left == -2:
                if nl != pos:
                    raise ProtocolError("chunk data longer than its size")
                self.left = 0
                pos = nl + 2
                continue
            line = data[pos:nl]
            semi = line.find(b";")
            try:
                size = int(line if semi < 0 else line[:semi], 16)
            except ValueError:
                raise ProtocolError(f"bad chunk-size line: {line[:100]!r}") from None
            if size < 0 or nl - pos > MAX_CHUNK_LINE:
                raise ProtocolError(f"bad chunk-size line: {line[:100]!r}")
            if size == 0:  # the last chunk; trailers, if any, end with an empty line
                if data.startswith(b"\r\n", nl + 2):
                    end = nl + 4
                else:
                    end = data.find(b"\r\n\r\n", nl + 2)
                    if end < 0:  # kept whole, "0" line included, until the empty line comes
                        self.buf = data[pos:]
                        if len(self.buf) > MAX_HEAD:
                            raise ProtocolError("chunked trailers too long")
                        return 0
                    end += 4
                self.phase, self.left = _IDLE, -3
                return n - end  # bytes after the response: the caller refuses them once it ended
            pos = nl + 2
            self.left = size
            self.in_data = True
        return 0

    def _deliver(self, pieces: list, rx: float) -> None:
        ex = self.exchange
        if ex is not None and ex.body(pieces, rx):
            # The reader has what it wants: tell it now; the rest is read and dropped so
            # that the connection can serve the next request.
            self.exchange = None
            ex.end(None, True)

    def _message_done(self) -> None:
        ex, self.exchange = self.exchange, None
        self.phase, self.buf = _IDLE, b""
        self.used += 1
        if ex is not None:
            ex.end(None, True)
        if self.keep_alive and not self.closed:
            self.pool.release(self)
        elif not self.closed:
            self.closed = True
            self.transport.close()

    def _fail(self, error: ProtocolError) -> None:
        ex, self.exchange = self.exchange, None
        self.abort()
        if ex is not None:
            ex.end(error, self.started)


class Pool:
    """Keep-alive connections to one server (``http://`` or ``https://`` base URL)."""

    def __init__(self, base_url: str, connect_timeout: float = 10.0):
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if u.scheme == "https" else None
        default = 443 if u.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if self.port == default else f"{host}:{self.port}"
        self.base_path = u.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.idle: list[Connection] = []
        self.open: set[Connection] = set()
        # Every connection reads into this one buffer: a read is handed on (copied out)
        # before the loop runs anything else, so one buffer serves them all.
        self.read_buffer = memoryview(bytearray(READ_BUFFER))

    def request_bytes(self, method: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        """A whole request: ``method`` ``path`` (below the base URL's path) with ``body``."""
        lines = [f"{method} {self.base_path}{path} HTTP/1.1", f"Host: {self.host_header}",
                 "User-Agent: sweeplab-loadgen"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def connection(self, fresh: bool = False) -> Connection:
        """An idle connection (the most recently used), else a new one; ``fresh``: new.
        Raises OSError (``TimeoutError`` after ``connect_timeout``) when none can be made."""
        while self.idle and not fresh:
            c = self.idle.pop()
            if not c.closed and not c.transport.is_closing():
                return c
        loop = asyncio.get_running_loop()
        sel = getattr(loop, "_selector", None)
        sel = sel if isinstance(sel, PollStampSelector) else None
        async with asyncio.timeout(self.connect_timeout):
            _, conn = await loop.create_connection(lambda: Connection(self, sel), self.host, self.port,
                                                   ssl=self.ssl)
        self.open.add(conn)
        return conn

    def release(self, conn: Connection) -> None:
        self.idle.append(conn)

    def discard(self, conn: Connection) -> None:
        self.open.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)

    async def close(self) -> None:
        for c in list(self.open):
            c.abort()
        self.open.clear()
        self.idle.clear()
        await asyncio.sleep(0)  # let the transports' connection_lost run

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
