"""The simulated SGLang server: aiohttp HTTP front end + an asyncio "scheduler".

Matched against SGLang's http_server.py, tokenizer_manager.py, serving_*.py and
scheduler.py (see README.md for the list of files and the deviations).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import selectors
import signal
import sys
import time
import uuid
import zlib
from collections import deque
from http import HTTPStatus
from typing import Any, Deque, Dict, List, Optional

from aiohttp import web

from simengine import SGLANG_VERSION
from simengine import faults as F
from simengine import model as M
from simengine.logs import SimLogger
from simengine.metrics import ITL_BUCKETS_S, TTFT_BUCKETS_S, Exposition, Histogram
from simengine.tokenizer import (
    EOS_TOKEN_ID,
    SimTokenizer,
    chat_text_content,
    piece_id,
    render_chat,
    split_pieces,
)

HEALTH_CHECK_TIMEOUT = int(os.getenv("SGLANG_HEALTH_CHECK_TIMEOUT", 20))
WARMUP_PROMPT = "The capital city of France is"
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang SamplingParams default

_CODE_OUTPUT = '''Here is a simple implementation:

```python
def fibonacci(n: int) -> int:
    """Return the n-th Fibonacci number."""
    if n < 2:
        return n
    a, b = 0, 1
    for _ in range(n - 1):
        a, b = b, a + b
    return b


if __name__ == "__main__":
    for i in range(10):
        print(i, fibonacci(i))
```

The loop keeps the last two values, so it runs in O(n) time and O(1) memory.
'''
_PROSE_OUTPUT = (
    "Paris is the capital and largest city of France. Situated on the river Seine, it has been "
    "a major centre of finance, diplomacy, commerce, culture, fashion and gastronomy for centuries. "
    "The city is known for its museums and architectural landmarks, and its population is spread "
    "across twenty districts that spiral out from the centre. Visitors often walk along the quays, "
    "cross the old bridges and stop in small cafes before continuing to the next neighbourhood. "
)
_OUTPUT_PIECES = {"code": split_pieces(_CODE_OUTPUT), "prose": split_pieces(_PROSE_OUTPUT)}


class ContextError(ValueError):
    pass


class BadJson(Exception):
    pass


# --------------------------------------------------------------------------- requests


class Req:
    def __init__(self, engine: "Engine", rid: str, input_len: int, max_new_tokens: Optional[int], workload: str,
                 stream: bool, internal: bool = False, prompt_hash: int = 0):
        self.rid = rid
        self.input_len = input_len
        self.max_new_tokens = max_new_tokens
        self.workload = workload
        self.stream = stream
        self.internal = internal
        if max_new_tokens is None:
            # No limit: the simulated model stops by itself (EOS) at a deterministic natural length.
            self.target_len = 64 + prompt_hash % 448
            self.natural_stop = True
        else:
            self.target_len = max(0, int(max_new_tokens))
            self.natural_stop = False
        # Never run past the context window.
        self.target_len = min(self.target_len, max(0, engine.context_len - input_len))
        self.pieces = _OUTPUT_PIECES.get(workload, _OUTPUT_PIECES["prose"])
        self.cursor = (prompt_hash // 7) % len(self.pieces) if workload == "prose" else 0
        while workload == "prose" and not self.pieces[self.cursor % len(self.pieces)].startswith(" "):
            self.cursor += 1
        self.output_ids: List[int] = []
        self.text = ""
        self.prefilled = 0
        self.spec_verify_ct = 0
        self.accepted_drafts = 0
        self.histogram: List[int] = []
        self.finished = False
        self.finish_reason: Optional[Dict[str, Any]] = None
        self.aborted = False
        self.created = time.time()
        self.finished_time: Optional[float] = None
        self.last_token_time: Optional[float] = None  # wall clock of the last chunk (None: none yet)
        self.queue: asyncio.Queue = asyncio.Queue()

    @property
    def completion_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def context(self) -> int:
        return self.input_len + len(self.output_ids)

    def remaining(self) -> int:
        return self.target_len - len(self.output_ids)

    def add_tokens(self, n: int) -> None:
        for _ in range(n):
            if self.natural_stop and len(self.output_ids) == self.target_len - 1:
                self.output_ids.append(EOS_TOKEN_ID)  # EOS counts as a completion token, adds no text
                continue
            piece = self.pieces[self.cursor % len(self.pieces)]
            self.cursor += 1
            self.output_ids.append(piece_id(piece))
            self.text += piece

    def finish(self, reason: Dict[str, Any]) -> None:
        if self.finished:
            return
        self.finished = True
        self.finish_reason = reason
        self.finished_time = time.time()
        self.queue.put_nowait(True)

    def notify(self) -> None:
        self.queue.put_nowait(True)


# --------------------------------------------------------------------------- engine


def visible_devices(value: Optional[str], host_gpus: int) -> Optional[List[int]]:
    """The host's GPU indices a ``CUDA_VISIBLE_DEVICES`` value makes visible, in its order,
    cut at the first index the host does not have or that is not a number (CUDA ignores
    the rest); None when the variable is unset (every GPU is visible)."""
    if value is None:
        return None
    seen: List[int] = []
    for part in value.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= host_gpus or int(part) in seen:
            break
        seen.append(int(part))
    return seen


class Engine:
    def __init__(self, args, sim, profile: Dict[str, Any], log: SimLogger):
        self.args = args
        self.sim = sim
        self.profile = profile
        self.log = log
        self.scale = float(sim.time_scale)
        # Start-up apart: a sweep of many short runs at a scale where its decode is measurable
        # need not wait for each server's simulated minute of loading.
        self.startup_scale = self.scale if sim.startup_time_scale is None else float(sim.startup_time_scale)
        self.tp = int(args.tp_size)
        host_gpus = int(sim.gpus if sim.gpus is not None else profile["gpu"].get("count", 8))
        # As CUDA does: the process sees exactly the GPUs CUDA_VISIBLE_DEVICES names (renumbered
        # from 0), up to the first that the host does not have.
        self.visible_devices = visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), host_gpus)
        self.gpus = len(self.visible_devices) if self.visible_devices is not None else host_gpus
        self.method = M.norm_method(args.speculative_algorithm)
        self.spec = self.method != "none"
        self.spec_params = {
            "block_size": args.speculative_dflash_block_size,
            "num_draft_tokens": args.speculative_num_draft_tokens,
            "budget": args.speculative_ddtree_budget,
            "topk_cap": args.speculative_ddtree_topk_cap,
        }
        self.context_len = int(args.context_length or profile["model"]["max_position_embeddings"])
        self.tokenizer = SimTokenizer()
        self.rng = random.Random(args.random_seed)
        self.faults = F.build_faults(sim.fault, profile, dataclasses.asdict(args))
        self.sched_prefix = " TP0" if self.tp > 1 else ""
        st = profile["startup"]
        self.chunked_prefill_size = int(args.chunked_prefill_size or st.get("chunked_prefill_size", 8192))
        # ServerArgs: speculation resets an unset cap to 48 (logged at start-up, as SGLang warns);
        # the scheduler's effective cap is known once the KV cache is sized.
        self.max_running_requests_reset = self.spec and args.max_running_requests is None
        if self.max_running_requests_reset:
            args.max_running_requests = M.SPECULATIVE_MAX_RUNNING_REQUESTS
        self.max_running_requests = 0
        self.max_total_num_tokens = 0
        self.max_req_input_len = 0
        # status: loading -> starting -> up (| unhealthy); SGLang's ServerStatus
        self.status = "loading"
        self.gracefully_exit = False
        self.hung = False
        self.dying = False
        self._hang_event = asyncio.Event()  # never set
        self.waiting: Deque[Req] = deque()
        self.running: List[Req] = []
        self.wake = asyncio.Event()
        self._anchor: Optional[float] = None
        # counters
        self.num_user_requests = 0
        self.user_tokens_generated = 0
        self.decode_forward_ct = 0
        self.log_gen_tokens = 0
        self.log_tic = time.perf_counter()
        self.last_gen_throughput = 0.0
        self.interval_accept_tokens = 0
        self.interval_forward_ct = 0
        self.last_accept_len = 0.0
        self.cum_spec_accept_length = 0
        self.cum_spec_accept_count = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.num_requests_total = 0
        # SGLang's TokenizerMetricsCollector histograms, observed in wall seconds as a real
        # server would (the caller converts a time-scaled run to model time).
        self.ttft_histogram = Histogram(TTFT_BUCKETS_S)
        self.itl_histogram = Histogram(ITL_BUCKETS_S)
        self.first_verify_done = False
        self.created = time.time()
        self.last_receive_wall = time.time()

    # ---------------------------------------------------------------- helpers

    def sleep_startup(self, seconds: float):
        return asyncio.sleep(max(0.0, seconds * self.startup_scale))

    async def sleep_model(self, seconds: float) -> None:
        """Sleep ``seconds`` of modelled time on a drift-free timeline (no accumulated overhead)."""
        if self.scale <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._anchor is None or self._anchor < now - 1.0:
            self._anchor = now
        step = seconds * self.scale
        self._anchor += step
        # Behind the timeline (the host was busy): catch up at twice the model's speed,
        # never by writing steps back to back, which no client could time apart.
        if self._anchor - now < step / 2:
            self._anchor = now + step / 2
        await asyncio.sleep(self._anchor - now)

    async def hang_forever(self):
        await self._hang_event.wait()

    def token_usage(self) -> float:
        used = sum(r.context for r in self.running)
        return used / self.max_total_num_tokens if self.max_total_num_tokens else 0.0

    def spec_depth(self, workload: str):
        return M.acceptance(self.profile, self.method, self.spec_params, workload)

    # ---------------------------------------------------------------- validation (tokenizer_manager)

    def validate_lengths(self, input_len: int, max_new_tokens: Optional[int]) -> None:
        if input_len >= self.context_len:
            raise ContextError(
                f"The input ({input_len} tokens) is longer than the "
                f"model's context length ({self.context_len} tokens)."
            )
        if max_new_tokens is not None and (max_new_tokens + input_len) > self.context_len:
            total_tokens = max_new_tokens + input_len
            raise ContextError(
                f"Requested token count exceeds the model's maximum context length "
                f"of {self.context_len} tokens. You requested a total of {total_tokens} "
                f"tokens: {input_len} tokens from the input messages and "
                f"{max_new_tokens} tokens for the completion. Please reduce the number "
                f"of tokens in the input messages or the completion to fit within the limit."
            )

    def submit(self, input_len: int, max_new_tokens: Optional[int], workload: str, stream: bool,
               rid: Optional[str] = None, internal: bool = False, prompt_hash: int = 0) -> Req:
        req = Req(self, rid or uuid.uuid4().hex, input_len, max_new_tokens, workload, stream, internal, prompt_hash)
        # scheduler.handle_generate_request -> validate_input_length (KV-capacity bound)
        if input_len >= self.max_req_input_len:
            req.finish({
                "type": "abort",
                "message": (
                    f"Input length ({input_len} tokens) exceeds "
                    f"the maximum allowed length ({self.max_req_input_len} tokens). "
                    f"Use a shorter input or enable --allow-auto-truncate."
                ),
                "status_code": 400,
                "err_type": "BadRequestError",
            })
            return req
        if req.target_len == 0 and max_new_tokens is not None:
            pass  # still goes through a prefill; finishes with length 0
        self.waiting.append(req)
        self.wake.set()
        return req

    # ---------------------------------------------------------------- scheduler loop

    async def run_scheduler(self) -> None:
        try:
            while True:
                if self.hung or self.dying:
                    await self.hang_forever()
                self.running = [r for r in self.running if not r.finished and not r.aborted]
                while self.waiting and (self.waiting[0].aborted or self.waiting[0].finished):
                    self.waiting.popleft()
                if not self.waiting and not self.running:
                    self._anchor = None
                    self.wake.clear()
                    await self.wake.wait()
                    self.log_tic = time.perf_counter()  # throughput intervals exclude idle time
                    self.log_gen_tokens = 0
                    continue
                # Prefill first, as SGLang without mixed chunking: new arrivals delay the running
                # batch's next step.  A full batch or KV cache leaves them waiting in the queue;
                # with nothing running the head is always admitted, so here self.running is not empty.
                if self.waiting and len(self.running) < self.max_running_requests and self._can_admit():
                    await self.prefill_step()
                    continue
                await self.decode_step()
        except asyncio.CancelledError:
            raise

    def _can_admit(self, batch_reserved: int = 0) -> bool:
        """Whether the head of the queue fits in the KV cache next to the running requests and
        the ``batch_reserved`` tokens of the prefill batch being formed (a lone request always runs)."""
        if not self.running and not batch_reserved:
            return True
        req = self.waiting[0]
        used = sum(M.kv_reserved_tokens(r.input_len, r.completion_tokens, r.target_len) for r in self.running)
        need = M.kv_reserved_tokens(req.input_len, 0, req.target_len)
        return used + batch_reserved + need <= self.max_total_num_tokens

    async def prefill_step(self) -> None:
        budget = self.chunked_prefill_size
        batch: List[Req] = []
        reserved = 0  # KV tokens promised to this batch: the running requests' do not count them yet
        seconds = M.prefill_seconds(self.profile, self.tp, 0)  # fixed cost of the forward
        new_tokens = 0
        while self.waiting and budget > 0 and len(self.running) + len(batch) < self.max_running_requests:
            req = self.waiting[0]
            if req.aborted or req.finished:
                self.waiting.popleft()
                continue
            if batch and not self._can_admit(reserved):
                break
            if req.prefilled == 0 and not req.internal:
                self.num_user_requests += 1
                n = self.faults.crash_after_requests
                if n is not None and self.num_user_requests > n:
                    await self.die(F.illegal_instruction_traceback(self.method))
            take = min(budget, req.input_len - req.prefilled)
            start = req.prefilled
            seconds += (M.prefill_seconds(self.profile, self.tp, start + take)
                        - M.prefill_seconds(self.profile, self.tp, start))
            req.prefilled += take
            new_tokens += take
            budget -= take
            batch.append(req)
            reserved += M.kv_reserved_tokens(req.input_len, 0, req.target_len)
            if req.prefilled >= req.input_len:
                self.waiting.popleft()
            else:
                break  # chunked: the rest goes into the next prefill forward
        if not batch:
            return
        self.log.info(
            f"Prefill batch. #new-seq: {len(batch)}, #new-token: {new_tokens}, #cached-token: 0, "
            f"token usage: {self.token_usage():.2f}, #running-req: {len(self.running)}, "
            f"#queue-req: {len(self.waiting)}, ",
            prefix=self.sched_prefix,
        )
        await self.sleep_model(seconds)
        if self.dying or self.hung:
            await self.hang_forever()
        for req in batch:
            if req.prefilled < req.input_len or req.aborted:
                continue
            # The prefill forward samples the first output token.
            if req.remaining() > 0:
                await self.emit(req, 1)
            self.maybe_finish(req)
            if not req.finished:
                self.running.append(req)
            if self.hung or self.dying:
                await self.hang_forever()

    async def decode_step(self) -> None:
        batch = self.running
        bs = len(batch)
        ctx = sum(r.context for r in batch) / bs
        user_reqs = [r for r in batch if not r.internal]
        if self.spec and self.faults.die_on_first_verify and user_reqs:
            self.log.info(
                f"DDTree verify. budget={self.spec_params['budget']}, topk_cap={self.spec_params['topk_cap']}, "
                f"#verify-token: {M.verify_tokens_per_seq(self.method, self.spec_params) * bs}, "
                f"avg_accepted_drafts=0.00",
                prefix=self.sched_prefix,
            )
            await self.die(F.illegal_instruction_traceback(self.method))
        await self.sleep_model(M.step_seconds(self.profile, self.method, self.spec_params, self.tp, ctx, bs))
        if self.dying or self.hung:
            await self.hang_forever()
        self.decode_forward_ct += 1
        for req in list(batch):
            if req.finished or req.aborted:
                continue
            k = 1
            if self.spec:
                alpha, depth = self.spec_depth(req.workload)
                acc = M.sample_accepted_drafts(self.rng, alpha, depth)
                k = 1 + acc
                req.spec_verify_ct += 1
                if len(req.histogram) < depth + 1:
                    req.histogram.extend([0] * (depth + 1 - len(req.histogram)))
                req.histogram[acc] += 1
                req.accepted_drafts += acc
                self.interval_accept_tokens += k
                self.interval_forward_ct += 1
                self.cum_spec_accept_length += k
                self.cum_spec_accept_count += 1
            k = min(k, req.remaining())
            if k > 0:
                await self.emit(req, k)
            self.maybe_finish(req)
            if self.hung or self.dying:
                await self.hang_forever()
        self.running = [r for r in self.running if not r.finished and not r.aborted]
        if self.decode_forward_ct % max(1, self.args.decode_log_interval) == 0:
            self.log_decode_stats(bs)

    def maybe_finish(self, req: Req) -> None:
        if req.finished or req.remaining() > 0:
            return
        if req.natural_stop and req.output_ids and req.output_ids[-1] == EOS_TOKEN_ID:
            reason = {"type": "stop", "matched": EOS_TOKEN_ID}
        else:
            reason = {"type": "length", "length": req.target_len}
        if not req.internal:
            self.prompt_tokens_total += req.input_len
            self.generation_tokens_total += req.completion_tokens
            self.num_requests_total += 1
        req.finish(reason)

    async def emit(self, req: Req, k: int) -> None:
        """Commit k tokens to req, applying the token-count faults."""
        die_after = None
        hang = False
        if not req.internal:
            f = self.faults
            if f.crash_mid_stream_tokens is not None and req.stream:
                cap = f.crash_mid_stream_tokens - req.completion_tokens
                if k >= cap:
                    k, die_after = max(0, cap), "mid-stream"
            rule = f.die_mid_stream_rule
            if rule is not None and (req.max_new_tokens is None or req.max_new_tokens > int(rule["safe_max_new_tokens"])):
                cap = int(rule["die_after_tokens"]) - req.completion_tokens
                if k >= cap:
                    k, die_after = max(0, cap), "rule"
            if f.hang_after_tokens is not None:
                cap = f.hang_after_tokens - self.user_tokens_generated
                if k >= cap:
                    k, hang = max(0, cap), True
            self.user_tokens_generated += k
        if k > 0:
            req.add_tokens(k)
            self.log_gen_tokens += k
            self.last_receive_wall = time.time()
            if not req.internal:
                self.observe_latency(req, k)
            req.notify()
        if die_after:
            await self.die(F.illegal_instruction_traceback(self.method if self.spec else "DDTREE"))
        if hang:
            self.hung = True

    def observe_latency(self, req: Req, k: int) -> None:
        """As SGLang's tokenizer manager does per output batch: the first gives a TTFT
        (since the request arrived), each later one k ITL observations of gap / k."""
        now = time.time()
        if req.last_token_time is None:
            self.ttft_histogram.observe(now - req.created)
        else:
            self.itl_histogram.observe_chunk(now - req.last_token_time, k)
        req.last_token_time = now

    def log_decode_stats(self, bs: int) -> None:
        now = time.perf_counter()
        gap = max(now - self.log_tic, 1e-9)
        self.log_tic = now
        self.last_gen_throughput = self.log_gen_tokens / gap
        self.log_gen_tokens = 0
        used = sum(r.context for r in self.running)
        msg = (f"Decode batch. #running-req: {bs}, #token: {used}, "
               f"token usage: {self.token_usage():.2f}, ")
        if self.spec:
            accept_len = (self.interval_accept_tokens / self.interval_forward_ct) if self.interval_forward_ct else 0.0
            self.last_accept_len = accept_len
            self.interval_accept_tokens = self.interval_forward_ct = 0
            msg += f"accept len: {accept_len:.2f}, "
        msg += (f"cuda graph: {not self.args.disable_cuda_graph}, "
                f"gen throughput (token/s): {self.last_gen_throughput:.2f}, "
                f"#queue-req: {len(self.waiting)}, ")
        self.log.info(msg, prefix=self.sched_prefix)

    # ---------------------------------------------------------------- death

    async def die(self, traceback_text: str, prefix: Optional[str] = None) -> None:
        """Die like SGLang: the scheduler logs its exception, the parent gets SIGQUIT and
        kill_process_tree()s itself with SIGKILL (so the listening socket closes at once)."""
        if self.dying:
            await self.hang_forever()
        self.dying = True
        await asyncio.sleep(0.15)  # real seconds: let the HTTP side flush what was already produced
        self.log.error(f"Scheduler hit an exception: {traceback_text}",
                       prefix=self.sched_prefix if prefix is None else prefix)
        self.log.error(F.SIGQUIT_MSG)
        self.log.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        await self.hang_forever()

    # ---------------------------------------------------------------- state for endpoints

    def internal_state(self) -> Dict[str, Any]:
        mem = self.profile["memory"]
        ret = dict(dataclasses.asdict(self.args))
        ret["last_gen_throughput"] = self.last_gen_throughput
        ret["memory_usage"] = {
            "weight": round(float(self.profile["model"]["weights_gib"]) / self.tp, 2),
            "kvcache": round(self.max_total_num_tokens * M.kv_bytes_per_token(self.profile, self.args.kv_cache_dtype)
                             / self.tp / M.GIB, 2),
            "token_capacity": int(self.max_total_num_tokens),
            "graph": round(float(mem.get("cuda_graph_gib", 0.0)), 2),
        }
        ret["effective_max_running_requests_per_dp"] = self.max_running_requests
        if self.spec and self.cum_spec_accept_count > 0:
            ret["avg_spec_accept_length"] = self.cum_spec_accept_length / self.cum_spec_accept_count
        ret["load"] = sum(r.context for r in self.running) + sum(r.input_len for r in self.waiting)
        return ret

    def scheduler_info(self) -> Dict[str, Any]:
        return {
            "status": "ready",
            "max_total_num_tokens": self.max_total_num_tokens,
            "max_req_input_len": self.max_req_input_len,
        }

    def spec_meta(self, req: Req) -> Dict[str, Any]:
        if not self.spec:
            return {}
        meta: Dict[str, Any] = {"spec_verify_ct": req.spec_verify_ct, "spec_accept_rate": 0.0, "spec_accept_length": 0}
        proposed = req.spec_verify_ct * (int(self.args.speculative_num_draft_tokens or 1) - 1)
        if req.spec_verify_ct > 0 and proposed > 0:
            meta["spec_accept_rate"] = req.accepted_drafts / proposed
            meta["spec_accept_length"] = req.completion_tokens / req.spec_verify_ct
            meta["spec_accepted_drafts"] = req.accepted_drafts
            meta["spec_proposed_drafts"] = proposed
        if req.histogram:
            meta["spec_accept_histogram"] = list(req.histogram)
        return meta

    def meta_info(self, req: Req, final: bool) -> Dict[str, Any]:
        meta: Dict[str, Any] = {
            "id": req.rid,
            "finish_reason": req.finish_reason if final else None,
            "prompt_tokens": req.input_len,
            "weight_version": self.args.weight_version,
            "total_retractions": 0,
            "completion_tokens": req.completion_tokens,
            "cached_tokens": 0,
        }
        meta.update(self.spec_meta(req))
        if final:
            end = req.finished_time or time.time()
            meta["e2e_latency"] = end - req.created
        return meta

    # ---------------------------------------------------------------- start-up

    async def startup(self, http_ready_cb) -> None:
        a, p, log = self.args, self.profile, self.log
        if self.max_running_requests_reset:
            log.warning("Max running requests is reset to 48 for speculative decoding. You can override this by "
                        "explicitly setting --max-running-requests.")
        log.info(f"server_args={a!r}")
        ranks = range(self.tp * a.pp_size)
        pref = (lambda r: f" TP{r}") if self.tp > 1 else (lambda r: "")
        phases = M.startup_phases(p, self.tp, self.spec)
        gpu_gib = float(p["gpu"]["memory_gib"])
        await self.sleep_startup(phases["init"] * 0.5)
        for r in ranks:
            if r >= self.gpus:
                await self.die(F.invalid_device_traceback(r), prefix=pref(r))
            log.info("Init torch distributed begin.", prefix=pref(r))
        await self.sleep_startup(phases["init"] * 0.5)
        avail = gpu_gib - float(p["memory"]["runtime_overhead_gib"])
        for r in ranks:
            log.info(f"Init torch distributed ends. mem usage={gpu_gib - avail:.2f} GB", prefix=pref(r))
        for r in ranks:
            log.info(f"Load weight begin. avail mem={avail:.2f} GB", prefix=pref(r))
        if self.faults.crash_on_start:
            await self.sleep_startup(min(phases["load_weights"], 2.0))
            await self.die(F.crash_on_start_traceback())
        load_s = self.faults.slow_start_s if self.faults.slow_start_s is not None else phases["load_weights"]
        await self.sleep_startup(load_s)
        w = float(p["model"]["weights_gib"]) / self.tp
        for r in ranks:
            log.info(
                f"Load weight end. elapsed={load_s:.2f} s, type={p['model']['architecture']}, "
                f"dtype={p['model'].get('dtype', 'torch.bfloat16')}, avail mem={avail - w:.2f} GB, mem usage={w:.2f} GB.",
                prefix=pref(r),
            )
        avail -= w
        if self.spec:
            dw = float(p["memory"].get("draft_weights_gib", 0.0)) / self.tp
            await self.sleep_startup(phases["load_draft"])
            for r in ranks:
                log.info(
                    f"Load weight end. elapsed={phases['load_draft']:.2f} s, type=DFlashDraftModel, "
                    f"dtype=torch.bfloat16, avail mem={avail - dw:.2f} GB, mem usage={dw:.2f} GB.",
                    prefix=pref(r),
                )
            avail -= dw
        cap = M.kv_capacity_tokens(p, self.tp, a.mem_fraction_static, self.spec, a.kv_cache_dtype)
        if a.max_total_tokens is not None:
            cap = min(cap, int(a.max_total_tokens))
        per_rank_bytes = M.kv_bytes_per_token(p, a.kv_cache_dtype) / self.tp
        if self.faults.oom_on_start:
            tried = max(cap, 1) * per_rank_bytes / M.GIB / 2
            await self.die(F.oom_traceback(tried, gpu_gib, 612.44, gpu_gib - 0.6))
        if cap <= 0:
            await self.die(F.not_enough_memory_traceback())
        self.max_total_num_tokens = cap
        self.max_req_input_len = M.max_req_input_len(self.context_len, cap)
        self.max_running_requests = M.effective_max_running_requests(a.max_running_requests, cap, self.context_len)
        kv_gib = cap * per_rank_bytes / M.GIB
        for r in ranks:
            log.info(f"KV Cache is allocated. #tokens: {cap}, K size: {kv_gib / 2:.2f} GB, V size: {kv_gib / 2:.2f} GB",
                     prefix=pref(r))
        avail -= kv_gib
        for r in ranks:
            log.info(f"Memory pool end. avail mem={avail:.2f} GB", prefix=pref(r))
        if not a.disable_cuda_graph:
            for r in ranks:
                log.info(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB",
                         prefix=pref(r))
            await self.sleep_startup(phases["cuda_graph"])
            g = float(p["memory"].get("cuda_graph_gib", 0.0))
            for r in ranks:
                log.info(f"Capture cuda graph end. Time elapsed: {phases['cuda_graph']:.2f} s. "
                         f"mem usage={g:.2f} GB. avail mem={avail - g:.2f} GB.", prefix=pref(r))
            avail -= g
        log.info(
            f"max_total_num_tokens={cap}, chunked_prefill_size={self.chunked_prefill_size}, "
            f"max_prefill_tokens={a.max_prefill_tokens}, max_running_requests={self.max_running_requests}, "
            f"context_len={self.context_len}, available_gpu_mem={avail:.2f} GB",
            prefix=self.sched_prefix,
        )
        self.status = "starting"
        asyncio.get_running_loop().create_task(self.run_scheduler())
        http_ready_cb()
        if not a.skip_server_warmup:
            await asyncio.sleep(0)
            log.access("127.0.0.1:" + str(40000 + os.getpid() % 20000), "GET", "/get_model_info", 200, "OK")
            ids = self.tokenizer.encode(WARMUP_PROMPT)
            req = self.submit(len(ids), 8, "prose", False, internal=True)
            while not req.finished:
                await req.queue.get()
            log.access("127.0.0.1:" + str(40001 + os.getpid() % 20000), "POST", "/generate", 200, "OK")
        self.status = "up"
        log.info("The server is fired up and ready to roll!")


# --------------------------------------------------------------------------- HTTP


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(data), status=status, content_type="application/json")


def _native_error(msg: str, status: int = 400) -> web.Response:
    return _json({"error": {"message": msg}}, status)


def _openai_error(msg: str, err_type: str = "BadRequestError", status: int = 400) -> web.Response:
    return _json({"object": "error", "message": msg, "type": err_type, "param": None, "code": status}, status)


def _openai_error_chunk(msg: str, err_type: str = "BadRequestError", code: int = 400) -> str:
    return json.dumps({"error": {"object": "error", "message": msg, "type": err_type, "param": None, "code": code}})


class HttpApi:
    def __init__(self, engine: Engine):
        self.e = engine
        self.log = engine.log

    # ---------------------------------------------------------------- middleware

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        e = self.e
        path = request.path
        if e.args.api_key and not (path.startswith("/health") or path.startswith("/metrics")):
            if request.headers.get("Authorization", "") != f"Bearer {e.args.api_key}":
                resp = _json({"error": "Unauthorized"}, 401)
                self._access(request, resp.status)
                return resp
        if e.status == "loading" and path not in ("/health", "/health_generate", "/ping"):
            resp = _json({"detail": "Server is loading the model weights."}, 503)
            self._access(request, resp.status)
            return resp
        try:
            resp = await handler(request)
        except web.HTTPNotFound:
            resp = _json({"detail": "Not Found"}, 404)
        except web.HTTPMethodNotAllowed:
            resp = _json({"detail": "Method Not Allowed"}, 405)
        except BadJson as ex:
            resp = _openai_error(str(ex), "Bad Request")
        self._access(request, resp.status)
        return resp

    def _access(self, request: web.Request, status: int) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        peer_s = f"{peer[0]}:{peer[1]}" if peer else "127.0.0.1:0"
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""
        self.log.access(peer_s, request.method, request.path_qs, status, reason)

    async def _body(self, request: web.Request):
        try:
            raw = await request.read()
            return json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError) as ex:
            raise BadJson(f"JSON decode error: {ex}")

    # ---------------------------------------------------------------- native

    async def health(self, request: web.Request) -> web.Response:
        e = self.e
        if e.gracefully_exit:
            self.log.info("Health check request received during shutdown. Returning 503.")
            return web.Response(status=503)
        if e.status in ("loading", "starting"):
            return web.Response(status=503)
        tic = time.time()
        loop = asyncio.get_running_loop()
        start = loop.time()
        timeout = HEALTH_CHECK_TIMEOUT * e.scale
        while True:
            await asyncio.sleep(1.0 * e.scale)
            if not e.hung and not e.dying:
                e.status = "up"
                return web.Response(status=200)
            if loop.time() >= start + timeout:
                break
        self.log.error(
            f"Health check failed. Server couldn't get a response from detokenizer for last "
            f"{HEALTH_CHECK_TIMEOUT} seconds. tic start time: {time.strftime('%H:%M:%S', time.localtime(tic))}. "
            f"last_heartbeat time: {time.strftime('%H:%M:%S', time.localtime(e.last_receive_wall))}"
        )
        e.status = "unhealthy"
        return web.Response(status=503)

    async def ping(self, request):
        return web.Response(status=200)

    async def get_model_info(self, request):
        a = self.e.args
        return _json({
            "model_path": a.model_path,
            "tokenizer_path": a.tokenizer_path,
            "is_generation": True,
            "preferred_sampling_params": a.preferred_sampling_params,
            "weight_version": a.weight_version,
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": "qwen3_5",
            "architectures": [self.e.profile["model"]["architecture"]],
        })

    async def get_server_info(self, request):
        e = self.e
        if e.hung:
            await e.hang_forever()  # the real call waits on the (hung) scheduler
        info = {
            **dataclasses.asdict(e.args),
            **e.scheduler_info(),
            "internal_states": [e.internal_state()],
            "version": e.profile.get("sglang_version", SGLANG_VERSION),
        }
        info["context_length"] = e.context_len
        info["simengine"] = {
            "profile": e.profile.get("name"),
            "time_scale": e.scale,
            "startup_time_scale": e.startup_scale,
            "seed": e.sim.seed,
            "gpus": e.gpus,
            "visible_devices": e.visible_devices,
            "faults": [f"{k}:{v}" if v is not None else k for k, v in e.sim.fault],
            "crash_rules": e.faults.rules_applied,
        }
        return _json(info)

    async def get_load(self, request):
        e = self.e
        return _json([{"dp_rank": 0, "num_reqs": len(e.running) + len(e.waiting),
                       "num_waiting_reqs": len(e.waiting), "num_tokens": sum(r.context for r in e.running)}])

    async def flush_cache(self, request):
        e = self.e
        if e.waiting or e.running:
            self.log.warning(
                f"Cache not flushed because there are pending requests. #queue-req: {len(e.waiting)}, "
                f"#running-req: {len(e.running)}", prefix=e.sched_prefix)
            ok = False
        else:
            e.cum_spec_accept_length = e.cum_spec_accept_count = 0
            self.log.info("Cache flushed successfully!", prefix=e.sched_prefix)
            ok = True
        return web.Response(
            text="Cache flushed.\nPlease check backend logs for more details. "
            "(When there are running or waiting requests, the operation will not be performed.)\n",
            status=200 if ok else 400,
        )

    async def tokenize(self, request):
        body = await self._body(request)
        prompt = body.get("prompt")
        add = bool(body.get("add_special_tokens", True))
        tok = self.e.tokenizer
        max_model_len = int(self.e.profile["model"].get("tokenizer_model_max_length", self.e.context_len))
        if isinstance(prompt, str):
            ids = tok.encode(prompt, add_special_tokens=add)
            return _json({"tokens": ids, "count": len(ids), "max_model_len": max_model_len})
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            ids = [tok.encode(p, add_special_tokens=add) for p in prompt]
            return _json({"tokens": ids, "count": [len(i) for i in ids], "max_model_len": max_model_len})
        return _openai_error(f"Invalid prompt type: {type(prompt)}. Expected str or List[str].")

    async def detokenize(self, request):
        body = await self._body(request)
        tokens = body.get("tokens")
        tok = self.e.tokenizer
        skip = bool(body.get("skip_special_tokens", True))
        if isinstance(tokens, list) and tokens and isinstance(tokens[0], list):
            return _json({"text": [tok.decode(t, skip) for t in tokens]})
        if isinstance(tokens, list):
            if not all(isinstance(t, int) for t in tokens):
                return _openai_error("Invalid input: 'tokens' must be a list of integers.")
            return _json({"text": tok.decode(tokens, skip)})
        return _openai_error(f"Invalid tokens type: {type(tokens)}. Expected List[int] or List[List[int]].")

    def _prepare(self, text: Optional[str], input_ids: Optional[List[int]]):
        tok = self.e.tokenizer
        if input_ids is not None:
            ids = [int(i) for i in input_ids]
            text_for_workload = tok.decode(ids)
        else:
            ids = tok.encode(text or "")
            text_for_workload = text or ""
        return ids, M.detect_workload(text_for_workload), zlib.crc32(text_for_workload.encode("utf-8"))

    async def _wait(self, req: Req) -> None:
        while not req.finished:
            await req.queue.get()

    def _native_out(self, req: Req, final: bool) -> Dict[str, Any]:
        return {"text": req.text, "output_ids": list(req.output_ids), "meta_info": self.e.meta_info(req, final)}

    async def generate(self, request: web.Request):
        e = self.e
        body = await self._body(request)
        sp = dict(body.get("sampling_params") or {})
        stream = bool(body.get("stream", False))
        text = body.get("text")
        input_ids = body.get("input_ids")
        if isinstance(text, list) or (isinstance(input_ids, list) and input_ids and isinstance(input_ids[0], list)):
            items = text if isinstance(text, list) else input_ids
            if stream:
                return _native_error("Streaming batch requests are not supported by simengine.")
            results = []
            for item in items:
                sub = {**body, "text": item if isinstance(text, list) else None,
                       "input_ids": item if not isinstance(text, list) else None, "rid": None}
                res = await self._generate_one(request, sub, sp, False)
                if isinstance(res, web.Response):
                    return res
                results.append(res)
            return _json(results)
        res = await self._generate_one(request, body, sp, stream)
        if isinstance(res, (web.Response, web.StreamResponse)):
            return res
        return _json(res)

    async def _generate_one(self, request, body, sp, stream):
        e = self.e
        max_new = sp.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        ids, workload, h = self._prepare(body.get("text"), body.get("input_ids"))
        try:
            if max_new is not None and int(max_new) < 0:
                raise ValueError("max_new_tokens must be at least 0, got " + str(max_new) + ".")
            e.validate_lengths(len(ids), None if max_new is None else int(max_new))
        except ValueError as ex:
            self.log.error(f"[http_server] Error: {ex}")
            if stream:
                resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
                await resp.prepare(request)
                await resp.write(b"data: " + json.dumps({"error": {"message": str(ex)}}).encode() + b"\n\n")
                await resp.write(b"data: [DONE]\n\n")
                await resp.write_eof()
                return resp
            return _native_error(str(ex))
        req = e.submit(len(ids), None if max_new is None else int(max_new), workload, stream, rid=body.get("rid"),
                       prompt_hash=h)
        if not stream:
            try:
                await self._wait(req)
            finally:
                if not req.finished:
                    req.aborted = True
            fr = req.finish_reason or {}
            if fr.get("type") == "abort" and fr.get("status_code") == 400:
                self.log.error(f"[http_server] Error: {fr.get('message')}")
                return _native_error(fr.get("message", ""))
            return self._native_out(req, True)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent = 0
        try:
            while True:
                await req.queue.get()
                while not req.queue.empty():
                    req.queue.get_nowait()
                if req.completion_tokens > sent or req.finished:
                    sent = req.completion_tokens
                    out = self._native_out(req, req.finished)
                    await resp.write(b"data: " + json.dumps(out).encode() + b"\n\n")
                if req.finished:
                    break
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            req.aborted = True
            raise
        finally:
            if not req.finished:
                req.aborted = True
        return resp

    # ---------------------------------------------------------------- OpenAI

    @staticmethod
    def _include_usage(e: Engine, body: Dict[str, Any]):
        so = body.get("stream_options") or {}
        include = so.get("include_usage")
        if include is None:
            include = e.args.stream_response_default_include_usage
        return bool(include), bool(so.get("continuous_usage_stats", False))

    @staticmethod
    def _usage(req: Req) -> Dict[str, Any]:
        return {"prompt_tokens": req.input_len, "total_tokens": req.input_len + req.completion_tokens,
                "completion_tokens": req.completion_tokens, "prompt_tokens_details": None, "reasoning_tokens": 0}

    async def completions(self, request):
        return await self._openai(request, chat=False)

    async def chat_completions(self, request):
        return await self._openai(request, chat=True)

    async def _openai(self, request, chat: bool):
        e = self.e
        if request.content_type != "application/json":
            return _openai_error(
                "[{'type': 'value_error', 'loc': ('header', 'content-type'), "
                "'msg': \"Unsupported Media Type: Only 'application/json' is allowed\", 'input': None}]",
                "Bad Request")
        body = await self._body(request)
        model_name = body.get("model") or e.args.served_model_name
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return _openai_error("Messages cannot be empty.")
            prompt_text = render_chat(messages, add_generation_prompt=True)
            ids = e.tokenizer.encode(prompt_text)
            content = chat_text_content(messages)
            workload = M.detect_workload(content)
            h = zlib.crc32(content.encode("utf-8"))
            max_new = body.get("max_completion_tokens", body.get("max_tokens"))
            rid_prefix, obj = "chatcmpl-", "chat.completion"
        else:
            prompt = body.get("prompt")
            if not prompt or (isinstance(prompt, list) and all(not p for p in prompt)):
                return _openai_error("Prompt cannot be empty")
            if isinstance(prompt, list) and isinstance(prompt[0], str):
                if len(prompt) > 1:
                    return _openai_error("simengine supports a single prompt per /v1/completions request.")
                prompt = prompt[0]
            if isinstance(prompt, str):
                ids, workload, h = self._prepare(prompt, None)
            else:
                ids, workload, h = self._prepare(None, prompt)
            max_new = body.get("max_tokens", 16)
            rid_prefix, obj = "cmpl-", "text_completion"
        stream = bool(body.get("stream", False))
        try:
            e.validate_lengths(len(ids), None if max_new is None else int(max_new))
        except ValueError as ex:
            return _openai_error(str(ex))
        rid = body.get("rid") or f"{rid_prefix}{uuid.uuid4().hex}"
        req = e.submit(len(ids), None if max_new is None else int(max_new), workload, stream, rid=rid, prompt_hash=h)
        created = int(time.time())
        if not stream:
            try:
                await self._wait(req)
            finally:
                if not req.finished:
                    req.aborted = True
            fr = req.finish_reason or {}
            if fr.get("type") == "abort":
                return _openai_error(fr.get("message", ""))
            finish = fr.get("type")
            matched = fr.get("matched")
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": req.text, "reasoning_content": None,
                                                  "tool_calls": None},
                          "logprobs": None, "finish_reason": finish, "matched_stop": matched}
            else:
                choice = {"index": 0, "text": req.text, "logprobs": None, "finish_reason": finish,
                          "matched_stop": matched}
            return _json({"id": req.rid, "object": obj, "created": created, "model": model_name, "choices": [choice],
                          "usage": self._usage(req), "metadata": {"weight_version": e.args.weight_version}})
        include_usage, continuous = self._include_usage(e, body)
        chunk_obj = "chat.completion.chunk" if chat else "text_completion"
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(data: str) -> None:
            await resp.write(f"data: {data}\n\n".encode())

        def chunk(choices, usage=None, exclude_none=False):
            d = {"id": req.rid, "object": chunk_obj, "created": created, "model": model_name, "choices": choices}
            if exclude_none:  # pydantic model_dump_json(exclude_none=True), as SGLang's final usage chunk
                if usage is not None:
                    d["usage"] = {k: v for k, v in usage.items() if v is not None}
            else:
                d["usage"] = usage
            return json.dumps(d)

        sent_tokens = 0
        sent_text = 0
        try:
            if req.finished and (req.finish_reason or {}).get("type") == "abort":
                fr = req.finish_reason
                await send(_openai_error_chunk(fr["message"], "BAD_REQUEST", 400))
                await send("[DONE]")
                await resp.write_eof()
                return resp
            if chat:
                await send(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                   "finish_reason": None, "matched_stop": None}]))
            while True:
                await req.queue.get()
                while not req.queue.empty():
                    req.queue.get_nowait()
                if req.completion_tokens > sent_tokens or req.finished:
                    sent_tokens = req.completion_tokens
                    delta = req.text[sent_text:]
                    sent_text = len(req.text)
                    fr = req.finish_reason if req.finished else None
                    usage = self._usage(req) if continuous else None
                    if chat:
                        if delta or not req.finished:
                            await send(chunk([{"index": 0, "delta": {"content": delta}, "logprobs": None,
                                               "finish_reason": None, "matched_stop": None}], usage))
                        if req.finished:
                            await send(chunk([{"index": 0, "delta": {}, "logprobs": None,
                                               "finish_reason": fr.get("type"), "matched_stop": fr.get("matched")}],
                                             usage))
                    else:
                        await send(chunk([{"index": 0, "text": delta, "logprobs": None,
                                           "finish_reason": fr.get("type") if fr else None,
                                           "matched_stop": fr.get("matched") if fr else None}], usage))
                if req.finished:
                    break
            if include_usage:
                await send(chunk([], self._usage(req), exclude_none=True))
            await send("[DONE]")
            await resp.write_eof()
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            req.aborted = True
            raise
        finally:
            if not req.finished:
                req.aborted = True
        return resp

    async def models(self, request):
        e = self.e
        name = e.args.served_model_name
        return _json({"object": "list", "data": [
            {"id": name, "object": "model", "created": int(e.created), "owned_by": "sglang", "root": name,
             "max_model_len": e.context_len}]})

    async def model_detail(self, request):
        e = self.e
        name = request.match_info["model"]
        if name != e.args.served_model_name:
            return _json({"error": {"message": f"The model '{name}' does not exist", "type": "invalid_request_error",
                                    "param": "model", "code": "model_not_found"}}, 404)
        return _json({"id": name, "object": "model", "created": int(e.created), "owned_by": "sglang", "root": name,
                      "max_model_len": e.context_len})

    async def metrics(self, request):
        e = self.e
        name = e.args.served_model_name
        # The scheduler's gauges and the tokenizer's counters and histograms carry
        # different label sets in SGLang.
        sl = {"engine_type": "unified", "model_name": name, "pp_rank": "0", "tp_rank": "0"}
        tl = {"model_name": name}
        out = Exposition()
        out.gauge("sglang:num_running_reqs", "The number of running requests.", sl, len(e.running))
        out.gauge("sglang:num_used_tokens", "The number of used tokens.", sl, sum(r.context for r in e.running))
        out.gauge("sglang:token_usage", "The token usage.", sl, e.token_usage())
        out.gauge("sglang:gen_throughput", "The generation throughput (token/s).", sl, e.last_gen_throughput)
        out.gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", sl, len(e.waiting))
        out.gauge("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", sl,
                  e.last_accept_len)
        out.counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", tl, e.prompt_tokens_total)
        out.counter("sglang:generation_tokens_total", "Number of generation tokens processed.", tl,
                    e.generation_tokens_total)
        out.counter("sglang:num_requests_total", "Number of requests processed.", tl, e.num_requests_total)
        out.histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", tl,
                      e.ttft_histogram)
        out.histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", tl,
                      e.itl_histogram)
        return web.Response(text=out.text(), content_type="text/plain",
                            headers={"X-Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[self.middleware], client_max_size=256 * 1024 * 1024)
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/health_generate", self.health)
        r.add_get("/ping", self.ping)
        r.add_get("/get_model_info", self.get_model_info)
        r.add_get("/get_server_info", self.get_server_info)
        r.add_get("/get_load", self.get_load)
        r.add_route("POST", "/generate", self.generate)
        r.add_route("PUT", "/generate", self.generate)
        r.add_get("/flush_cache", self.flush_cache)
        r.add_post("/flush_cache", self.flush_cache)
        r.add_post("/tokenize", self.tokenize)
        r.add_post("/v1/tokenize", self.tokenize)
        r.add_post("/detokenize", self.detokenize)
        r.add_post("/v1/detokenize", self.detokenize)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat_completions)
        r.add_get("/v1/models", self.models)
        r.add_get("/v1/models/{model:.*}", self.model_detail)
        if self.e.args.enable_metrics:
            r.add_get("/metrics", self.metrics)
        return app


# --------------------------------------------------------------------------- process


def run_server(args, sim) -> int:
    log = SimLogger()
    try:
        profile = M.load_profile(sim.profile)
    except (FileNotFoundError, ValueError) as ex:
        print(f"error: {ex}", file=sys.stderr)
        return 2
    try:
        # select() takes microsecond timeouts where epoll's are whole milliseconds: at a
        # small time scale a model step lasts well under a millisecond of wall time.
        return asyncio.run(_amain(args, sim, profile, log),
                           loop_factory=lambda: asyncio.SelectorEventLoop(selectors.SelectSelector()))
    except KeyboardInterrupt:
        return 0


async def _amain(args, sim, profile, log: SimLogger) -> int:
    engine = Engine(args, sim, profile, log)
    api = HttpApi(engine)
    app = api.build_app()
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=1024)
    try:
        await site.start()
    except OSError as ex:
        log.uvicorn("ERROR", f"[Errno {ex.errno}] error while attempting to bind on address "
                             f"('{args.host}', {args.port}): {(ex.strerror or str(ex)).lower()}")
        await runner.cleanup()
        return 1

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def http_ready():
        log.uvicorn("INFO", f"Started server process [{os.getpid()}]")
        log.uvicorn("INFO", "Waiting for application startup.")
        log.uvicorn("INFO", "Application startup complete.")
        log.uvicorn("INFO", f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")

    start_task = loop.create_task(engine.startup(http_ready))
    await stop.wait()
    engine.gracefully_exit = True
    log.uvicorn("INFO", "Shutting down")
    start_task.cancel()
    try:
        await asyncio.wait_for(site.stop(), timeout=0.5)
    except (asyncio.TimeoutError, Exception):
        pass
    log.uvicorn("INFO", "Waiting for application shutdown.")
    log.uvicorn("INFO", "Application shutdown complete.")
    log.uvicorn("INFO", f"Finished server process [{os.getpid()}]")
    log.flush()
    # Do not wait for in-flight streams (SGLang's kill_process_tree does not either).
    os._exit(0)
