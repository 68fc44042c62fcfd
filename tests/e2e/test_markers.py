"""The collection hook of tests/conftest.py: an e2e test that does not say whether its
outcome depends on the database or the broker is refused, so that it cannot silently run on
one backend only. A real pytest process collects a test planted in tests/e2e (named so that
no other collection picks it up: it is given by path)."""

import subprocess
import sys
import uuid

import pytest

from tests.e2e.processes import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.agnostic]

PLANTED = '''
import pytest

{marker}
def test_a_sweep_on_the_database(db):
    pass
'''


def collect(marker):
    planted = ROOT / "tests" / "e2e" / f"planted_{uuid.uuid4().hex}.py"
    planted.write_text(PLANTED.format(marker=marker))
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "-p", "no:xdist", str(planted)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        planted.unlink()
    return done.returncode, done.stdout + done.stderr, planted.name


def test_an_e2e_test_that_says_neither_backends_nor_agnostic_is_refused_at_collection():
    status, output, name = collect("")
    assert status == pytest.ExitCode.USAGE_ERROR, output
    assert f"{name}::test_a_sweep_on_the_database" in output and "@pytest.mark.backends" in output, output


@pytest.mark.parametrize("marker", ["@pytest.mark.backends", "@pytest.mark.agnostic"])
def test_an_e2e_test_that_says_where_it_runs_is_collected(marker):
    status, output, name = collect(marker)
    assert status == pytest.ExitCode.OK, output
    assert f"{name}::test_a_sweep_on_the_database" in output, output
