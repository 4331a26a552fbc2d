"""The Suggestions page states the local suggester's real-issue test-split figures beside the most common value,
legible at 1366 and at 390 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_suggestions_page_states_the_real_issue_figures(page, live_server, login, study, alice):
    from annotate.suggestions.real_issues import rows, verdict
    from tests.browser.conftest import screenshot

    page.set_default_timeout(30_000)
    login("alice")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/studies/alpha/suggestions/")
    section = page.locator("#suggester-real-issues")
    expect(section.locator(".real-issues-verdict")).to_have_text(verdict())
    expect(section.locator("tbody tr")).to_have_count(len(rows()))
    section.scroll_into_view_if_needed()
    screenshot(section, "suggester-real-issues-1366.png")
    page.set_viewport_size({"width": 390, "height": 844})
    expect(section.locator(".real-issues-verdict")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(section, "suggester-real-issues-390.png")
