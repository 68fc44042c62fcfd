"""What the pages send beside their content: a Content-Security-Policy that runs our own
static scripts only (and the pages need no other), the API's schema for its readers only,
and a refused request logged in one line (issue 33)."""

import logging
import re

import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from runs.models import ApiToken
from runs.tokens import new_token
from tests.web.sweeps import add_run, make_sweep

# A <script> that runs (not one with src=, not json_script's data) or an on...= handler.
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>|\son[a-z]+\s*=", re.IGNORECASE)


def test_every_page_runs_only_our_own_static_scripts(admin, client):
    sweep, other = make_sweep(), make_sweep("other")
    run = add_run(sweep, 0, "autoregressive", {}, 1)
    add_run(other, 0, "autoregressive", {}, 1)
    client.force_login(admin)
    pages = [reverse("sweep-list"), reverse("sweep-new"), reverse("import-new"),
             reverse("sweep-detail", args=[sweep.pk]), f"{reverse('compare')}?sweep={sweep.pk}&sweep={other.pk}",
             reverse("history"), f"{reverse('run-selection-charts')}?run={run.pk}",
             reverse("admin:index"), reverse("admin:benchmarks_sweep_changelist"),
             reverse("admin:benchmarks_host_change", args=[sweep.host_id])]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        policy = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-eval" not in policy.split("script-src")[1].split(";")[0]
        assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy, url
        found = INLINE_SCRIPT.search(response.content.decode())
        assert found is None, f"{url}: {found and found.group(0)}"
    client.logout()
    assert "script-src 'self'" in client.get(reverse("login")).headers["Content-Security-Policy"]


def token_of(user):
    token, digest = new_token()
    ApiToken.objects.create(user=user, name="ci", prefix=token[:12], key_hash=digest)
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_the_api_schema_is_for_the_apis_readers_only(catalog, client):
    nobody = User.objects.create_user("nora", password="pw-nora-12345")
    reader = User.objects.create_user("vera", password="pw-vera-12345")
    reader.groups.add(Group.objects.get(name="viewer"))
    assert client.get("/api/openapi.json").status_code == 401
    assert client.get("/api/openapi.json", HTTP_AUTHORIZATION="Bearer swl_not-a-token").status_code == 401
    refused = client.get("/api/openapi.json", **token_of(nobody))
    assert refused.status_code == 403 and "has no role" in refused.json()["detail"]
    assert client.get("/api/openapi.json", **token_of(reader)).json()["openapi"].startswith("3.")
    client.force_login(reader)  # the browser's session too
    assert client.get("/api/openapi.json").status_code == 200
    client.force_login(nobody)
    assert client.get("/api/openapi.json").status_code == 403


@pytest.mark.parametrize("url", ["/", "/api/sweeps"])
def test_a_refused_request_is_logged_in_one_line(catalog, client, caplog, url):
    nobody = User.objects.create_user("nora", password="pw-nora-12345")
    client.force_login(nobody)
    with caplog.at_level(logging.WARNING):
        assert client.get(url).status_code == 403
    console = next(h for h in logging.getLogger().handlers if h.name == "console")  # settings.LOGGING's
    written = [console.format(r) for r in caplog.records if console.filter(r)]
    if url == "/":  # Django logs the page's refusal, with the exception that made it
        assert [r.status_code for r in caplog.records] == [403]
    assert all("\n" not in line for line in written), written
