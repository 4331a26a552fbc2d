"""The coding page's type filter ranks exact code, code prefix, name word, name substring, then definition
and indicators, says why each row matched, and Enter picks the top row for exactly what was typed."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# (query, the top row's code, part of its "why", a code that matches but must rank below it)
CASES = [
    ("hang", "CTL-05", "a word of the name starts with", "TUS-06"),  # TUS-06's definition has "c-hang-e"
    ("ctl-05", "CTL-05", "exact code", None),
    ("tus", "TUS-01", "code starts with", None),
    ("loop", "CTL-01", "a word of the name starts with", None),
    ("sanction", "TUS-06", "inside the name", None),
    ("outage", "EXT-01", "a word of the name starts with", None),
]


@pytest.fixture
def episode(study, make_episode):
    return make_episode(study, body="The client hangs forever waiting for the MCP server to answer.")


def test_hang_then_enter_chooses_the_hang_type_not_a_definition_match(page, live_server, login, bob, episode):
    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/episodes/{episode.pk}/code/")
    expect(page.locator("#type-filter")).to_be_visible()
    page.keyboard.press("/")
    page.keyboard.type("hang")  # no pause: Enter follows the last keystroke at once
    page.keyboard.press("Enter")
    expect(page.locator("#failure_type")).to_have_value("CTL-05")


@pytest.mark.parametrize(("query", "top", "why", "below"), CASES)
def test_the_filter_ranks_and_explains(page, live_server, login, bob, episode, query, top, why, below):
    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/episodes/{episode.pk}/code/")
    page.locator("#type-filter").fill(query)
    rows = page.locator("#type-listbox [role=option]")
    expect(rows.first).to_have_attribute("data-code", top)
    expect(rows.first.locator(".why")).to_contain_text(why)
    codes = rows.evaluate_all("els => els.map(e => e.dataset.code)")
    tiers = rows.evaluate_all("els => els.map(e => Number(e.dataset.tier))")
    assert tiers == sorted(tiers), "rows are ordered by how they matched"
    if below:
        assert below in codes and codes.index(below) > codes.index(top)
        assert "definition" in page.locator(f"#opt-{below} .why").inner_text()
    page.locator("#type-filter").press("Enter")
    expect(page.locator("#failure_type")).to_have_value(top)
