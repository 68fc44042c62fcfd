from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from benchmarks.catalog import load_catalog
from runs.lifecycle import create_sweep
from sweepcore.spec import load_spec_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen3.6-27b-sm120.yaml"


@pytest.fixture
def sweep(catalog):
    spec = load_spec_file(EXAMPLE, load_catalog())
    return create_sweep(spec)[0]


def app_urls(resolver=None, prefix=""):
    """Every URL pattern of our own apps, with sample arguments."""
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            if entry.app_name == "admin" or entry.namespace == "api":
                continue  # the admin has its own login; the API answers 401 (tests/web/test_api.py)
            yield from app_urls(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern) and entry.name not in ("login",):
            yield entry.name, prefix + str(entry.pattern)


def page_urls(sweep):
    """Every page of our own apps (not logout), with the sweep's ids for arguments."""
    names = dict(app_urls())
    assert {"sweep-list", "sweep-detail", "logout"} <= set(names)
    for name in names:
        if name == "logout":
            continue
        kwargs = {}
        if "<int:sweep_id>" in names[name]:
            kwargs["sweep_id"] = sweep.pk
        if "<int:run_id>" in names[name]:
            kwargs["run_id"] = sweep.runs.first().pk
        if "<str:kind>" in names[name]:
            kwargs["kind"] = "points.json"
        yield reverse(name, kwargs=kwargs or None)


def test_every_page_requires_login(sweep, client):
    for url in page_urls(sweep):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login") + "?next="), url


def test_an_account_without_a_role_reads_nothing(sweep, make_user, client):
    client.force_login(make_user("nora"))
    urls = list(page_urls(sweep))
    assert len(urls) >= 15
    for url in urls:
        response = client.get(url)
        assert response.status_code == 403, url
        assert sweep.name not in response.content.decode(), url
    assert "has no role" in client.get(reverse("sweep-list")).content.decode()
    # A role, or staff status, is what it takes.
    nora = User.objects.get(username="nora")
    nora.groups.add(Group.objects.get(name="viewer"))
    assert sweep.name in client.get(reverse("sweep-list")).content.decode()
    client.force_login(make_user("sam", is_staff=True))
    assert client.get(reverse("sweep-detail", args=[sweep.pk])).status_code == 200


def test_the_admin_requires_a_staff_login(viewer, client):
    assert client.get("/admin/").status_code == 302
    client.force_login(viewer)
    response = client.get("/admin/")
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_login_page_logs_in_and_redirects_to_sweeps(viewer, client):
    response = client.post(reverse("login"), {"username": "vera", "password": "pw-vera-12345"})
    assert response.status_code == 302 and response["Location"] == reverse("sweep-list")
    response = client.post(reverse("login"), {"username": "vera", "password": "wrong"})
    assert "didn't match" in response.content.decode()


def test_sweep_list_shows_counts(sweep, viewer, client):
    client.force_login(viewer)
    response = client.get(reverse("sweep-list"))
    assert response.status_code == 200
    row = response.context["page"].object_list[0]
    assert (row.run_count, row.point_count, row.points_skipped, row.points_measured) == (23, 161, 23, 0)
    assert b"qwen3.6-27b-sm120-ddtree" in response.content


def test_sweep_list_filters_by_status(sweep, viewer, client):
    client.force_login(viewer)
    assert len(client.get(reverse("sweep-list"), {"status": "done"}).context["page"].object_list) == 0
    assert len(client.get(reverse("sweep-list"), {"status": "draft"}).context["page"].object_list) == 1


def test_sweep_detail_shows_runs_points_and_reasons(sweep, viewer, client):
    client.force_login(viewer)
    response = client.get(reverse("sweep-detail", args=[sweep.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "ddtree</strong> <span class=\"param\">budget=15</span>" in html
    assert "vendor/chartjs-4.6.1/chart.umd.min.js" in html
    # Point reasons come with the points table (points-table.json), not in the page.
    skipped = client.get(reverse("sweep-points-table", args=[sweep.pk]), {"status": "skipped"}).json()
    assert skipped["total"] == 23
    assert all(row["reason"].startswith("context cap: 32700 + 256 + 16 > 32768") for row in skipped["rows"])
    chart = response.context["status_chart"]
    assert len(chart["labels"]) == 23
    assert {d["status"]: sum(d["data"]) for d in chart["datasets"]} == {"planned": 138, "skipped": 23}


def test_a_cpu_hosts_sweep_says_so_in_words(catalog, viewer, client):
    spec = load_spec_file(EXAMPLE.with_name("smollm2-cpu.yaml"), load_catalog())
    cpu = create_sweep(spec)[0]
    client.force_login(viewer)
    html = client.get(reverse("sweep-detail", args=[cpu.pk])).content.decode()
    assert '<dd data-field="hosts">local-cpu <span class="muted">CPU host, no GPUs</span></dd>' in html


def test_sweep_detail_uses_a_constant_number_of_queries(sweep, viewer, client, django_assert_max_num_queries):
    client.force_login(viewer)
    client.get(reverse("sweep-detail", args=[sweep.pk]))  # warm the session
    # +2: the user's and their groups' permissions (operator buttons), once per request;
    # +1: the GPU leases (the Gantt chart).
    with django_assert_max_num_queries(9):
        assert client.get(reverse("sweep-detail", args=[sweep.pk])).status_code == 200


def test_an_unknown_sweep_is_404(sweep, viewer, client):
    client.force_login(viewer)
    assert client.get(reverse("sweep-detail", args=[sweep.pk + 100])).status_code == 404


def test_static_files_are_found():
    from django.contrib.staticfiles import finders

    assert finders.find("vendor/chartjs-4.6.1/chart.umd.min.js")
    assert finders.find("vendor/chartjs-4.6.1/LICENSE.md")
    assert finders.find("css/sweeplab.css")
