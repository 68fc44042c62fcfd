"""sweepcore.importers.reader: a result file read as a stream gives what reading it whole
gives, wherever its chunks and slices are cut; its errors name the line and column json
itself names; it is never read whole, and its per-request arrays are held compactly."""

import io
import json
import tracemalloc

import pytest

from sweepcore import importers
from sweepcore.importers import ImportFileError, common, reader
from tests.import_samples import ONE_BATCH_FILE, SGLANG_FILE, VLLM_FILE, vllm_detailed


def awkward_vllm(requests=40):
    """A detailed vLLM file whose texts have commas, quotes, backslashes, brackets and
    non-ASCII in them, with errors of several texts."""
    raw = json.loads(vllm_detailed(requests))
    raw["generated_texts"] = [f'a, "b" \\ [c], {i} — ü' if i % 3 else "" for i in range(requests)]
    raw["errors"] = ['timeout, "read"' if i % 10 == 9 else None if i % 4 == 0 else "" for i in range(requests)]
    raw["notes"] = {"nested": [1, [2, [3]]], "text": "x,y"}
    return json.dumps(raw, ensure_ascii=False)


FILES = {
    "detailed.json": awkward_vllm(),
    "pretty.json": json.dumps(json.loads(awkward_vllm()), indent=2),
    SGLANG_FILE.name: SGLANG_FILE.read_text(),  # request_rate Infinity, as SGLang writes it
    ONE_BATCH_FILE.name: ONE_BATCH_FILE.read_text(),
    VLLM_FILE.name: VLLM_FILE.read_text(),
}


@pytest.mark.parametrize("chunk, slice_", [(7, 16), (64, 50), (1000, 333)])
@pytest.mark.parametrize("name", FILES)
def test_a_file_read_in_small_chunks_and_slices_parses_as_read_at_once(monkeypatch, name, chunk, slice_):
    whole = importers.parse(name, FILES[name])
    monkeypatch.setattr(reader, "CHUNK", chunk)
    monkeypatch.setattr(reader, "SLICE", slice_)
    cut = importers.parse(name, FILES[name])
    assert cut.points == whole.points and cut.sha256 == whole.sha256
    assert len(whole.points[0].requests) == whole.points[0].requests_in_file


def test_the_texts_of_the_file_are_read_as_json_reads_them():
    (point,) = importers.parse("detailed.json", FILES["detailed.json"]).points
    assert point.extra["notes"] == {"nested": [1, [2, [3]]], "text": "x,y"}
    errors = {r.index: r.error for r in point.requests if r.error_kind == "imported_error"}
    assert errors == {i: 'timeout, "read"' for i in range(9, 40, 10)}


class Recorded(io.BytesIO):
    """A file that notes how much each read asked for."""

    def __init__(self, data):
        super().__init__(data)
        self.asked = []

    def read(self, size=-1):
        self.asked.append(size)
        return super().read(size)


def test_the_file_is_read_in_chunks_never_whole(monkeypatch):
    monkeypatch.setattr(reader, "CHUNK", 4096)
    monkeypatch.setattr(reader, "SLICE", 4096)
    data = vllm_detailed(2_000).encode()
    assert len(data) > 20 * 4096
    source = Recorded(data)
    (point,) = importers.parse("big.json", source).points
    assert point.requests_in_file == 2_000
    assert source.asked and all(0 < size <= 4096 for size in source.asked)


def test_the_inter_token_latencies_are_kept_only_for_the_requests_stored(monkeypatch):
    monkeypatch.setattr(common, "MAX_REQUESTS_PER_POINT", 10)
    raw = io.BytesIO(vllm_detailed(100).encode())
    reader.prescan("big.json", raw)
    ((_, data),) = reader.read_documents("big.json", raw)
    itls, ttfts = data["itls"], data["ttfts"]
    assert itls.kept_indices == list(range(0, 100, 10)) and itls.count == 100
    assert len(itls.flat) == sum(0 if i % 10 == 9 else 1 for i in range(0, 100, 10))
    assert len(ttfts.values) == 100  # numbers for every request: counts and lengths are over all
    (point,) = importers.parse("big.json", vllm_detailed(100)).points
    assert [r.index for r in point.requests] == list(range(0, 100, 10))


def test_reading_a_large_file_holds_a_small_part_of_what_parsing_it_whole_holds(monkeypatch):
    """What is held is the per-request numbers (8 bytes each) and one slice of text with its
    items: the slice is made small here, so that a small file shows it."""
    monkeypatch.setattr(reader, "CHUNK", 1 << 16)
    monkeypatch.setattr(reader, "SLICE", 1 << 16)
    raw = json.loads(vllm_detailed(1))
    n = 60_000
    raw.update(num_prompts=n, completed=n, failed=0, input_lens=[1024] * n, output_lens=[4] * n,
               ttfts=[0.25] * n, itls=[[0.01, 0.02, 0.03]] * n, start_times=[1.5] * n, latencies=[0.3] * n,
               queue_times=[0.0] * n, generated_texts=["abcd"] * n, errors=[""] * n)
    data = json.dumps(raw).encode()

    def peak(read):
        tracemalloc.start()
        try:
            read()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    whole = peak(lambda: json.loads(data))
    streamed = peak(lambda: reader.read_documents("big.json", io.BytesIO(data)))
    assert streamed * 4 < whole, (streamed, whole)


@pytest.mark.parametrize("change", [
    lambda t: t.replace('"ttfts": [', '"ttfts": [0.1,, ', 1),
    lambda t: t.replace('"itls": [', '"itls": [[0.1], [[', 1),
    lambda t: t.replace('"errors": [', '"errors": ["\\q", ', 1),
    lambda t: t.replace('"duration": ', '"duration": +', 1),
    lambda t: t.replace('"backend": "vllm"', '"backend" "vllm"', 1),
    lambda t: t[:-1],
])
@pytest.mark.parametrize("chunk", [5, reader.CHUNK])
def test_invalid_json_names_the_line_and_column_json_names(monkeypatch, change, chunk):
    text = change(json.dumps(json.loads(awkward_vllm()), indent=1))
    with pytest.raises(json.JSONDecodeError) as wrong:
        json.loads(text)
    monkeypatch.setattr(reader, "CHUNK", chunk)
    with pytest.raises(ImportFileError) as exc:
        importers.parse("r.json", text)
    expected = f"r.json line {wrong.value.lineno} column {wrong.value.colno}: invalid JSON"
    assert str(exc.value).startswith(expected), (str(exc.value), wrong.value)


def test_a_json_lines_result_that_spans_lines_or_shares_one_is_refused():
    first, second = SGLANG_FILE.read_text().splitlines()[:2]
    spread = first + "\n" + json.dumps(json.loads(second), indent=1) + "\n"
    with pytest.raises(ImportFileError) as exc:
        importers.parse("r.jsonl", spread)
    assert str(exc.value).startswith("r.jsonl line 2: a result of a JSON Lines file must be on one line (this one "
                                     "goes on to line ")
    with pytest.raises(ImportFileError, match=r"^r\.jsonl line 1 column \d+: invalid JSON \(Extra data\)"):
        importers.parse("r.jsonl", first + " " + second + "\n")


def test_a_byte_order_mark_and_windows_line_ends_are_read():
    lines = SGLANG_FILE.read_text().splitlines()
    plain = importers.parse("r.jsonl", "\n".join(lines))
    marked = importers.parse("r.jsonl", ("\ufeff" + "\r\n".join(lines) + "\r\n").encode())
    assert marked.points == plain.points


@pytest.mark.parametrize("indent", [None, 1])
def test_arrays_of_lists_are_read_a_slice_at_a_time_not_item_by_item(monkeypatch, indent):
    """Equal lists (the same ITLs for every request) put the last comma of each slice at
    the same place in a list: the slice is then cut after a whole list instead."""
    monkeypatch.setattr(reader, "SLICE", 4096)
    n = 20_000
    raw = json.loads(vllm_detailed(1))
    raw.update(num_prompts=n, completed=n, failed=0, input_lens=[1024] * n, output_lens=[16] * n,
               ttfts=[0.2] * n, itls=[[0.02] * 3] * n, start_times=[1.0] * n, generated_texts=["a, b"] * n,
               errors=[""] * n, latencies=[0.5] * n, queue_times=[0.0] * n)
    one_by_one = []
    value = reader._Text.value
    monkeypatch.setattr(reader._Text, "value", lambda self: one_by_one.append(1) or value(self))
    (point,) = importers.parse("equal.json", json.dumps(raw, indent=indent)).points
    assert point.requests_in_file == n
    assert len(one_by_one) < n // 20  # of 180,000 items; the fields' values are read one by one
