"""A deterministic, dependency-free stand-in for the model's tokenizer.

The rules (documented in simengine/README.md, "Tokenizer"):

* Special tokens ``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>`` are one token each.
* A run of ASCII letters, with at most one leading space merged into it, is a word.
  A word is first split at lower->upper case boundaries (``getValue`` -> ``get`` ``Value``);
  each part is one token if it has at most 6 letters or is in the small whole-word list
  ``WHOLE_WORDS`` (common long words such as ``assistant``, ``function``, ``because``),
  otherwise one token for the first 6 letters and one more per further 4 letters
  (``implementation`` -> 3 tokens, ``Fibonacci`` -> 2).
* Every digit is its own token (as Qwen's tokenizer does); one leading space merges into it.
* A run of ASCII punctuation (one leading space merged in) is one token per 3 characters.
* Every non-ASCII code point is one token.
* A run of newlines is one token per 2 newlines.
* A run of spaces/tabs that is not merged into the following piece is one token per 4 characters
  (the last space before a word/digit/punctuation belongs to that piece).

Token ids are a stable hash of each piece's text, so equal text always gives equal ids.
Clients must size prompts through ``POST /tokenize``, never by re-implementing these rules.
"""

from __future__ import annotations

import re
import zlib
from typing import Dict, List, Sequence

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
ENDOFTEXT = "<|endoftext|>"
SPECIAL_TOKENS: Dict[str, int] = {ENDOFTEXT: 151643, IM_START: 151644, IM_END: 151645}
ID_TO_SPECIAL = {v: k for k, v in SPECIAL_TOKENS.items()}
EOS_TOKEN_ID = SPECIAL_TOKENS[IM_END]
NORMAL_VOCAB = 151643  # ids [0, 151643) are ordinary pieces
VOCAB_SIZE = 151936

_PIECE_RE = re.compile(
    r"(?P<special><\|(?:im_start|im_end|endoftext)\|>)"
    r"|(?P<word> ?[A-Za-z]+)"
    r"|(?P<digit> ?[0-9])"
    r"|(?P<punct> ?(?:(?!<\|(?:im_start|im_end|endoftext)\|>)[!-/:-@\[-`{-~])+)"
    r"|(?P<uni>[^\x00-\x7f])"
    r"|(?P<nl>\n+)"
    r"|(?P<ws>[ \t\r\f\v]+(?!\S)|[ \t\r\f\v]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
_CASE_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")

# Common long words that are a single token (lower-cased match).
WHOLE_WORDS = frozenset(
    """
    assistant system function return because between through example question answer
    another without however something everything different important following number
    program default integer boolean string lambda public private static unsigned printf
    println console require include without several including problem explain another
    """.split()
)

# Chat template (Qwen ChatML): every message renders as
#   <|im_start|>{role}\n{content}<|im_end|>\n            -> content tokens + 5
# and the generation prompt as <|im_start|>assistant\n  -> 3 tokens.
CHAT_TOKENS_PER_MESSAGE = 5
CHAT_TOKENS_GENERATION_PROMPT = 3


def _chunk(s: str, first: int, rest: int) -> List[str]:
    out = [s[:first]]
    s = s[first:]
    while s:
        out.append(s[:rest])
        s = s[rest:]
    return out


def _pieces_of(kind: str, s: str) -> List[str]:
    """The token pieces of one match of ``_PIECE_RE`` (its group ``kind``, its text ``s``)."""
    if kind == "word":
        lead = " " if s.startswith(" ") else ""
        letters = s[1:] if lead else s
        parts = _CASE_RE.findall(letters)
        if "".join(parts) != letters:  # defensive: fall back to plain chunking
            parts = [letters]
        pieces: List[str] = []
        for i, part in enumerate(parts):
            chunks = [part] if part.lower() in WHOLE_WORDS else _chunk(part, 6, 4)
            if i == 0 and lead:
                chunks[0] = lead + chunks[0]
            pieces.extend(chunks)
        return pieces
    if kind == "punct":
        lead = " " if s.startswith(" ") else ""
        body = s[1:] if lead else s
        chunks = _chunk(body, 3, 3)
        chunks[0] = lead + chunks[0]
        return chunks
    if kind == "nl":
        return _chunk(s, 2, 2)
    if kind == "ws":
        return _chunk(s, 4, 4)
    return [s]  # special, digit, uni, other


#: The pieces of each match seen, by (group, text): a prompt of 32,700 tokens is some 27,600
#: matches of a few hundred distinct texts, and sizing one takes several encodes (/tokenize).
_PIECES_OF: Dict[tuple, tuple] = {}
_PIECES_OF_MAX = 1 << 16


def _match_pieces(key: tuple) -> tuple:
    got = _PIECES_OF.get(key)
    if got is None:
        got = tuple(_pieces_of(*key))
        if len(_PIECES_OF) < _PIECES_OF_MAX:
            _PIECES_OF[key] = got
    return got


def split_pieces(text: str) -> List[str]:
    """Split text into token pieces (each piece is exactly one token)."""
    pieces: List[str] = []
    for m in _PIECE_RE.finditer(text):
        pieces.extend(_match_pieces((m.lastgroup, m.group(0))))
    return pieces


def piece_id(piece: str) -> int:
    sid = SPECIAL_TOKENS.get(piece)
    if sid is not None:
        return sid
    return zlib.crc32(piece.encode("utf-8")) % NORMAL_VOCAB


class SimTokenizer:
    """Deterministic tokenizer; remembers the text of every id it produced for decode()."""

    def __init__(self) -> None:
        self._id_to_piece: Dict[int, str] = dict(ID_TO_SPECIAL)
        self._ids_of: Dict[tuple, tuple] = {}  # a match's ids, as _PIECES_OF

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        # Qwen's tokenizer adds no BOS token, so add_special_tokens changes nothing.
        ids: List[int] = []
        ids_of = self._ids_of
        for m in _PIECE_RE.finditer(text):
            key = (m.lastgroup, m.group(0))
            got = ids_of.get(key)
            if got is None:
                got = tuple(piece_id(p) for p in _match_pieces(key))
                for i, p in zip(got, _match_pieces(key)):
                    self._id_to_piece.setdefault(i, p)
                if len(ids_of) < _PIECES_OF_MAX:
                    ids_of[key] = got
            ids.extend(got)
        return ids

    def count(self, text: str) -> int:
        return len(split_pieces(text))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        out = []
        for i in ids:
            if skip_special_tokens and i in ID_TO_SPECIAL:
                continue
            out.append(self._id_to_piece.get(int(i), ""))
        return "".join(out)


def render_chat(messages: Sequence[dict], add_generation_prompt: bool = True) -> str:
    """Render OpenAI-style messages with the ChatML template the simulated model uses."""
    parts = []
    for msg in messages:
        role = str(msg.get("role", "user"))
        content = msg.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            content = "".join(
                str(c.get("text", "")) for c in content if isinstance(c, dict) and c.get("type", "text") == "text"
            )
        elif content is None:
            content = ""
        parts.append(f"{IM_START}{role}\n{content}{IM_END}\n")
    if add_generation_prompt:
        parts.append(f"{IM_START}assistant\n")
    return "".join(parts)


def chat_text_content(messages: Sequence[dict]) -> str:
    """The plain concatenated message contents (used for workload detection)."""
    out = []
    for msg in messages:
        content = msg.get("content")
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        out.append(str(content or ""))
    return "\n".join(out)
