"""``manage.py loadtest`` against the stub server process (no database)."""

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sweepcore.metrics import INTERVAL_METRICS, SUMMARY_FIELDS
from tests.e2e.processes import stub
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def manage(*args):
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), "loadtest", *args],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.agnostic
@pytest.mark.slow
def test_json_output_is_the_point_object_with_exact_prompt_tokens():
    with stub("--ttft-ms", "3", "--itl-ms", "1") as url:
        out, err = StringIO(), StringIO()
        call_command("loadtest", "--base-url", url, "--api", "openai-completions",
                     "--prompt-tokens", "700", "--max-tokens", "12", "--concurrency", "3",
                     "--num-requests", "6", "--warmup", "2", "--json", stdout=out, stderr=err)
        s = json.loads(out.getvalue())
        evidence = ["n", *(f"{m}_ci" for m in INTERVAL_METRICS), "validity", "validity_reasons"]
        assert list(s) == [f for f in SUMMARY_FIELDS if f != "intervals"] + evidence
        assert s["completed"] == s["n"] == 6 and s["failed"] == 0
        # Six requests: enough for an interval; the window is far under a second.
        lo, hi = s["median_ttft_ms_ci"]
        assert lo <= s["median_ttft_ms"] <= hi
        # (suspect at least: on a busy machine other rules may add to it)
        assert s["validity"] in ("suspect", "invalid") and "short_window" in [r["code"] for r in s["validity_reasons"]]
        assert s["total_input_tokens"] == 6 * 700  # server-counted, equal to the target
        assert s["total_output_tokens"] == 72
        assert s["median_ttft_ms"] > 2.5 and s["errors"] == {}
        assert "700 tokens by tokenize" in err.getvalue()

        out = StringIO()
        call_command("loadtest", "--base-url", url, "--api", "sglang-generate", "--workload", "fibonacci",
                     "--max-tokens", "8", "--concurrency", "2", "--num-requests", "4", stdout=out)
        table = out.getvalue()
        assert "Successful requests" in table and "TTFT" in table and "ITL" in table
        assert "Verdict" in table and "(n = 4)" in table and "few_requests: only 4 requests completed" in table
        assert "Traceback" not in table


@pytest.mark.agnostic
@pytest.mark.slow
def test_server_not_there_and_no_tokenizer_are_clear_errors():
    r = manage("--base-url", f"http://127.0.0.1:{free_port()}", "--api", "openai-chat",
               "--prompt-tokens", "100", "--max-tokens", "8", "--concurrency", "1", "--num-requests", "1")
    assert r.returncode in (1, 2)
    assert "connection refused" in r.stderr and "Traceback" not in r.stderr + r.stdout
    with stub("--tokenize", "none") as url:
        with pytest.raises(CommandError, match="no tokenizer endpoint"):
            call_command("loadtest", "--base-url", url, "--api", "openai-completions",
                         "--prompt-tokens", "100", "--max-tokens", "8", "--concurrency", "1",
                         "--num-requests", "1", stdout=StringIO(), stderr=StringIO())


@pytest.mark.agnostic
@pytest.mark.slow
def test_all_failed_point_exits_1_with_errors_listed():
    with stub("--context-len", "256") as url:
        r = manage("--base-url", url, "--api", "openai-completions", "--model", "stub-model",
                   "--prompt-tokens", "300", "--max-tokens", "8", "--concurrency", "1",
                   "--num-requests", "2", "--json")
        assert r.returncode == 1, r.stderr
        s = json.loads(r.stdout)
        assert s["completed"] == 0 and s["failed"] == 2
        assert s["errors"]["context_overflow"]["count"] == 2
        assert s["mean_ttft_ms"] is None
        assert "Traceback" not in r.stderr


@pytest.mark.agnostic
@pytest.mark.slow
def test_the_ramp_left_out_is_counted_apart_and_bad_shares_are_refused():
    with stub("--ttft-ms", "3", "--itl-ms", "1") as url:
        args = ["--base-url", url, "--api", "sglang-generate", "--workload", "fibonacci", "--max-tokens", "8",
                "--concurrency", "2", "--num-requests", "10"]
        out = StringIO()
        call_command("loadtest", *args, "--skip-first", "0.2", "--skip-last", "0.1", "--json", stdout=out)
        s = json.loads(out.getvalue())
        assert s["ramp"] == {"first": 2, "last": 1} and s["completed"] == s["n"] == 7
        out = StringIO()
        call_command("loadtest", *args, "--skip-first", "0.2", stdout=out)
        assert "Left out as the ramp (requests)" in out.getvalue()
        with pytest.raises(CommandError, match="--skip-first must be a share at least 0 and below 1, not 1.5"):
            call_command("loadtest", *args, "--skip-first", "1.5", stdout=StringIO())
        with pytest.raises(CommandError, match=r"--skip-first \+ --skip-last must be at most 0.5"):
            call_command("loadtest", *args, "--skip-first", "0.3", "--skip-last", "0.3", stdout=StringIO())
