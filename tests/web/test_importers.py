"""Storing an imported vLLM / SGLang result file as a sweep: the database import,
idempotence, the command and the upload form, and imported points in history and charts
(the pure parsers: tests/core/test_importers.py)."""

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import LLM, Engine, Host, Sweep, SweepSource, Workload
from runs.imports import CatalogError, import_file
from runs.models import Point, RequestRecord, Run
from runs.results.charts import sweep_charts
from runs.results.history import series_points
from sweepcore.importers import ImportFileError, ImportRefused
from sweepcore.plan import canonical_params
from tests.import_samples import ONE_BATCH_FILE, SGLANG_FILE, VLLM_FILE


def text(path):
    return path.read_text()


# -- The database import --------------------------------------------------------------------


@pytest.fixture
def catalog(catalog):
    """The demo catalog and an H200 host with an SGLang and a vLLM engine. The demo's CPU
    vLLM engine is left out: a vLLM file then has one engine that could have served it
    (with two, the import asks which: test_importers' own tests of that)."""
    Engine.objects.filter(name="vllm-cpu").delete()
    Host.objects.create(name="h200-box", gpu_model="NVIDIA H200", gpu_count=8, compute_capability="9.0")
    Engine.objects.create(name="sglang-h200", kind="sglang", argv_template=["python", "-m", "sglang.launch_server"])
    Engine.objects.create(name="vllm-h200", kind="vllm", argv_template=["vllm", "serve", "{model_path}"])


def counts():
    return (Sweep.objects.count(), Run.objects.count(), Point.objects.count(), RequestRecord.objects.count(),
            Workload.objects.count(), Engine.objects.count())


def test_a_vllm_file_is_stored_as_an_imported_sweep(catalog):
    user = User.objects.create_user("importer")
    result = import_file(VLLM_FILE.name, VLLM_FILE.read_bytes(), host="h200-box", user=user)
    assert result.created and result.points == 1 and result.requests == 5
    assert result.message == (f"Imported {VLLM_FILE.name} (vllm) as sweep #{result.sweep.pk}: "
                              "1 point, 5 request records")
    sweep = Sweep.objects.get(pk=result.sweep.pk)
    assert sweep.source == SweepSource.IMPORTED and sweep.is_imported and sweep.status == "done"
    assert sweep.import_filename == VLLM_FILE.name and sweep.import_format == "vllm"
    assert len(sweep.import_sha256) == 64 and sweep.owner == user
    assert (sweep.host.name, sweep.engine.name, sweep.llm.name) == ("h200-box", "vllm-h200", "Qwen/Qwen3.6-27B")
    assert sweep.spec["imported"]["sha256"] == sweep.import_sha256
    run = sweep.runs.get()
    assert (run.method, run.params, run.tp, run.status) == ("speculative", {}, 1, "done")
    point = run.points.get()
    assert point.status == "ok" and point.completed == 4 and point.failed == 1
    assert point.accept_length == 2.84 and point.workload.name == "random" and point.workload.kind == "synthetic"
    assert point.prompt_tokens == 1024 and point.concurrency == 2
    assert point.finished_at.isoformat() == "2026-01-15T09:30:12+00:00"
    assert point.extra["spec_decode_num_drafts"] == 23 and point.extra["import"]["format"] == "vllm"
    assert point.errors == {"imported_error": {"count": 1, "example": point.requests.get(index=3).error}}
    records = list(point.requests.order_by("index"))
    assert [r.output_tokens for r in records] == [16, 16, 16, 0, 16]
    assert records[0].send_time == json.loads(text(VLLM_FILE))["start_times"][0]


def test_importing_the_same_file_twice_stores_nothing_new(catalog):
    first = import_file(SGLANG_FILE.name, SGLANG_FILE.read_bytes(), host="h200-box")
    before = counts()
    second = import_file("renamed.jsonl", SGLANG_FILE.read_bytes())  # no --host needed: it is known
    assert not second.created and second.sweep.pk == first.sweep.pk
    assert counts() == before
    assert second.message == f"{SGLANG_FILE.name}: already imported as sweep #{first.sweep.pk}; nothing stored"
    assert (second.points, second.requests) == (3, 0)


def test_sglang_lines_become_runs_and_points(catalog):
    result = import_file(SGLANG_FILE.name, SGLANG_FILE.read_bytes(), host="h200-box")
    sweep = result.sweep
    assert sweep.engine.name == "sglang-h200"
    runs = list(sweep.runs.order_by("position"))
    assert [(r.method, r.params, r.tp) for r in runs] == [
        ("ddtree", {"budget": 15, "topk_cap": 8}, 4),
        ("ddtree", {"budget": 15, "topk_cap": 8, "request_rate": 8.0}, 4),
    ]
    assert runs[0].engine_version == "0.5.6" and runs[0].server_info["tp_size"] == 4
    assert [p.concurrency for p in runs[0].points.order_by("position")] == [1, 4]
    assert runs[1].points.get().request_rate == 8.0


def test_a_point_measured_twice_goes_to_a_second_attempt(catalog):
    line = text(ONE_BATCH_FILE).splitlines()[1]
    body = (line + "\n" + line.replace("3.0517", "3.1")).encode()
    result = import_file("twice.jsonl", body, host="h200-box", model="Qwen/Qwen3.6-27B")
    runs = list(result.sweep.runs.order_by("attempt"))
    assert [r.attempt for r in runs] == [1, 2] and runs[1].retry_of == runs[0]
    assert runs[1].points.get().duration == 3.1


def test_host_model_and_engine_come_from_the_options_or_are_refused(catalog):
    data = ONE_BATCH_FILE.read_bytes()
    with pytest.raises(CatalogError) as exc:
        import_file(ONE_BATCH_FILE.name, data, model="Qwen/Qwen3.6-27B")
    assert "pass --host NAME (known hosts: h200-box, local-cpu, sim-8x-rtxpro6000, sim-8x-rtxpro6000-b)" in str(exc.value)
    with pytest.raises(CatalogError, match="--host: no host named 'nope'"):
        import_file(ONE_BATCH_FILE.name, data, host="nope", model="Qwen/Qwen3.6-27B")
    with pytest.raises(CatalogError, match=r"does not name its model: pass --model NAME \(known models: "):
        import_file(ONE_BATCH_FILE.name, data, host="h200-box")
    with pytest.raises(CatalogError, match="'Llama-9' is not in the catalog"):
        import_file(ONE_BATCH_FILE.name, data, host="h200-box", model="Llama-9")
    Engine.objects.create(name="sglang-other", kind="sglang", argv_template=["x"])
    with pytest.raises(CatalogError, match=r"several sglang engines .*sglang-h200, sglang-other.*--engine"):
        import_file(ONE_BATCH_FILE.name, data, host="h200-box", model="Qwen/Qwen3.6-27B")
    assert Sweep.objects.count() == 0
    assert issubclass(CatalogError, ImportRefused) and issubclass(ImportFileError, ImportRefused)  # one catch
    result = import_file(ONE_BATCH_FILE.name, data, host="h200-box", model="Qwen/Qwen3.6-27B",
                         engine="sglang-other", tp=2)
    assert result.sweep.engine.name == "sglang-other" and result.sweep.runs.get().tp == 2


def test_a_missing_engine_kind_gets_a_placeholder_that_launches_nothing(db):
    call_command("seed_demo", stdout=StringIO())
    Engine.objects.filter(kind="vllm").delete()  # the demo's CPU vLLM engine
    result = import_file(VLLM_FILE.name, VLLM_FILE.read_bytes(), host="sim-8x-rtxpro6000")
    engine = result.sweep.engine
    assert (engine.name, engine.kind, engine.argv_template) == ("imported-vllm", "vllm", [])


def test_a_malformed_file_stores_nothing(catalog):
    before = counts()
    lines = text(SGLANG_FILE).splitlines()
    lines[2] = lines[2].replace('"completed": 200', '"completed": "200"')
    with pytest.raises(ImportFileError, match=r"line 3: field 'completed': expected an integer, got \"200\""):
        import_file("bad.jsonl", "\n".join(lines).encode(), host="h200-box")
    # A catalog problem found after the workloads were looked up rolls everything back too.
    Workload.objects.filter(name="random").delete()
    before = counts()
    with pytest.raises(CatalogError):
        import_file(SGLANG_FILE.name, SGLANG_FILE.read_bytes(), host="h200-box", model="nope")
    assert counts() == before


def test_every_request_failed_is_a_failed_point(catalog):
    raw = json.loads(text(VLLM_FILE))
    raw.update(completed=0, failed=5, total_output_tokens=0, errors=["boom"] * 5, output_lens=[0] * 5)
    result = import_file("allfail.json", json.dumps(raw).encode(), host="h200-box")
    point = Point.objects.get(run__sweep=result.sweep)
    assert point.status == "failed" and point.failed == 5 and "no request" in point.reason
    assert point.errors["imported_error"]["count"] == 5


def test_nan_and_infinity_are_stored_safely(catalog):
    raw = json.loads(text(SGLANG_FILE).splitlines()[0])
    body = json.dumps(dict(raw, std_itl_ms=float("nan"), concurrency=float("inf")))
    result = import_file("nan.jsonl", body.encode(), host="h200-box")
    point = Point.objects.get(run__sweep=result.sweep)
    assert point.std_itl_ms is None and point.extra["std_itl_ms"] == "nan" and point.extra["concurrency"] == "inf"


# -- The command ----------------------------------------------------------------------------


def test_the_command_imports_and_says_what(catalog):
    out = StringIO()
    call_command("import_results", str(VLLM_FILE), "--host", "h200-box", stdout=out)
    sweep = Sweep.objects.get(source="imported")
    lines = out.getvalue().splitlines()
    assert lines[0] == f"Imported {VLLM_FILE.name} (vllm) as sweep #{sweep.pk}: 1 point, 5 request records"
    assert lines[1].endswith(f"/sweeps/{sweep.pk}/")
    out = StringIO()
    call_command("import_results", str(VLLM_FILE), "--format", "vllm", stdout=out)
    assert f"already imported as sweep #{sweep.pk}" in out.getvalue()
    assert Sweep.objects.count() == 1


def test_the_command_refuses_with_one_line(catalog, tmp_path):
    bad = tmp_path / "results.jsonl"
    bad.write_text(text(SGLANG_FILE).splitlines()[0] + "\n{broken\n")
    with pytest.raises(CommandError, match=r"^results\.jsonl line 2 column 2: invalid JSON"):
        call_command("import_results", str(bad), "--host", "h200-box")
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_results", str(tmp_path / "none.json"))
    with pytest.raises(CommandError, match="pass --host NAME"):
        call_command("import_results", str(SGLANG_FILE))
    assert Sweep.objects.count() == 0


def test_the_command_exits_1_with_the_message_on_stderr(catalog, tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "results.jsonl"
    bad.write_text('{"batch_size": 1, "input_len": 8, "output_len": 4, "latency": "x", "output_throughput": 1}\n')
    proc = subprocess.run(
        [sys.executable, "manage.py", "import_results", str(bad), "--host", "h200-box"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "CommandError: results.jsonl line 1: field 'latency': expected a number, got \"x\""
    ]
    assert "Traceback" not in proc.stderr


# -- Beside native results: history, charts, compare ----------------------------------------


def native_point(sweep_name, when, speed):
    sweep = Sweep.objects.create(
        name=sweep_name, spec={"name": sweep_name}, host=Host.objects.get(name="h200-box"),
        engine=Engine.objects.get(name="sglang-h200"), llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"),
        status="done",
    )
    params = {"budget": 15, "topk_cap": 8}
    run = Run.objects.create(sweep=sweep, position=0, method="ddtree", params=params,
                             params_key=canonical_params(params), tp=4, status="done")
    workload, _ = Workload.objects.get_or_create(name="random", defaults={"kind": "synthetic"})
    Point.objects.create(run=run, position=0, workload=workload, prompt_tokens=2000, max_new_tokens=256,
                         concurrency=1, status="ok", finished_at=when, output_throughput=speed)
    return sweep


def test_an_imported_point_appears_in_the_history_series_beside_native_ones(viewer, catalog, client):
    native = native_point("native", timezone.now() - timedelta(days=3), 140.0)
    imported = import_file(SGLANG_FILE.name, SGLANG_FILE.read_bytes(), host="h200-box").sweep
    filters = {"model": "Qwen/Qwen3.6-27B", "engine": "sglang-h200", "method": "ddtree",
               "params": canonical_params({"budget": 15, "topk_cap": 8}), "tp": 4, "workload": "random",
               "prompt_tokens": 2000, "concurrency": 1, "gpu": "NVIDIA H200"}
    points = series_points(filters, "output_throughput")
    assert [(p["sweep_id"], p["value"]) for p in points] == [(native.pk, 140.0), (imported.pk, 138.2)]
    client.force_login(viewer)
    query = {**filters, "metric": "output_throughput"}
    data = client.get(reverse("history-data"), {k: v for k, v in query.items()}).json()
    assert [p["sweep"] for p in data["points"]] == [native.pk, imported.pk]


def test_an_imported_sweep_has_its_charts_and_compares(viewer, catalog, client):
    sweep = import_file(VLLM_FILE.name, VLLM_FILE.read_bytes(), host="h200-box").sweep
    data = sweep_charts(sweep.pk)
    decode = next(c for c in data["charts"] if c["id"] == "decode_tok_s")
    values = [v["y"] for d in decode["datasets"] if d["kind"] == "value" for v in d["data"] if v["y"] is not None]
    # One of the file's five requests failed: the point is invalid, a marker with its
    # reasons, never a bar.
    assert Point.objects.get(run__sweep=sweep).validity == "invalid" and values == []
    invalid = [v for d in decode["datasets"] if d["kind"] == "marker" and d["label"] == "Invalid" for v in d["data"]]
    assert len(invalid) == 1 and "failed_requests: 1 of 5 requests failed" in invalid[0]["reason"]
    client.force_login(viewer)
    assert client.get(reverse("sweep-charts", args=[sweep.pk])).json() == json.loads(json.dumps(data))
    page = client.get(reverse("sweep-detail", args=[sweep.pk]))
    assert page.status_code == 200 and b"Imported from" in page.content
    native = native_point("native", timezone.now(), 140.0)
    response = client.get(reverse("compare"), {"sweep": [native.pk, sweep.pk], "metric": "output_throughput"})
    assert response.status_code == 200


def vllm_summary(**changes):
    """The sample vLLM file without `--save-detailed`: summary figures, no per-request arrays."""
    raw = json.loads(text(VLLM_FILE))
    for name in ("input_lens", "output_lens", "ttfts", "itls", "start_times", "generated_texts", "errors"):
        raw.pop(name)
    raw.update(changes)
    return json.dumps({k: v for k, v in raw.items() if v is not None}).encode()


def test_an_imported_summary_draws_no_empty_decode_chart_and_says_why(catalog):
    # One of its five requests failed: the point is invalid. It has no decode speed to
    # withhold, so it is no marker on a decode chart of nothing (an empty 0-1 axis).
    sweep = import_file("summary.json", vllm_summary(), host="h200-box").sweep
    data = sweep_charts(sweep.pk)
    assert Point.objects.get(run__sweep=sweep).validity == "invalid"
    assert [c["id"] for c in data["charts"]] == []
    assert data["omitted"] == [{
        "id": "decode_tok_s", "title": "Decode speed per configuration",
        "reason": "the imported summaries have no per-request timings, which decode speed is computed from "
                  "(vllm bench serve writes them with --save-detailed, SGLang bench_serving with --output-details)",
    }]
    # Its latencies are in the file: that chart has the invalid marker, on each statistic.
    latency = sweep_charts(sweep.pk, family="latency")["charts"]
    assert [c["id"] for c in latency] == ["latency:random 1024 c2"]
    assert [len(d["data"]) for d in latency[0]["datasets"] if d["kind"] == "marker"] == [4]


def test_an_imported_point_is_named_by_what_the_file_says_of_it(catalog):
    # The file names no dataset: the category says so, with the load the file gives.
    sweep = import_file("summary.json", vllm_summary(dataset_name=None, failed=0, completed=5),
                        host="h200-box").sweep
    point = Point.objects.get(run__sweep=sweep)
    assert (point.workload.name, point.prompt_tokens, point.actual_prompt_tokens) == ("unnamed-dataset", None, 819)
    data = sweep_charts(sweep.pk)
    assert data["families"][0]["charts"] == [
        {"id": "latency:unnamed-dataset c2", "title": "TPOT and ITL, median and p99: unnamed-dataset c2"}]
    assert "unspecified" not in json.dumps(data)
    assert data["omitted"][0]["reason"].startswith("the imported summaries have no per-request timings")
    # With the details, decode speeds come from the records and the chart is drawn.
    detailed = import_file(VLLM_FILE.name, VLLM_FILE.read_bytes(), host="h200-box").sweep
    assert [c["id"] for c in sweep_charts(detailed.pk)["charts"]] == ["decode_tok_s"]


# --- the upload form ---------------------------------------------------------------------


def test_the_upload_form_imports_a_file_once_and_refuses_a_malformed_one(catalog, operator, client):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    client.force_login(operator)
    url = reverse("import-new")
    assert client.get(url).status_code == 200
    upload = SimpleUploadedFile(VLLM_FILE.name, VLLM_FILE.read_bytes(), content_type="application/json")
    response = client.post(url, {"file": upload, "host": "h200-box"}, follow=True)
    sweep = Sweep.objects.get(source="imported")
    assert response.redirect_chain[-1][0] == sweep.get_absolute_url() and sweep.owner == operator
    assert f"as sweep #{sweep.pk}" in response.content.decode()
    again = SimpleUploadedFile(VLLM_FILE.name, VLLM_FILE.read_bytes(), content_type="application/json")
    response = client.post(url, {"file": again, "host": "h200-box"}, follow=True)
    assert f"already imported as sweep #{sweep.pk}" in response.content.decode() and Sweep.objects.count() == 1
    broken = SimpleUploadedFile("broken.jsonl", b'{"backend": "sglang", "completed": "many"}\n')
    response = client.post(url, {"file": broken, "host": "h200-box", "format": "sglang"})
    assert response.status_code == 400 and "line 1" in response.content.decode() and Sweep.objects.count() == 1


def field_html(page, name):
    """The markup of one field of the import form, its label to its help text."""
    start = page.rindex("<div", 0, page.index(f'data-field="{name}"'))
    return page[start:page.index("</div>", start)]


def test_the_import_page_says_what_it_reads_and_labels_every_field(catalog, operator, client):
    client.force_login(operator)
    response = client.get(reverse("import-new"))
    page = response.content.decode()
    assert response.status_code == 200 and "<h1>Import results</h1>" in page
    formats = page[page.index('id="import-formats"'):page.index("</ul>", page.index('id="import-formats"'))]
    assert "<code>vllm bench serve --save-result</code> JSON" in formats
    assert "SGLang <code>bench_serving --output-file</code> JSON Lines" in formats
    assert "with <code>--save-detailed</code> its requests become request records" in formats
    for name, label in (("file", "Result file"), ("format", "Format"), ("host", "Host"), ("model", "Model"),
                        ("engine", "Engine"), ("tp", "TP"), ("workload", "Workload")):
        field = field_html(page, name)
        assert f'<label for="id_{name}">{label}' in field and 'class="hint"' in field, name
    assert '<span class="required" aria-hidden="true">*</span>' in field_html(page, "host")
    assert '<button type="submit" class="button primary">Import</button>' in page
    assert 'id="import-error"' not in page and "field-error" not in page


def test_a_refused_import_says_why_beside_the_field_it_is_about(catalog, operator, client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    Engine.objects.create(name="vllm-other", kind="vllm", argv_template=["vllm", "serve", "{model_path}"])
    client.force_login(operator)
    upload = SimpleUploadedFile(VLLM_FILE.name, VLLM_FILE.read_bytes(), content_type="application/json")
    response = client.post(reverse("import-new"), {"file": upload, "host": "h200-box"})
    page = response.content.decode()
    assert response.status_code == 400 and not Sweep.objects.exists()
    assert "Nothing was imported: the field marked below says why." in page
    engine = field_html(page, "engine")
    assert 'class="field has-error"' in engine
    assert "several vllm engines could have served it (vllm-h200, vllm-other)" in engine
    # The message is the one the select names as its description, as a screen reader reads it.
    assert 'aria-describedby="id_engine_helptext id_engine_error"' in engine and 'id="id_engine_error"' in engine
    assert "field-error" not in field_html(page, "file")
    broken = SimpleUploadedFile("broken.jsonl", b'{"backend": "sglang", "completed": "many"}\n')
    page = client.post(reverse("import-new"), {"file": broken, "host": "h200-box", "format": "sglang"}).content.decode()
    assert "broken.jsonl line 1" in field_html(page, "file") and "field-error" not in field_html(page, "engine")
    missing = client.post(reverse("import-new"), {"host": "h200-box"}).content.decode()
    assert "This field is required." in field_html(missing, "file")


def test_a_viewer_cannot_import(catalog, viewer, client):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    client.force_login(viewer)
    upload = SimpleUploadedFile(VLLM_FILE.name, VLLM_FILE.read_bytes())
    assert client.post(reverse("import-new"), {"file": upload, "host": "h200-box"}).status_code == 403
    assert not Sweep.objects.filter(source="imported").exists()
