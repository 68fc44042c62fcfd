"""vLLM (`vllm serve` / `python -m vllm.entrypoints.openai.api_server`).

- Readiness: connection refused while loading, then `/health` 200.
- Limits: `/v1/models` `data[0].max_model_len`; KV capacity from `/metrics`
  `vllm:cache_config_info{num_gpu_blocks=…, block_size=…}` (blocks × block size).
- Speculation: `--speculative-config` takes JSON; the `{speculative_config}` placeholder
  is built here from the method's parameters (vLLM's name for the method and the parameter
  giving the draft length: sweepcore.methods). Accept length for one point comes from the
  deltas of `vllm:spec_decode_num_accepted_tokens_total` and
  `vllm:spec_decode_num_drafts_total`: 1 + Δaccepted / Δdrafts.
- Version: `GET /version`.
"""

import json

from prometheus_client.parser import text_string_to_metric_families

from sweepcore.engines.base import EngineAdapter, ServerLimits, get_json, get_text
from sweepcore.methods import engine_args

NGRAM = "ngram"  # vLLM's prompt-lookup speculation: no draft model, a lookup window instead


def parse_metrics(text):
    """Prometheus text exposition -> list of (sample name, labels dict, float value).

    Sample names are as exposed: a counter's ``_total`` (and ``_created``) samples keep
    their suffix, whatever its ``# TYPE`` line calls the family.  Raises ValueError for
    text that is not the exposition format.
    """
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def metric_sum(samples, name):
    values = [v for n, _, v in samples if n == name]
    return sum(values) if values else None


class VLLMAdapter(EngineAdapter):
    kind = "vllm"
    api = "openai-completions"

    def extra_body(self, max_tokens, server_info):
        # Every request generates exactly max_tokens, so points are comparable.
        return {"ignore_eos": True}

    def placeholder_values(self, values):
        filled = values.as_dict()
        args = engine_args(values.method, self.kind)
        if args is not None and args.draft_length:
            length = values.params[args.draft_length]
            config = {"method": args.name, "num_speculative_tokens": length}
            if args.name == NGRAM:
                config["prompt_lookup_max"] = length
            if values.draft_model_path and args.name != NGRAM:
                config["model"] = values.draft_model_path
            filled["speculative_config"] = json.dumps(config, separators=(",", ":"))
        return filled

    def limits(self, base_url, argv=(), log_text=""):
        kv = None
        try:
            for name, labels, _ in parse_metrics(get_text(base_url + "/metrics")):
                if name == "vllm:cache_config_info" and "num_gpu_blocks" in labels:
                    kv = int(labels["num_gpu_blocks"]) * int(labels.get("block_size", "16"))
        except (OSError, ValueError):
            kv = None
        return ServerLimits(context_length=self.context_length(base_url), kv_capacity_tokens=kv)

    def version(self, base_url):
        return str(get_json(base_url + "/version").get("version", ""))

    def spec_snapshot(self, base_url):
        samples = parse_metrics(get_text(base_url + "/metrics"))
        return {
            "accepted": metric_sum(samples, "vllm:spec_decode_num_accepted_tokens_total"),
            "drafts": metric_sum(samples, "vllm:spec_decode_num_drafts_total"),
        }

    def accept_length(self, before, after, load_result):
        if not before or not after or None in (before["drafts"], after["drafts"]):
            return None
        drafts = after["drafts"] - before["drafts"]
        if drafts <= 0:
            return None
        return 1 + (after["accepted"] - before["accepted"]) / drafts
