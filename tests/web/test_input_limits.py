"""Bad input at the web tier's edges gets a fast 4xx that names the limit: JSON on the API
(never Django's HTML 400 or a 500), a form error or a 413 page on the pages, exit status 2
from `sweep`; a spec at every bound is stored; an import stores a bounded number of
request records and its points' API answers stay small (README "Limits")."""

import hashlib
import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from benchmarks.models import Sweep
from runs.imports import import_file
from runs.models import Point, RequestRecord
from sweepcore import spec as spec_mod
from sweepcore.importers import common
from tests.import_samples import vllm_detailed
from tests.web.test_api import SMALL, post_json, user_with_token

MiB = 1 << 20


@pytest.fixture
def operator_auth(catalog):
    return user_with_token("operator")[1]


def nested(depth):
    return "[" * depth + "]" * depth


# -- Specs on the API -----------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/api/sweeps/plan", "/api/sweeps"])
def test_a_json_spec_nested_10000_deep_is_a_400_naming_the_limit(client, operator_auth, url):
    body = json.dumps(SMALL)[:-1] + f', "description": {nested(10_000)}}}'
    response = client.post(url, body, content_type="application/json", **operator_auth)
    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
    assert response.json() == {"errors": [{"path": "spec", "message": "lists and mappings nested deeper than 32 "
                                                                        "levels (Sweeplab's limit)"}]}
    assert not Sweep.objects.exists()


def test_a_yaml_spec_nested_10000_deep_is_a_400_naming_the_line_and_the_limit(client, operator_auth):
    text = f"name: deep\nmethods: {nested(10_000)}\n"
    response = client.post("/api/sweeps", text, content_type="application/yaml", **operator_auth)
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["message"] == "line 2, column 41: lists and mappings nested deeper than 32 levels (Sweeplab's limit)"


@pytest.mark.parametrize(("changes", "path", "bound"), [
    ({"workloads": [{"long-context": {"prompt_tokens": [10**18]}}]}, "workloads[0].long-context.prompt_tokens",
     "10,000,000"),
    ({"max_new_tokens": 10**18}, "max_new_tokens", "1,000,000"),
    ({"concurrency": [10**18]}, "concurrency", "4,096"),
    ({"concurrency": [100_000]}, "concurrency", "4,096"),
    ({"requests_per_point": 10**9}, "requests_per_point", "1,000,000"),
])
def test_a_number_beyond_its_column_is_a_400_with_its_path_not_a_database_error(client, operator_auth, changes,
                                                                                 path, bound):
    response = post_json(client, "/api/sweeps", {**SMALL, **changes}, operator_auth)
    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    assert error["path"] == path and f"up to {bound} (Sweeplab's limit)" in error["message"]
    assert not Sweep.objects.exists()


def test_a_spec_at_every_bound_is_stored(client, operator_auth):
    """Validation and the database agree: the largest values a spec may hold fit the
    columns they are stored in (on PostgreSQL too: DATABASE_URL)."""
    spec = {**SMALL, "workloads": [{"long-context": {"prompt_tokens": [spec_mod.MAX_PROMPT_TOKENS]}}],
            "max_new_tokens": spec_mod.MAX_NEW_TOKENS, "concurrency": [spec_mod.MAX_IN_FLIGHT],
            "requests_per_point": spec_mod.MAX_REQUESTS_PER_POINT, "methods": ["autoregressive"]}
    response = post_json(client, "/api/sweeps", spec, operator_auth)
    assert response.status_code == 201, response.content
    point = Point.objects.get(run__sweep_id=response.json()["id"])
    assert (point.prompt_tokens, point.max_new_tokens, point.concurrency) == (
        spec_mod.MAX_PROMPT_TOKENS, spec_mod.MAX_NEW_TOKENS, spec_mod.MAX_IN_FLIGHT)


def test_a_5_mb_spec_is_a_413_in_json_before_it_is_read(client, operator_auth):
    body = json.dumps({**SMALL, "description": "x" * (5 * MiB)})
    response = client.post("/api/sweeps", body, content_type="application/json", **operator_auth)
    assert response.status_code == 413 and response["Content-Type"].startswith("application/json")
    assert response.json() == {"detail": f"the request is {len(body):,} bytes; a request to Sweeplab may be up to "
                                         f"2,097,152 bytes (2 MiB, Sweeplab's limit)"}


def test_a_spec_over_1_mib_within_the_request_limit_is_a_413_naming_the_spec_limit(client, operator_auth):
    body = json.dumps({**SMALL, "description": "x" * (3 * MiB // 2)})
    response = client.post("/api/sweeps/plan", body, content_type="application/json", **operator_auth)
    assert response.status_code == 413
    assert response.json() == {"detail": f"the spec is {len(body):,} bytes; a spec may be up to 1,048,576 bytes "
                                         f"(Sweeplab's limit)"}


def test_a_request_django_will_not_read_is_answered_in_json(client, operator_auth):
    """Too many form fields: Django's TooManyFieldsSent (a SuspiciousOperation), which
    would otherwise be its empty HTML 400."""
    fields = {f"f{i}": "x" for i in range(1_100)}
    response = client.post("/api/imports", {"host": "sim-8x-rtxpro6000", **fields}, **operator_auth)
    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
    assert response.json()["detail"].startswith("the request cannot be read: The number of GET/POST parameters")


# -- Imports ------------------------------------------------------------------------------


def upload(client, auth, data, name="bench.json", **extra):
    file = SimpleUploadedFile(name, data)
    return client.post("/api/imports", {"file": file, "host": "sim-8x-rtxpro6000"}, **auth, **extra)


def test_an_upload_over_the_limit_is_a_413_from_its_content_length_before_it_is_read(client, operator_auth):
    claimed = 200 * MiB  # the body is small: nothing reads past the declared length's check
    response = upload(client, operator_auth, b"{}", CONTENT_LENGTH=str(claimed))
    assert response.status_code == 413 and response["Content-Type"].startswith("application/json")
    assert response.json() == {"detail": f"the request is {claimed:,} bytes; an import (a result file and its form) "
                                         f"may be up to 68,157,440 bytes (65 MiB, Sweeplab's limit)"}


def test_a_file_over_the_import_limit_is_a_413_naming_it(client, operator_auth, monkeypatch):
    monkeypatch.setattr("runs.api.imports.IMPORT_MAX_BYTES", 100)
    monkeypatch.setattr("runs.forms.IMPORT_MAX_BYTES", 100)
    response = upload(client, operator_auth, b"x" * 101)
    assert response.status_code == 413
    assert response.json() == {"detail": "bench.json is 101 bytes; a result file may be up to 100 bytes (0 MiB, "
                                         "Sweeplab's limit)"}


def test_an_import_over_the_record_cap_stores_a_sample_and_says_so(client, operator_auth, monkeypatch):
    monkeypatch.setattr(common, "MAX_REQUESTS_PER_POINT", 20)
    monkeypatch.setattr(common, "MAX_EXTRA_FIELD_BYTES", 200)
    response = upload(client, operator_auth, vllm_detailed(500).encode())
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["requests"], body["requests_in_file"]) == (20, 500)
    assert body["message"].endswith("1 point, 20 request records (an even sample of the file's 500: Sweeplab's limit)")
    point = Point.objects.get(run__sweep_id=body["sweep"]["id"])
    assert RequestRecord.objects.filter(point=point).count() == 20
    note = point.extra["import"]
    assert (note["requests_in_file"], note["requests_stored"]) == (500, 20) and "even sample" in note["note"]
    # The point's API answer holds no per-request array: they are its paginated records.
    answer = client.get(f"/api/points/{point.pk}", **operator_auth)
    assert answer.status_code == 200 and len(answer.content) < 20_000
    assert "latencies" not in answer.json()["extra"] and "latencies" in answer.json()["extra"]["left_out"]["fields"]
    assert client.get(f"/api/points/{point.pk}/requests?limit=5", **operator_auth).json()["count"] == 20


def test_an_upload_spooled_to_disk_is_imported_from_its_file_under_its_digest(client, operator_auth, monkeypatch):
    """Over 2 MiB, Django keeps an upload in a temporary file: the import reads that file in
    chunks (sweepcore.importers.reader), and files it under the SHA-256 of its bytes."""
    from django.core.files.uploadedfile import TemporaryUploadedFile

    opened = []
    monkeypatch.setattr("runs.api.imports.import_file",
                        lambda name, source, **kw: opened.append(type(source)) or import_file(name, source, **kw))
    data = vllm_detailed(40_000).encode()
    assert len(data) > 2 * MiB
    response = upload(client, operator_auth, data)
    assert response.status_code == 201, response.content
    assert opened == [TemporaryUploadedFile]
    assert response.json()["requests_in_file"] == 40_000
    assert Sweep.objects.get(pk=response.json()["sweep"]["id"]).import_sha256 == hashlib.sha256(data).hexdigest()


def test_the_import_page_refuses_a_too_large_upload_with_its_form_and_the_limit(client, operator):
    client.force_login(operator)
    response = client.post("/imports/new/", {"host": "sim-8x-rtxpro6000"}, CONTENT_LENGTH=str(200 * MiB))
    assert response.status_code == 413
    page = response.content.decode()
    assert 'id="import-form"' in page
    assert (f"Nothing was imported: the request is {200 * MiB:,} bytes; an import (a result file and its form) may "
            f"be up to 68,157,440 bytes (65 MiB, Sweeplab&#x27;s limit).") in page


def test_the_import_page_asks_a_stranger_to_log_in_rather_than_showing_its_form(catalog):
    response = Client().post("/imports/new/", {}, CONTENT_LENGTH=str(200 * MiB))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_too_large_post_to_the_builder_is_a_413_page_naming_the_limit(client, operator):
    client.force_login(operator)
    response = client.post("/sweeps/new/", {"spec_yaml": "x" * (3 * MiB)})
    assert response.status_code == 413
    assert "a request to Sweeplab may be up to 2,097,152 bytes (2 MiB" in response.content.decode()
    assert not Sweep.objects.exists()


def test_a_too_large_yaml_text_in_the_builder_is_a_form_error(client, operator):
    client.force_login(operator)
    response = client.post("/sweeps/plan-preview.json", {"spec_yaml": "#" * (3 * MiB // 2)})
    assert response.status_code == 200
    (error,) = response.json()["errors"]
    assert error["message"] == "more than 1,048,576 bytes; a spec may be up to 1,048,576 bytes (Sweeplab's limit)"


# -- The CLI --------------------------------------------------------------------------------


def run_sweep(*args):
    err = StringIO()
    try:
        call_command("sweep", *args, stdout=StringIO(), stderr=err)
    except SystemExit as exc:
        return exc.code, err.getvalue()
    return 0, err.getvalue()


def test_sweep_validate_refuses_what_the_database_could_not_store_with_exit_2(catalog, tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("name: huge\nhost: sim-8x-rtxpro6000\nengine: sglang-sim\nmodel: Qwen/Qwen3.6-27B\n"
                    "methods: [autoregressive]\nworkloads: [fibonacci]\nconcurrency: [1000000000000000000]\n")
    code, err = run_sweep("validate", str(path))
    assert code == 2
    assert err.strip() == ("concurrency: expected positive integers up to 4,096 (Sweeplab's limit), got "
                           "1000000000000000000 among them")


def test_sweep_validate_refuses_a_deep_file_with_exit_2(catalog, tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text(f"name: deep\nmethods: {nested(10_000)}\n")
    code, err = run_sweep("validate", str(path))
    assert code == 2
    assert err.strip() == f"{path}: line 2, column 41: lists and mappings nested deeper than 32 levels (Sweeplab's limit)"
