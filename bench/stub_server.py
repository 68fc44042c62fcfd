#!/usr/bin/env python3
"""A minimal, fast streaming inference-server stub (asyncio.Protocol, no framework).

Speaks enough HTTP/1.1 (keep-alive, chunked transfer) for:

* ``POST /v1/completions`` and ``POST /v1/chat/completions`` -- vLLM-style SSE chunks;
  ``stream_options.include_usage`` adds the final usage chunk (``"choices":[]``) and
  ``stream_options.continuous_usage_stats`` puts the cumulative usage in every chunk,
  as vLLM and SGLang do.
* ``POST /generate`` -- SGLang's native streaming API (cumulative ``text``,
  ``meta_info.completion_tokens``/``prompt_tokens``, ``spec_verify_ct`` with
  ``--spec-accept``).
* ``POST /tokenize`` (SGLang/vLLM: ``{"prompt"}`` -> ``{"tokens","count","max_model_len"}``),
  ``POST /extras/tokenize/count`` (llama-cpp-python: ``{"input"}`` -> ``{"count"}``),
  ``GET /v1/models``, ``GET /health``.

Timing: the first chunk is written ``--ttft-ms`` after the request was read (the
``data_received`` that completed it, not after parsing), chunk j at ``ttft + j *
tokens_per_chunk * itl`` -- absolute deadlines, so no drift.  The event loop uses
``select()`` (microsecond timeouts) instead of epoll (millisecond timeouts); a sleeping
``select()`` still wakes 50 us (the kernel's timer slack) to a few hundred us (an idle
core waking) late, so ``--spin-us N`` polls instead of sleeping for the last N us before
each timed write, and ``--busy-poll`` never sleeps (arriving requests are then read
without a wake-up either; only where the stub has a core of its own).
``GET /stats/done`` lists, per completed response, when it ended (loop seconds) and its
tokens.  ``GET /stats/requests`` lists per streamed request its key (the prompt), when it was
read, handled, and when its first chunk was written (epoch seconds, the clock of the
client's ``send_time``).  All chunk bytes are
pre-encoded.  With zero delays a whole response is written in one ``write`` (burst), or,
with ``--interleave``, one chunk of every open stream per loop pass (a ``send`` per token
event, streams interleaved; one callback writes a whole pass, straight to each socket
while its transport holds nothing back, so that the stub's core goes to the system calls
and the clients, not the stub, set the pace as long as they can).  ``GET /stats`` also gives the stub's own CPU seconds since the
last reset (``cpu_s``), so a client's figure can be told from a stub that ran out of core.

Fault injection, per request, by a body field ``"stub_fault"`` (top level or inside
``sampling_params``): ``in-stream-error`` (2 tokens then ``data: {"error": ...}`` in the
200 stream), ``http-500``, ``drop`` (3 tokens then the connection is closed
mid-stream), ``stall`` (2 tokens then silence), ``no-first-token`` (headers then
silence), ``empty`` (200 stream with no tokens).  A prompt (or message) that
contains ``stub_fault=KIND`` injects KIND into that request alone: a load whose body is
the same for every request can then fault some of them (prompt i goes to request i).  Too-long requests (``--context-len``)
are answered with the real texts of ``--overflow-style`` sglang|vllm|llamacpp (HTTP 400);
``/generate`` always answers SGLang's way: HTTP 200 then an in-stream error.

Tokenizer: deterministic toy -- ``\\w+`` runs and single punctuation marks, a run longer
than 8 characters counting as two tokens, plus one BOS token.

Timing noise of a known distribution: ``--itl-jitter lognormal:SIGMA`` draws, once per
streamed request, a factor ``exp(N(0, SIGMA))`` (from ``random.Random(--seed)``, in the
order requests are read) and spaces that request's chunks ``itl * factor`` apart.  The
factor's median is 1, so the population median of a request's TPOT is exactly
``--itl-ms`` and that of its decode speed ``1000 / --itl-ms`` tok/s: a known truth for
the intervals of bench/validity.py.  ``/stats/requests`` gives each request's gap
(``itl_ms``, the last field) so a client's timing error can be read per request.

Run: ``python bench/stub_server.py --port 0 --ttft-ms 100 --itl-ms 10 [--cpu 1]``; it
prints ``LISTENING <port>`` on stdout once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import selectors
import signal
import sys
import time
import zlib
from typing import Callable

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


_LONG_RUN_RE = re.compile(r"\w{9,}")
_FAULT_IN_PROMPT_RE = re.compile(r"stub_fault=([\w-]+)")


def fault_in_prompt(text: str) -> str:
    """The fault a prompt asks for with ``stub_fault=KIND`` ('' for none)."""
    found = _FAULT_IN_PROMPT_RE.search(text) if isinstance(text, str) else None
    return found.group(1) if found else ""


def stub_count(text: str) -> int:
    """len(stub_tokenize(text)) without building the ids: what a request's usage needs
    (a 32k-token prompt would otherwise cost the stub more than the client it measures)."""
    return 1 + len(_TOKEN_RE.findall(text)) + len(_LONG_RUN_RE.findall(text))


def stub_tokenize(text: str) -> list[int]:
    ids = [1]  # BOS
    for piece in _TOKEN_RE.findall(text):
        h = zlib.crc32(piece.encode()) % 32000 + 2
        ids.append(h)
        if len(piece) > 8:
            ids.append((h * 7) % 32000 + 2)
    return ids


def _chunk(ev: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(ev), ev)


def _sse(obj_bytes: bytes) -> bytes:
    return _chunk(b"data: " + obj_bytes + b"\n\n")


DONE = _chunk(b"data: [DONE]\n\n")
END = b"0\r\n\r\n"
WORDS = [" alpha", " beta", " gamma", " delta", " omega", " sigma", " kappa", " theta"]


def _http(status: int, body: bytes, ctype: bytes = b"application/json") -> bytes:
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 500: b"Internal Server Error"}.get(status, b"X")
    return (b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
            % (status, reason, ctype, len(body), body))


STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")


def parse_jitter(text: str | None) -> float:
    """SIGMA of ``lognormal:SIGMA`` (0 for None, "" or "none"); ValueError otherwise."""
    if not text or text == "none":
        return 0.0
    kind, _, value = text.partition(":")
    if kind != "lognormal" or not value:
        raise ValueError(f"--itl-jitter takes lognormal:SIGMA (e.g. lognormal:0.25) or none, not {text!r}")
    try:
        sigma = float(value)
    except ValueError:
        raise ValueError(f"--itl-jitter: SIGMA must be a number, not {value!r}") from None
    if not (math.isfinite(sigma) and 0 <= sigma <= 3):
        raise ValueError(f"--itl-jitter: SIGMA must be between 0 and 3, not {value}")
    return sigma


class Options:
    def __init__(self, a):
        self.ttft = a.ttft_ms / 1000.0
        self.itl = a.itl_ms / 1000.0
        self.jitter = parse_jitter(a.itl_jitter)
        self.rng = random.Random(a.seed)
        self.k = max(1, a.tokens_per_chunk)
        self.model = a.model
        self.context_len = a.context_len
        self.overflow_style = a.overflow_style
        self.spec_accept = a.spec_accept
        self.tokenize = a.tokenize
        self.interleave = a.interleave
        self.count_prompt = stub_count if a.prompt_count == "words" else (lambda text: 1 + len(text) // 4)
        self.cache: dict = {}
        self.stats = {"requests": 0, "tokens": 0, "first_request": None, "last_done": None}
        self.late: list = []  # seconds each timed write ran after its deadline
        self.cpu_at_reset = time.process_time()  # the stub's own CPU seconds are counted from here
        self.done: list = []  # (loop time, tokens) of each completed response (``/stats/done``)
        # per streamed request (``/stats/requests``): key (prompt text), epoch seconds the
        # request was complete in the stub, epoch seconds just before/after its first token
        # chunk was handed to the socket (same clock as the client's ``send_time``), and the
        # request's chunk gap in ms (``--itl-ms``, jittered).
        self.records: list = []
        # --interleave: the streams whose next chunk goes out in the next loop pass, written
        # by one callback per pass (a callback per chunk cost the stub a quarter of its core)
        self.ready: list = []
        self.pumping = False

    def pump_later(self, loop, proto, st) -> None:
        """Write ``st``'s next chunk in the next loop pass, after the loop polled for I/O."""
        self.ready.append((proto, st))
        if not self.pumping:
            self.pumping = True
            loop.call_soon(self._pump, loop)

    def _pump(self, loop) -> None:
        batch, self.ready = self.ready, []
        for proto, st in batch:
            if proto.closed:
                continue
            i = st.i
            st.i = i + 1
            chunk = st.chunks[i]
            t = proto.t
            # Straight to the socket while the transport holds nothing back (the order
            # of the bytes stays): a transport write costs the stub a sixth of a chunk.
            if t.get_write_buffer_size():
                t.write(chunk)
            else:
                try:
                    sent = proto.sock.send(chunk)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError:
                    sent = 0  # the transport meets the same error and closes the connection
                if sent < len(chunk):
                    t.write(chunk[sent:])
            if st.i < len(st.chunks):
                self.ready.append((proto, st))
            else:
                proto._finish(st)
        if self.ready:
            loop.call_soon(self._pump, loop)
        else:
            self.pumping = False

    def stats_view(self, now):
        xs = sorted(self.late)

        def q(p):
            return round(xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))] * 1000, 4) if xs else None

        return dict(self.stats, now=now, writes=len(xs), late_p50_ms=q(0.5), late_p99_ms=q(0.99),
                    late_max_ms=round(xs[-1] * 1000, 4) if xs else None,
                    cpu_s=time.process_time() - self.cpu_at_reset)

    def request_itl(self) -> float:
        """This request's gap in seconds: ``itl``, times ``exp(N(0, jitter))`` when jittered."""
        if self.jitter and self.itl:
            return self.itl * math.exp(self.rng.gauss(0.0, self.jitter))
        return self.itl

    def count(self, loop, tokens: int, done: bool):
        st = self.stats
        st["tokens"] += tokens
        if done:
            st["requests"] += 1
            st["last_done"] = loop.time()
            if len(self.done) < 1_000_000:
                self.done.append((st["last_done"], tokens))


def overflow_answer(style: str, n: int, m: int, limit: int) -> tuple[int, bytes] | None:
    """The real servers' too-long answers (texts from their sources, see sweepcore.loadgen)."""
    total = n + m
    if style == "vllm":
        if total <= limit:
            return None
        msg = (f"This model's maximum context length is {limit} tokens. However, you requested "
               f"{m} output tokens and your prompt contains at least {n} input tokens, for a total "
               f"of at least {total} tokens. Please reduce the length of the input prompt or the "
               f"number of requested output tokens. (parameter=input_tokens, value={n})")
        return 400, json.dumps({"error": {"message": msg, "type": "BadRequestError",
                                          "param": "input_tokens", "code": 400}}).encode()
    if style == "llamacpp":
        if n < limit:
            return None
        msg = f"request ({n} tokens) exceeds the available context size ({limit} tokens), try increasing it"
        return 400, json.dumps({"error": {"code": 400, "message": msg, "type": "exceed_context_size_error",
                                          "n_prompt_tokens": n, "n_ctx": limit}}).encode()
    # sglang (tokenizer_manager._validate_one_request)
    if n >= limit:
        msg = f"The input ({n} tokens) is longer than the model's context length ({limit} tokens)."
    elif total >= limit:
        msg = (f"Requested token count exceeds the model's maximum context length of {limit} tokens. "
               f"You requested a total of {total} tokens: {n} tokens from the input messages and "
               f"{m} tokens for the completion. Please reduce the number of tokens in the input "
               f"messages or the completion to fit within the limit.")
    else:
        return None
    return 400, json.dumps({"object": "error", "message": msg, "type": "BadRequestError",
                            "param": None, "code": 400}).encode()


class Stream:
    __slots__ = ("chunks", "t_first", "step", "i", "fault", "tail", "ntok", "rec")

    def __init__(self, chunks, t_first, step, fault, tail, ntok, rec=None):
        self.rec = rec
        self.ntok = ntok
        self.chunks = chunks
        self.t_first = t_first
        self.step = step
        self.i = 0
        self.fault = fault
        self.tail = tail


def build_stream(o: Options, api: str, body: dict, n_prompt: int, max_tokens: int):
    """Pre-encoded chunks (list of bytes, one per token chunk) and the tail bytes."""
    opts = body.get("stream_options") or {}
    cont = bool(opts.get("continuous_usage_stats"))
    incl = bool(opts.get("include_usage")) or cont
    key = (api, n_prompt, max_tokens, cont, incl)
    hit = o.cache.get(key)
    if hit is not None:
        return hit
    model = json.dumps(o.model).encode()
    k = o.k
    chunks = []
    produced = 0
    j = 0
    text_so_far = []
    while produced < max_tokens:
        n = min(k, max_tokens - produced)
        piece = "".join(WORDS[(produced + q) % len(WORDS)] for q in range(n))
        produced += n
        last = produced >= max_tokens
        fin = b'"length"' if last else b"null"
        usage = (b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}'
                 % (n_prompt, n_prompt + produced, produced)) if cont else b""
        ptxt = json.dumps(piece).encode()
        if api == "completions":
            ev = (b'{"id":"cmpl-stub","object":"text_completion","created":0,"model":%s,'
                  b'"choices":[{"index":0,"text":%s,"logprobs":null,"finish_reason":%s,'
                  b'"stop_reason":null}]%s}' % (model, ptxt, fin, usage))
        elif api == "chat":
            ev = (b'{"id":"chatcmpl-stub","object":"chat.completion.chunk","created":0,"model":%s,'
                  b'"choices":[{"index":0,"delta":{"content":%s},"logprobs":null,"finish_reason":%s}]%s}'
                  % (model, ptxt, fin, usage))
        else:
            text_so_far.append(piece)
            fr = b'{"type":"length","length":%d}' % max_tokens if last else b"null"
            spec = b""
            if o.spec_accept:
                spec = b',"spec_verify_ct":%d' % (j + 1)
            ev = (b'{"text":%s,"meta_info":{"id":"stub","finish_reason":%s,"prompt_tokens":%d,'
                  b'"completion_tokens":%d,"cached_tokens":0%s}}'
                  % (json.dumps("".join(text_so_far)).encode(), fr, n_prompt, produced, spec))
        chunks.append(_sse(ev))
        j += 1
    tail = b""
    if api == "chat" and chunks:
        role = (b'{"id":"chatcmpl-stub","object":"chat.completion.chunk","created":0,"model":%s,'
                b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
                b'"finish_reason":null}]%s}' % (model, b',"usage":{"prompt_tokens":%d,"total_tokens":%d,'
                b'"completion_tokens":0}' % (n_prompt, n_prompt) if cont else b""))
        chunks[0] = _sse(role) + chunks[0]
    if incl and api != "generate":
        obj = b"chat.completion.chunk" if api == "chat" else b"text_completion"
        tail += _sse(b'{"id":"stub","object":"%s","created":0,"model":%s,"choices":[],'
                     b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}'
                     % (obj, model, n_prompt, n_prompt + max_tokens, max_tokens))
    tail += DONE + END
    out = (chunks, tail)
    if len(o.cache) < 4096:
        o.cache[key] = out
    return out


class StubProtocol(asyncio.Protocol):
    def __init__(self, o: Options):
        self.o = o
        self.buf = bytearray()
        self.t = None
        self.loop = asyncio.get_running_loop()
        self.busy = False
        self.closed = False
        self.rx_mono = self.rx_wall = 0.0

    def connection_made(self, transport):
        self.t = transport
        self.sock = None
        if self.o.interleave:  # the pump's own handle on the socket (see Options._pump)
            self.sock = transport.get_extra_info("socket").dup()
            self.sock.setblocking(False)

    def connection_lost(self, exc):
        self.closed = True
        if self.sock is not None:
            self.sock.close()

    def data_received(self, data):
        self.rx_mono = self.loop.time()
        self.rx_wall = time.time()
        self.buf += data
        if not self.busy:
            self._next_request()

    def _next_request(self):
        while not self.busy and not self.closed:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = bytes(self.buf[:head_end]).decode("latin-1")
            lines = head.split("\r\n")
            try:
                method, path, _ = lines[0].split(" ", 2)
            except ValueError:
                self.t.close()
                return
            clen = 0
            for ln in lines[1:]:
                if ln[:15].lower() == "content-length:":
                    clen = int(ln[15:].strip())
            if len(self.buf) < head_end + 4 + clen:
                return
            body = bytes(self.buf[head_end + 4: head_end + 4 + clen])
            del self.buf[: head_end + 4 + clen]
            self._handle(method, path.split("?", 1)[0], body)

    def _json(self, status, obj):
        self.t.write(_http(status, json.dumps(obj).encode()))

    def _handle(self, method, path, raw):
        o = self.o
        if method == "GET":
            if path == "/health":
                self.t.write(_http(200, b"{}"))
            elif path == "/stats/requests":
                self._json(200, {"fields": ["key", "rx", "handled", "first_write", "first_written", "itl_ms"],
                                 "records": o.records})
            elif path == "/stats/done":
                self._json(200, {"fields": ["at", "tokens"], "records": o.done})
            elif path == "/stats":
                self._json(200, o.stats_view(self.loop.time()))
            elif path == "/v1/models":
                self._json(200, {"object": "list", "data": [
                    {"id": o.model, "object": "model", "max_model_len": o.context_len or None}]})
            else:
                self._json(404, {"detail": "Not Found"})
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            self._json(400, {"error": {"message": "bad json"}})
            return
        if path == "/stats/reset":
            o.stats.update(requests=0, tokens=0, first_request=None, last_done=None)
            o.late.clear()
            o.records.clear()
            o.done.clear()
            o.cpu_at_reset = time.process_time()
            self._json(200, o.stats_view(self.loop.time()))
            return
        if path == "/tokenize" and o.tokenize in ("sglang", "vllm"):
            toks = stub_tokenize(body.get("prompt", ""))
            self._json(200, {"tokens": toks, "count": len(toks), "max_model_len": o.context_len or None})
            return
        if path == "/extras/tokenize/count" and o.tokenize == "llamacpp":
            self._json(200, {"count": len(stub_tokenize(body.get("input", "")))})
            return
        api = {"/v1/completions": "completions", "/v1/chat/completions": "chat",
               "/generate": "generate"}.get(path)
        if api is None:
            self._json(404, {"detail": "Not Found"})
            return
        sp = body.get("sampling_params") or {}
        fault = body.get("stub_fault") or sp.get("stub_fault") or ""
        if api == "generate":
            max_tokens = int(sp.get("max_new_tokens", 128))
            text = body.get("text", "")
            n_prompt = len(body["input_ids"]) if "input_ids" in body else o.count_prompt(text)
        else:
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            if api == "chat":
                text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
            else:
                text = body.get("prompt", "")
            n_prompt = o.count_prompt(text)
        fault = fault or fault_in_prompt(text)
        if fault == "http-500":
            self._json(500, {"error": {"message": "stub: injected internal error", "type": "InternalServerError", "code": 500}})
            return
        if o.context_len:
            ans = overflow_answer("sglang" if api == "generate" else o.overflow_style, n_prompt, max_tokens, o.context_len)
            if ans is not None:
                if api == "generate":
                    msg = json.loads(ans[1])["message"]
                    self.t.write(STREAM_HEAD + _sse(json.dumps({"error": {"message": msg}}).encode()) + DONE + END)
                else:
                    self.t.write(_http(ans[0], ans[1]))
                return
        if fault == "empty":
            self.t.write(STREAM_HEAD + DONE + END)
            return
        chunks, tail = build_stream(o, api, body, n_prompt, max_tokens)
        if o.stats["first_request"] is None:
            o.stats["first_request"] = self.loop.time()
        if fault == "in-stream-error":
            chunks = chunks[:2]
            tail = _sse(b'{"error":{"message":"stub: injected in-stream failure","type":"InternalServerError","code":500}}') + DONE + END
        elif fault == "drop":
            chunks, tail = chunks[:3], None
        elif fault == "stall":
            chunks, tail = chunks[:2], b""
        elif fault == "no-first-token":
            chunks, tail = [], b""
        now = self.rx_mono  # the TTFT runs from when the request was read, not from here
        if o.ttft == 0 and o.itl == 0 and tail is not None and not o.interleave:
            self.t.write(STREAM_HEAD + b"".join(chunks) + tail)
            o.count(self.loop, max_tokens if not fault else 0, not fault)
            return
        self.busy = True
        self.t.write(STREAM_HEAD)
        itl = o.request_itl()
        rec = None
        if len(o.records) < 100_000:
            key = body.get("prompt") if api == "completions" else (
                body.get("messages") if api == "chat" else body.get("text", body.get("input_ids")))
            rec = [key if isinstance(key, str) else json.dumps(key), self.rx_wall, time.time(), None, None,
                   itl * 1000.0]
            o.records.append(rec)
        st = Stream(chunks, now + o.ttft, itl * o.k, fault, tail, max_tokens, rec)
        if st.chunks:
            self.loop.call_at(st.t_first, self._emit, st)
        else:
            self._finish(st)

    def _emit(self, st: Stream):
        if self.closed:
            return
        st.i += 1
        late = self.o.late
        interleaved = st.step == 0 and self.o.interleave
        if len(late) < 1_000_000 and not interleaved:
            late.append(self.loop.time() - (st.t_first + (st.i - 1) * st.step))
        rec = st.rec if st.i == 1 else None
        if rec is not None:
            rec[3] = time.time()
        if st.step == 0 and not interleaved:
            self.t.write(b"".join(st.chunks[st.i - 1:]))
            st.i = len(st.chunks)
        else:
            self.t.write(st.chunks[st.i - 1])
        if rec is not None:
            rec[4] = time.time()
        if st.i < len(st.chunks):
            if interleaved:  # one chunk of every open stream per loop pass: streams interleaved
                self.o.pump_later(self.loop, self, st)
            else:
                self.loop.call_at(st.t_first + st.i * st.step, self._emit, st)
        else:
            self._finish(st)

    def _finish(self, st: Stream):
        if not st.fault:
            self.o.count(self.loop, st.ntok, True)
        if st.tail is None:  # drop: close mid-stream without the terminating chunk
            self.t.close()
            return
        if st.tail:
            self.t.write(st.tail)
            self.busy = False
            if self.buf:  # a pipelined request, read earlier: it starts now
                self.rx_mono = self.loop.time()
                self.rx_wall = time.time()
                self._next_request()
        # stall / no-first-token: leave the response open and silent


def set_timer_slack(ns: int) -> bool:
    """prctl(PR_SET_TIMERSLACK, ns) on Linux; False where that is not available."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(29, ctypes.c_ulong(max(1, ns)), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class SpinSelector(selectors.SelectSelector):
    """``select()`` that sleeps until ``spin`` seconds before the loop's next timer, then polls.

    A sleeping ``select()`` wakes up late: the kernel's timer slack (50 us by default for
    a normal task) plus the time an idle core takes to wake.  Polling the last stretch
    puts timed writes within microseconds of their deadline.  ``always`` polls all the
    time (the core never idles, so arriving requests are read without a wake-up either).
    """

    def __init__(self, spin: float, always: bool = False):
        super().__init__()
        self.spin = spin
        self.always = always

    def select(self, timeout=None):
        sel = super().select
        pc = time.perf_counter
        if timeout is None:
            if not self.always:
                return sel(None)
            while True:
                ev = sel(0)
                if ev:
                    return ev
        if timeout <= 0:
            return sel(0)
        end = pc() + timeout
        if timeout > self.spin and not self.always:
            ev = sel(timeout - self.spin)
            if ev:
                return ev
        while True:
            ev = sel(0)
            if ev or pc() >= end:
                return ev


def arg_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=0.0)
    p.add_argument("--itl-ms", type=float, default=0.0)
    p.add_argument("--itl-jitter", default=None, metavar="lognormal:SIGMA",
                   help="per request, multiply --itl-ms by exp(N(0, SIGMA)) (drawn once per request)")
    p.add_argument("--seed", type=int, default=0, help="seed of the --itl-jitter draws")
    p.add_argument("--tokens-per-chunk", type=int, default=1)
    p.add_argument("--prompt-count", choices=["words", "chars"], default="words",
                   help="a prompt's tokens in the usage the stub reports: its toy tokenizer's count (words), "
                        "or a character count / 4, which costs the same whatever the text (for long prompts)")
    p.add_argument("--interleave", action="store_true",
                   help="with zero delays, write one chunk of every open stream per loop pass (a write "
                        "per token event, streams interleaved) instead of each response in one write")
    p.add_argument("--model", default="stub-model")
    p.add_argument("--context-len", type=int, default=0, help="0 = unlimited")
    p.add_argument("--overflow-style", choices=["sglang", "vllm", "llamacpp"], default="sglang")
    p.add_argument("--spec-accept", action="store_true", help="report spec_verify_ct (one verify per chunk)")
    p.add_argument("--tokenize", choices=["sglang", "vllm", "llamacpp", "none"], default="sglang")
    p.add_argument("--cpu", type=int, default=None, help="pin to this CPU core")
    p.add_argument("--selector", choices=["select", "epoll"], default="select")
    p.add_argument("--spin-us", type=float, default=0.0,
                   help="poll instead of sleeping for the last N us before each timed write")
    p.add_argument("--busy-poll", action="store_true", help="never sleep: poll the sockets all the time")
    p.add_argument("--timer-slack-ns", type=int, default=None,
                   help="set this process's timer slack (Linux prctl; the default is 50000)")
    return p


def start_in_thread(argv=()) -> tuple[str, Callable[[], None]]:
    """Serve the stub with options ``argv`` on a thread of this process (its own event
    loop; none of main's process settings): (base URL, stop). For tests that must not
    start processes (tests/core)."""
    import threading

    o = Options(arg_parser().parse_args(["--port", "0", *argv]))
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    server = loop.run_until_complete(loop.create_server(lambda: StubProtocol(o), "127.0.0.1", 0))
    port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, name=f"stub-{port}", daemon=True)
    thread.start()

    def stop() -> None:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        server.close()
        loop.close()

    return f"http://127.0.0.1:{port}", stop


def main(argv=None) -> int:
    p = arg_parser()
    a = p.parse_args(argv)
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        p.error("the stub listens on loopback only")
    try:
        parse_jitter(a.itl_jitter)
    except ValueError as e:
        p.error(str(e))
    if a.cpu is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {a.cpu})
        except OSError as e:
            print(f"stub: cannot pin to CPU {a.cpu}: {e}", file=sys.stderr)
    if a.timer_slack_ns is not None:
        set_timer_slack(a.timer_slack_ns)
    if a.spin_us > 0 or a.busy_poll:
        sel = SpinSelector(a.spin_us / 1e6, a.busy_poll)
    elif a.selector == "select":
        sel = selectors.SelectSelector()
    else:
        sel = selectors.DefaultSelector()
    loop = asyncio.SelectorEventLoop(sel)
    asyncio.set_event_loop(loop)
    o = Options(a)

    async def serve():
        server = await loop.create_server(lambda: StubProtocol(o), a.host, a.port, backlog=1024)
        port = server.sockets[0].getsockname()[1]
        print(f"LISTENING {port}", flush=True)
        stop = asyncio.Event()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop.set)
        await stop.wait()
        server.close()

    loop.run_until_complete(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
