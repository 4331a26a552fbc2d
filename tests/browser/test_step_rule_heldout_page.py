"""The agreement page of a trace study says whether the local step suggestion beats position alone, with the
held-out figures, legible at 1366 and at 390 px."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WHO = Path(django_settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")


def test_the_agreement_page_states_the_step_rule_against_the_prior(page, live_server, login, study, alice):
    from annotate.suggestions.heldout import comparisons, verdict
    from annotate.traces.services import import_traces
    from tests.browser.conftest import SCREENSHOTS

    import_traces(study=study, paths=[WHO / "Hand-Crafted" / "3.json"], fmt="whowhen")
    page.set_default_timeout(30_000)
    login("alice")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/studies/alpha/agreement/")
    section = page.locator("#step-rule-heldout")
    expect(section.locator(".step-rule-verdict")).to_have_text(verdict())
    expect(section.locator("tbody tr")).to_have_count(len(comparisons()))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    section.scroll_into_view_if_needed()
    screenshot(section, SCREENSHOTS / "step-rule-heldout-1366.png")
    page.set_viewport_size({"width": 390, "height": 844})
    expect(section.locator(".step-rule-verdict")).to_be_visible()
    # The page itself does not scroll sideways; a wide table scrolls inside its own box.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(section, SCREENSHOTS / "step-rule-heldout-390.png")
