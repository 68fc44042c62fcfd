"""Parser of ``vllm bench serve --save-result [--save-detailed]`` JSON.

Where its field names come from: vllm-project/vllm
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
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sweepcore.importers.common import (
    BIGINT_COLUMN_MAX,
    INT_COLUMN_MAX,
    Doc,
    ImportedFile,
    ImportedPoint,
    describe,
    latencies,
    make_point,
    method_of,
    request_records,
    requests_per_point,
    tp_of,
    workload_of,
)

FORMAT = "vllm"
DESCRIPTION = "`vllm bench serve --save-result` JSON"
# What an import of it holds, for the upload page.
DETAILS = ("one point per run in the file (`--append-result` appends one per line); with `--save-detailed` "
           "its requests become request records, and decode speed is computed from them")
# Fields that tell this format apart (sweepcore.importers.detect_format).
KEYS = {"mean_e2el_ms", "median_e2el_ms", "total_token_throughput", "model_id", "tokenizer_id",
        "endpoint_type", "num_prompts", "burstiness"}


VLLM_SAME = ("duration", "request_throughput", "output_throughput", "total_token_throughput",
             "max_output_tokens_per_s")
# Become request records (generated_texts are dropped: a record keeps no text);
# latencies and queue_times stay in extra.
VLLM_DETAIL_ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors")


def _vllm_date(doc: Doc) -> datetime | None:
    value = doc.string("date")
    if not value:
        return None
    try:
        return datetime.strptime(value, "%Y%m%d-%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        raise doc.error("date", f"expected a date like 20260102-150405, got {describe(value)}") from None


def _parse_vllm_one(doc: Doc, index: int, keep: int) -> ImportedPoint:
    metrics: dict[str, Any] = {}
    for name in ("completed", "failed", "total_input_tokens", "total_output_tokens"):
        metrics[name] = doc.integer(name, required=name == "completed",
                                    maximum=BIGINT_COLUMN_MAX if name.startswith("total_") else INT_COLUMN_MAX)
    metrics["duration"] = doc.number("duration", required=True)
    for name in VLLM_SAME[1:]:
        metrics[name] = doc.number(name)
    for m in ("ttft", "tpot", "itl"):
        latencies(doc, metrics, m, m)
    latencies(doc, metrics, "e2el", "e2el")
    speculative = any(k.startswith("spec_decode_") for k in doc.data)
    if doc.has("spec_decode_acceptance_length"):
        metrics["accept_length"] = doc.number("spec_decode_acceptance_length")
    algorithm = doc.string("speculative_algorithm") if "speculative_algorithm" in doc.data else None
    method, params = method_of(algorithm, speculative, None)
    model = doc.string("model_id")
    backend = doc.string("backend") or doc.string("endpoint_type")
    dataset = doc.string("dataset_name") if "dataset_name" in doc.data else None
    workload, kind = workload_of(dataset)
    rate = doc.rate("request_rate")
    max_concurrency = doc.integer("max_concurrency", minimum=1)
    num_prompts = doc.integer("num_prompts", minimum=1)
    records, totals = request_records(doc, with_start_times=True, keep=keep)
    tp = tp_of(doc, None)
    measured_at = _vllm_date(doc)
    return make_point(doc, index, metrics, records, workload=workload, kind=kind, method=method, params=params,
                  tp=tp, rate=rate, max_concurrency=max_concurrency,
                  num_prompts=num_prompts, model=model, backend=backend,
                  engine_kind="vllm", measured_at=measured_at, label=doc.label("label"),
                  target_output=None, target_input=None, totals=totals)


def parse(filename: str, docs: list) -> ImportedFile:
    """`docs`: the file's documents (reader.read_documents), read once by the caller."""
    points = []
    for i, (line, data) in enumerate(docs):
        doc = Doc(filename, data, line)
        for name in VLLM_DETAIL_ARRAYS:  # the raw arrays become request records, not extra
            doc.used.add(name)
        points.append(_parse_vllm_one(doc, i, requests_per_point(len(docs))))
    return ImportedFile(FORMAT, filename, points)
