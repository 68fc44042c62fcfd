"""A sweep's states say what is happening and what the user can do (issue 18): what a queued
sweep waits for, the points a cancel leaves not_run and resume plans again, the actions
offered only where they apply (and refused with the same words behind the page, the API and
the CLI), a launch that would measure nothing refused with the reason, and the sweep list's
point counts adding up."""

import json
import re
from datetime import timedelta
from html import unescape
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from benchmarks.catalog import load_catalog
from benchmarks.models import Host, Sweep, SweepStatus
from runs.lifecycle import (
    CANCELLED_POINT_REASON,
    SweepStateError,
    cancel_sweep,
    create_sweep,
    launch_sweep,
    resume_sweep,
    start_after,
)
from runs.models import Point, PointStatus, Run, RunEvent, RunEventKind, RunStatus
from runs.worker.executor import Cancelled, RunExecutor
from runs.worker.store import RunStore, record_host_heartbeat
from sweepcore.spec import validate
from tests.web.test_api import user_with_token

HOST = "sim-8x-rtxpro6000"
WORKER = f"`python manage.py worker --host {HOST}`"


def small(name, **changes):
    """Two runs (TP1, TP2) of one fixed-prompt point each, on the simulated 8-GPU host."""
    data = {"name": name, "host": HOST, "engine": "sglang-sim", "model": "Qwen/Qwen3.6-27B", "tp": [1, 2],
            "methods": ["autoregressive"], "workloads": ["fibonacci"], **changes}
    return validate(data, load_catalog())


def launched(name, **changes):
    sweep, _ = create_sweep(small(name, **changes))
    launch_sweep(sweep, enqueue=False)
    sweep.refresh_from_db()
    return sweep


def running(sweep, lease=True):
    """The sweep's first run claimed by a live worker (holding the host's GPUs when `lease`)
    and the sweep running, as the executor leaves them. Returns the run's store."""
    store = RunStore(sweep.runs.order_by("position").first().pk, f"worker-of-{sweep.name}")
    assert store.claim()
    if lease:
        assert store.lease_gpus(8).gpus == list(range(8))
    Run.objects.filter(pk=store.run_id).update(status=RunStatus.RUNNING)
    store.mark_sweep_running()
    return store


def worker_seen(at=None):
    record_host_heartbeat(Host.objects.get(name=HOST).pk, "w@host")
    if at is not None:
        Host.objects.filter(name=HOST).update(last_heartbeat_at=at)


def waiting(client, sweep):
    """The waiting sentence as the page, its live partial and progress.json give it (the same
    in each), or None when none of them has one."""
    page = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    partial = client.get(reverse("sweep-live-partial", args=[sweep.pk])).content.decode()
    data = client.get(reverse("sweep-progress", args=[sweep.pk])).json()
    # The partial always sends the wrapper, by id, so that the sentence can go as it came.
    assert '<div id="sweep-waiting" aria-live="polite" hx-swap-oob="true">' in partial
    sentences = []
    for html in (page, partial):
        start = html.find('<p class="waiting" data-field="waiting">')
        sentences.append(None if start < 0 else unescape(html[start:].split(">", 1)[1].split("</p>", 1)[0]))
    # The pages write a `command` as code; progress.json keeps the backquotes.
    code = None if data["waiting"] is None else re.sub(r"`([^`]*)`", r"<code>\1</code>", data["waiting"])
    assert sentences == [code] * 2
    return data["waiting"]


# --- what a queued sweep waits for --------------------------------------------------------


def test_a_queued_sweep_names_the_sweep_whose_runs_hold_its_host(catalog, viewer, client):
    first = launched("qwen-full")
    holder = running(first)
    behind = launched("queued-behind", tp=[1])
    client.force_login(viewer)
    assert waiting(client, behind) == (
        f"Waiting behind sweep #{first.pk} (qwen-full) on host {HOST}: its runs hold the host's GPUs; "
        f"this sweep starts when they finish.")
    # The first sweep waits for nothing: its own run holds the host.
    assert waiting(client, first) is None
    # Once the first sweep is over, the sentence goes (the live partial sends the empty wrapper).
    holder.release_gpus("teardown")
    Run.objects.filter(sweep=first).update(status=RunStatus.DONE)
    Sweep.objects.filter(pk=first.pk).update(status=SweepStatus.DONE)
    assert waiting(client, behind) is None


def test_a_running_sweep_with_runs_still_queued_says_how_many_wait(catalog, viewer, client):
    first = launched("first")
    running(first)
    second = launched("second", tp=[1, 2, 4])
    # The second sweep's first run was claimed, and waits for the GPUs the first one holds.
    store = running(second, lease=False)
    Run.objects.filter(pk=store.run_id).update(status=RunStatus.STARTING)
    client.force_login(viewer)
    assert waiting(client, second) == (
        f"Waiting behind sweep #{first.pk} (first) on host {HOST}: its runs hold the host's GPUs; "
        f"this sweep's 3 waiting runs start when they finish.")


def test_a_sweep_queued_after_another_one_s_queued_runs_says_they_are_ahead(catalog, viewer, client):
    worker_seen()
    first = launched("first")
    second = launched("second")
    client.force_login(viewer)
    assert waiting(client, second) == (
        f"Waiting behind sweep #{first.pk} (first) on host {HOST}: its runs are ahead of this sweep's in the "
        f"host's queue; this sweep starts after them.")
    # The first one is not behind the second: it was queued first.
    assert waiting(client, first) is None


def test_a_sweep_held_behind_another_by_start_after_says_which(catalog, viewer, client):
    worker_seen()
    first = launched("sim-demo")
    running(first)
    sweep, _ = create_sweep(small("real-demo"))
    launch_sweep(sweep, enqueue=False)
    start_after(sweep, first)
    sweep.refresh_from_db()
    client.force_login(viewer)
    assert waiting(client, sweep) == (
        f"Waiting for sweep #{first.pk} (sim-demo) to finish first: both measure on one machine, so this sweep's "
        f"runs are sent to host {HOST} once it is done.")
    assert RunEvent.objects.filter(run__sweep=sweep, kind=RunEventKind.QUEUED, data__after_sweep=first.pk).count() == 2
    # Once its runs are sent (the other sweep done), it waits for what any queued sweep waits for.
    Sweep.objects.filter(pk=first.pk).update(status=SweepStatus.DONE)
    Run.objects.filter(sweep=first).update(status=RunStatus.DONE)
    assert waiting(client, sweep) is None


def test_a_queued_sweep_on_a_host_without_a_worker_says_how_to_start_one(catalog, viewer, client):
    sweep = launched("lonely")
    client.force_login(viewer)
    assert waiting(client, sweep) == f"No worker of host {HOST} has ever been seen: start one with {WORKER}."
    # Seen an hour ago, and the sweep queued ten minutes ago: nothing has taken its runs since.
    seen = timezone.now() - timedelta(hours=1)
    worker_seen(at=seen)
    RunEvent.objects.filter(run__sweep=sweep).update(at=timezone.now() - timedelta(minutes=10))
    assert waiting(client, sweep) == (
        f"No worker of host {HOST} has been seen since {timezone.localtime(seen):%Y-%m-%d %H:%M} (1 hour ago): "
        f"start one with {WORKER}.")
    # A worker that has just started: it takes the runs any moment.
    worker_seen()
    assert waiting(client, sweep) is None


def test_a_sweep_behind_another_on_a_host_without_a_worker_says_both(catalog, viewer, client):
    first = launched("first")
    second = launched("second")
    client.force_login(viewer)
    assert waiting(client, second) == (
        f"Waiting behind sweep #{first.pk} (first) on host {HOST}: its runs are ahead of this sweep's in the "
        f"host's queue; this sweep starts after them. No worker of host {HOST} has ever been seen: start one "
        f"with {WORKER}.")


def test_nothing_is_said_when_nothing_holds_the_sweep_back(catalog, viewer, client):
    client.force_login(viewer)
    draft, _ = create_sweep(small("draft"))
    assert waiting(client, draft) is None
    worker_seen()
    alone = launched("alone")
    assert waiting(client, alone) is None  # a live worker is about to take it
    running(alone)  # its own run holds the host; its other run waits for it, not for another sweep
    assert waiting(client, alone) is None
    Sweep.objects.filter(pk=alone.pk).update(status=SweepStatus.CANCELLED)
    assert waiting(client, alone) is None


# --- cancel leaves not_run points; resume plans them again --------------------------------


def statuses(sweep):
    return {run.position: sorted(run.points.values_list("status", flat=True))
            for run in sweep.runs.order_by("position")}


def test_a_cancel_marks_the_points_it_leaves_unmeasured_not_run_and_resume_plans_them_again(catalog):
    sweep = launched("cancel-me", concurrency=[1, 2])
    executor = RunExecutor(sweep.runs.get(position=0).pk, "w:0")
    assert executor.claim()
    first_point = executor.store.pending_points()[0]
    Point.objects.filter(pk=first_point.pk).update(status=PointStatus.OK)
    assert cancel_sweep(sweep) == 1  # the second run had not started
    # The first run stops at its next point boundary.
    with pytest.raises(Cancelled):
        executor.check_boundary()
    executor.cancelled()
    assert statuses(sweep) == {0: ["not_run", "ok"], 1: ["not_run", "not_run"]}
    assert set(Point.objects.filter(run__sweep=sweep, status="not_run").values_list("reason", flat=True)) == {
        CANCELLED_POINT_REASON}
    assert set(sweep.runs.values_list("status", flat=True)) == {RunStatus.CANCELLED}

    assert len(resume_sweep(sweep, enqueue=False)) == 2
    assert statuses(sweep) == {0: ["ok", "planned"], 1: ["planned", "planned"]}
    assert not Point.objects.filter(run__sweep=sweep).exclude(status="ok").exclude(reason="").exists()
    # The executor of the resumed run measures only what was not measured.
    again = RunExecutor(sweep.runs.get(position=0).pk, "w:1")
    assert again.claim()
    assert [p.pk for p in again.store.pending_points()] == [
        p.pk for p in Point.objects.filter(run__sweep=sweep, run__position=0, status="planned")]


def test_a_cancelled_sweep_s_progress_does_not_count_its_unrun_points_as_finished(catalog, viewer, client):
    sweep = launched("progress", concurrency=[1, 2])
    Point.objects.filter(pk=sweep.runs.get(position=0).points.order_by("position").first().pk).update(status="ok")
    cancel_sweep(sweep)
    client.force_login(viewer)
    data = client.get(reverse("sweep-progress", args=[sweep.pk])).json()
    assert data["progress"] == {
        "done": 1, "to_measure": 4, "total": 4, "cancelled": 3, "pct": 25,
        "text": "1 of 4 points to measure are finished (25%); 3 were not measured: the sweep was cancelled "
                "(resume measures them)."}
    assert data["counts"] == {"ok": 1, "not_run": 3}
    # A run whose server died: its not_run points are settled (nothing will measure them).
    Run.objects.filter(sweep=sweep).update(status=RunStatus.CRASHED)
    assert client.get(reverse("sweep-progress", args=[sweep.pk])).json()["progress"]["done"] == 4


# --- the actions offered, and refused with the same words -----------------------------------


def offered(client, sweep):
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    return {action for action in ("launch", "cancel", "resume")
            if f'action="{reverse(f"sweep-{action}", args=[sweep.pk])}"' in html}


def test_each_action_is_offered_only_where_it_applies(catalog, operator, client):
    client.force_login(operator)
    sweep, _ = create_sweep(small("actions"))
    assert offered(client, sweep) == {"launch"}
    launch_sweep(sweep, enqueue=False)
    assert offered(client, sweep) == {"cancel"}  # its runs wait in the queue: nothing to resume
    store = running(sweep)
    assert offered(client, sweep) == {"cancel"}  # a live worker drives it
    # Its worker stopped heartbeating: resume has a run to take over.
    Run.objects.filter(pk=store.run_id).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert offered(client, sweep) == {"cancel", "resume"}
    cancel_sweep(sweep)
    assert offered(client, sweep) == {"resume"}
    Run.objects.filter(sweep=sweep).update(status=RunStatus.DONE)
    Sweep.objects.filter(pk=sweep.pk).update(status=SweepStatus.DONE)
    assert offered(client, sweep) == set()


def test_the_server_refuses_what_the_page_does_not_offer_with_the_same_words(catalog, operator, client):
    draft, _ = create_sweep(small("draft"))
    with pytest.raises(SweepStateError, match=f"sweep {draft.pk} is a draft: it has nothing to cancel"):
        cancel_sweep(draft)
    queued = launched("queued")
    with pytest.raises(SweepStateError) as refused:
        resume_sweep(queued)
    assert str(refused.value) == (
        f"sweep {queued.pk} has nothing to resume: its 2 unfinished runs are queued or driven by a live worker "
        f"(a run whose worker stopped can be resumed once its heartbeat is 60 s old)")
    # The page says it as a message, the API as a 409, the CLI on stderr with status 2.
    client.force_login(operator)
    response = client.post(reverse("sweep-cancel", args=[draft.pk]), follow=True)
    assert f"Cannot cancel sweep #{draft.pk}: sweep {draft.pk} is a draft: it has nothing to cancel" in (
        response.content.decode())
    _, auth = user_with_token("operator", "ops")
    answer = client.post(f"/api/sweeps/{queued.pk}/resume", **auth)
    assert answer.status_code == 409 and answer.json() == {"detail": str(refused.value)}
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("sweep", "resume", str(queued.pk), stdout=StringIO(), stderr=err)
    assert exited.value.code == 2 and err.getvalue().strip() == str(refused.value)
    # A finished sweep whose runs all ended has nothing to resume either.
    Run.objects.filter(sweep=queued).update(status=RunStatus.DONE)
    Sweep.objects.filter(pk=queued.pk).update(status=SweepStatus.DONE)
    with pytest.raises(SweepStateError, match="every run of it has ended"):
        resume_sweep(queued)


def test_workers_started_again_resume_every_unfinished_run(catalog):
    sweep = launched("restarted")
    running(sweep)
    with pytest.raises(SweepStateError):
        resume_sweep(sweep, enqueue=False)
    assert len(resume_sweep(sweep, enqueue=False, workers_restarted=True)) == 2


# --- a launch that would measure nothing ----------------------------------------------------

BEYOND = {"workloads": [{"long-context": {"prompt_tokens": [32700]}}], "concurrency": [1, 2]}
REASON = ("nothing to measure: all 4 points are skipped — 4 exceed the context "
          "(prompt 32,700 + 256 new tokens + 16 margin > 32,768)")


def test_a_launch_that_would_measure_nothing_is_refused_with_the_reason(catalog, operator, client):
    sweep, the_plan = create_sweep(small("beyond", **BEYOND))
    assert the_plan.nothing_to_measure == REASON
    with pytest.raises(SweepStateError) as refused:
        launch_sweep(sweep)
    assert str(refused.value) == REASON
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.DRAFT and not sweep.runs.exclude(status=RunStatus.PLANNED).exists()
    # The page shows the reason beside a disabled Launch button.
    client.force_login(operator)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert reverse("sweep-launch", args=[sweep.pk]) not in html
    assert '<button type="button" class="button primary" disabled aria-describedby="launch-refused">Launch</button>' in html
    assert f'data-field="launch-refused">Cannot launch: {escape(REASON)}.</p>' in html
    # Neither is a page with nothing to measure a progress of "0 of 0 … (100%)".
    assert "There is nothing to measure: every point was skipped." in html and "(100%)" not in html


def test_the_api_and_the_cli_refuse_it_and_store_nothing(catalog, client, tmp_path):
    _, auth = user_with_token("operator", "ops")
    spec = small("beyond", **BEYOND).to_dict()
    plan = client.post("/api/sweeps/plan", json.dumps(spec), content_type="application/json", **auth)
    assert plan.status_code == 200 and plan.json()["nothing_to_measure"] == REASON
    answer = client.post("/api/sweeps?launch=true", json.dumps(spec), content_type="application/json", **auth)
    assert answer.status_code == 409 and answer.json() == {"detail": REASON}
    assert not Sweep.objects.exists()  # refused as a whole: no draft left behind
    draft = client.post("/api/sweeps", json.dumps(spec), content_type="application/json", **auth).json()
    answer = client.post(f"/api/sweeps/{draft['id']}/launch", **auth)
    assert answer.status_code == 409 and answer.json() == {"detail": REASON}

    path = tmp_path / "beyond.yaml"
    path.write_text(json.dumps(spec))  # YAML reads JSON
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("sweep", "run", str(path), "--inline", stdout=StringIO(), stderr=err)
    assert exited.value.code == 2 and err.getvalue().strip() == REASON
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("sweep", "launch", str(draft["id"]), stdout=StringIO(), stderr=err)
    assert exited.value.code == 2 and err.getvalue().strip() == REASON
    assert Sweep.objects.count() == 1
    err = StringIO()
    call_command("sweep", "validate", str(path), stdout=StringIO(), stderr=err)
    assert f"warning: {REASON}; launching it is refused" in err.getvalue()


def test_the_builder_says_it_before_launch_and_refuses_the_launch(catalog, operator, client):
    client.force_login(operator)
    text = json.dumps(small("beyond", **BEYOND).to_dict())
    html = client.post(reverse("sweep-builder-preview"), {"editor": "yaml", "spec_yaml": text}).content.decode()
    assert f'data-field="nothing-to-measure">Cannot be launched: {escape(REASON)}.</p>' in html
    # The Launch button comes again, out of band, disabled.
    actions = html[html.index('<div class="actions" id="builder-actions" hx-swap-oob="true">'):]
    assert 'value="launch" class="primary" disabled' in actions[:actions.index("</div>")]
    response = client.post(reverse("sweep-new"), {"editor": "yaml", "spec_yaml": text, "action": "launch"})
    assert response.status_code == 400 and escape(REASON) in response.content.decode()
    assert not Sweep.objects.exists()
    # Saved as a draft it is kept, to be edited; a plan with a point to measure launches.
    fits = json.dumps(small("fits").to_dict())
    html = client.post(reverse("sweep-builder-preview"), {"editor": "yaml", "spec_yaml": fits}).content.decode()
    assert 'data-field="nothing-to-measure"' not in html and 'value="launch" class="primary">' in html


# --- the sweep list's point counts ------------------------------------------------------------


def test_the_sweep_list_counts_only_measured_points_as_measured(catalog, viewer, client, django_assert_max_num_queries):
    sweep = launched("counts", concurrency=[1, 2, 4])
    first, second = sweep.runs.order_by("position")
    points = list(first.points.order_by("position"))
    Point.objects.filter(pk=points[0].pk).update(status=PointStatus.OK)
    Point.objects.filter(pk=points[1].pk).update(status=PointStatus.CRASHED)
    Point.objects.filter(pk=points[2].pk).update(status=PointStatus.NOT_RUN)
    Point.objects.filter(run=second).update(status=PointStatus.SKIPPED)
    launched("other")  # a second row: the counts stay per sweep, in the page's one query
    client.force_login(viewer)
    client.get(reverse("sweep-list"))
    with django_assert_max_num_queries(6):
        response = client.get(reverse("sweep-list"))
    rows = {row.name: row for row in response.context["page"].object_list}
    row = rows["counts"]
    assert (row.points_measured, row.points_planned, row.points_not_run, row.points_skipped, row.point_count) == (
        2, 0, 1, 3, 6)
    html = response.content.decode()
    assert ('<td class="num" data-field="points">Measured 2 · not run 1 · skipped 3 <span class="muted">/ 6</span>'
            '</td>') in html
    assert ('<td class="num" data-field="points">Measured 0 · to measure 2 <span class="muted">/ 2</span></td>'
            ) in html
