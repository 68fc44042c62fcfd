"""Every text limit is checked where the text comes in: a spec (API, YAML, the builder), an
import (API, the upload page), a page's query parameters and curation. What validates is
stored on both databases; the rest is refused with the field and the limit named: a 400
(JSON on the API, the form or a 400 page on the pages, the admin's error message for
curation), never the 500 PostgreSQL's refusal of a NUL character or of a text longer than
its column would be, nor SQLite's silent store (README "Limits"). tests/web runs on both
backends in CI (DATABASE_URL)."""

import json

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmarks.models import KnownFailure, Sweep
from runs.models import CurationEvent, Point, Run
from sweepcore.spec import MAX_NAME_CHARS, MAX_TEXT_CHARS, dump_yaml
from tests.import_samples import SGLANG_FILE
from tests.web.test_api import SMALL, post_json, user_with_token
from tests.web.test_curation import _known_failure, make_sweep

NUL = "\x00"
NO_NUL = "may not contain a NUL character"


@pytest.fixture
def operator_auth(catalog):
    return user_with_token("operator")[1]


# -- Specs: the API (JSON and YAML) and the builder ---------------------------------------------

SPEC_CASES = [
    pytest.param({"name": "n" * (MAX_NAME_CHARS + 1)}, "name", "at most 200 characters (got 201)", id="name-201"),
    pytest.param({"name": "n" * 1000}, "name", "at most 200 characters (got 1,000)", id="name-1000"),
    pytest.param({"name": f"a{NUL}b"}, "name", NO_NUL, id="name-nul"),
    pytest.param({"description": f"a{NUL}b"}, "description", NO_NUL, id="description-nul"),
    pytest.param({"description": "d" * (MAX_TEXT_CHARS + 1)}, "description", "at most 10,000 characters (got 10,001)",
                 id="description-10001"),
]


@pytest.mark.parametrize(("changes", "path", "message"), SPEC_CASES)
def test_a_spec_text_beyond_its_limit_is_a_400_from_the_api(client, operator_auth, changes, path, message):
    response = post_json(client, "/api/sweeps", {**SMALL, **changes}, operator_auth)
    assert response.status_code == 400, response.content
    assert response.json() == {"errors": [{"path": path, "message": message}]}
    assert not Sweep.objects.exists()


@pytest.mark.parametrize(("changes", "path", "message"), SPEC_CASES)
def test_a_spec_text_beyond_its_limit_is_a_400_from_a_yaml_upload(client, operator_auth, changes, path, message):
    text = dump_yaml({**SMALL, **changes})  # a NUL is written as YAML's escape "\0"
    response = client.post("/api/sweeps", text, content_type="application/yaml", **operator_auth)
    assert response.status_code == 400, response.content
    assert response.json() == {"errors": [{"path": path, "message": message}]}
    assert not Sweep.objects.exists()


@pytest.mark.parametrize(("changes", "path", "message"), SPEC_CASES)
def test_a_spec_text_beyond_its_limit_is_the_builders_form_error(client, operator, catalog, changes, path, message):
    client.force_login(operator)
    spec_json = json.dumps({**SMALL, **changes})
    response = client.post(reverse("sweep-new"), {"editor": "form", "spec_json": spec_json, "action": "draft"})
    assert response.status_code == 400
    form_errors = [e for c in response.context["form"].with_path().values() for e in c.errors]
    assert {"path": path, "message": message} in [{"path": e["path"], "message": e["message"]} for e in form_errors]
    assert not Sweep.objects.exists()


def test_a_spec_at_the_text_limits_is_stored(client, operator_auth):
    name, description = "n" * MAX_NAME_CHARS, "d" * MAX_TEXT_CHARS
    response = post_json(client, "/api/sweeps", {**SMALL, "name": name, "description": description}, operator_auth)
    assert response.status_code == 201, response.content
    sweep = Sweep.objects.get()
    assert sweep.name == name and sweep.spec["description"] == description


def test_a_spec_naming_a_host_with_a_nul_is_an_unknown_host(client, operator_auth):
    response = post_json(client, "/api/sweeps", {**SMALL, "host": f"sim{NUL}"}, operator_auth)
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["path"] == "host" and error["message"].startswith("unknown host 'sim\\x00'")


# -- Imports: the API and the upload page ----------------------------------------------------------


def sglang_line(**changes):
    """The first result of the SGLang sample, changed."""
    data = json.loads(SGLANG_FILE.read_text().splitlines()[0])
    server_info = {**data["server_info"], **changes.pop("server_info", {})}
    return json.dumps({**data, **changes, "server_info": server_info}) + "\n"


IMPORT_CASES = [
    pytest.param("f" * 194 + ".jsonl", sglang_line(), "file name: at most 193 characters (got 200)",
                 id="filename-200"),
    pytest.param("bench.jsonl", sglang_line(server_info={"version": "v" * 201}),
                 "bench.jsonl line 1: engine version: at most 200 characters (got 201)", id="engine-version-201"),
    pytest.param("bench.jsonl", sglang_line(server_info={"version": f"0.5{NUL}"}),
                 f"bench.jsonl line 1: field 'server_info.version': {NO_NUL}", id="engine-version-nul"),
    pytest.param("bench.jsonl", sglang_line(dataset_name="sharegpt", dataset_path="/" + "p" * 1000),
                 "bench.jsonl line 1: dataset path: at most 1,000 characters (got 1,001)", id="dataset-path-1001"),
    pytest.param("bench.jsonl", sglang_line(tag=f"run{NUL}1"), f"bench.jsonl line 1: field 'tag': {NO_NUL}",
                 id="tag-nul"),
    pytest.param("bench.jsonl", sglang_line(backend=f"sglang{NUL}"), f"bench.jsonl line 1: field 'backend': {NO_NUL}",
                 id="backend-nul"),
    pytest.param("bench.jsonl", sglang_line(server_info={"served_model_name": f"Qwen{NUL}"}),
                 f"bench.jsonl line 1: field 'server_info.served_model_name': {NO_NUL}", id="model-nul"),
]


def upload(client, auth, name, text, **fields):
    file = SimpleUploadedFile(name, text.encode())
    return client.post("/api/imports", {"file": file, "host": "sim-8x-rtxpro6000", **fields}, **auth)


@pytest.mark.parametrize(("name", "text", "message"), IMPORT_CASES)
def test_an_import_text_beyond_its_limit_is_a_400_from_the_api(client, operator_auth, name, text, message):
    response = upload(client, operator_auth, name, text)
    assert response.status_code == 400, response.content
    assert response.json() == {"detail": message}
    assert not Sweep.objects.exists() and not Run.objects.exists()


@pytest.mark.parametrize(("name", "text", "message"), IMPORT_CASES)
def test_an_import_text_beyond_its_limit_is_the_upload_pages_error(client, operator, catalog, name, text, message):
    client.force_login(operator)
    file = SimpleUploadedFile(name, text.encode())
    response = client.post(reverse("import-new"), {"file": file, "host": "sim-8x-rtxpro6000"})
    assert response.status_code == 400
    assert response.context["form"].errors["file"] == [message]
    assert not Sweep.objects.exists()


def test_an_import_workload_longer_than_its_column_is_a_400_naming_it(client, operator_auth):
    response = upload(client, operator_auth, "bench.jsonl", sglang_line(), workload="w" * 101)
    assert response.status_code == 400
    assert response.json() == {"detail": "workload: at most 100 characters (got 101)"}
    assert not Sweep.objects.exists()


def test_an_import_at_the_text_limits_is_stored_with_its_label_in_the_sweeps_name(client, operator_auth):
    name = "f" * 187 + ".jsonl"  # 193 characters: "import <name>" fills the sweep's name
    text = sglang_line(tag="t" * 300, server_info={"version": "v" * 200})
    response = upload(client, operator_auth, name, text)
    assert response.status_code == 201, response.content
    sweep = Sweep.objects.get()
    assert sweep.import_filename == name and sweep.name == f"import {name}"
    assert Run.objects.get().engine_version == "v" * 200
    # A short name leaves room for the label, cut to fit the name's column.
    response = upload(client, operator_auth, "short.jsonl", sglang_line(tag="t" * 300, duration=58.0))
    assert response.status_code == 201, response.content
    labelled = Sweep.objects.get(import_filename="short.jsonl").name
    assert len(labelled) == MAX_NAME_CHARS and labelled.startswith("import short.jsonl (ttt") and labelled.endswith("…)")


# -- Query parameters of the pages ------------------------------------------------------------------


@pytest.fixture
def sweep(catalog):
    return make_sweep()


RUN = object()  # the sweep's run's id, in a query

QUERY_CASES = [
    pytest.param("sweep-list", {"status": NUL}, "status: " + NO_NUL, id="sweep-list-status"),
    pytest.param("sweep-points-table", {"q": NUL}, "q: " + NO_NUL, id="points-table-q"),
    pytest.param("sweep-points-table", {"workload": f"long{NUL}"}, "workload: " + NO_NUL, id="points-table-workload"),
    pytest.param("sweep-points-table", {"q": "q" * 201}, "q: at most 200 characters (got 201)", id="points-table-q-201"),
    pytest.param("sweep-points-table-partial", {"q": NUL}, "q: " + NO_NUL, id="points-partial-q"),
    pytest.param("history", {"model": NUL}, "model: " + NO_NUL, id="history-model"),
    pytest.param("history-data", {"model": NUL}, "model: " + NO_NUL, id="history-data-model"),
    pytest.param("history-data", {"workload": NUL, "model": "Qwen/Qwen3.6-27B"}, "workload: " + NO_NUL,
                 id="history-data-workload"),
    pytest.param("sweep-charts", {"chart": NUL}, "chart: " + NO_NUL, id="sweep-charts-chart"),
    pytest.param("run-selection-charts-data", {"runs": RUN, "family": NUL}, "family: " + NO_NUL,
                 id="run-charts-family"),
    pytest.param("sweep-new", {"clone": "²"}, "clone must be an integer, got '²'", id="builder-clone-superscript"),
    pytest.param("sweep-new", {"clone": NUL}, "clone must be an integer, got '\\x00'", id="builder-clone-nul"),
]


@pytest.mark.parametrize(("view", "query", "message"), QUERY_CASES)
def test_a_query_text_beyond_its_limit_is_a_400_naming_it(client, operator, sweep, view, query, message):
    client.force_login(operator)
    args = [sweep.pk] if view.startswith("sweep-points") or view == "sweep-charts" else []
    run_id = str(Run.objects.get(sweep=sweep).pk)
    response = client.get(reverse(view, args=args), {k: run_id if v is RUN else v for k, v in query.items()})
    assert response.status_code == 400
    text = response.content.decode()
    shown = response.json()["error"] if response["Content-Type"].startswith("application/json") else text
    assert message in shown or message.replace("'", "&#x27;") in shown, text[:2000]


def test_a_clone_of_an_existing_sweep_still_fills_the_builder(client, operator, catalog):
    client.force_login(operator)
    response = post_json(client, "/api/sweeps", {**SMALL, "name": "to-clone"}, user_with_token("operator", "o2")[1])
    sweep_id = response.json()["id"]
    page = client.get(reverse("sweep-new"), {"clone": str(sweep_id)})
    assert page.status_code == 200 and "to-clone" in page.content.decode()
    assert client.get(reverse("sweep-new"), {"clone": "123456789"}).status_code == 200  # none: the example


# -- Curation in the admin ----------------------------------------------------------------------------

CURATION_CASES = [
    pytest.param("runs_point", "exclude_results", f"thermal{NUL}", "reason: " + NO_NUL, id="exclude-reason-nul"),
    pytest.param("runs_point", "exclude_results", "r" * (MAX_TEXT_CHARS + 1),
                 "reason: at most 10,000 characters (got 10,001)", id="exclude-reason-10001"),
    pytest.param("runs_run", "annotate", f"note{NUL}", "note: " + NO_NUL, id="annotate-note-nul"),
    pytest.param("runs_run", "annotate", "n" * (MAX_TEXT_CHARS + 1), "note: at most 10,000 characters (got 10,001)",
                 id="annotate-note-10001"),
    pytest.param("benchmarks_knownfailure", "lift", f"fixed{NUL}", "reason: " + NO_NUL,
                 id="lift-reason-nul"),
]


@pytest.mark.parametrize(("model", "action", "text", "message"), CURATION_CASES)
def test_a_curation_text_beyond_its_limit_is_refused_with_its_message(client, curator, sweep, model, action, text,
                                                                      message):
    ids = {"runs_point": lambda: Point.objects.values_list("pk", flat=True),
           "runs_run": lambda: Run.objects.values_list("pk", flat=True),
           "benchmarks_knownfailure": lambda: [_known_failure().pk]}[model]()
    client.force_login(curator)
    response = client.post(reverse(f"admin:{model}_changelist"),
                           {"action": action, ACTION_CHECKBOX_NAME: [str(i) for i in ids], "apply": "1", "text": text},
                           follow=True)
    assert response.status_code == 200
    assert message in [str(m) for m in response.context["messages"]]
    assert not CurationEvent.objects.exists()
    assert not Point.objects.filter(excluded=True).exists() and not Run.objects.exclude(notes="").exists()
    assert not KnownFailure.objects.filter(active=False).exists()


def test_a_curation_text_at_the_limit_is_stored(client, curator, sweep):
    client.force_login(curator)
    reason = "r" * MAX_TEXT_CHARS
    response = client.post(reverse("admin:runs_point_changelist"),
                           {"action": "exclude_results", ACTION_CHECKBOX_NAME: [str(p.pk) for p in Point.objects.all()],
                            "apply": "1", "text": reason}, follow=True)
    assert response.status_code == 200
    assert set(Point.objects.values_list("exclude_reason", flat=True)) == {reason}


@pytest.mark.parametrize("query", [{"status__exact": NUL}, {"q": f"a{NUL}"}, {f"status{NUL}": "ok"}])
def test_an_admin_query_parameter_with_a_nul_is_a_400_naming_it(client, curator, sweep, query):
    client.force_login(curator)
    response = client.get(reverse("admin:runs_point_changelist"), query)  # before: a 500 on PostgreSQL
    assert response.status_code == 400
    assert response.content.decode() == f"{next(iter(query)).replace(NUL, '')}: {NO_NUL}"
    assert client.get(reverse("admin:runs_point_changelist"), {"status__exact": "ok"}).status_code == 200
