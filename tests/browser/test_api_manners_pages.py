"""The pages issue 33's API manners changed, at 390 px and 1366 px: the 403 page's way back, the token
form with access and expiry, and the blind coder's overview counts."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1366)


def _main_fits(page) -> bool:
    """The page's own content fits the width (the top bar is the layout's, issue 33 part 1)."""
    return page.evaluate("document.querySelector('main').scrollWidth <= window.innerWidth")


def test_the_403_page_leads_back(page, live_server, login, shot, study, vera):
    login("vera")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        page.goto(f"{live_server.url}/studies/alpha/")
        page.goto(f"{live_server.url}/studies/alpha/members/", referer=f"{live_server.url}/studies/alpha/")
        back = page.get_by_role("link", name="← Go back")
        assert back.is_visible() and page.get_by_role("link", name="Your studies").is_visible()
        assert _main_fits(page)
        shot(f"api-manners-403-{width}")
        back.click()
        page.wait_for_url(f"{live_server.url}/studies/alpha/")


def test_a_read_token_with_an_expiry_from_the_token_page(page, live_server, login, shot, study, bob):
    login("bob")
    for n, width in enumerate(WIDTHS):
        page.set_viewport_size({"width": width, "height": 844})
        page.goto(f"{live_server.url}/profile/tokens/")
        page.get_by_label("Name").fill(f"dashboard {n}")
        page.get_by_label("Access").select_option("read")
        page.get_by_label("Expires").select_option("30")
        page.get_by_role("button", name="Create token").click()
        page.locator(".token-created").wait_for()
        assert page.locator("#token-list").get_by_text("read only").first.is_visible()
        assert _main_fits(page)
        shot(f"api-manners-tokens-{width}")


def test_a_blind_coder_overview_says_what_it_counts(page, live_server, login, shot, study, bob, make_episode):
    make_episode(study)
    login("bob")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 844})
        page.goto(f"{live_server.url}/studies/alpha/")
        assert page.locator("[data-blind-counts]").is_visible()
        shot(f"api-manners-overview-blind-{width}")
