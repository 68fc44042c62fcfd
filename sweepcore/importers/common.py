"""What every result file parser shares: the errors, what a parser returns, typed reads of
a JSON document with messages naming the line and field, and the mapping pieces the formats
have in common (workload, method, TP, request records, latency statistics, the point)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress
from typing import Any

from sweepcore import metrics as metrics_lib
from sweepcore.importers.arrays import Column, StreamedArray, describe
from sweepcore.methods import AUTOREGRESSIVE, SPECULATIVE, imported_method
from sweepcore.spec import INT_COLUMN_MAX, NUL, beyond, text_problem

SYNTHETIC_DATASETS = {
    "random", "random-ids", "random-mm", "random-image", "image", "random-rerank",
    "generated-shared-prefix", "prefix_repetition",
}
UNSPECIFIED_DATASET = "unnamed-dataset"  # the file did not name its dataset: a chart category says so
ERROR_KIND = "imported_error"

# --- Limits (README "Importing results"): an import is one web request, so what it reads,
# computes and stores is bounded; each limit is said where it applies.

#: A result file larger than this is refused before it is read (upload, API, command).
MAX_FILE_BYTES = 64 << 20
#: Results (points) of one file; a larger file is refused: split it.
MAX_POINTS_PER_FILE = 1_000
#: Request records stored per point, and per file (shared evenly by its points): beyond,
#: an even sample of the point's requests is stored, its statistics computed from the
#: sample, its summary figures still the file's own over every request. Computing the
#: intervals and the verdict of a point costs time in proportion to its records.
MAX_REQUESTS_PER_POINT = 5_000
MAX_REQUESTS_PER_FILE = 20_000
#: A field kept in a point's ``extra`` larger than this as JSON (a per-request array of a
#: large run) is left out and named, so that a point's API answer stays small.
MAX_EXTRA_FIELD_BYTES = 64 << 10
#: Lists and objects nested in a field kept in ``extra``.
MAX_EXTRA_DEPTH = 32
#: The largest value of a PositiveBigIntegerField (the token totals).
BIGINT_COLUMN_MAX = 2**63 - 1

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
    requests_in_file: int = 0  # the file's requests of this point; ``requests`` may be a sample of them

    @property
    def requests_note(self) -> str:
        """What the import note of a point that stores a sample of its requests says; ""
        when it stores every one."""
        if self.requests_in_file <= len(self.requests):
            return ""
        return (f"{len(self.requests):,} of the file's {self.requests_in_file:,} requests stored, an even sample "
                f"(Sweeplab stores up to {MAX_REQUESTS_PER_POINT:,} a point and {MAX_REQUESTS_PER_FILE:,} a file); "
                f"the summary figures are the file's over every request, decode speed and the intervals the "
                f"sample's")


@dataclass
class ImportedFile:
    format: str
    filename: str
    points: list[ImportedPoint]
    sha256: str = ""  # of the file's bytes

    @property
    def request_count(self):
        return sum(len(p.requests) for p in self.points)


# --- Reading the text --------------------------------------------------------------------


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

    def integer(self, name: str, required: bool = False, minimum: int = 0,
                maximum: int = INT_COLUMN_MAX) -> int | None:
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
        if value > maximum:
            raise self.error(name, f"expected an integer {beyond(maximum)}, got {value}")
        return value

    def string(self, name: str) -> str | None:
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(name, f"expected a string, got {describe(value)}")
        return self._stored_text(name, value)

    def label(self, name: str) -> str:
        """The run's label (vLLM ``label``, SGLang ``tag``, ``run_name``) as text, "" when
        absent; left unread, so that ``extra`` keeps it too."""
        return self._stored_text(name, str(self.data.get(name) or ""))

    def _stored_text(self, name: str, text: str) -> str:
        problem = text_problem(text)
        if problem:
            raise self.error(name, problem)
        return text

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

    def array(self, name: str, length: int | None):
        """A per-request array (PER_REQUEST_ARRAYS), as the reader holds it
        (arrays.Column): of ``length`` items when given, its first wrong item reported."""
        value = self.raw(name)
        if value is None:
            return None
        if not isinstance(value, Column):
            raise self.error(name, f"expected a list, got {describe(value)}")
        if length is not None and value.count != length:
            raise self.error(name, f"expected {length} items (one per request), got {value.count}")
        if value.problem is not None:
            raise self.error(*value.problem)
        return value

    def unused(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.items() if k not in self.used}


# --- Shared pieces -----------------------------------------------------------------------


def clean_extra(value: Any, where: str = "", depth: int = 0) -> Any:
    """JSON-safe (PostgreSQL's jsonb has no NaN or Infinity): non-finite floats as strings.
    Lists and objects nested deeper than MAX_EXTRA_DEPTH are refused (``where`` names the
    field), which also keeps this recursion far from Python's limit."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (dict, list)) and depth >= MAX_EXTRA_DEPTH:
        raise ImportFileError(f"{where or 'the file'}: lists and objects nested deeper than {MAX_EXTRA_DEPTH} levels "
                              f"(Sweeplab's limit)")
    if isinstance(value, dict):
        return {str(k): clean_extra(v, where, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_extra(v, where, depth + 1) for v in value]
    return value


def nul_at(value: Any, path: str) -> str | None:
    """The path (``path``, then ``.key`` and ``[i]`` below it) of the first text or key in
    ``value`` that holds a NUL character, which the database cannot store; None when none
    does. ``value`` is JSON-safe (``clean_extra``: its nesting is bounded)."""
    if isinstance(value, str):
        return path if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = path if NUL in key else nul_at(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = nul_at(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _refuse_nul(doc: Doc, fields: dict[str, Any]) -> None:
    """Each of ``fields`` (a field of the file -> what is stored of it) without a NUL
    character anywhere: the first one found is the file's error, naming where."""
    for name, value in fields.items():
        found = nul_at(value, name)
        if found is not None:
            raise doc.error(found, text_problem(NUL))


def kept_extra(doc: Doc) -> dict[str, Any]:
    """The fields the parser did not read, JSON-safe; one of more than MAX_EXTRA_FIELD_BYTES
    as JSON (a per-request array of a large run) is left out and named with its size under
    ``left_out``: the file keeps it, and a point's API answer stays small."""
    kept: dict[str, Any] = {}
    left_out: dict[str, str] = {}
    for name, value in doc.unused().items():
        if isinstance(value, StreamedArray):  # the reader kept its items while they could fit
            if value.head is None:
                left_out[name] = f"a list of {value.count:,} items"
                continue
            value = value.head
        value = clean_extra(value, f"{doc.where}: field {name!r}")
        size = len(json.dumps(value))
        if size > MAX_EXTRA_FIELD_BYTES:
            left_out[name] = f"{size:,} bytes of JSON"
            continue
        kept[name] = value
    if left_out:
        kept["left_out"] = {"fields": left_out, "why": f"each over {MAX_EXTRA_FIELD_BYTES:,} bytes of JSON "
                                                       f"(Sweeplab's limit); the file keeps them"}
    return kept


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


@dataclass
class RequestTotals:
    """What is counted over every request of a point in the file, stored or not (a point
    stores at most its share of MAX_REQUESTS_PER_FILE records)."""

    count: int = 0
    failed: int = 0
    same_prompt_length: int | None = None  # the one prompt length of every request
    mean_prompt_length: int | None = None  # of the completed requests, rounded
    max_output: int | None = None  # of the completed requests


def requests_per_point(points: int) -> int:
    """The request records a point of a file of ``points`` results may store."""
    return min(MAX_REQUESTS_PER_POINT, MAX_REQUESTS_PER_FILE // max(points, 1))


def sample(count: int, keep: int) -> range | list[int]:
    """The indices of the requests stored: all of them, or ``keep`` spread evenly over the
    run (the first ones alone would be its ramp-up)."""
    return range(count) if count <= keep else [i * count // keep for i in range(keep)]


def request_records(doc: Doc, with_start_times: bool, keep: int) -> tuple[list[ImportedRequest], RequestTotals]:
    """Request records from the per-request arrays, when the file has them: at most
    ``keep`` (an even sample), and the totals over all of them."""
    if not doc.has("ttfts") and not doc.has("output_lens"):
        return [], RequestTotals()
    for name in ("input_lens", "output_lens", "ttfts", "itls"):
        if not doc.has(name):
            raise doc.error(name, "missing: the per-request arrays come together "
                                  "(input_lens, output_lens, ttfts, itls)")
    ttfts = doc.array("ttfts", None)
    n = ttfts.count
    input_lens = doc.array("input_lens", n)
    output_lens = doc.array("output_lens", n)
    itls = doc.array("itls", n)
    errors = doc.array("errors", n)
    starts = doc.array("start_times", n) if with_start_times else None
    failed = errors.codes if errors is not None else bytes(n)  # nonzero: the request's error
    ok = [not bad and out > 0 and ttft > 0 for bad, out, ttft in zip(failed, output_lens.values, ttfts.values)]
    records = [_record(i, ok[i], ttfts[i], itls[i], input_lens[i], output_lens[i], errors[i] if errors is not None else "",
                       starts[i] if starts is not None else None) for i in _stored(n, keep, itls.kept_indices)]
    return records, _totals(ok, input_lens.values, output_lens.values)


def _stored(count: int, keep: int, kept: list[int] | None) -> range | list[int]:
    """The requests to store: ``sample(count, keep)``, from those whose ``itls`` the reader
    kept when it kept a sample (its own, of the same size unless the file's layout misled
    it: then an even sample of it)."""
    if kept is None:
        return sample(count, keep)
    return kept if len(kept) <= keep else [kept[j * len(kept) // keep] for j in range(keep)]


def _record(i, ok, ttft, itls, prompt, out, error, send_time) -> ImportedRequest:
    """Request ``i``: its chunks' arrival offsets (TTFT, then TTFT plus the running sum of
    its ITLs) with its output tokens spread over them, or its error."""
    offsets: list[float] = []
    tokens: list[int] = []
    if ok:
        at = float(ttft)
        offsets.append(at)
        for gap in itls:
            at += float(gap)
            offsets.append(at)
        if len(offsets) > out:  # more chunks than tokens: keep the tokens' worth
            offsets = offsets[:out]
        base, rest = divmod(out, len(offsets))
        tokens = [base + (1 if j < rest else 0) for j in range(len(offsets))]
    kind = "" if ok else (ERROR_KIND if error else "empty_response")
    return ImportedRequest(
        index=i, send_time=send_time, chunk_offsets=offsets, chunk_tokens=tokens, prompt_tokens=prompt,
        output_tokens=out if ok else 0, error_kind=kind,
        error=error if error else ("" if ok else "no output tokens (as recorded in the file)"),
    )


def _totals(ok: list[bool], input_lens, output_lens) -> RequestTotals:
    lengths = set(input_lens)
    completed = sum(ok)
    return RequestTotals(
        count=len(ok), failed=len(ok) - completed,
        same_prompt_length=lengths.pop() if len(lengths) == 1 else None,
        mean_prompt_length=round(sum(compress(input_lens, ok)) / completed) if completed else None,
        max_output=max(compress(output_lens, ok), default=None),
    )


def judge_point(metrics: dict, extra: dict, records: list[ImportedRequest]) -> None:
    """What the file does not have, from its request records, summarized once
    (sweepcore.metrics definitions): decode speed where the file lacks it (named in
    ``extra.computed_from_requests``) and the intervals of the medians; then the point's
    verdict (sweepcore.validity), judged on what the file has: its request records when it
    has them, else its figures. A file records neither the host's load nor the client's,
    so those rules cannot apply; nor are the asked lengths known (a random dataset's
    lengths vary by design)."""
    from sweepcore.validity import judge

    rows = None
    if records:
        rows = [dict(vars(r), send_time=r.send_time if r.send_time is not None else 0.0) for r in records]
        summary = metrics_lib.summarize(rows, metrics.get("duration"))
        if metrics.get("decode_tok_s") is None and summary.get("decode_tok_s") is not None:
            metrics["decode_tok_s"] = summary["decode_tok_s"]
            extra["computed_from_requests"] = ["decode_tok_s"]
        metrics["intervals"] = summary["intervals"]
    verdict = judge(rows, metrics)
    metrics["validity"] = verdict.validity
    metrics["validity_reasons"] = verdict.reasons_json()


def mean_prompt_length(totals: RequestTotals, metrics: dict) -> int | None:
    """The mean prompt length of the completed requests, rounded, as a measured dataset
    point stores it (``actual_prompt_tokens``): from the per-request arrays, else from the
    summary's ``total_input_tokens`` over ``completed`` (both tools count the input of
    completed requests only); None when the file has neither."""
    if totals.mean_prompt_length is not None:
        return totals.mean_prompt_length
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
           engine_version="", extra_first=None, server_info=None, totals=RequestTotals()):
    """The point of one result: settings derived as the module docstring says, and every
    field the parser did not read kept in ``extra``. ``records`` are the requests stored
    (request_records), ``totals`` what is counted over all of them."""
    extra: dict[str, Any] = dict(extra_first or {})
    completed = metrics.get("completed")
    if metrics.get("failed") is None and totals.count:
        metrics["failed"] = totals.failed
    if completed is not None and totals.count and completed != totals.count - totals.failed:
        extra["completed_in_requests"] = totals.count - totals.failed
    if max_concurrency is not None:
        concurrency = max_concurrency
    else:
        concurrency = num_prompts or totals.count or (completed or 0) + (metrics.get("failed") or 0) or 1
        extra["concurrency_unbounded"] = True
    run_params = dict(params)
    if rate is not None:
        run_params["request_rate"] = rate
    same_length = totals.same_prompt_length
    measured_length = same_length if same_length is not None else mean_prompt_length(totals, metrics)
    prompt_tokens = None
    if kind == "synthetic":
        prompt_tokens = target_input if target_input is not None else same_length
        if prompt_tokens is None and measured_length is not None:
            # A summary of a random dataset that does not say its input length (vLLM writes
            # none): its mean stands for it, so the point is not a length-less "random".
            prompt_tokens = measured_length
            extra["prompt_tokens_from"] = "mean prompt length of the completed requests"
    if target_output is None:
        if totals.max_output is not None:
            target_output = totals.max_output
        elif completed and metrics.get("total_output_tokens") is not None:
            target_output = round(metrics["total_output_tokens"] / completed)
        else:
            target_output = 0
    _check_columns(doc, prompt_tokens=prompt_tokens, actual_prompt_tokens=measured_length,
                   max_new_tokens=target_output, concurrency=concurrency)
    extra.update(kept_extra(doc))
    stored_info = clean_extra(server_info, f"{doc.where}: server_info") if isinstance(server_info, dict) else {}
    # What is stored of the file as JSON (its fields, under their own names) holds no NUL.
    _refuse_nul(doc, {**extra, "server_info": stored_info})
    judge_point(metrics, extra, records)
    return ImportedPoint(
        index=index, line=doc.line, workload=workload, workload_kind=kind,
        dataset_path=str(doc.data.get("dataset_path") or ""),
        prompt_tokens=prompt_tokens, actual_prompt_tokens=measured_length,
        max_new_tokens=target_output, concurrency=concurrency, request_rate=rate,
        method=method, params=run_params, tp=tp, metrics={k: v for k, v in metrics.items()},
        extra=extra, requests=records, measured_at=measured_at, model=model, backend=backend,
        engine_kind=engine_kind, engine_version=engine_version, label=str(label or ""),
        server_info=stored_info,
        requests_in_file=totals.count,
    )


def _check_columns(doc: Doc, **settings: int | None) -> None:
    """A point's settings derived from the file (a mean, a sum over requests) must fit their
    integer columns: a file whose numbers do not is refused, naming the setting."""
    for name, value in settings.items():
        if value is not None and value > INT_COLUMN_MAX:
            raise ImportFileError(f"{doc.where}: the point's {name} comes to {value:,}; the database holds "
                                  f"{beyond(INT_COLUMN_MAX)}")
