"""Parser of ``python -m sglang.bench_serving --output-file F [--output-details]`` JSON Lines.

Where its field names come from:
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
"""

from __future__ import annotations

from typing import Any

from sweepcore.importers.common import (
    BIGINT_COLUMN_MAX,
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

FORMAT = "sglang"
DESCRIPTION = "SGLang `bench_serving --output-file` JSON Lines"
# What an import of it holds, for the upload page.
DETAILS = "one point per line; with `--output-details` its requests become request records"
# Fields that tell this format apart (sweepcore.importers.detect_format).
KEYS = {"mean_e2e_latency_ms", "median_e2e_latency_ms", "total_throughput", "input_throughput",
        "accept_length", "dataset_name", "server_info", "random_input_len", "sharegpt_output_len"}


SGLANG_BACKEND_KINDS = {"sglang": "sglang", "sglang-native": "sglang", "sglang-oai": "sglang",
                        "sglang-oai-chat": "sglang", "vllm": "vllm", "vllm-chat": "vllm"}
SGLANG_DETAIL_ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")


def _parse_sglang_one(doc: Doc, index: int, keep: int) -> ImportedPoint:
    metrics: dict[str, Any] = {}
    metrics["completed"] = doc.integer("completed", required=True)
    metrics["duration"] = doc.number("duration", required=True)
    for name in ("total_input_tokens", "total_output_tokens"):
        metrics[name] = doc.integer(name, maximum=BIGINT_COLUMN_MAX)
    for name in ("request_throughput", "output_throughput", "max_output_tokens_per_s"):
        metrics[name] = doc.number(name)
    metrics["total_token_throughput"] = doc.number("total_throughput")
    for m in ("ttft", "tpot", "itl"):
        latencies(doc, metrics, m, m)
    latencies(doc, metrics, "e2el", "e2e_latency")
    server_info = doc.raw("server_info")
    if server_info is not None and not isinstance(server_info, dict):
        raise doc.error("server_info", f"expected an object, got {describe(server_info)}")
    if isinstance(server_info, dict) and isinstance(server_info.get("decode"), list) and server_info["decode"]:
        server_info = server_info["decode"][0] if isinstance(server_info["decode"][0], dict) else server_info
    accept = doc.number("accept_length")
    extra_first = {}
    if accept is not None:
        metrics["accept_length"] = accept
        extra_first["accept_length_source"] = "server-wide avg_spec_accept_length (SGLang /get_server_info)"
    algorithm = (server_info or {}).get("speculative_algorithm")
    method, params = method_of(algorithm if isinstance(algorithm, str) else None, accept is not None, server_info)
    backend = doc.string("backend")
    dataset = doc.string("dataset_name")
    workload, kind = workload_of(dataset)
    target_input = target_output = None
    if kind == "synthetic":
        target_input = doc.integer("random_input_len", minimum=1)
        target_output = doc.integer("random_output_len")
    else:
        target_output = doc.integer("sharegpt_output_len")
    rate = doc.rate("request_rate")
    max_concurrency = doc.integer("max_concurrency", minimum=1)
    records, totals = request_records(doc, with_start_times=False, keep=keep)
    tp = tp_of(doc, server_info)
    model = None
    version = ""
    if isinstance(server_info, dict):
        model = server_info.get("served_model_name") or server_info.get("model_path")
        version = str(server_info.get("version") or "")
    return make_point(doc, index, metrics, records, workload=workload, kind=kind, method=method, params=params,
                  tp=tp, rate=rate, max_concurrency=max_concurrency, num_prompts=None,
                  model=model if isinstance(model, str) else None, backend=backend,
                  engine_kind=SGLANG_BACKEND_KINDS.get(backend or ""), measured_at=None,
                  label=doc.label("tag"), target_output=target_output, target_input=target_input,
                  engine_version=version, extra_first=extra_first, server_info=doc.data.get("server_info"),
                  totals=totals)


def parse(filename: str, docs: list) -> ImportedFile:
    """`docs`: the file's documents (reader.read_documents), read once by the caller."""
    points = []
    for i, (line, data) in enumerate(docs):
        doc = Doc(filename, data, line)
        for name in SGLANG_DETAIL_ARRAYS:
            doc.used.add(name)
        points.append(_parse_sglang_one(doc, i, requests_per_point(len(docs))))
    return ImportedFile(FORMAT, filename, points)
