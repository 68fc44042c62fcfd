"""What every engine adapter knows, and the argv builder they share.

An argv is a list of strings handed to ``subprocess.Popen`` (never a shell). Templates
come from the Engine row (admin-only); every value put into them is typed and checked
here first, and only plain ``{name}`` placeholders from PLACEHOLDERS are allowed."""

import string
from dataclasses import dataclass, field

import requests

from sweepcore.methods import AUTOREGRESSIVE, PARAM_TYPES

PLACEHOLDERS = {
    "python": str,
    "model_path": str,
    "model_name": str,  # the name requests use (vLLM's --served-model-name)
    "draft_model_path": str,
    "host": str,
    "port": int,
    "tp": int,
    "context_length": int,
    **PARAM_TYPES,  # the methods' parameters (sweepcore.methods)
    "speculative_config": str,  # built by the vLLM adapter
}

# Short timeouts: these calls are probes between points, not measurements.
PROBE_TIMEOUT_S = 5


class ArgvError(ValueError):
    """A template or a value that must not reach a command line."""


@dataclass(frozen=True)
class LaunchValues:
    """Everything a configuration's argv can refer to."""

    python: str
    model_path: str
    host: str
    port: int
    tp: int
    context_length: int
    method: str = AUTOREGRESSIVE
    params: dict = field(default_factory=dict)
    draft_model_path: str = ""
    model_name: str = ""

    def as_dict(self):
        values = {
            "python": self.python,
            "model_path": self.model_path,
            "model_name": self.model_name,
            "draft_model_path": self.draft_model_path,
            "host": self.host,
            "port": self.port,
            "tp": self.tp,
            "context_length": self.context_length,
        }
        values.update(self.params)
        return values


@dataclass(frozen=True)
class ServerLimits:
    context_length: int | None
    kv_capacity_tokens: int | None


def check_value(name, value):
    kind = PLACEHOLDERS.get(name)
    if kind is None:
        raise ArgvError(f"{{{name}}} is not a known placeholder; known: {', '.join(sorted(PLACEHOLDERS))}")
    if kind is int:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ArgvError(f"{{{name}}} must be a non-negative integer, got {value!r}")
        return str(value)
    if not isinstance(value, str) or not value or "\x00" in value or "\n" in value:
        raise ArgvError(f"{{{name}}} must be a non-empty single-line string, got {value!r}")
    return value


def render(template, values):
    """Fill one template (a list of strings) with checked values."""
    if not isinstance(template, list) or not all(isinstance(item, str) for item in template):
        raise ArgvError("an argv template must be a list of strings")
    argv = []
    formatter = string.Formatter()
    for item in template:
        out = []
        for literal, name, spec, conversion in formatter.parse(item):
            out.append(literal)
            if name is None:
                continue
            if spec or conversion or not name.isidentifier():
                raise ArgvError(f"{item!r}: only plain {{name}} placeholders are allowed")
            if name not in values:
                raise ArgvError(f"{item!r}: {{{name}}} has no value for this configuration")
            out.append(check_value(name, values[name]))
        argv.append("".join(out))
    return argv


class EngineAdapter:
    """The interface every engine kind implements. Methods that talk to a server take
    its base URL (``http://127.0.0.1:PORT``) and return plain values."""

    kind = ""
    api = "openai-completions"  # how the load generator talks to it
    health_path = "/health"
    ready_log_line = None  # a line the server logs once it serves, if it has one
    log_rules = ()  # extra sweepcore.failures.Rule signatures, tried before the common ones
    # Its Prometheus /metrics names (a sweepcore.servermetrics.MetricNames), read around
    # every point for the server's own view of it; None: the engine has no /metrics.
    server_metrics = None
    # True where the answers carry no per-request speculative statistics (vLLM): a point's
    # accept length is then its /metrics counter deltas (never a lifetime average).
    speculation_from_server_metrics = False

    def argv(self, template, method_args, values):
        """The command line for one configuration: the template, then the method's
        fragment. Autoregressive has no fragment."""
        filled = self.placeholder_values(values)
        argv = render(template, filled)
        if values.method != AUTOREGRESSIVE:
            fragment = method_args.get(values.method)
            if fragment is None:
                raise ArgvError(f"this engine defines no arguments for method {values.method!r}")
            argv += render(fragment, filled)
        return argv

    def placeholder_values(self, values):
        return values.as_dict()

    def extra_body(self, max_tokens, server_info):
        """Fields added to every generation request (beyond prompt and max tokens).
        `server_info`: what `server_info` said about the running server."""
        return {}

    # --- readiness ----------------------------------------------------------------

    def is_ready(self, base_url, log_text):
        """(ready, detail). Connection refused and 503 mean: still loading."""
        try:
            response = requests.get(base_url + self.health_path, timeout=PROBE_TIMEOUT_S)
        except requests.ConnectionError:
            return False, "not listening yet"
        except requests.Timeout:
            return False, f"{self.health_path} did not answer in {PROBE_TIMEOUT_S}s"
        if response.status_code != 200:
            return False, f"{self.health_path} answered {response.status_code}"
        if self.ready_log_line and self.ready_log_line not in log_text:
            return False, f"{self.health_path} is 200 but the log has no {self.ready_log_line!r} yet"
        return True, "ready"

    def healthy(self, base_url, timeout=PROBE_TIMEOUT_S):
        """(ok, detail) of one health probe between points."""
        try:
            response = requests.get(base_url + self.health_path, timeout=timeout)
        except requests.ConnectionError as exc:
            return False, f"connection refused or lost ({exc.__class__.__name__})"
        except requests.Timeout:
            return False, f"{self.health_path} did not answer within {timeout}s"
        if response.status_code != 200:
            return False, f"{self.health_path} answered HTTP {response.status_code}"
        return True, "ok"

    #: (method, path) that empties the server's prefix cache between two probes of a
    #: capacity search, so each starts cold; None where the engine has no such call.
    cache_reset = None
    #: What to tell the operator when that call is not there (HTTP 404).
    cache_reset_hint = ""

    def reset_cache(self, base_url, timeout=PROBE_TIMEOUT_S):
        """Empty the server's prefix cache; what was done, in words ("" when the engine
        has no such call). A refusal is said, not raised: the probe still runs, warm."""
        if self.cache_reset is None:
            return ""
        method, path = self.cache_reset
        try:
            response = requests.request(method, base_url + path, timeout=timeout)
        except requests.RequestException as exc:
            return f"could not reset the cache ({method} {path}): {exc.__class__.__name__}"
        if response.status_code != 200:
            hint = f"; {self.cache_reset_hint}" if response.status_code == 404 and self.cache_reset_hint else ""
            return (f"could not reset the cache ({method} {path}): HTTP {response.status_code} "
                    f"{response.text[:200]}{hint}")
        try:
            refused = response.json().get("success") is False  # vLLM answers 200 {"success": false}
        except (ValueError, AttributeError):
            refused = False
        if refused:
            return f"could not reset the cache ({method} {path}): the server said {response.text[:200]}"
        return f"cache reset ({method} {path})"

    # --- what the server says about itself ------------------------------------------

    def limits(self, base_url, argv=(), log_text=""):
        """What the running server can hold. `argv`: the command line it was launched
        with; `log_text`: its log since that launch."""
        return ServerLimits(context_length=self.context_length(base_url), kv_capacity_tokens=None)

    def context_length(self, base_url):
        """The context length the server enforces: /v1/models data[0].max_model_len."""
        data = get_json(base_url + "/v1/models")
        models = data.get("data") or []
        if models and isinstance(models[0].get("max_model_len"), int):
            return models[0]["max_model_len"]
        return None

    def version(self, base_url):
        return ""

    def server_info(self, base_url, log_text=""):
        """Facts about the running server worth keeping with the run (`log_text`: its
        log since launch)."""
        return {}

    # --- one point --------------------------------------------------------------------

    # False when the stream carries no token counts: the executor then checks its chunk
    # count against one non-streamed request per point (`check_counts`).
    streams_usage = True

    def check_counts(self, base_url, model, prompt, max_tokens, extra_body):
        """(prompt_tokens, completion_tokens) the server reports for one non-streamed
        request with the same body as a measured one."""
        raise NotImplementedError(f"{self.kind} streams its usage; no check request is needed")

    def relabel_failures(self, results, log_text):
        """Correct, in place, the error kinds of requests whose real cause only the
        server's log of this point (`log_text`) shows."""

    def server_reported(self, log_text, method):
        """The server's own figures for one point, read from its log of that point:
        point fields (e.g. ``server_decode_tok_s``) and extras. Empty when it has none."""
        return {}


def get_json(url, timeout=PROBE_TIMEOUT_S):
    response = requests.get(url, timeout=timeout)
    response.raise_for_status()
    return response.json()


def get_text(url, timeout=PROBE_TIMEOUT_S):
    response = requests.get(url, timeout=timeout)
    response.raise_for_status()
    return response.text
