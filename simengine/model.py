"""The performance model: pure functions of (profile, configuration, load).

Every delay the simulated server sleeps comes from these functions (multiplied by
``--time-scale``).  They are documented in simengine/README.md ("Performance model") and
their parameters live in the profile JSON, so tests can compute calibration figures
without waiting.

Conventions
-----------
* ``method`` is ``None``/``"none"`` (autoregressive), ``"DFLASH"`` or ``"DDTREE"``.
* ``params`` holds the speculative flags: ``block_size`` (--speculative-dflash-block-size),
  ``num_draft_tokens`` (--speculative-num-draft-tokens), ``budget``
  (--speculative-ddtree-budget), ``topk_cap`` (--speculative-ddtree-topk-cap).
* ``context_tokens`` is the mean context (prompt + generated so far) of one running request;
  ``batch`` is the number of running requests sharing each forward step.
* Times are seconds of modelled GPU time.

The load model (section "Load model" of the README) builds on these: the scheduler's
admission rules (``effective_max_running_requests``, ``kv_reserved_tokens``) are defined
here once, for the server and for ``closed_loop_steady_state``, which predicts what a
closed-loop client measures from the same step and prefill functions the server sleeps on;
``max_concurrency_within`` turns that into the simulator's known capacity under an SLO.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any, Dict, Mapping, Optional

GIB = 1024 ** 3
PROFILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles")
DEFAULT_PROFILE = "rtxpro6000-sm120"

DEFAULT_SPEC_PARAMS = {"block_size": 16, "num_draft_tokens": 16, "budget": 15, "topk_cap": 8}


# --------------------------------------------------------------------------- profiles


def load_profile(name_or_path: str = DEFAULT_PROFILE) -> Dict[str, Any]:
    """Load a profile by name (``simengine/profiles/NAME.json``) or by file path."""
    path = name_or_path
    if not os.path.isfile(path):
        candidate = os.path.join(PROFILE_DIR, f"{name_or_path}.json")
        if not os.path.isfile(candidate):
            raise FileNotFoundError(
                f"simengine profile {name_or_path!r} not found (looked for a file and for {candidate})"
            )
        path = candidate
    with open(path, "r", encoding="utf-8") as f:
        return json.load(f)


def available_profiles():
    return sorted(p[:-5] for p in os.listdir(PROFILE_DIR) if p.endswith(".json"))


def norm_method(method: Optional[str]) -> str:
    if method is None:
        return "none"
    m = str(method).upper()
    if m in ("", "NONE", "AR", "AUTOREGRESSIVE"):
        return "none"
    return m


def spec_params(params: Optional[Mapping[str, Any]] = None) -> Dict[str, int]:
    out = dict(DEFAULT_SPEC_PARAMS)
    for k, v in (params or {}).items():
        if v is not None and k in out:
            out[k] = int(v)
    return out


# --------------------------------------------------------------------------- memory


def kv_bytes_per_token(profile: Mapping[str, Any], kv_cache_dtype: str = "auto") -> float:
    """KV-cache bytes one token occupies across all TP ranks together."""
    b = float(profile["model"]["kv_bytes_per_token"])
    if kv_cache_dtype and str(kv_cache_dtype).startswith("fp8"):
        b /= 2.0
    return b


def kv_capacity_tokens(
    profile: Mapping[str, Any],
    tp: int,
    mem_fraction_static: float = 0.85,
    speculative: bool = False,
    kv_cache_dtype: str = "auto",
) -> int:
    """``max_total_num_tokens``: how many tokens of KV cache the server allocates.

    Mirrors SGLang's ModelRunner.profile_max_num_token: per GPU,
    ``rest = gpu_mem * mem_fraction_static - weights/tp - runtime_overhead [- draft/tp]``
    and ``tokens = rest / (kv_bytes_per_token / tp)``, rounded down to the page size.
    Returns <= 0 when nothing is left (the server then fails with SGLang's
    "Not enough memory. Please try to increase --mem-fraction-static.").
    """
    gpu = float(profile["gpu"]["memory_gib"]) * GIB
    mem = profile["memory"]
    weights = float(profile["model"]["weights_gib"]) * GIB / tp
    overhead = float(mem.get("runtime_overhead_gib", 1.0)) * GIB
    draft = float(mem.get("draft_weights_gib", 0.0)) * GIB / tp if speculative else 0.0
    rest = gpu * float(mem_fraction_static) - weights - overhead - draft
    per_token = kv_bytes_per_token(profile, kv_cache_dtype) / tp
    tokens = int(rest // per_token)
    page = int(mem.get("page_size", 1))
    return (tokens // page) * page


def max_req_input_len(context_length: int, max_total_num_tokens: int) -> int:
    """SGLang's scheduler limit: min(context_len - 1, max_total_num_tokens - 1) - 5."""
    return min(context_length - 1, max_total_num_tokens - 1) - 5


# --------------------------------------------------------------------------- admission

# SGLang's ServerArgs resets an unset --max-running-requests to this for speculative decoding
# ("Max running requests is reset to 48 for speculative decoding. ...").
SPECULATIVE_MAX_RUNNING_REQUESTS = 48
# SGLang clips a request's max_new_tokens at this when it estimates the KV room it needs
# (CLIP_MAX_NEW_TOKENS, env SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION).
KV_RESERVE_CLIP_TOKENS = 4096


def req_to_token_pool_size(max_total_num_tokens: int, context_length: int) -> int:
    """SGLang's ModelRunner ``max_num_reqs``: ``min(max(int(max_total / context_len * 512), 2048), 4096)``."""
    return min(max(int(max_total_num_tokens / context_length * 512), 2048), 4096)


def effective_max_running_requests(requested: Optional[int], max_total_num_tokens: int, context_length: int) -> int:
    """The scheduler's cap on running requests, as SGLang's Scheduler computes it:
    ``min(--max-running-requests or max_total_num_tokens // 2, req_to_token_pool size)``.

    ``requested`` is the server argument after ServerArgs' defaults, i.e. already
    :data:`SPECULATIVE_MAX_RUNNING_REQUESTS` when speculation left it unset; without
    speculation an unset cap is in practice the request pool (2048), so the KV cache binds.
    """
    server_limit = int(requested) if requested else max_total_num_tokens // 2
    return max(1, min(server_limit, req_to_token_pool_size(max_total_num_tokens, context_length)))


def kv_reserved_tokens(input_len: int, generated: int, target_len: int) -> int:
    """KV tokens the scheduler holds for a request: its context so far plus what it may
    still generate (clipped at :data:`KV_RESERVE_CLIP_TOKENS`).  A request is admitted only
    when the running requests' reservations and its own fit in ``max_total_num_tokens``; a
    running request is never preempted (simengine does not retract)."""
    return input_len + generated + min(max(0, target_len - generated), KV_RESERVE_CLIP_TOKENS)


# --------------------------------------------------------------------------- start-up


def weight_load_seconds(profile: Mapping[str, Any], tp: int) -> float:
    """Reading the checkpoint: every rank loads its 1/tp shard in parallel."""
    st = profile["startup"]
    return float(profile["model"]["weights_gib"]) / (tp * float(st["load_gib_per_s"])) + float(
        st.get("load_fixed_s", 0.0)
    )


def startup_phases(profile: Mapping[str, Any], tp: int, speculative: bool = False) -> Dict[str, float]:
    st = profile["startup"]
    phases = {
        "init": float(st.get("init_s", 0.0)) + float(st.get("init_s_per_rank", 0.0)) * (tp - 1),
        "load_weights": weight_load_seconds(profile, tp),
        "load_draft": float(st.get("draft_load_s", 0.0)) if speculative else 0.0,
        "cuda_graph": float(st.get("cuda_graph_capture_s", 0.0))
        + (float(st.get("spec_cuda_graph_capture_s", 0.0)) if speculative else 0.0),
    }
    return phases


def startup_seconds(profile: Mapping[str, Any], tp: int, speculative: bool = False) -> float:
    return sum(startup_phases(profile, tp, speculative).values())


# --------------------------------------------------------------------------- prefill


def prefill_seconds(profile: Mapping[str, Any], tp: int, prompt_tokens: int) -> float:
    """Time to prefill ``prompt_tokens`` (TTFT without queueing).

    ``fixed_ms + tokens / (tok_s_tp1 * tp**tp_efficiency) + attn_ms_per_ktok2 * (tokens/1000)**2 / tp``
    """
    p = profile["prefill"]
    rate = float(p["tok_s_tp1"]) * (tp ** float(p["tp_efficiency"]))
    k = prompt_tokens / 1000.0
    ms = float(p["fixed_ms"]) + 1000.0 * prompt_tokens / rate + float(p["attn_ms_per_ktok2"]) * k * k / tp
    return ms / 1000.0


# --------------------------------------------------------------------------- decode


def _tp_scale(tp: int, exponent: float) -> float:
    return float(tp) ** float(exponent)


def forward_ms(profile: Mapping[str, Any], tp: int, context_tokens: float, batch: int, tokens_per_seq: int = 1) -> float:
    """One target-model forward (ms) over ``batch`` sequences of ``tokens_per_seq`` new tokens each.

    ``base_ms_tp1 / tp**tp_exponent + allreduce_ms * log2(tp)
      + ms_per_kctx * batch * context/1000 / tp + ms_per_seq * batch / tp**tp_exponent
      + verify_ms_per_token * batch * (tokens_per_seq - 1) / tp**tp_exponent``
    """
    d = profile["decode"]
    s = _tp_scale(tp, d["tp_exponent"])
    ms = float(d["base_ms_tp1"]) / s
    ms += float(d["allreduce_ms_per_doubling"]) * math.log2(tp) if tp > 1 else 0.0
    ms += float(d["ms_per_kctx"]) * batch * (context_tokens / 1000.0) / tp
    ms += float(d["ms_per_seq"]) * batch / s
    if tokens_per_seq > 1:
        ms += float(profile["speculative"]["verify_ms_per_token"]) * batch * (tokens_per_seq - 1) / s
    return ms


def draft_ms(profile: Mapping[str, Any], method: str, tp: int, batch: int) -> float:
    sp = profile["speculative"]
    cfg = sp[method.lower()]
    s = _tp_scale(tp, profile["decode"]["tp_exponent"])
    return float(cfg["draft_ms_tp1"]) / s + float(cfg.get("draft_ms_per_seq", 0.0)) * (batch - 1) / s


def verify_tokens_per_seq(method: str, params: Mapping[str, Any]) -> int:
    """How many tokens per sequence the target model verifies in one step."""
    method = norm_method(method)
    p = spec_params(params)
    if method == "DFLASH":
        return min(p["block_size"], p["num_draft_tokens"])
    if method == "DDTREE":
        return p["budget"] + 1
    return 1


def step_seconds(
    profile: Mapping[str, Any],
    method: Optional[str],
    params: Optional[Mapping[str, Any]],
    tp: int,
    context_tokens: float,
    batch: int,
) -> float:
    """Duration of one decode step (autoregressive) or one draft+verify step (speculative)."""
    method = norm_method(method)
    batch = max(1, int(batch))
    if method == "none":
        return forward_ms(profile, tp, context_tokens, batch) / 1000.0
    p = spec_params(params)
    n_verify = verify_tokens_per_seq(method, p)
    ms = draft_ms(profile, method, tp, batch) + forward_ms(profile, tp, context_tokens, batch, n_verify)
    if method == "DDTREE":
        ms += float(profile["speculative"]["ddtree"]["tree_ms_per_node"]) * p["budget"] * batch / _tp_scale(
            tp, profile["decode"]["tp_exponent"]
        )
    return ms / 1000.0


# --------------------------------------------------------------------------- acceptance

_CODE_WORDS = re.compile(
    r"\b(python|javascript|typescript|java|rust|golang|kotlin|swift|haskell|c\+\+|cpp|sql|bash|"
    r"regex|code|coding|function|functions|method|class|implement|implementation|program|script|"
    r"algorithm|fibonacci|recursive|recursion|compile|debug|refactor|def|return|import|lambda|"
    r"struct|const|var|let|int|void|printf|println)\b",
    re.IGNORECASE,
)
_CODE_SYMBOLS = set("{}()[];=<>")


def detect_workload(text: str) -> str:
    """Classify a prompt as ``"code"`` or ``"prose"`` (documented rule).

    ``code`` when the text contains a fenced block (```), or at least 2 distinct
    programming words (python, function, fibonacci, def, return, class, ...), or at least
    3 % of its non-space characters are code symbols ``{}()[];=<>``.  Otherwise ``prose``.
    """
    if not text:
        return "prose"
    if "```" in text:
        return "code"
    words = {w.lower() for w in _CODE_WORDS.findall(text)}
    if len(words) >= 2:
        return "code"
    chars = [c for c in text if not c.isspace()]
    if chars and sum(1 for c in chars if c in _CODE_SYMBOLS) / len(chars) >= 0.03:
        return "code"
    return "prose"


def _workload_cfg(profile: Mapping[str, Any], workload: str) -> Mapping[str, Any]:
    acc = profile["speculative"]["acceptance"]
    return acc.get(workload) or acc["prose"]


def acceptance(profile: Mapping[str, Any], method: Optional[str], params: Optional[Mapping[str, Any]], workload: str):
    """(alpha, depth): per-position draft acceptance probability and max accepted drafts per step.

    * DFLASH: ``alpha = alpha_w``, ``depth = min(block_size, num_draft_tokens) - 1``.
    * DDTREE: the tree spends its budget on alternatives, which rescue some misses:
      ``alpha = 1 - (1 - alpha_w) * (1 - alt_hit_w) ** width`` with
      ``width = min(ln(1 + budget / width_scale), ln(topk_cap))``; ``depth = min(block_size - 1, budget)``.
    """
    method = norm_method(method)
    p = spec_params(params)
    w = _workload_cfg(profile, workload)
    a = float(w["alpha"])
    if method == "DFLASH":
        return a, max(0, min(p["block_size"], p["num_draft_tokens"]) - 1)
    if method == "DDTREE":
        cfg = profile["speculative"]["ddtree"]
        width = min(math.log(1.0 + p["budget"] / float(cfg["width_scale"])), math.log(max(1, p["topk_cap"])))
        a_eff = 1.0 - (1.0 - a) * (1.0 - float(w["alt_hit"])) ** max(0.0, width)
        return a_eff, max(0, min(p["block_size"] - 1, p["budget"]))
    return 0.0, 0


def expected_accept_length(
    profile: Mapping[str, Any], method: Optional[str], params: Optional[Mapping[str, Any]], workload: str
) -> float:
    """Mean tokens committed per verify step, bonus token included: ``1 + sum_{k=1..depth} alpha**k``."""
    if norm_method(method) == "none":
        return 1.0
    a, depth = acceptance(profile, method, params, workload)
    return 1.0 + sum(a ** k for k in range(1, depth + 1))


def sample_accepted_drafts(rng, alpha: float, depth: int) -> int:
    """Draw accepted drafts for one step: count leading successes (prob alpha each), at most depth."""
    n = 0
    while n < depth and rng.random() < alpha:
        n += 1
    return n


def expected_decode_tok_s(
    profile: Mapping[str, Any],
    method: Optional[str],
    params: Optional[Mapping[str, Any]],
    tp: int,
    context_tokens: float,
    batch: int = 1,
    workload: str = "prose",
) -> float:
    """Decode rate one request sees (tokens/s) with ``batch`` requests sharing the steps."""
    return expected_accept_length(profile, method, params, workload) / step_seconds(
        profile, method, params, tp, context_tokens, batch
    )


def expected_gen_throughput(
    profile: Mapping[str, Any],
    method: Optional[str],
    params: Optional[Mapping[str, Any]],
    tp: int,
    context_tokens: float,
    batch: int = 1,
    workload: str = "prose",
) -> float:
    """Aggregate generation throughput (tokens/s) of the whole batch."""
    return batch * expected_decode_tok_s(profile, method, params, tp, context_tokens, batch, workload)


def expected_request_seconds(
    profile: Mapping[str, Any],
    method: Optional[str],
    params: Optional[Mapping[str, Any]],
    tp: int,
    prompt_tokens: int,
    max_new_tokens: int,
    workload: str = "prose",
) -> float:
    """Modelled end-to-end time of one request running alone: prefill (first token) + decode."""
    t = prefill_seconds(profile, tp, prompt_tokens)
    remaining = max(0, max_new_tokens - 1)
    if remaining:
        ctx = prompt_tokens + max_new_tokens / 2.0
        t += remaining / expected_decode_tok_s(profile, method, params, tp, ctx, 1, workload)
    return t


# --------------------------------------------------------------------------- load model


def expected_decode_steps(
    profile: Mapping[str, Any], method: Optional[str], params: Optional[Mapping[str, Any]], workload: str, tokens: int
) -> float:
    """Mean decode (or draft+verify) steps one request needs to commit ``tokens`` tokens.

    Autoregressive: ``tokens``.  Speculative: a step commits ``1 + X`` tokens, X drawn as
    :func:`sample_accepted_drafts` draws it, and the last step is cut at what remains, so
    ``E[steps(r)] = 1 + sum_x P(X = x) * E[steps(r - 1 - x)]`` with ``E[steps(r <= 0)] = 0``
    (a little above ``tokens / expected_accept_length``).
    """
    if tokens <= 0:
        return 0.0
    if norm_method(method) == "none":
        return float(tokens)
    alpha, depth = acceptance(profile, method, params, workload)
    probs = [alpha ** x * (1.0 - alpha) for x in range(depth)] + [alpha ** depth]
    steps = [0.0] * (tokens + 1)
    for r in range(1, tokens + 1):
        steps[r] = 1.0 + sum(p * steps[max(0, r - 1 - x)] for x, p in enumerate(probs))
    return steps[tokens]


class _ClosedLoop:
    """One server configuration and request shape; :meth:`at` gives the steady state at a
    concurrency.  The figures that do not depend on the concurrency are computed once."""

    def __init__(self, profile, method, params, tp, prompt_tokens, output_tokens, workload, max_running_requests,
                 mem_fraction_static, context_length, kv_cache_dtype, chunked_prefill_size):
        if prompt_tokens < 1 or output_tokens < 2:
            raise ValueError("the load model needs prompt_tokens >= 1 and output_tokens >= 2 (TPOT needs two tokens)")
        self.profile, self.method, self.params, self.tp = profile, norm_method(method), params, tp
        self.prompt_tokens, self.output_tokens = int(prompt_tokens), int(output_tokens)
        speculative = self.method != "none"
        kv_tokens = kv_capacity_tokens(profile, tp, mem_fraction_static, speculative, kv_cache_dtype)
        if kv_tokens <= 0:
            raise ValueError("this configuration does not start: no memory is left for the KV cache")
        context_length = int(context_length or profile["model"]["max_position_embeddings"])
        if max_running_requests is None and speculative:
            max_running_requests = SPECULATIVE_MAX_RUNNING_REQUESTS
        self.max_running_requests = effective_max_running_requests(max_running_requests, kv_tokens, context_length)
        self.kv_slots = max(1, kv_tokens // kv_reserved_tokens(self.prompt_tokens, 0, self.output_tokens))
        self.batch_limit = min(self.max_running_requests, self.kv_slots)
        self.batch_limited_by = "max_running_requests" if self.max_running_requests <= self.kv_slots else "kv_cache"
        # Autoregressive requests of one length admitted together also finish together, so a
        # closed loop moves in waves; speculative requests need a random number of steps and
        # finish (and come back) spread over the steps.
        self.regime = "mixed" if speculative else "lockstep"
        self.decode_tokens = self.output_tokens - 1  # the first token comes from the prefill
        self.decode_steps = expected_decode_steps(profile, method, params, workload, self.decode_tokens)
        self.accept_length = expected_accept_length(profile, method, params, workload)
        self.context = self.prompt_tokens + self.output_tokens / 2.0  # a request's mean context while decoding
        self.prefill_fixed_s = prefill_seconds(profile, tp, 0)
        self.prefill_per_prompt_s = prefill_seconds(profile, tp, self.prompt_tokens) - self.prefill_fixed_s
        self.chunk = int(chunked_prefill_size or profile["startup"].get("chunked_prefill_size", 8192))

    def prefill_forwards(self, prompts: float) -> int:
        """Forwards that prefill ``prompts`` waiting prompts: one per chunk of the batch."""
        return max(1, math.ceil(prompts * self.prompt_tokens / self.chunk))

    def prefill_forwards_s(self, prompts: float) -> float:
        """Prefill of ``prompts`` waiting prompts: one forward per chunk of the batch, each paying the fixed cost."""
        return self.prefill_forwards(prompts) * self.prefill_fixed_s + prompts * self.prefill_per_prompt_s

    def step_at(self, batch: float) -> float:
        """A step's duration at a mean batch (fractional: the step is linear in the batch)."""
        batch = max(1.0, float(batch))
        lo = math.floor(batch)
        s_lo = step_seconds(self.profile, self.method, self.params, self.tp, self.context, lo)
        if batch == lo:
            return s_lo
        s_hi = step_seconds(self.profile, self.method, self.params, self.tp, self.context, lo + 1)
        return s_lo + (batch - lo) * (s_hi - s_lo)

    def _gaps(self, running: float):
        """After a step with ``running`` requests, each finishing with probability h = 1/S: the
        expected prompts ``a``, the probability ``p`` that any finished, the expected prefill
        time ``g`` before the next step (``p`` forwards of ``f`` and ``a`` prompts of ``m``)."""
        h = 1.0 / self.decode_steps
        a = running * h
        p_any = 1.0 - (1.0 - h) ** running
        return a, p_any, p_any * self.prefill_fixed_s + a * self.prefill_per_prompt_s

    def _mixed_unqueued(self, c: int) -> dict[str, float]:
        """Speculative loop without a queue, seen by one request: the fixed point of the share of
        time a client is running (the rest it waits for its first token, out of the batch), and
        the TTFT, a mixture of a request prefilled right after its predecessor's step (case A)
        and one that waits for the next step (case B)."""
        S, f, m = self.decode_steps, self.prefill_fixed_s, self.prefill_per_prompt_s
        h = 1.0 / S
        share, ttft_mean = 1.0, 0.0
        for _ in range(200):
            others = (c - 1) * share  # the other clients running beside this one (on average)
            a, p_any, g = self._gaps(others)
            pi = p_any / (1.0 + p_any)  # P(a step is followed by a prefill of the step before's arrivals)
            decode_s = S * self.step_at(1.0 + others) + (S - pi) * g
            p_alone = (1.0 - share) ** (c - 1)
            others_step = self.step_at(others / (1.0 - p_alone)) if p_alone < 1.0 else 0.0
            before = a / p_any if p_any > 0 else 1.0  # prompts prefilled in a forward of their own
            own = 1.0 + others * h  # the prompts prefilled with this one, itself included
            case_a = 2.0 * f + before * m + own * m
            case_b = (1.0 - p_alone) * others_step + f + own * m
            new_ttft = pi * case_a + (1.0 - pi) * case_b
            new_share = decode_s / (decode_s + new_ttft)
            done = abs(new_share - share) < 1e-12 and abs(new_ttft - ttft_mean) < 1e-12
            share, ttft_mean = new_share, new_ttft
            if done:
                break
        # The median TTFT: the prompts prefilled with it (and, in case A, before it) are Poisson.
        dist = []
        for n_own, w_own in _poisson(others * h):
            own_s = (1 + n_own) * m
            for n_before, w_before in _poisson(a, positive=True):
                dist.append((2.0 * f + n_before * m + own_s, pi * w_own * w_before))
            dist.append((others_step + f + own_s, (1.0 - pi) * (1.0 - p_alone) * w_own))
            dist.append((f + own_s, (1.0 - pi) * p_alone * w_own))
        return {"running": c * share, "batch_seen": 1.0 + others, "decode_s": decode_s, "interference": g,
                "ttft_mean": ttft_mean, "ttft": _median(dist), "case_a": pi}

    def at(self, concurrency: int) -> Dict[str, Any]:
        c = int(concurrency)
        if c < 1:
            raise ValueError("concurrency must be >= 1")
        b = min(c, self.batch_limit)
        queued = c - b
        step = step_seconds(self.profile, self.method, self.params, self.tp, self.context, b)
        running = float(b)
        case_a = 0.0
        if self.regime == "lockstep":
            # A wave: prefilled (its TTFT), then decoded with no foreign prefill in between.  The
            # server starts a prefill forward as soon as anyone waits: for the first client back (or
            # the queued ones), while the rest of the wave's clients arrive during it and are
            # prefilled together in a second forward, after which the wave decodes.
            interference = 0.0
            decode_s = self.decode_steps * step
            # (A queue of b or more fills a wave in one forward: the model keeps two, one fixed cost more.)
            if b == 1:
                first_s = wave_prefill_s = self.prefill_forwards_s(b)
            else:
                first = min(max(1, queued), b - 1)
                first_s = self.prefill_forwards_s(first)
                forwards = self.prefill_forwards(first) + self.prefill_forwards(b - first)
                wave_prefill_s = forwards * self.prefill_fixed_s + b * self.prefill_per_prompt_s
            wave_s = wave_prefill_s + decode_s
            waves_waited = queued / b  # a queued client waits for later waves (FIFO)
            if queued:
                ttft_mean = wave_prefill_s + waves_waited * wave_s
                ttft = wave_prefill_s + math.floor(waves_waited + 0.5) * wave_s  # median: most wait the same count
            else:
                ttft_mean = (first_s + (b - 1) * wave_prefill_s) / b
                ttft = wave_prefill_s if b > 2 else ttft_mean  # all but the first wait for the second forward
            request_rate = b / wave_s
        elif c == 1:
            # A lone request: prefilled at once, decoded alone.
            interference = 0.0
            decode_s = self.decode_steps * step
            ttft = ttft_mean = prefill_seconds(self.profile, self.tp, self.prompt_tokens)
            request_rate = 1.0 / (ttft + decode_s)
        else:
            # Requests finish spread over the steps; a finished request's client sends the next one
            # while the server runs on: the prefills of returning clients delay the running batch.
            free = self._mixed_unqueued(c) if not queued else None
            if free is not None:
                running, decode_s, interference = free["running"], free["decode_s"], free["interference"]
                ttft, ttft_mean, case_a = free["ttft"], free["ttft_mean"], free["case_a"]
                step = self.step_at(free["batch_seen"])
                request_rate = c / (ttft_mean + decode_s)
            else:
                # A queue: every slot freed by a step is refilled from the queue's head in one
                # forward right after it, so the batch stays full and a request sees S - 1 gaps.
                _, _, interference = self._gaps(b - 1)
                decode_s = self.decode_steps * step + (self.decode_steps - 1.0) * interference
                admit_s = self.prefill_fixed_s + (1.0 + (b - 1) / self.decode_steps) * self.prefill_per_prompt_s
                request_rate = b / (decode_s + admit_s)
                ttft = ttft_mean = max(admit_s + step, c / request_rate - decode_s)  # Little's law
        tpot = decode_s / self.decode_tokens
        return {
            "concurrency": c,
            "batch": b,
            "queued": queued,
            "running_batch": running,
            "batch_limit": self.batch_limit,
            "batch_limited_by": self.batch_limited_by,
            "max_running_requests": self.max_running_requests,
            "kv_slots": self.kv_slots,
            "regime": self.regime,
            "accept_length": self.accept_length,
            "decode_steps": self.decode_steps,
            "step_s": step,
            "prefill_interference_s": interference,
            "prefilled_at_once": case_a,
            "tpot_s": tpot,
            "ttft_s": ttft,
            "ttft_mean_s": ttft_mean,
            "e2el_s": ttft + decode_s,
            "request_throughput": request_rate,
            "output_tok_s": request_rate * self.output_tokens,
        }


def _poisson(mean: float, positive: bool = False):
    """``(k, P(K = k))`` of a Poisson count (conditioned on K > 0 with ``positive``), tail cut."""
    out, pk = [], math.exp(-mean)
    for k in range(int(mean + 10.0 * math.sqrt(mean) + 12) + 1):
        if k:
            pk *= mean / k
        if k or not positive:
            out.append((k, pk))
    total = sum(w for _, w in out)
    return [(k, w / total) for k, w in out]


def _median(dist):
    """The median of a discrete distribution given as ``(value, weight)`` pairs summing to 1."""
    acc = 0.0
    for value, weight in sorted(dist):
        acc += weight
        if acc >= 0.5:
            return value
    return max(v for v, _ in dist)


def closed_loop_steady_state(
    profile: Mapping[str, Any],
    method: Optional[str],
    params: Optional[Mapping[str, Any]],
    tp: int,
    prompt_tokens: int,
    output_tokens: int,
    concurrency: int,
    workload: str = "prose",
    max_running_requests: Optional[int] = None,
    *,
    mem_fraction_static: float = 0.85,
    context_length: Optional[int] = None,
    kv_cache_dtype: str = "auto",
    chunked_prefill_size: Optional[int] = None,
) -> Dict[str, Any]:
    """What a closed loop measures in steady state (modelled seconds), and why.

    ``concurrency`` clients each send their next request when the previous one ends; every
    request has ``prompt_tokens`` and generates exactly ``output_tokens`` (ignore-eos).  The
    server flags are the keyword arguments (``max_running_requests=None``: the server's
    default for the method).  The batch is ``min(concurrency, batch_limit)`` with
    ``batch_limit = min(max_running_requests, kv_slots)``; the rest queue.  Keys:
    ``tpot_s`` (median TPOT), ``ttft_s`` (median TTFT), ``ttft_mean_s``, ``e2el_s``
    (median), ``output_tok_s`` and ``request_throughput`` (aggregate), and the terms they
    are built from (``batch``, ``queued``, ``running_batch``, ``regime``, ``step_s``,
    ``decode_steps``, ``prefill_interference_s``, ``prefilled_at_once``, ...).  The formulas
    are in the README ("Load model"): a speculative loop is followed through what the
    scheduler does after each step (prefill forwards for whoever waits, then the next step),
    with the clients waiting for a first token out of the batch.
    """
    return _ClosedLoop(profile, method, params, tp, prompt_tokens, output_tokens, workload, max_running_requests,
                       mem_fraction_static, context_length, kv_cache_dtype, chunked_prefill_size).at(concurrency)


def max_concurrency_within(
    profile: Mapping[str, Any],
    method: Optional[str],
    params: Optional[Mapping[str, Any]],
    tp: int,
    prompt_tokens: int,
    output_tokens: int,
    workload: str = "prose",
    max_running_requests: Optional[int] = None,
    *,
    tpot_limit_s: float,
    ttft_limit_s: Optional[float] = None,
    max_concurrency: int = 1024,
    mem_fraction_static: float = 0.85,
    context_length: Optional[int] = None,
    kv_cache_dtype: str = "auto",
    chunked_prefill_size: Optional[int] = None,
) -> int:
    """The simulator's known capacity for a concurrency search with median limits.

    The largest concurrency c (1..``max_concurrency``) such that the steady-state median
    TPOT, and median TTFT when ``ttft_limit_s`` is given, are within the limits at every
    concurrency up to c; 0 when even one client misses them.  Once the batch is full, TPOT
    stops growing and only TTFT does (the queue): without a TTFT limit a configuration
    whose full batch meets the TPOT limit returns ``max_concurrency`` (the search's upper end).
    """
    loop = _ClosedLoop(profile, method, params, tp, prompt_tokens, output_tokens, workload, max_running_requests,
                       mem_fraction_static, context_length, kv_cache_dtype, chunked_prefill_size)
    for c in range(1, int(max_concurrency) + 1):
        s = loop.at(c)
        if s["tpot_s"] > tpot_limit_s or (ttft_limit_s is not None and s["ttft_s"] > ttft_limit_s):
            return c - 1
    return int(max_concurrency)
