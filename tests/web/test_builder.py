from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from benchmarks.models import Sweep
from runs.models import Point, Run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen3.6-27b-sm120.yaml"

def test_the_builder_starts_from_the_example_and_previews_its_plan(operator, catalog, client):
    client.force_login(operator)
    page = client.get(reverse("sweep-new"))
    assert page.status_code == 200 and "qwen3.6-27b-sm120-ddtree" in page.content.decode()
    data = client.post(reverse("sweep-plan-preview"), {"spec_yaml": EXAMPLE.read_text()}).json()
    assert data["valid"] and data["totals"] == {"runs": 23, "points": 161, "skipped_points": 23}
    assert data["skips"] == [{"point": "long-context 32700 tokens x1", "reason": data["skips"][0]["reason"], "runs": 23}]
    assert "32700 + 256 + 16 > 32768" in data["skips"][0]["reason"]

def test_the_preview_names_each_error_with_its_field_path(operator, catalog, client):
    client.force_login(operator)
    text = EXAMPLE.read_text().replace("budget: [8, 12, 15, 16, 32, 64]", "budget: '8,12'")
    data = client.post(reverse("sweep-plan-preview"), {"spec_yaml": text}).json()
    assert not data["valid"] and data["parsed"]
    assert data["errors"] == [
        {"path": "methods[2].ddtree.budget", "message": "expected a list of positive integers, got '8,12'"}
    ]
    assert data["data"]["methods"][2] == {"ddtree": {"budget": "8,12", "topk_cap": 8}}
    broken = client.post(reverse("sweep-plan-preview"), {"spec_yaml": "name: [\n"}).json()
    assert not broken["valid"] and "malformed YAML" in broken["errors"][0]["message"]

def test_saving_an_invalid_spec_keeps_the_text_and_shows_the_errors(operator, catalog, client):
    client.force_login(operator)
    text = EXAMPLE.read_text().replace("tp: [1, 4, 8]", "tp: [1, 16]")
    response = client.post(reverse("sweep-new"), {"spec_yaml": text, "action": "draft"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "tp[1]" in html and "16 is more than host" in html and "tp: [1, 16]" in html
    assert not Sweep.objects.exists()

def test_an_operator_saves_a_draft_and_launches_a_sweep(operator, catalog, client):
    client.force_login(operator)
    response = client.post(reverse("sweep-new"), {"spec_yaml": EXAMPLE.read_text(), "action": "draft"})
    sweep = Sweep.objects.get()
    assert response["Location"] == reverse("sweep-detail", args=[sweep.pk])
    assert sweep.status == "draft" and sweep.owner == operator and Run.objects.filter(sweep=sweep).count() == 23
    client.post(reverse("sweep-new"), {"spec_yaml": EXAMPLE.read_text(), "action": "launch"})
    launched = Sweep.objects.order_by("-id").first()
    assert launched.status == "queued"

def test_a_viewer_cannot_build_preview_or_launch(viewer, catalog, client):
    client.force_login(viewer)
    assert client.get(reverse("sweep-new")).status_code == 403
    assert client.post(reverse("sweep-plan-preview"), {"spec_yaml": "x"}).status_code == 403
    assert client.post(reverse("sweep-new"), {"spec_yaml": EXAMPLE.read_text(), "action": "launch"}).status_code == 403
    assert not Sweep.objects.exists()

def test_clone_fills_the_builder_with_an_existing_sweep(operator, catalog, client):
    client.force_login(operator)
    client.post(reverse("sweep-new"), {"spec_yaml": EXAMPLE.read_text(), "action": "draft"})
    sweep = Sweep.objects.get()
    html = client.get(reverse("sweep-new") + f"?clone={sweep.pk}").content.decode()
    assert "budget: [8, 12, 15, 16, 32, 64]" in html

def test_a_draft_is_launched_from_its_page_by_an_operator_only(viewer, operator, catalog, client):
    from benchmarks.catalog import load_catalog
    from runs.lifecycle import create_sweep
    from sweepcore.spec import load_spec_file

    sweep, _ = create_sweep(load_spec_file(EXAMPLE, load_catalog()))
    client.force_login(viewer)
    assert client.post(reverse("sweep-launch", args=[sweep.pk])).status_code == 403
    sweep.refresh_from_db()
    assert sweep.status == "draft"
    client.force_login(operator)
    page = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert reverse("sweep-launch", args=[sweep.pk]) in page and f"?clone={sweep.pk}" in page
    response = client.post(reverse("sweep-launch", args=[sweep.pk]), follow=True)
    sweep.refresh_from_db()
    assert sweep.status == "queued"
    assert "launched: 23 run(s) queued on host.sim-8x-rtxpro6000" in response.content.decode()
    again = client.post(reverse("sweep-launch", args=[sweep.pk]), follow=True).content.decode()
    assert "Cannot launch sweep" in again

# --- the form view: data in, YAML out; quarantine retries; the duration estimate ---------

import json  # noqa: E402

from sweepcore.spec import load_yaml  # noqa: E402

SMALL = {
    "name": "form-made",
    "host": "sim-8x-rtxpro6000",
    "engine": "sglang-sim",
    "model": "Qwen/Qwen3.6-27B",
    "tp": [1],
    "methods": ["autoregressive", {"ddtree": {"budget": [8, 15], "topk_cap": 8}}],
    "workloads": ["fibonacci", {"long-context": {"prompt_tokens": [1000, 2000]}}],
    "max_new_tokens": 64,
    "requests_per_point": 2,
}


def preview_of(client, data):
    return client.post(reverse("sweep-plan-preview"), {"editor": "form", "spec_json": json.dumps(data)}).json()


def test_the_form_data_comes_back_as_yaml_that_parses_to_the_same_data(operator, catalog, client):
    client.force_login(operator)
    answer = preview_of(client, {**SMALL, "x-note": "kept"})
    assert answer["parsed"] and answer["data"]["x-note"] == "kept"
    assert load_yaml(answer["spec_yaml"]) == {**SMALL, "x-note": "kept"}
    # The YAML view sends that text back and gets the same data: either view round-trips.
    again = client.post(reverse("sweep-plan-preview"), {"editor": "yaml", "spec_yaml": answer["spec_yaml"]}).json()
    assert again["data"] == answer["data"]
    assert again["errors"] == [{"path": "x-note", "message": again["errors"][0]["message"]}]
    assert "unknown field" in again["errors"][0]["message"]
    valid = preview_of(client, SMALL)
    assert valid["valid"] and valid["totals"] == {"runs": 3, "points": 9, "skipped_points": 0}


def test_form_errors_name_the_field_they_belong_to(operator, catalog, client):
    client.force_login(operator)
    answer = preview_of(client, {**SMALL, "tp": [1, 16], "concurrency": "1, two",
                                 "methods": [{"ddtree": {"budget": "8,x"}}]})
    paths = {e["path"]: e["message"] for e in answer["errors"]}
    assert paths["tp[1]"].startswith("16 is more than host 'sim-8x-rtxpro6000' has")
    assert paths["concurrency"] == "expected a list of positive integers, got '1, two'"
    assert paths["methods[0].ddtree.budget"] == "expected a list of positive integers, got '8,x'"
    not_json = client.post(reverse("sweep-plan-preview"), {"editor": "form", "spec_json": "{"}).json()
    assert not not_json["parsed"] and "not JSON" in not_json["errors"][0]["message"]


def test_a_form_post_saves_the_sweep_it_describes_and_a_bad_one_keeps_the_form(operator, catalog, client):
    client.force_login(operator)
    bad = client.post(reverse("sweep-new"), {"editor": "form", "spec_json": json.dumps({**SMALL, "tp": [3, 16]}),
                                              "action": "draft"})
    assert bad.status_code == 400 and not Sweep.objects.exists()
    # The form is drawn again from the data sent, with the error on the field it names.
    assert bad.context["editor"] == "form" and json.loads(bad.context["spec_json"])["tp"] == [3, 16]
    tp_field = bad.context["form"].with_path()["tp"]
    assert [e["path"] for e in tp_field.errors] == ["tp[1]"] and bad.context["errors"] == []
    response = client.post(reverse("sweep-new"), {"editor": "form", "spec_json": json.dumps(SMALL), "action": "draft"})
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and sweep.name == "form-made" and sweep.runs.count() == 3


def _quarantine_budget_8():
    from django.utils import timezone

    from benchmarks.models import LLM, Engine, Host, KnownFailure

    host = Host.objects.get(name="sim-8x-rtxpro6000")
    return KnownFailure.objects.create(
        engine_kind=Engine.objects.get(name="sglang-sim").kind, llm=LLM.objects.get(name="Qwen/Qwen3.6-27B"),
        compute_capability=host.compute_capability, method="ddtree", params={"budget": 8, "topk_cap": 8}, tp=1,
        failure_kind="cuda_illegal_instruction", signature="an illegal instruction was encountered", active=True,
        first_seen_at=timezone.now(), last_seen_at=timezone.now(),
    )


def test_retry_anyway_applies_to_the_configuration_named_only(operator, catalog, client):
    _quarantine_budget_8()
    client.force_login(operator)
    skipped = preview_of(client, SMALL)
    (q,) = skipped["quarantined"]
    assert q["rule"] == {"method": "ddtree", "budget": 8, "topk_cap": 8, "tp": 1} and not q["retrying"]
    assert skipped["totals"]["skipped_points"] == 3
    retried = preview_of(client, {**SMALL, "options": {"retry_quarantined": [q["rule"]]}})
    assert retried["quarantined"][0]["retrying"] and retried["totals"]["skipped_points"] == 0
    assert "retry_quarantined:\n  - {method: ddtree, budget: 8, topk_cap: 8, tp: 1}" in retried["spec_yaml"]
    client.post(reverse("sweep-new"), {"editor": "form", "action": "draft",
                                       "spec_json": json.dumps({**SMALL, "options": {"retry_quarantined": [q["rule"]]}})})
    run = Run.objects.get(method="ddtree", params_key='{"budget":8,"topk_cap":8}')
    assert run.status == "planned" and run.retry_quarantined and run.known_failure_id is not None


def test_the_estimate_comes_from_the_history_of_the_same_points(operator, catalog, client):
    from datetime import timedelta

    from django.utils import timezone

    from runs.models import Point

    client.force_login(operator)
    assert preview_of(client, SMALL)["estimate"] is None
    # An earlier sweep of the same points: 2 s per request and 30 s to start each run.
    client.post(reverse("sweep-new"), {"editor": "form", "spec_json": json.dumps(SMALL), "action": "draft"})
    start = timezone.now() - timedelta(hours=1)
    for run in Run.objects.all():
        Run.objects.filter(pk=run.pk).update(status="done", started_at=start)
        for point in run.points.all():
            Point.objects.filter(pk=point.pk).update(
                status="ok", started_at=start + timedelta(seconds=30), finished_at=start + timedelta(seconds=36),
                completed=3, failed=0,
            )
    answer = preview_of(client, SMALL)
    # 3 runs x 30 s start-up + 9 points x (2 s per request x (2 requests + 1 warmup)).
    assert answer["estimate"]["seconds"] == 3 * 30 + 9 * 6
    assert answer["estimate"]["points_with_history"] == 9
    assert answer["estimate"]["text"] == "about 2 min for 3 runs and 9 points (every point from its own history)"
    wider = preview_of(client, {**SMALL, "workloads": ["fibonacci", {"long-context": {"prompt_tokens": [1000, 2000, 4000]}}]})
    assert wider["estimate"]["points_with_history"] == 9 and wider["estimate"]["points_planned"] == 12
    assert "3 extrapolated" in wider["estimate"]["text"]


BIG = {
    **SMALL,
    "tp": [1, 4, 8],
    "methods": ["autoregressive", {"ddtree": {"budget": [8, 12, 15, 16, 32, 64], "topk_cap": 8}},
                {"dflash": {"block_size": [8, 16]}}],
    "workloads": ["fibonacci", {"long-context": {"prompt_tokens": [1000, 2000, 4000, 8000, 16000]}}],
    "concurrency": [1, 2, 4],
}


@pytest.mark.parametrize("with_history", [False, True])
def test_it_previews_a_plan_in_the_same_queries_whatever_its_size(operator, catalog, client, with_history,
                                                                 django_assert_num_queries):
    client.force_login(operator)
    if with_history:  # an earlier sweep of these points: the estimate reads its history
        client.post(reverse("sweep-new"), {"editor": "form", "spec_json": json.dumps(BIG), "action": "draft"})
        Run.objects.update(status="done", started_at=timezone.now() - timedelta(hours=1))
        Point.objects.update(status="ok", started_at=timezone.now() - timedelta(minutes=50),
                             finished_at=timezone.now() - timedelta(minutes=49), completed=2, failed=0)
    client.get(reverse("sweep-new"))  # warm the session
    # Session, user, the user's and groups' permissions, the catalog (4), the sweep's host,
    # engine and model again, active quarantines, then the history: points and run start-ups.
    for spec, runs in ((SMALL, 3), (BIG, 27)):
        with django_assert_num_queries(14):
            answer = preview_of(client, spec)
        assert answer["valid"] and answer["totals"]["runs"] == runs
    assert (answer["estimate"] is not None) == with_history


def test_the_preview_of_a_search_says_what_each_run_will_search(operator, catalog, client):
    client.force_login(operator)
    search = {**SMALL, "methods": ["autoregressive"], "workloads": ["fibonacci"], "slo": {"ttft_p99_ms": 2000},
              "search": {"max_goodput": {"metric": "request_rate", "low": 0.25, "high": 64}}}
    answer = preview_of(client, search)
    assert answer["valid"] and answer["totals"]["points"] == 0 and answer["runs"][0]["points"] == 0
    assert answer["search"] == {
        "text": "capacity search over request rate 0.25–64 req/s, up to 12 probes per run (doubling from 0.25 "
                "while the SLO holds, then bisecting to within 10 %)",
        "probes_per_run": 12,
    }
    assert preview_of(client, SMALL)["search"] is None
