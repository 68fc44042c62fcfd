"""Workload prompts of an exact token count, and the context cap.  Plain Python, no Django.

Token counts come from the server's own tokenizer (:class:`ServerTokenizer`):

* SGLang ``POST /tokenize {"prompt": ...}`` -> ``{"tokens": [...], "count": N,
  "max_model_len": L}``; vLLM ``POST /tokenize {"prompt": ..., "model": ...}`` ->
  ``{"count", "max_model_len", "tokens"}``;
* llama-cpp-python ``POST /extras/tokenize/count {"input": ...}`` -> ``{"count": N}``;
* llama.cpp ``tools/server`` ``POST /tokenize {"content": ...}`` -> ``{"tokens": [...]}``
  (it answers ``{"tokens": []}`` to a body without ``content``; we then retry that way).

or from a local tokenizer the user provides (:class:`LocalTokenizer`, any callable
returning a count or a token list).  The counts are of the raw prompt text with the
server's default special tokens (BOS); a chat template adds its own tokens on
``/v1/chat/completions``, which the server's ``usage.prompt_tokens`` then shows.

Workloads
---------
``fibonacci``     a fixed code-writing prompt (:data:`FIBONACCI_PROMPT`).
``code-edit``     a fixed code-editing prompt whose answer repeats its code (:data:`CODE_EDIT_PROMPT`).
``long-context``  a deterministic (seeded) document mixing Python code and prose, with
                  no short repeating pattern, cut to exactly N tokens together with a
                  closing question (:func:`long_context_prompt`).
``dataset``       a ShareGPT-format JSON file: first human turn of each conversation,
                  kept when it fits (:func:`load_sharegpt`).

Reaching an exact count takes a few tokenize calls, not one per token: estimate from one
call, bracket, interpolate/bisect on word boundaries, then on characters of the next
word, then append single-token fillers (:func:`fit_to_tokens`); ``SizedPrompt.calls``
reports the calls used.  A worker sizes the same lengths run after run: with ``remember``
(the engine and model), a prompt sized before is counted once by the new server and used
when its count is still exact.

Context cap (:func:`usable_context`, :func:`max_prompt_tokens`, :func:`check_point`)
---------------------------------------------------------------------------------
``usable context = min(context length, KV capacity // concurrency)``: every one of the
``concurrency`` requests in flight needs its prompt and its new tokens in the KV cache at
once.  A point fits when ``prompt + max_new_tokens + margin <= usable context``; the
margin covers SGLang's ``>=`` check ("Requested token count exceeds the model's maximum
context length" fires when input + max_new_tokens >= context_len) and template tokens.
"""

from __future__ import annotations

import json
import random
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

from sweepcore.files import FileProblem, open_bytes

FIBONACCI_PROMPT = (
    "Write a Python function that returns the n-th Fibonacci number. Use an iterative "
    "approach so it runs in O(n) time, handle n = 0 and n = 1, raise ValueError for "
    "negative n, include a docstring, and show two example calls with their output."
)

# A code edit whose answer repeats the prompt's code with one name changed: the case where
# prompt-lookup (n-gram) speculation drafts well. Written as the start of the answer (a
# completion, not a chat), so that the model continues with the edited code.
CODE_EDIT_PROMPT = """Rename the variable `total` to `running_sum` in this function.

```python
def accumulate(values):
    total = 0
    for value in values:
        total = total + value
        print("total so far:", total)
    if total > 100:
        print("total is large:", total)
    return total
```

The same function with `total` renamed to `running_sum`:

```python
"""

WORKLOADS = ("fibonacci", "long-context", "dataset")


class TokenizerError(RuntimeError):
    """The server has no tokenizer endpoint we know, or it failed."""


class LocalTokenizer:
    """Wrap a user callable ``fn(text) -> int | list`` as a counting tokenizer."""

    def __init__(self, fn: Callable[[str], object], max_model_len: int | None = None):
        self.fn = fn
        self.max_model_len = max_model_len
        self.calls = 0
        self.endpoint = "local"

    def count(self, text: str) -> int:
        self.calls += 1
        out = self.fn(text)
        return out if isinstance(out, int) else len(out)  # type: ignore[arg-type]


class ServerTokenizer:
    """Count tokens with the server's own tokenizer endpoint (found on first use)."""

    def __init__(self, base_url: str, model: str | None = None, timeout: float = 30.0,
                 session=None):
        import requests

        self.base = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.http = session or requests.Session()
        self.endpoint: str | None = None  # "tokenize" | "tokenize-content" | "extras-count"
        self.max_model_len: int | None = None
        self.calls = 0

    def _post(self, path: str, body: dict):
        import requests

        self.calls += 1
        try:
            return self.http.post(self.base + path, json=body, timeout=self.timeout)
        except requests.ConnectionError as e:
            raise TokenizerError(f"cannot reach {self.base}: {_short(e)}") from None
        except requests.Timeout:
            raise TokenizerError(f"{self.base}{path} did not answer within {self.timeout:g} s") from None

    def _from_tokens_reply(self, r, text: str) -> int | None:
        try:
            data = r.json()
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        if isinstance(data.get("max_model_len"), int):
            self.max_model_len = data["max_model_len"]
        if isinstance(data.get("count"), int):
            return data["count"]
        if isinstance(data.get("tokens"), list):
            if not data["tokens"] and text:
                return None  # llama.cpp answers [] when "content" is missing
            return len(data["tokens"])
        return None

    def count(self, text: str) -> int:
        if self.endpoint == "tokenize" or self.endpoint is None:
            body = {"prompt": text}
            if self.model:
                body["model"] = self.model
            r = self._post("/tokenize", body)
            if r.status_code == 200:
                n = self._from_tokens_reply(r, text)
                if n is not None:
                    self.endpoint = "tokenize"
                    return n
            elif self.endpoint == "tokenize":
                raise TokenizerError(f"POST {self.base}/tokenize: HTTP {r.status_code}: {r.text[:300]}")
        if self.endpoint in (None, "tokenize-content"):
            r = self._post("/tokenize", {"content": text})
            if r.status_code == 200:
                n = self._from_tokens_reply(r, text)
                if n is not None:
                    self.endpoint = "tokenize-content"
                    return n
        if self.endpoint in (None, "extras-count"):
            r = self._post("/extras/tokenize/count", {"input": text})
            if r.status_code == 200:
                try:
                    n = r.json().get("count")
                except (ValueError, AttributeError):
                    n = None
                if isinstance(n, int):
                    self.endpoint = "extras-count"
                    return n
        raise TokenizerError(
            f"{self.base} has no tokenizer endpoint we know (tried POST /tokenize "
            "{prompt}/{content} and POST /extras/tokenize/count); give a local tokenizer"
        )


def _short(e: Exception) -> str:
    s = str(e)
    if "Connection refused" in s or "Errno 111" in s:
        return "connection refused"
    return s[:200]


@dataclass
class SizedPrompt:
    text: str
    tokens: int  # as counted by the tokenizer used
    target: int
    calls: int  # tokenize calls used to reach it
    exact: bool


# ----------------------------------------------------------------------------- documents

_NOUNS = (
    "cache scheduler tokenizer request batch kernel tensor queue replica shard gateway "
    "checkpoint pipeline worker buffer stream decoder encoder router prefix block page "
    "allocator profile metric budget window latency throughput sample trace ledger index "
    "river harbor lantern meadow orchard quarry canyon glacier archive library museum"
).split()
_VERBS = (
    "schedules evicts allocates merges splits streams measures records rejects retries "
    "batches prefetches compiles validates aggregates drains forwards replays compresses "
    "reorders pins releases estimates"
).split()
_ADJS = (
    "paged speculative quantized sparse dense warm cold stale fresh bounded adaptive "
    "greedy lazy eager nested shared private transient durable noisy quiet narrow wide"
).split()
_CONNECT = ("However,", "Meanwhile,", "In practice,", "As a result,", "By contrast,",
            "For example,", "Later,", "In the second phase,", "Notably,", "Finally,")
_OPS = ("+", "-", "*", "//", "%")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_CONNECT)] if rng.random() < 0.3 else []
    words += ["the", rng.choice(_ADJS), rng.choice(_NOUNS), rng.choice(_VERBS),
              str(rng.randint(2, 9999)), rng.choice(_ADJS), rng.choice(_NOUNS) + "s"]
    if rng.random() < 0.5:
        words += ["before", "the", rng.choice(_NOUNS), rng.choice(_VERBS), "again"]
    if rng.random() < 0.4:
        words += ["within", f"{rng.uniform(0.1, 99.9):.2f}", rng.choice(("ms", "seconds", "percent"))]
    s = " ".join(words)
    return s[0].upper() + s[1:] + "."


def _code_block(rng: random.Random, n: int) -> str:
    name = f"{rng.choice(_ADJS)}_{rng.choice(_NOUNS)}_{n}"
    args = rng.sample(["size", "limit", "offset", "count", "scale", "depth", "width", "seed"], 3)
    lines = [f"def {name}({', '.join(args)}):",
             f'    """Return the {rng.choice(_ADJS)} {rng.choice(_NOUNS)} for block {n}."""',
             f"    total = {rng.randint(0, 99)}"]
    for _ in range(rng.randint(2, 5)):
        a, b = rng.sample(args, 2)
        lines.append(f"    if {a} > {rng.randint(1, 500)}:")
        lines.append(f"        total {rng.choice(_OPS)}= {b} {rng.choice(_OPS)} {rng.randint(2, 97)}")
    lines.append(f"    return total {rng.choice(_OPS)} {args[0]}")
    return "\n".join(lines)


def document_words(seed: int, n_words: int) -> list[str]:
    """At least ``n_words`` whitespace-separated pieces of a seeded document.

    Each piece keeps its own leading separator (" " or "\\n"), so ``"".join`` of any prefix
    is a valid, naturally formatted document prefix.
    """
    rng = random.Random(seed)
    out: list[str] = []
    section = 0
    while len(out) < n_words:
        section += 1
        title = f"\n\n## Section {section}: the {rng.choice(_ADJS)} {rng.choice(_NOUNS)}\n"
        block = [title]
        for _ in range(rng.randint(2, 4)):
            block.append(" ".join(_sentence(rng) for _ in range(rng.randint(3, 6))) + "\n")
        if rng.random() < 0.6:
            block.append("\n```python\n" + _code_block(rng, section) + "\n```\n")
        text = "".join(block)
        # split keeping separators attached to the following word
        word = []
        for ch in text:
            if ch in " \n" and word and word[-1] not in " \n":
                out.append("".join(word))
                word = [ch]
            else:
                word.append(ch)
        if word:
            out.append("".join(word))
    return out


LONG_CONTEXT_QUESTION = (
    "\n\nQuestion: Using only the document above, explain what the last Python function "
    "in it computes, and list three numeric facts stated in its prose sections."
)


def fit_to_tokens(
    pieces: Sequence[str],
    target: int,
    count: Callable[[str], int],
    suffix: str = "",
    prefix: str = "",
    max_calls: int = 60,
) -> SizedPrompt:
    """Exactly ``target`` tokens of ``prefix + "".join(pieces[:n]) + suffix``.

    Token counts grow (nearly) monotonically with ``n``: one count estimates tokens per
    piece, the bracket [lo, hi] is then narrowed by interpolation alternated with
    bisection, then characters of the next piece and single-token fillers close the last
    gap.  Raises ValueError when even ``prefix + suffix`` exceeds the target.
    """
    calls = 0
    cache: dict[int, int] = {}

    def text_of(n: int, extra: str = "") -> str:
        return prefix + "".join(pieces[:n]) + extra + suffix

    def c(n: int) -> int:
        nonlocal calls
        if n not in cache:
            calls += 1
            cache[n] = count(text_of(n))
        return cache[n]

    base = c(0)
    if base > target:
        raise ValueError(f"the fixed part alone has {base} tokens > target {target}")
    if base == target:
        return SizedPrompt(text_of(0), base, target, calls, True)
    n_max = len(pieces)
    # estimate: probe with a guess of ~0.75 pieces per token, then scale
    guess = min(n_max, max(1, int((target - base) * 0.75)))
    cg = c(guess)
    lo, hi = (0, None)
    if cg <= target:
        lo = guess
    else:
        hi = guess
    per = max((cg - base) / guess, 1e-6)
    est = int(round((target - base) / per))
    est = min(max(est, 1), n_max)
    if est != guess:
        ce = c(est)
        if ce <= target and est > lo:
            lo = est
        elif ce > target and (hi is None or est < hi):
            hi = est
    # find an upper bracket if needed
    step = max(16, int(0.02 * (lo or 1)))
    while hi is None:
        probe = min(n_max, lo + step)
        if c(probe) > target:
            hi = probe
        elif probe == n_max:
            raise ValueError(f"the document is too short for {target} tokens")
        else:
            lo = probe
            step *= 2
    # narrow: largest n with c(n) <= target
    use_interp = True
    while hi - lo > 1 and calls < max_calls:
        clo, chi = cache[lo], cache[hi]
        if use_interp and chi > clo:
            mid = lo + int((target - clo) * (hi - lo) / (chi - clo))
            mid = min(max(mid, lo + 1), hi - 1)
        else:
            mid = (lo + hi) // 2
        use_interp = not use_interp
        if c(mid) <= target:
            lo = mid
        else:
            hi = mid
    best_text, best = text_of(lo), cache[lo]
    if best == target:
        return SizedPrompt(best_text, best, target, calls, True)
    # characters of the next piece
    nxt = pieces[lo] if lo < n_max else ""
    a, b = 0, len(nxt)
    while b - a > 1 and calls < max_calls:
        mid = (a + b) // 2
        calls += 1
        cm = count(text_of(lo, nxt[:mid]))
        if cm <= target:
            a = mid
            best_text, best = text_of(lo, nxt[:mid]), cm
            if cm == target:
                return SizedPrompt(best_text, best, target, calls, True)
        else:
            b = mid
    # single-token fillers
    body = best_text[len(prefix): len(best_text) - len(suffix)] if suffix else best_text[len(prefix):]
    for filler in (" x", " the", ".", " a", "\n", " 1"):
        while best < target and calls < max_calls:
            calls += 1
            cand = prefix + body + filler + suffix
            cm = count(cand)
            if cm > target:
                break
            body += filler
            best_text, best = cand, cm
        if best == target:
            break
    return SizedPrompt(best_text, best, target, calls, best == target)


#: Prompts sized before, by (tokenizer key, target, seed, question), most recent last: a
#: worker sizes the same lengths for run after run of one model, each fit some eight
#: tokenize calls (tens of milliseconds each at 32k tokens).
_SIZED: OrderedDict[tuple, str] = OrderedDict()
_SIZED_MAX = 128
_SIZED_LOCK = threading.Lock()  # a worker's threads (a thread pool) share it


def long_context_prompt(target_tokens: int, count: Callable[[str], int], seed: int = 0,
                        question: str = LONG_CONTEXT_QUESTION, remember: Hashable | None = None) -> SizedPrompt:
    """A realistic code-and-prose document plus a question, exactly ``target_tokens``.

    ``remember``: a key naming the tokenizer (the engine and the model): a prompt sized
    before under it is counted once by ``count`` and used if it still has exactly
    ``target_tokens``; otherwise it is sized afresh. Every prompt is still counted by
    the tokenizer it is for."""
    key, checked = (remember, target_tokens, seed, question), 0
    with _SIZED_LOCK:
        text = _SIZED.get(key) if remember is not None else None
    if text is not None:
        tokens, checked = count(text), 1
        if tokens == target_tokens:
            with _SIZED_LOCK:
                if key in _SIZED:
                    _SIZED.move_to_end(key)
            return SizedPrompt(text, tokens, target_tokens, 1, True)
    pieces = document_words(seed, max(64, int(target_tokens * 1.5) + 64))
    preamble = "The following is an internal engineering document.\n"
    built = fit_to_tokens(pieces, target_tokens, count, suffix=question, prefix=preamble)
    built.calls += checked
    if remember is not None and built.exact:
        with _SIZED_LOCK:
            _SIZED[key] = built.text
            _SIZED.move_to_end(key)
            while len(_SIZED) > _SIZED_MAX:
                _SIZED.popitem(last=False)
    return built


def fibonacci_prompt(count: Callable[[str], int] | None = None) -> SizedPrompt:
    n = count(FIBONACCI_PROMPT) if count else -1
    return SizedPrompt(FIBONACCI_PROMPT, n, n, 1 if count else 0, True)


@dataclass
class DatasetPrompt:
    text: str
    prompt_tokens: int


# A data set is read whole (json.load): the largest public ShareGPT file is ~0.7 GB.
MAX_DATASET_BYTES = 1 << 30


def load_sharegpt(path: str, count: Callable[[str], int], *, num_prompts: int,
                  max_prompt_tokens: int, min_prompt_tokens: int = 4,
                  seed: int = 0, roots: Sequence[str] | None = None,
                  max_bytes: int = MAX_DATASET_BYTES) -> list[DatasetPrompt]:
    """Up to ``num_prompts`` first human turns from a ShareGPT JSON file that fit.

    The file is a list of ``{"conversations": [{"from": "human"|"gpt", "value": ...}]}``.
    Conversations are shuffled with ``seed``; a prompt is kept when ``min_prompt_tokens
    <= tokens <= max_prompt_tokens`` (tokenizing stops once enough are kept). Only a regular
    file of at most ``max_bytes`` is read, inside ``roots`` where given (sweepcore.files);
    anything else is a FileProblem naming the path.
    """
    with open_bytes(path, "a ShareGPT JSON file", max_bytes, roots=roots) as f:
        try:
            data = json.load(f)
        except UnicodeDecodeError:
            raise FileProblem(f"{path}: not a UTF-8 text file") from None
        except json.JSONDecodeError as exc:
            raise FileProblem(f"{path}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, list):
        raise FileProblem(f"{path}: expected a JSON list of conversations")
    texts = []
    for conv in data:
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not turns:
            continue
        first = next((t for t in turns if isinstance(t, dict) and t.get("from") in ("human", "user")), None)
        if first and isinstance(first.get("value"), str) and first["value"].strip():
            texts.append(first["value"])
    random.Random(seed).shuffle(texts)
    out: list[DatasetPrompt] = []
    for t in texts:
        if len(out) >= num_prompts:
            break
        n = count(t)
        if min_prompt_tokens <= n <= max_prompt_tokens:
            out.append(DatasetPrompt(t, n))
    return out


# ----------------------------------------------------------------------------- context cap


@dataclass
class PointFit:
    fits: bool
    reason: str
    usable_context: int
    max_prompt_tokens: int


def usable_context(context_length: int, kv_capacity_tokens: int | None = None,
                   concurrency: int = 1) -> tuple[int, str]:
    """``min(context_length, kv_capacity // concurrency)`` and a note saying which bound."""
    if kv_capacity_tokens is not None and concurrency >= 1:
        per = kv_capacity_tokens // concurrency
        if per < context_length:
            return per, f"KV capacity {kv_capacity_tokens} tokens ÷ concurrency {concurrency}"
    return context_length, f"context length {context_length}"


def max_prompt_tokens(context_length: int, kv_capacity_tokens: int | None, concurrency: int,
                      max_new_tokens: int, margin: int = 16) -> int:
    """The largest prompt a point may use (may be <= 0 when nothing fits)."""
    usable, _ = usable_context(context_length, kv_capacity_tokens, concurrency)
    return usable - max_new_tokens - margin


def check_point(prompt_tokens: int, max_new_tokens: int, concurrency: int,
                context_length: int, kv_capacity_tokens: int | None = None,
                margin: int = 16) -> PointFit:
    """Whether a planned point fits, with the numbers either way."""
    usable, why = usable_context(context_length, kv_capacity_tokens, concurrency)
    total = prompt_tokens + max_new_tokens + margin
    sums = f"{prompt_tokens} + {max_new_tokens} + {margin} = {total}"
    mp = usable - max_new_tokens - margin
    if total <= usable:
        return PointFit(True, f"fits: {sums} <= usable context {usable} ({why})", usable, mp)
    return PointFit(False, f"{sums} > usable context {usable} ({why})", usable, mp)
