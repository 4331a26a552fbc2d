"""The adjudication form's type picker is the coding page's: the same partial and scripts, the same ranking,
Enter to choose, the definition beside it; choosing a type fills only the codes the coders left open."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1366, "height": 900}
# Everything on a page that belongs to the picker: its scripts, and the ids inside its fieldset.
PICKER_OF_PAGE = """() => ({
  scripts: [...document.scripts].map(s => new URL(s.src, location.href).pathname)
    .filter(p => p.includes("/coding-") || p.includes("type_rank") || p.includes("type_picker")),
  ids: [...document.querySelectorAll("#type-picker [id]:not([role=option])")].map(e => e.id),
  others: [...document.scripts].map(s => s.src).filter(s => s.includes("adjudicate")),
})"""
RANKING = "els => els.map(e => [e.dataset.code, (e.querySelector('.why') || {}).textContent || ''])"


@pytest.fixture
def disagreement(study, make_episode, codes, bob, carol):
    """bob and carol agree on stage and capability, not on type or source."""
    from annotate.coding.services import CodingValues, coding_save

    ep = make_episode(study, title="MCP client waits forever", body="The client hangs forever waiting for the server.")
    for coder, type_code, source in ((bob, "CTL-01", "llm"), (carol, "EXT-01", "tool_service")):
        values = CodingValues(
            failure_type=codes.type(type_code), source=codes.source(source), stage=codes.stage("verification"),
            capability=codes.capability("self_monitoring"), memo=f"{coder.username}'s reading",
        )  # fmt: skip
        coding_save(episode=ep, coder=coder, values=values, version=None)
    return ep


def _log_in(page, live_server, username):
    page.goto(f"{live_server.url}/login/", timeout=60_000)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")


def test_an_adjudicator_picks_the_type_with_the_coding_pages_picker(
    browser, page, live_server, login, shot, study, alice, disagreement
):
    from annotate.models import Adjudication

    # What the coding page gives for "hang", seen by bob, one of the coders.
    coder = browser.new_context(viewport=WIDE).new_page()
    try:
        _log_in(coder, live_server, "bob")
        coder.goto(f"{live_server.url}/studies/alpha/episodes/{disagreement.pk}/code/")
        coder.locator("#type-filter").fill("hang")
        expect(coder.locator("#type-listbox [role=option]").first).to_have_attribute("data-code", "CTL-05")
        coding_ranking = coder.locator("#type-listbox [role=option]").evaluate_all(RANKING)
        coding_picker = coder.evaluate(PICKER_OF_PAGE)
    finally:
        coder.context.close()

    page.set_viewport_size(WIDE)
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/episodes/{disagreement.pk}/adjudicate/")
    expect(page.locator("#type-filter")).to_be_visible()
    adjudication_picker = page.evaluate(PICKER_OF_PAGE)
    assert adjudication_picker["scripts"] == coding_picker["scripts"] and len(coding_picker["scripts"]) == 3
    assert adjudication_picker["ids"] == coding_picker["ids"] and "type-detail" in coding_picker["ids"]
    assert adjudication_picker["others"] == [], "no picker script of the adjudication page's own"
    expect(page.get_by_label("Failure type", exact=True)).to_be_hidden()  # as on the coding page, with JS
    expect(page.locator("#source")).to_have_value("")  # the coders differ: left open
    expect(page.locator("#stage")).to_have_value("verification")  # they agree: kept

    page.keyboard.press("/")
    expect(page.locator("#type-filter")).to_be_focused()
    page.keyboard.type("hang")
    rows = page.locator("#type-listbox [role=option]")
    expect(rows.first).to_have_attribute("data-code", "CTL-05")
    expect(rows.first.locator(".why")).to_contain_text("a word of the name starts with")
    assert rows.evaluate_all(RANKING) == coding_ranking, "the same rows, order and reasons as the coding page"
    shot("adjudication-picker-ranked")

    page.keyboard.press("Enter")
    expect(page.locator("#failure_type")).to_have_value("CTL-05")
    expect(page.locator("#opt-CTL-05")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#type-detail h3")).to_contain_text("Hang or unbounded wait")
    expect(page.locator("#type-detail")).to_contain_text("Indicators")
    expect(page.locator("#type-detail")).to_contain_text("Example")
    # Only the open code takes the type's typical value; the coders' agreed stage and capability stay.
    expect(page.locator("#source")).to_have_value("framework")
    expect(page.locator("#stage")).to_have_value("verification")
    expect(page.locator("#capability")).to_have_value("self_monitoring")
    expect(page.locator("#type-count")).to_contain_text("Chosen: CTL-05")
    page.get_by_label("Rationale").fill("The client waits on the server with no timeout: the framework's hang.")
    shot("adjudication-picker-chosen")
    page.get_by_role("button", name="Record the final codes").click()
    expect(page.locator(".messages")).to_contain_text(f"Episode {disagreement.pk} adjudicated")

    adjudication = Adjudication.objects.select_related("failure_type", "source", "stage", "capability").get()
    assert (adjudication.episode_id, adjudication.adjudicator, adjudication.failure_type.code) == (
        disagreement.pk,
        alice,
        "CTL-05",
    )
    assert (adjudication.source.code, adjudication.stage.code, adjudication.capability.code) == (
        "framework",
        "verification",
        "self_monitoring",
    )
    assert adjudication.rationale.startswith("The client waits")
