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
_CONTENT = re.compile(rb'"(?:text|content|reasoning_content|reasoning)":\s*"(?!")')
# Matched at a position found by a byte search (``bytes.find`` is several times cheaper
# than a regex search or ``in``, which for bytes first tries its operand as an integer).
_CT_KEY = b'"completion_tokens":'
_DIGITS_AT = re.compile(rb'\s*\d+')  # int() takes the leading spaces
_EMPTY_LIST_AT = re.compile(rb'\s*:\s*\[\s*\]')
_FINISH_AT = re.compile(rb'"finish_reason":\s*(?:"([^"]+)"|\{\s*"type":\s*"([^"]+)")')


class StreamScan:
    """The scan of one response's event stream into its :class:`RequestResult`.

    ``feed`` each read with its arrival time; token chunks go straight into the record's
    ``chunk_offsets`` / ``chunk_tokens``; ``done`` is set by ``[DONE]``, ``error`` by an
    in-stream error event, ``finish`` by the last finish reason seen.  ``usage_chunk``:
    the API ends with an OpenAI usage chunk (``"choices": []``) whose count is the total,
    not a token chunk.  ``count`` fills the record's totals at the end.
    """

    __slots__ = ("res", "offs", "toks", "usage_chunk", "pending", "prev_cum", "cum_mode",
                 "final_usage", "meta_line", "done", "finish", "error")

    def __init__(self, res: RequestResult, usage_chunk: bool):
        self.res = res
        self.offs = res.chunk_offsets
        self.toks = res.chunk_tokens
        self.usage_chunk = usage_chunk
        self.pending = b""  # the incomplete line after the last newline
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
        return self.feed_pieces((data,), now)

    def feed_pieces(self, pieces, now: float) -> bool:
        """:meth:`feed` for one read's bytes in pieces, in order (each chunk's data of a
        chunked response: usually one event each, so most pieces are taken as one line
        without splitting or joining).

        This is the per-event loop of the whole load generator: byte searches, a regex
        only matched where a search found its key, state in locals, written back once.
        """
        lines: list = []
        for data in pieces:
            if not self.pending and data.endswith(b"\n\n") and data.find(b"\n") == len(data) - 2:
                lines.append(data)  # one whole event of one line, trailing blank line included
                continue
            if self.pending:
                nl = data.rfind(b"\n")
                if nl < 0:
                    if type(self.pending) is bytes:  # a line longer than one read: grown in place
                        self.pending = bytearray(self.pending)
                    self.pending += data
                    continue
                block = bytes(self.pending) + data[:nl]
                self.pending = data[nl + 1:]
            else:
                nl = data.rfind(b"\n")
                if nl < 0:
                    self.pending = data
                    continue
                block = data[:nl]
                self.pending = data[nl + 1:]
            lines += block.split(b"\n")
        offs, toks = self.offs, self.toks
        n_before = len(offs)
        digits_at, empty_at, finish_at = _DIGITS_AT.match, _EMPTY_LIST_AT.match, _FINISH_AT.match
        usage_chunk = self.usage_chunk
        prev_cum, cum_mode, finish = self.prev_cum, self.cum_mode, self.finish
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            # A choice carries "finish_reason" (null until the last): an event that has
            # one is no usage chunk, so only one without needs the "choices": [] check.
            f = line.find(b'"finish_reason"')
            if f >= 0 and not line.startswith(b":null", f + 15):
                fm = finish_at(line, f)
                if fm is not None:
                    finish = (fm.group(1) or fm.group(2)).decode()
            i = line.rfind(_CT_KEY)
            m = digits_at(line, i + 20) if i >= 0 else None
            if m is not None:
                self.meta_line = line
                cum = int(m[0])
                if usage_chunk and f < 0 and (cum > prev_cum or not cum_mode):
                    # A count in no new token needs no check: the usage chunk's total only
                    # ever tops up a count that grew past the last chunk's.
                    c = line.find(b'"choices"')
                    if c >= 0 and empty_at(line, c + 9):
                        self.final_usage = cum  # the usage chunk: the total, not a token chunk
                        continue
                cum_mode = True
                if cum > prev_cum:
                    offs.append(now)
                    toks.append(cum - prev_cum)
                    prev_cum = cum
                    continue
            elif _CONTENT.search(line):
                offs.append(now)
                toks.append(1)
                continue
            # An event that brought no token: the end, an error, or one that carries none
            # (an error event never carries tokens, so token events skip this search).
            if len(line) < 24 and line[5:].strip()[:6] == b"[DONE]":
                self.done = True
                break
            if line.find(b'"error"') >= 0:  # an "error" key, or "object": "error"
                err = stream_error(line[5:].strip())
                if err is not None:
                    self.error = err
                    break
        self.prev_cum, self.cum_mode, self.finish = prev_cum, cum_mode, finish
        return len(offs) > n_before

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
