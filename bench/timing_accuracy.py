#!/usr/bin/env python3
"""Measured TTFT and ITL against the truth the stub injects (TTFT 100 ms, ITL 10 ms).

The stub (bench/stub_server.py, pinned to its own core, ``select()`` loop with
microsecond timer resolution) writes the first chunk 100 ms after reading a request and
chunk j at 100 + 10 j ms (absolute deadlines).  It also reports how late its own writes
were (``/stats``: p50/p99 lateness), which is the part of any error that is the stub's,
not the client's.  At concurrency 1, 64 and 256 we print our mean / median / p99 TTFT and
ITL and their errors against 100 ms / 10 ms; the goal is a median error under 0.5 ms at
every level.  guidellm and aiperf (from var/bench-venvs, see bench/client_headroom.py)
run the same load where they are installed.  Note their ITL is a per-request average
((last - first) / (n - 1), i.e. vLLM's TPOT), not a per-gap distribution, so their p99 ITL
is a p99 of request averages.

Usage: ``python bench/timing_accuracy.py [--levels 1,64,256] [--tokens 32] [--no-peers]``
(loopback only; ~1 minute without peers, ~3 with).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from client_headroom import Stub, cores, ensure_tokenizer, ensure_venv, pin_self, run_peer

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


def guidellm(tool, stub: Stub, conc: int, tokens: int, tok: str, core) -> dict:
    out = Path(tempfile.mkdtemp(prefix="guidellm-"))
    stub.reset()
    n = requests_for(conc)
    cmd = [str(tool), "run",
           "--backend", f"kind=openai_http,target={stub.url},model=stub-model,request_format=/v1/completions",
           "--profile", f"kind=concurrent,streams={conc}",
           "--constraint", f"kind=max_requests,count={n}",
           "--data", f"kind=synthetic_text,prompt_tokens=16,output_tokens={tokens}",
           "--tokenizer", f"kind=huggingface_auto,model={tok}",
           "--output", f"kind=json,path={out / 'g.json'}", "--disable-console-interactive"]
    rc, tail, _, _ = run_peer(cmd, timeout=300, cwd=out, core=core)
    st = stub.stats()
    row = {"tool": "guidellm", "conc": conc, "client_bound": None,
           "stub_late": (st["late_p50_ms"], st["late_p99_ms"])}
    try:
        m = json.loads((out / "g.json").read_text())["benchmarks"][0]["metrics"]

        def trio(key):
            d = m[key]["successful"]
            return d["mean"], d["median"], d["percentiles"]["p99"]

        row.update(ttft=trio("time_to_first_token_ms"), itl=trio("inter_token_latency_ms"),
                   ok=m["request_totals"]["successful"], fail=m["request_totals"]["errored"],
                   note="ITL = per-request average")
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        row.update(ttft=None, itl=None, ok=None, fail=None,
                   note=f"no result (rc={rc}, {type(e).__name__}): {tail[-300:]}")
    shutil.rmtree(out, ignore_errors=True)
    return row


def aiperf(tool, stub: Stub, conc: int, tokens: int, tok: str, core) -> dict:
    out = Path(tempfile.mkdtemp(prefix="aiperf-"))
    stub.reset()
    n = requests_for(conc)
    cmd = [str(tool), "profile", "--model", "stub-model", "--url", stub.url,
           "--endpoint-type", "completions", "--streaming", "--concurrency", str(conc),
           "--request-count", str(n), "--isl", "16", "--osl", str(tokens), "--tokenizer", tok,
           "--use-server-token-count", "--artifact-dir", str(out), "--ui-type", "none"]
    rc, tail, _, _ = run_peer(cmd, timeout=300, cwd=out, core=core)
    st = stub.stats()
    row = {"tool": "aiperf", "conc": conc, "client_bound": None,
           "stub_late": (st["late_p50_ms"], st["late_p99_ms"])}
    try:
        d = json.loads((out / "profile_export_aiperf.json").read_text())

        def trio(key):
            x = d[key]
            return x["avg"], x["p50"], x["p99"]

        row.update(ttft=trio("time_to_first_token"), itl=trio("inter_token_latency"),
                   ok=d.get("request_count", {}).get("avg"), fail=(d.get("error_request_count") or {}).get("avg", 0),
                   note="ITL = per-request average")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        row.update(ttft=None, itl=None, ok=None, fail=None,
                   note=f"no result (rc={rc}, {type(e).__name__}): {tail[-300:]}")
    shutil.rmtree(out, ignore_errors=True)
    return row


def f(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="1,64,256")
    ap.add_argument("--tokens", type=int, default=32, help="output tokens per request")
    ap.add_argument("--no-peers", action="store_true")
    a = ap.parse_args()
    levels = [int(x) for x in a.levels.split(",")]
    cs = cores()
    stub_core = cs[-1] if len(cs) > 1 else None
    client_core = cs[0] if len(cs) > 1 else None
    print(f"cores available: {cs}; stub on {stub_core}, clients on {client_core}; "
          f"truth TTFT {TTFT_MS:g} ms, ITL {ITL_MS:g} ms, {a.tokens} tokens/request")
    peers = {}
    if not a.no_peers:
        for name in ("guidellm", "aiperf"):
            tool, why = ensure_venv(name, name, name)
            tok, why2 = (ensure_tokenizer(tool.parent / "python") if tool else (None, why))
            if tool is None or tok is None:
                print(f"{name}: not run: {why or why2}")
            else:
                peers[name] = (tool, tok)
    rows = []
    # With a core of its own the stub busy-polls (it never sleeps, so it neither reads a
    # request nor writes a chunk late by a wake-up); sharing a core it only polls the
    # last 1 ms before each timed write.
    stub_args = ["--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--selector", "select",
                 "--spin-us", "1000"] + (["--busy-poll"] if stub_core is not None else [])
    with Stub(*stub_args, core=stub_core) as stub:
        pin_self(client_core)
        for conc in levels:
            rows.append(ours(stub, conc, a.tokens))
            for name, (tool, tok) in peers.items():
                rows.append((guidellm if name == "guidellm" else aiperf)(tool, stub, conc, a.tokens, tok, client_core))
            for r in rows[-1 - len(peers):]:
                print(f"{r['tool']} @{r['conc']}: TTFT {r['ttft'] and f(r['ttft'][1])} ITL "
                      f"{r['itl'] and f(r['itl'][1])} {r['note'][:200]}", flush=True)
    print()
    print(f"{'tool':<9}{'conc':>5} | {'TTFT mean':>9}{'median':>8}{'p99':>8}{'err med':>8} | "
          f"{'ITL mean':>9}{'median':>8}{'p99':>8}{'err med':>8} | {'stub late p50/p99':>18} {'ok':>5}{'fail':>5}")
    ok = True
    for r in rows:
        if r["ttft"] is None:
            print(f"{r['tool']:<9}{r['conc']:>5} | {r['note'][:150]}")
            continue
        e_t = r["ttft"][1] - TTFT_MS
        e_i = r["itl"][1] - ITL_MS
        if r["tool"] == "ours":
            ok &= abs(e_t) < 0.5 and abs(e_i) < 0.5
        late = f"{f(r['stub_late'][0], 3)}/{f(r['stub_late'][1], 3)}"
        print(f"{r['tool']:<9}{r['conc']:>5} | {f(r['ttft'][0]):>9}{f(r['ttft'][1]):>8}{f(r['ttft'][2]):>8}"
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
