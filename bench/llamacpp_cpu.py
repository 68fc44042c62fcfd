"""How fast llama.cpp runs SmolLM2-135M on this CPU: prompt eval and decode, per build
and thread count, measured side by side in one run (each in its own process).

    .venv/bin/python bench/llamacpp_cpu.py [--build NAME=DIR ...] [--threads 1 2] [--repeat 3]

A build is a folder holding a `llama_cpp` package (an unpacked llama-cpp-python wheel);
`installed` is the one in the virtualenv. Each case loads the model once, then, `repeat`
times: evaluates a fresh 1024-token prompt and decodes 64 tokens greedily. It prints the
median prompt-eval and decode rates (tokens per second, timed around the calls) and
their ratio to the first case.

`--server` measures what a sweep sees instead: the installed server
(`python -m llama_cpp.server --n_threads T`, as the demo launches it) driven by our load
generator on the same machine, `repeat` greedy 64-token answers to the fibonacci prompt
at concurrency 1, after one warmup: the client's decode speed and llama.cpp's own eval
rate.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASE = r"""
import json, sys, time
from llama_cpp import Llama
model, threads, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llm = Llama(model, n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
prompt_s, decode_s = [], []
for r in range(repeat):
    tokens = llm.tokenize(" ".join(words[(i * 7 + r) % len(words)] + str(i) for i in range(2000)).encode())[:1024]
    llm.reset()
    t = time.perf_counter()
    llm.eval(tokens)
    prompt_s.append(1024 / (time.perf_counter() - t))
    out = []
    t = time.perf_counter()
    for _ in range(64):
        token = llm.sample(temp=0.0)
        out.append(token)
        llm.eval([token])
    decode_s.append(64 / (time.perf_counter() - t))
print(json.dumps({"prompt": prompt_s, "decode": decode_s}))
"""


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sweeplab.settings")
    import django

    django.setup()
    from runs.management.commands.seed_demo import smollm2_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", action="append", default=[], metavar="NAME=DIR",
                        help="a folder with a llama_cpp package (default: the installed one)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--server", action="store_true", help="through the server and our client instead")
    args = parser.parse_args()
    if args.server:
        return server_cases(args.threads, args.repeat)
    builds = [("installed", None)] + [tuple(b.split("=", 1)) for b in args.build]
    model = smollm2_path()
    rows = []
    for name, folder in builds:
        for threads in args.threads:
            env = dict(os.environ)
            if folder:
                env["PYTHONPATH"] = folder
            out = subprocess.run([sys.executable, "-c", CASE, model, str(threads), str(args.repeat)],
                                 env=env, capture_output=True, text=True, check=True).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            rows.append((name, threads, statistics.median(figures["prompt"]), statistics.median(figures["decode"])))
    base_prompt, base_decode = rows[0][2], rows[0][3]
    print(f"{'build':<12} {'threads':>7} {'prompt tok/s':>13} {'x':>6} {'decode tok/s':>13} {'x':>6}")
    for name, threads, prompt, decode in rows:
        print(f"{name:<12} {threads:>7} {prompt:>13.1f} {prompt / base_prompt:>6.2f} {decode:>13.1f} {decode / base_decode:>6.2f}")


def server_cases(thread_counts, repeat):
    import socket
    import time

    from runs.management.commands.seed_demo import smollm2_path
    from sweepcore import loadgen
    from sweepcore.engines import get_adapter
    from sweepcore.engines.llamacpp import parse_perf
    from sweepcore.prompts import FIBONACCI_PROMPT

    adapter = get_adapter("llamacpp")
    rows = []
    for threads in thread_counts:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"llamacpp-bench-{port}.log"
        argv = [sys.executable, "-m", "llama_cpp.server", "--model", smollm2_path(), "--n_ctx", "2048",
                "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads), "--interrupt_requests", "False"]
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            while not adapter.is_ready(base, "")[0]:
                if proc.poll() is not None:
                    raise SystemExit(f"the server exited: see {log_path}")
                time.sleep(0.2)
            info = adapter.server_info(base, log_path.read_text(errors="replace"))
            config = loadgen.LoadConfig(base_url=base, api="openai-completions", model="smollm2",
                                        prompts=[FIBONACCI_PROMPT], max_tokens=64, concurrency=1,
                                        num_requests=repeat, warmup=1, extra_body=adapter.extra_body(64, info))
            start = log_path.stat().st_size
            summary = loadgen.run_load_sync(config).summary()
            with open(log_path, "rb") as f:
                f.seek(start)
                perf = parse_perf(f.read().decode(errors="replace"))
            server = perf["eval_runs"] / perf["eval_ms"] * 1000 if perf["eval_ms"] else float("nan")
            rows.append((threads, summary["decode_tok_s"], server))
        finally:
            proc.terminate()
            proc.wait()
            log_path.unlink(missing_ok=True)
    print(f"{'threads':>7} {'client decode tok/s':>20} {'x':>6} {'llama.cpp eval tok/s':>21}")
    for threads, client, server in rows:
        print(f"{threads:>7} {client:>20.1f} {client / rows[0][1]:>6.2f} {server:>21.1f}")


if __name__ == "__main__":
    main()
