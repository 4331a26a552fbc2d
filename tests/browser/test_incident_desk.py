"""The incident desk in Chromium: the coding page's type picker on the incident page, bulk actions and keys on
the triage board, keys on the adjudication list, and a webhook test event received on 127.0.0.1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.usefixtures("incidents_open"), pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDE = {"width": 1366, "height": 768}
PHONE = {"width": 390, "height": 844}
SHOTS = Path("/work/notes/shots-i33-desk")
PICKER_SCRIPTS = """() => [...document.scripts].map(s => new URL(s.src, location.href).pathname)
    .filter(p => p.includes("/coding-") || p.includes("type_rank") || p.includes("type_picker"))"""


@pytest.fixture
def eager(monkeypatch, settings):
    """Jobs and webhook deliveries run in the server's process, as under `make run` without a broker."""
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.fixture
def incidents(study, bob, eager):
    from annotate.incidents.services import IncidentData, incident_create

    made = []
    for title, service, severity in (
        ("Support bot hangs waiting for the CRM", "support-bot", "high"),
        ("Refund tool called three times", "checkout-agent", "critical"),
        ("Search agent cites a page it never opened", "search-agent", "medium"),
    ):
        data = IncidentData(service=service, title=title, severity=severity,
                            description=f"{title}. The agent kept going without checking the result.")  # fmt: skip
        made.append(incident_create(study=study, user=bob, data=data).document)
    return made


def _save(page, name: str) -> None:
    screenshot(page, SHOTS / f"{name}.png", full_page=True)


def _fits(page, selector: str) -> None:
    """The element lies within the viewport's width (nothing of it needs a sideways scroll)."""
    box = page.locator(selector).bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"] + 1, box


def test_a_triager_codes_an_incident_with_the_coding_pages_type_picker(page, live_server, login, study, bob, incidents):
    from annotate.models import Coding
    from taxonomy.models import AxisValue

    incident = incidents[0]
    page.set_viewport_size(WIDE)
    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/incidents/{incident.pk}/")
    expect(page.locator("#type-filter")).to_be_visible()
    coding_scripts = page.evaluate(PICKER_SCRIPTS)
    assert len(coding_scripts) == 3 and coding_scripts[1:] == ["/static/js/type_rank.js", "/static/js/type_picker.js"]
    # The source, stage and capability selects show display names, never raw codes.
    names = dict(AxisValue.objects.filter(codebook=study.codebook, axis="source").values_list("code", "name"))
    shown = page.locator("#ic-source option:not([value=''])").evaluate_all("os => os.map(o => [o.value, o.text])")
    assert shown and all(text == names[code] and text != code for code, text in shown)
    expect(page.locator("#resp-h + p code")).to_have_count(0)

    page.keyboard.press("/")  # the picker's own shortcut focuses the filter
    expect(page.locator("#type-filter")).to_be_focused()
    page.keyboard.type("hang")
    expect(page.locator("#type-listbox [role=option]").first).to_have_attribute("data-code", "CTL-05")
    page.keyboard.press("Enter")
    expect(page.locator("#failure_type")).to_have_value("CTL-05")
    expect(page.locator("#ic-source")).to_be_focused()  # next to decide: the source
    typical = page.evaluate("() => window.FaultlinePicker.type('CTL-05')")
    for axis in ("source", "stage", "capability"):
        expect(page.locator(f"#ic-{axis}")).to_have_value(typical[axis])
    expect(page.locator("#type-detail")).to_contain_text("CTL-05")
    page.locator("#ic-stage").scroll_into_view_if_needed()
    _save(page, "incident-page-1366")
    page.get_by_role("button", name="Save these codes").click()
    expect(page.locator("#code-h")).to_contain_text("saved, version 1")
    coding = Coding.objects.get(episode__document=incident, coder=bob)
    assert (coding.failure_type.code, coding.source.code, coding.history.count()) == ("CTL-05", typical["source"], 1)

    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator("#type-filter")).to_be_visible()
    for selector in ("#type-picker", "#ic-source", "#save-codes"):
        _fits(page, selector)
    _save(page, "incident-page-390")


def test_bulk_actions_and_keys_on_the_board(page, live_server, login, study, alice, bob, incidents):
    from annotate.models import Document, TriageEvent

    page.set_viewport_size(WIDE)
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/incidents/")
    expect(page.locator("#board-keys")).to_contain_text("select it")
    cards = page.locator("[data-nav-item]")
    order = [int(i.split("-")[1]) for i in cards.evaluate_all("cs => cs.map(c => c.id)")]
    assert sorted(order) == sorted(d.pk for d in incidents)

    # A card's own move that is refused says why in the card (a 400 the board used to drop).
    page.locator(f"#incident-{order[2]}").get_by_role("button", name="Move").click()  # triaged, nobody named
    expect(page.locator(f"#incident-{order[2]} .error")).to_contain_text("Choose who handles it.")
    page.locator("body").click(position={"x": 5, "y": 300})  # leave the card's controls for the keys

    page.keyboard.press("j")
    current = re.compile(r"\bcurrent\b")
    expect(cards.nth(0)).to_have_class(current)
    page.keyboard.press("x")
    page.keyboard.press("j")
    page.keyboard.press("x")
    expect(page.locator("#bulk-count")).to_have_text("2")
    expect(cards.nth(1)).to_have_class(re.compile(r"\bselected\b"))
    page.keyboard.press("k")
    expect(cards.nth(0)).to_have_class(current)
    _save(page, "board-selected-1366")
    page.keyboard.press("a")
    expect(page.locator("#bulk-assignee")).to_be_focused()
    page.locator("#bulk-assignee").select_option(label="bob")
    page.keyboard.press("Enter")
    expect(page.locator("#bulk-done")).to_have_text("✓ Assigned 2 incidents to bob.")
    expect(page.locator("#bulk-count")).to_have_text("0")
    first_two = order[:2]
    states = dict(Document.objects.filter(pk__in=order).values_list("pk", "triage_status"))
    assert [states[pk] for pk in order] == ["triaged", "triaged", "new"]
    assert set(Document.objects.filter(pk__in=first_two).values_list("assignee__username", flat=True)) == {"bob"}
    assert TriageEvent.objects.filter(document_id__in=first_two, to_status="triaged", actor=alice).count() == 2

    # The board came back from the server and the keys still act on it: c closes a ticked card.
    page.locator(f"#incident-{order[2]}").locator("[data-nav-select]").check()
    page.keyboard.press("c")
    expect(page.locator("#bulk-done")).to_have_text("✓ Closed 1 incident.")
    expect(page.locator(f"#incident-{order[2]}")).to_have_count(0)  # resolved leaves the open board
    assert Document.objects.get(pk=order[2]).triage_status == "resolved"

    # Esc clears a selection.
    page.locator(f"#sel-{order[0]}").check()
    expect(page.locator("#bulk-count")).to_have_text("1")
    page.locator("body").press("Escape")
    expect(page.locator("#bulk-count")).to_have_text("0")
    expect(page.locator(f"#sel-{order[0]}")).not_to_be_checked()

    _a_refused_mix_changes_nothing(page, order)
    _board_at_both_widths(page, live_server, order)

    # Enter opens the current card's incident.
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/incidents/{order[0]}/")


def _a_refused_mix_changes_nothing(page, order) -> None:
    """A mixed selection that cannot all move changes nothing and says which one is in the way."""
    from annotate.models import Document

    page.locator("#f-status").select_option("all")
    expect(page.locator(f"#incident-{order[2]}")).to_be_visible()
    for pk in (order[0], order[2]):
        page.locator(f"#sel-{pk}").check()
    page.locator("#bulk-assignee").select_option(label="alice")
    page.locator("#bulk-assign").click()
    expect(page.locator("#bulk-error")).to_contain_text("Nothing was changed")
    expect(page.locator(f"#sel-{order[0]}")).to_be_checked()
    assert Document.objects.get(pk=order[0]).assignee.username == "bob"
    _save(page, "board-error-1366")


def _board_at_both_widths(page, live_server, order) -> None:
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/studies/alpha/incidents/?show=all")
    for selector in ("#bulk-form", "#bulk-assignee", "#bulk-close", f"#incident-{order[0]}"):
        _fits(page, selector)
    _save(page, "board-390")
    page.set_viewport_size(WIDE)
    page.goto(f"{live_server.url}/studies/alpha/incidents/")
    _save(page, "board-1366")


def test_keys_on_the_adjudication_list(page, live_server, login, study, make_episode, codes, alice, bob, carol):
    from annotate.coding.services import CodingValues, coding_save

    episodes = []
    for title in ("MCP client waits forever", "Planner drops the user's constraint"):
        ep = make_episode(study, title=title)
        for coder, type_code in ((bob, "CTL-01"), (carol, "EXT-01")):
            values = CodingValues(
                failure_type=codes.type(type_code), source=codes.source("llm"), stage=codes.stage("verification"),
                capability=codes.capability("self_monitoring"),
            )  # fmt: skip
            coding_save(episode=ep, coder=coder, values=values, version=None)
        episodes.append(ep)
    page.set_viewport_size(WIDE)
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/adjudicate/")
    expect(page.locator("#adjudication-keys")).to_contain_text("adjudicate it")
    rows = page.locator("tr[data-nav-item]")
    expect(rows).to_have_count(2)
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("k")
    page.keyboard.press("j")
    second = rows.nth(1).get_attribute("id").split("-")[1]
    expect(rows.nth(1)).to_have_attribute("aria-current", "true")
    _save(page, "adjudication-list-1366")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/episodes/{second}/adjudicate/")
    page.go_back()
    # Keys are left alone while typing in a filter.
    page.locator("#f-type").focus()
    page.keyboard.press("j")
    expect(page).to_have_url(re.compile(r"/adjudicate/(\?.*)?$"))


def test_an_owner_sends_a_test_event_to_a_receiver_on_this_machine(page, live_server, login, study, alice, settings,
                                                                  eager):  # fmt: skip
    from tests.security.test_webhooks import Receiver

    settings.FAULTLINE_WEBHOOK_ALLOW_LOOPBACK = True  # as under `make run`
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = False
    receiver = Receiver(status=200)
    try:
        page.set_viewport_size(WIDE)
        login("alice")
        page.goto(f"{live_server.url}/studies/alpha/settings/webhook/")
        expect(page.get_by_text("this machine's loopback")).to_be_visible()
        page.get_by_label("Webhook URL").fill(receiver.url)
        page.get_by_role("button", name="Save", exact=True).click()
        secret = page.locator("#webhook-secret").input_value()
        page.get_by_role("button", name="Send a test event").click()
        expect(page.locator("#webhook-test-result")).to_contain_text("✓ Test event delivered")
        expect(page.locator("#webhook-test-result")).to_contain_text("HTTP 200")
        [request] = receiver.requests
        assert receiver.verifies(request, secret) and request["headers"]["X-Faultline-Event"] == "webhook.test"
        _save(page, "webhook-test-event-1366")
        page.set_viewport_size(PHONE)
        _fits(page, "#webhook-test-result")
        _save(page, "webhook-test-event-390")
    finally:
        receiver.close()
