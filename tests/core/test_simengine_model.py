"""Unit tests of simengine's tokenizer and performance model (no processes, no waiting)."""

import itertools
import random

import pytest

from simengine import model as M
from simengine.faults import build_faults
from simengine.tokenizer import (
    CHAT_TOKENS_GENERATION_PROMPT,
    CHAT_TOKENS_PER_MESSAGE,
    SimTokenizer,
    render_chat,
    split_pieces,
)
from sweepcore.prompts import FIBONACCI_PROMPT

FIB_PROMPT = "Write a Python function that returns the n-th Fibonacci number."
PROSE_PROMPT = "Tell me about the history of Paris and the people who have lived there over the centuries."


@pytest.fixture(scope="module")
def rtx():
    return M.load_profile("rtxpro6000-sm120")


@pytest.fixture(scope="module")
def h200():
    return M.load_profile("h200")


# --------------------------------------------------------------------------- tokenizer


def test_tokenizer_is_deterministic_and_ids_are_stable():
    a, b = SimTokenizer(), SimTokenizer()
    text = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    assert a.encode(text) == b.encode(text)
    assert a.encode(text) == a.encode(text)
    assert all(0 <= i < 151936 for i in a.encode(text))
    assert a.decode(a.encode(text)) == text


def test_tokenizer_known_counts():
    t = SimTokenizer()
    assert t.count("Hello world") == 2
    assert t.count("hello" + " a" * 99) == 100  # how tests size prompts exactly
    assert t.count("12345") == 5  # one token per digit
    assert t.count("implementation") == 3  # 6 + 4 + 4 letters
    assert t.count("getValue") == 2  # camel case splits
    assert t.count("    return x") == 3  # indentation, ' return', ' x'
    assert t.count("") == 0
    assert split_pieces("Hi, there!") == ["Hi", ",", " there", "!"]


def test_tokenizer_is_not_chars_over_4_nor_word_count():
    t = SimTokenizer()
    samples = [FIB_PROMPT, PROSE_PROMPT, "x = [i ** 2 for i in range(10)]", "antidisestablishmentarianism"]
    counts = [t.count(s) for s in samples]
    assert counts != [len(s) // 4 for s in samples]
    assert counts != [len(s.split()) for s in samples]
    assert t.count("antidisestablishmentarianism") > 1
    assert t.count("x = [i ** 2 for i in range(10)]") > len("x = [i ** 2 for i in range(10)]".split())


def test_chat_template_adds_documented_tokens():
    t = SimTokenizer()
    msgs = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": FIB_PROMPT}]
    content = sum(t.count(m["content"]) for m in msgs)
    n = t.count(render_chat(msgs))
    assert n == content + CHAT_TOKENS_PER_MESSAGE * len(msgs) + CHAT_TOKENS_GENERATION_PROMPT


def test_workload_detection():
    assert M.detect_workload(FIB_PROMPT) == "code"
    assert M.detect_workload("```\nprint(1)\n```") == "code"
    assert M.detect_workload("for (int i = 0; i < n; i++) { s += a[i]; }") == "code"
    assert M.detect_workload(PROSE_PROMPT) == "prose"
    assert M.detect_workload("The capital city of France is") == "prose"
    assert M.detect_workload("") == "prose"


# --------------------------------------------------------------------------- calibration


def _fib_context():
    t = SimTokenizer()
    prompt = t.count(render_chat([{"role": "user", "content": FIB_PROMPT}]))
    return prompt + 128  # mean context over a 256-token answer


def test_calibration_autoregressive_tp1(rtx):
    tok_s = M.expected_decode_tok_s(rtx, None, None, 1, _fib_context(), 1, "code")
    assert 26 * 0.9 <= tok_s <= 26 * 1.1, tok_s


def test_calibration_ddtree_budget15_fibonacci_tp1(rtx):
    params = {"budget": 15, "topk_cap": 8, "block_size": 16, "num_draft_tokens": 16}
    tok_s = M.expected_decode_tok_s(rtx, "DDTREE", params, 1, _fib_context(), 1, M.detect_workload(FIB_PROMPT))
    assert 143 * 0.9 <= tok_s <= 143 * 1.1, tok_s


def test_kv_capacity_tp1_too_small_for_30k_prompt_tp4_tp8_ample(rtx):
    need = 30000 + 256
    tp1, tp4, tp8 = (M.kv_capacity_tokens(rtx, tp, 0.85) for tp in (1, 4, 8))
    assert tp1 < need
    assert tp4 > 3 * need
    assert tp8 > tp4
    assert M.max_req_input_len(32768, tp1) < 30000 < M.max_req_input_len(32768, tp4)


def test_kv_capacity_monotonic(rtx):
    assert M.kv_capacity_tokens(rtx, 1, 0.90) > M.kv_capacity_tokens(rtx, 1, 0.85) > M.kv_capacity_tokens(rtx, 1, 0.80)
    assert M.kv_capacity_tokens(rtx, 1, 0.85, speculative=True) < M.kv_capacity_tokens(rtx, 1, 0.85)
    assert M.kv_capacity_tokens(rtx, 1, 0.85, kv_cache_dtype="fp8_e4m3") > M.kv_capacity_tokens(rtx, 1, 0.85)
    assert M.kv_capacity_tokens(rtx, 1, 0.5) <= 0  # 52 GB of weights do not fit in half a card


# --------------------------------------------------------------------------- monotonicity


def test_prefill_grows_with_prompt_and_shrinks_with_tp(rtx):
    ttft = [M.prefill_seconds(rtx, 1, n) for n in (100, 1000, 10000, 30000)]
    assert ttft == sorted(ttft) and len(set(ttft)) == 4
    assert M.prefill_seconds(rtx, 4, 30000) < M.prefill_seconds(rtx, 1, 30000)
    assert M.prefill_seconds(rtx, 8, 30000) < M.prefill_seconds(rtx, 4, 30000)


def test_decode_step_grows_with_context_and_batch(rtx):
    steps = [M.step_seconds(rtx, None, None, 1, ctx, 1) for ctx in (100, 4000, 16000, 32000)]
    assert steps == sorted(steps) and len(set(steps)) == 4
    by_batch = [M.step_seconds(rtx, None, None, 1, 1000, b) for b in (1, 2, 8, 32)]
    assert by_batch == sorted(by_batch) and len(set(by_batch)) == 4


def test_continuous_batching_throughput_rises_sublinearly(rtx):
    agg = [M.expected_gen_throughput(rtx, None, None, 1, 1000, b) for b in (1, 2, 4, 8, 16, 32)]
    per = [M.expected_decode_tok_s(rtx, None, None, 1, 1000, b) for b in (1, 2, 4, 8, 16, 32)]
    assert agg == sorted(agg)
    assert per == sorted(per, reverse=True)
    assert agg[-1] < 32 * agg[0]


def test_tensor_parallel_speeds_up_decode(rtx):
    rates = [M.expected_decode_tok_s(rtx, None, None, tp, 1000) for tp in (1, 2, 4, 8)]
    assert rates == sorted(rates) and len(set(rates)) == 4


def test_speculation_acceptance_code_beats_prose(rtx):
    for method, params in (("DFLASH", {"block_size": 16}), ("DDTREE", {"budget": 15})):
        code = M.expected_accept_length(rtx, method, params, "code")
        prose = M.expected_accept_length(rtx, method, params, "prose")
        assert code > 1.8 * prose > 1.0
    assert M.expected_accept_length(rtx, None, None, "code") == 1.0


def test_ddtree_budget_costs_more_and_accepts_more(rtx):
    budgets = (4, 8, 12, 15, 24, 32)
    acc = [M.expected_accept_length(rtx, "DDTREE", {"budget": b}, "code") for b in budgets]
    cost = [M.step_seconds(rtx, "DDTREE", {"budget": b}, 1, 500, 1) for b in budgets]
    assert acc == sorted(acc) and len(set(acc)) == len(acc)
    assert cost == sorted(cost) and len(set(cost)) == len(cost)


def test_dflash_pays_one_draft_pass_per_block(rtx):
    ar = M.step_seconds(rtx, None, None, 1, 500, 1)
    dflash = M.step_seconds(rtx, "DFLASH", {"block_size": 16, "num_draft_tokens": 16}, 1, 500, 1)
    draft = rtx["speculative"]["dflash"]["draft_ms_tp1"] / 1000.0
    assert dflash >= ar + draft
    assert M.expected_decode_tok_s(rtx, "DFLASH", {"block_size": 16}, 1, 500, 1, "code") > M.expected_decode_tok_s(
        rtx, None, None, 1, 500, 1, "code")


def test_sampled_acceptance_matches_expectation(rtx):
    rng = random.Random(1)
    alpha, depth = M.acceptance(rtx, "DDTREE", {"budget": 15}, "code")
    n = 20000
    mean = 1 + sum(M.sample_accepted_drafts(rng, alpha, depth) for _ in range(n)) / n
    expected = M.expected_accept_length(rtx, "DDTREE", {"budget": 15}, "code")
    assert abs(mean - expected) / expected < 0.03


def test_startup_time_model(rtx):
    assert M.weight_load_seconds(rtx, 1) > M.weight_load_seconds(rtx, 4) > 0
    assert M.startup_seconds(rtx, 1, speculative=True) > M.startup_seconds(rtx, 1)


def test_profiles_and_crash_rules(rtx, h200):
    assert "rtxpro6000-sm120" in M.available_profiles() and "h200" in M.available_profiles()
    assert h200["crash_rules"] == []
    f8 = build_faults([], rtx, {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 8})
    f12 = build_faults([], rtx, {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 12})
    f15 = build_faults([], rtx, {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 15})
    fh = build_faults([], h200, {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 8})
    assert f8.die_on_first_verify and f8.die_mid_stream_rule is None
    assert f12.die_mid_stream_rule is not None and not f12.die_on_first_verify
    assert not f15.die_on_first_verify and f15.die_mid_stream_rule is None
    assert not fh.die_on_first_verify and fh.die_mid_stream_rule is None
    # The h200 profile is faster than the RTX PRO 6000 one.
    assert M.expected_decode_tok_s(h200, None, None, 1, 500) > M.expected_decode_tok_s(rtx, None, None, 1, 500)


# --------------------------------------------------------------------------- load model

# The `fibonacci` workload at 256 output tokens, TP1: the configurations of the README's
# "Load model" tables.
FIBONACCI_TOKENS = SimTokenizer().count(FIBONACCI_PROMPT)
DDTREE15 = ("DDTREE", {"budget": 15})
AUTOREGRESSIVE = (None, None)


def _steady(profile, config, concurrency, **kw):
    method, params = config
    return M.closed_loop_steady_state(profile, method, params, 1, FIBONACCI_TOKENS, 256, concurrency, "code", **kw)


def _capacity(profile, config, tpot_limit_s, ttft_limit_s=None):
    method, params = config
    return M.max_concurrency_within(profile, method, params, 1, FIBONACCI_TOKENS, 256, "code",
                                    tpot_limit_s=tpot_limit_s, ttft_limit_s=ttft_limit_s)


def test_max_running_requests_follows_sglang():
    # Without speculation SGLang caps at max_total_num_tokens // 2 and the request pool (2048 here):
    # the KV cache binds long before.  Speculation's ServerArgs default is 48; a flag wins.
    assert M.req_to_token_pool_size(28724, 32768) == 2048
    assert M.req_to_token_pool_size(602533, 32768) == 4096
    assert M.effective_max_running_requests(None, 28724, 32768) == 2048
    assert M.effective_max_running_requests(None, 1000, 32768) == 500
    assert M.effective_max_running_requests(M.SPECULATIVE_MAX_RUNNING_REQUESTS, 25345, 32768) == 48
    assert M.effective_max_running_requests(8, 28724, 32768) == 8


def test_kv_reservation_is_context_plus_what_may_still_come():
    assert M.kv_reserved_tokens(100, 0, 256) == 356
    assert M.kv_reserved_tokens(100, 200, 256) == 356  # constant while it generates
    assert M.kv_reserved_tokens(100, 0, 10000) == 100 + M.KV_RESERVE_CLIP_TOKENS
    assert M.kv_reserved_tokens(100, 8000, 10000) == 10100


def test_expected_decode_steps_matches_the_sampler(rtx):
    assert M.expected_decode_steps(rtx, None, None, "code", 255) == 255.0
    method, params = DDTREE15
    steps = M.expected_decode_steps(rtx, method, params, "code", 255)
    per_step = M.expected_accept_length(rtx, method, params, "code")
    assert 255 / per_step < steps < 255 / per_step + 1  # the last step is cut at what remains
    alpha, depth = M.acceptance(rtx, method, params, "code")
    rng = random.Random(3)
    runs = []
    for _ in range(4000):
        left, n = 255, 0
        while left > 0:
            left -= 1 + M.sample_accepted_drafts(rng, alpha, depth)
            n += 1
        runs.append(n)
    assert abs(sum(runs) / len(runs) - steps) / steps < 0.01


def test_one_client_is_a_lone_request(rtx):
    one = _steady(rtx, AUTOREGRESSIVE, 1)
    assert one["batch"] == 1 and one["queued"] == 0 and one["prefill_interference_s"] == 0
    assert one["ttft_s"] == pytest.approx(M.prefill_seconds(rtx, 1, FIBONACCI_TOKENS))
    assert one["e2el_s"] == pytest.approx(M.expected_request_seconds(rtx, None, None, 1, FIBONACCI_TOKENS, 256, "code"))
    assert 1 / one["tpot_s"] == pytest.approx(M.expected_decode_tok_s(rtx, None, None, 1, FIBONACCI_TOKENS + 128))
    spec = _steady(rtx, DDTREE15, 1)
    assert spec["e2el_s"] == pytest.approx(
        M.expected_request_seconds(rtx, *DDTREE15, 1, FIBONACCI_TOKENS, 256, "code"), rel=0.02)


def test_tpot_grows_with_the_batch_then_the_queue_grows_ttft(rtx):
    for config, limit, limited_by in ((AUTOREGRESSIVE, 90, "kv_cache"), (DDTREE15, 48, "max_running_requests")):
        curve = [_steady(rtx, config, c) for c in range(1, 2 * limit + 1)]
        assert {s["batch_limit"] for s in curve} == {limit} and curve[0]["batch_limited_by"] == limited_by
        tpot = [s["tpot_s"] for s in curve]
        ttft = [s["ttft_s"] for s in curve]
        assert all(a < b for a, b in itertools.pairwise(tpot[:limit])), config  # a bigger batch, longer steps
        assert tpot[limit:] == [tpot[limit]] * limit  # a full batch: the rest wait
        assert [s["queued"] for s in curve[limit:]] == list(range(1, limit + 1))
        assert ttft == sorted(ttft) and ttft[-1] > 10 * ttft[limit - 1]
    # The KV cache holds 90 requests of 62 + 256 tokens (28,724 tokens at TP1).
    assert M.kv_capacity_tokens(rtx, 1) // (FIBONACCI_TOKENS + 256) == 90
    assert _steady(rtx, AUTOREGRESSIVE, 100, max_running_requests=32)["batch"] == 32


def test_speculation_pays_for_the_prefills_of_returning_clients(rtx):
    # Speculative requests finish spread over the steps: the others' prefills delay every step.
    spec = _steady(rtx, DDTREE15, 16)
    assert spec["regime"] == "mixed" and spec["prefill_interference_s"] > 0.05 * spec["step_s"]
    # A request decodes over S steps and the prefills of S - pi gaps (README: "Speculative — mixed").
    steps, gap, pi = spec["decode_steps"], spec["prefill_interference_s"], spec["prefilled_at_once"]
    assert 0.2 < pi < 0.5
    assert spec["tpot_s"] == pytest.approx((steps * spec["step_s"] + (steps - pi) * gap) / 255)
    # Clients waiting for their first token are out of the batch: fewer run than there are clients.
    assert 15 < spec["running_batch"] < 16
    # Autoregressive ones finish together: the wave's prefill is its TTFT, not anyone's TPOT.  The
    # first client back is prefilled alone, the other 15 arrive during that forward: two forwards.
    ar = _steady(rtx, AUTOREGRESSIVE, 16)
    assert ar["regime"] == "lockstep" and ar["tpot_s"] == ar["step_s"]
    assert ar["ttft_s"] == pytest.approx(2 * M.prefill_seconds(rtx, 1, 0) + 16 * (
        M.prefill_seconds(rtx, 1, FIBONACCI_TOKENS) - M.prefill_seconds(rtx, 1, 0)))


def test_throughput_saturates_at_the_full_batch(rtx):
    for config, limit in ((AUTOREGRESSIVE, 90), (DDTREE15, 48)):
        out = [_steady(rtx, config, c)["output_tok_s"] for c in range(1, 3 * limit)]
        assert out[:limit] == sorted(out[:limit])
        assert out[limit] == out[-1] < 1.03 * out[limit - 1]
    # Per request DDTree is 5x faster alone, but its full batch delivers less than autoregressive's.
    assert _steady(rtx, DDTREE15, 1)["output_tok_s"] > 5 * _steady(rtx, AUTOREGRESSIVE, 1)["output_tok_s"]
    assert _steady(rtx, DDTREE15, 200)["output_tok_s"] < 0.85 * _steady(rtx, AUTOREGRESSIVE, 200)["output_tok_s"]


def test_known_capacity_edges(rtx):
    assert _capacity(rtx, AUTOREGRESSIVE, 0.038) == 0  # one client already decodes at 38.4 ms per token
    # A full DDTree batch stays at 51.6 ms: without a TTFT limit the queue is never caught.
    assert _capacity(rtx, DDTREE15, 0.070) == 1024
    assert _capacity(rtx, DDTREE15, 0.070, ttft_limit_s=3.0) == 58
    s58, s59 = _steady(rtx, DDTREE15, 58), _steady(rtx, DDTREE15, 59)
    assert s58["ttft_s"] <= 3.0 < s59["ttft_s"]


def test_capacity_ranking_flips_between_a_tight_and_a_loose_slo(rtx):
    """README "Load model": at a tight per-user speed DDTree serves more clients; at a loose
    one autoregressive does, since every DDTree request adds verify work to each step and
    speculation caps the batch at 48, so its queue breaks the TTFT limit first."""
    tight = {"tpot_limit_s": 0.045, "ttft_limit_s": 3.0}
    loose = {"tpot_limit_s": 0.070, "ttft_limit_s": 3.0}
    assert (_capacity(rtx, DDTREE15, **tight), _capacity(rtx, AUTOREGRESSIVE, **tight)) == (41, 17)
    assert (_capacity(rtx, AUTOREGRESSIVE, **loose), _capacity(rtx, DDTREE15, **loose)) == (79, 58)
    # At each capacity the binding limit is the one the README names.
    assert _steady(rtx, AUTOREGRESSIVE, 80)["tpot_s"] > 0.070 and _steady(rtx, DDTREE15, 42)["tpot_s"] > 0.045
    assert _steady(rtx, DDTREE15, 59)["tpot_s"] < 0.070 < _steady(rtx, AUTOREGRESSIVE, 80)["tpot_s"]
    # Without speculation's cap (--max-running-requests 128; 79 requests fit the KV cache) the
    # verify work alone keeps DDTree below autoregressive at the loose SLO.
    uncapped = M.max_concurrency_within(rtx, *DDTREE15, 1, FIBONACCI_TOKENS, 256, "code", 128, tpot_limit_s=0.070)
    assert uncapped == 68 and _steady(rtx, DDTREE15, 68, max_running_requests=128)["batch_limit"] == 79
