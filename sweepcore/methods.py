"""The decoding methods Sweeplab knows: ONE registry. A new method touches this file only.

Each entry says everything the rest of the code asks about a method:

- its name (stored in Run.method / KnownFailure.method, written in specs) and its label
  (benchmarks.models.Method, the Django choices, is built from these);
- its parameters: type, default, and whether a spec sweeps them (one configuration per
  value) or gives one value for all (sweepcore.spec validates them, sweepcore.plan expands
  them, the engines' argv placeholders are typed by them);
- the engine kinds that can run it and how each one launches it (``EngineArgs``): the argv
  fragment appended to the engine's template, and for vLLM the method and draft length of
  its ``--speculative-config`` JSON (sweepcore.engines.vllm builds it);
- how charts show it: a colour (hue, saturation) and the parameter that sets how far it
  looks ahead, plotted on the accept-length charts (runs.results.charts);
- how result files name it (sweepcore.importers): SGLang's ``speculative_algorithm`` and
  the ``server_info`` fields that carry its parameters.
"""

import json
from dataclasses import dataclass, field

AUTOREGRESSIVE = "autoregressive"
# Imported results only: speculative decoding whose algorithm has no method of its own here
# (EAGLE, MTP, n-gram ...) or that the file does not name.
SPECULATIVE = "speculative"

# Engine kinds (benchmarks.models.EngineKind values; sweepcore.engines has an adapter each).
SGLANG = "sglang"
VLLM = "vllm"
LLAMACPP = "llamacpp"
SIMULATED = "simulated"


@dataclass(frozen=True)
class Param:
    """One parameter of a method. Every parameter today is a positive integer: the spec
    validates it as one and the argv builder checks its ``type``."""

    name: str
    swept: bool  # a list, one configuration per value; else one scalar for all of them
    default: int | None = None  # None: required
    type: type = int


@dataclass(frozen=True)
class EngineArgs:
    """How one engine kind launches a method.

    ``fragment``: the flags appended to the engine's argv template for this method. The
    fragment actually launched is the Engine row's ``method_args`` (admin data: a host runs
    only what an admin wrote); the demo engines are seeded with these. ``name``: the
    engine's own name for the method (SGLang's ``--speculative-algorithm``, which result
    files carry too; vLLM's ``speculative_config.method``). ``config_keys``: for an engine
    that takes speculation as one JSON value (vLLM's ``--speculative-config``), which
    parameter fills which key of it, as (parameter, key) pairs."""

    fragment: tuple = ()
    name: str = ""
    config_keys: tuple = ()


@dataclass(frozen=True)
class Lookahead:
    """The parameter that sets how far a speculative method looks ahead (the x axis of its
    accept-length chart) and how the chart names it."""

    param: str
    label: str


@dataclass(frozen=True)
class DecodingMethod:
    """One entry of the registry: what the module docstring lists."""

    name: str
    label: str
    params: tuple = ()
    engines: dict = field(default_factory=dict)  # engine kind -> EngineArgs: the kinds that can run it
    colour: tuple | None = None  # (hue, saturation %) in charts; None: the colour of any other method
    lookahead: Lookahead | None = None
    # Result file server_info field -> parameter, for a method result files name by its SGLang
    # name (server_info.speculative_algorithm); None: the importers never name this method.
    imported_params: dict | None = None
    launchable: bool = True  # False: only imported results carry it
    # A rule between parameters, checked per configuration: (test, what it requires).
    # Configurations of a sweep that break it are left out of the plan, and a method whose
    # every combination breaks it is refused by the spec.
    rule: tuple | None = None

    @property
    def param_names(self):
        return tuple(p.name for p in self.params)


def _sglang(algorithm, *flags):
    """SGLang's (and simengine's) flags for a speculative method: its algorithm by name,
    then its parameters."""
    return EngineArgs(("--speculative-algorithm", algorithm, *flags), name=algorithm)


def _vllm(config_method, *config_keys):
    """vLLM's flags: the speculation as one JSON value, built by sweepcore.engines.vllm
    from the (parameter, key) pairs."""
    return EngineArgs(("--speculative-config", "{speculative_config}"), name=config_method, config_keys=config_keys)


# simengine takes SGLang's flags: both kinds launch a method the same way.
_DFLASH_SGLANG = _sglang("DFLASH", "--speculative-num-draft-tokens", "{block_size}")
_DDTREE_SGLANG = _sglang(
    "DDTREE", "--speculative-ddtree-budget", "{budget}", "--speculative-ddtree-topk-cap", "{topk_cap}"
)

REGISTRY = (
    DecodingMethod(
        name=AUTOREGRESSIVE,
        label="Autoregressive",
        engines={kind: EngineArgs() for kind in (SGLANG, VLLM, LLAMACPP, SIMULATED)},
        colour=(215, 12),  # slate grey
    ),
    DecodingMethod(
        name="dflash",
        label="DFlash (linear speculation)",
        params=(Param("block_size", swept=True),),
        engines={SGLANG: _DFLASH_SGLANG, SIMULATED: _DFLASH_SGLANG, VLLM: _vllm("dflash", ("block_size", "num_speculative_tokens"))},
        colour=(212, 78),  # blue
        lookahead=Lookahead("block_size", "DFlash block size"),
        imported_params={"speculative_num_draft_tokens": "block_size"},
    ),
    DecodingMethod(
        name="ddtree",
        label="DDTree (tree speculation)",
        params=(Param("budget", swept=True), Param("topk_cap", swept=False, default=8)),
        engines={SGLANG: _DDTREE_SGLANG, SIMULATED: _DDTREE_SGLANG},
        colour=(24, 88),  # orange
        lookahead=Lookahead("budget", "DDTree budget"),
        imported_params={"speculative_ddtree_budget": "budget", "speculative_ddtree_topk_cap": "topk_cap"},
    ),
    DecodingMethod(
        name="prompt-lookup",
        label="Prompt lookup",
        params=(Param("num_pred_tokens", swept=True),),
        engines={
            LLAMACPP: EngineArgs(
                ("--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", "{num_pred_tokens}")
            ),
        },
        colour=(275, 55),  # purple
    ),
    # vLLM's prompt lookup: drafts copied from an earlier occurrence in the prompt of the
    # last n tokens, n from prompt_lookup_max down to prompt_lookup_min (vLLM's
    # SpeculativeConfig; it defaults both to 5 when neither is given).
    DecodingMethod(
        name="ngram",
        label="N-gram (prompt lookup)",
        params=(
            Param("num_speculative_tokens", swept=True),
            Param("prompt_lookup_max", swept=True, default=4),
            Param("prompt_lookup_min", swept=True, default=2),
        ),
        engines={
            VLLM: _vllm(
                "ngram", ("num_speculative_tokens", "num_speculative_tokens"),
                ("prompt_lookup_max", "prompt_lookup_max"), ("prompt_lookup_min", "prompt_lookup_min"),
            ),
        },
        colour=(330, 60),  # pink
        lookahead=Lookahead("num_speculative_tokens", "n-gram speculative tokens"),
        rule=(lambda p: p["prompt_lookup_min"] <= p["prompt_lookup_max"], "prompt_lookup_min <= prompt_lookup_max"),
    ),
    DecodingMethod(
        name=SPECULATIVE,
        label="Speculative (other or unnamed algorithm)",
        launchable=False,
    ),
)

METHODS = {m.name: m for m in REGISTRY}
# What a spec may name: the launchable methods and their parameters (sweepcore.spec).
METHOD_PARAMS = {m.name: m.params for m in REGISTRY if m.launchable}
LAUNCHABLE = tuple(METHOD_PARAMS)
# Every parameter name of any method, first use first: the keys a configuration rule may give.
PARAM_NAMES = tuple(dict.fromkeys(p.name for m in REGISTRY for p in m.params))
PARAM_TYPES = {p.name: p.type for m in REGISTRY for p in m.params}


def constant_name(name):
    """The Python name of a method's constant (``prompt-lookup`` -> ``PROMPT_LOOKUP``)."""
    return name.upper().replace("-", "_")


def engine_args(method, engine_kind):
    """How an engine kind launches a method, or None when the registry says it cannot."""
    entry = METHODS.get(method)
    return entry.engines.get(engine_kind) if entry is not None else None


def methods_for(engine_kind):
    """The methods an engine kind can run, in registry order."""
    return tuple(m.name for m in REGISTRY if engine_kind in m.engines)


def imported_method(algorithm):
    """The method a result file's speculative algorithm (SGLang's name, any case) stands
    for, or None."""
    name = str(algorithm).upper()
    return next(
        (m for m in REGISTRY if m.imported_params is not None and SGLANG in m.engines and m.engines[SGLANG].name == name),
        None,
    )


def config_label(method, params, tp=None):
    """How a configuration is named in tables, charts, the admin and messages: the method,
    its parameters (sorted by name) and the TP size, e.g. ``ddtree budget=15 topk_cap=8 TP1``.

    ``params``: a dict, or its canonical JSON (``Run.params_key``, ``KnownFailure.params_key``),
    so that a query of keys alone is labelled here too and no page prints the JSON."""
    if isinstance(params, str):
        params = json.loads(params) if params else {}
    values = " ".join(f"{k}={v}" for k, v in sorted((params or {}).items()))
    parts = [method, values] + ([f"TP{tp}"] if tp is not None else [])
    return " ".join(part for part in parts if part)
