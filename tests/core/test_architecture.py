"""The architecture contracts of .importlinter hold: sweepcore imports no Django and
nothing of the web app, simengine imports nothing of the rest, and runs keeps its layers."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def test_every_import_contract_is_kept():
    # Static analysis of the source (nothing is imported, so no Django is needed) with the
    # repository's .importlinter; no cache, so the test leaves no files behind.
    proc = subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", 0 broken." in proc.stdout  # contracts were read and checked
