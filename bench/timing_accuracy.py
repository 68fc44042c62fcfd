#!/usr/bin/env python3
"""Measured TTFT and ITL against the truth the stub injects (TTFT 100 ms, ITL 10 ms).

The stub (bench/stub_server.py, pinned to its own core, ``select()`` loop with
microsecond timer resolution) writes the first chunk 100 ms after reading a request and
chunk j at 100 + 10 j ms (absolute deadlines).  It also reports how late its own writes
were (``/stats``: p50/p99 lateness), which is the part of any error that is the stub's,
not the client's.  At concurrency 1, 64 and 256 we print our mean / median / p99 TTFT and
ITL and their errors against 100 ms / 10 ms; the goal is a median error under 0.5 ms at
every level.  The peers of bench/peers.py (vllm bench serve, SGLang's Rust sglang-bench and
its Python bench_serving, guidellm, AIPerf) run the same load, on the same core, beside
ours.  Note that guidellm's and AIPerf's ITL is a per-request average ((last - first) /
(n - 1), i.e. vLLM's TPOT), not a per-gap distribution, so their p99 ITL is a p99 of
request averages; vLLM's and SGLang's are per gap.

Usage: ``python bench/timing_accuracy.py [--levels 1,64,256] [--tokens 32] [--peers NAME,...]
[--no-peers]`` (loopback only; ~1 minute without peers, ~4 with).
"""

from __future__ import annotations

import argparse
import statistics

from peers import PEERS, Load, Stub, layout, pin_self

from sweepcore.loadgen import LoadConfig, run_load_sync

TTFT_MS, ITL_MS = 100.0, 10.0


def requests_for(conc: int) -> int:
    return {1: 12}.get(conc, conc * 3)


def _med_ms(xs):
    return statistics.median(xs) * 1000 if xs else None


def split(stub: Stub, results, prompts) -> dict:
    """Per request, from the stub's own records (same epoch clock as ``send_time``):
    up = client send stamp -> stub read the request; late = stub's first write -> its
    deadline (read + 100 ms); down = stub's first write -> client's first-token stamp.
    TTFT error = up + late + down.  Medians in ms."""
    recs = {}
    for r in stub.requests():  # later records (measured) override the warmup's
        recs[r[0]] = r
    up, late, down = [], [], []
    for r in results:
        rec = recs.get(prompts[r.index % len(prompts)])
        if rec is None or rec[3] is None or not r.chunk_offsets:
            continue
        up.append(rec[1] - r.send_time)
        late.append(rec[3] - rec[1] - TTFT_MS / 1000)
        down.append(r.send_time + r.chunk_offsets[0] - rec[3])
    return {"up": _med_ms(up), "late": _med_ms(late), "down": _med_ms(down)}


def ours(stub: Stub, conc: int, tokens: int) -> dict:
    stub.reset()
    n = requests_for(conc)
    # one distinct prompt per request (same token count), so the stub's per-request
    # records can be matched to ours; warmup requests reuse the first prompts
    prompts = [f"Time me {i}." for i in range(n)]
    # warmup in the same session, so measured requests reuse warm connections
    lr = run_load_sync(LoadConfig(base_url=stub.url, model="stub-model", prompts=prompts,
                                  max_tokens=tokens, concurrency=conc, num_requests=n,
                                  warmup=conc))
    s = lr.summary()
    st = stub.stats()
    return {"tool": "ours", "conc": conc, "split": split(stub, lr.results, prompts),
            "ttft": (s["mean_ttft_ms"], s["median_ttft_ms"], s["p99_ttft_ms"]),
            "itl": (s["mean_itl_ms"], s["median_itl_ms"], s["p99_itl_ms"]),
            "ok": s["completed"], "fail": s["failed"], "client_bound": lr.client_bound,
            "stub_late": (st["late_p50_ms"], st["late_p99_ms"]), "note": ""}


def peer_row(peer, stub: Stub, conc: int, tokens: int, core) -> dict:
    stub.reset()
    r = peer.run(stub.url, Load(conc=conc, requests=requests_for(conc), output_tokens=tokens, prompt_tokens=16), core)
    st = stub.stats()
    return {"tool": peer.name, "conc": conc, "client_bound": None, "ttft": r.ttft, "itl": r.itl,
            "ok": r.completed, "fail": r.failed, "stub_late": (st["late_p50_ms"], st["late_p99_ms"]),
            "note": f"ITL {peer.itl_kind}" if r.ttft else r.note}


def f(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="1,64,256")
    ap.add_argument("--tokens", type=int, default=32, help="output tokens per request")
    ap.add_argument("--peers", default=",".join(PEERS), help="which peers, by name")
    ap.add_argument("--no-peers", action="store_true")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    stub_core, client_core = layout()
    print(f"stub on core {stub_core}, every client on core {client_core}; "
          f"truth TTFT {TTFT_MS:g} ms, ITL {ITL_MS:g} ms, {a.tokens} tokens/request")
    peers = []
    for name in ([] if a.no_peers else [n.strip() for n in a.peers.split(",")]):
        peer = PEERS[name]()
        why = peer.install()
        if why:
            print(f"{name}: not run: {why}")
        else:
            peers.append(peer)
    rows = []
    # With a core of its own the stub busy-polls (it never sleeps, so it neither reads a
    # request nor writes a chunk late by a wake-up); sharing a core it only polls the
    # last 1 ms before each timed write.
    stub_args = ["--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--selector", "select", "--tokenize", "none",
                 "--spin-us", "1000"] + (["--busy-poll"] if stub_core is not None else [])
    with Stub(*stub_args, core=stub_core) as stub:
        pin_self(client_core)
        for conc in levels:
            rows.append(ours(stub, conc, a.tokens))
            for peer in peers:
                rows.append(peer_row(peer, stub, conc, a.tokens, client_core))
            for r in rows[-1 - len(peers):]:
                print(f"{r['tool']} @{r['conc']}: TTFT {r['ttft'] and f(r['ttft'][1])} ITL "
                      f"{r['itl'] and f(r['itl'][1])} {r['note'][:200]}", flush=True)
    print()
    print(f"{'tool':<22}{'conc':>5} | {'TTFT mean':>9}{'median':>8}{'p99':>8}{'err med':>8} | "
          f"{'ITL mean':>9}{'median':>8}{'p99':>8}{'err med':>8} | {'stub late p50/p99':>18} {'ok':>5}{'fail':>5}")
    ok = True
    for r in rows:
        if r["ttft"] is None:
            print(f"{r['tool']:<22}{r['conc']:>5} | {r['note'][:150]}")
            continue
        e_t = r["ttft"][1] - TTFT_MS
        e_i = r["itl"][1] - ITL_MS
        if r["tool"] == "ours":
            ok &= abs(e_t) < 0.5 and abs(e_i) < 0.5
        late = f"{f(r['stub_late'][0], 3)}/{f(r['stub_late'][1], 3)}"
        print(f"{r['tool']:<22}{r['conc']:>5} | {f(r['ttft'][0]):>9}{f(r['ttft'][1]):>8}{f(r['ttft'][2]):>8}"
              f"{e_t:>+8.2f} | {f(r['itl'][0]):>9}{f(r['itl'][1]):>8}{f(r['itl'][2]):>8}{e_i:>+8.2f} | "
              f"{late:>18} {r['ok']!s:>5}{r['fail']!s:>5}")
    print("\nours, TTFT error split by the stub's per-request records (medians, ms): up = our send "
          "stamp -> stub read the request; stub late = its first write - (read + 100 ms); down = "
          "stub's first write -> our first-token stamp")
    for r in rows:
        sp = r.get("split")
        if sp:
            print(f"ours {r['conc']:>5} | up {f(sp['up'], 3):>7}  stub late {f(sp['late'], 3):>7}  "
                  f"down {f(sp['down'], 3):>7}  (TTFT err med {r['ttft'][1] - TTFT_MS:+.3f})")
    print(f"\nours: median |error| < 0.5 ms for TTFT and ITL at every level: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
