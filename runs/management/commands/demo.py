"""`python manage.py demo`: queue the four demo sweeps of `make run` and say where to watch.

1. simulated: examples/qwen3.6-27b-sm120.yaml on sim-8x-rtxpro6000, with the engine
   `sglang-sim-demo` (simengine at 1/10 of real time, results stored in model time)
   instead of the file's, and fewer budgets and prompt lengths (SIM_DEMO_OVERRIDES);
2. real: examples/smollm2-cpu.yaml on local-cpu, llama.cpp serving SmolLM2-135M on this
   machine's CPU. Both hosts are this one machine, and a sweep measured while another
   runs measures the other one too: the real sweep starts when the simulated one is done
   (runs.lifecycle.start_after);
3. vllm: examples/smollm2-vllm-cpu.yaml on local-cpu, real vLLM (its CPU build, in its
   own environment) serving the same model converted for it, autoregressive against
   n-gram speculation; it starts when the real llama.cpp one is done;
4. capacity: examples/capacity-search-sim.yaml on sim-8x-rtxpro6000 with `sglang-sim-demo`:
   a capacity search per configuration (autoregressive against DDTree budget 15) under a
   per-user speed SLO; it starts when the vLLM one is done.

A demo whose engine's own environment is missing (vLLM's, where `scripts/engines` could not
build it) is left out, in one line that says why; the next demo waits for the one before it.

Idempotent: a demo sweep already stored is not created again. One left unfinished (the
last `make run` was stopped in the middle) is resumed; a finished one is only shown.
They start as soon as `serve` starts the workers.
"""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks.catalog import load_catalog
from benchmarks.models import Engine, Sweep, SweepStatus
from runs.lifecycle import create_sweep, launch_sweep, resume_sweep, start_after
from runs.worker.executor import engine_python
from sweepcore.spec import SpecError, load_yaml, validate

EXAMPLES = Path(settings.BASE_DIR) / "examples"
SIM_DEMO_ENGINE = "sglang-sim-demo"
# The simulated demo is the example file at 1/10 of real time (so that its chunks can be
# timed: see seed_demo.DEMO_TIME_SCALE), cut down to run in minutes: the budgets that crash
# and two that run, four prompt lengths (one skipped by the plan, one beyond TP1's KV
# cache), at most 30 requests per point (the fastest points need about 25 for a 1 s window).
SIM_DEMO_OVERRIDES = {
    "engine": SIM_DEMO_ENGINE,
    "methods": ["autoregressive", {"dflash": {"block_size": [16]}},
                {"ddtree": {"budget": [8, 12, 15, 64], "topk_cap": 8}}],
    "workloads": ["fibonacci", {"long-context": {"prompt_tokens": [3000, 16000, 30000, 32700]}}],
    "until_stable": {"metric": "decode_tok_s", "rel_ci": 0.05, "min_requests": 5, "max_requests": 30},
}
DEMOS = (
    ("simulated", EXAMPLES / "qwen3.6-27b-sm120.yaml", SIM_DEMO_OVERRIDES),
    ("real", EXAMPLES / "smollm2-cpu.yaml", {}),
    ("vllm", EXAMPLES / "smollm2-vllm-cpu.yaml", {}),
    ("capacity", EXAMPLES / "capacity-search-sim.yaml", {"engine": SIM_DEMO_ENGINE}),
)
UNFINISHED = (SweepStatus.QUEUED, SweepStatus.RUNNING)


def missing_engine(name):
    """Why the engine `name` cannot launch here, or "" when it can: its own interpreter
    (an environment of its own, e.g. vLLM's) is missing."""
    python = engine_python(Engine.objects.get(name=name))
    if not python or Path(python).exists():
        return ""
    return (f"{python} is missing: its environment was not built (`make engines`; "
            f"var/engines/build.log says why a build failed)")


def demo_spec(path, overrides):
    data = load_yaml(path.read_text(encoding="utf-8"), source=str(path))
    data.update(overrides)
    return validate(data, load_catalog())


class Command(BaseCommand):
    help = ("Queue the demo sweeps (a simulated SM120 one, then a real llama.cpp one, then a real vLLM one, then "
            "a simulated capacity search) unless already there.")

    def handle(self, *args, **options):
        lines = []
        before = None  # (label, sweep) of the demo this one waits for
        for label, path, overrides in DEMOS:
            try:
                spec = demo_spec(path, overrides)
            except SpecError as exc:
                raise CommandError(f"demo sweep {path.name} is not valid here (run seed_demo first?):\n{exc}") from None
            why = missing_engine(spec.engine)
            if why:
                lines.append(f"  {label:<9}  skipped: {why}")
                continue
            waits = before is not None and before[1].status in UNFINISHED
            sweep = Sweep.objects.filter(name=spec.name, engine__name=spec.engine).order_by("-pk").first()
            if sweep is None:
                sweep, the_plan = create_sweep(spec)
                launch_sweep(sweep, enqueue=not waits)
                totals = the_plan.totals
                if spec.search:
                    state = f"queued, {totals['runs']} runs, each a capacity search"
                else:
                    state = (f"queued, {totals['runs']} runs and {totals['points']} points "
                             f"({totals['skipped_points']} skipped by plan)")
            elif sweep.status in UNFINISHED:
                # `make run` has just started the workers: whatever the last ones held is lost.
                resume_sweep(sweep, enqueue=not waits, workers_restarted=True)
                state = "unfinished: resumed"
            elif sweep.status == SweepStatus.DRAFT:
                launch_sweep(sweep, enqueue=not waits)
                state = "queued"
            else:
                waits = False
                state = f"{sweep.status} already (clone it in the builder to run it again)"
            if waits:
                other_label, other = before
                start_after(sweep, other)
                state += f"; starts when the {other_label} one is done"
            sweep.refresh_from_db(fields=["status"])
            before = (label, sweep)
            lines.append(f"  {label:<9}  {settings.SWEEPLAB_BASE_URL}{sweep.get_absolute_url()}  {sweep.name}: {state}")
        self.stdout.write("Demo sweeps (they start when the workers are up):\n" + "\n".join(lines))
