"""llama.cpp through llama-cpp-python's server (`python -m llama_cpp.server`).

Checked against llama-cpp-python 0.3.36 (`llama_cpp/server/app.py`, `settings.py`,
`llama.py`) and the llama.cpp it vendors:

- Launch: `--model PATH --n_ctx N --host H --port P [--n_threads T]`; prompt-lookup
  speculation is `--draft_model prompt-lookup-decoding --draft_model_num_pred_tokens K`.
  `--interrupt_requests` defaults to true: a stream is cut short (`[DONE]` after a few
  tokens, or none) as soon as another request waits, so every point above concurrency 1
  would measure truncated answers. We launch with it off; requests are served one at a
  time, as this server does anyway.
- Readiness: there is no `/health`; `GET /v1/models` answers once the model is loaded
  (it waits for a running generation, so it is only probed between points).
- Context length: the `n_ctx` it was launched with, as llama.cpp logs it
  (`llama_context: n_ctx = 2048`), else the `--n_ctx` of the argv. One sequence at a
  time owns the whole KV cache, so no KV capacity is divided by concurrency.
- Token counts: `POST /extras/tokenize/count` (sweepcore.prompts.ServerTokenizer). The stream
  carries no usage at all (`stream_options` is ignored), so output tokens are counted
  from the chunks; once per point a non-streamed request with the same prompt and
  settings gives the server's own `usage` to check that count against.
- Generation length: there is no `ignore_eos`. `min_tokens` is no substitute: under
  prompt-lookup it counts draft tokens as generated and lets the end token through early.
  Instead the end-of-generation tokens llama.cpp logs at load (`print_info: EOG token =
  2 '<|im_end|>'`) get a `logit_bias` of -100, so every configuration generates exactly
  `max_tokens`; `temperature` 0 makes the check request repeat the measured one exactly.
- Context refusal: `Requested tokens (P) exceed context window of N` is raised when the
  prompt alone does not fit (prompt >= n_ctx). Non-streamed it is an HTTP 400
  `context_length_exceeded`; streamed it is raised after the 200 header and the stream
  just ends, with the text in the server's log only: `relabel_failures` reads it there.
  A prompt that fits but leaves less than `max_tokens` of room is silently clamped (fewer
  tokens generated): the context cap keeps prompt + max new tokens inside n_ctx first.
- Its own speed: with `verbose` (the default) llama.cpp prints `llama_perf_context_print`
  after each completion: prompt eval, eval (single-token decode steps) and total time.
  Speculative verify batches are counted as *prompt* eval there, so the eval rate is the
  decode speed only for autoregressive runs.
- Version: `GET /openapi.json` `info.version` (llama-cpp-python's `__version__`).
"""

import re

import requests

from sweepcore.engines.base import EngineAdapter, ServerLimits, get_json
from sweepcore.failures import rule
from sweepcore.kinds import FailureKind
from sweepcore.methods import AUTOREGRESSIVE

# llama.cpp's ggml_abort: "<file>:<line>: GGML_ASSERT(<condition>) failed".
LOG_RULES = (
    rule(FailureKind.GGML_ASSERT, r"GGML_ASSERT\(.*\) failed", "llama.cpp assertion failed"),
    rule(FailureKind.MODEL_MISSING, r"Model path does not exist", "the model file could not be found"),
    # The first line says why ("… data is not within the file bounds, model is corrupted
    # or incomplete"); the Python error after it only names the file.
    rule(FailureKind.MODEL_LOAD, r"error loading model:", "llama.cpp could not load the model"),
    rule(FailureKind.MODEL_LOAD, r"Failed to load model from file", "llama.cpp could not load the model"),
)

N_CTX_LOG = re.compile(r"^llama_context:\s+n_ctx\s+=\s+(\d+)\s*$", re.MULTILINE)
EOG_LOG = re.compile(r"^print_info: EOG token\s+=\s+(\d+) ", re.MULTILINE)
# OpenAI's (and llama-cpp-python's) "never sample this token" bias.
BANNED = -100.0
PERF_LINE = re.compile(
    r"llama_perf_context_print:\s+(prompt eval|eval|total) time =\s+([\d.]+) ms /\s+(\d+) (?:tokens|runs)"
)
OVERFLOW_LOG = re.compile(r"(?:ValueError: )?Requested tokens \(\d+\) exceed context window of \d+")

# Request check: answers of a long prompt on a 2-core CPU take a while.
CHECK_TIMEOUT_S = 600


def flag_value(argv, flag):
    """The value after `flag` in an argv (`--flag V` or `--flag=V`), or None."""
    for i, item in enumerate(argv):
        if item == flag and i + 1 < len(argv):
            return argv[i + 1]
        if item.startswith(flag + "="):
            return item.split("=", 1)[1]
    return None


def parse_perf(log_text):
    """Sum llama.cpp's per-completion timing lines in a stretch of log: prompt eval,
    eval and total milliseconds and counts, and how many completions printed them."""
    sums = {"completions": 0, "prompt_eval_ms": 0.0, "prompt_eval_tokens": 0, "eval_ms": 0.0, "eval_runs": 0,
            "total_ms": 0.0}
    for kind, ms, count in PERF_LINE.findall(log_text):
        if kind == "prompt eval":
            sums["prompt_eval_ms"] += float(ms)
            sums["prompt_eval_tokens"] += int(count)
        elif kind == "eval":
            sums["eval_ms"] += float(ms)
            sums["eval_runs"] += int(count)
        else:
            sums["total_ms"] += float(ms)
            sums["completions"] += 1
    return sums


class LlamaCppAdapter(EngineAdapter):
    kind = "llamacpp"
    api = "openai-completions"
    health_path = "/v1/models"
    streams_usage = False
    log_rules = LOG_RULES

    def argv(self, template, method_args, values):
        argv = super().argv(template, method_args, values)
        if flag_value(argv, "--interrupt_requests") is None:
            argv += ["--interrupt_requests", "False"]
        return argv

    def extra_body(self, max_tokens, server_info):
        body = {"temperature": 0.0}
        eog = server_info.get("eog_token_ids") or []
        if eog:
            body["logit_bias"] = {str(token): BANNED for token in eog}
        return body

    def limits(self, base_url, argv=(), log_text=""):
        logged = N_CTX_LOG.findall(log_text)
        if logged:
            context = int(logged[-1])
        else:
            given = flag_value(list(argv), "--n_ctx")
            context = int(given) if given and given.isdigit() and int(given) > 0 else None
        return ServerLimits(context_length=context, kv_capacity_tokens=None)

    def version(self, base_url):
        return str(get_json(base_url + "/openapi.json").get("info", {}).get("version", ""))

    def server_info(self, base_url, log_text=""):
        models = get_json(base_url + "/v1/models").get("data") or []
        return {
            "models": [m.get("id") for m in models if isinstance(m, dict)],
            "eog_token_ids": sorted({int(t) for t in EOG_LOG.findall(log_text)}),
        }

    def check_counts(self, base_url, model, prompt, max_tokens, extra_body):
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": False, **extra_body}
        response = requests.post(base_url + "/v1/completions", json=body, timeout=CHECK_TIMEOUT_S)
        response.raise_for_status()
        usage = response.json().get("usage") or {}
        return usage.get("prompt_tokens"), usage.get("completion_tokens")

    def relabel_failures(self, results, log_text):
        """A streamed context refusal looks like a dropped connection from the client's
        side (HTTP 200, then the stream ends empty); the log says what it was."""
        refusals = OVERFLOW_LOG.findall(log_text)
        if not refusals:
            return
        empty_drops = [r for r in results if r.error_kind == "connection_lost_mid_stream" and not r.chunk_offsets]
        for i, r in enumerate(empty_drops):
            r.error_kind = "context_overflow"
            r.error = f"HTTP 200 stream ended empty; the server log says: {refusals[min(i, len(refusals) - 1)]}"

    def server_reported(self, log_text, method):
        sums = parse_perf(log_text)
        if not sums["completions"]:
            return {}
        figures = {"server_reported": {"source": "llama_perf_context_print", **sums}}
        # Only autoregressive decoding is all single-token eval steps.
        if method == AUTOREGRESSIVE and sums["eval_ms"] > 0:
            figures["server_decode_tok_s"] = sums["eval_runs"] / sums["eval_ms"] * 1000.0
        return figures
