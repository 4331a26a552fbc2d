import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_user_logs_in_and_searches_the_codebook(page, live_server, login, shot, study, alice):
    page.goto(f"{live_server.url}/studies/alpha/")
    assert "/login/" in page.url  # anonymous users are sent to log in
    shot("login")
    login("alice")
    assert page.get_by_role("link", name="Alpha study").is_visible()
    shot("study-list")

    page.get_by_role("link", name="Codebooks").click()
    page.get_by_role("link", name=re.compile("agentic-failures@1.0")).first.click()
    cards = page.locator("article.type")
    # expect() waits for the page the click opened: count() read it while a loaded machine was still parsing it
    # (64 of 65 cards, once in CI).
    expect(cards).to_have_count(65)
    shot("codebook-browser")

    page.get_by_label("Search types").fill("prompt injection")
    expect(cards).not_to_have_count(65)
    expect(page.locator("#type-SPC-06")).to_be_visible()
    assert "q=prompt" in page.url  # the search is in the address, so it can be shared
    shot("codebook-search")

    page.get_by_label("Search types").fill("")
    page.get_by_label("Typical source").select_option("user_spec")
    expect(page.locator("#type-SPC-06")).to_have_count(0)  # an agent_design type
    expect(page.locator("#type-SPC-01")).to_be_visible()

    page.locator("#type-SPC-01 h3 a").click()
    expect(page.get_by_role("heading", name=re.compile("Underspecified or ambiguous request"))).to_be_visible()
    shot("type-detail")

    page.goto(f"{live_server.url}/studies/alpha/")
    expect(page.get_by_text("Hold-out")).to_be_visible()
    shot("study-overview")
