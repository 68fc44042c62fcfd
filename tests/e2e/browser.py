"""The browser the e2e tests drive (Debian's Chromium through Playwright) and the
screenshots they leave under var/screenshots/ (`make screenshots`): shared by every test
that opens a page, so that there is one way to start it and one place for its pictures."""

import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.e2e.processes import unavailable

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"


@pytest.fixture
def browser(monkeypatch):
    # Playwright's sync API keeps an event loop in this thread; the ORM calls the test
    # makes between browser steps are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not Path(CHROMIUM).exists():
        unavailable(f"{CHROMIUM} is not installed (apt-get install chromium; .ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        instance = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        )
        yield instance
        instance.close()


def wait_until(page, expression, arg=None, timeout=30_000):
    """What ``page.wait_for_function`` does (``timeout`` in ms), without ``eval`` in the page:
    Playwright polls its predicate through the page's own eval, which the pages'
    Content-Security-Policy refuses (as it should), while ``page.evaluate`` runs through the
    DevTools protocol. Returns the first truthy value."""
    from playwright.sync_api import Error

    deadline = time.monotonic() + timeout / 1000
    while True:
        try:
            value = page.evaluate(expression, arg)
        except Error as exc:
            if "Execution context was destroyed" not in str(exc):  # a navigation: ask the next page
                raise
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout / 1000:.0f} s for {expression}")
        page.wait_for_timeout(100)


def shot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def doc_shot(target, name):
    """A small picture for the README (a page's first screen, or one element), which
    `make screenshots` copies into docs/."""
    (SCREENSHOTS / "docs").mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(SCREENSHOTS / "docs" / f"{name}.png"))


def log_in(page, live_server, username, password):
    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
