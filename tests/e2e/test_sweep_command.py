"""The `sweep` command as a user runs it: a real process, a terminal's view."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "qwen3.6-27b-sm120.yaml"


@pytest.mark.agnostic
@pytest.mark.slow
def test_the_command_line_exits_2_without_a_traceback(tmp_path):
    # A real process: what a user sees in a terminal, against a database with no catalog.
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n  host: [\n")
    env = {**os.environ, "SWEEPLAB_DATA_DIR": str(tmp_path / "var")}
    env.pop("DATABASE_URL", None)  # its own SQLite file, whatever the suite runs on
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    proc = subprocess.run(
        [sys.executable, "manage.py", "sweep", "validate", str(bad)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip() == f"{bad}: line 2, column 7: mapping values are not allowed here (malformed YAML)"
    proc = subprocess.run(
        [sys.executable, "manage.py", "sweep", "validate", str(EXAMPLE)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "host: unknown host 'sim-8x-rtxpro6000'; known hosts: none yet" in proc.stderr

