"""Result files of vLLM and SGLang, shaped from the fields their tools write: the importers'
samples, shared by the parser tests (tests/core) and the database import tests (tests/web)."""

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "imports"
VLLM_FILE = DATA / "vllm-serve-detailed.json"
SGLANG_FILE = DATA / "sglang-bench-serving.jsonl"
ONE_BATCH_FILE = DATA / "sglang-one-batch.jsonl"


def vllm_detailed(requests, **changes):
    """The sample vLLM file's text with ``requests`` requests of its own (prompt lengths
    100 + i % 7, two output tokens, every tenth one failed), as ``--save-detailed`` writes
    them: for the limits on what an import stores."""
    import json

    raw = json.loads(VLLM_FILE.read_text())
    failed = [i % 10 == 9 for i in range(requests)]
    raw.update(
        num_prompts=requests, completed=requests - sum(failed), failed=sum(failed),
        input_lens=[100 + i % 7 for i in range(requests)],
        output_lens=[0 if bad else 2 for bad in failed],
        ttfts=[0.0 if bad else 0.01 + (i % 5) / 1000 for i, bad in enumerate(failed)],
        itls=[[] if bad else [0.01] for bad in failed],
        start_times=[i / 100 for i in range(requests)],
        latencies=[0.02] * requests, queue_times=[0.0] * requests, generated_texts=["ab"] * requests,
        errors=["boom" if bad else "" for bad in failed],
    )
    raw.update(changes)
    return json.dumps(raw)
