"""sweepcore.prompts: exact lengths, documents, ShareGPT filtering, server tokenizers, context cap."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sweepcore import prompts
from sweepcore.files import FileProblem
from sweepcore.prompts import (
    FIBONACCI_PROMPT,
    LocalTokenizer,
    ServerTokenizer,
    TokenizerError,
    check_point,
    document_words,
    fit_to_tokens,
    load_sharegpt,
    long_context_prompt,
    max_prompt_tokens,
    usable_context,
)


def words_tok(text):
    return len(re.findall(r"\w+|[^\w\s]", text)) + 1


def chunky_tok(text):
    # 1-4 chars per token: long words cost several tokens, so counts jump by more than one
    return len(re.findall(r"\w{1,4}|[^\w\s]", text))


@pytest.mark.parametrize("tok", [words_tok, chunky_tok])
@pytest.mark.parametrize("target", [100, 257, 1000, 8191, 30000])
def test_long_context_reaches_exact_count_in_few_calls(tok, target):
    counter = LocalTokenizer(tok)
    sp = long_context_prompt(target, counter.count, seed=7)
    assert sp.exact and sp.tokens == target == tok(sp.text)
    assert sp.calls == counter.calls
    assert sp.calls <= 16, sp.calls
    assert sp.text.endswith(prompts.LONG_CONTEXT_QUESTION)


def test_a_remembered_prompt_is_counted_once_more_and_sized_afresh_when_the_count_differs():
    first = LocalTokenizer(chunky_tok)
    sized = long_context_prompt(3000, first.count, seed=3, remember="engine-model")
    assert sized.exact and sized.calls == first.calls > 1
    again = LocalTokenizer(chunky_tok)
    reused = long_context_prompt(3000, again.count, seed=3, remember="engine-model")
    assert (reused.text, reused.tokens, reused.calls, again.calls) == (sized.text, 3000, 1, 1)
    # Another seed, length or key is its own prompt.
    assert long_context_prompt(3000, chunky_tok, seed=4, remember="engine-model").text != sized.text
    # The same key, a tokenizer that counts otherwise: checked, found off, sized for it.
    other = LocalTokenizer(words_tok)
    refit = long_context_prompt(3000, other.count, seed=3, remember="engine-model")
    assert refit.exact and words_tok(refit.text) == 3000 and refit.text != sized.text
    assert refit.calls == other.calls > 1
    # Without a key nothing is remembered: every call sizes its prompt.
    plain = LocalTokenizer(words_tok)
    assert long_context_prompt(3000, plain.count, seed=3).calls == plain.calls > 1


def test_document_is_deterministic_mixed_and_not_a_short_repeat():
    a = "".join(document_words(5, 20000))
    assert a == "".join(document_words(5, 20000))
    assert a != "".join(document_words(6, 20000))
    assert "```python" in a and "def " in a and "return total" in a
    sentences = [s for s in re.split(r"(?<=\.)\s", a) if len(s) > 30]
    assert len(sentences) > 500
    assert len(set(sentences)) / len(sentences) > 0.95
    # no 400-character window repeats anywhere at 1000 sampled positions
    windows = [a[i:i + 400] for i in range(0, len(a) - 400, max(1, len(a) // 1000))]
    assert len(set(windows)) == len(windows)


def test_fit_raises_when_fixed_part_too_long_and_handles_exact_base():
    with pytest.raises(ValueError, match="fixed part alone"):
        long_context_prompt(20, words_tok)
    with pytest.raises(ValueError):
        fit_to_tokens(["a"] * 10, 3, words_tok, suffix=" one two three four")
    sp = fit_to_tokens([" a"] * 10, words_tok("q"), words_tok, suffix="q")
    assert sp.exact and sp.text == "q"


def test_fibonacci_prompt_is_fixed():
    assert FIBONACCI_PROMPT.startswith("Write a Python function that returns the n-th Fibonacci number")
    sp = prompts.fibonacci_prompt(words_tok)
    assert sp.tokens == words_tok(FIBONACCI_PROMPT) and sp.calls == 1


def test_sharegpt_filter(tmp_path):
    data = [
        {"id": "a", "conversations": [{"from": "human", "value": "short one here please"},
                                      {"from": "gpt", "value": "ok"}]},
        {"id": "b", "conversations": [{"from": "human", "value": "x " * 500}]},
        {"id": "c", "conversations": [{"from": "gpt", "value": "no human turn"}]},
        {"id": "d", "conversations": []},
        {"id": "e", "conversations": [{"from": "human", "value": "hi"}]},
        {"id": "f", "conversations": [{"from": "human", "value": "tell me about paged attention"}]},
    ]
    p = tmp_path / "sg.json"
    p.write_text(json.dumps(data))
    got = load_sharegpt(str(p), words_tok, num_prompts=10, max_prompt_tokens=100)
    assert sorted(d.text for d in got) == ["short one here please", "tell me about paged attention"]
    assert all(d.prompt_tokens == words_tok(d.text) for d in got)
    assert len(load_sharegpt(str(p), words_tok, num_prompts=1, max_prompt_tokens=100)) == 1
    p.write_text("{}")
    with pytest.raises(ValueError):
        load_sharegpt(str(p), words_tok, num_prompts=1, max_prompt_tokens=100)


def test_a_data_set_that_is_no_file_too_big_or_not_json_is_one_line_naming_it(tmp_path):
    def load(path, **kw):
        return load_sharegpt(str(path), words_tok, num_prompts=1, max_prompt_tokens=100, **kw)

    with pytest.raises(FileProblem, match=r"^/dev/zero: not a regular file"):
        load("/dev/zero")  # before: read until memory ran out
    p = tmp_path / "sg.json"
    p.write_text('[{"conversations": [{"from": "human", "value": "what is paged attention"}]}]')
    with pytest.raises(FileProblem, match=r"sg\.json: more than 10 bytes"):
        load(p, max_bytes=10)
    with pytest.raises(FileProblem, match=r"outside this host's data roots \(none are set\)"):
        load(p, roots=[])
    assert [d.text for d in load(p, roots=[tmp_path])] == ["what is paged attention"]
    p.write_text('[{"conversations": ["a turn that is no mapping"]}, {"conversations": [')
    with pytest.raises(FileProblem, match=r"sg\.json: not JSON \(Expecting value at line 1, column \d+\)$"):
        load(p)
    p.write_text('[{"conversations": ["a turn that is no mapping"]}]')
    assert load(p) == []


def test_context_cap_messages_and_numbers():
    f = check_point(30000, 256, 1, context_length=32768, kv_capacity_tokens=24576, margin=16)
    assert not f.fits
    assert f.reason == "30000 + 256 + 16 = 30272 > usable context 24576 (KV capacity 24576 tokens ÷ concurrency 1)"
    assert f.max_prompt_tokens == 24576 - 256 - 16
    f = check_point(30000, 256, 1, context_length=32768, kv_capacity_tokens=None)
    assert f.fits and f.reason.startswith("fits: 30000 + 256 + 16 = 30272 <= usable context 32768 (context length 32768)")
    f = check_point(8100, 128, 8, context_length=32768, kv_capacity_tokens=65536)
    assert not f.fits and "usable context 8192 (KV capacity 65536 tokens ÷ concurrency 8)" in f.reason
    assert usable_context(32768, 10**9, 4) == (32768, "context length 32768")
    assert usable_context(32768, 65536, 3)[0] == 21845
    assert max_prompt_tokens(4096, None, 1, 256, 16) == 3824
    # the boundary: exactly equal fits
    assert check_point(3824, 256, 1, 4096).fits and not check_point(3825, 256, 1, 4096).fits


# --------------------------------------------------------------- server tokenizer endpoints

class _TokHandler(BaseHTTPRequestHandler):
    style = "sglang"
    calls = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append((self.path, body))
        st = type(self).style
        if st == "sglang" and self.path == "/tokenize":
            n = words_tok(body["prompt"])
            return self._json(200, {"tokens": list(range(n)), "count": n, "max_model_len": 4096})
        if st == "llamacpp" and self.path == "/tokenize":  # llama.cpp: needs "content"
            n = words_tok(body["content"]) if "content" in body else 0
            return self._json(200, {"tokens": list(range(n))})
        if st == "llama-cpp-python" and self.path == "/extras/tokenize/count":
            return self._json(200, {"count": words_tok(body["input"])})
        self._json(404, {"detail": "Not Found"})

    def _json(self, code, obj):
        raw = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def tok_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _TokHandler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _TokHandler.calls = []
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("style,endpoint", [("sglang", "tokenize"), ("llamacpp", "tokenize-content"),
                                            ("llama-cpp-python", "extras-count")])
def test_server_tokenizer_endpoints(tok_server, style, endpoint):
    _TokHandler.style = style
    tk = ServerTokenizer(f"http://127.0.0.1:{tok_server.server_address[1]}", model="m")
    assert tk.count("hello there, world") == 5
    assert tk.endpoint == endpoint
    first = tk.calls
    sp = long_context_prompt(500, tk.count, seed=1)
    assert sp.exact and words_tok(sp.text) == 500
    assert tk.calls - first == sp.calls  # once found, one HTTP call per count
    if style == "sglang":
        assert tk.max_model_len == 4096
        assert _TokHandler.calls[0][1] == {"prompt": "hello there, world", "model": "m"}


def test_server_without_tokenizer_and_server_not_there(tok_server):
    _TokHandler.style = "none"
    tk = ServerTokenizer(f"http://127.0.0.1:{tok_server.server_address[1]}")
    with pytest.raises(TokenizerError, match="no tokenizer endpoint"):
        tk.count("x")
    s = __import__("socket").socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(TokenizerError, match="connection refused"):
        ServerTokenizer(f"http://127.0.0.1:{port}").count("x")
