"""The JSON API: tokens, roles, round trips, and the OpenAPI schema checked by
schemathesis against the live server."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import Sweep
from runs.models import ApiToken, Point, RequestRecord, Run
from runs.tokens import hash_token, new_token
from sweepcore.metrics import LATENCY_FIELDS

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen3.6-27b-sm120.yaml"
SMALL = {
    "name": "api-made", "host": "sim-8x-rtxpro6000", "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B",
    "tp": [1], "methods": ["autoregressive", {"ddtree": {"budget": [15]}}], "workloads": ["fibonacci"],
}


def user_with_token(group, name=None, **token_fields):
    user = User.objects.create_user(name or group, password=f"pw-{group}-12345")
    user.groups.add(Group.objects.get(name=group))
    token, digest = new_token()
    ApiToken.objects.create(user=user, name="ci", prefix=token[:12], key_hash=digest, **token_fields)
    return user, {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def post_json(client, url, data, auth):
    return client.post(url, json.dumps(data), content_type="application/json", **auth)


def test_tokens_are_stored_hashed_and_created_once_in_the_admin(catalog, make_user, client):
    staff = make_user("sam", "viewer", is_staff=True)
    client.force_login(staff)
    response = client.post(reverse("admin:runs_apitoken_add"), {"name": "nightly CI"}, follow=True)
    (message,) = [str(m) for m in response.context["messages"] if "copy it now" in str(m)]
    token = message.split(": ", 1)[1].split(" — ")[0]
    stored = ApiToken.objects.get()
    assert stored.user == staff and stored.key_hash == hash_token(token) and token not in stored.key_hash
    assert stored.prefix == token[:12] and token.startswith("swl_")
    assert not ApiToken.objects.filter(key_hash__contains=token[4:20]).exists()
    api = Client()
    assert api.get("/api/sweeps", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    ApiToken.objects.filter(pk=stored.pk).update(last_used_at=None)
    api.get("/api/sweeps", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert ApiToken.objects.get().last_used_at is not None
    # Revoked in the admin, it no longer authenticates.
    client.post(reverse("admin:runs_apitoken_changelist"),
                {"action": "revoke", "_selected_action": [str(stored.pk)]})
    assert ApiToken.objects.get().revoked_at is not None
    assert api.get("/api/sweeps", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401


def test_without_a_valid_token_or_session_it_is_401(catalog, client):
    user, auth = user_with_token("viewer")
    assert client.get("/api/sweeps").status_code == 401
    assert client.get("/api/sweeps", HTTP_AUTHORIZATION="Bearer swl_not-a-token").status_code == 401
    assert client.get("/api/sweeps", HTTP_AUTHORIZATION="Basic eA==").status_code == 401
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert client.get("/api/sweeps", **auth).status_code == 401
    assert client.post("/api/sweeps", json.dumps(SMALL), content_type="application/json").status_code == 401
    assert not Sweep.objects.exists()


def test_a_bad_token_is_401_on_every_method_and_a_session_still_needs_its_csrf_token(catalog, operator):
    # Outside Django's test client, which skips CSRF: as curl or a browser would meet it.
    api = Client(enforce_csrf_checks=True)
    user, auth = user_with_token("operator", name="opal")
    ApiToken.objects.filter(user=user).update(revoked_at=timezone.now())
    for headers in ({"HTTP_AUTHORIZATION": "Bearer swl_not-a-token"}, auth, {}):
        response = api.post("/api/sweeps", json.dumps(SMALL), content_type="application/json", **headers)
        assert response.status_code == 401, (headers, response.content)
    # A logged-in browser: its session, never a token it names, and only with the CSRF token.
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    response = browser.post("/api/sweeps", json.dumps(SMALL), content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    response = browser.post("/api/sweeps", json.dumps(SMALL), content_type="application/json",
                            HTTP_AUTHORIZATION="Bearer swl_not-a-token")
    assert response.status_code == 401
    assert not Sweep.objects.exists()


def test_a_viewer_reads_but_cannot_create_plan_or_act(catalog, client):
    _, viewer = user_with_token("viewer")
    _, operator = user_with_token("operator")
    sweep_id = post_json(client, "/api/sweeps", SMALL, operator).json()["id"]
    assert client.get(f"/api/sweeps/{sweep_id}", **viewer).status_code == 200
    for url in ("/api/sweeps", "/api/sweeps/plan"):
        response = post_json(client, url, SMALL, viewer)
        assert response.status_code == 403 and "benchmarks.add_sweep" in response.json()["detail"]
    for action in ("launch", "cancel", "resume"):
        response = client.post(f"/api/sweeps/{sweep_id}/{action}", **viewer)
        assert response.status_code == 403 and "benchmarks.launch_sweep" in response.json()["detail"]
    assert Sweep.objects.count() == 1 and Sweep.objects.get().status == "draft"


def test_an_account_without_a_role_gets_403_from_every_operation(catalog, client):
    _, operator = user_with_token("operator")
    sweep_id = post_json(client, "/api/sweeps", SMALL, operator).json()["id"]
    point = Point.objects.filter(run__sweep_id=sweep_id).order_by("id").first()
    record = RequestRecord.objects.create(point=point, index=0, send_time=1.7e9, output_tokens=4)
    ids = {"sweep_id": sweep_id, "run_id": point.run_id, "point_id": point.pk, "record_id": record.pk,
           "kind": "points.csv"}
    paths = client.get("/api/openapi.json", **operator).json()["paths"]
    nobody, auth = user_with_token("viewer", "nora")
    nobody.groups.clear()
    operations = [(method, path.format(**ids)) for path, ops in paths.items() for method in ops]
    assert len(operations) >= 14
    for method, url in operations:
        response = client.generic(method.upper(), url, json.dumps(SMALL), content_type="application/json", **auth)
        assert response.status_code == 403 and "has no role" in response.json()["detail"], (method, url)
    client.force_login(nobody)  # the browser's session: the same
    assert client.get("/api/sweeps").status_code == 403
    assert client.get(f"/api/points/{point.pk}/requests").status_code == 403
    assert Sweep.objects.count() == 1 and Sweep.objects.get().status == "draft"
    # With a role it reads.
    nobody.groups.add(Group.objects.get(name="viewer"))
    assert client.get("/api/sweeps").json()["count"] == 1


def test_request_records_filter_by_sweep_run_point_or_error_and_read_one(catalog, client):
    _, auth = user_with_token("viewer")
    _, operator = user_with_token("operator")
    first = post_json(client, "/api/sweeps", SMALL, operator).json()["id"]
    second = post_json(client, "/api/sweeps", {**SMALL, "name": "second"}, operator).json()["id"]
    points = list(Point.objects.order_by("id"))
    assert len(points) == 4
    RequestRecord.objects.bulk_create(
        RequestRecord(point=point, index=i, send_time=1.7e9 + i, chunk_offsets=[0.1], chunk_tokens=[4],
                      output_tokens=0 if i == 2 else 4, error_kind="timeout_stall" if i == 2 else "",
                      error="no token for 30 s" if i == 2 else "")
        for point in points for i in range(3)
    )

    def get(query):
        response = client.get(f"/api/requests?{query}", **auth)
        assert response.status_code == 200, response.content
        return response.json()

    assert get("")["count"] == 12
    in_first = get(f"sweep={first}")
    assert in_first["count"] == 6
    assert {r["point"] for r in in_first["items"]} == {p.pk for p in points if p.run.sweep_id == first}
    run = Run.objects.filter(sweep_id=second).order_by("id").last()
    assert {r["point"] for r in get(f"run={run.pk}")["items"]} == {run.points.get().pk}
    page = get(f"point={points[0].pk}&limit=2&offset=1")
    assert page["count"] == 3 and [(r["point"], r["index"]) for r in page["items"]] == [(points[0].pk, 1),
                                                                                          (points[0].pk, 2)]
    errors = get(f"sweep={second}&error_kind=timeout_stall")
    assert errors["count"] == 2 and {r["error"] for r in errors["items"]} == {"no token for 30 s"}
    assert get("failed=true")["count"] == 4 and get("failed=false")["count"] == 8
    assert get("error_kind=http_error")["count"] == 0
    one = client.get(f"/api/requests/{errors['items'][0]['id']}", **auth)
    assert one.status_code == 200 and one.json() == errors["items"][0]
    assert client.get("/api/requests/999999", **auth).status_code == 404
    # A point's own list holds the same records.
    own = client.get(f"/api/points/{points[0].pk}/requests", **auth).json()
    assert own["items"] == get(f"point={points[0].pk}")["items"]


def test_session_auth_needs_csrf_on_post(catalog, operator):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(operator)
    assert browser.get("/api/sweeps").status_code == 200
    assert browser.post("/api/sweeps", json.dumps(SMALL), content_type="application/json").status_code == 403
    assert not Sweep.objects.exists()
    browser.get(reverse("sweep-list"))  # sets the CSRF cookie
    token = browser.cookies["csrftoken"].value
    response = browser.post("/api/sweeps", json.dumps(SMALL), content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201


def test_create_from_yaml_or_json_with_the_cli_messages(catalog, client):
    _, auth = user_with_token("operator")
    created = client.post("/api/sweeps", EXAMPLE.read_text(), content_type="application/yaml", **auth)
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["name"] == "qwen3.6-27b-sm120-ddtree" and body["status"] == "draft" and body["runs"] == 23
    assert body["point_status_counts"] == {"planned": 138, "skipped": 23}
    bad = EXAMPLE.read_text().replace("budget: [8, 12, 15, 16, 32, 64]", "budget: '8,12'")
    response = client.post("/api/sweeps", bad, content_type="text/yaml", **auth)
    assert response.status_code == 400
    assert response.json() == {"errors": [
        {"path": "methods[2].ddtree.budget", "message": "expected a list of positive integers, got '8,12'"}]}
    # The CLI (sweep validate) says exactly the same.
    from benchmarks.catalog import load_catalog
    from sweepcore.spec import SpecError, load_yaml, validate

    with pytest.raises(SpecError) as cli:
        validate(load_yaml(bad), load_catalog())
    assert cli.value.errors == ["methods[2].ddtree.budget: expected a list of positive integers, got '8,12'"]
    broken = client.post("/api/sweeps", "{", content_type="application/json", **auth)
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["errors"][0]["message"]
    assert Sweep.objects.count() == 1


def test_plan_stores_nothing_and_matches_the_cli(catalog, client):
    _, auth = user_with_token("operator")
    response = client.post("/api/sweeps/plan", EXAMPLE.read_text(), content_type="application/yaml", **auth)
    assert response.status_code == 200
    out = StringIO()
    call_command("sweep", "plan", str(EXAMPLE), "--json", stdout=out)
    assert response.json()["totals"] == json.loads(out.getvalue())["totals"] == {
        "runs": 23, "points": 161, "skipped_points": 23}
    assert not Sweep.objects.exists()


def test_round_trip_create_launch_and_read_the_results(catalog, client, django_capture_on_commit_callbacks):
    _, auth = user_with_token("operator")
    with django_capture_on_commit_callbacks(execute=False) as sent:
        created = client.post("/api/sweeps?launch=true", json.dumps(SMALL), content_type="application/json", **auth)
    assert created.status_code == 201 and created.json()["status"] == "queued" and len(sent) == 1
    sweep_id = created.json()["id"]
    again = client.post(f"/api/sweeps/{sweep_id}/launch", **auth)
    assert again.status_code == 409 and "only a draft can be launched" in again.json()["detail"]
    # A worker measured it (stored directly here; tests/e2e/test_sweep_worker.py does it for real).
    run = Run.objects.get(sweep_id=sweep_id, method="ddtree")
    Run.objects.filter(pk=run.pk).update(host=run.sweep.host)  # as the worker's claim records it
    point = run.points.get()
    Point.objects.filter(pk=point.pk).update(status="ok", decode_tok_s=143.5, completed=3, failed=0,
                                             finished_at=timezone.now(), **{f: 10.0 for f in LATENCY_FIELDS})
    RequestRecord.objects.bulk_create(
        RequestRecord(point=point, index=i, send_time=1.7e9 + i, chunk_offsets=[0.1, 0.2], chunk_tokens=[1, 3],
                      prompt_tokens=300, output_tokens=4, finish_reason="length", http_status=200)
        for i in range(3)
    )
    runs = client.get(f"/api/runs?sweep={sweep_id}", **auth).json()
    assert runs["count"] == 2 and {r["method"] for r in runs["items"]} == {"autoregressive", "ddtree"}
    assert {r["method"]: r["host"] for r in runs["items"]} == {"autoregressive": None, "ddtree": "sim-8x-rtxpro6000"}
    points = client.get(f"/api/points?sweep={sweep_id}&method=ddtree", **auth).json()
    (item,) = points["items"]
    assert item["status"] == "ok" and item["metrics"]["decode_tok_s"] == 143.5 and item["workload"] == "fibonacci"
    assert client.get(f"/api/points/{point.pk}", **auth).json()["metrics"]["median_ttft_ms"] == 10.0
    requests = client.get(f"/api/points/{point.pk}/requests?limit=2", **auth).json()
    assert requests["count"] == 3 and [r["index"] for r in requests["items"]] == [0, 1]
    assert requests["items"][0]["chunk_tokens"] == [1, 3]
    csv_text = b"".join(client.get(f"/api/sweeps/{sweep_id}/export/points.csv", **auth).streaming_content).decode()
    assert csv_text.splitlines()[0].startswith("sweep_id,run_id,point_id") and "143.5" in csv_text
    assert client.get(f"/api/sweeps/{sweep_id}/export/nope", **auth).status_code == 404
    cancelled = client.post(f"/api/sweeps/{sweep_id}/cancel", **auth)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    with django_capture_on_commit_callbacks(execute=False):
        resumed = client.post(f"/api/sweeps/{sweep_id}/resume", **auth)
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"


def test_lists_filter_paginate_and_keep_a_constant_query_count(catalog, client, django_assert_num_queries):
    _, auth = user_with_token("viewer")
    _, operator = user_with_token("operator", "otto")
    for i in range(3):
        post_json(client, "/api/sweeps", {**SMALL, "name": f"s{i}"}, operator)
    page = client.get("/api/sweeps?limit=2&offset=1", **auth).json()
    assert page["count"] == 3 and [s["name"] for s in page["items"]] == ["s1", "s0"]
    assert client.get("/api/sweeps?name=s2", **auth).json()["count"] == 1
    assert client.get("/api/sweeps?limit=0", **auth).status_code == 422
    for url in ("/api/sweeps", "/api/runs", "/api/points"):
        client.get(url, **auth)
        with django_assert_num_queries(3):  # the token with its user (its last use is fresh), count, page
            small = client.get(url + "?limit=500", **auth)
        for i in range(3, 6):
            post_json(client, "/api/sweeps", {**SMALL, "name": f"more-{url}-{i}"}, operator)
        with django_assert_num_queries(3):
            large = client.get(url + "?limit=500", **auth)
        assert large.json()["count"] > small.json()["count"]


def test_every_documented_operation_answers_as_documented(live_server, roles, settings):
    """schemathesis: the schema is valid OpenAPI and each operation (the reads, and the
    POSTs that create, plan, launch, cancel and resume) answers with a documented
    status, content type and body, for generated parameters and bodies (bounded,
    deterministic). Sweep actions also run on a real sweep, so 200 and 409 are checked."""
    # Its check of every operation with a bad token sends hundreds, which would lock its
    # address out (429, tests/web/test_lockout.py) where the check wants each one's 401.
    settings.SWEEPLAB_LOGIN_FAILURES_PER_ADDRESS = 10**6
    import requests
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import positive_data_acceptance

    from benchmarks.models import Host
    from sweeplab.celery import app

    call_command("seed_demo", stdout=StringIO())
    _, auth = user_with_token("operator")
    headers = {"Authorization": auth["HTTP_AUTHORIZATION"]}
    made = requests.post(f"{live_server.url}/api/sweeps", json=SMALL, headers=headers, timeout=10)
    assert made.status_code == 201, made.text
    raw = requests.get(f"{live_server.url}/api/openapi.json", headers=headers, timeout=10).json()
    schema = schemathesis.openapi.from_dict(raw)
    schema.validate()  # against the OpenAPI meta-schema of its version; raises when invalid
    assert raw["openapi"].startswith("3.")
    broken = schemathesis.openapi.from_dict({**raw, "paths": {"/x": {"get": {"responses": "none"}}}})
    with pytest.raises(Exception):
        broken.validate()  # the check can fail

    def check_operation(operation, examples, **fixed):
        # A spec or a result file can match its schema and still name a host, engine or
        # model the catalog lacks: a 400 with the reason is right there, not a rejection
        # of valid data. Every other check applies.
        excluded = [positive_data_acceptance] if operation.body else []

        @given(case=operation.as_strategy(**fixed))
        @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case):
            response = case.call(base_url=live_server.url, headers=headers, timeout=10)
            case.validate_response(response, excluded_checks=excluded)

        check()

    checked, statuses = [], []
    try:
        for result in schema.get_all_operations():
            operation = result.ok()
            method = operation.method.upper()
            if operation.path == "/api/imports":
                continue  # multipart: a form cannot carry the null its optional fields allow (tests below)
            check_operation(operation, 8 if method == "GET" else 4)
            if method == "POST" and "{sweep_id}" in operation.path:
                # On the sweep made above: launch (200, then 409), cancel, resume.
                check_operation(operation, 2, path_parameters={"sweep_id": made.json()["id"]})
                statuses.append(Sweep.objects.get(pk=made.json()["id"]).status)
            checked.append((method, operation.path))
    finally:  # the launches queued runs: no later worker may take them
        with app.connection_for_write() as conn:
            conn.default_channel.queue_purge(Host.objects.get(name=SMALL["host"]).queue_name)
    assert ("GET", "/api/sweeps") in checked and ("GET", "/api/requests/{record_id}") in checked
    assert {("POST", f"/api/sweeps{tail}") for tail in ("", "/plan", "/{sweep_id}/launch", "/{sweep_id}/cancel",
                                                         "/{sweep_id}/resume")} <= set(checked)
    assert len(checked) >= 15 and statuses == ["queued", "cancelled", "queued"]


def test_results_are_imported_through_the_api_once(catalog, client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from benchmarks.models import Host

    Host.objects.create(name="h200-box", gpu_model="NVIDIA H200", gpu_count=8, compute_capability="9.0")
    _, viewer = user_with_token("viewer")
    _, operator = user_with_token("operator")
    path = Path(__file__).resolve().parents[1] / "data" / "imports" / "sglang-bench-serving.jsonl"

    def upload(auth, data=None, **fields):
        file = SimpleUploadedFile(path.name, data if data is not None else path.read_bytes())
        return client.post("/api/imports", {"file": file, "host": "h200-box", **fields}, **auth)

    assert upload(viewer).status_code == 403 and not Sweep.objects.exists()
    first = upload(operator, model="Qwen/Qwen3.6-27B")
    assert first.status_code == 201, first.content
    body = first.json()
    assert body["created"] and body["points"] == 3 and body["sweep"]["source"] == "imported"
    again = upload(operator, model="Qwen/Qwen3.6-27B")
    assert again.status_code == 200 and "already imported" in again.json()["message"]
    bad = upload(operator, data=b'{"backend": "sglang", "completed": "many"}\n', format="sglang")
    assert bad.status_code == 400 and "line 1" in bad.json()["detail"]
    assert Sweep.objects.count() == 1
