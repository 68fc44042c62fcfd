"""SGLang (`python -m sglang.launch_server`).

- Readiness: it listens only once weights are loaded (connection refused before), answers
  `/health` 200 when the scheduler responds, and logs "The server is fired up and ready
  to roll!" after its warmup request.
- Limits: `/v1/models` `data[0].max_model_len`; KV capacity `/get_server_info`
  `max_total_num_tokens`.
- Speculation per point: the native `/generate` answers carry `meta_info.spec_verify_ct`
  and `completion_tokens`: sweepcore.metrics computes accept length = Σ completion_tokens /
  Σ spec_verify_ct over the point's own requests (never `avg_spec_accept_length`, a
  server-lifetime average). Its `/metrics` (only with `--enable-metrics`) gives the
  server's own view of each point (sweepcore.servermetrics).
"""

from sweepcore import servermetrics
from sweepcore.engines.base import EngineAdapter, ServerLimits, get_json


class SGLangAdapter(EngineAdapter):
    kind = "sglang"
    api = "sglang-generate"
    cache_reset = ("POST", "/flush_cache")
    ready_log_line = "The server is fired up and ready to roll!"
    server_metrics = servermetrics.SGLANG_METRICS  # served with --enable-metrics only

    def extra_body(self, max_tokens, server_info):
        # Every request generates exactly max_new_tokens, so points are comparable.
        return {"ignore_eos": True}

    def limits(self, base_url, argv=(), log_text=""):
        info = self.server_info(base_url)
        kv = info.get("max_total_num_tokens")
        return ServerLimits(
            context_length=self.context_length(base_url),
            kv_capacity_tokens=kv if isinstance(kv, int) else None,
        )

    def server_info(self, base_url, log_text=""):
        return get_json(base_url + "/get_server_info")

    def version(self, base_url):
        return str(self.server_info(base_url).get("version", ""))
