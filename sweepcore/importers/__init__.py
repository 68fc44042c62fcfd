"""Parsers for the result files that vLLM and SGLang benchmarks write.  Pure Python, no Django.

``detect_format(filename, text)`` names the format of a file; ``parse(filename, text, fmt)``
turns it into an :class:`ImportedFile`: plain dataclasses with Sweeplab's field names
(:class:`ImportedPoint`, one per benchmark run in the file, and :class:`ImportedRequest` for
per-request arrays).  Whatever does not map is kept, under its own name, in the point's
``extra``.  A file that is wrong anywhere raises :class:`ImportFileError` naming the line
(JSON Lines) or the document, and the field: nothing of it is used.  ``runs.imports``
stores the result in the database.

Where the field names come from
-------------------------------
``vllm`` -- ``vllm bench serve --save-result [--save-detailed]``: vllm-project/vllm
  ``vllm/benchmarks/serve.py`` (read at commit 009e6d4a1cd6): ``main`` writes
  ``result_json`` = ``date`` (``%Y%m%d-%H%M%S``, the client's local time; stored as UTC), ``endpoint_type``,
  ``backend``, ``label``, ``model_id``, ``tokenizer_id``, ``num_prompts``, ``--metadata``
  KEY=VALUE pairs, ``request_rate`` (a number or ``"inf"``), ``burstiness``,
  ``max_concurrency``, optional ``ramp_up_*``, merged with what ``benchmark`` returns:
  ``duration``, ``completed``, ``failed``, ``total_input_tokens``, ``total_output_tokens``,
  ``request_throughput``, ``request_goodput``, ``output_throughput``,
  ``total_token_throughput``, ``max_output_tokens_per_s``, ``max_concurrent_requests``,
  ``rtfx``, ``{mean,median,std}_{ttft,tpot,itl,e2el}_ms`` and ``p{P}_..._ms`` for each
  ``--metric-percentiles`` value (default 99), ``spec_decode_acceptance_rate``,
  ``spec_decode_acceptance_length``, ``spec_decode_num_drafts``,
  ``spec_decode_draft_tokens``, ``spec_decode_accepted_tokens``,
  ``spec_decode_per_position_acceptance_rates`` (only when the server's /metrics had
  speculative counters), and with ``--save-detailed`` the arrays ``input_lens``,
  ``output_lens``, ``ttfts``, ``itls``, ``start_times``, ``generated_texts``, ``errors``
  (``latencies`` and ``queue_times`` are written either way).  ``--append-result`` appends
  one such object per line, so a vLLM file may hold several runs.
``sglang`` -- ``python -m sglang.bench_serving --output-file F [--output-details]``:
  sgl-project/sglang ``python/sglang/bench_serving.py`` (read at commit 0033168f0f58 and in
  a newer snapshot that adds ``tag``, ``server_info``, ``p90_e2e_latency_ms``,
  ``max_output_tokens_per_s``): one JSON object appended per run with ``tag``, ``backend``,
  ``dataset_name``, ``request_rate`` (``Infinity`` as Python's json writes it, or
  ``"trace"``), ``max_concurrency``, ``sharegpt_output_len``, ``random_input_len``,
  ``random_output_len``, ``random_range_ratio``, ``server_info`` (``/get_server_info``:
  ``tp_size``, ``model_path``, ``speculative_algorithm``, ``version`` ...),
  ``duration``, ``completed``, ``total_input_tokens``, ``total_output_tokens``,
  ``total_output_tokens_retokenized``, ``request_throughput``, ``input_throughput``,
  ``output_throughput``, ``total_throughput``, ``{mean,median,std,p90,p99}_e2e_latency_ms``,
  ``{mean,median,std,p99}_{ttft,tpot}_ms``, ``{mean,median,std,p95,p99}_itl_ms``,
  ``concurrency``, ``accept_length``, ``max_output_tokens_per_s``,
  ``max_concurrent_requests``; with ``--output-details`` also ``input_lens``,
  ``output_lens``, ``ttfts``, ``itls``, ``generated_texts``, ``errors``.
``sglang-one-batch`` -- ``python -m sglang.bench_one_batch_server --result-filename F``:
  sgl-project/sglang ``python/sglang/bench_one_batch_server.py`` (``run_one_case``, read
  at commit 00b08c497f07 and in a newer snapshot that adds ``last_gen_throughput``): one line per (batch size, input len,
  output len) with ``run_name``, ``batch_size``, ``input_len``, ``output_len``,
  ``latency`` (s), ``output_throughput``, ``overall_throughput`` and, in newer versions,
  ``last_gen_throughput``; ``ttft``, ``input_throughput`` and ``acc_length`` are accepted
  where a version writes them.

The mapping (docs/metrics.md defines our fields; README "Importing results" has the table)
----------------------------------------------------------------------------------------
* Same name in vLLM and here: ``duration``, ``completed``, ``failed``,
  ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
  ``output_throughput``, ``total_token_throughput``, ``max_output_tokens_per_s`` and every
  ``{mean,median,std,p90,p99}_{ttft,tpot,itl}_ms``; ``*_e2el_ms`` -> ``*_e2el_ms``.
* vLLM ``spec_decode_acceptance_length`` -> ``accept_length`` (the rest of ``spec_decode_*``
  stays in ``extra``).  Any ``spec_decode_*`` field marks the run speculative.
* SGLang bench_serving: ``*_e2e_latency_ms`` -> ``*_e2el_ms``; ``total_throughput`` ->
  ``total_token_throughput``; ``accept_length`` -> ``accept_length`` (SGLang's server-wide
  average, not this point's own: ``extra.accept_length_source`` says so); ``failed`` is
  the number of non-empty ``errors`` when the details are there, else unknown (None).
* SGLang bench_one_batch_server (every request of the batch succeeded, or no line is
  written): ``batch_size`` -> ``concurrency`` and ``completed``; ``input_len`` ->
  ``prompt_tokens``; ``output_len`` -> ``max_new_tokens``; ``latency`` -> ``duration``;
  ``overall_throughput`` -> ``total_token_throughput``; ``output_throughput`` is ours
  recomputed as batch_size x output_len / latency (newer SGLang divides by latency - ttft;
  its own value stays in ``extra``); ``last_gen_throughput`` / batch_size ->
  ``server_decode_tok_s``; ``acc_length`` -> ``accept_length``.  With batch size 1 and a
  ``ttft``, TTFT/E2EL/TPOT statistics and ``decode_tok_s`` are that one request's.
* Percentiles other than p90 and p99 (p95 ITL, p50 ...), goodput, client queue times,
  ``concurrency``, retokenized counts, ``server_info`` and everything else are kept in
  ``extra`` under their own names.  Non-finite numbers (NaN, Infinity) are stored as None
  in columns and as strings in ``extra``.
* Per-request arrays (vLLM ``--save-detailed``, SGLang ``--output-details``) become
  request records: ``chunk_offsets`` = the TTFT, then the TTFT plus the running sum of
  ``itls[i]`` (both tools take one ITL sample per streamed chunk); ``output_tokens`` =
  ``output_lens[i]``, spread over the chunks evenly (one each when they match);
  ``prompt_tokens`` = ``input_lens[i]``; ``error`` = ``errors[i]`` (error_kind
  ``imported_error``; a request with no error but no output is ``empty_response``).
  ``send_time`` is vLLM's ``start_times[i]`` (``time.perf_counter`` seconds, so only the
  differences mean anything) and None where the file has none; ``finish_reason``,
  ``http_status`` and ``spec_verify_ct`` are not in these files and stay empty.  The
  point's ``decode_tok_s`` (no file has it) is computed from these records by
  ``sweepcore.metrics`` and listed in ``extra.computed_from_requests``.

Points and runs
---------------
A point's workload is the file's dataset name (``dataset_name``; vLLM writes none unless
``--metadata dataset_name=...``: then ``unspecified``); random-token datasets are
*synthetic* workloads whose ``prompt_tokens`` is the target input length, others are
*dataset* workloads without one.  ``concurrency`` is ``max_concurrency`` when the run set
one, else ``num_prompts`` (every request may be in flight; ``extra.concurrency_unbounded``).
A finite request rate is an open-loop run: it is stored in the point's ``request_rate``
and in its run's ``params`` (``{"request_rate": 4.0}``), so points at different rates
never share a history series.  The method is ``autoregressive`` unless the file shows
speculative decoding: SGLang's ``server_info.speculative_algorithm`` (DFLASH -> ``dflash``,
DDTREE -> ``ddtree``, other algorithms -> ``speculative`` with ``{"algorithm": NAME}``),
or spec-decode fields without a named algorithm -> ``speculative``.  TP comes from
``server_info.tp_size`` or a ``tp``/``tp_size``/``tensor_parallel_size`` field, else None
(the importer uses 1 or what it is told).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sweepcore import metrics as metrics_lib

VLLM = "vllm"
SGLANG = "sglang"
SGLANG_ONE_BATCH = "sglang-one-batch"
FORMATS = (VLLM, SGLANG, SGLANG_ONE_BATCH)
FORMAT_DESCRIPTIONS = {
    VLLM: "`vllm bench serve --save-result` JSON",
    SGLANG: "SGLang `bench_serving --output-file` JSON Lines",
    SGLANG_ONE_BATCH: "SGLang `bench_one_batch_server --result-filename` JSON Lines",
}

SYNTHETIC_DATASETS = {
    "random", "random-ids", "random-mm", "random-image", "image", "random-rerank",
    "generated-shared-prefix", "prefix_repetition",
}
UNSPECIFIED_DATASET = "unspecified"
SPECULATIVE = "speculative"
ERROR_KIND = "imported_error"


class ImportRefused(ValueError):
    """An import that cannot be done; the message says why, in one line."""


class ImportFileError(ImportRefused):
    """The file itself is wrong: unreadable, of no known format, or a field is wrong."""


# --- What a parser returns ---------------------------------------------------------------


@dataclass
class ImportedRequest:
    """One request of a point, as a RequestRecord will hold it (None: not in the file)."""

    index: int
    send_time: float | None
    chunk_offsets: list[float]
    chunk_tokens: list[int]
    prompt_tokens: int | None
    output_tokens: int
    error_kind: str = ""
    error: str = ""
    token_count_source: str = "imported"


@dataclass
class ImportedPoint:
    """One benchmark run of the file: a point with our field names."""

    index: int  # order in the file
    line: int | None  # its line (JSON Lines), None for a single document
    workload: str
    workload_kind: str  # "synthetic" | "dataset" (benchmarks.models.WorkloadKind values)
    dataset_path: str
    prompt_tokens: int | None
    actual_prompt_tokens: int | None
    max_new_tokens: int
    concurrency: int
    request_rate: float | None
    method: str
    params: dict
    tp: int | None
    metrics: dict[str, Any]  # Point column -> value
    extra: dict[str, Any]
    requests: list[ImportedRequest] = field(default_factory=list)
    measured_at: datetime | None = None
    model: str | None = None
    backend: str | None = None
    engine_kind: str | None = None  # "vllm" | "sglang" | None (unknown)
    engine_version: str = ""
    label: str = ""
    server_info: dict = field(default_factory=dict)  # SGLang /get_server_info, for Run.server_info


@dataclass
class ImportedFile:
    format: str
    filename: str
    points: list[ImportedPoint]

    @property
    def request_count(self):
        return sum(len(p.requests) for p in self.points)


# --- Reading the text --------------------------------------------------------------------


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return json.dumps(text)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Doc:
    """One JSON object of the file and where it is, for typed reads with clear errors."""

    def __init__(self, filename: str, data: Any, line: int | None):
        self.filename = filename
        self.line = line
        self.where = f"{filename} line {line}" if line is not None else filename
        if not isinstance(data, dict):
            raise ImportFileError(f"{self.where}: expected a JSON object, got {_describe(data)}")
        self.data = data
        self.used: set[str] = set()

    def error(self, name: str, message: str) -> ImportFileError:
        return ImportFileError(f"{self.where}: field {name!r}: {message}")

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def raw(self, name: str) -> Any:
        self.used.add(name)
        return self.data.get(name)

    def number(self, name: str, required: bool = False, minimum: float | None = 0) -> float | None:
        value = self.raw(name)
        if value is None:
            if required:
                raise self.error(name, "missing (a number is required)" if name not in self.data
                                 else "expected a number, got null")
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"expected a number, got {_describe(value)}")
        if not math.isfinite(value):
            self.used.discard(name)  # kept in extra as a string; the column stays empty
            return None
        if minimum is not None and value < minimum:
            raise self.error(name, f"expected a number >= {minimum:g}, got {value!r}")
        return float(value)

    def integer(self, name: str, required: bool = False, minimum: int = 0) -> int | None:
        value = self.raw(name)
        if value is None:
            if required:
                raise self.error(name, "missing (an integer is required)" if name not in self.data
                                 else "expected an integer, got null")
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(name, f"expected an integer, got {_describe(value)}")
        if value < minimum:
            raise self.error(name, f"expected an integer >= {minimum}, got {value}")
        return value

    def string(self, name: str) -> str | None:
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(name, f"expected a string, got {_describe(value)}")
        return value

    def rate(self, name: str) -> float | None:
        """A request rate: a positive number, or inf/"inf"/"trace" (None: no rate limit)."""
        value = self.raw(name)
        if value is None or (isinstance(value, str) and value.lower() in ("inf", "infinity", "trace")):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"expected a number or \"inf\", got {_describe(value)}")
        if math.isinf(value):
            return None
        if math.isnan(value) or value <= 0:
            raise self.error(name, f"expected a positive number or \"inf\", got {value!r}")
        return float(value)

    def array(self, name: str, length: int | None, item: str) -> list | None:
        """A per-request array: numbers, lists of numbers, or strings (null items allowed
        for strings, as an empty text)."""
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(name, f"expected a list, got {_describe(value)}")
        if length is not None and len(value) != length:
            raise self.error(name, f"expected {length} items (one per request), got {len(value)}")
        for i, v in enumerate(value):
            path = f"{name}[{i}]"
            if item == "number":
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                    raise self.error(path, f"expected a number >= 0, got {_describe(v)}")
            elif item == "integer":
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise self.error(path, f"expected an integer >= 0, got {_describe(v)}")
            elif item == "numbers":
                if not isinstance(v, list):
                    raise self.error(path, f"expected a list of numbers, got {_describe(v)}")
                for j, x in enumerate(v):
                    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                        raise self.error(f"{path}[{j}]", f"expected a number >= 0, got {_describe(x)}")
            elif item == "string":
                if v is not None and not isinstance(v, str):
                    raise self.error(path, f"expected a string, got {_describe(v)}")
        return value

    def unused(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.items() if k not in self.used}


def _json_error(where: str, exc: json.JSONDecodeError, line: int | None = None) -> ImportFileError:
    lineno = line if line is not None else exc.lineno
    return ImportFileError(f"{where} line {lineno} column {exc.colno}: invalid JSON ({exc.msg})")


def load_documents(filename: str, text: str) -> list[tuple[int | None, Any]]:
    """The JSON objects of a file, with their line numbers (None for a single document
    that spans lines).  JSON Lines (one object per line) and one JSON document both work."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines()
    numbered = [(i, line) for i, line in enumerate(lines, 1) if line.strip()]
    if not numbered:
        raise ImportFileError(f"{filename}: the file is empty")
    first_no, first = numbered[0]
    try:
        first_value = json.loads(first)
    except json.JSONDecodeError:
        first_value = None
    if not isinstance(first_value, dict):
        # Not one object per line: one document, perhaps pretty-printed.
        try:
            return [(None, json.loads(text))]
        except json.JSONDecodeError as exc:
            raise _json_error(filename, exc) from None
    docs = []
    for no, line in numbered:
        try:
            docs.append((no, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise _json_error(filename, exc, line=no) from None
    if len(docs) == 1 and not _is_jsonl_name(filename):
        docs = [(None, docs[0][1])]  # a one-line JSON document: no line to name
    return docs


def _is_jsonl_name(filename: str) -> bool:
    return filename.lower().endswith((".jsonl", ".ndjson"))


# --- Detection ---------------------------------------------------------------------------

_VLLM_KEYS = {"mean_e2el_ms", "median_e2el_ms", "total_token_throughput", "model_id", "tokenizer_id",
              "endpoint_type", "num_prompts", "burstiness"}
_SGLANG_KEYS = {"mean_e2e_latency_ms", "median_e2e_latency_ms", "total_throughput", "input_throughput",
                "accept_length", "dataset_name", "server_info", "random_input_len", "sharegpt_output_len"}
_ONE_BATCH_KEYS = {"batch_size", "input_len", "output_len", "latency"}


def _format_of(data: dict) -> str | None:
    keys = set(data)
    if _ONE_BATCH_KEYS <= keys:
        return SGLANG_ONE_BATCH
    vllm, sglang = len(keys & _VLLM_KEYS), len(keys & _SGLANG_KEYS)
    if vllm > sglang:
        return VLLM
    if sglang > vllm:
        return SGLANG
    return None


def _unknown_format(where: str) -> ImportFileError:
    known = "; ".join(f"{name} ({text})" for name, text in FORMAT_DESCRIPTIONS.items())
    return ImportFileError(
        f"{where}: not a result file of a known format; known formats: {known}. "
        "Name one with --format if the file is one of them"
    )


def detect_format(filename: str, text: str) -> str:
    """The format of a result file, from its fields (ImportFileError when none fits)."""
    docs = load_documents(filename, text)
    line, data = docs[0]
    where = f"{filename} line {line}" if line is not None else filename
    if not isinstance(data, dict):
        raise _unknown_format(where)
    fmt = _format_of(data)
    if fmt is None:
        raise _unknown_format(where)
    return fmt


# --- Shared pieces -----------------------------------------------------------------------


def _clean_extra(value: Any) -> Any:
    """JSON-safe (PostgreSQL's jsonb has no NaN or Infinity): non-finite floats as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _clean_extra(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_extra(v) for v in value]
    return value


def _workload(dataset: str | None) -> tuple[str, str]:
    name = (dataset or "").strip() or UNSPECIFIED_DATASET
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-").lower() or UNSPECIFIED_DATASET
    kind = "synthetic" if name in SYNTHETIC_DATASETS else "dataset"
    return slug[:100], kind


SPEC_METHODS = {"DFLASH": ("dflash", "block_size"), "DDTREE": ("ddtree", "budget")}


def _method(algorithm: str | None, speculative: bool, server_info: dict | None) -> tuple[str, dict]:
    if not algorithm:
        return (SPECULATIVE, {}) if speculative else ("autoregressive", {})
    name = str(algorithm).upper()
    info = server_info or {}
    if name == "DFLASH":
        value = info.get("speculative_num_draft_tokens")
        return "dflash", ({"block_size": value} if isinstance(value, int) else {})
    if name == "DDTREE":
        params = {}
        if isinstance(info.get("speculative_ddtree_budget"), int):
            params["budget"] = info["speculative_ddtree_budget"]
        if isinstance(info.get("speculative_ddtree_topk_cap"), int):
            params["topk_cap"] = info["speculative_ddtree_topk_cap"]
        return "ddtree", params
    return SPECULATIVE, {"algorithm": name}


def _tp(doc: _Doc, server_info: dict | None) -> int | None:
    if isinstance(server_info, dict):
        value = server_info.get("tp_size")
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    for name in ("tp", "tp_size", "tensor_parallel_size"):
        if name in doc.data:
            value = doc.raw(name)
            if isinstance(value, str) and value.strip().isdigit():  # vLLM --metadata tp=4
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise doc.error(name, f"expected a positive integer, got {_describe(value)}")
            return value
    return None


def _requests(doc: _Doc, with_start_times: bool) -> list[ImportedRequest]:
    """Request records from the per-request arrays, when the file has them."""
    if not doc.has("ttfts") and not doc.has("output_lens"):
        return []
    for name in ("input_lens", "output_lens", "ttfts", "itls"):
        if not doc.has(name):
            raise doc.error(name, "missing: the per-request arrays come together "
                                  "(input_lens, output_lens, ttfts, itls)")
    ttfts = doc.array("ttfts", None, "number")
    n = len(ttfts)
    input_lens = doc.array("input_lens", n, "integer")
    output_lens = doc.array("output_lens", n, "integer")
    itls = doc.array("itls", n, "numbers")
    errors = doc.array("errors", n, "string") or [""] * n
    starts = doc.array("start_times", n, "number") if with_start_times else None
    records = []
    for i in range(n):
        error = errors[i] or ""
        out = output_lens[i]
        ok = not error and out > 0 and ttfts[i] > 0
        offsets: list[float] = []
        tokens: list[int] = []
        if ok:
            at = float(ttfts[i])
            offsets.append(at)
            for gap in itls[i]:
                at += float(gap)
                offsets.append(at)
            if len(offsets) > out:  # more chunks than tokens: keep the tokens' worth
                offsets = offsets[:out]
            base, rest = divmod(out, len(offsets))
            tokens = [base + (1 if j < rest else 0) for j in range(len(offsets))]
        kind = "" if ok else (ERROR_KIND if error else "empty_response")
        records.append(ImportedRequest(
            index=i,
            send_time=float(starts[i]) if starts else None,
            chunk_offsets=offsets,
            chunk_tokens=tokens,
            prompt_tokens=input_lens[i],
            output_tokens=out if ok else 0,
            error_kind=kind,
            error=error if error else ("" if ok else "no output tokens (as recorded in the file)"),
        ))
    return records


def _fill_from_requests(metrics: dict, extra: dict, records: list[ImportedRequest], duration) -> None:
    """Fields no file has, computed from its request records (sweepcore.metrics definitions)."""
    if not records:
        return
    rows = [dict(vars(r), send_time=r.send_time if r.send_time is not None else 0.0) for r in records]
    summary = metrics_lib.summarize(rows, duration)
    computed = []
    for name in ("decode_tok_s",):
        if metrics.get(name) is None and summary.get(name) is not None:
            metrics[name] = summary[name]
            computed.append(name)
    if computed:
        extra["computed_from_requests"] = computed


def _same_prompt_length(records: list[ImportedRequest]) -> int | None:
    lengths = {r.prompt_tokens for r in records}
    return lengths.pop() if len(lengths) == 1 and None not in lengths else None


STAT_NAMES = metrics_lib.STATS  # mean, median, std, p90, p99


def _latencies(doc: _Doc, metrics: dict, ours: str, theirs: str) -> None:
    for stat in STAT_NAMES:
        name = f"{stat}_{theirs}_ms"
        if name in doc.data:  # SGLang can write -0.00 for a TPOT: latencies may be negative
            metrics[f"{stat}_{ours}_ms"] = doc.number(name, minimum=None)


# --- vLLM --------------------------------------------------------------------------------

VLLM_SAME = ("duration", "request_throughput", "output_throughput", "total_token_throughput",
             "max_output_tokens_per_s")
# Become request records (generated_texts are dropped: a record keeps no text);
# latencies and queue_times stay in extra.
VLLM_DETAIL_ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors")


def _vllm_date(doc: _Doc) -> datetime | None:
    value = doc.string("date")
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y%m%d-%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        raise doc.error("date", f"expected a date like 20260102-150405, got {_describe(value)}") from None


def _parse_vllm_one(doc: _Doc, index: int) -> ImportedPoint:
    metrics: dict[str, Any] = {}
    for name in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
        metrics[name] = doc.integer(name, required=name == "completed")
    metrics["duration"] = doc.number("duration", required=True)
    for name in VLLM_SAME[1:]:
        metrics[name] = doc.number(name)
    for m in ("ttft", "tpot", "itl"):
        _latencies(doc, metrics, m, m)
    _latencies(doc, metrics, "e2el", "e2el")
    speculative = any(k.startswith("spec_decode_") for k in doc.data)
    if doc.has("spec_decode_acceptance_length"):
        metrics["accept_length"] = doc.number("spec_decode_acceptance_length")
    algorithm = doc.string("speculative_algorithm") if "speculative_algorithm" in doc.data else None
    method, params = _method(algorithm, speculative, None)
    model = doc.string("model_id")
    backend = doc.string("backend") or doc.string("endpoint_type")
    dataset = doc.string("dataset_name") if "dataset_name" in doc.data else None
    workload, kind = _workload(dataset)
    rate = doc.rate("request_rate")
    max_concurrency = doc.integer("max_concurrency", minimum=1)
    num_prompts = doc.integer("num_prompts", minimum=1)
    records = _requests(doc, with_start_times=True)
    tp = _tp(doc, None)
    measured_at = _vllm_date(doc)
    return _point(doc, index, metrics, records, workload=workload, kind=kind, method=method, params=params,
                  tp=tp, rate=rate, max_concurrency=max_concurrency,
                  num_prompts=num_prompts, model=model, backend=backend,
                  engine_kind="vllm", measured_at=measured_at, label=doc.data.get("label") or "",
                  target_output=None, target_input=None)


def _point(doc, index, metrics, records, *, workload, kind, method, params, tp, rate, max_concurrency,
           num_prompts, model, backend, engine_kind, measured_at, label, target_output, target_input,
           engine_version="", extra_first=None, server_info=None):
    """The point of one result: settings derived as the module docstring says, and every
    field the parser did not read kept in ``extra``."""
    extra: dict[str, Any] = dict(extra_first or {})
    completed = metrics.get("completed")
    if metrics.get("failed") is None and records:
        metrics["failed"] = sum(1 for r in records if r.error_kind)
    if completed is not None and records and completed != sum(1 for r in records if not r.error_kind):
        extra["completed_in_requests"] = sum(1 for r in records if not r.error_kind)
    _fill_from_requests(metrics, extra, records, metrics.get("duration"))
    if max_concurrency is not None:
        concurrency = max_concurrency
    else:
        concurrency = num_prompts or len(records) or (completed or 0) + (metrics.get("failed") or 0) or 1
        extra["concurrency_unbounded"] = True
    run_params = dict(params)
    if rate is not None:
        run_params["request_rate"] = rate
    same_length = _same_prompt_length(records)
    prompt_tokens = None
    if kind == "synthetic":
        prompt_tokens = target_input if target_input is not None else same_length
    if target_output is None:
        outs = [r.output_tokens for r in records if not r.error_kind]
        if outs:
            target_output = max(outs)
        elif completed and metrics.get("total_output_tokens") is not None:
            target_output = round(metrics["total_output_tokens"] / completed)
        else:
            target_output = 0
    extra.update(_clean_extra(doc.unused()))
    return ImportedPoint(
        index=index, line=doc.line, workload=workload, workload_kind=kind,
        dataset_path=str(doc.data.get("dataset_path") or ""),
        prompt_tokens=prompt_tokens, actual_prompt_tokens=same_length,
        max_new_tokens=target_output, concurrency=concurrency, request_rate=rate,
        method=method, params=run_params, tp=tp, metrics={k: v for k, v in metrics.items()},
        extra=extra, requests=records, measured_at=measured_at, model=model, backend=backend,
        engine_kind=engine_kind, engine_version=engine_version, label=str(label or ""),
        server_info=_clean_extra(server_info) if isinstance(server_info, dict) else {},
    )


def parse_vllm(filename: str, text: str) -> ImportedFile:
    docs = load_documents(filename, text)
    points = []
    for i, (line, data) in enumerate(docs):
        doc = _Doc(filename, data, line)
        for name in VLLM_DETAIL_ARRAYS:  # the raw arrays become request records, not extra
            doc.used.add(name)
        points.append(_parse_vllm_one(doc, i))
    return ImportedFile(VLLM, filename, points)


# --- SGLang bench_serving ----------------------------------------------------------------

SGLANG_BACKEND_KINDS = {"sglang": "sglang", "sglang-native": "sglang", "sglang-oai": "sglang",
                        "sglang-oai-chat": "sglang", "vllm": "vllm", "vllm-chat": "vllm"}
SGLANG_DETAIL_ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")


def _parse_sglang_one(doc: _Doc, index: int) -> ImportedPoint:
    metrics: dict[str, Any] = {}
    metrics["completed"] = doc.integer("completed", required=True)
    metrics["duration"] = doc.number("duration", required=True)
    for name in ("total_input_tokens", "total_output_tokens"):
        metrics[name] = doc.integer(name)
    for name in ("request_throughput", "output_throughput", "max_output_tokens_per_s"):
        metrics[name] = doc.number(name)
    metrics["total_token_throughput"] = doc.number("total_throughput")
    for m in ("ttft", "tpot", "itl"):
        _latencies(doc, metrics, m, m)
    _latencies(doc, metrics, "e2el", "e2e_latency")
    server_info = doc.raw("server_info")
    if server_info is not None and not isinstance(server_info, dict):
        raise doc.error("server_info", f"expected an object, got {_describe(server_info)}")
    if isinstance(server_info, dict) and isinstance(server_info.get("decode"), list) and server_info["decode"]:
        server_info = server_info["decode"][0] if isinstance(server_info["decode"][0], dict) else server_info
    accept = doc.number("accept_length")
    extra_first = {}
    if accept is not None:
        metrics["accept_length"] = accept
        extra_first["accept_length_source"] = "server-wide avg_spec_accept_length (SGLang /get_server_info)"
    algorithm = (server_info or {}).get("speculative_algorithm")
    method, params = _method(algorithm if isinstance(algorithm, str) else None, accept is not None, server_info)
    backend = doc.string("backend")
    dataset = doc.string("dataset_name")
    workload, kind = _workload(dataset)
    target_input = target_output = None
    if kind == "synthetic":
        target_input = doc.integer("random_input_len", minimum=1)
        target_output = doc.integer("random_output_len")
    else:
        target_output = doc.integer("sharegpt_output_len")
    rate = doc.rate("request_rate")
    max_concurrency = doc.integer("max_concurrency", minimum=1)
    records = _requests(doc, with_start_times=False)
    tp = _tp(doc, server_info)
    model = None
    version = ""
    if isinstance(server_info, dict):
        model = server_info.get("served_model_name") or server_info.get("model_path")
        version = str(server_info.get("version") or "")
    return _point(doc, index, metrics, records, workload=workload, kind=kind, method=method, params=params,
                  tp=tp, rate=rate, max_concurrency=max_concurrency, num_prompts=None,
                  model=model if isinstance(model, str) else None, backend=backend,
                  engine_kind=SGLANG_BACKEND_KINDS.get(backend or ""), measured_at=None,
                  label=doc.data.get("tag") or "", target_output=target_output, target_input=target_input,
                  engine_version=version, extra_first=extra_first, server_info=doc.data.get("server_info"))


def parse_sglang(filename: str, text: str) -> ImportedFile:
    docs = load_documents(filename, text)
    points = []
    for i, (line, data) in enumerate(docs):
        doc = _Doc(filename, data, line)
        for name in SGLANG_DETAIL_ARRAYS:
            doc.used.add(name)
        points.append(_parse_sglang_one(doc, i))
    return ImportedFile(SGLANG, filename, points)


# --- SGLang bench_one_batch_server -------------------------------------------------------


def _parse_one_batch_one(doc: _Doc, index: int) -> ImportedPoint:
    batch = doc.integer("batch_size", required=True, minimum=1)
    input_len = doc.integer("input_len", required=True, minimum=1)
    output_len = doc.integer("output_len", required=True, minimum=1)
    latency = doc.number("latency", required=True)
    if not latency:
        raise doc.error("latency", "expected a number > 0, got 0")
    doc.number("output_throughput", required=True)
    overall = doc.number("overall_throughput")
    ttft = doc.number("ttft")
    gen = doc.number("last_gen_throughput")
    accept = doc.number("acc_length")
    metrics: dict[str, Any] = {
        "completed": batch,
        "failed": 0,
        "duration": latency,
        "total_input_tokens": batch * input_len,
        "total_output_tokens": batch * output_len,
        "request_throughput": batch / latency,
        "output_throughput": batch * output_len / latency,
        "total_token_throughput": overall if overall is not None else batch * (input_len + output_len) / latency,
    }
    if gen is not None:
        metrics["server_decode_tok_s"] = gen / batch
    if accept is not None:
        metrics["accept_length"] = accept
    if batch == 1 and ttft is not None:
        for stat in STAT_NAMES:
            value = 0.0 if stat == "std" else ttft * 1000
            metrics[f"{stat}_ttft_ms"] = value
            metrics[f"{stat}_e2el_ms"] = 0.0 if stat == "std" else latency * 1000
            if output_len > 1 and latency > ttft:
                metrics[f"{stat}_tpot_ms"] = 0.0 if stat == "std" else (latency - ttft) * 1000 / (output_len - 1)
        if output_len > 1 and latency > ttft:
            metrics["decode_tok_s"] = (output_len - 1) / (latency - ttft)
    method, params = _method(None, accept is not None, None)
    extra = {"output_throughput": doc.data.get("output_throughput")}
    for name in ("overall_throughput", "ttft", "last_gen_throughput", "acc_length"):
        if name in doc.data:
            extra[name] = _clean_extra(doc.data[name])
    doc.used.add("run_name")
    extra["run_name"] = doc.data.get("run_name")
    workload, kind = _workload("random")
    point = _point(doc, index, metrics, [], workload=workload, kind=kind, method=method, params=params,
                   tp=_tp(doc, None), rate=None, max_concurrency=batch, num_prompts=None, model=None,
                   backend="sglang", engine_kind="sglang", measured_at=None,
                   label=str(doc.data.get("run_name") or ""), target_output=output_len,
                   target_input=input_len, extra_first=extra)
    point.actual_prompt_tokens = None
    return point


def parse_sglang_one_batch(filename: str, text: str) -> ImportedFile:
    docs = load_documents(filename, text)
    points = []
    for i, (line, data) in enumerate(docs):
        doc = _Doc(filename, data, line)
        points.append(_parse_one_batch_one(doc, i))
    return ImportedFile(SGLANG_ONE_BATCH, filename, points)


PARSERS = {VLLM: parse_vllm, SGLANG: parse_sglang, SGLANG_ONE_BATCH: parse_sglang_one_batch}


def parse(filename: str, text: str, fmt: str | None = None) -> ImportedFile:
    """Parse a result file (its format detected when not given); ImportFileError if wrong."""
    if fmt is None:
        fmt = detect_format(filename, text)
    if fmt not in PARSERS:
        raise ImportFileError(f"unknown format {fmt!r}; known formats: {', '.join(FORMATS)}")
    result = PARSERS[fmt](filename, text)
    if not result.points:
        raise ImportFileError(f"{filename}: no results in the file")
    return result


def decode(filename: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFileError(f"{filename}: not UTF-8 text (byte {exc.start})") from None
