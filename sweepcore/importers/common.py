"""What every result file parser shares: the errors, what a parser returns, typed reads of
a JSON document with messages naming the line and field, and the mapping pieces the formats
have in common (workload, method, TP, request records, latency statistics, the point)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sweepcore import metrics as metrics_lib
from sweepcore.methods import AUTOREGRESSIVE, SPECULATIVE, imported_method

SYNTHETIC_DATASETS = {
    "random", "random-ids", "random-mm", "random-image", "image", "random-rerank",
    "generated-shared-prefix", "prefix_repetition",
}
UNSPECIFIED_DATASET = "unnamed-dataset"  # the file did not name its dataset: a chart category says so
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


def describe(value: Any) -> str:
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


class Doc:
    """One JSON object of the file and where it is, for typed reads with clear errors."""

    def __init__(self, filename: str, data: Any, line: int | None):
        self.filename = filename
        self.line = line
        self.where = f"{filename} line {line}" if line is not None else filename
        if not isinstance(data, dict):
            raise ImportFileError(f"{self.where}: expected a JSON object, got {describe(data)}")
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
            raise self.error(name, f"expected a number, got {describe(value)}")
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
            raise self.error(name, f"expected an integer, got {describe(value)}")
        if value < minimum:
            raise self.error(name, f"expected an integer >= {minimum}, got {value}")
        return value

    def string(self, name: str) -> str | None:
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(name, f"expected a string, got {describe(value)}")
        return value

    def rate(self, name: str) -> float | None:
        """A request rate: a positive number, or inf/"inf"/"trace" (None: no rate limit)."""
        value = self.raw(name)
        if value is None or (isinstance(value, str) and value.lower() in ("inf", "infinity", "trace")):
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(name, f"expected a number or \"inf\", got {describe(value)}")
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
            raise self.error(name, f"expected a list, got {describe(value)}")
        if length is not None and len(value) != length:
            raise self.error(name, f"expected {length} items (one per request), got {len(value)}")
        for i, v in enumerate(value):
            path = f"{name}[{i}]"
            if item == "number":
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                    raise self.error(path, f"expected a number >= 0, got {describe(v)}")
            elif item == "integer":
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise self.error(path, f"expected an integer >= 0, got {describe(v)}")
            elif item == "numbers":
                if not isinstance(v, list):
                    raise self.error(path, f"expected a list of numbers, got {describe(v)}")
                for j, x in enumerate(v):
                    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                        raise self.error(f"{path}[{j}]", f"expected a number >= 0, got {describe(x)}")
            elif item == "string":
                if v is not None and not isinstance(v, str):
                    raise self.error(path, f"expected a string, got {describe(v)}")
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


# --- Shared pieces -----------------------------------------------------------------------


def clean_extra(value: Any) -> Any:
    """JSON-safe (PostgreSQL's jsonb has no NaN or Infinity): non-finite floats as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): clean_extra(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_extra(v) for v in value]
    return value


def workload_of(dataset: str | None) -> tuple[str, str]:
    name = (dataset or "").strip() or UNSPECIFIED_DATASET
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-").lower() or UNSPECIFIED_DATASET
    kind = "synthetic" if name in SYNTHETIC_DATASETS else "dataset"
    return slug[:100], kind


def method_of(algorithm: str | None, speculative: bool, server_info: dict | None) -> tuple[str, dict]:
    """(method, params) of a result: the registry's method for a named algorithm
    (sweepcore.methods), its parameters from ``server_info``; else ``speculative`` (with the
    algorithm's name when there is one) or ``autoregressive``."""
    if not algorithm:
        return (SPECULATIVE, {}) if speculative else (AUTOREGRESSIVE, {})
    method = imported_method(algorithm)
    if method is None:
        return SPECULATIVE, {"algorithm": str(algorithm).upper()}
    info = server_info or {}
    return method.name, {
        param: info[field_name] for field_name, param in method.imported_params.items()
        if isinstance(info.get(field_name), int)
    }


def tp_of(doc: Doc, server_info: dict | None) -> int | None:
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
                raise doc.error(name, f"expected a positive integer, got {describe(value)}")
            return value
    return None


def request_records(doc: Doc, with_start_times: bool) -> list[ImportedRequest]:
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


def fill_from_requests(metrics: dict, extra: dict, records: list[ImportedRequest], duration) -> None:
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


def give_verdict(point: "ImportedPoint") -> None:
    """The imported point's verdict (sweepcore.validity) and intervals, judged on what the
    file has: its request records when it has them, else its figures. A file records
    neither the host's load nor the client's, so those rules cannot apply; nor are the
    asked lengths known (a random dataset's lengths vary by design)."""
    from sweepcore.validity import judge

    records = None
    if point.requests:
        records = [dict(vars(r), send_time=r.send_time if r.send_time is not None else 0.0) for r in point.requests]
        point.metrics["intervals"] = metrics_lib.summarize(records, point.metrics.get("duration"))["intervals"]
    verdict = judge(records, point.metrics)
    point.metrics["validity"] = verdict.validity
    point.metrics["validity_reasons"] = verdict.reasons_json()


def same_prompt_length(records: list[ImportedRequest]) -> int | None:
    lengths = {r.prompt_tokens for r in records}
    return lengths.pop() if len(lengths) == 1 and None not in lengths else None


def mean_prompt_length(records: list[ImportedRequest], metrics: dict) -> int | None:
    """The mean prompt length of the completed requests, rounded, as a measured dataset
    point stores it (``actual_prompt_tokens``): from the request records, else from the
    summary's ``total_input_tokens`` over ``completed`` (both tools count the input of
    completed requests only); None when the file has neither."""
    lengths = [r.prompt_tokens for r in records if not r.error_kind and r.prompt_tokens is not None]
    if lengths:
        return round(sum(lengths) / len(lengths))
    total, completed = metrics.get("total_input_tokens"), metrics.get("completed")
    return round(total / completed) if total is not None and completed else None


STAT_NAMES = metrics_lib.STATS  # mean, median, std, p90, p99


def latencies(doc: Doc, metrics: dict, ours: str, theirs: str) -> None:
    for stat in STAT_NAMES:
        name = f"{stat}_{theirs}_ms"
        if name in doc.data:  # SGLang can write -0.00 for a TPOT: latencies may be negative
            metrics[f"{stat}_{ours}_ms"] = doc.number(name, minimum=None)


def make_point(doc, index, metrics, records, *, workload, kind, method, params, tp, rate, max_concurrency,
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
    fill_from_requests(metrics, extra, records, metrics.get("duration"))
    if max_concurrency is not None:
        concurrency = max_concurrency
    else:
        concurrency = num_prompts or len(records) or (completed or 0) + (metrics.get("failed") or 0) or 1
        extra["concurrency_unbounded"] = True
    run_params = dict(params)
    if rate is not None:
        run_params["request_rate"] = rate
    same_length = same_prompt_length(records)
    measured_length = same_length if same_length is not None else mean_prompt_length(records, metrics)
    prompt_tokens = None
    if kind == "synthetic":
        prompt_tokens = target_input if target_input is not None else same_length
        if prompt_tokens is None and measured_length is not None:
            # A summary of a random dataset that does not say its input length (vLLM writes
            # none): its mean stands for it, so the point is not a length-less "random".
            prompt_tokens = measured_length
            extra["prompt_tokens_from"] = "mean prompt length of the completed requests"
    if target_output is None:
        outs = [r.output_tokens for r in records if not r.error_kind]
        if outs:
            target_output = max(outs)
        elif completed and metrics.get("total_output_tokens") is not None:
            target_output = round(metrics["total_output_tokens"] / completed)
        else:
            target_output = 0
    extra.update(clean_extra(doc.unused()))
    return ImportedPoint(
        index=index, line=doc.line, workload=workload, workload_kind=kind,
        dataset_path=str(doc.data.get("dataset_path") or ""),
        prompt_tokens=prompt_tokens, actual_prompt_tokens=measured_length,
        max_new_tokens=target_output, concurrency=concurrency, request_rate=rate,
        method=method, params=run_params, tp=tp, metrics={k: v for k, v in metrics.items()},
        extra=extra, requests=records, measured_at=measured_at, model=model, backend=backend,
        engine_kind=engine_kind, engine_version=engine_version, label=str(label or ""),
        server_info=clean_extra(server_info) if isinstance(server_info, dict) else {},
    )


def decode(filename: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFileError(f"{filename}: not UTF-8 text (byte {exc.start})") from None
