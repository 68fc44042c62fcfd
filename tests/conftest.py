import os
from pathlib import Path

import pytest
from django.conf import settings as django_settings

TEST_BROKER_DIR = Path(django_settings.DATA_DIR) / "test-broker"


@pytest.fixture(autouse=True, scope="session")
def _own_broker_folder():
    """Tests never share the filesystem broker of a running `make run`: their messages
    name runs of the test database. Workers started by tests inherit the variable."""
    from sweeplab.celery import app
    from sweeplab.settings import filesystem_broker_options

    os.environ["SWEEPLAB_BROKER_DIR"] = str(TEST_BROKER_DIR)
    if django_settings.CELERY_BROKER_URL.startswith("filesystem://"):
        app.conf.broker_transport_options = filesystem_broker_options(TEST_BROKER_DIR)
    yield


@pytest.fixture(autouse=True)
def _own_data_dir(settings, tmp_path):
    """Server logs, demo passwords and the like go to a folder of the test's own."""
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()


@pytest.fixture(autouse=True)
def _plain_http(settings):
    # The test client speaks plain HTTP; HTTPS-only settings are checked by test_settings.
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
