"""The API docs render in Chromium with no network but our own server, and break no CSP rule."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_docs_render_offline_in_a_browser(page, live_server, login, shot, alice):
    own = urlsplit(live_server.url).netloc
    outside: list[str] = []
    violations: list[str] = []

    def offline(route):
        if urlsplit(route.request.url).netloc == own:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    # The live server's first request imports every view; on a loaded machine that outlasts a page timeout.
    httpx.get(f"{live_server.url}/login/", timeout=120)
    page.context.route("**/*", offline)
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    login("alice")
    page.goto(f"{live_server.url}/api/docs/")
    page.locator(".swagger-ui .info .title").wait_for()
    assert "Faultline API" in page.locator(".swagger-ui .info .title").inner_text()
    page.locator(".opblock").first.wait_for()
    assert page.locator(".opblock").count() >= 15
    shot("api-docs")
    assert outside == []
    assert violations == []
