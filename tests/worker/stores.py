"""A claimed run's store on the simulated 8-GPU host, for the tests of the worker's writes."""

from benchmarks.catalog import load_catalog
from runs.lifecycle import create_sweep, launch_sweep
from runs.worker.store import RunStore
from sweepcore.spec import validate


def claimed_store(name, workloads=("fibonacci",), worker="w:1", **changes):
    """The store of the one run of a new sweep `name` (autoregressive TP1 on `workloads`),
    launched without sending its task and claimed by `worker`."""
    spec = validate(
        {"name": name, "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
         "tp": [1], "methods": ["autoregressive"], "workloads": list(workloads), **changes},
        load_catalog(),
    )
    sweep, _ = create_sweep(spec)
    (run_id,) = launch_sweep(sweep, enqueue=False)
    store = RunStore(run_id, worker)
    assert store.claim()
    return store
