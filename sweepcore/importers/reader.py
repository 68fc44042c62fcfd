"""Reading a result file as a stream: its JSON objects, with the per-request arrays held
compactly and never the whole file in memory (README "Importing results").

A result file of a large run is mostly its per-request arrays (vLLM ``--save-detailed``,
SGLang ``--output-details``): a million requests is 50 MB of text, and as Python lists it
was over half a gigabyte.  Here the file is read in chunks; each object's fields are read
one by one, and each top-level array in slices of about a megabyte, so what is held at once
is a slice, not the file:

* a per-request array (common.PER_REQUEST_ARRAYS) becomes a :class:`Column`: numbers in an
  ``array``, its first wrong item noted for the parser to report in order; the
  inter-token latencies and the error texts are kept only for the requests stored (the
  even sample of common's limits) when the file's request count is known by then, as it
  is in both tools' files, which write ``input_lens`` first;
* any other array keeps its items while they are few enough for a point's ``extra``, and
  is counted beyond (``extra`` leaves it out and names it).

Why not a streaming parser from PyPI (ijson): both tools write ``Infinity`` and ``NaN``
(SGLang's ``request_rate`` is ``Infinity`` by default), which ijson refuses.  This reader
uses the standard library's own JSON scanner on each slice, so numbers, strings and the
error messages are those of ``json.loads``.

The file's layout: JSON Lines (one object per line), or one JSON document across lines.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from dataclasses import dataclass
from json.decoder import JSONDecodeError
from typing import Any, BinaryIO

from sweepcore.importers import common
from sweepcore.importers.arrays import PER_REQUEST_ARRAYS, Column, StreamedArray
from sweepcore.importers.common import ImportFileError, beyond

#: Bytes read from the file at a time, and the text of an array parsed at once.
CHUNK = 1 << 20
SLICE = 1 << 20

_scan = json.JSONDecoder().scan_once
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_BOM = "\ufeff"


@dataclass
class FileFacts:
    """What is known of the file's bytes before it is parsed."""

    sha256: str
    size: int


def prescan(filename: str, raw: BinaryIO) -> FileFacts:
    """The file's SHA-256 and size, its text checked as UTF-8 (the offending byte named)
    and as not empty; reads in chunks and rewinds."""
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    size = 0
    content = False
    while chunk := raw.read(CHUNK):
        digest.update(chunk)
        pending = len(decoder.getstate()[0])
        try:
            decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            raise ImportFileError(f"{filename}: not UTF-8 text (byte {size - pending + exc.start})") from None
        if not content:
            content = bool((chunk[3:] if size == 0 and chunk.startswith(codecs.BOM_UTF8) else chunk).strip())
        size += len(chunk)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise ImportFileError(f"{filename}: not UTF-8 text (byte {size - len(decoder.getstate()[0]) + exc.start})"
                              ) from None
    if not content:
        raise ImportFileError(f"{filename}: the file is empty")
    raw.seek(0)
    return FileFacts(digest.hexdigest(), size)


def count_lines(raw: BinaryIO) -> int:
    """The lines of the file that hold more than whitespace (JSON Lines: its results);
    reads in chunks and goes back to where the file was."""
    where = raw.tell()
    raw.seek(0)
    lines, open_line = 0, False
    while chunk := raw.read(CHUNK):
        parts = chunk.split(b"\n")
        for k, part in enumerate(parts):
            if k:
                lines += open_line
                open_line = False
            open_line = open_line or bool(part.strip(b" \t\r\xef\xbb\xbf"))
    raw.seek(where)
    return lines + open_line


# --- The text, read as it is needed -----------------------------------------------------------


class _Text:
    """The file's text from where it has been read to, decoded a chunk at a time, with what
    it takes to name the line and column of a position."""

    def __init__(self, filename: str, raw: BinaryIO):
        self.filename, self.raw = filename, raw
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf, self.pos, self.eof = "", 0, False
        self.line_base, self.col_base = 1, 1  # of buf[0]
        self.first = True

    def fill(self, need: int) -> None:
        """At least ``need`` characters from ``pos`` on, or the rest of the file."""
        if self.pos >= CHUNK:  # drop what is behind, keeping count of its lines
            dropped = self.buf[:self.pos]
            newlines = dropped.count("\n")
            if newlines:
                self.line_base += newlines
                self.col_base = len(dropped) - dropped.rfind("\n")
            else:
                self.col_base += len(dropped)
            self.buf, self.pos = self.buf[self.pos:], 0
        parts, have = [self.buf], len(self.buf) - self.pos
        while not self.eof and have < need:
            data = self.raw.read(max(CHUNK, need - have))
            text = self.decoder.decode(data, final=not data)
            if self.first and text:
                self.first = False
                text = text.removeprefix(_BOM)
            self.eof = not data
            parts.append(text)
            have += len(text)
        self.buf = "".join(parts)

    def line_col(self, pos: int) -> tuple[int, int]:
        newline = self.buf.rfind("\n", 0, pos)
        line = self.line_base + self.buf.count("\n", 0, pos)
        return line, (pos - newline if newline >= 0 else self.col_base + pos)

    def invalid(self, message: str, pos: int) -> ImportFileError:
        line, col = self.line_col(pos)
        return ImportFileError(f"{self.filename} line {line} column {col}: invalid JSON ({message})")

    def too_deep(self, pos: int) -> ImportFileError:
        return ImportFileError(f"{self.filename} line {self.line_col(pos)[0]}: JSON nested too deep to read")

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end), at ``pos``."""
        while True:
            self.pos = _WHITESPACE.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return ""
            self.fill(1)

    def expect(self, chars: str, message: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            raise self.invalid(message, self.pos)
        self.pos += 1
        return c

    def value(self) -> Any:
        """The JSON value at ``pos`` (json's own scanner), read further while it may be cut
        off by the end of what has been read."""
        need = 4096
        while True:
            if not self.eof and len(self.buf) - self.pos < need:
                self.fill(need)
            try:
                value, end = _scan(self.buf, self.pos)
            except StopIteration as stop:
                if self._cut(stop.value):
                    need = 2 * max(need, len(self.buf) - self.pos)
                    continue
                raise self.invalid("Expecting value", stop.value) from None
            except JSONDecodeError as exc:
                if self._cut(exc.pos) or (not self.eof and exc.msg.startswith("Unterminated string")):
                    need = 2 * max(need, len(self.buf) - self.pos)
                    continue
                raise self.invalid(exc.msg, exc.pos) from None
            except RecursionError:
                raise self.too_deep(self.pos) from None
            if self._cut(end):  # a number may go on past what has been read
                need = 2 * max(need, len(self.buf) - self.pos)
                continue
            self.pos = end
            return value

    def _cut(self, pos: int) -> bool:
        return not self.eof and pos > len(self.buf) - 32

    def array(self, sink: StreamedArray) -> None:
        """The array at ``pos``, its items handed to ``sink`` a slice at a time."""
        self.pos += 1
        if self.peek() == "]":
            self.pos += 1
            return
        size, one_by_one, misses = SLICE, 0, 0
        while True:
            if not one_by_one:
                if not self.eof and len(self.buf) - self.pos < size:
                    self.fill(size)
                done = self._slice(sink, size)
                if done is not None:
                    if done:
                        return
                    size, misses = min(2 * size, SLICE), 0
                    continue
                # No slice could be cut here: items one by one for a while (longer after each
                # miss, so that a layout slices never fit costs a few tries), then smaller slices.
                misses += 1
                size, one_by_one = max(size // 4, 256), min(16 << misses, 4096)
            one_by_one -= 1
            at = self.pos
            sink.extend([self.value()], self.pos - at)
            if self.expect(",]", "Expecting ',' delimiter") == "]":
                return
            self.peek()

    def _slice(self, sink: StreamedArray, size: int) -> bool | None:
        """Items up to a comma within ``size`` characters, parsed at once: json's scanner
        on "[" + text + "]" succeeds only if the text is whole items, and stops early where
        the array itself ends.  True: the array ended; False: more to come; None: no slice."""
        buf, pos = self.buf, self.pos
        end = min(len(buf), pos + size)
        for cut in _cuts(buf, pos, end):
            text = "[" + buf[pos:cut] + "]"
            try:
                items, stop = _scan(text, 0)
            except (StopIteration, JSONDecodeError, RecursionError):
                continue
            sink.extend(items, min(stop, len(text)) - 2)
            if stop < len(text):  # the array closed within the text
                self.pos = pos + stop - 1
                return True
            self.pos = cut + 1
            self.peek()
            return False
        return None


def _cuts(buf: str, pos: int, end: int):
    """Where a slice of an array may end (before a comma), the likeliest first: the last
    comma after a list or an object (between two items of an array of lists, as ``itls``);
    the last comma; the last one after an unescaped quote (a text's commas are inside its
    quotes)."""
    tried = set()
    closed = max(buf.rfind("],", pos, end), buf.rfind("},", pos, end)) + 1
    if closed > pos:
        tried.add(closed)
        yield closed
    cut = buf.rfind(",", pos, end)
    if cut > pos and cut not in tried:
        tried.add(cut)
        yield cut
    quoted = buf.rfind('",', pos, end)
    while quoted > pos:
        before = quoted - 1
        while before >= pos and buf[before] == "\\":
            before -= 1
        if (quoted - 1 - before) % 2 == 0:  # an even run of backslashes escapes none of them
            if quoted + 1 not in tried:
                yield quoted + 1
            return
        quoted = buf.rfind('",', pos, quoted)


def read_documents(filename: str, raw: BinaryIO) -> list[tuple[int | None, Any]]:
    """The JSON objects of a file (``raw``: its bytes, after ``prescan``) with their line
    numbers: None for one document, that spans lines or is the only line of a .json file."""
    documents = Documents(filename, raw)
    values = documents.read()
    if documents.one_document or (len(values) == 1 and not filename.lower().endswith((".jsonl", ".ndjson"))):
        return [(None, values[0][2])]
    return [(line, value) for line, _, value in values]


# --- The documents -------------------------------------------------------------------------


class Documents:
    """The JSON objects of a file, read in order (``read``): JSON Lines, one object per line,
    or one JSON document that may span lines."""

    def __init__(self, filename: str, raw: BinaryIO):
        self.filename, self.raw = filename, raw
        self.text = _Text(filename, raw)
        self._lines: int | None = None
        self.one_document = False  # the first object spans lines: it is the file's only one

    def lines(self) -> int:
        if self._lines is None:
            self._lines = count_lines(self.raw)
        return self._lines

    def read(self) -> list[tuple[int, bool, Any]]:
        """(line, spans_lines, value) of each JSON value of the file."""
        text = self.text
        docs = []
        while text.peek():
            line = text.line_col(text.pos)[0]
            value = self._document(first=not docs)
            spans = text.line_col(text.pos)[0] != line
            if not docs:
                self.one_document = spans or not isinstance(value, dict)
            docs.append((line, spans, value))
            if self.one_document:
                if text.peek():
                    raise text.invalid("Extra data", text.pos)
                break
            if spans:  # JSON Lines: a result on one line, then the next one on its own
                raise ImportFileError(f"{self.filename} line {line}: a result of a JSON Lines file must be on one "
                                      f"line (this one goes on to line {text.line_col(text.pos)[0]})")
            if text.peek() and text.line_col(text.pos)[0] == line:  # more on the result's line
                raise text.invalid("Extra data", text.pos)
            if len(docs) == 1 and text.peek() and self.lines() > common.MAX_POINTS_PER_FILE:
                raise ImportFileError(f"{self.filename}: {self.lines():,} results (lines); a file may hold "
                                      f"{beyond(common.MAX_POINTS_PER_FILE, 'results')}: split it")
        return docs

    def _document(self, first: bool) -> Any:
        text = self.text
        c = text.peek()
        if c == "[":
            counted = StreamedArray(extra_bytes=0)
            text.array(counted)
            return counted
        if c != "{":
            return text.value()
        start_line = text.line_col(text.pos)[0]
        text.pos += 1
        data: dict[str, Any] = {}
        requests: int | None = None  # the count of the first per-request array read
        if text.peek() == "}":
            text.pos += 1
            return data
        while True:
            if text.peek() != '"':
                raise text.invalid("Expecting property name enclosed in double quotes", text.pos)
            key = text.value()
            text.expect(":", "Expecting ':' delimiter")
            if text.peek() == "[":
                extra_bytes = common.MAX_EXTRA_FIELD_BYTES
                if key in PER_REQUEST_ARRAYS:
                    wanted = None
                    if requests is not None:
                        spans = text.line_col(text.pos)[0] != start_line
                        docs = 1 if first and spans else self.lines()
                        sample = common.sample(requests, common.requests_per_point(docs))
                        wanted = None if isinstance(sample, range) else sample
                    sink = Column(key, PER_REQUEST_ARRAYS[key], wanted, extra_bytes)
                else:
                    sink = StreamedArray(extra_bytes)
                text.array(sink)
                if key in PER_REQUEST_ARRAYS and requests is None:
                    requests = sink.count
                data[key] = sink
            else:
                data[key] = text.value()
            if text.expect(",}", "Expecting ',' delimiter") == "}":
                return data
