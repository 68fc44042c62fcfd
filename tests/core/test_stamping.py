"""sweepcore.loadgen.stamping: its hook into asyncio takes effect, the connections read
its stamps, and a hook that cannot be installed or stops taking effect fails loudly
(pure: no Django)."""

import asyncio
import json
import select
import socket
import time

import pytest
from aiohttp import web

from sweepcore.loadgen import LoadConfig, StampingError, http1, run_load, stamping

HEADERS = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def raw_server():
    """An HTTP server that answers one POST with streaming headers, then hands the test its
    writer (on the returned queue) to send the body's chunks when the test says so."""
    writers: asyncio.Queue = asyncio.Queue()

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        writer.write(HEADERS)
        await writers.put(writer)  # the test holds it, so the connection stays open

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, writers, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"


class FirstRead(http1.Exchange):
    def __init__(self, loop):
        self.got = loop.create_future()

    def body(self, pieces, rx):
        if not self.got.done():
            self.got.set_result((b"".join(pieces), rx))
        return False


async def arrival_behind_a_blocked_loop(poll_stamp: bool):
    """The stamp of bytes that were in the socket when the loop polled, but whose protocol
    ran only after another callback held the loop for 50 ms.  Returns (send, block, rx)."""
    loop = asyncio.get_running_loop()
    undo = stamping.install_poll_stamp(loop) if poll_stamp else (lambda: None)
    server, writers, url = await raw_server()
    blocked = []
    try:
        async with http1.Pool(url) as pool:
            conn = await pool.connection()
            ex = FirstRead(loop)
            send = conn.send(pool.request_bytes("POST", "/", b"{}", {}), ex)
            client_sock = conn.transport.get_extra_info("socket")
            writer = await writers.get()

            def block():
                blocked.append(time.perf_counter())
                time.sleep(0.05)

            def push():
                writer.write(chunk(b"data: {}\n\n"))
                # The bytes are in the client's socket before the loop polls again; the
                # blocker is queued ahead of the reader that poll will wake.
                assert select.select([client_sock], [], [], 2.0)[0]
                loop.call_soon(block)

            loop.call_soon(push)
            data, rx = await ex.got
            assert data == b"data: {}\n\n"
            writer.write(chunk(b""))
    finally:
        undo()
        server.close()
    return send, blocked[0], rx


def test_arrival_is_stamped_by_the_poll_that_saw_the_bytes():
    send, block, rx = asyncio.run(arrival_behind_a_blocked_loop(poll_stamp=True))
    assert 0 < send <= rx <= block


def test_without_the_poll_stamp_the_arrival_would_include_the_blocked_loop():
    # What the first test guards against: the protocol's own clock runs after the blocker.
    send, block, rx = asyncio.run(arrival_behind_a_blocked_loop(poll_stamp=False))
    assert rx >= block + 0.05


# ----------------------------------------------------------------------- through run_load

def sse_server_app():
    async def handler(request):
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for n in (1, 2, 3):
            choice = {"index": 0, "text": "x", "finish_reason": "length" if n == 3 else None}
            await resp.write(b"data: " + json.dumps({"choices": [choice], "usage": {
                "prompt_tokens": 2, "completion_tokens": n}}).encode() + b"\n\n")
            await asyncio.sleep(0.005)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    return app


async def load(**config):
    runner = web.AppRunner(sse_server_app())
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    site = web.SockSite(runner, sock)
    await site.start()
    try:
        return await run_load(LoadConfig(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}", model="m",
                                         prompts=["hi"], max_tokens=3, concurrency=2, num_requests=4,
                                         **config))
    finally:
        await runner.cleanup()


def test_load_records_arrivals_from_the_poll_stamps(monkeypatch):
    polls = []
    select_of = stamping.PollStampSelector.select

    def recording(self, timeout=None):
        events = select_of(self, timeout)
        polls.append(self.t)
        return events

    monkeypatch.setattr(stamping.PollStampSelector, "select", recording)
    result = asyncio.run(load())
    assert [r.error_kind for r in result.results] == [""] * 4
    for r in result.results:
        assert r.chunk_tokens == [1, 1, 1]
        # Each offset is (poll stamp - send): one send time puts all three on poll stamps.
        sends = [t - r.chunk_offsets[0] for t in polls]
        assert any(all(any(abs(send + off - t) < 1e-9 for t in polls) for off in r.chunk_offsets)
                   for send in sends), r.chunk_offsets


def test_load_fails_when_the_loop_stops_polling_through_the_wrapper(monkeypatch):
    monkeypatch.setattr(stamping.PollStampSelector, "select",
                        lambda self, timeout=None: self._inner.select(timeout))
    with pytest.raises(StampingError, match="loop._selector"):
        asyncio.run(load())


# ------------------------------------------------------------------- missing private names

def test_a_loop_without_a_selector_is_refused(monkeypatch):
    loop = asyncio.new_event_loop()
    try:
        monkeypatch.delattr(loop, "_selector")
        with pytest.raises(StampingError, match="_selector"):
            stamping.install_poll_stamp(loop)
        monkeypatch.undo()
        undo = stamping.install_poll_stamp(loop)
        assert isinstance(loop._selector, stamping.PollStampSelector)
        undo()
        assert not isinstance(loop._selector, stamping.PollStampSelector)
    finally:
        loop.close()
