"""The coding workspace in a real browser: keyboard-only coding, blind double coding, a stale save, adjudication."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from conftest import PASSWORD
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BODIES = [
    "The agent called `search` **forty times** with the same query and never stopped.\n\n"
    "```\nTool call: search(q='weather') -> []\n```\n\nThe loop ended only at the step limit.",
    "The MCP server answered `429 Too Many Requests` and the agent gave up without retrying.",
    "The planner invented a tool called `fetch_all` that does not exist; every call failed.",
]


@pytest.fixture
def episodes(study, make_episode):
    study.queue_order = "import"
    study.save()
    return [make_episode(study, body=body, title=f"Episode title {i}") for i, body in enumerate(BODIES)]


def log_in(page, live_server, username):
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")


def coding_url(live_server, ep):
    return f"{live_server.url}/studies/alpha/episodes/{ep.pk}/code/"


def test_a_coder_codes_three_episodes_using_only_the_keyboard(page, live_server, login, shot, study, bob, episodes):
    from annotate.models import Coding

    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/")
    shot("workspace-study-overview-coder")
    page.get_by_role("button", name="Code next episode").focus()
    page.keyboard.press("Enter")
    choices = [("TUS-03", None), ("loop", "3"), ("EXT-0", "4")]  # a code, a word of a name, a code prefix
    for n, (query, source_key) in enumerate(choices):
        expect(page).to_have_url(coding_url(live_server, episodes[n]))
        expect(page.locator("#type-filter")).to_be_visible()
        page.keyboard.press("/")
        expect(page.locator("#type-filter")).to_be_focused()
        page.keyboard.type(query)
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowUp")
        if n == 0:
            options = page.get_by_role("listbox", name="Failure types").get_by_role("option")
            expect(options.first).to_contain_text("TUS-03")  # the typed code comes first
            expect(page.locator("#type-listbox li.active")).to_contain_text("TUS-03")
            shot("workspace-coding-filter")
        page.keyboard.press("Enter")
        expect(page.locator("#failure_type")).not_to_have_value("")
        expect(page.locator("#source input:checked")).to_be_focused()  # Enter moved on to the source group
        if source_key:
            page.keyboard.press(source_key)
        if n == 0:
            expect(page.locator("#type-detail h3")).to_contain_text("TUS-03")
            expect(page.locator("#type-detail")).to_contain_text("Indicators")
            page.keyboard.press("?")
            expect(page.locator("#shortcut-sheet")).to_be_visible()
            shot("workspace-shortcut-sheet")
            page.keyboard.press("Escape")
            expect(page.locator("#shortcut-sheet")).to_be_hidden()
            shot("workspace-coding-chosen")
        page.keyboard.press("Control+Enter")
    expect(page.get_by_role("heading", name="Nothing left for you to code")).to_be_visible()
    shot("workspace-queue-empty")
    codings = list(Coding.objects.filter(coder=bob).order_by("episode_id"))
    assert [c.episode_id for c in codings] == [e.pk for e in episodes]
    assert codings[0].failure_type.code == "TUS-03"
    assert codings[0].source.code == codings[0].failure_type.typical_source  # pre-filled from the type
    assert codings[1].source.code == "multi_agent"  # key 3: the third source
    assert codings[2].failure_type.code.startswith("EXT-0") and codings[2].source.code == "tool_service"


def test_two_coders_code_the_same_episode_blind(browser, page, live_server, shot, study, bob, carol, episodes):
    from annotate.models import Coding

    other = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    try:
        log_in(page, live_server, "bob")
        log_in(other, live_server, "carol")
        for p in (page, other):  # the GET offers the button; the POST behind it claims the episode
            p.goto(f"{live_server.url}/studies/alpha/next/")
            p.get_by_role("button", name="Code next episode").click()
        expect(page).to_have_url(coding_url(live_server, episodes[0]))
        expect(other).to_have_url(coding_url(live_server, episodes[0]))  # k = 2: both get the first episode

        page.locator("#type-filter").fill("TUS-03")
        page.locator("#type-filter").press("Enter")
        page.locator("#memo").fill("bob's reading: a loop without a stop rule")
        page.get_by_role("button", name="Save", exact=True).click()
        expect(page.get_by_role("status").filter(has_text="Saved (version 1)")).to_be_visible()
        expect(page.locator(".others")).to_contain_text("No other coder has coded this episode yet")

        other.reload()
        others = other.locator(".others")
        expect(others).to_contain_text("Blind coding")
        expect(other.locator("body")).not_to_contain_text("bob's reading")
        expect(other.locator("body")).not_to_contain_text("bob")
        shot_other(other, "workspace-blind-before-saving")
        other.goto(f"{live_server.url}/studies/alpha/episodes/{episodes[0].pk}/")
        expect(other.locator("body")).not_to_contain_text("bob's reading")
        other.go_back()

        other.locator("#type-filter").fill("EXT-04")
        other.locator("#type-filter").press("Enter")
        other.locator("#memo").fill("carol's reading: the service refused")
        other.get_by_role("button", name="Save", exact=True).click()
        expect(others).to_contain_text("bob's reading")  # revealed only now
        expect(others.locator("code").first).to_have_text("TUS-03")
        shot_other(other, "workspace-blind-after-saving")

        page.reload()
        expect(page.locator(".others")).to_contain_text("carol's reading")
        shot("workspace-coding-others-visible")
        assert Coding.objects.count() == 2
    finally:
        other.context.close()


def shot_other(page, name):
    from tests.browser.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    screenshot(page, SCREENSHOTS / f"{name}.png", full_page=True)


def test_a_stale_save_gets_the_conflict_message(page, live_server, login, shot, study, bob, episodes):
    from annotate.models import Coding

    login("bob")
    page.goto(coding_url(live_server, episodes[0]))
    page.locator("#type-filter").fill("TUS-03")
    page.locator("#type-filter").press("Enter")
    # Evidence from a selection in the text: drag across the first paragraph's words.
    words = page.locator("#episode-text strong")
    words.scroll_into_view_if_needed()
    box = words.bounding_box()
    page.mouse.move(box["x"] + 1, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 1, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    expect(page.locator("#evidence")).to_have_value(re.compile("forty"))
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Saved (version 1)")).to_be_visible()
    coding = Coding.objects.get()
    assert "forty" in coding.evidence and BODIES[0][coding.evidence_start : coding.evidence_end] == coding.evidence

    second = page.context.new_page()  # a second tab, opened on version 1
    second.goto(coding_url(live_server, episodes[0]))
    second.locator("#memo").fill("written in the second tab")
    page.locator("#memo").fill("written in the first tab")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Saved (version 2)")).to_be_visible()
    second.get_by_role("button", name="Save", exact=True).click()
    alert = second.get_by_role("alert")
    expect(alert).to_contain_text("Not saved: this coding was changed since you opened it")
    expect(alert).to_contain_text("version 2")
    expect(second.locator("#memo")).to_have_value("written in the second tab")  # nothing typed is lost
    shot_other(second, "workspace-stale-save-conflict")
    assert Coding.objects.get().memo == "written in the first tab"
    second.close()


def test_an_owner_adjudicates_a_disagreement(page, live_server, login, shot, study, alice, bob, carol, episodes, codes):
    from annotate.coding.services import CodingValues, coding_save
    from annotate.models import Adjudication, EpisodeStatus

    ep = episodes[1]
    readings = [(bob, "EXT-04", "tool_service", "rate limit"), (carol, "TUS-03", "agent_design", "no retry logic")]
    for coder, type_code, source, memo in readings:
        values = CodingValues(
            failure_type=codes.type(type_code),
            source=codes.source(source),
            stage=codes.stage("iterative_execution"),
            capability=codes.capability("actuation"),
            memo=memo,
        )
        coding_save(episode=ep, coder=coder, values=values, version=None)
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/")
    shot("workspace-study-overview-owner")
    page.get_by_role("link", name="Adjudicate").click()
    expect(page.get_by_role("heading", name="Adjudication")).to_be_visible()
    expect(page.locator("#adjudication-rows tbody tr")).to_have_count(1)
    shot("workspace-adjudication-list")
    page.get_by_label("Disagreement on").select_option("capability")
    expect(page.locator("#adjudication-rows")).to_contain_text("Nothing to adjudicate")
    page.get_by_label("Disagreement on").select_option("failure_type")
    expect(page.locator("#adjudication-rows tbody tr")).to_have_count(1)
    page.get_by_role("link", name=re.compile("^Adjudicate episode")).click()
    expect(page.locator("table.compare")).to_contain_text("rate limit")
    expect(page.locator("table.compare")).to_contain_text("no retry logic")
    shot("workspace-adjudicate")
    page.locator("#type-filter").fill("EXT-04")  # the coding page's picker; with JS it replaces the select
    page.locator("#type-filter").press("Enter")
    page.get_by_label("Responsibility source").select_option("tool_service")
    page.get_by_label("Rationale").fill("The provider throttled the agent; the missing retry is secondary.")
    page.get_by_role("button", name="Record the final codes").click()
    expect(page.get_by_role("status").or_(page.locator(".messages"))).to_contain_text("adjudicated")
    expect(page.locator("#adjudication-rows")).to_contain_text("Nothing to adjudicate")
    adjudication = Adjudication.objects.get(episode=ep)
    assert (adjudication.failure_type.code, adjudication.source.code, adjudication.adjudicator) == (
        "EXT-04",
        "tool_service",
        alice,
    )
    ep.refresh_from_db()
    assert ep.status == EpisodeStatus.ADJUDICATED

    page.goto(f"{live_server.url}/studies/alpha/episodes/{ep.pk}/")
    expect(page.get_by_role("heading", name="History")).to_be_visible()
    expect(page.locator("table.history")).to_contain_text("adjudication created")
    shot("workspace-episode-history")
    page.goto(f"{live_server.url}/studies/alpha/settings/coding/")
    expect(page.get_by_label("Coders per episode (overlap k)")).to_have_value("2")
    shot("workspace-coding-settings")


def test_without_javascript_the_form_is_a_plain_post(browser, live_server, shot, study, bob, episodes):
    from annotate.models import Coding

    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        log_in(page, live_server, "bob")
        page.goto(coding_url(live_server, episodes[0]))
        expect(page.locator("#type-filter")).to_be_hidden()  # the picker needs JS; the select does not
        page.get_by_label("Failure type", exact=True).select_option("TUS-03")
        page.get_by_label("Agent logic & prompting").check()
        page.get_by_label("Iterative execution").check()
        page.get_by_label("Actuation (tool use & action)").check()
        page.get_by_label("Evidence").fill("forty times")
        shot_other(page, "workspace-coding-no-js")
        page.get_by_role("button", name=re.compile("^Save and next")).click()
        expect(page).to_have_url(coding_url(live_server, episodes[1]))
        coding = Coding.objects.get()
        assert (coding.failure_type.code, coding.source.code, coding.evidence) == (
            "TUS-03",
            "agent_design",
            "forty times",
        )
    finally:
        context.close()
