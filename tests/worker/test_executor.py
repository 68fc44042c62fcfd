"""The preflight's words for a run, as a claim would have them (the point's pure decisions:
tests/core/test_point.py)."""


def preflight_of(example, catalog):
    """The preflight checks of an example sweep's first run, as a claim would have it, in
    words (no model path: the test reads the host's line, not the files)."""
    from pathlib import Path

    from benchmarks.catalog import load_catalog
    from runs.lifecycle import create_sweep
    from runs.worker.executor import RunExecutor
    from sweepcore.spec import load_spec_file

    spec = load_spec_file(Path(__file__).resolve().parents[2] / "examples" / example, load_catalog())
    sweep = create_sweep(spec)[0]
    sweep.llm.path = sweep.llm.draft_model_path = ""
    sweep.llm.save()
    run = sweep.runs.order_by("position").first()
    run.host = sweep.host  # what a claim sets
    executor = RunExecutor(run.pk, "test:1")
    executor.run = run
    return executor.preflight()


def test_the_preflight_says_a_cpu_host_in_words(catalog):
    assert "TP1 fits host local-cpu (CPU host, no GPUs)" in preflight_of("smollm2-cpu.yaml", catalog)
    checked = preflight_of("qwen3.6-27b-sm120.yaml", catalog)
    assert "TP1 fits host sim-8x-rtxpro6000 (8 × NVIDIA RTX PRO 6000 Blackwell)" in checked
