"""sweepcore.loadgen.http1: responses read the same however the bytes are split, every
framing it accepts, every one it refuses, keep-alive and its retry (pure: no Django)."""

import asyncio
import json

import pytest

from sweepcore.loadgen import LoadConfig, run_load
from sweepcore.loadgen.http1 import Connection, Exchange, Pool, ProtocolError


class FakeTransport:
    def __init__(self):
        self.written = []
        self.closed = self.aborted = False

    def write(self, data):
        self.written.append(data)

    def is_closing(self):
        return self.closed or self.aborted

    def close(self):
        self.closed = True

    def abort(self):
        self.aborted = True


class Recorder(Exchange):
    def __init__(self, enough=None):
        self.status = None
        self.headers = None
        self.data = bytearray()
        self.reads = 0
        self.ended = []
        self.enough = enough  # body() says "no more" once this many bytes came

    def head(self, status, headers):
        self.status, self.headers = status, headers

    def body(self, pieces, rx):
        self.reads += 1
        for p in pieces:
            self.data += p
        return self.enough is not None and len(self.data) >= self.enough

    def end(self, error, response_started):
        self.ended.append((error, response_started))


def connection():
    pool = Pool("http://127.0.0.1:1")
    conn = Connection(pool, None)
    conn.connection_made(FakeTransport())
    pool.open.add(conn)
    return pool, conn


def read(response: bytes, splits=(), enough=None):
    """Send one request on a fresh connection and feed ``response`` cut at ``splits``."""
    pool, conn = connection()
    rec = Recorder(enough)
    conn.send(b"GET / HTTP/1.1\r\n\r\n", rec)
    cuts = [0, *splits, len(response)]
    for a, b in zip(cuts, cuts[1:]):
        conn.data_received(response[a:b])
    return pool, conn, rec


def chunked(*datas, trailers=b""):
    return b"".join(b"%x\r\n%s\r\n" % (len(d), d) for d in datas) + b"0\r\n" + trailers + b"\r\n"


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [b'data: {"n":%d}\n\n' % i for i in range(5)] + [b"data: [DONE]\n\n"]


def test_a_chunked_response_reads_the_same_cut_at_every_byte():
    response = HEAD + chunked(*EVENTS)
    for k in range(1, len(response)):
        pool, conn, rec = read(response, [k])
        assert (rec.status, bytes(rec.data), rec.ended) == (200, b"".join(EVENTS), [(None, True)]), k
        assert pool.idle == [conn] and not conn.transport.is_closing()


def test_a_response_cut_into_three_anywhere_reads_the_same():
    response = HEAD + chunked(*EVENTS[:3])
    for k in range(1, len(response) - 1, 3):
        for j in range(k + 1, len(response), 7):
            pool, conn, rec = read(response, [k, j])
            assert bytes(rec.data) == b"".join(EVENTS[:3]) and rec.ended == [(None, True)], (k, j)


def test_whole_chunks_of_one_read_come_as_one_call_in_pieces():
    pool, conn, rec = read(HEAD + chunked(*EVENTS))
    assert rec.reads == 1 and bytes(rec.data) == b"".join(EVENTS)


def test_chunk_extensions_upper_case_sizes_long_chunks_and_trailers_are_read():
    big = b"x" * 20_000
    response = (HEAD + b"5;name=value\r\nhello\r\nA\r\n0123456789\r\n" + b"%X\r\n%s\r\n" % (len(big), big)
                + b"0\r\nExpires: never\r\nX-Other: 1\r\n\r\n")
    for splits in ([], [len(HEAD) + 3], [len(response) - 5]):
        pool, conn, rec = read(response, splits)
        assert bytes(rec.data) == b"hello0123456789" + big and rec.ended == [(None, True)]
        assert pool.idle == [conn]


def test_a_content_length_body_and_connection_close():
    body = b'{"error": "too long"}'
    response = b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    pool, conn, rec = read(response, [len(response) - 4])
    assert (rec.status, bytes(rec.data), rec.ended) == (400, body, [(None, True)])
    assert rec.headers["connection"] == "close"
    assert pool.idle == [] and conn.transport.closed


def test_a_body_framed_by_the_close_ends_with_the_connection():
    pool, conn, rec = read(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + b"".join(EVENTS))
    assert rec.ended == []
    conn.connection_lost(None)
    assert bytes(rec.data) == b"".join(EVENTS) and rec.ended == [(None, True)] and pool.idle == []


def test_a_connection_lost_mid_chunk_ends_the_exchange_with_the_error():
    response = HEAD + chunked(*EVENTS)
    pool, conn, rec = read(response[: len(HEAD) + 10])
    conn.connection_lost(ConnectionResetError("reset by peer"))
    (error, started), = rec.ended
    assert isinstance(error, ConnectionResetError) and started


def test_a_connection_closed_before_any_answer_says_nothing_was_read():
    pool, conn, rec = read(b"")
    conn.connection_lost(None)
    (error, started), = rec.ended
    assert isinstance(error, ConnectionResetError) and not started


def test_an_interim_answer_is_skipped():
    pool, conn, rec = read(b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + chunked(b"data: x\n\n"), [10])
    assert (rec.status, bytes(rec.data), rec.ended) == (200, b"data: x\n\n", [(None, True)])


def test_a_reader_that_wants_no_more_is_told_once_and_the_rest_is_drained():
    response = HEAD + chunked(*EVENTS)
    pool, conn, rec = read(response, [len(HEAD) + 20, len(HEAD) + 40], enough=1)
    assert rec.ended == [(None, True)] and len(rec.data) < len(b"".join(EVENTS))
    assert pool.idle == [conn]  # read to its end, so the connection serves the next request


@pytest.mark.parametrize("response, says", [
    (b"HTTP/2 200\r\n\r\n", "not an HTTP/1.x status line"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed header line"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", "bad Content-Length"),
    (HEAD + b"zz\r\nhello\r\n", "bad chunk-size line"),
    (HEAD + b"3\r\nhello\r\n", "chunk data longer than its size"),
])
def test_what_is_not_an_http_response_this_client_reads_is_a_protocol_error(response, says):
    pool, conn, rec = read(response)
    (error, _), = rec.ended
    assert isinstance(error, ProtocolError) and says in str(error)
    assert conn.transport.aborted and conn not in pool.idle


@pytest.mark.parametrize("response", [HEAD + chunked(b"data: x\n\n") + b"junk",
                                      b"HTTP/1.1 204 No Content\r\n\r\nextra"])
def test_bytes_after_a_whole_response_drop_the_connection_not_the_response(response):
    pool, conn, rec = read(response)
    assert rec.ended == [(None, True)]
    assert conn.transport.aborted and conn not in pool.idle


def test_the_request_bytes_carry_host_path_and_length():
    pool = Pool("http://example.test:8000/prefix/")
    req = pool.request_bytes("POST", "/v1/completions", b'{"a":1}', {"Content-Type": "application/json"})
    head, body = req.split(b"\r\n\r\n")
    assert head.split(b"\r\n") == [b"POST /prefix/v1/completions HTTP/1.1", b"Host: example.test:8000",
                                   b"User-Agent: sweeplab-loadgen", b"Content-Type: application/json",
                                   b"Content-Length: 7"]
    assert body == b'{"a":1}'
    assert Pool("https://h.test").host_header == "h.test" and Pool("http://[::1]:9/").host_header == "[::1]:9"
    with pytest.raises(ValueError, match="http:// or https://"):
        Pool("ftp://x")


# --------------------------------------------------------------------- over real sockets

def sse_response():
    events = [b'data: {"choices":[{"index":0,"text":"x","finish_reason":%s}],'
              b'"usage":{"prompt_tokens":2,"completion_tokens":%d}}\n\n' % (b'"length"' if n == 3 else b"null", n)
              for n in (1, 2, 3)]
    return HEAD + chunked(*events, b"data: [DONE]\n\n")


async def keep_alive_server(answer_per_connection: int):
    """Answers ``answer_per_connection`` requests per connection, then closes it on the
    next one without a word (a server's keep-alive timeout racing the client's send)."""
    seen = {"connections": 0, "requests": 0, "dropped": 0}

    async def handle(reader, writer):
        seen["connections"] += 1
        answered = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                json.loads(await reader.readexactly(length))
                seen["requests"] += 1
                if answered == answer_per_connection:
                    seen["dropped"] += 1
                    break
                writer.write(sse_response())
                await writer.drain()
                answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, seen, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def load_through(answer_per_connection: int, n: int):
    server, seen, url = await keep_alive_server(answer_per_connection)
    try:
        result = await run_load(LoadConfig(base_url=url, model="m", prompts=["hi"], max_tokens=3,
                                           concurrency=1, num_requests=n))
    finally:
        server.close()
    return result, seen


def test_kept_alive_connections_are_reused():
    result, seen = asyncio.run(load_through(answer_per_connection=100, n=5))
    assert [r.error_kind for r in result.results] == [""] * 5
    assert [r.output_tokens for r in result.results] == [3] * 5
    assert seen == {"connections": 1, "requests": 5, "dropped": 0}


def test_a_request_a_kept_alive_connection_dropped_unanswered_goes_again_on_a_new_one():
    result, seen = asyncio.run(load_through(answer_per_connection=1, n=3))
    assert [(r.error_kind, r.output_tokens) for r in result.results] == [("", 3)] * 3
    # Requests 2 and 3 each found their connection closed unanswered and went again.
    assert seen == {"connections": 3, "requests": 5, "dropped": 2}
