#!/usr/bin/env python3
"""How many streamed tokens per second our client ingests, against guidellm and aiperf.

The stub server (bench/stub_server.py) runs with zero delays, pinned to its own core;
each request asks for 256 output tokens (one token per SSE chunk, the final usage chunk
as vLLM sends it).  At concurrency 64 and 256, this script runs:

* ours: sweepcore.loadgen closed loop (pinned to another core), ``output_throughput`` and its
  own CPU share / ``client_bound`` flag;
* guidellm (``pip install guidellm`` into var/bench-venvs/guidellm), ``--profile
  concurrent``, its ``output_tokens_per_second`` (mean);
* aiperf (``pip install aiperf`` into var/bench-venvs/aiperf), ``--concurrency``,
  ``--use-server-token-count``, its ``output_token_throughput``.

Each tool's own figure is printed next to the same ruler for all: the tokens the stub
wrote divided by the time from its first request to its last completed response.  CPU
is the seconds of CPU the tool's processes used (peers: the whole CLI run, start-up
included, all its worker processes) per second of its measured window.  A peer that
cannot install or run is reported with the reason and skipped.

Usage: ``python bench/client_headroom.py [--levels 64,256] [--peer-seconds 10] [--no-peers]``
(loopback only; about 2-4 minutes with both peers, first run longer for the installs).

Peer setup (also used by bench/timing_accuracy.py): peers (guidellm, aiperf) are installed from PyPI into their own virtualenvs under
``var/bench-venvs/`` (git-ignored), never into the project's.  Both need a Hugging Face
tokenizer for synthetic prompts; there is no network to a model hub here, so a small
byte-level BPE tokenizer (any text encodes) is trained with the ``tokenizers`` package that the peers install and
laid out as a local hub cache (``var/bench-hf``, repo id ``local/stubtok``) that loads
offline (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
VENVS = VAR / "bench-venvs"
HF_HOME = VAR / "bench-hf"
TOKENIZER_ID = "local/stubtok"
STUB = ROOT / "bench" / "stub_server.py"

sys.path.insert(0, str(ROOT))


def cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:
        return [0]


def pin_self(core: int | None) -> None:
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})


class Stub:
    """bench/stub_server.py as a separate process, pinned to its own core where there is one."""

    def __init__(self, *args: str, core: int | None = None):
        cmd = [sys.executable, str(STUB), "--port", "0", *args]
        if core is not None:
            cmd += ["--cpu", str(core)]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("LISTENING"):
            self.p.kill()
            raise RuntimeError("stub did not start")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def _req(self, path: str, method: str = "GET") -> dict:
        req = urllib.request.Request(self.url + path, method=method,
                                     data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        self._req("/stats/reset", "POST")

    def requests(self) -> list:
        """The stub's per-request records: [key, read, handled, first_write, first_written]."""
        return self._req("/stats/requests")["records"]

    def stats(self) -> dict:
        s = self._req("/stats")
        if s["first_request"] is not None and s["last_done"] is not None:
            span = s["last_done"] - s["first_request"]
            s["tok_s"] = s["tokens"] / span if span > 0 else None
        else:
            s["tok_s"] = None
        return s

    def close(self) -> None:
        self.p.terminate()
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def ensure_venv(name: str, package: str, exe: str, timeout: int = 900) -> tuple[Path | None, str]:
    """(path of the tool's executable, '') or (None, why not)."""
    venv = VENVS / name
    tool = venv / "bin" / exe
    if tool.exists():
        return tool, ""
    VENVS.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True,
                       capture_output=True, timeout=120)
        r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", package],
                           capture_output=True, text=True, timeout=timeout)
    except (subprocess.SubprocessError, OSError) as e:
        return None, f"cannot create the virtualenv: {e}"
    if r.returncode != 0 or not tool.exists():
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return None, f"pip install {package} failed: {' | '.join(tail)}"
    return tool, ""


_MAKE_TOKENIZER = r"""
import json, os, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
corpus = [
    "The quick brown fox jumps over the lazy dog while the scheduler batches requests.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
    "alpha beta gamma delta omega sigma kappa theta 0123456789 .,;:!?'()[]{}-_/",
] * 50
tk = Tokenizer(models.BPE(unk_token=None))
tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tk.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<s>", "</s>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tk.train_from_iterator(corpus, trainer)
tk.save(os.path.join(out, "tokenizer.json"))
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1000000,
           "bos_token": "<s>", "eos_token": "</s>"},
          open(os.path.join(out, "tokenizer_config.json"), "w"))
json.dump({"model_type": "gpt2", "vocab_size": tk.get_vocab_size(), "bos_token_id": 0, "eos_token_id": 1},
          open(os.path.join(out, "config.json"), "w"))
"""


def ensure_tokenizer(python: Path) -> tuple[str | None, str]:
    """Build the offline tokenizer once, with a peer venv's python (it has ``tokenizers``)."""
    rev = "2" * 40
    repo = HF_HOME / "hub" / ("models--" + TOKENIZER_ID.replace("/", "--"))
    snap = repo / "snapshots" / rev
    if (snap / "tokenizer.json").exists():
        return TOKENIZER_ID, ""
    r = subprocess.run([str(python), "-c", _MAKE_TOKENIZER, str(snap)], capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        return None, f"cannot build a local tokenizer: {r.stderr.strip()[-300:]}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    return TOKENIZER_ID, ""


def peer_env() -> dict:
    env = dict(os.environ)
    env.update(HF_HOME=str(HF_HOME), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               TOKENIZERS_PARALLELISM="false")
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(k, None)
    return env


def run_peer(cmd: list, timeout: int, cwd: Path, core: int | None = None) -> tuple[int, str, float, float]:
    """Run a peer CLI; return (rc, output tail, wall s, CPU s of it and its children)."""
    before = os.times()
    t = time.perf_counter()
    pre = None
    if core is not None and hasattr(os, "sched_setaffinity"):
        pre = lambda: os.sched_setaffinity(0, {core})  # noqa: E731
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                           env=peer_env(), preexec_fn=pre)
        rc, out = r.returncode, (r.stdout + r.stderr)
    except subprocess.TimeoutExpired as e:
        rc, out = 124, f"timed out after {timeout} s: {(e.stdout or b'')[-300:]!r}"
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return rc, out[-1500:], wall, cpu



from sweepcore.loadgen import LoadConfig, run_load_sync  # noqa: E402

OUT_TOKENS = 256


def ours(stub: Stub, conc: int, rounds: int) -> dict:
    def cfg(n):
        return LoadConfig(base_url=stub.url, model="stub-model", prompts=["Say hello to the world."],
                          max_tokens=OUT_TOKENS, concurrency=conc, num_requests=n)

    run_load_sync(cfg(conc))  # warmup, outside the stub's ruler
    stub.reset()
    lr = run_load_sync(cfg(conc * rounds))
    s = lr.summary()
    st = stub.stats()
    return {"tool": "ours", "conc": conc, "tok_s": s["output_throughput"], "stub_tok_s": st["tok_s"],
            "cpu": lr.client_cpu_fraction, "client_bound": lr.client_bound,
            "lag_p99_ms": lr.event_loop_lag_p99_ms, "completed": s["completed"], "failed": s["failed"],
            "note": ""}


def guidellm(tool: Path, stub: Stub, conc: int, seconds: int, tok: str, core) -> dict:
    out = Path(tempfile.mkdtemp(prefix="guidellm-"))
    stub.reset()
    cmd = [str(tool), "run",
           "--backend", f"kind=openai_http,target={stub.url},model=stub-model,request_format=/v1/completions",
           "--profile", f"kind=concurrent,streams={conc}",
           "--constraint", f"kind=max_duration,seconds={seconds}",
           "--data", f"kind=synthetic_text,prompt_tokens=16,output_tokens={OUT_TOKENS}",
           "--tokenizer", f"kind=huggingface_auto,model={tok}",
           "--output", f"kind=json,path={out / 'g.json'}", "--disable-console-interactive"]
    rc, tail, wall, cpu = run_peer(cmd, timeout=seconds * 6 + 120, cwd=out, core=core)
    st = stub.stats()
    row = {"tool": "guidellm", "conc": conc, "stub_tok_s": st["tok_s"], "client_bound": None,
           "lag_p99_ms": None}
    try:
        d = json.loads((out / "g.json").read_text())
        b = d["benchmarks"][0]
        m = b["metrics"]
        row["tok_s"] = m["output_tokens_per_second"]["successful"]["mean"]
        row["completed"] = m["request_totals"]["successful"]
        row["failed"] = m["request_totals"]["errored"]
        row["cpu"] = cpu / b["duration"] if b.get("duration") else None
        row["note"] = f"CLI wall {wall:.0f} s, CPU {cpu:.0f} s incl. start-up"
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        row.update(tok_s=None, cpu=None, completed=None, failed=None,
                   note=f"no result (rc={rc}, {type(e).__name__}): {tail[-300:]}")
    shutil.rmtree(out, ignore_errors=True)
    return row


def aiperf(tool: Path, stub: Stub, conc: int, seconds: int, tok: str, core) -> dict:
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    stub.reset()
    cmd = [str(tool), "profile", "--model", "stub-model", "--url", stub.url,
           "--endpoint-type", "completions", "--streaming", "--concurrency", str(conc),
           "--benchmark-duration", str(seconds), "--isl", "16", "--osl", str(OUT_TOKENS),
           "--tokenizer", tok, "--use-server-token-count", "--artifact-dir", str(out),
           "--ui-type", "none"]
    rc, tail, wall, cpu = run_peer(cmd, timeout=seconds * 6 + 120, cwd=out, core=core)
    st = stub.stats()
    row = {"tool": "aiperf", "conc": conc, "stub_tok_s": st["tok_s"], "client_bound": None,
           "lag_p99_ms": None}
    try:
        d = json.loads((out / "profile_export_aiperf.json").read_text())
        row["tok_s"] = d["output_token_throughput"]["avg"]
        dur = d.get("benchmark_duration", {}).get("avg")
        row["completed"] = d.get("request_count", {}).get("avg")
        row["failed"] = (d.get("error_request_count") or {}).get("avg", 0)
        row["cpu"] = cpu / dur if dur else None
        row["note"] = f"CLI wall {wall:.0f} s, CPU {cpu:.0f} s incl. start-up"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        row.update(tok_s=None, cpu=None, completed=None, failed=None,
                   note=f"no result (rc={rc}, {type(e).__name__}): {tail[-300:]}")
    shutil.rmtree(out, ignore_errors=True)
    return row


def fmt(v, nd=0):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="64,256")
    ap.add_argument("--rounds", type=int, default=16, help="our requests per level = rounds x concurrency")
    ap.add_argument("--peer-seconds", type=int, default=10)
    ap.add_argument("--no-peers", action="store_true")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    cs = cores()
    stub_core = cs[-1] if len(cs) > 1 else None
    client_core = cs[0] if len(cs) > 1 else None
    print(f"cores available: {cs}; stub on {stub_core}, clients on {client_core}")

    peers = {}
    if not a.no_peers:
        for name, exe in (("guidellm", "guidellm"), ("aiperf", "aiperf")):
            t = time.perf_counter()
            tool, why = ensure_venv(name, name, exe)
            if tool is None:
                print(f"{name}: not run: {why}")
                continue
            tok, why = ensure_tokenizer(tool.parent / "python")
            if tok is None:
                print(f"{name}: not run: {why}")
                continue
            peers[name] = (tool, tok)
            print(f"{name}: ready ({time.perf_counter() - t:.0f} s)")

    rows = []
    with Stub("--selector", "epoll", core=stub_core) as stub:
        pin_self(client_core)
        for conc in levels:
            rows.append(ours(stub, conc, a.rounds))
            print(f"ours @{conc}: {fmt(rows[-1]['tok_s'])} tok/s", flush=True)
            for name, (tool, tok) in peers.items():
                fn = guidellm if name == "guidellm" else aiperf
                rows.append(fn(tool, stub, conc, a.peer_seconds, tok, client_core))
                print(f"{name} @{conc}: {fmt(rows[-1]['tok_s'])} tok/s {rows[-1]['note'][:200]}", flush=True)
        if os.environ.get("BENCH_DEBUG"):
            print(stub.stats())

    print()
    print(f"{'tool':<10}{'conc':>6}{'own tok/s':>12}{'stub tok/s':>12}{'CPU/core':>10}"
          f"{'bound':>7}{'lag p99':>9}{'ok':>7}{'fail':>6}")
    for r in rows:
        print(f"{r['tool']:<10}{r['conc']:>6}{fmt(r['tok_s']):>12}{fmt(r['stub_tok_s']):>12}"
              f"{fmt(r['cpu'], 2):>10}{fmt(r['client_bound']):>7}{fmt(r['lag_p99_ms'], 1):>9}"
              f"{fmt(r['completed']):>7}{fmt(r['failed']):>6}")
    print()
    ok = True
    for conc in levels:
        mine = next(r for r in rows if r["tool"] == "ours" and r["conc"] == conc)
        theirs = [r for r in rows if r["tool"] != "ours" and r["conc"] == conc and r.get("tok_s")]
        for r in theirs:
            print(f"@{conc}: ours/{r['tool']} = {mine['tok_s'] / r['tok_s']:.2f}x (own figures), "
                  f"{mine['stub_tok_s'] / r['stub_tok_s']:.2f}x (stub ruler)")
        if theirs:
            best = max(r["stub_tok_s"] for r in theirs)
            ratio = mine["stub_tok_s"] / best
            ok &= ratio >= 2
            print(f"@{conc}: ours / best peer = {ratio:.2f}x (goal >= 2x) -> {'met' if ratio >= 2 else 'NOT met'}; "
                  f"ours flagged client_bound={mine['client_bound']} (CPU {mine['cpu']:.2f} of a core)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
