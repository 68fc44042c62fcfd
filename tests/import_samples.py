"""Result files of vLLM and SGLang, shaped from the fields their tools write: the importers'
samples, shared by the parser tests (tests/core) and the database import tests (tests/web)."""

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "imports"
VLLM_FILE = DATA / "vllm-serve-detailed.json"
SGLANG_FILE = DATA / "sglang-bench-serving.jsonl"
ONE_BATCH_FILE = DATA / "sglang-one-batch.jsonl"
