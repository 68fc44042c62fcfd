"""The scripts of bench/ as modules, for the core tests that use their pure parts (the
stub server's options and in-thread server, bench/validity.py's helpers)."""

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name):
    """bench/<name>.py as module ``bench_<name>``, loaded once per test session."""
    key = f"bench_{name}"
    if key in sys.modules:
        return sys.modules[key]
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(key, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))
