"""Trace episodes in a real browser: j/k through the steps, m marks the decisive step, two coders attribute
differently, and the agreement page shows step and agent agreement and accuracy against the reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from conftest import PASSWORD
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WHO = Path(settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")


@pytest.fixture
def traces(study):
    from annotate.models import Episode
    from annotate.traces.services import import_traces

    import_traces(study=study, paths=[WHO / "Algorithm-Generated"], fmt="whowhen")
    return list(Episode.objects.filter(study=study).select_related("document").order_by("pk"))


def code_the_trace(page, type_code):
    page.locator("#type-filter").fill(type_code)
    page.locator("#type-filter").press("Enter")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Saved (version 1)")).to_be_visible()


def test_two_coders_attribute_a_trace_and_the_agreement_page_measures_it(
    browser, page, live_server, login, shot, study, alice, bob, carol, traces, codes
):
    from annotate.coding.services import CodingValues, coding_save
    from annotate.models import Coding

    ep = traces[0]
    n_steps = ep.document.meta["trace"]["steps"]
    page.set_default_timeout(30_000)  # a loaded 2-core machine: the first requests can be slow
    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/episodes/{ep.pk}/code/")
    expect(page.locator("#trace .trace-step")).to_have_count(n_steps)
    expect(page.locator("#reference-hidden")).to_be_visible()  # blind: the published attribution waits
    expect(page.locator("body")).not_to_contain_text(ep.reference["reason"][:40])
    page.keyboard.press("j")
    expect(page.locator(".trace-step.is-current")).to_have_attribute("data-index", "0")
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    expect(page.locator(".trace-step.is-current")).to_have_attribute("data-index", "1")
    page.keyboard.press("m")
    agent = page.locator("#step-1").get_attribute("data-agent")
    expect(page.locator("#decisive_step")).to_have_value("1")
    expect(page.locator("#responsible_agent")).to_have_value(agent)
    expect(page.locator("#step-1")).to_have_class(re.compile(r"\bis-decisive\b"))
    shot("trace-coding-marked")
    screenshot(page.locator("#trace"), shot("trace-viewer").with_name("trace-viewer-steps.png"))
    code_the_trace(page, "TUS-03")
    expect(page.locator("#reference-h")).to_be_visible()  # revealed once saved
    shot("trace-coding-saved")
    mine = Coding.objects.get(coder=bob)
    assert (mine.decisive_step, mine.responsible_agent) == (1, agent)

    other = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    other.set_default_timeout(30_000)
    try:
        other.goto(f"{live_server.url}/login/")
        other.get_by_label("Username").fill("carol")
        other.get_by_label("Password").fill(PASSWORD)
        other.get_by_role("button", name="Log in").click()
        other.goto(f"{live_server.url}/studies/alpha/episodes/{ep.pk}/code/")
        other.locator("#step-0 .mark-step").click()  # a click marks a step too
        other.locator("#responsible_agent").fill("Computer_terminal")  # and the agent can be changed
        code_the_trace(other, "EXT-04")
    finally:
        other.context.close()
    theirs = Coding.objects.get(coder=carol)
    assert (theirs.decisive_step, theirs.responsible_agent) == (0, "Computer_terminal")

    # More double-coded logs, so the statistics have something to rest on.
    for i, e in enumerate(traces[1:6]):
        ref = e.reference
        for coder, step in ((bob, ref["step"]), (carol, ref["step"] + (i % 2))):
            values = CodingValues(
                failure_type=codes.type("TUS-03"),
                source=codes.source("agent_design"),
                stage=codes.stage("iterative_execution"),
                capability=codes.capability("actuation"),
                decisive_step=min(step, e.document.meta["trace"]["steps"] - 1),
                responsible_agent=ref["agent"],
            )
            coding_save(episode=e, coder=coder, values=values, version=None)

    page.context.clear_cookies()
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/agreement/?bootstrap=200")
    section = page.locator("#attribution-agreement")
    expect(section).to_contain_text("Step: exact")
    expect(section).to_contain_text("Step: within ±3")
    expect(section).to_contain_text("Agent: Krippendorff")
    accuracy = page.locator("#reference-accuracy")
    expect(accuracy).to_contain_text("final labels")
    expect(accuracy.locator("tbody tr")).to_have_count(3)  # bob, carol, the final labels
    expect(accuracy).to_contain_text("n=6")
    shot("trace-agreement")
