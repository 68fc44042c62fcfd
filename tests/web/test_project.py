"""Settings, migrations and roles: the ground everything stands on."""

import os
import secrets
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from sweeplab.settings import database_from_url

ROOT = Path(__file__).resolve().parents[2]


def test_database_url_parses_postgres_and_sqlite():
    pg = database_from_url("postgres://postgres:s%40cret@127.0.0.1:5432/test")
    assert (pg["ENGINE"], pg["NAME"], pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"]) == (
        "django.db.backends.postgresql", "test", "postgres", "s@cret", "127.0.0.1", "5432",
    )
    sqlite = database_from_url("sqlite:////tmp/x/db.sqlite3")
    assert sqlite["NAME"] == "/tmp/x/db.sqlite3"
    assert sqlite["TEST"]["NAME"] == "/tmp/x/test-db.sqlite3"
    assert database_from_url("sqlite:///var/db.sqlite3")["NAME"] == str(ROOT / "var" / "db.sqlite3")
    with pytest.raises(ImproperlyConfigured, match="mysql"):
        database_from_url("mysql://x/y")


def test_check_deploy_reports_no_warnings_with_debug_off_and_a_real_secret(tmp_path):
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": "k3Jx-9vQ_7rT2mWb8ZpL4nYc6HdS1fGaEuRoIiKlMjNhBgVtCwXeQzAsDyFxUo",
        "ALLOWED_HOSTS": "sweeplab.example.com",
        "SWEEPLAB_DATA_DIR": str(tmp_path),
    }
    env.pop("SWEEPLAB_HTTPS", None)
    proc = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "System check identified no issues" in proc.stdout


def test_a_secret_key_is_generated_once_when_none_is_given(tmp_path):
    env = {**os.environ, "SWEEPLAB_DATA_DIR": str(tmp_path)}
    env.pop("SECRET_KEY", None)
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    keys = [
        subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=True).stdout.strip()
        for _ in range(2)
    ]
    assert keys[0] == keys[1] and len(keys[0]) >= 50
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0
    # The worker reads the key the web server's commands made: one key for both.
    code = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"
    worker_env = {**env, "DJANGO_SETTINGS_MODULE": "sweeplab.settings"}
    worker_side = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=worker_env,
                                 capture_output=True, text=True, check=True).stdout.strip()
    assert worker_side == keys[0].splitlines()[-1]


def test_the_embedded_database_and_its_folder_are_created_private(tmp_path):
    data = tmp_path / "fresh"
    env = {**os.environ, "SWEEPLAB_DATA_DIR": str(data)}
    for name in ("SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL"):
        env.pop(name, None)
    code = "from django.db import connection; connection.ensure_connection(); print(connection.settings_dict['NAME'])"
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    database = Path(done.stdout.strip().splitlines()[-1])
    assert database.parent == data.resolve() and database.is_file()
    # Password hashes and sessions: no one but the owner reads them (issue 33).
    assert data.stat().st_mode & 0o777 == 0o700
    assert database.stat().st_mode & 0o777 == 0o600


def test_a_process_starting_while_another_writes_the_key_reads_a_whole_key(tmp_path, monkeypatch):
    # Two processes starting at once on a fresh DATA_DIR (web and worker, two test runs):
    # the second one, started while the first generates its key, must not read an empty
    # file and then refuse to sign anything.
    from sweeplab import settings as sweeplab_settings

    monkeypatch.delenv("SECRET_KEY", raising=False)
    data = tmp_path / "fresh"
    data.mkdir()
    monkeypatch.setattr(sweeplab_settings, "SECRET_KEY_FILE", data / "secret_key")
    generate, second = secrets.token_urlsafe, []

    def generating(nbytes):
        if not second:  # the first process, mid-write: the second starts as manage.py does
            second.append("")
            sweeplab_settings.write_secret_key()
            second[0] = sweeplab_settings.secret_key()
        return generate(nbytes)

    monkeypatch.setattr(secrets, "token_urlsafe", generating)
    sweeplab_settings.write_secret_key()
    assert len(second[0]) >= 50 and sweeplab_settings.secret_key() == second[0]
    assert [p.name for p in data.iterdir()] == ["secret_key"]


def test_importing_the_settings_creates_no_file(tmp_path):
    # A fresh process, the embedded defaults (SQLite, the filesystem broker) and no key:
    # everything would go under SWEEPLAB_DATA_DIR, and nothing may appear there or beside it.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    env = {**os.environ, "SWEEPLAB_DATA_DIR": str(fresh / "data"), "DJANGO_SETTINGS_MODULE": "sweeplab.settings"}
    for name in ("SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "SWEEPLAB_BROKER_DIR", "STATIC_ROOT"):
        env.pop(name, None)
    code = "import django; django.setup(); from django.conf import settings; print(settings.DATA_DIR)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(fresh / "data")
    assert list(fresh.iterdir()) == []


def test_migrations_are_complete(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_roles_exist_with_their_permissions(db):
    perms = {g.name: set(g.permissions.values_list("codename", flat=True)) for g in Group.objects.all()}
    assert set(perms) >= {"viewer", "operator", "curator"}
    assert "view_point" in perms["viewer"] and "launch_sweep" not in perms["viewer"]
    assert {"add_sweep", "launch_sweep"} <= perms["operator"] and "curate_results" not in perms["operator"]
    assert {"launch_sweep", "curate_results", "change_point"} <= perms["curator"]
    # Nobody but staff admins changes what a host executes.
    assert not any("change_engine" in p or "change_host" in p for p in perms.values())


def test_celery_is_configured_for_hour_long_tasks(settings):
    from sweeplab.celery import app

    conf = app.conf
    assert conf.task_serializer == "json" and conf.accept_content == ["json"]
    assert conf.task_acks_late is True and conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    if settings.CELERY_BROKER_URL.startswith("redis"):
        assert conf.broker_transport_options["visibility_timeout"] == 24 * 3600
