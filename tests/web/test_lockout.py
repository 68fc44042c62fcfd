"""Failed logins and bad API tokens: counted per account and per address, locked out (the
right password refused unchecked, 429), logged without secrets, and lifted in the admin
(runs.lockout)."""

import logging
import threading
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from runs import lockout
from runs.models import LoginThrottle
from tests.web.test_api import user_with_token

LOCKED_ACCOUNT = "too many failed logins for this account"
LOCKED_ADDRESS = "too many failed logins or bad API tokens from this address"


def log_in(client, username, password, address="127.0.0.1", url=None, **headers):
    return client.post(url or reverse("login"), {"username": username, "password": password},
                       REMOTE_ADDR=address, **headers)


def fail(client, username, times, address="127.0.0.1"):
    for _ in range(times):
        response = log_in(client, username, "wrong", address)
        assert response.status_code == 200 and "didn't match" in response.content.decode()


def page_says(response, text):
    return text.lower() in response.content.decode().lower()


def logged_in(client):
    return "_auth_user_id" in client.session


def security_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "sweeplab.security"]


def test_an_account_is_locked_out_after_5_failures_and_then_even_its_right_password_is_refused_unchecked(
        viewer, make_user, client):
    fail(client, "vera", 4)
    fail(client, "Vera", 1)  # the username as typed, in any case: one account
    with mock.patch.object(User, "check_password") as checked:
        response = log_in(client, "VERA", "pw-vera-12345")
    assert response.status_code == 429 and not checked.called and not logged_in(client)
    page = response.content.decode()
    assert "Too many failed logins for this account; try again in 15 minutes, or ask an admin to lift the lockout" in page
    # The admin's login form refuses it too, saying why.
    response = log_in(Client(), "vera", "pw-vera-12345", url="/admin/login/")
    assert response.status_code == 429 and page_says(response, LOCKED_ACCOUNT)
    # Another account from the same address is not locked out.
    make_user("walt", "viewer")
    assert log_in(client, "walt", "pw-walt-12345").status_code == 302 and logged_in(client)


def test_an_address_is_locked_out_after_20_failures_across_accounts_whatever_x_forwarded_for_says(
        viewer, client, settings):
    for i in range(20):
        fail(client, f"guess{i}", 1, address="10.0.0.7")
    response = log_in(client, "vera", "pw-vera-12345", "10.0.0.7", HTTP_X_FORWARDED_FOR="10.9.9.9")
    assert response.status_code == 429 and page_says(response, LOCKED_ADDRESS) and not logged_in(client)
    assert not LoginThrottle.objects.filter(kind="account", key="vera").exists()  # refused before it counted
    assert log_in(client, "vera", "pw-vera-12345", "10.0.0.8").status_code == 302 and logged_in(client)
    # The limits are settings.
    settings.SWEEPLAB_LOGIN_FAILURES_PER_ADDRESS = 2
    fail(client, "nobody", 2, address="10.0.0.9")
    assert log_in(client, "vera", "pw-vera-12345", "10.0.0.9").status_code == 429


def test_a_successful_login_clears_the_accounts_failures(viewer, client):
    fail(client, "vera", 4)
    assert log_in(client, "vera", "pw-vera-12345").status_code == 302
    assert not LoginThrottle.objects.filter(kind="account").exists()
    client.logout()
    fail(client, "vera", 4)  # 8 in the window, but 4 since the success
    assert log_in(client, "vera", "pw-vera-12345").status_code == 302 and logged_in(client)
    # The address keeps its failures: a success of one account clears no other's.
    assert LoginThrottle.objects.get(kind="address").failures == 8


def test_a_lockout_is_listed_and_lifted_in_the_admin_and_then_the_login_works(viewer, admin, client):
    fail(client, "vera", 5)
    assert log_in(client, "vera", "pw-vera-12345").status_code == 429
    changelist = reverse("admin:runs_loginthrottle_changelist")
    # Staff only, like the rest of the admin.
    client.force_login(viewer)
    assert client.get(changelist).status_code == 302
    staff = Client()
    staff.force_login(admin)
    page = staff.get(changelist + "?locked=yes")
    assert page.status_code == 200
    (locked,) = page.context["cl"].result_list
    assert (locked.kind, locked.key, locked.failures) == ("account", "vera", 5) and locked.locked_until
    staff.post(changelist, {"action": "lift_lockout", "_selected_action": [str(locked.pk)]})
    locked.refresh_from_db()
    assert locked.locked_until is None and locked.failures == 0
    assert log_in(Client(), "vera", "pw-vera-12345").status_code == 302


def test_failed_logins_and_refusals_are_logged_with_username_and_address_never_the_password(viewer, client, caplog):
    caplog.set_level(logging.WARNING, logger="sweeplab.security")
    log_in(client, "Vera", "s3cret-guess-1", "10.1.2.3")
    (line,) = security_lines(caplog)
    assert "failed login: username 'Vera' from 10.1.2.3" in line and "1 of 5 failures for the account" in line
    for i in range(2, 6):
        log_in(client, "vera", f"s3cret-guess-{i}", "10.1.2.3")
    log_in(client, "vera", "pw-vera-12345", "10.1.2.3")
    lines = security_lines(caplog)
    assert any(line.startswith("lockout: the account 'vera' has 5 failures") for line in lines)
    assert lines[-1].startswith("login refused, its password unchecked: username 'vera' from 10.1.2.3")
    assert not [line for line in lines if "s3cret" in line or "pw-vera" in line]


def test_bad_tokens_are_logged_and_lock_their_address_out_with_429(catalog, client, caplog):
    caplog.set_level(logging.WARNING, logger="sweeplab.security")
    _, good = user_with_token("viewer")
    sent = "swl_thisIsNotAnyonesTokenAtAll0123456789abcdefg"
    for _ in range(20):
        response = client.get("/api/sweeps", HTTP_AUTHORIZATION=f"Bearer {sent}", REMOTE_ADDR="10.0.0.5")
        assert response.status_code == 401
    lines = security_lines(caplog)
    assert lines[0].startswith("bad API token from 10.0.0.5: no such token, 'swl_this'… (47 characters)")
    assert not [line for line in lines if sent[:9] in line]
    # Locked out: a bad token is refused with JSON, on every method; the login form too.
    for method in ("get", "post"):
        response = getattr(client, method)("/api/sweeps", HTTP_AUTHORIZATION="Bearer swl_other",
                                           REMOTE_ADDR="10.0.0.5")
        assert response.status_code == 429 and LOCKED_ADDRESS in response.json()["detail"]
    assert security_lines(caplog)[-1].startswith("bad API token refused from 10.0.0.5, locked out until")
    assert log_in(Client(), "viewer", "pw-viewer-12345", "10.0.0.5").status_code == 429
    assert client.get("/api/sweeps", HTTP_AUTHORIZATION=f"Bearer {sent}", REMOTE_ADDR="10.0.0.6").status_code == 401
    # A good token is neither refused nor counted, even from there.
    assert client.get("/api/sweeps", REMOTE_ADDR="10.0.0.5", **good).status_code == 200
    assert LoginThrottle.objects.get(key="10.0.0.5").failures == 20


@pytest.mark.parametrize("short", ["swl_ab", "x"])
def test_a_short_bad_token_is_never_logged_whole(catalog, client, caplog, short):
    caplog.set_level(logging.WARNING, logger="sweeplab.security")
    assert client.get("/api/sweeps", HTTP_AUTHORIZATION=f"Bearer {short}").status_code == 401
    (line,) = security_lines(caplog)
    assert f"'{short}'" not in line and f"({len(short)} characters)" in line


@pytest.mark.django_db(transaction=True)
def test_concurrent_attempts_at_the_limit_check_no_more_passwords_than_it_allows():
    """Each attempt is counted by a conditional UPDATE before its password is checked: of
    12 attempts at once on an account allowed 5, exactly 5 go on to a password check."""
    from django.db import connection

    barrier = threading.Barrier(12)

    def attempt(results):
        try:
            barrier.wait()
            results.append(lockout.login_attempt(None, "vera") is None)
        finally:
            connection.close()

    results = []
    threads = [threading.Thread(target=attempt, args=(results,)) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [False] * 7 + [True] * 5
    assert LoginThrottle.objects.get(kind="account", key="vera").failures == 5
