"""Parser of ``python -m sglang.bench_one_batch_server --result-filename F`` JSON Lines.

Where its field names come from:
sgl-project/sglang ``python/sglang/bench_one_batch_server.py`` (``run_one_case``, read
at commit 00b08c497f07 and in a newer snapshot that adds ``last_gen_throughput``): one line per (batch size, input len,
output len) with ``run_name``, ``batch_size``, ``input_len``, ``output_len``,
``latency`` (s), ``output_throughput``, ``overall_throughput`` and, in newer versions,
``last_gen_throughput``; ``ttft``, ``input_throughput`` and ``acc_length`` are accepted
where a version writes them.
"""

from __future__ import annotations

from typing import Any

from sweepcore.importers.common import (
    STAT_NAMES,
    Doc,
    ImportedFile,
    ImportedPoint,
    clean_extra,
    make_point,
    method_of,
    tp_of,
    workload_of,
)

FORMAT = "sglang-one-batch"
DESCRIPTION = "SGLang `bench_one_batch_server --result-filename` JSON Lines"
# What an import of it holds, for the upload page.
DETAILS = "one point per batch size and length: the batch's figures, no request records"
# Fields that tell this format apart (sweepcore.importers.detect_format).
KEYS = {"batch_size", "input_len", "output_len", "latency"}  # all of them: this format


def _parse_one_batch_one(doc: Doc, index: int) -> ImportedPoint:
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
    method, params = method_of(None, accept is not None, None)
    extra = {"output_throughput": doc.data.get("output_throughput")}
    for name in ("overall_throughput", "ttft", "last_gen_throughput", "acc_length"):
        if name in doc.data:
            extra[name] = clean_extra(doc.data[name])
    doc.used.add("run_name")
    extra["run_name"] = clean_extra(doc.data.get("run_name"), f"{doc.where}: field 'run_name'")
    workload, kind = workload_of("random")
    point = make_point(doc, index, metrics, [], workload=workload, kind=kind, method=method, params=params,
                   tp=tp_of(doc, None), rate=None, max_concurrency=batch, num_prompts=None, model=None,
                   backend="sglang", engine_kind="sglang", measured_at=None,
                   label=doc.label("run_name"), target_output=output_len,
                   target_input=input_len, extra_first=extra)
    point.actual_prompt_tokens = None
    return point


def parse(filename: str, docs: list) -> ImportedFile:
    """`docs`: the file's documents (reader.read_documents), read once by the caller."""
    points = []
    for i, (line, data) in enumerate(docs):
        doc = Doc(filename, data, line)
        points.append(_parse_one_batch_one(doc, i))
    return ImportedFile(FORMAT, filename, points)
