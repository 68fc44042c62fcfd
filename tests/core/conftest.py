"""tests/core: the pure core (sweepcore/, simengine's model), tested without Django."""

import sys
from pathlib import Path

CORE_INI = Path(__file__).with_name("pytest.ini")


def pytest_sessionfinish(session, exitstatus):
    """Run on their own (`pytest tests/core`, this folder's pytest.ini), the core tests
    never import Django: the pure core must stay usable without the web app."""
    if session.config.inipath == CORE_INI and "django" in sys.modules:
        session.exitstatus = 1
        print("\ntests/core imported django: the pure core must not need it", file=sys.stderr)
