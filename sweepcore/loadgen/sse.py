"""Server-sent events: one streaming response's bytes -> token chunks, counts, finish reason.

Lines are scanned with byte searches and precompiled regexes instead of decoding every
chunk's JSON; JSON is decoded only for lines that carry an ``"error"`` key.  Reads are
split on newlines here, so no line-length limit applies (aiohttp's ``readline`` limit of
64 KiB breaks long-context results in other tools); events that arrived in one read
share that read's arrival time.

Token counts come from, in order: the server's cumulative counts in each chunk
(``"server_cumulative"``); the final ``usage.completion_tokens`` with one token assumed
per content chunk and the total spread evenly over the chunks when they differ
(``"usage"``); one token per content chunk (``"chunks"``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sweepcore.loadgen.apis import RequestResult

_CT = re.compile(rb'"completion_tokens":\s*(\d+)')
_PT = re.compile(rb'"prompt_tokens":\s*(\d+)')
_SPEC = re.compile(rb'"spec_verify_ct":\s*(\d+)')
_EMPTY_CHOICES = re.compile(rb'"choices":\s*\[\s*\]')
_CONTENT = re.compile(rb'"(?:text|content|reasoning_content|reasoning)":\s*"(?!")')
_FINISH = re.compile(rb'"finish_reason":\s*(?:"([^"]+)"|\{\s*"type":\s*"([^"]+)")')


class StreamScan:
    """The scan of one response's event stream into its :class:`RequestResult`.

    ``feed`` each read with its arrival time; token chunks go straight into the record's
    ``chunk_offsets`` / ``chunk_tokens``; ``done`` is set by ``[DONE]``, ``error`` by an
    in-stream error event, ``finish`` by the last finish reason seen.  ``usage_chunk``:
    the API ends with an OpenAI usage chunk (``"choices": []``) whose count is the total,
    not a token chunk.  ``count`` fills the record's totals at the end.
    """

    __slots__ = ("res", "usage_chunk", "pending", "prev_cum", "cum_mode", "final_usage",
                 "meta_line", "done", "finish", "error")

    def __init__(self, res: RequestResult, usage_chunk: bool):
        self.res = res
        self.usage_chunk = usage_chunk
        self.pending = bytearray()  # the incomplete line after the last newline
        self.prev_cum = 0
        self.cum_mode = False
        self.final_usage: int | None = None
        self.meta_line = b""
        self.done = False
        self.finish = ""
        self.error: str | None = None

    @property
    def over(self) -> bool:
        """``[DONE]`` or an error event was read: nothing after it counts."""
        return self.done or self.error is not None

    def feed(self, data: bytes, now: float) -> bool:
        """Scan the lines ``data`` completes; ``now``: their arrival, seconds since the send.

        Returns whether token chunks were added.
        """
        nl = data.rfind(b"\n")
        if nl < 0:
            self.pending += data
            return False
        pending = self.pending
        if pending:
            pending += data[:nl]
            block = bytes(pending)
            self.pending = bytearray(data[nl + 1 :])
        else:
            block = data[:nl]
            if nl + 1 < len(data):
                pending += data[nl + 1 :]
        offs = self.res.chunk_offsets
        n_before = len(offs)
        self._scan(block, now, offs, self.res.chunk_tokens)
        return len(offs) > n_before

    def _scan(self, block: bytes, now: float, offs: list, toks: list) -> None:
        # The per-line loop of the whole load generator: state in locals, written back once.
        ct_search, content_search, finish_search = _CT.search, _CONTENT.search, _FINISH.search
        usage_chunk = self.usage_chunk
        prev_cum, cum_mode, finish = self.prev_cum, self.cum_mode, self.finish
        for line in block.split(b"\n"):
            if line[:5] != b"data:":
                continue
            payload = line[5:].strip()
            if payload[:6] == b"[DONE]":
                self.done = True
                break
            if b'"error"' in payload or b'"object":"error"' in payload:
                err = stream_error(payload)
                if err is not None:
                    self.error = err
                    break
            m = ct_search(payload)
            if m is not None:
                self.meta_line = payload
                if usage_chunk and _EMPTY_CHOICES.search(payload):
                    self.final_usage = int(m.group(1))
                    continue
                cum = int(m.group(1))
                d = cum - prev_cum
                if d > 0:
                    offs.append(now)
                    toks.append(d)
                    prev_cum = cum
                cum_mode = True
            elif content_search(payload):
                offs.append(now)
                toks.append(1)
            if b"finish_reason" in payload:
                f = finish_search(payload)
                if f is not None:
                    finish = (f.group(1) or f.group(2)).decode()
        self.prev_cum, self.cum_mode, self.finish = prev_cum, cum_mode, finish

    def count(self) -> None:
        """Set the record's token counts, their source, prompt tokens and spec_verify_ct."""
        res = self.res
        toks = res.chunk_tokens
        final_usage = self.final_usage
        if self.cum_mode:
            if final_usage is not None and final_usage > self.prev_cum and toks:
                toks[-1] += final_usage - self.prev_cum
            res.token_count_source = "server_cumulative"
        elif final_usage is not None:
            res.token_count_source = "usage"
            if toks and final_usage != len(toks):
                shares = spread(final_usage, len(toks))
                keep = [i for i, k in enumerate(shares) if k > 0]
                res.chunk_offsets[:] = [res.chunk_offsets[i] for i in keep]
                toks[:] = [shares[i] for i in keep]
        else:
            res.token_count_source = "chunks"
        res.output_tokens = sum(toks)
        if self.meta_line:
            m = _PT.search(self.meta_line)
            if m:
                res.prompt_tokens = int(m.group(1))
            m = _SPEC.search(self.meta_line)
            if m:
                res.spec_verify_ct = int(m.group(1))


def stream_error(payload: bytes) -> str | None:
    """The error text of an in-stream ``{"error": ...}`` event, else None."""
    try:
        obj = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if "error" in obj and obj["error"]:
        err = obj["error"]
    elif obj.get("object") == "error":
        err = obj
    else:
        return None
    if isinstance(err, dict):
        parts = [str(err.get("message") or "")]
        for k in ("type", "code"):
            if err.get(k) not in (None, ""):
                parts.append(f"{k}={err[k]}")
        return " ".join(p for p in parts if p) or json.dumps(err)
    return str(err)


def spread(total: int, n: int) -> list[int]:
    """``total`` split over ``n`` chunks as evenly as integers allow, the larger first."""
    q, r = divmod(total, n)
    return [q + (1 if i < r else 0) for i in range(n)]
