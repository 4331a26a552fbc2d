"""A team starts in the browser: an owner creates a study, uploads a file and invites a coder by link; the coder
sets a password and codes with the keyboard, seeing progress; the owner releases a lease; a triager codes an
incident from the board. Each test runs on a fresh database."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from conftest import PASSWORD
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ISSUES = [
    {
        "number": n,
        "title": title,
        "body": body,
        "state": "open",
        "labels": [],
        "html_url": f"https://github.com/acme/agent/issues/{n}",
    }
    for n, (title, body) in enumerate(
        [
            ("Agent loops on search", "The agent called search forty times with the same query and never stopped."),
            ("Client hangs on MCP", "The client hangs forever waiting for the MCP server; no timeout is set."),
            ("Invented a tool", "The planner invented a tool called fetch_all that does not exist."),
        ],
        start=1,
    )
]


@pytest.fixture
def media(settings, tmp_path, monkeypatch):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    settings.MEDIA_ROOT = tmp_path / "media"
    return tmp_path


@pytest.fixture
def staff(alice):
    alice.is_staff = True
    alice.save()
    return alice


def _progress(page) -> str:
    return re.sub(r"\s+", " ", page.locator("#workspace-progress").inner_text())


def test_an_owner_starts_a_study_and_a_coder_joins_by_link_and_codes(
    browser, page, live_server, login, shot, staff, codebook, media
):
    from annotate.models import Coding, Document, Lease, Study

    issues = media / "issues.json"
    issues.write_text(json.dumps(ISSUES))
    login("alice")
    page.get_by_role("link", name="New study").first.click()
    page.get_by_label("Name").fill("Agents in the wild")
    page.get_by_label("Slug").fill("wild")
    page.get_by_label("Published codebook").select_option(str(codebook.pk))
    page.get_by_label("Coders per episode").fill("1")
    page.get_by_label("Queue order").select_option("import")
    page.get_by_label("First import files").set_input_files(str(issues))
    shot("team-new-study")
    page.get_by_role("button", name="Create study").click()
    expect(page).to_have_url(f"{live_server.url}/studies/wild/")
    expect(page.locator(".messages")).to_contain_text("you are its owner")
    study = Study.objects.get(slug="wild")
    assert study.memberships.get(user=staff).role == "owner" and study.coders_per_episode == 1
    assert Document.objects.filter(study=study).count() == 3  # the first import ran as a job

    page.goto(f"{live_server.url}/studies/wild/members/")
    page.get_by_label("Username or email").fill("dora")
    page.get_by_role("button", name="Invite").click()
    link = page.get_by_label("Invitation link").input_value()
    assert "/invite/" in link
    expect(page.get_by_role("button", name="Copy link")).to_be_visible()
    shot("team-invitation-link")

    coder = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
    try:
        coder.goto(link)
        expect(coder.get_by_label("Username")).to_have_value("dora")
        coder.locator("#id_password1").fill(PASSWORD)
        coder.get_by_label("Password again").fill(PASSWORD)
        coder.get_by_role("button", name="Create my account and join").click()
        expect(coder).to_have_url(f"{live_server.url}/studies/wild/")
        expect(coder.locator(".messages")).to_contain_text("you are coder")

        coder.get_by_role("button", name="Code next episode").click()
        expect(coder.locator("#workspace-progress")).to_contain_text("3 of 3 left for you in this study")
        expect(coder.locator("#workspace-progress")).to_contain_text("0 coded this session")
        for query, left in (("loop", "2 of 3"), ("hang", "1 of 3")):
            expect(coder.locator("#type-filter")).to_be_visible()
            coder.keyboard.press("/")
            coder.keyboard.type(query)
            coder.keyboard.press("Enter")
            coder.keyboard.press("Control+Enter")
            expect(coder.locator("#workspace-progress")).to_contain_text(f"{left} left for you in this study")
        expect(coder.locator("#workspace-progress")).to_contain_text("2 coded this session")
        expect(coder.locator(".messages")).to_contain_text("Back to it")
        shot_page(coder, "team-coder-progress")
        codes = [c.failure_type.code for c in Coding.objects.filter(coder__username="dora").order_by("episode_id")]
        assert codes == ["CTL-01", "CTL-05"]
        third = Lease.objects.get(coder__username="dora")  # "next" holds the third episode for her

        page.goto(f"{live_server.url}/studies/wild/")
        row = page.locator(f"#lease-{third.pk}")
        expect(row).to_contain_text("dora")
        shot("team-owner-sees-lease")
        row.get_by_role("button", name="Release").click()
        expect(page.locator(".messages")).to_contain_text("Released dora's lease")
        assert not Lease.objects.filter(pk=third.pk).exists()
    finally:
        coder.context.close()


def shot_page(page, name):
    from tests.browser.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    screenshot(page, SCREENSHOTS / f"{name}.png", full_page=True)


def test_a_triager_codes_an_incident_from_the_board(incidents_open, page, live_server, login, shot, study, bob, media):
    from annotate.incidents.services import IncidentData, incident_create
    from annotate.models import Coding, Suggestion

    made = incident_create(
        study=study, user=bob,
        data=IncidentData(service="support-bot", title="Bot hangs waiting for CRM", severity="high",
                          description="The support bot hung for 40 minutes waiting for the CRM API; no timeout."),
    )  # fmt: skip
    suggestion = Suggestion.objects.get(episode=made.episode)  # the local suggester ran at intake
    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/incidents/")
    card = page.locator(f"#incident-{made.document.pk}")
    expect(card.get_by_role("link", name=f"Episode {made.episode.pk}")).to_be_visible()
    card.get_by_role("link", name="Code it").click()
    expect(page.locator("#code-h")).to_be_visible()
    shot("triage-incident-code")
    page.get_by_role("button", name="Accept the suggestion").click()
    expect(page.locator(".messages")).to_contain_text("Coded:")
    expect(page.locator("#code-h")).to_contain_text("saved, version 1")
    coding = Coding.objects.get(episode=made.episode, coder=bob)
    assert coding.from_suggestion_id == suggestion.pk and coding.failure_type_id == suggestion.failure_type_id
    corrected = "framework" if coding.source.code != "framework" else "tool_service"
    page.get_by_label("Responsibility source").select_option(corrected)
    page.get_by_role("button", name="Save my changes").click()
    expect(page.locator("#code-h")).to_contain_text("saved, version 2")
    coding.refresh_from_db()
    assert coding.source.code == corrected and coding.history.count() == 2
    page.goto(f"{live_server.url}/studies/alpha/incidents/")
    expect(page.locator(f"#incident-{made.document.pk}")).to_contain_text("coded")
