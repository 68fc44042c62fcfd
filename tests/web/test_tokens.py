"""API tokens' scope and expiry: a read-only token reads and is refused anything else (403),
an expired one is a bad token (401, logged); both are set wherever a token is made (the
admin, ``manage.py create_api_token``)."""

import json
import logging
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import Sweep
from runs.models import ApiToken
from tests.web.test_api import SMALL, user_with_token


def create(client, auth):
    return client.post("/api/sweeps", json.dumps(SMALL), content_type="application/json", **auth)


def test_a_read_only_token_reads_and_is_refused_anything_else_with_403(catalog):
    api = Client(enforce_csrf_checks=True)  # as curl meets it: the 403 is the token's, not CSRF's
    _, auth = user_with_token("operator", read_only=True)
    assert api.get("/api/sweeps", **auth).status_code == 200
    for response in (create(api, auth), api.post("/api/sweeps/plan", json.dumps(SMALL),
                                                  content_type="application/json", **auth)):
        assert response.status_code == 403 and "read-only" in response.json()["detail"]
    assert not Sweep.objects.exists()
    # An operator's token without the scope creates.
    _, writer = user_with_token("operator", "oscar")
    assert create(api, writer).status_code == 201


def test_an_expired_token_is_a_bad_token_401_and_logged(catalog, client, caplog):
    caplog.set_level(logging.WARNING, logger="sweeplab.security")
    user, auth = user_with_token("viewer", expires_at=timezone.now() + timedelta(hours=1))
    assert client.get("/api/sweeps", **auth).status_code == 200
    ApiToken.objects.filter(user=user).update(expires_at=timezone.now() - timedelta(seconds=1))
    for method in ("get", "post"):
        assert getattr(client, method)("/api/sweeps", **auth).status_code == 401
    lines = [r.getMessage() for r in caplog.records if r.name == "sweeplab.security"]
    assert len(lines) == 2 and all("expired token" in line and "'ci' of 'viewer'" in line for line in lines)


def test_the_admin_makes_read_only_and_expiring_tokens_and_keeps_their_scope(catalog, make_user, client):
    client.force_login(make_user("sam", "operator", is_staff=True))
    response = client.post(reverse("admin:runs_apitoken_add"), {
        "name": "dashboard", "read_only": "on", "expires_at_0": "2999-01-02", "expires_at_1": "03:04:05"}, follow=True)
    (message,) = [str(m) for m in response.context["messages"] if "copy it now" in str(m)]
    assert "(read-only, until 2999-01-02 03:04 UTC)" in message
    token = message.split(": ", 1)[1].split(" — ")[0]
    stored = ApiToken.objects.get()
    assert stored.read_only and stored.expires_at.year == 2999
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert Client().get("/api/sweeps", **auth).status_code == 200
    assert create(Client(), auth).status_code == 403
    # Made, its scope stays what it was made with.
    change = client.get(reverse("admin:runs_apitoken_change", args=[stored.pk]))
    assert {"read_only", "expires_at"} <= set(change.context["adminform"].readonly_fields)


def test_create_api_token_command_takes_read_only_and_expires_in(catalog, make_user):
    make_user("otto", "operator")
    out, err = StringIO(), StringIO()
    call_command("create_api_token", "otto", "--name", "nightly CI", "--read-only", "--expires-in", "7",
                 stdout=out, stderr=err)
    token = out.getvalue().strip()
    stored = ApiToken.objects.get()
    assert stored.name == "nightly CI" and stored.read_only and stored.user.username == "otto"
    assert timedelta(days=6.99) < stored.expires_at - timezone.now() <= timedelta(days=7)
    assert "read-only, until" in err.getvalue() and token not in err.getvalue()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert Client().get("/api/sweeps", **auth).status_code == 200
    assert create(Client(), auth).status_code == 403
    # Without the flags: reads and writes, until revoked.
    call_command("create_api_token", "otto", stdout=(out := StringIO()), stderr=StringIO())
    plain = ApiToken.objects.exclude(pk=stored.pk).get()
    assert not plain.read_only and plain.expires_at is None
    assert create(Client(), {"HTTP_AUTHORIZATION": f"Bearer {out.getvalue().strip()}"}).status_code == 201
    for args, problem in ((["nobody"], "no user named 'nobody'"), (["otto", "--expires-in", "0"], "--expires-in"),
                          (["otto", "--expires-in", "soon"], "--expires-in")):
        with pytest.raises(CommandError, match=problem):
            call_command("create_api_token", *args, stdout=StringIO(), stderr=StringIO())
