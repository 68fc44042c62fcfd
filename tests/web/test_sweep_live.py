"""The live sweep page: progress.json, the run drawer, cancel and resume (the partials the
page swaps in: tests/web/test_partials.py)."""

from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from benchmarks.catalog import load_catalog
from benchmarks.models import FailureKind, SweepStatus
from runs.lifecycle import create_sweep, launch_sweep
from runs.models import Point, PointStatus, Run, RunEvent, RunEventKind, RunStatus
from runs.results.live import tail_lines
from sweepcore.spec import load_spec_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen3.6-27b-sm120.yaml"


@pytest.fixture
def sweep(catalog):
    spec = load_spec_file(EXAMPLE, load_catalog())
    return create_sweep(spec)[0]


def _measured(run):
    return list(run.points.exclude(status=PointStatus.SKIPPED).order_by("position"))


# --- progress.json ----------------------------------------------------------------------


def test_progress_json_counts_points_per_run_and_overall(sweep, viewer, client):
    runs = list(sweep.runs.order_by("position"))
    first, second = runs[0], runs[1]
    ok = _measured(first)
    Point.objects.filter(pk__in=[p.pk for p in ok[:2]]).update(status=PointStatus.OK)
    Point.objects.filter(pk=ok[2].pk).update(status=PointStatus.CRASHED)
    Point.objects.filter(pk__in=[p.pk for p in ok[3:]]).update(status=PointStatus.NOT_RUN)
    Run.objects.filter(pk=first.pk).update(
        status=RunStatus.CRASHED,
        failure_kind=FailureKind.CUDA_ILLEGAL_INSTRUCTION,
        failure_cause="CUDA error: an illegal instruction was encountered",
    )
    Point.objects.filter(pk=_measured(second)[0].pk).update(status=PointStatus.OK)
    Run.objects.filter(pk=second.pk).update(status=RunStatus.RUNNING)

    client.force_login(viewer)
    response = client.get(reverse("sweep-progress", args=[sweep.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    data = response.json()
    assert data["sweep"] == {"id": sweep.pk, "status": "draft", "status_display": "Draft", "finished": False}
    # 161 points, 23 skipped by the context cap: 138 to measure; 7 + 1 finished.
    finished = len(ok) + 1
    pct = round(100 * finished / 138)
    assert data["progress"] == {"done": finished, "to_measure": 138, "total": 161, "cancelled": 0, "pct": pct,
                                "text": f"{finished} of 138 points to measure are finished ({pct}%)."}
    assert data["waiting"] is None  # a draft waits for nothing
    assert data["counts"] == {
        "planned": 138 - finished, "ok": 3, "crashed": 1, "skipped": 23, "not_run": len(ok) - 3,
    }
    assert len(data["runs"]) == 23
    assert [r["id"] for r in data["runs"]] == [r.pk for r in runs]
    row = data["runs"][0]
    assert row["label"] == first.config_label
    assert row["status"] == "crashed" and row["status_display"] == "Crashed"
    assert row["failure_kind"] == "cuda_illegal_instruction"
    assert row["reason"] == row["failure_cause"] == "CUDA error: an illegal instruction was encountered"
    assert row["points"] == {
        "done": len(ok),
        "to_measure": len(ok),
        "total": first.points.count(),
        "cancelled": 0,
        "pct": 100,
        "counts": {"ok": 2, "crashed": 1, "not_run": len(ok) - 3, "skipped": first.points.count() - len(ok)},
    }
    assert data["runs"][1]["status"] == "running"
    assert data["runs"][1]["points"]["done"] == 1
    assert data["runs"][1]["points"]["counts"]["ok"] == 1


def test_it_shows_a_run_failure_kind_beside_its_cause_on_the_page_and_in_progress_json(sweep, viewer, client):
    crashed, waiting = list(sweep.runs.order_by("position"))[:2]
    Run.objects.filter(pk=crashed.pk).update(
        status=RunStatus.CRASHED,
        failure_kind=FailureKind.CUDA_ILLEGAL_INSTRUCTION,
        failure_cause="CUDA error: an illegal instruction was encountered",
    )
    client.force_login(viewer)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    row = html[html.index(f'id="run-{crashed.pk}"'):html.index(f'id="run-{waiting.pk}"')]
    assert '<span class="badge r-crashed failure-kind" data-field="failure-kind">CUDA illegal instruction</span>' in row
    cause = "CUDA error: an illegal instruction was encountered"
    assert f'<span data-field="reason" title="{cause}">{cause}</span>' in row
    # A run that has not failed shows no kind (the live partial sends the row again when it does).
    after = html[html.index(f'id="run-{waiting.pk}"'):]
    assert 'data-field="failure-kind"' not in after[:after.index("</tbody>")]
    rows = {r["id"]: r for r in client.get(reverse("sweep-progress", args=[sweep.pk])).json()["runs"]}
    assert rows[crashed.pk]["failure_kind"] == "cuda_illegal_instruction"
    assert rows[crashed.pk]["failure_kind_display"] == "CUDA illegal instruction"
    assert rows[waiting.pk]["failure_kind"] == rows[waiting.pk]["failure_kind_display"] == ""


def test_progress_json_says_when_the_sweep_is_finished(sweep, viewer, client):
    sweep.status = SweepStatus.CANCELLED
    sweep.save()
    client.force_login(viewer)
    data = client.get(reverse("sweep-progress", args=[sweep.pk])).json()
    assert data["sweep"]["finished"] is True and data["sweep"]["status"] == "cancelled"


def test_progress_json_uses_a_constant_number_of_queries(sweep, viewer, client, django_assert_max_num_queries):
    client.force_login(viewer)
    url = reverse("sweep-progress", args=[sweep.pk])
    client.get(url)  # warm the session
    with django_assert_max_num_queries(5):
        assert len(client.get(url).json()["runs"]) == 23
    # Twice the runs, the same number of queries.
    spec = load_spec_file(EXAMPLE, load_catalog())
    bigger = create_sweep(spec)[0]
    for run in Run.objects.filter(sweep=bigger).order_by("position"):
        run.pk = None
        run.sweep = sweep
        run.attempt = 2
        run.save()
        Point.objects.create(run=run, position=0, workload=Point.objects.first().workload,
                             prompt_tokens=None, max_new_tokens=256, concurrency=1, status=PointStatus.OK)
    with django_assert_max_num_queries(5):
        data = client.get(url).json()
    assert len(data["runs"]) == 46 and data["counts"]["ok"] == 23


def test_an_unknown_sweep_or_run_is_404(sweep, viewer, client):
    client.force_login(viewer)
    assert client.get(reverse("sweep-progress", args=[sweep.pk + 100])).status_code == 404
    assert client.get(reverse("run-drawer", args=[Run.objects.order_by("-pk").first().pk + 100])).status_code == 404


# --- the run drawer ---------------------------------------------------------------------


def test_drawer_shows_timeline_argv_version_and_the_last_200_log_lines(sweep, viewer, client, tmp_path):
    run = sweep.runs.order_by("position").first()
    log = tmp_path / "server.log"
    # Long enough that the tail is read from the middle of the file, in several blocks.
    lines = [f"line {i}: <script>alert('x')</script> & \"quoted\" " + "x" * 300 for i in range(1000)]
    log.write_text("\n".join(lines) + "\n")
    run.argv = ["python", "-m", "sglang.launch_server", "--model-path", "/dev/shm/Qwen3.6-27B",
                "--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "15"]
    run.engine_version = "sglang 0.5.4"
    run.context_length = 32768
    run.kv_capacity_tokens = 524288
    run.log_path = str(log)
    run.status = RunStatus.CRASHED
    run.failure_kind = FailureKind.CUDA_ILLEGAL_INSTRUCTION
    run.failure_cause = "CUDA error: an illegal instruction was encountered"
    run.failure_log = "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal instruction was encountered"
    run.save()
    now = timezone.now()
    RunEvent.objects.create(run=run, at=now, kind=RunEventKind.LAUNCHED, message="pid 4242 on port 30000")
    RunEvent.objects.create(run=run, at=now + timezone.timedelta(seconds=40), kind=RunEventKind.READY, message="<b>ready</b>")
    RunEvent.objects.create(run=run, at=now + timezone.timedelta(seconds=90), kind=RunEventKind.CRASHED,
                            message="CUDA error: an illegal instruction was encountered")

    client.force_login(viewer)
    response = client.get(reverse("run-drawer", args=[run.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    data = response.json()
    assert data["run"]["id"] == run.pk and data["run"]["label"] == run.config_label
    assert [e["kind"] for e in data["events"]] == ["launched", "ready", "crashed"]
    assert data["events"][1]["message"] == "<b>ready</b>"
    assert data["events"][0]["kind_display"] == "Server launched" and data["events"][0]["at"]
    assert data["argv"] == run.argv
    assert data["command"].startswith("python -m sglang.launch_server --model-path /dev/shm/Qwen3.6-27B")
    assert (data["engine_version"], data["context_length"], data["kv_capacity_tokens"]) == ("sglang 0.5.4", 32768, 524288)
    assert data["failure"]["kind"] == "cuda_illegal_instruction"
    assert data["failure"]["kind_display"] == "CUDA illegal instruction"
    assert data["failure"]["log_lines"][-1] == "RuntimeError: CUDA error: an illegal instruction was encountered"
    assert data["log"]["available"] is True and data["log"]["truncated"] is True
    assert data["log"]["lines"] == lines[-200:]
    # HTML-special characters are text in the JSON, not markup.
    assert "<script>alert('x')</script> & \"quoted\"" in data["log"]["lines"][0]


def test_drawer_reports_a_missing_or_absent_log(sweep, viewer, client, tmp_path):
    run = sweep.runs.order_by("position").first()
    client.force_login(viewer)
    data = client.get(reverse("run-drawer", args=[run.pk])).json()
    assert data["log"]["available"] is False and "never launched" in data["log"]["message"]
    assert data["argv"] == [] and data["command"] == "" and data["events"] == []
    run.log_path = str(tmp_path / "gone" / "server.log")
    run.save()
    data = client.get(reverse("run-drawer", args=[run.pk])).json()
    assert data["log"] == {
        "path": run.log_path, "available": False, "lines": [], "truncated": False,
        "message": f"the server log is missing: {run.log_path}",
    }


def test_tail_lines_reads_only_the_end(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("one\ntwo\nthree")  # no final newline
    assert tail_lines(log, 2) == (["two", "three"], True)
    assert tail_lines(log, 5) == (["one", "two", "three"], False)
    log.write_text("")
    assert tail_lines(log) == ([], False)
    big = tmp_path / "big.log"
    big.write_bytes(b"".join(b"%d\n" % i for i in range(100_000)))
    lines, truncated = tail_lines(big, 200, block=4096)
    assert lines == [str(i) for i in range(99_800, 100_000)] and truncated
    # A read window capped in size returns only whole lines.
    lines, _ = tail_lines(big, 200, max_bytes=100)
    assert 0 < len(lines) < 200 and lines[-1] == "99999" and all(len(x) == 5 for x in lines)
    weird = tmp_path / "weird.log"
    weird.write_bytes(b"ok\n\xff\xfe broken utf-8\n")
    assert tail_lines(weird) == (["ok", "\ufffd\ufffd broken utf-8"], False)


# --- cancel and resume ------------------------------------------------------------------


def test_a_viewer_cannot_cancel_or_resume(sweep, viewer, client):
    launch_sweep(sweep, enqueue=False)
    sweep.refresh_from_db()
    before = (sweep.status, sorted(sweep.runs.values_list("status", flat=True)))
    client.force_login(viewer)
    assert client.post(reverse("sweep-cancel", args=[sweep.pk])).status_code == 403
    assert client.post(reverse("sweep-resume", args=[sweep.pk])).status_code == 403
    sweep.refresh_from_db()
    assert (sweep.status, sorted(sweep.runs.values_list("status", flat=True))) == before
    assert before[0] == SweepStatus.QUEUED
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert reverse("sweep-cancel", args=[sweep.pk]) not in html
    assert reverse("sweep-resume", args=[sweep.pk]) not in html


def test_an_operator_cancels_and_resumes(sweep, operator, client):
    launch_sweep(sweep, enqueue=False)
    client.force_login(operator)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert f'action="{reverse("sweep-cancel", args=[sweep.pk])}"' in html
    assert "csrfmiddlewaretoken" in html

    response = client.post(reverse("sweep-cancel", args=[sweep.pk]), follow=True)
    assert response.redirect_chain == [(reverse("sweep-detail", args=[sweep.pk]), 302)]
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.CANCELLED
    assert set(sweep.runs.values_list("status", flat=True)) == {RunStatus.CANCELLED}
    assert "cancelled" in " ".join(str(m) for m in response.context["messages"])

    html = response.content.decode()
    assert reverse("sweep-resume", args=[sweep.pk]) in html
    assert f'action="{reverse("sweep-cancel", args=[sweep.pk])}"' not in html
    response = client.post(reverse("sweep-resume", args=[sweep.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("sweep-detail", args=[sweep.pk])
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.QUEUED
    assert set(sweep.runs.values_list("status", flat=True)) == {RunStatus.QUEUED}


def test_cancel_and_resume_are_post_only(sweep, operator, client):
    client.force_login(operator)
    assert client.get(reverse("sweep-cancel", args=[sweep.pk])).status_code == 405
    assert client.get(reverse("sweep-resume", args=[sweep.pk])).status_code == 405
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.DRAFT


def test_cancelling_a_done_sweep_is_a_message_not_an_error(sweep, operator, client):
    sweep.status = SweepStatus.DONE
    sweep.save()
    client.force_login(operator)
    response = client.post(reverse("sweep-cancel", args=[sweep.pk]), follow=True)
    assert response.status_code == 200
    text = " ".join(str(m) for m in response.context["messages"])
    assert f"Cannot cancel sweep #{sweep.pk}" in text and "already done" in text
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.DONE
    # Resuming a draft is refused the same way.
    sweep.status = SweepStatus.DRAFT
    sweep.save()
    response = client.post(reverse("sweep-resume", args=[sweep.pk]), follow=True)
    assert response.status_code == 200 and "launch it first" in response.content.decode()


def test_anonymous_users_are_sent_to_the_login_page(sweep, client):
    run = sweep.runs.first()
    urls = [
        reverse("sweep-progress", args=[sweep.pk]),
        reverse("run-drawer", args=[run.pk]),
        reverse("sweep-cancel", args=[sweep.pk]),
        reverse("sweep-resume", args=[sweep.pk]),
    ]
    for url in urls:
        for method in (client.get, client.post):
            response = method(url)
            assert response.status_code == 302, url
            assert response["Location"].startswith(reverse("login") + "?next="), url
    sweep.refresh_from_db()
    assert sweep.status == SweepStatus.DRAFT


# --- the page ---------------------------------------------------------------------------


def test_the_page_carries_the_live_partials_and_the_drawer(sweep, viewer, client):
    client.force_login(viewer)
    html = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    run = sweep.runs.order_by("position").first()
    assert f'hx-get="{reverse("sweep-live-partial", args=[sweep.pk])}" hx-trigger="every 2s"' in html
    assert f'data-run-id="{run.pk}" data-drawer-url="{reverse("run-drawer-partial", args=[run.pk])}"' in html
    for name in ("progress-bar", "progress-text", "sweep-status", "status", "points", "reason"):
        assert f'data-field="{name}"' in html
    assert '<aside class="run-drawer" id="run-drawer" hidden' in html
    assert "js/sweep_live.js" in html and "js/util.js" in html and "js/points_table.js" not in html
