"""Curation in the admin: each action, its audit record, read-only measurements, and the
role boundaries of the admin."""

import csv
import io

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import LLM, Engine, FailureKind, Host, KnownFailure, Sweep, SweepSource, SweepStatus, Workload
from runs import curation
from runs.lifecycle import SweepStateError, queue_new_attempts
from runs.models import (
    CurationAction,
    CurationEvent,
    Point,
    PointStatus,
    RequestRecord,
    Run,
    RunEvent,
    RunEventKind,
    RunStatus,
)


def make_sweep(name="s", decode=(100.0, 110.0), status=SweepStatus.DONE, sweep_status_points=PointStatus.OK):
    host = Host.objects.get(name="sim-8x-rtxpro6000")
    sweep = Sweep.objects.create(name=name, spec={}, host=host, engine=Engine.objects.get(name="sglang-sim"),
                                 llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"), status=status)
    workload = Workload.objects.get(name="long-context")
    run = Run.objects.create(sweep=sweep, position=0, method="ddtree", params={"budget": 15, "topk_cap": 8}, tp=1,
                             status=RunStatus.DONE, engine_version="sim 1.0", started_at=timezone.now())
    for i, value in enumerate(decode):
        Point.objects.create(run=run, position=i, workload=workload, prompt_tokens=1000 * (i + 1), max_new_tokens=64,
                             concurrency=1, status=sweep_status_points, decode_tok_s=value, finished_at=timezone.now())
    return sweep


def act(client, model, action, ids, **extra):
    url = reverse(f"admin:{model}_changelist")
    return client.post(url, {"action": action, ACTION_CHECKBOX_NAME: [str(i) for i in ids], **extra}, follow=True)


def messages_of(response):
    return [str(m) for m in response.context["messages"]]


def test_excluding_asks_for_a_reason_then_stores_it_with_an_audit_record(catalog, curator, client):
    sweep = make_sweep()
    points = list(Point.objects.filter(run__sweep=sweep).order_by("position"))
    client.force_login(curator)
    form = act(client, "runs_point", "exclude_results", [p.pk for p in points])
    assert form.status_code == 200 and 'name="text"' in form.content.decode()
    assert not Point.objects.filter(excluded=True).exists()
    done = act(client, "runs_point", "exclude_results", [p.pk for p in points], apply="1", text="thermal throttling")
    assert "Exclude from charts and history: 2 points changed." in messages_of(done)
    assert set(Point.objects.values_list("excluded", "exclude_reason")) == {(True, "thermal throttling")}
    events = list(CurationEvent.objects.order_by("target_id"))
    assert [(e.action, e.target_type, e.target_id, e.user, e.reason) for e in events] == [
        (CurationAction.EXCLUDE, "point", p.pk, curator, "thermal throttling") for p in points
    ]
    assert events[0].changes == {"excluded": [False, True], "exclude_reason": ["", "thermal throttling"]}
    # The audit is shown on the object.
    page = client.get(reverse("admin:runs_point_change", args=[points[0].pk])).content.decode()
    assert "Curation history" in page and "thermal throttling" in page and "cora" in page


def test_an_exclusion_without_a_reason_changes_nothing(catalog, curator, client):
    sweep = make_sweep()
    client.force_login(curator)
    ids = list(Point.objects.filter(run__sweep=sweep).values_list("pk", flat=True))
    response = act(client, "runs_point", "exclude_results", ids, apply="1", text="   ")
    assert any("needs a reason" in m for m in messages_of(response))
    assert not Point.objects.filter(excluded=True).exists() and not CurationEvent.objects.exists()


def test_include_again_clears_the_exclusion_and_is_recorded(catalog, curator, client):
    sweep = make_sweep()
    run = sweep.runs.get()
    curation.exclude(Run.objects.filter(pk=run.pk), curator, "bad driver")
    client.force_login(curator)
    response = act(client, "runs_run", "include_results", [run.pk])
    assert "Included again: 1 changed." in messages_of(response)
    run.refresh_from_db()
    assert (run.excluded, run.exclude_reason) == (False, "")
    assert list(CurationEvent.objects.order_by("id").values_list("action", flat=True)) == ["exclude", "include"]


def test_marking_a_baseline_unmarks_the_previous_one_of_the_same_series(catalog, curator, client):
    old, new = make_sweep("old"), make_sweep("new")
    old_point = Point.objects.get(run__sweep=old, position=0)
    new_point = Point.objects.get(run__sweep=new, position=0)
    other_length = Point.objects.get(run__sweep=new, position=1)  # another series
    client.force_login(curator)
    act(client, "runs_point", "mark_baseline", [old_point.pk, other_length.pk])
    response = act(client, "runs_point", "mark_baseline", [new_point.pk])
    assert "Marked as the baseline of its series: 1 changed." in messages_of(response)
    assert set(Point.objects.filter(is_baseline=True).values_list("pk", flat=True)) == {new_point.pk, other_length.pk}
    unmark = CurationEvent.objects.get(action=CurationAction.UNMARK_BASELINE)
    assert unmark.target_id == old_point.pk and f"point {new_point.pk}" in unmark.reason
    same_series = act(client, "runs_point", "mark_baseline", [old_point.pk, new_point.pk])
    assert any("are the same series" in m for m in messages_of(same_series))
    assert Point.objects.get(pk=new_point.pk).is_baseline


def test_annotating_appends_the_note(catalog, curator, client):
    run = make_sweep().runs.get()
    client.force_login(curator)
    act(client, "runs_run", "annotate", [run.pk], apply="1", text="driver 580.1")
    response = act(client, "runs_run", "annotate", [run.pk], apply="1", text="rerun after reboot")
    assert "Annotate: 1 run changed." in messages_of(response)
    run.refresh_from_db()
    assert run.notes == "driver 580.1\nrerun after reboot"
    assert CurationEvent.objects.filter(action=CurationAction.ANNOTATE).count() == 2


def test_rerun_makes_a_new_attempt_and_keeps_the_old_one(catalog, curator, client, django_capture_on_commit_callbacks):
    sweep = make_sweep(sweep_status_points=PointStatus.CRASHED)
    old = sweep.runs.get()
    Run.objects.filter(pk=old.pk).update(status=RunStatus.CRASHED, failure_kind=FailureKind.KILLED)
    Point.objects.filter(run=old, position=1).update(status=PointStatus.SKIPPED, reason="context cap: 2000 + 64 > 1")
    client.force_login(curator)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = act(client, "runs_run", "rerun", [old.pk])
    new = Run.objects.exclude(pk=old.pk).get()
    assert f"Re-run queued: run {new.pk} (attempt 2)." in messages_of(response)
    assert (new.attempt, new.retry_of_id, new.status, new.method, new.params, new.tp) == (
        2, old.pk, RunStatus.QUEUED, old.method, old.params, old.tp)
    assert list(new.points.order_by("position").values_list("status", flat=True)) == ["planned", "skipped"]
    assert Run.objects.get(pk=old.pk).status == RunStatus.CRASHED  # kept as it was
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.QUEUED and len(callbacks) == 1
    assert RunEvent.objects.filter(run=new, kind=RunEventKind.QUEUED).exists()
    event = CurationEvent.objects.get(action=CurationAction.RERUN)
    assert (event.target_id, event.changes) == (old.pk, {"rerun_as": [None, new.pk]})
    # A run still being measured is not re-run.
    busy = act(client, "runs_run", "rerun", [new.pk])
    assert any("still in progress" in m for m in messages_of(busy))
    assert Run.objects.count() == 2


def test_runs_of_an_imported_sweep_are_not_rerun_and_the_others_are(catalog, curator, client,
                                                                    django_capture_on_commit_callbacks):
    native, imported = make_sweep("native"), make_sweep("imported")
    Sweep.objects.filter(pk=imported.pk).update(source=SweepSource.IMPORTED)
    native_run, imported_run = native.runs.get(), imported.runs.get()
    client.force_login(curator)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = act(client, "runs_run", "rerun", [native_run.pk, imported_run.pk])
    new = Run.objects.get(retry_of=native_run)
    assert messages_of(response) == [
        f"Not re-run: run {imported_run.pk} (sweep {imported.pk}) — imported from a result file, nothing here can "
        "measure them again.",
        f"Re-run queued: run {new.pk} (attempt 2).",
    ]
    assert len(callbacks) == 1
    imported.refresh_from_db()
    assert imported.runs.count() == 1 and imported.status == SweepStatus.DONE
    assert list(CurationEvent.objects.values_list("action", "target_id")) == [(CurationAction.RERUN, native_run.pk)]
    # Only imported runs selected: nothing happens, and it says so.
    response = act(client, "runs_run", "rerun", [imported_run.pk])
    assert len(messages_of(response)) == 1 and "Not re-run" in messages_of(response)[0]
    assert Run.objects.count() == 3
    # The function itself refuses them too, whoever calls it.
    with pytest.raises(SweepStateError, match=f"run {imported_run.pk} of imported sweep"):
        queue_new_attempts([Run.objects.select_related("sweep").get(pk=imported_run.pk)], "again")
    assert Run.objects.count() == 3


def _known_failure():
    host = Host.objects.get(name="sim-8x-rtxpro6000")
    return KnownFailure.objects.create(
        engine_kind="sglang", llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"), method="ddtree",
        params={"budget": 8, "topk_cap": 8}, tp=1, compute_capability=host.compute_capability,
        failure_kind=FailureKind.CUDA_ILLEGAL_INSTRUCTION, signature="an illegal instruction was encountered",
        first_seen_at=timezone.now(), last_seen_at=timezone.now(),
    )


def test_lifting_and_reimposing_a_quarantine_ask_why_and_are_recorded(catalog, curator, client):
    kf = _known_failure()
    client.force_login(curator)
    response = act(client, "benchmarks_knownfailure", "lift", [kf.pk], apply="1", text="fixed in sglang 0.5.3")
    assert "Lift the quarantine: 1 known failure changed." in messages_of(response)
    kf.refresh_from_db()
    assert (kf.active, kf.lifted_by, kf.lift_reason) == (False, curator, "fixed in sglang 0.5.3") and kf.lifted_at
    act(client, "benchmarks_knownfailure", "reimpose", [kf.pk], apply="1", text="crashed again on 0.5.3")
    kf.refresh_from_db()
    assert (kf.active, kf.lifted_at, kf.lift_reason) == (True, None, "")
    assert list(CurationEvent.objects.order_by("id").values_list("action", "reason")) == [
        ("lift_quarantine", "fixed in sglang 0.5.3"), ("reimpose_quarantine", "crashed again on 0.5.3")]
    page = client.get(reverse("admin:benchmarks_knownfailure_change", args=[kf.pk])).content.decode()
    assert "crashed again on 0.5.3" in page
    assert 'name="active"' not in page  # not edited by hand: the actions do it, with a reason


def test_export_actions_return_the_selection_as_csv(catalog, curator, client):
    sweep = make_sweep()
    make_sweep("other")
    client.force_login(curator)
    for model, ids in (("runs_run", [sweep.runs.get().pk]), ("benchmarks_sweep", [sweep.pk]),
                       ("runs_point", list(Point.objects.filter(run__sweep=sweep).values_list("pk", flat=True)))):
        response = client.post(reverse(f"admin:{model}_changelist"),
                               {"action": "export_csv", ACTION_CHECKBOX_NAME: [str(i) for i in ids]})
        rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
        assert {int(r["sweep_id"]) for r in rows} == {sweep.pk} and len(rows) == 2, model
        noun = {"runs_run": "run", "benchmarks_sweep": "sweep", "runs_point": "points"}[model]
        shown = messages_of(client.get(reverse(f"admin:{model}_changelist")))
        assert shown == [f"Exported 2 point(s) of {len(ids)} {noun} as CSV."], model
    kf = _known_failure()
    KnownFailure.objects.filter(pk=kf.pk).update(lift_reason="=HYPERLINK(\"http://evil.example\")")
    response = client.post(reverse("admin:benchmarks_knownfailure_changelist"),
                           {"action": "export_csv", ACTION_CHECKBOX_NAME: [str(kf.pk)]})
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert rows[0]["signature"] == "an illegal instruction was encountered"
    # A curator's text is not a formula in a spreadsheet (issue 33); the counts stay numbers.
    assert rows[0]["lift_reason"] == "'=HYPERLINK(\"http://evil.example\")" and rows[0]["seen_count"] == "1"


def test_measured_values_are_read_only_and_flag_edits_are_recorded(catalog, admin, curator, client):
    point = Point.objects.filter(run__sweep=make_sweep()).first()
    client.force_login(curator)
    url = reverse("admin:runs_point_change", args=[point.pk])
    page = client.get(url).content.decode()
    assert 'name="decode_tok_s"' not in page and 'name="status"' not in page and 'name="notes"' in page
    # The verdict is evidence, like the numbers: no curator can change it.
    assert 'name="validity"' not in page and 'name="validity_reasons"' not in page
    response = client.post(url, {"decode_tok_s": "999", "status": "crashed", "excluded": "on", "validity": "valid",
                                 "exclude_reason": "outlier", "notes": "", "is_baseline": ""})
    assert response.status_code == 302
    point.refresh_from_db()
    assert (point.decode_tok_s, point.status, point.excluded, point.exclude_reason) == (100.0, "ok", True, "outlier")
    event = CurationEvent.objects.get()
    assert event.action == CurationAction.EDIT and event.changes["excluded"] == [False, True]
    # Raw records cannot be changed by anyone.
    client.force_login(admin)
    assert client.get(reverse("admin:runs_requestrecord_add")).status_code == 403


def test_roles_in_the_admin(operator, make_user, catalog, client):
    sweep = make_sweep()
    point = Point.objects.filter(run__sweep=sweep).first()
    engine = Engine.objects.get(name="sglang-sim")
    argv = list(engine.argv_template)
    # An operator without staff status is sent to the admin login.
    client.force_login(operator)
    response = client.get(reverse("admin:runs_point_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    # A viewer with staff status reads, but has no curation action and cannot change flags.
    viewer = make_user("vera", "viewer", is_staff=True)
    client.force_login(viewer)
    page = client.get(reverse("admin:runs_point_changelist"))
    assert page.status_code == 200 and "exclude_results" not in page.content.decode()
    act(client, "runs_point", "exclude_results", [point.pk], apply="1", text="no")
    assert client.post(reverse("admin:runs_point_change", args=[point.pk]), {"excluded": "on"}).status_code == 403
    assert not Point.objects.filter(excluded=True).exists() and not CurationEvent.objects.exists()
    # A curator curates, but cannot change what a host executes.
    curator = make_user("cora", "curator", is_staff=True)
    client.force_login(curator)
    assert "exclude_results" in client.get(reverse("admin:runs_point_changelist")).content.decode()
    url = reverse("admin:benchmarks_engine_change", args=[engine.pk])
    assert client.post(url, {"name": "sglang-sim", "argv_template": '["rm", "-rf", "/"]'}).status_code == 403
    assert client.get(reverse("admin:benchmarks_host_add")).status_code == 403
    engine.refresh_from_db()
    assert engine.argv_template == argv
    # Curators are operators too: they may re-run (it launches a server).
    assert "rerun" in client.get(reverse("admin:runs_run_changelist")).content.decode()


def test_the_admin_index_shows_running_sweeps_crashes_and_quarantines(catalog, curator, client):
    running = make_sweep("busy-sweep", status=SweepStatus.RUNNING)
    crashed = make_sweep("crashy").runs.get()
    Run.objects.filter(pk=crashed.pk).update(status=RunStatus.CRASHED, failure_kind=FailureKind.CUDA_OOM,
                                             finished_at=timezone.now())
    _known_failure()
    client.force_login(curator)
    page = client.get(reverse("admin:index")).content.decode()
    assert f"#{running.pk} busy-sweep" in page
    assert dict(FailureKind.choices)[FailureKind.CUDA_OOM] in page
    assert "ddtree budget=8 topk_cap=8 TP1</a>" in page and "&quot;budget&quot;" not in page


def test_a_big_list_pages_without_counting_the_whole_table(catalog, curator, client, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs import admin as runs_admin

    sweep = make_sweep(decode=[1.0] * 30)
    Point.objects.filter(run__sweep=sweep, position__lt=3).update(excluded=True, exclude_reason="outlier")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE runs_point")
    monkeypatch.setattr(runs_admin, "ESTIMATE_ABOVE_ROWS", 10)
    monkeypatch.setattr(runs_admin.PointAdmin, "list_per_page", 5)
    client.force_login(curator)
    url = reverse("admin:runs_point_changelist")
    with CaptureQueriesContext(connection) as queries:
        page = client.get(url, {"p": "2"})
    counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"].upper() and "runs_point" in q["sql"]]
    # Counted at most 11 rows (LIMIT), never the whole table.
    assert counts and all("LIMIT 11" in sql for sql in counts), counts
    cl = page.context["cl"]
    assert [p.position for p in cl.result_list] == [24, 23, 22, 21, 20]  # newest first, the second page
    html = page.content.decode()
    if connection.vendor == "postgresql":
        assert cl.paginator.count_kind == "estimate" and f"about {cl.result_count} points (an estimate)" in html
    else:  # SQLite keeps no row estimate: the total is not shown, the links run a few pages ahead
        assert cl.paginator.count_kind == "unknown" and "more than 10 points" in html
        assert list(cl.paginator.get_elided_page_range(2)) == [1, 2, 3, 4, 5, "…"]
        assert str(runs_admin.MANY) not in html and str(runs_admin.MANY // 5) not in html
    # A small result is counted, exactly.
    filtered = client.get(url, {"excluded__exact": "1"})
    assert filtered.context["cl"].paginator.count_kind == "exact" and filtered.context["cl"].result_count == 3
    assert "\n3 points\n" in filtered.content.decode()


def test_points_filter_by_failure_kind_and_models_by_draft_model(catalog, curator, client):
    crashed = make_sweep("crashy").runs.get()
    Run.objects.filter(pk=crashed.pk).update(status=RunStatus.CRASHED, failure_kind=FailureKind.CUDA_OOM)
    make_sweep("fine")
    client.force_login(curator)
    page = client.get(reverse("admin:runs_point_changelist"), {"run__failure_kind__exact": FailureKind.CUDA_OOM})
    assert {p.run_id for p in page.context["cl"].result_list} == {crashed.pk}
    LLM.objects.create(name="with-draft", path="/m", context_length=4096, draft_model_path="/m-draft")
    url = reverse("admin:benchmarks_llm_changelist")
    listed = {value: {m.name for m in client.get(url, {"draft": value}).context["cl"].result_list}
              for value in ("yes", "no")}
    assert listed["yes"] == {"with-draft"}
    assert listed["no"] == set(LLM.objects.exclude(name="with-draft").values_list("name", flat=True)) != set()


def test_sweep_name_and_notes_edits_are_recorded(make_user, catalog, client):
    sweep = make_sweep("nightly")
    operator = make_user("otto", "operator", is_staff=True)
    client.force_login(operator)
    url = reverse("admin:benchmarks_sweep_change", args=[sweep.pk])
    response = client.post(url, {"name": "nightly-2", "notes": "driver 580 on this host", "status": "cancelled"})
    assert response.status_code == 302
    sweep.refresh_from_db()
    assert (sweep.name, sweep.notes, sweep.status) == ("nightly-2", "driver 580 on this host", SweepStatus.DONE)
    event = CurationEvent.objects.get()
    assert (event.action, event.target_type, event.target_id, event.user) == (
        CurationAction.EDIT, "sweep", sweep.pk, operator)
    assert event.changes == {"name": ["nightly", "nightly-2"], "notes": ["", "driver 580 on this host"]}
    page = client.get(url).content.decode()
    assert "Curation history" in page and "Edited in the admin" in page and "name: &#x27;nightly&#x27;" in page
    client.post(url, {"name": "nightly-2", "notes": "driver 580 on this host"})  # no change: nothing recorded
    assert CurationEvent.objects.count() == 1


def test_every_role_reads_the_curation_history(make_user, catalog, client):
    from runs.roles import ROLES

    # The migrated groups hold exactly the current ROLES (which tests re-create after a flush).
    for name, codenames in ROLES.items():
        perms = Group.objects.get(name=name).permissions.values_list("content_type__app_label", "codename")
        assert set(perms) == set(codenames) and ("runs", "view_curationevent") in codenames, name
    run = make_sweep().runs.get()
    curation.exclude(Run.objects.filter(pk=run.pk), make_user("cora", "curator", is_staff=True), "a noisy neighbour")
    for group in ("viewer", "operator"):
        client.force_login(make_user(group, group, is_staff=True))
        page = client.get(reverse("admin:runs_curationevent_changelist"))
        assert page.status_code == 200 and "a noisy neighbour" in page.content.decode(), group


def test_measured_data_cannot_be_deleted_in_the_admin_even_by_a_superuser(admin, catalog, client):
    measured = make_sweep("measured")
    point = Point.objects.filter(run__sweep=measured).order_by("position").first()
    record = RequestRecord.objects.create(point=point, index=0, send_time=1.7e9, output_tokens=3)
    draft = make_sweep("draft", status=SweepStatus.DRAFT, sweep_status_points=PointStatus.PLANNED)
    Run.objects.filter(sweep=draft).update(status=RunStatus.PLANNED)
    client.force_login(admin)
    for model, obj in (("runs_run", measured.runs.get()), ("runs_point", point), ("runs_requestrecord", record),
                       ("benchmarks_sweep", measured)):
        assert client.post(reverse(f"admin:{model}_delete", args=[obj.pk]), {"post": "yes"}).status_code == 403, model
        if model != "benchmarks_sweep":
            assert 'value="delete_selected"' not in client.get(reverse(f"admin:{model}_changelist")).content.decode()
    confirm = act(client, "benchmarks_sweep", "delete_selected", [measured.pk, draft.pk])
    assert set(confirm.context["perms_lacking"]) == {"sweep"}  # the measured one; a draft's runs may go with it
    assert act(client, "benchmarks_sweep", "delete_selected", [measured.pk, draft.pk], post="yes").status_code == 403
    assert Sweep.objects.count() == 2 and Point.objects.count() == 4 and RequestRecord.objects.exists()
    # A draft goes, with its planned runs and points: nothing measured is lost.
    act(client, "benchmarks_sweep", "delete_selected", [draft.pk], post="yes")
    assert list(Sweep.objects.values_list("pk", flat=True)) == [measured.pk]
    assert Point.objects.count() == 2 and RequestRecord.objects.get() == record


def test_a_staff_operator_neither_curates_nor_changes_what_a_host_runs(make_user, catalog, client):
    sweep = make_sweep()
    run, point, kf = sweep.runs.get(), Point.objects.filter(run__sweep=sweep).first(), _known_failure()
    engine, host = Engine.objects.get(name="sglang-sim"), Host.objects.get(name="sim-8x-rtxpro6000")
    llm = LLM.objects.get(name="Qwen/Qwen3.6-27B")
    before = [list(engine.argv_template), host.gpu_count, llm.path]
    client.force_login(make_user("otto", "operator", is_staff=True))
    for model in ("runs_point", "runs_run", "benchmarks_knownfailure"):
        page = client.get(reverse(f"admin:{model}_changelist"))
        assert page.status_code == 200, model
        for action in ("exclude_results", "mark_baseline", "annotate", "rerun", "lift", "reimpose"):
            assert f'value="{action}"' not in page.content.decode(), (model, action)
    act(client, "runs_point", "exclude_results", [point.pk], apply="1", text="no")
    act(client, "runs_run", "rerun", [run.pk])
    act(client, "benchmarks_knownfailure", "lift", [kf.pk], apply="1", text="no")
    assert client.post(reverse("admin:runs_point_change", args=[point.pk]),
                       {"excluded": "on", "exclude_reason": "x"}).status_code == 403
    assert not Point.objects.filter(excluded=True).exists() and Run.objects.count() == 1
    assert KnownFailure.objects.get().active and not CurationEvent.objects.exists()
    # Reads engines, hosts and models, changes none.
    for model, obj, data in (
        ("benchmarks_engine", engine, {"name": engine.name, "kind": engine.kind,
                                       "argv_template": '["rm", "-rf", "/"]'}),
        ("benchmarks_host", host, {"name": host.name, "gpu_count": 64}),
        ("benchmarks_llm", llm, {"name": llm.name, "path": "/tmp/other", "context_length": 4096}),
    ):
        assert client.get(reverse(f"admin:{model}_change", args=[obj.pk])).status_code == 200, model
        assert client.post(reverse(f"admin:{model}_change", args=[obj.pk]), data).status_code == 403, model
        assert client.get(reverse(f"admin:{model}_add")).status_code == 403, model
    engine.refresh_from_db(), host.refresh_from_db(), llm.refresh_from_db()
    assert [engine.argv_template, host.gpu_count, llm.path] == before


def test_only_staff_admins_change_models(admin, make_user, catalog, client):
    llm = LLM.objects.get(name="Qwen/Qwen3.6-27B")
    url = reverse("admin:benchmarks_llm_change", args=[llm.pk])
    data = {"name": llm.name, "path": "/srv/models/other", "context_length": 4096, "draft_model_path": "",
            "description": ""}
    new = {**data, "name": "another-model"}
    for group in ("viewer", "operator", "curator"):
        client.force_login(make_user(group, group, is_staff=True))
        assert client.post(url, data).status_code == 403, group
        assert client.post(reverse("admin:benchmarks_llm_add"), new).status_code == 403, group
        assert client.post(reverse("admin:benchmarks_llm_delete", args=[llm.pk]), {"post": "yes"}).status_code == 403
    llm.refresh_from_db()
    assert llm.path != "/srv/models/other" and not LLM.objects.filter(name="another-model").exists()
    # The same request from a staff admin goes through: the refusals above were the role's.
    client.force_login(admin)
    assert client.post(url, data).status_code == 302
    llm.refresh_from_db()
    assert (llm.path, llm.context_length) == ("/srv/models/other", 4096)


def test_the_points_admin_lists_and_filters_by_verdict(catalog, curator, client):
    sweep = make_sweep()
    points = list(Point.objects.filter(run__sweep=sweep).order_by("pk"))
    Point.objects.filter(pk=points[0].pk).update(validity="suspect")
    Point.objects.filter(pk__in=[p.pk for p in points[1:]]).update(validity="valid")
    client.force_login(curator)
    page = client.get(reverse("admin:runs_point_changelist"), {"validity__exact": "suspect"}).content.decode()
    assert f'href="/admin/runs/point/{points[0].pk}/change/' in page
    assert f'href="/admin/runs/point/{points[1].pk}/change/' not in page
