#!/usr/bin/env python3
"""How many streamed tokens per second our client ingests on one core, beside the
strongest clients an inference engineer would pick instead, on one ruler.

The stub server (bench/stub_server.py, zero delays) runs on its own core; every client
runs on the other one (the Rust client with one worker thread). Each request asks for 256
output tokens (one token per SSE event). Two stub modes:

* ``interleaved``: the stub writes one event of every open stream per loop pass, so the
  client reads many small messages from many streams, as from a busy server;
* ``burst``: each whole response in one write (the client parses 256 events per read).

At concurrency 64 and 256, every tool sends the same number of requests (16 rounds of
the concurrency). A long-context case follows: 32k-token prompts, 1,024-token answers
(vllm#39963: aiohttp's default read buffer made vLLM's client report a tenth of the true
rate at 50k context).

The tools (bench/peers.py installs each into its own virtualenv under var/bench-venvs/):
ours (sweepcore.loadgen, in this process); vLLM's ``vllm bench serve``; SGLang's Rust
client ``sglang-bench`` and its Python ``bench_serving``; guidellm; AIPerf. For each: its
own output tok/s, the stub's ruler (the tokens of the responses that ended between the
first and the last tenth of them ÷ that time: start-up, warm-up, ramp and tail left out),
the stub's CPU share (near 1.0: the stub, not the client, set the pace, and the client's
figure is only a floor), and the client's CPU in the stub's steady window, sampled from
/proc for the tool's whole process session: the cores it used then and its CPU µs per
token, a cost that holds whoever set the pace.

Targets (issue 17), interleaved at c=64 and c=256, on the stub's ruler and in CPU per
token both: ours ≥ 1.0 × sglang-bench (Rust) and ≥ 1.5 × vllm bench serve.

Usage: ``python bench/client_headroom.py [--levels 64,256] [--rounds 16] [--modes
interleaved,burst] [--peers NAME,...] [--no-peers] [--no-long]`` (loopback only; about 6
minutes with every peer, the first run longer for the installs).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from peers import PEERS, CpuSampler, Load, Result, Stub, fmt, layout, pin_self

from sweepcore.loadgen import LoadConfig, run_load_sync

OUT_TOKENS = 256
LONG = Load(conc=32, requests=128, output_tokens=1024, prompt_tokens=32_000)


def ours(url: str, load: Load) -> Result:
    prompt = " ".join(["word"] * (load.prompt_tokens - 1))  # about the peers' length: 5 characters a token
    sampler = CpuSampler().start()  # this process: the sampler's own reads count against us
    try:
        lr = run_load_sync(LoadConfig(base_url=url, model="stub-model", prompts=[prompt],
                                  max_tokens=load.output_tokens, concurrency=load.conc,
                                  num_requests=load.requests, warmup=load.conc))
    finally:
        sampler.stop()
    s = lr.summary()
    return Result("ours", "", tok_s=s["output_throughput"], completed=s["completed"], failed=s["failed"],
                  ttft=(s["mean_ttft_ms"], s["median_ttft_ms"], s["p99_ttft_ms"]),
                  itl=(s["mean_itl_ms"], s["median_itl_ms"], s["p99_itl_ms"]),
                  cpu_s=lr.client_cpu_s, window_s=lr.duration, sampler=sampler,
                  note=f"client_bound={lr.client_bound}, loop lag p99 {lr.event_loop_lag_p99_ms:.1f} ms")


def profile(url: str, load: Load, top: int = 18) -> None:
    """Where our client's CPU goes per token: one load under cProfile (which slows it; the
    µs per token of the unprofiled runs are in the table), the functions by own time."""
    prof = cProfile.Profile()
    prof.enable()
    result = ours(url, load)
    prof.disable()
    tokens = (load.requests + load.conc) * load.output_tokens  # the warm-up's too
    stats = pstats.Stats(prof, stream=io.StringIO())
    total = stats.total_tt
    print(f"\nprofile of ours, c={load.conc}: {total / tokens * 1e6:.2f} µs of profiled CPU per token "
          f"({result.tok_s:,.0f} tok/s under the profiler); own time per function:")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    for (path, line, name), (_, calls, own, _cum, _) in rows:
        where = f"{path.rsplit('/', 2)[-2:][-1]}:{line}" if path != "~" else "builtin"
        print(f"  {own / tokens * 1e6:7.3f} µs/token  {own / total * 100:5.1f} %  {calls / tokens:6.2f} calls/token  "
              f"{name} ({where})")


def measure(stub: Stub, run) -> dict:
    """One tool's run, with the stub's ruler and the tool's CPU in the stub's steady window:
    the cores it used then and its CPU µs per token (whoever set the pace, the client's cost)."""
    stub.reset()
    result = run()
    st = stub.stats()
    row = {"result": result, "stub_tok_s": st["tok_s"], "stub_cpu": st["cpu"], "cores": None, "us_per_token": None}
    if st["steady"] and result.sampler is not None:
        start, end, tokens = st["steady"]
        cpu = result.sampler.between(start, end)
        if cpu is not None and tokens:
            row.update(cores=cpu / (end - start), us_per_token=cpu / tokens * 1e6)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="64,256")
    ap.add_argument("--rounds", type=int, default=16, help="requests per level = rounds x concurrency")
    ap.add_argument("--modes", default="interleaved,burst")
    ap.add_argument("--peers", default=",".join(PEERS), help="which peers, by name")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-long", action="store_true", help="skip the long-context case")
    ap.add_argument("--profile", action="store_true",
                    help="then profile ours at the last level, interleaved: where the CPU goes per token")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",") if x]
    stub_core, client_core = layout()
    print(f"stub on core {stub_core}, every client on core {client_core}")

    peers = {}
    for name in ([] if a.no_peers else [n.strip() for n in a.peers.split(",")]):
        if name not in PEERS:
            raise SystemExit(f"unknown peer {name!r}: one of {', '.join(PEERS)}")
        t = time.perf_counter()
        peer = PEERS[name]()
        why = peer.install()
        if why:
            print(f"{name}: not run: {why}")
            continue
        peers[name] = peer
        print(f"{name} {peer.version}: ready ({time.perf_counter() - t:.0f} s)")

    cases = [(mode, Load(conc=c, requests=c * a.rounds, output_tokens=OUT_TOKENS))
             for mode in a.modes.split(",") for c in levels]
    if not a.no_long:
        cases.append(("long context", LONG))
    rows = []
    for mode in dict.fromkeys(m for m, _ in cases):
        # --tokenize none: vLLM's client would otherwise re-align every prompt through /tokenize first.
        # --prompt-count chars: a 32k-token prompt costs the stub the same whatever its text.
        args = ["--selector", "epoll", "--tokenize", "none", "--prompt-count", "chars"]
        args += ["--interleave"] if mode != "burst" else []
        with Stub(*args, core=stub_core) as stub:
            pin_self(client_core)
            for case_mode, load in cases:
                if case_mode != mode:
                    continue
                runs = [("ours", lambda load=load: ours(stub.url, load))]
                runs += [(n, lambda p=p, load=load: p.run(stub.url, load, client_core)) for n, p in peers.items()]
                for tool, run in runs:
                    row = measure(stub, run)
                    row.update(mode=mode, load=load)
                    rows.append(row)
                    r = row["result"]
                    print(f"{mode} c={load.conc} {tool}: own {fmt(r.tok_s)} tok/s, stub {fmt(row['stub_tok_s'])} "
                          f"tok/s, {fmt(row['us_per_token'], 2)} µs CPU/token {r.note[:200]}", flush=True)

    if a.profile:
        with Stub("--selector", "epoll", "--tokenize", "none", "--prompt-count", "chars", "--interleave",
                  core=stub_core) as stub:
            profile(stub.url, Load(conc=levels[-1], requests=levels[-1] * a.rounds, output_tokens=OUT_TOKENS))

    print()
    print(f"{'mode':<13}{'conc':>5} {'tool':<22}{'version':>9}{'own tok/s':>11}{'stub tok/s':>11}"
          f"{'stub CPU':>9}{'client cores':>13}{'µs/token':>9}{'CPU whole run':>14}{'ok':>6}{'fail':>5}")
    for row in rows:
        r, load = row["result"], row["load"]
        print(f"{row['mode']:<13}{load.conc:>5} {r.tool:<22}{r.version or '-':>9}{fmt(r.tok_s):>11}"
              f"{fmt(row['stub_tok_s']):>11}{fmt(row['stub_cpu'], 2):>9}{fmt(row['cores'], 2):>13}"
              f"{fmt(row['us_per_token'], 2):>9}{fmt(r.cpu, 2):>14}{fmt(r.completed):>6}{fmt(r.failed):>5}")
    print("stub CPU near 1.00: the stub set the pace, and the client's tok/s is a floor of what it could do; "
          "client cores and µs/token: the client's CPU in the stub's steady window (whoever set the pace); "
          "CPU whole run: the client's CPU per second of its own window, start-up included.")
    print()
    met = True
    targets = {"sglang-bench (Rust)": 1.0, "vllm bench serve": 1.5}
    for mode in dict.fromkeys(row["mode"] for row in rows):
        for load in dict.fromkeys(row["load"].conc for row in rows if row["mode"] == mode):
            here = {row["result"].tool: row for row in rows if row["mode"] == mode and row["load"].conc == load}
            mine = here.get("ours")
            if not mine or not mine["stub_tok_s"]:
                continue
            for tool, row in here.items():
                if tool == "ours" or not row["stub_tok_s"]:
                    continue
                ratio = mine["stub_tok_s"] / row["stub_tok_s"]
                cost = (row["us_per_token"] / mine["us_per_token"]) if row["us_per_token"] and mine["us_per_token"] else None
                goal = targets.get(tool) if mode == "interleaved" else None
                verdict = ""
                if goal:
                    ok = ratio >= goal and (cost is None or cost >= goal)
                    met &= ok
                    verdict = f" (target >= {goal:g}x on both: {'met' if ok else 'NOT met'})"
                bound = " (the stub set the peer's pace)" if (row["stub_cpu"] or 0) >= 0.95 else ""
                print(f"{mode} c={load}: ours / {tool} = {ratio:.2f}x on the stub's ruler{bound}, "
                      f"{fmt(cost, 2)}x in CPU per token{verdict}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
