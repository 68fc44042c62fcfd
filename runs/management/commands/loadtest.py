"""``manage.py loadtest``: run one benchmark point against any server and print its metrics.

Uses only sweepcore.loadgen / sweepcore.metrics / sweepcore.prompts / sweepcore.validity (no models, no
database).  Prints a readable table, or with ``--json`` one JSON object with the metric fields of
sweepcore.metrics.SUMMARY_FIELDS (what the executor stores for a point) followed by the evidence: ``n``,
``<metric>_ci`` and the verdict (``validity``, ``validity_reasons``), judged as the worker judges a point
(the server is not ours here, so any other busy process counts against it).  Problems -- a server that is
not there, no tokenizer endpoint, bad options -- are one line on stderr and exit status
1 (Django's CommandError), never a traceback.  Exit status is 1 as well when no request
of the point completed.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sweepcore import hostload, loadgen, metrics, prompts, validity
from sweepcore.spec import STEADY_STATE_MIN_MEASURED


def _preflight(base_url: str) -> None:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CommandError(f"--base-url {base_url!r} is not an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=5):
            pass
    except ConnectionRefusedError:
        raise CommandError(f"cannot connect to {parts.hostname}:{port} (connection refused): "
                           "is the server running?") from None
    except OSError as e:
        raise CommandError(f"cannot connect to {parts.hostname}:{port}: {e}") from None


def _first_model(base_url: str) -> str:
    import requests

    try:
        r = requests.get(base_url.rstrip("/") + "/v1/models", timeout=10)
        data = r.json().get("data") or []
        if r.status_code == 200 and data and data[0].get("id"):
            return data[0]["id"]
    except (requests.RequestException, ValueError, AttributeError):
        pass
    raise CommandError("no --model given and GET /v1/models named none; pass --model NAME")


def _import_callable(path: str):
    import importlib

    mod, _, attr = path.partition(":")
    try:
        fn = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise CommandError(f"--tokenizer {path!r}: cannot import ({e}); use module:function") from None
    if not callable(fn):
        raise CommandError(f"--tokenizer {path!r} is not callable")
    return fn


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def render_table(s: dict) -> str:
    rows = [("Successful requests", s["completed"]), ("Failed requests", s["failed"]),
            ("Benchmark duration (s)", s["duration"]),
            ("Total input tokens", s["total_input_tokens"]),
            ("Total generated tokens", s["total_output_tokens"]),
            ("Request throughput (req/s)", s["request_throughput"]),
            ("Output token throughput (tok/s)", s["output_throughput"]),
            ("Total token throughput (tok/s)", s["total_token_throughput"]),
            ("Peak output throughput (tok/s)", s["max_output_tokens_per_s"]),
            ("Median decode speed (tok/s/req)", s["decode_tok_s"]),
            ("Accept length", s["accept_length"])]
    lines = [f"{k:<34}{_fmt(v):>14}" for k, v in rows]
    lines.append(f"{'(ms)':<10}" + "".join(f"{h:>11}" for h in ("mean", "median", "std", "p90", "p99")))
    for m in metrics.LATENCIES:
        lines.append(f"{m.upper():<10}" + "".join(f"{_fmt(s[f'{st}_{m}_ms']):>11}" for st in metrics.STATS))
    for m in metrics.INTERVAL_METRICS:
        ci = s.get(f"{m}_ci")
        if ci:
            lines.append(f"{'95 % CI ' + m:<34}{_fmt(ci[0]):>14} – {_fmt(ci[1])}")
    if s.get("ramp"):
        lines.append(f"{'Left out as the ramp (requests)':<34}{s['ramp']['first']:>8} first, {s['ramp']['last']} last")
    lines.append(f"{'Client bound':<34}{_fmt(s['client_bound']):>14}")
    lines.append(f"{'Event-loop lag p99 (ms)':<34}{_fmt(s['event_loop_lag_p99_ms']):>14}")
    for kind, e in (s["errors"] or {}).items():
        lines.append(f"error {kind}: {e['count']} x, e.g. {e['example'][:200]}")
    lines.append(f"{'Verdict':<34}{s['validity']:>14}  (n = {s['n']})")
    for reason in s["validity_reasons"]:
        lines.append(f"  {reason['code']}: {reason['message']}")
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Run one load point against an inference server and print the metrics."

    def add_arguments(self, p):
        p.add_argument("--base-url", required=True)
        p.add_argument("--api", required=True, choices=loadgen.APIS)
        p.add_argument("--model", default=None)
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--prompt-tokens", type=int, help="long-context prompt of exactly P tokens")
        g.add_argument("--workload", choices=prompts.WORKLOADS)
        g.add_argument("--prompt", help="a fixed prompt, sent as it is (a fixed workload's, e.g. to reproduce a point)")
        p.add_argument("--dataset", help="ShareGPT JSON file (with --workload dataset)")
        p.add_argument("--tokenizer", help="local tokenizer as module:function (text -> count or ids)")
        p.add_argument("--max-tokens", type=int, required=True)
        p.add_argument("--concurrency", type=int, required=True)
        p.add_argument("--num-requests", type=int, required=True)
        p.add_argument("--request-rate", type=float, default=None)
        p.add_argument("--burstiness", type=float, default=1.0)
        p.add_argument("--warmup", type=int, default=0)
        p.add_argument("--skip-first", type=float, default=0.0,
                       help="share of the requests (by send order) sent but left out of the statistics: the ramp up")
        p.add_argument("--skip-last", type=float, default=0.0, help="likewise at the end: the ramp down")
        p.add_argument("--ignore-eos", action="store_true")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--api-key", default=None)
        p.add_argument("--timeout-first-token", type=float, default=600.0)
        p.add_argument("--timeout-stall", type=float, default=120.0)
        p.add_argument("--timeout-total", type=float, default=3600.0)
        p.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args, **o):
        if o["concurrency"] < 1 or o["num_requests"] < 1 or o["max_tokens"] < 1:
            raise CommandError("--concurrency, --num-requests and --max-tokens must be >= 1")
        for flag in ("skip_first", "skip_last"):
            if not 0 <= o[flag] < 1:
                name = flag.replace("_", "-")
                raise CommandError(f"--{name} must be a share at least 0 and below 1, not {o[flag]:g}")
        if o["skip_first"] + o["skip_last"] > 1 - STEADY_STATE_MIN_MEASURED:
            raise CommandError(f"--skip-first + --skip-last must be at most {1 - STEADY_STATE_MIN_MEASURED:g}: "
                               f"at least half of the requests are measured")
        base = o["base_url"]
        _preflight(base)
        api = o["api"]
        model = o["model"]
        if api != "sglang-generate" and not model:
            model = _first_model(base)
        counter = None
        if o["tokenizer"]:
            counter = prompts.LocalTokenizer(_import_callable(o["tokenizer"]))
        workload = o["workload"] or ("fixed" if o["prompt"] is not None else "long-context")
        fallback = None
        note = ""
        try:
            if workload == "long-context":
                if not o["prompt_tokens"]:
                    raise CommandError("--workload long-context needs --prompt-tokens P")
                if o["prompt_tokens"] < 16:
                    raise CommandError("--prompt-tokens must be >= 16")
                counter = counter or prompts.ServerTokenizer(base, model=model)
                sp = prompts.long_context_prompt(o["prompt_tokens"], counter.count, seed=o["seed"])
                if not sp.exact:
                    raise CommandError(f"could not reach exactly {sp.target} tokens (got {sp.tokens})")
                prompt_list = [sp.text]
                fallback = sp.tokens
                note = f"prompt: {sp.tokens} tokens by {counter.endpoint} in {sp.calls} tokenize calls"
            elif workload == "fixed":
                if not o["prompt"].strip():
                    raise CommandError("--prompt is empty")
                prompt_list = [o["prompt"]]
            elif workload == "fibonacci":
                prompt_list = [prompts.FIBONACCI_PROMPT]
            else:
                if not o["dataset"]:
                    raise CommandError("--workload dataset needs --dataset FILE")
                counter = counter or prompts.ServerTokenizer(base, model=model)
                limit = (counter.max_model_len or 10**9) - o["max_tokens"] - 16
                items = prompts.load_sharegpt(o["dataset"], counter.count, num_prompts=o["num_requests"],
                                              max_prompt_tokens=limit, seed=o["seed"])
                if not items:
                    raise CommandError(f"{o['dataset']}: no conversation fits")
                prompt_list = [d.text for d in items]
                note = f"dataset: {len(items)} prompts"
        except prompts.TokenizerError as e:
            raise CommandError(f"{e}. Pass --tokenizer module:function for a local tokenizer.") from None
        except (OSError, ValueError) as e:
            raise CommandError(str(e)) from None
        cfg = loadgen.LoadConfig(
            base_url=base, api=api, model=model, prompts=prompt_list, max_tokens=o["max_tokens"],
            concurrency=o["concurrency"], num_requests=o["num_requests"],
            request_rate=o["request_rate"], burstiness=o["burstiness"], warmup=o["warmup"],
            timeout_first_token=o["timeout_first_token"], timeout_stall=o["timeout_stall"],
            timeout_total=o["timeout_total"], api_key=o["api_key"], seed=o["seed"],
            extra_body={"ignore_eos": True} if o["ignore_eos"] else {},
        )
        before = hostload.snapshot()
        try:
            result = loadgen.run_load_sync(cfg)
        except ValueError as e:
            raise CommandError(str(e)) from None
        host = hostload.host_load(before, hostload.snapshot(), own_pids={os.getpid()})
        if o["skip_first"] or o["skip_last"]:
            metrics.mark_ramp(result.results, o["skip_first"], o["skip_last"])
        summary = result.summary(prompt_tokens_fallback=fallback)
        verdict = validity.judge(
            result.results, summary, thresholds=validity.Thresholds.from_mapping(settings.SWEEPLAB_VALIDITY),
            client_cpu_share=result.client_cpu_fraction, host=host,
            asked_output_tokens=o["max_tokens"] if o["ignore_eos"] else None,
            asked_prompt_tokens=fallback, server_prompt_tokens=[r.prompt_tokens for r in result.results
                                                                if r.prompt_tokens is not None],
        )
        intervals = summary.pop("intervals")
        summary.update(n=summary["completed"], **metrics.ci_fields(intervals), validity=str(verdict.validity),
                       validity_reasons=verdict.reasons_json())
        if note:
            self.stderr.write(note)
        if o["json"]:
            self.stdout.write(json.dumps(summary))
        else:
            self.stdout.write(render_table(summary))
        if summary["completed"] == 0:
            self.stderr.write("no request completed")
            sys.exit(1)
