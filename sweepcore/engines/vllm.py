"""vLLM (`vllm serve` / `python -m vllm.entrypoints.openai.api_server`).

- Readiness: connection refused while loading, then `/health` 200.
- Limits: `/v1/models` `data[0].max_model_len`; KV capacity from `/metrics`
  `vllm:cache_config_info{kv_cache_size_tokens=…}` (or `num_gpu_blocks` × `block_size`).
- Context refusal: a prompt longer than `--max-model-len` gets HTTP 400 JSON, streamed
  or not ("This model's maximum context length is 2048 tokens. However, your prompt
  contains at least 2049 input tokens…": sweepcore.loadgen classifies it
  `context_overflow`); a prompt that fits but leaves less than `max_tokens` is clamped
  silently (200, `finish_reason: length`): the context cap keeps prompt + max new tokens
  inside the context first.
- Teardown: the API server's `VLLM::EngineCore` and `VLLM::Worker` processes share its
  process group, and outlive a SIGKILL of the API server alone (70–90 % CPU, orphaned):
  sweepcore.server stops the whole group.
- Speculation: `--speculative-config` takes JSON; the `{speculative_config}` placeholder
  is built here from the method's parameters (vLLM's name for the method and which
  parameter fills which key: sweepcore.methods). The answers carry no speculative
  statistics: a point's accept length and per-position acceptance rates come from the
  deltas of its `/metrics` counters over that point (sweepcore.servermetrics):
  1 + Δ`spec_decode_num_accepted_tokens` / Δ`spec_decode_num_drafts`.
- Version: `GET /version`.
"""

import json

from sweepcore import servermetrics
from sweepcore.engines.base import EngineAdapter, ServerLimits, get_json
from sweepcore.methods import engine_args

NGRAM = "ngram"  # vLLM's prompt-lookup speculation: no draft model, a lookup window instead


def kv_capacity(snapshot):
    """Tokens the KV cache holds, from `vllm:cache_config_info`'s labels (a
    sweepcore.servermetrics.Snapshot): its own `kv_cache_size_tokens` (vLLM 0.32 on the
    CPU: 46592 for 1 GiB of SmolLM2), else `num_gpu_blocks` x `block_size` (older
    versions), else None."""
    for labels, _ in snapshot.series.get("vllm:cache_config_info", ()):
        if str(labels.get("kv_cache_size_tokens", "")).isdigit():
            return int(labels["kv_cache_size_tokens"])
        if str(labels.get("num_gpu_blocks", "")).isdigit():
            return int(labels["num_gpu_blocks"]) * int(labels.get("block_size", "16"))
    return None


class VLLMAdapter(EngineAdapter):
    kind = "vllm"
    api = "openai-completions"
    server_metrics = servermetrics.VLLM_METRICS
    speculation_from_server_metrics = True
    # A development route: served only with VLLM_SERVER_DEV_MODE=1 in the engine's environment.
    cache_reset = ("POST", "/reset_prefix_cache")
    cache_reset_hint = "vLLM serves it only with VLLM_SERVER_DEV_MODE=1 in the engine's environment"

    def extra_body(self, max_tokens, server_info):
        # Every request generates exactly max_tokens, so points are comparable; greedy, as
        # `vllm bench serve` sends, so that a configuration's drafts meet the same answer
        # each time (sampling at the model's default temperature made n-gram acceptance a
        # matter of luck).
        return {"ignore_eos": True, "temperature": 0.0}

    def placeholder_values(self, values):
        filled = values.as_dict()
        args = engine_args(values.method, self.kind)
        if args is not None and args.config_keys:
            config = {"method": args.name}
            config.update((key, values.params[param]) for param, key in args.config_keys)
            if values.draft_model_path and args.name != NGRAM:
                config["model"] = values.draft_model_path
            filled["speculative_config"] = json.dumps(config, separators=(",", ":"))
        return filled

    def limits(self, base_url, argv=(), log_text=""):
        try:
            kv = kv_capacity(servermetrics.scrape(base_url))
        except servermetrics.ScrapeError:
            kv = None
        return ServerLimits(context_length=self.context_length(base_url), kv_capacity_tokens=kv)

    def version(self, base_url):
        return str(get_json(base_url + "/version").get("version", ""))
