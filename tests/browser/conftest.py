"""Real browser tests: Playwright drives Debian's /usr/bin/chromium against live_server."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from conftest import chromium_path, need

# Playwright's sync API runs an event loop in this thread; Django's ORM calls in
# the same test are still synchronous and safe, so allow them.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SCREENSHOTS = Path(os.environ.get("FAULTLINE_SCREENSHOTS", Path(tempfile.gettempdir()) / "faultline-screenshots"))


@pytest.fixture(scope="session")
def browser():
    path = chromium_path()
    need(path is not None, "needs Chromium at /usr/bin/chromium (apt-get install chromium)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:  # pragma: no cover - requirements-dev installs it
        need(False, "needs the playwright package")
    # expect() waits 5 s by default. Under CI's load (two test processes, a live server and Chromium on two
    # cores) an htmx round trip has taken longer; a longer wait only delays a failure, it never passes a wrong page.
    expect.set_options(timeout=15_000)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=path,
            headless=True,
            args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
            ],
        )  # fmt: skip
        yield browser
        browser.close()


@pytest.fixture(scope="session", autouse=True)
def _tcp_nodelay_live_server():
    """Serve the browser as gunicorn does in production: with TCP_NODELAY on the server's sockets.

    Django's test server sends a response's headers and body in two writes; without TCP_NODELAY,
    Nagle's algorithm holds the body back until the browser acknowledges the headers, which a
    delayed ACK makes 40 ms on every page of a kept-alive connection. gunicorn sets the option
    (gunicorn/sock.py), so a coder never waits for it; the timing tests must not either.
    """
    import socket

    from django.core.servers.basehttp import WSGIServer

    bind = WSGIServer.server_bind

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
        bind(self)

    WSGIServer.server_bind = server_bind
    yield
    WSGIServer.server_bind = bind


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.fixture
def shot(page):
    """Save a full-page screenshot for a human to look at (when FAULTLINE_SCREENSHOTS is set: see screenshot)."""

    def take(name: str) -> Path:
        return screenshot(page, f"{name}.png", full_page=True)

    return take


@pytest.fixture
def carol(study, django_user_model):
    """A third coder in the alpha study, for the two-coder browser tests."""
    from annotate.studies.services import membership_set
    from conftest import PASSWORD

    user = django_user_model.objects.create_user(username="carol", password=PASSWORD)
    membership_set(study=study, user=user, role="coder")
    return user


@pytest.fixture
def login(page, live_server):
    from conftest import PASSWORD

    def do(username: str) -> None:
        # The first request of a session imports the analysis stack and compiles templates; on a loaded
        # 2-core machine that alone can pass the 10 s default, so the first page gets more time.
        page.goto(f"{live_server.url}/login/", timeout=60_000)
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{live_server.url}/")

    return do


# Screenshots are for a person to look at (`FAULTLINE_SCREENSHOTS=DIR make test`): a run that nobody looks at,
# as in CI, skips them, since full-page captures of every page at every width were a large part of the time.
SHOOT = bool(os.environ.get("FAULTLINE_SCREENSHOTS"))


def screenshot(target, path, **kwargs) -> Path:
    """Capture a page or an element into FAULTLINE_SCREENSHOTS (under `path`'s file name), when that is set."""
    path = SCREENSHOTS / Path(path).name
    if SHOOT:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        target.screenshot(path=str(path), **kwargs)
    return path
