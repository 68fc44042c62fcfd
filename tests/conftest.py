"""Fixtures of the Django tests (web, worker, e2e): the session's data folder, broker and
HTTP settings, the demo catalog and a user per role; where each test runs (its markers) and
in what order. tests/core has its own pytest.ini and never loads this file."""

import json
import os
import re
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.test import override_settings

from sweeplab import settings as sweeplab_settings
from tests.lanes import LANE_VARIABLE, lane_name, redis_url_for_lane

LANE = lane_name()
TEST_BROKER_DIR = Path(django_settings.DATA_DIR) / f"test-broker-{LANE}"
# The servers' logs: two lanes number their runs alike (each its own database), and would
# write one file (var/logs/sweep-1/run-1-....log) at once.
TEST_LOG_DIR = Path(django_settings.DATA_DIR) / f"test-logs-{LANE}"
E2E = Path(__file__).parent / "e2e"
# Seconds each test took in CI, by its JUnit address (scripts/test-durations writes it from
# the JUnit files .ci/run leaves in var/ci/): the longest start first, so that xdist's
# workers end together.
DURATIONS = Path(__file__).with_name("durations.json")
# pytest-timeout's limit (pytest.ini: 600 s) for the tests that need longer: a vLLM test may
# first build the engine's environment (minutes), and a quiet test measures for minutes.
TIMEOUTS = {"vllm": 1800, "quiet": 900}


def pytest_configure(config):
    """The lane's name goes to every process a test starts (tests.lanes.in_lane) and to
    xdist's workers, which add theirs; a Redis broker is the lane's own database, and the
    servers' logs its own folder, for this process and its children."""
    os.environ[LANE_VARIABLE] = LANE
    os.environ["SWEEPLAB_LOG_DIR"] = str(TEST_LOG_DIR)
    django_settings.SERVER_LOG_DIR = TEST_LOG_DIR
    if django_settings.CELERY_BROKER_URL.startswith("redis://"):
        url = redis_url_for_lane(django_settings.CELERY_BROKER_URL)
        os.environ["CELERY_BROKER_URL"] = django_settings.CELERY_BROKER_URL = url

        from sweeplab.celery import app

        app.conf.broker_url = url


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Before selection: every e2e test says whether its outcome can depend on the database
    or the broker (`backends`) or not (`agnostic`), so that a new one cannot silently run
    on one backend only; tests/web and tests/worker are `backends` by their folder. After
    pytest-django's ordering: the longest first within each of its groups."""
    unmarked, quiet_on_both = [], []
    for item in items:
        if E2E in item.path.parents:
            if not (item.get_closest_marker("backends") or item.get_closest_marker("agnostic")):
                unmarked.append(item.nodeid)
            elif item.get_closest_marker("backends") and item.get_closest_marker("quiet"):
                quiet_on_both.append(item.nodeid)
        else:
            item.add_marker(pytest.mark.backends)
        for marker, seconds in TIMEOUTS.items():
            if item.get_closest_marker(marker) and not item.get_closest_marker("timeout"):
                item.add_marker(pytest.mark.timeout(seconds))
    if unmarked:
        raise pytest.UsageError(
            "these tests in tests/e2e say neither `backends` (CI runs them on both databases and brokers) "
            "nor `agnostic` (once): mark each with @pytest.mark.backends or @pytest.mark.agnostic\n  "
            + "\n  ".join(unmarked))
    if quiet_on_both:
        raise pytest.UsageError(
            "a quiet test runs once, alone (.ci/run's last phase): keep what depends on the backend in a "
            "`backends` test of its own\n  " + "\n  ".join(quiet_on_both))
    yield
    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    items.sort(key=lambda item: (django_group(item), -durations.get(junit_address(item.nodeid), 0)))


def junit_address(nodeid):
    """How pytest's JUnit XML names a test: `tests.e2e.test_x::test_y[p]` (classname::name)."""
    path, *names = nodeid.split("::")
    return "::".join([".".join([path.removesuffix(".py").replace("/", "."), *names[:-1]]), names[-1]])


def django_group(item):
    """pytest-django's order of tests: database tests, then transactional ones, then none."""
    marker = item.get_closest_marker("django_db")
    fixtures = getattr(item, "fixturenames", ())
    kwargs = marker.kwargs if marker is not None else {}
    transactional = (kwargs.get("transaction") or kwargs.get("reset_sequences")
                     or "transactional_db" in fixtures or "live_server" in fixtures)
    if transactional:
        return 1
    return 0 if marker is not None or "db" in fixtures else 2


@pytest.fixture(autouse=True, scope="session")
def _data_dir():
    """What manage.py prepares before a command: settings create no file on import, and
    the test database (SQLite's file) lives in DATA_DIR. A secret key made here was not
    there when pytest-django read the settings."""
    sweeplab_settings.prepare_data_dir()
    django_settings.SECRET_KEY = sweeplab_settings.SECRET_KEY


@pytest.fixture(scope="session")
def django_db_modify_db_settings_xdist_suffix():
    """The lane's own test databases, named after it (pytest-django's own suffix, the xdist
    worker's, would let two pytest processes run at once take each other's)."""
    for database in django_settings.DATABASES.values():
        if database["ENGINE"].endswith("sqlite3") and not database.get("TEST", {}).get("NAME"):
            continue  # in memory: its own already
        test = database.setdefault("TEST", {})
        test["NAME"] = f"{test.get('NAME') or 'test_' + database['NAME']}_{LANE}"
        if database["ENGINE"].endswith("postgresql"):
            drop_dead_lanes_databases(database)


def drop_dead_lanes_databases(database):
    """PostgreSQL refuses to drop a test database while a connection lingers (a worker's, the
    live server's): pytest-django then leaves it, with a warning. A lane's databases are
    named after its pytest process (`..._p<pid>_gw0`): those of processes no longer alive
    are dropped here, so that they do not pile up run after run."""
    import psycopg

    with psycopg.connect(dbname="postgres", user=database["USER"] or None, password=database["PASSWORD"] or None,
                         host=database["HOST"] or None, port=database["PORT"] or None, autocommit=True) as conn:
        lanes = conn.execute("SELECT datname FROM pg_database WHERE datname ~ '^test_.*_p[0-9]+(_gw[0-9]+)?$'")
        names = [row[0] for row in lanes]
        for name in names:
            pid = int(re.search(r"_p(\d+)(_gw\d+)?$", name).group(1))
            if not Path(f"/proc/{pid}").exists():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(autouse=True, scope="session")
def _own_broker_folder(_data_dir):
    """Tests never share the filesystem broker of a running `make run`: their messages
    name runs of the test database. Workers started by tests inherit the variable. The
    lane's broker and log folders go at the end."""
    from sweeplab.celery import app

    os.environ["SWEEPLAB_BROKER_DIR"] = str(TEST_BROKER_DIR)  # the lane's own
    if django_settings.CELERY_BROKER_URL.startswith("filesystem://"):
        sweeplab_settings.make_broker_folders(TEST_BROKER_DIR)
        app.conf.broker_transport_options = sweeplab_settings.filesystem_broker_options(TEST_BROKER_DIR)
    yield
    shutil.rmtree(TEST_BROKER_DIR, ignore_errors=True)
    shutil.rmtree(TEST_LOG_DIR, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _plain_http():
    """The test client and the live server speak plain HTTP, for the whole session (the
    live server's middleware reads these once, when it starts). The HTTPS defaults are
    checked by test_project's `check --deploy` in a process of its own."""
    django_settings.SECURE_SSL_REDIRECT = False
    django_settings.SESSION_COOKIE_SECURE = False
    django_settings.CSRF_COOKIE_SECURE = False
    django_settings.SECURE_HSTS_SECONDS = 0


@pytest.fixture(autouse=True, scope="session")
def _fast_passwords():
    """Passwords hashed in microseconds, not the production hasher's ~0.5 s: every test
    user and seed_demo's admin has one. What is tested is who may do what, not PBKDF2."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


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


@pytest.fixture
def catalog(db):
    """The demo catalog (`manage.py seed_demo`): hosts, engines, models, workloads and the
    demo admin."""
    call_command("seed_demo", stdout=StringIO())


@pytest.fixture
def make_user(db):
    """make_user(name, group=None, **fields): a user with password pw-<name>-12345, in the
    role group `group` if given (viewer, operator, curator)."""
    from django.contrib.auth.models import Group, User

    def make(name, group=None, **fields):
        user = User.objects.create_user(name, password=f"pw-{name}-12345", **fields)
        if group:
            user.groups.add(Group.objects.get(name=group))
        return user

    return make


@pytest.fixture
def viewer(make_user):
    """vera, who reads."""
    return make_user("vera", "viewer")


@pytest.fixture
def operator(make_user):
    """otto, who builds, launches, cancels and resumes sweeps (no staff status)."""
    return make_user("otto", "operator")


@pytest.fixture
def curator(make_user):
    """cora, who curates results in the admin (staff)."""
    return make_user("cora", "curator", is_staff=True)


@pytest.fixture
def admin(catalog):
    """The demo catalog's admin: staff and superuser."""
    from django.contrib.auth.models import User

    return User.objects.get(username="admin")
