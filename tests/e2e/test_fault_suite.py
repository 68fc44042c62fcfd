"""The fault suite (bench/faults.py) runs as anyone would run it: its own PostgreSQL,
Redis, web server and worker, one simulated sweep met by a fault. CI runs the case that
crosses the most of the recovery: a server frozen mid-stream ends its run crashed (hung)
within the stall timeout and a probe, and resume measures the point the hang cut off, so
that the sweep finishes with nothing lost, nothing stored twice and no process left. The
other faults have tests of their own (test_outages_real, test_hangs_and_disk,
test_sweep_worker's takeover, tests/web/test_input_limits); `make faults` runs them all."""

import json
import subprocess
import sys

import pytest

from tests.e2e.processes import ROOT, unavailable

pytestmark = [pytest.mark.slow, pytest.mark.agnostic]


def test_a_frozen_server_costs_the_sweep_nothing_once_resumed(tmp_path):
    out = tmp_path / "faults.json"
    done = subprocess.run([sys.executable, "bench/faults.py", "--only", "server-sigstop", "--json", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode == 2:
        unavailable(done.stderr.strip())
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["fault"] == "server-sigstop"
    assert (row["finished"], row["lost"], row["duplicated"], row["stuck"], row["left"]) == (True, 0, 0, 0, 0), row
    assert "its run ended crashed/hung" in row["note"], row
    assert row["recovered_by"].startswith("resume") and row["recovery_s"] is not None
    line = next(line for line in done.stdout.splitlines() if line.startswith("| server-sigstop "))
    assert [cell.strip() for cell in line.split("|")[2:7]] == ["yes", "0", "0", "0", "0"], line
