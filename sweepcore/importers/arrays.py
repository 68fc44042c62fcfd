"""The per-request arrays of a result file (vLLM ``--save-detailed``, SGLang
``--output-details``): what each item is, the check of an item, and the compact form the
reader (sweepcore.importers.reader) holds them in."""

from __future__ import annotations

import json
import math
from array import array
from bisect import bisect_left
from itertools import chain, compress
from typing import Any

from sweepcore.spec import INT_COLUMN_MAX, NUL, beyond, text_problem

#: Each per-request array and what its items are (None: not read, only counted).
PER_REQUEST_ARRAYS = {
    "input_lens": "integer", "output_lens": "integer", "ttfts": "number", "itls": "numbers",
    "start_times": "number", "errors": "string", "generated_texts": None,
}


def describe(value: Any) -> str:
    """A value in a few words, for an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return json.dumps(text)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, StreamedArray)):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _bad_number(x: Any) -> bool:
    return isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0


def item_problem(kind: str, item: Any) -> tuple[str, str] | None:
    """What is wrong with one item of a per-request array of ``kind``: (the path below the
    item, e.g. "[3]" inside a list, and the message), or None."""
    if kind == "number":
        if _bad_number(item):
            return "", f"expected a number >= 0, got {describe(item)}"
    elif kind == "integer":
        if isinstance(item, bool) or not isinstance(item, int) or item < 0:
            return "", f"expected an integer >= 0, got {describe(item)}"
        if item > INT_COLUMN_MAX:
            return "", f"expected an integer {beyond(INT_COLUMN_MAX)}, got {item}"
    elif kind == "numbers":
        if not isinstance(item, list):
            return "", f"expected a list of numbers, got {describe(item)}"
        for j, x in enumerate(item):
            if _bad_number(x):
                return f"[{j}]", f"expected a number >= 0, got {describe(x)}"
    elif kind == "string":
        if item is not None and not isinstance(item, str):
            return "", f"expected a string, got {describe(item)}"
        if item and NUL in item:  # a request's error text is stored
            return "", text_problem(item)
    return None


class StreamedArray:
    """A top-level array of the file: its length, and its items (``head``) while they could
    still fit a point's ``extra``: at most ``extra_bytes`` // 2 items (2 bytes an item at
    least) from at most 4 × ``extra_bytes`` characters of text (whitespace included);
    None beyond, when ``extra`` leaves the field out."""

    def __init__(self, extra_bytes: int):
        self.count = 0
        self.chars = 0
        self.extra_bytes = extra_bytes
        self._head: list | None = []

    def __len__(self):
        return self.count

    def fits_extra(self) -> bool:
        return self.count <= self.extra_bytes // 2 and self.chars <= 4 * self.extra_bytes

    @property
    def head(self) -> list | None:
        return self._head

    def extend(self, items: list, chars: int) -> None:
        """Items read from ``chars`` characters of the file's text."""
        self.count += len(items)
        self.chars += chars
        if self._head is not None:
            if self.fits_extra():
                self._head.extend(items)
            else:
                self._head = None


class Column(StreamedArray):
    """A per-request array (PER_REQUEST_ARRAYS names it and its items' kind), held
    compactly: numbers and integers in full (counts and lengths are over every request),
    the items of ``itls`` only at ``wanted`` (None: all), errors as codes into their
    distinct texts.  The first wrong item is noted in ``problem`` (its path and what is
    wrong), for the parser to report when it reads the field."""

    def __init__(self, name: str, kind: str | None, wanted: list[int] | None, extra_bytes: int):
        super().__init__(extra_bytes)
        self._head = None  # its items are in the compact form (``head`` gives them back)
        self.name, self.kind, self.wanted = name, kind, wanted
        self.problem: tuple[str, str] | None = None
        self.values = array("d" if kind == "number" else "q")  # number, integer
        self.kept = array("q")  # numbers: the requests whose items are kept ...
        self.ends = array("q")  # ... where each one's items end in ``flat``
        self.flat = array("d")
        self.codes = array("l")  # string: 0 for none, else 1 + its index in ``texts``
        self.texts: list[str] = []
        self._text_codes: dict[str, int] = {}

    def __getitem__(self, i: int):
        if self.kind == "numbers":
            at = bisect_left(self.kept, i)
            if at == len(self.kept) or self.kept[at] != i:
                raise IndexError(f"{self.name}[{i}] was not kept")
            return self.flat[self.ends[at - 1] if at else 0:self.ends[at]]
        if self.kind == "string":
            code = self.codes[i]
            return self.texts[code - 1] if code else ""
        return self.values[i]

    @property
    def head(self) -> list | None:
        """Its items, for a point's ``extra`` where the parser did not read it, from the
        compact form: while they fit, are right and were all kept."""
        if not self.fits_extra() or self.problem is not None or self.kind is None:
            return None
        if self.kind == "numbers":
            return [list(self[i]) for i in range(self.count)] if self.wanted is None else None
        return [self[i] for i in range(self.count)]

    @property
    def kept_indices(self) -> list[int] | None:
        """The requests whose ``itls`` are kept, when not all of them are."""
        return list(self.kept) if self.kind == "numbers" and self.wanted is not None else None

    def extend(self, items: list, chars: int) -> None:
        base = self.count
        super().extend(items, chars)
        if self.problem is not None or self.kind is None:
            return
        if not self._add(base, items):
            for i, item in enumerate(items):
                problem = item_problem(self.kind, item)
                if problem is not None:
                    self.problem = (f"{self.name}[{base + i}]{problem[0]}", problem[1])
                    return

    def _add(self, base: int, items: list) -> bool:
        """Keep a slice of items; False (nothing kept) when one of them is wrong."""
        types = set(map(type, items))
        try:
            if self.kind == "number":
                if not types <= {int, float}:
                    return False
                values = array("d", items)
                if min(values) < 0 or not all(map(math.isfinite, values)):
                    return False
                self.values.extend(values)
            elif self.kind == "integer":
                if not types <= {int}:
                    return False
                values = array("q", items)
                if min(values) < 0 or max(values) > INT_COLUMN_MAX:
                    return False
                self.values.extend(values)
            elif self.kind == "numbers":
                if not types <= {list}:
                    return False
                flat = array("d", chain.from_iterable(items))
                if flat and (min(flat) < 0 or not all(map(math.isfinite, flat))
                             or not set(map(type, chain.from_iterable(items))) <= {int, float}):
                    return False
                if self.wanted is None:
                    chosen = range(base, base + len(items))
                else:
                    chosen = self.wanted[bisect_left(self.wanted, base):bisect_left(self.wanted, base + len(items))]
                for i in chosen:
                    self.flat.extend(items[i - base])
                    self.kept.append(i)
                    self.ends.append(len(self.flat))
            elif self.kind == "string":
                if not types <= {str, type(None)} or any(NUL in item for item in items if item):
                    return False
                codes = array("l", [0]) * len(items)
                for i in compress(range(len(items)), items):
                    text = items[i]
                    code = self._text_codes.get(text)
                    if code is None:
                        self.texts.append(text)
                        code = self._text_codes[text] = len(self.texts)
                    codes[i] = code
                self.codes.extend(codes)
        except (OverflowError, TypeError):  # an integer beyond 64 bits, a bool among numbers
            return False
        return True
