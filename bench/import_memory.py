"""What an import of a large result file costs: seconds and peak memory of
``sweepcore.importers.parse`` on files at the size limit, each case in a fresh process,
side by side with what reading the same bytes whole costs (``json.loads``: the floor of any
importer that parses the file whole) and, with ``--before REV``, with the importer of an
earlier commit (its ``sweepcore/`` taken from git, run the way it was called then).

    .venv/bin/python bench/import_memory.py                 # ~2 min
    .venv/bin/python bench/import_memory.py --before 8685f40

The cases (each under the 64 MiB limit):
  vllm-900k    `vllm bench serve --save-detailed` of 900,000 requests, 3 ITLs each (the
               fault suite's oversized import, random TTFTs)
  vllm-itls    36,000 requests of 200 ITLs each: the arrays of a long-output run
  sglang-150   SGLang bench_serving --output-details, 150 lines of 2,000 requests each,
               request_rate Infinity as SGLang writes it
Peak memory is the child's peak RSS (VmHWM, reset once its modules are loaded) less its RSS
then.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
mode, path = sys.argv[1], sys.argv[2]
name = path.rsplit("/", 1)[-1]

def status(field):  # KiB
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))

from sweepcore import importers, metrics, stats, validity  # what an import loads on its way
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak RSS (VmHWM) starts again from here
base = status("VmRSS")
started = time.perf_counter()
if mode == "json.loads":
    with open(path, "rb") as f:
        docs = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    requests = sum(len(d.get("ttfts") or ()) for d in docs)
elif hasattr(importers, "decode"):  # the importer before it streamed: parse(name, text)
    with open(path, "rb") as f:
        parsed = importers.parse(name, importers.decode(name, f.read()))
    requests = sum(p.requests_in_file for p in parsed.points)
else:
    with open(path, "rb") as f:
        parsed = importers.parse(name, f)
    requests = sum(p.requests_in_file for p in parsed.points)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "peak_mib": (status("VmHWM") - base) / 1024, "requests": requests}))
"""

def vllm_file(requests: int, itls: int, rng: random.Random) -> bytes:
    gaps = [round(0.01 + rng.random() / 50, 5) for _ in range(itls)]
    return json.dumps({
        "date": "20261206-120000", "backend": "vllm", "model_id": "Qwen/Qwen3.6-27B",
        "tokenizer_id": "Qwen/Qwen3.6-27B", "num_prompts": requests, "dataset_name": "random",
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 64, "duration": 100.0,
        "completed": requests, "failed": 0, "total_input_tokens": 1024 * requests,
        "total_output_tokens": (itls + 1) * requests, "request_throughput": requests / 100,
        "output_throughput": (itls + 1) * requests / 100, "total_token_throughput": (1024 + itls + 1) * requests / 100,
        "input_lens": [1024] * requests, "output_lens": [itls + 1] * requests,
        "ttfts": [round(0.2 + rng.random() / 10, 5) for _ in range(requests)], "itls": [gaps] * requests,
        "latencies": [0.5] * requests, "start_times": [i / 100 for i in range(requests)],
        "generated_texts": [""] * requests, "errors": [""] * requests,
    }).encode()


def sglang_file(lines: int, requests: int, rng: random.Random) -> bytes:
    out = []
    for line in range(lines):
        gaps = [[round(0.01 + rng.random() / 50, 5) for _ in range(16)] for _ in range(8)]
        out.append(json.dumps({
            "tag": "bench", "backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
            "max_concurrency": 1 + line, "random_input_len": 1024, "random_output_len": 17,
            "server_info": {"tp_size": 1, "model_path": "Qwen/Qwen3.6-27B", "version": "0.6.0"},
            "duration": 60.0, "completed": requests, "total_input_tokens": 1024 * requests,
            "total_output_tokens": 17 * requests, "request_throughput": requests / 60,
            "output_throughput": 17 * requests / 60, "total_throughput": 1041 * requests / 60,
            "mean_e2e_latency_ms": 500.0, "median_e2e_latency_ms": 500.0,
            "input_lens": [1024] * requests, "output_lens": [17] * requests,
            "ttfts": [round(0.2 + rng.random() / 10, 5) for _ in range(requests)],
            "itls": [gaps[i % 8] for i in range(requests)],
            "generated_texts": ["the answer, in words"] * requests, "errors": [""] * requests,
        }))
    return ("\n".join(out) + "\n").encode()


def run(python: str, pythonpath: Path, mode: str, path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run([python, "-c", CHILD, mode, str(path)], env=env, cwd=pythonpath,
                          capture_output=True, text=True, timeout=900)
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def tree_at(rev: str, into: Path) -> Path:
    """``sweepcore/`` as it was at ``rev`` (git archive), for the importer of then."""
    archive = into / "before.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), rev, "sweepcore"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "before", filter="data")
    return into / "before"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", metavar="REV", help="also run the importer of this commit")
    parser.add_argument("--only", nargs="*", help="cases to run (vllm-900k vllm-itls sglang-150)")
    args = parser.parse_args()
    rng = random.Random(19)
    with tempfile.TemporaryDirectory(prefix="import-memory-") as tmp:
        tmp = Path(tmp)
        parsers = [("json.loads", ROOT), ("streaming (now)", ROOT)]
        if args.before:
            parsers.insert(1, (f"importer at {args.before}", tree_at(args.before, tmp)))
        cases = {
            "vllm-900k": ("million.json", lambda: vllm_file(900_000, 3, rng)),
            "vllm-itls": ("itls.json", lambda: vllm_file(36_000, 200, rng)),
            "sglang-150": ("bench.jsonl", lambda: sglang_file(150, 2_000, rng)),
        }
        print(f"{'case':<11} {'MB':>5} {'requests':>10}  {'parser':<22} {'seconds':>8} {'peak MiB':>9}")
        for case, (filename, make) in cases.items():
            if args.only and case not in args.only:
                continue
            path = tmp / filename
            path.write_bytes(make())
            size = path.stat().st_size / 1e6
            assert path.stat().st_size <= 64 << 20, f"{case} is over the 64 MiB limit"
            for label, tree in parsers:
                mode = "json.loads" if label == "json.loads" else "import"
                got = run(sys.executable, tree, mode, path)
                if "error" in got:
                    print(f"{case:<11} {size:>5.1f} {'':>10}  {label:<22} failed: {got['error']}")
                    continue
                print(f"{case:<11} {size:>5.1f} {got['requests']:>10,}  {label:<22} {got['seconds']:>8.2f} "
                      f"{got['peak_mib']:>9.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
