"""Coding without a keyboard, on a phone (390 x 844, touch): every shortcut of the coding page has a control to
tap. And after accepting a suggestion (`a` or a tap) the type list highlights the accepted type."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from conftest import PASSWORD
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
WIDE = {"viewport": {"width": 1366, "height": 768}}
WHO = Path(settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")
SHOTS = Path(os.environ.get("FAULTLINE_SCREENSHOTS", "/tmp/faultline-screenshots"))
FITS = "() => document.documentElement.scrollWidth <= Math.min(innerWidth, screen.width)"
IN_VIEW = """(el) => {
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth;
}"""


@pytest.fixture
def demo(codebook, settings):
    from django.contrib.auth import get_user_model

    from annotate.ops.demo import demo_build
    from annotate.suggestions.services import suggestions_make

    settings.OPENAI_API_KEY = ""  # the local suggester, as under `make run`
    study = demo_build().study
    coder = get_user_model().objects.get(username="demo-coder1")
    coder.set_password(PASSWORD)
    coder.save()
    suggestions_make(study=study, backend="local")
    return study


def _suggested(study, *, not_first_type: str):
    """An episode demo-coder1 has not coded whose confident suggestion is not the list's first type."""
    from annotate.models import Episode, Suggestion

    episodes = (
        Episode.objects.filter(
            study=study, suggestions__error="", suggestions__confidence__gte=study.suggestion_min_confidence
        )
        .exclude(codings__coder__username="demo-coder1")
        .distinct()
        .order_by("id")
    )
    for episode in episodes:
        suggestion = Suggestion.objects.filter(episode=episode, error="").latest("created_at")
        if not suggestion.not_a_failure and suggestion.failure_type.code != not_first_type:
            return episode, suggestion
    raise AssertionError("no confident suggestion of another type than the first")


def _log_in(page, base):
    page.goto(f"{base}/login/", timeout=60_000)
    page.get_by_label("Username").fill("demo-coder1")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")


def _first_type(study) -> str:
    from taxonomy.models import FailureType

    return FailureType.objects.filter(codebook=study.codebook).first().code  # the list's first row before any filter


def test_a_coder_codes_an_episode_on_a_phone_by_taps_alone(browser, live_server, demo):
    from annotate.models import Coding, Episode

    episode, suggestion = _suggested(demo, not_first_type=_first_type(demo))
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(30_000)
    pressed = []
    page.expose_function("keyPressed", lambda key: pressed.append(key))
    page.add_init_script("document.addEventListener('keydown', e => window.keyPressed(e.key), true)")
    try:
        _log_in(page, live_server.url)
        page.goto(f"{live_server.url}/studies/demo/episodes/{episode.pk}/code/")
        assert page.evaluate(FITS)
        listbox = page.locator("#type-listbox")
        # Finger-sized targets: every radio row, type row and form button is at least 40 px tall.
        small = page.evaluate(
            """() => [...document.querySelectorAll(
                   '#coding-form label.radio, #type-listbox li, #coding-form .actions button')]
                 .filter(e => e.offsetParent !== null && e.getBoundingClientRect().height < 40)
                 .map(e => e.textContent.trim().slice(0, 30))"""
        )
        assert small == [], small
        # A touch screen shows the controls without their key hints.
        expect(page.locator("#save-next kbd").first).to_be_hidden()
        expect(page.locator("#show-shortcuts")).to_be_hidden()

        # Accept the suggestion with a tap: the form fills, and the list highlights the accepted type.
        page.locator("#suggestion-panel .suggestion-accept").first.tap()
        expect(page.locator("#failure_type")).to_have_value(suggestion.failure_type.code)
        expect(listbox.locator("li.active")).to_have_attribute("data-code", suggestion.failure_type.code)
        expect(listbox.locator("li.chosen")).to_have_attribute("data-code", suggestion.failure_type.code)
        screenshot(page, SHOTS / "tap-coding-accepted-390.png")

        # Then change every code by tapping: a type in the list, one radio per axis, the confidence.
        listbox.locator('li[data-code="EXT-01"]').tap()
        expect(page.locator("#failure_type")).to_have_value("EXT-01")
        expect(listbox.locator("li.active")).to_have_attribute("data-code", "EXT-01")
        for control in ("source-tool_service", "stage-verification", "capability-self_monitoring", "confidence-low"):
            page.locator(f"label:has(#{control})").tap()
            expect(page.locator(f"#{control}")).to_be_checked()
        # Evidence from a selection of the text, as a long press makes one (no mouseup on a touch screen).
        page.evaluate("getSelection().selectAllChildren(document.querySelector('#episode-text p'))")
        expect(page.locator("#evidence")).not_to_have_value("")
        evidence = page.locator("#evidence").input_value()

        # The buttons stay under the thumb while the form is in view, and fit the screen.
        page.locator("#stage").scroll_into_view_if_needed()
        save_next = page.get_by_role("button", name=re.compile("^Save and next"))
        assert save_next.evaluate(IN_VIEW), "Save and next is not on the screen while the form is"
        screenshot(page, SHOTS / "tap-coding-form-390.png")  # the screen as the thumb sees it
        for name in ("Save", "Skip", "Back"):
            expect(page.get_by_role("button", name=re.compile(f"^{name}"), exact=False).first).to_be_visible()
        assert page.evaluate(FITS)
        save_next.tap()
        page.wait_for_url(re.compile(rf"/episodes/(?!{episode.pk}/)\d+/code/"))

        coding = Coding.objects.get(episode=episode, coder__username="demo-coder1")
        assert (coding.failure_type.code, coding.source.code, coding.stage.code, coding.capability.code) == (
            "EXT-01", "tool_service", "verification", "self_monitoring",
        )  # fmt: skip
        # The server keeps the quote as the source text spells it (Markdown), so compare its start.
        assert coding.confidence == "low" and evidence[:40] and coding.evidence[:40] == evidence[:40]
        assert coding.from_suggestion_id == suggestion.pk  # accepted, then edited

        # Skip and Back by tap: the next episode goes back to the queue, then the study page.
        next_url = page.url
        page.get_by_role("button", name=re.compile("^Skip")).tap()
        page.wait_for_url(lambda url: url != next_url)
        page.get_by_role("button", name="Back").tap()
        page.wait_for_url(f"{live_server.url}/studies/demo/")
        assert not Coding.objects.filter(coder__username="demo-coder1", episode__in=Episode.objects.filter(
            study=demo).exclude(pk=episode.pk)).exclude(created_at__lt=coding.created_at).exists()  # fmt: skip
    finally:
        context.close()
    assert pressed == [], f"keys were pressed: {pressed}"


def test_a_trace_step_is_selected_and_marked_decisive_by_taps(browser, live_server, demo):
    from annotate.models import Episode
    from annotate.traces.services import import_traces

    import_traces(study=demo, paths=[WHO / "Algorithm-Generated" / "1.json"], fmt="whowhen")
    episode = Episode.objects.get(study=demo, document__kind="trace")
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        _log_in(page, live_server.url)
        page.goto(f"{live_server.url}/studies/demo/episodes/{episode.pk}/code/")
        step = page.locator("#step-2")
        step.locator(".step-name").tap()  # j/k: a tap selects a step
        expect(step).to_have_class(re.compile(r"\bis-current\b"))
        step.locator(".mark-step").tap()  # m: its Decisive button
        expect(page.locator("#decisive_step")).to_have_value("2")
        expect(page.locator("#responsible_agent")).to_have_value(step.get_attribute("data-agent"))
        assert page.evaluate(FITS)
    finally:
        context.close()


def test_after_a_accepts_the_type_list_highlights_the_accepted_type(browser, live_server, demo):
    first = _first_type(demo)
    episode, suggestion = _suggested(demo, not_first_type=first)
    context = browser.new_context(**WIDE)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        _log_in(page, live_server.url)
        page.goto(f"{live_server.url}/studies/demo/episodes/{episode.pk}/code/")
        listbox = page.locator("#type-listbox")
        expect(listbox.locator("li.active")).to_have_attribute("data-code", first)  # nothing chosen yet
        # The panel's content arrives by its own request after the page: `a` before it does nothing.
        expect(page.locator("#suggestion-panel .suggestion-accept.primary")).to_be_visible()
        page.locator("#doc-title").click()
        page.keyboard.press("a")
        code = suggestion.failure_type.code
        expect(page.locator("#failure_type")).to_have_value(code)
        expect(listbox.locator("li.active")).to_have_count(1)
        expect(listbox.locator("li.active")).to_have_attribute("data-code", code)
        expect(listbox.locator(f'li[data-code="{first}"]')).not_to_have_class(re.compile(r"\bactive\b"))
        # The highlighted row is in view inside the list.
        assert listbox.locator("li.active").evaluate(
            "(li) => { const l = li.parentElement.getBoundingClientRect(), r = li.getBoundingClientRect();"
            " return r.top >= l.top && r.bottom <= l.bottom; }"
        )
    finally:
        context.close()
