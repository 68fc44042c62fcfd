"""tests/e2e: real processes (workers, servers) and the browser read the test database
from outside this process, so what a test stores is committed, not rolled back."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.fixture
def catalog(transactional_db):
    """The demo catalog, committed where workers and servers started by the test see it."""
    call_command("seed_demo", stdout=StringIO())

