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


@pytest.fixture(autouse=True, scope="session")
def _plain_http():
    """The test client and the live server speak plain HTTP, for the whole session (the
    live server's middleware reads these once, when it starts). The HTTPS defaults are
    checked by test_project's `check --deploy` in a process of its own."""
    django_settings.SECURE_SSL_REDIRECT = False
    django_settings.SESSION_COOKIE_SECURE = False
    django_settings.CSRF_COOKIE_SECURE = False
    django_settings.SECURE_HSTS_SECONDS = 0


@pytest.fixture(autouse=True)
def _own_data_dir(settings, tmp_path):
    """Server logs, demo passwords and the like go to a folder of the test's own."""
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()


@pytest.fixture
def roles(transactional_db):
    """The viewer / operator / curator groups, which a data migration creates: a
    transactional test's flush empties every table (permissions come back with the flush's
    post_migrate, groups do not), so later ones create them again, with the permissions of
    the newest roles migration (runs.roles.ROLES)."""
    from django.contrib.auth.models import Group, Permission

    from runs.roles import ROLES

    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(
            [Permission.objects.get(content_type__app_label=app, codename=codename) for app, codename in codenames]
        )
