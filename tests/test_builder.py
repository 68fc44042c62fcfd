from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.urls import reverse

from benchmarks.models import Sweep
from runs.models import Run

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "qwen3.6-27b-sm120.yaml"


@pytest.fixture
def demo(db):
    call_command("seed_demo", stdout=StringIO())


def user_in(group):
    user = User.objects.create_user(group, password="pw-" + group + "-1234")
    user.groups.add(Group.objects.get(name=group))
    return user


def test_the_builder_starts_from_the_example_and_previews_its_plan(demo, client):
    client.force_login(user_in("operator"))
    page = client.get(reverse("sweep-new"))
    assert page.status_code == 200 and "qwen3.6-27b-sm120-ddtree" in page.content.decode()
    data = client.post(reverse("sweep-plan-preview"), {"spec_yaml": EXAMPLE.read_text()}).json()
    assert data["valid"] and data["totals"] == {"runs": 23, "points": 161, "skipped_points": 23}
    assert data["skips"] == [{"point": "long-context 32700 tokens x1", "reason": data["skips"][0]["reason"], "runs": 23}]
    assert "32700 + 256 + 16 > 32768" in data["skips"][0]["reason"]


def test_the_preview_names_each_error_with_its_field_path(demo, client):
    client.force_login(user_in("operator"))
    text = EXAMPLE.read_text().replace("budget: [8, 12, 15, 16, 32, 64]", "budget: '8,12'")
    data = client.post(reverse("sweep-plan-preview"), {"spec_yaml": text}).json()
    assert data == {"valid": False, "errors": [
        {"path": "methods[2].ddtree.budget", "message": "expected a list of positive integers, got '8,12'"}
    ]}
    broken = client.post(reverse("sweep-plan-preview"), {"spec_yaml": "name: [\n"}).json()
    assert not broken["valid"] and "malformed YAML" in broken["errors"][0]["message"]


def test_saving_an_invalid_spec_keeps_the_text_and_shows_the_errors(demo, client):
    client.force_login(user_in("operator"))
    text = EXAMPLE.read_text().replace("tp: [1, 4, 8]", "tp: [1, 16]")
    response = client.post(reverse("sweep-new"), {"spec_yaml": text, "action": "draft"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "tp[1]" in html and "16 is more than host" in html and "tp: [1, 16]" in html
    assert not Sweep.objects.exists()


def test_an_operator_saves_a_draft_and_launches_a_sweep(demo, client):
    operator = user_in("operator")
    client.force_login(operator)
    response = client.post(reverse("sweep-new"), {"spec_yaml": EXAMPLE.read_text(), "action": "draft"})
    sweep = Sweep.objects.get()
    assert response["Location"] == reverse("sweep-detail", args=[sweep.pk])
    assert sweep.status == "draft" and sweep.owner == operator and Run.objects.filter(sweep=sweep).count() == 23
    client.post(reverse("sweep-new"), {"spec_yaml": EXAMPLE.read_text(), "action": "launch"})
    launched = Sweep.objects.order_by("-id").first()
    assert launched.status == "queued"


def test_a_viewer_cannot_build_preview_or_launch(demo, client):
    client.force_login(user_in("viewer"))
    assert client.get(reverse("sweep-new")).status_code == 403
    assert client.post(reverse("sweep-plan-preview"), {"spec_yaml": "x"}).status_code == 403
    assert client.post(reverse("sweep-new"), {"spec_yaml": EXAMPLE.read_text(), "action": "launch"}).status_code == 403
    assert not Sweep.objects.exists()


def test_clone_fills_the_builder_with_an_existing_sweep(demo, client):
    client.force_login(user_in("operator"))
    client.post(reverse("sweep-new"), {"spec_yaml": EXAMPLE.read_text(), "action": "draft"})
    sweep = Sweep.objects.get()
    html = client.get(reverse("sweep-new") + f"?clone={sweep.pk}").content.decode()
    assert "budget: [8, 12, 15, 16, 32, 64]" in html


def test_a_draft_is_launched_from_its_page_by_an_operator_only(demo, client):
    from benchmarks.catalog import load_catalog
    from benchmarks.spec import load_spec_file
    from runs.sweeps import create_sweep

    sweep, _ = create_sweep(load_spec_file(EXAMPLE, load_catalog()))
    client.force_login(user_in("viewer"))
    assert client.post(reverse("sweep-launch", args=[sweep.pk])).status_code == 403
    sweep.refresh_from_db()
    assert sweep.status == "draft"
    client.force_login(user_in("operator"))
    page = client.get(reverse("sweep-detail", args=[sweep.pk])).content.decode()
    assert reverse("sweep-launch", args=[sweep.pk]) in page and f"?clone={sweep.pk}" in page
    response = client.post(reverse("sweep-launch", args=[sweep.pk]), follow=True)
    sweep.refresh_from_db()
    assert sweep.status == "queued"
    assert "launched: 23 run(s) queued on host.sim-8x-rtxpro6000" in response.content.decode()
    again = client.post(reverse("sweep-launch", args=[sweep.pk]), follow=True).content.decode()
    assert "Cannot launch sweep" in again
