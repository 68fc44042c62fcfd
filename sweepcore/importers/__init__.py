"""Parsers for the result files that vLLM and SGLang benchmarks write.  Pure Python, no Django.

``detect_format(filename, source)`` names the format of a file; ``parse(filename, source,
fmt)`` (``source``: the file opened for reading bytes, or its bytes or text) reads it as a
stream (``reader``: never the whole file in memory; ``arrays``: the per-request arrays held
compactly) and turns it into an :class:`ImportedFile`: plain dataclasses with Sweeplab's
field names (:class:`ImportedPoint`, one per benchmark run in the file, and
:class:`ImportedRequest` for per-request arrays).  Whatever does not map is kept, under its
own name, in the point's ``extra``.  A file that is wrong anywhere raises
:class:`ImportFileError` naming the line (JSON Lines) or the document, and the field:
nothing of it is used.  ``runs.imports``
stores the result in the database.

Each format has its parser module (``vllm``, ``sglang``, ``sglang_one_batch``: where its
field names come from), the shared code is in ``common``.

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
* Bounds (``common``'s limits): a file of more than ``MAX_FILE_BYTES`` or with more than
  ``MAX_POINTS_PER_FILE`` results is refused; a point stores at most
  ``MAX_REQUESTS_PER_POINT`` request records, and a file ``MAX_REQUESTS_PER_FILE`` in all
  (shared evenly by its points): beyond, an even sample, which
  ``ImportedPoint.requests_note`` describes, while counts, lengths and the summary figures
  still come from every request; a field of more than ``MAX_EXTRA_FIELD_BYTES`` as JSON is
  left out of ``extra`` and named under ``extra.left_out``; integers beyond their database
  column are refused with the field.
* Every point gets a verdict (``validity``, ``validity_reasons``: sweepcore.validity) from
  what the file has, and, with request records, the ``intervals`` of its medians.

Points and runs
---------------
A point's workload is the file's dataset name (``dataset_name``; vLLM writes none unless
``--metadata dataset_name=...``: then ``unnamed-dataset``); random-token datasets are
*synthetic* workloads whose ``prompt_tokens`` is the target input length (where the file
does not say it, as vLLM's does not, the requests' one length, else their mean:
``extra.prompt_tokens_from`` says so), others are *dataset* workloads without one.
``actual_prompt_tokens`` is the requests' prompt length, or their mean where they differ
(from the records, else ``total_input_tokens`` / ``completed``), as a measured dataset
point stores it.  ``concurrency`` is ``max_concurrency`` when the run set
one, else ``num_prompts`` (every request may be in flight; ``extra.concurrency_unbounded``).
A finite request rate is an open-loop run: it is stored in the point's ``request_rate``
and in its run's ``params`` (``{"request_rate": 4.0}``), so points at different rates
never share a history series.  The method is ``autoregressive`` unless the file shows
speculative decoding: SGLang's ``server_info.speculative_algorithm`` (a method of
sweepcore.methods by its SGLang name, e.g. DFLASH -> ``dflash``, DDTREE -> ``ddtree``; other
algorithms -> ``speculative`` with ``{"algorithm": NAME}``),
or spec-decode fields without a named algorithm -> ``speculative``.  TP comes from
``server_info.tp_size`` or a ``tp``/``tp_size``/``tensor_parallel_size`` field, else None
(the importer uses 1 or what it is told).
"""

from __future__ import annotations

import io
from typing import BinaryIO

from sweepcore.importers import sglang, sglang_one_batch, vllm
from sweepcore.importers.common import (
    MAX_EXTRA_FIELD_BYTES,
    MAX_FILE_BYTES,
    MAX_POINTS_PER_FILE,
    MAX_REQUESTS_PER_FILE,
    MAX_REQUESTS_PER_POINT,
    ImportedFile,
    ImportedPoint,
    ImportedRequest,
    ImportFileError,
    ImportRefused,
)
from sweepcore.importers.reader import prescan, read_documents

VLLM = vllm.FORMAT
SGLANG = sglang.FORMAT
SGLANG_ONE_BATCH = sglang_one_batch.FORMAT
FORMATS = (VLLM, SGLANG, SGLANG_ONE_BATCH)
FORMAT_DESCRIPTIONS = {m.FORMAT: m.DESCRIPTION for m in (vllm, sglang, sglang_one_batch)}
FORMAT_DETAILS = {m.FORMAT: m.DETAILS for m in (vllm, sglang, sglang_one_batch)}
PARSERS = {m.FORMAT: m.parse for m in (vllm, sglang, sglang_one_batch)}


Source = BinaryIO | bytes | str  # a result file: opened for reading bytes, or its bytes or text


# --- Detection ---------------------------------------------------------------------------


def _format_of(data: dict) -> str | None:
    keys = set(data)
    if sglang_one_batch.KEYS <= keys:
        return SGLANG_ONE_BATCH
    vllm_keys, sglang_keys = len(keys & vllm.KEYS), len(keys & sglang.KEYS)
    if vllm_keys > sglang_keys:
        return VLLM
    if sglang_keys > vllm_keys:
        return SGLANG
    return None


def _unknown_format(where: str) -> ImportFileError:
    known = "; ".join(f"{name} ({text})" for name, text in FORMAT_DESCRIPTIONS.items())
    return ImportFileError(
        f"{where}: not a result file of a known format; known formats: {known}. "
        "Name one with --format if the file is one of them"
    )


def detect_format(filename: str, source: Source) -> str:
    """The format of a result file, from its fields (ImportFileError when none fits)."""
    raw = _binary(source)
    prescan(filename, raw)
    return _format_of_documents(filename, read_documents(filename, raw))


def _format_of_documents(filename: str, docs: list) -> str:
    line, data = docs[0]
    where = f"{filename} line {line}" if line is not None else filename
    if not isinstance(data, dict):
        raise _unknown_format(where)
    fmt = _format_of(data)
    if fmt is None:
        raise _unknown_format(where)
    return fmt


def parse(filename: str, source: Source, fmt: str | None = None) -> ImportedFile:
    """Parse a result file (its format detected when not given); ImportFileError if wrong.
    ``source``: the file, opened for reading bytes (it is read from the start, in chunks),
    or its bytes or text."""
    if fmt is not None and fmt not in PARSERS:
        raise ImportFileError(f"unknown format {fmt!r}; known formats: {', '.join(FORMATS)}")
    raw = _binary(source)
    facts = prescan(filename, raw)
    docs = read_documents(filename, raw)
    if fmt is None:
        fmt = _format_of_documents(filename, docs)
    result = PARSERS[fmt](filename, docs)
    if not result.points:
        raise ImportFileError(f"{filename}: no results in the file")
    result.sha256 = facts.sha256
    return result


def _binary(source: Source) -> BinaryIO:
    if isinstance(source, str):
        return io.BytesIO(source.encode("utf-8"))
    if isinstance(source, bytes):
        return io.BytesIO(source)
    source.seek(0)
    return source


__all__ = [
    "MAX_EXTRA_FIELD_BYTES", "MAX_FILE_BYTES", "MAX_POINTS_PER_FILE", "MAX_REQUESTS_PER_FILE", "MAX_REQUESTS_PER_POINT",
    "FORMATS", "FORMAT_DESCRIPTIONS", "FORMAT_DETAILS", "ImportFileError", "ImportRefused", "ImportedFile",
    "ImportedPoint", "ImportedRequest", "detect_format", "parse",
]
