"""Incidents end to end: reported over HTTP with a token, triaged on the board in Chromium, hostile text inert."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.usefixtures("incidents_open"), pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = "<script>alert('board')</script><img src=x onerror=alert('img')>"


def _report(base, key, **body):
    payload = {"study": "alpha", "service": "checkout-agent", "title": "Refund tool called in a loop",
               "description": "The agent called `refund` three times.", "severity": "high", **body}  # fmt: skip
    response = httpx.post(
        f"{base}/api/v1/incidents/", json=payload, headers={"Authorization": f"Token {key}"}, timeout=60
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


def test_an_on_call_engineer_triages_reported_incidents(
    page, live_server, login, shot, study, bob, alice, codes, monkeypatch
):
    from annotate.models import Episode, Suggestion
    from config.celery import app

    # The suggestion queued at intake runs in the server, as it does without a broker.
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    from annotate.coding.services import CodingValues, coding_save
    from annotate.studies.tokens import token_create

    _, key = token_create(user=bob, name="forwarder")
    loop = _report(
        live_server.url, key,
        artifacts=[{"kind": "db_change", "name": "payments", "content": "UPDATE payments SET refunds = 3"},
                   {"kind": "log", "name": "worker log", "url": "https://logs.example.org/run/42"}],
        trace={"spans": [{"name": "execute_tool refund_payment", "attributes": {"gen_ai.tool.name": "refund"}}]},
    )  # fmt: skip
    # The suggestion queued at intake ran (eagerly here); a coder's coding then confirms another source.
    assert Suggestion.objects.filter(episode_id=loop["episode"]).exists()
    coding_save(
        episode=Episode.objects.get(pk=loop["episode"]), coder=bob, version=None,
        values=CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("tool_service"),
                            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation")),
    )  # fmt: skip
    _report(live_server.url, key, service="search-agent", title=HOSTILE, description=HOSTILE, severity="low")
    _report(live_server.url, key, service="search-agent", title="Crawler blocked by bot check", severity="critical")
    bad = httpx.post(f"{live_server.url}/api/v1/incidents/", json={"study": "alpha", "title": ""},
                     headers={"Authorization": f"Token {key}"})  # fmt: skip
    assert bad.status_code == 400 and {"service", "title", "description"} <= set(bad.json())

    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/")
    page.get_by_role("link", name="Triage board").click()
    expect(page.get_by_role("heading", name="Triage board")).to_be_visible()
    expect(page.locator("article.incident")).to_have_count(3)
    expect(page.locator("#src-tool_service article.incident")).to_have_count(1)
    expect(page.locator("#src-tool_service article.incident")).to_contain_text("coded")
    expect(page.locator("article.incident", has_text="suggested")).to_have_count(2)
    expect(page.locator("#src-unknown")).to_have_count(0)
    shot("triage-board")

    card = page.locator(f"#incident-{loop['id']}")
    card.get_by_label("Move to").select_option("triaged")
    card.get_by_label("Assignee").select_option(label="alice")
    card.get_by_role("button", name="Move").click()
    expect(page.locator(f"#incident-{loop['id']} .status-triaged")).to_have_text("Triaged")
    expect(page.locator(f"#incident-{loop['id']}")).to_contain_text("alice")
    shot("triage-board-moved")

    page.get_by_label("Service", exact=True).select_option("search-agent")
    expect(page.locator("article.incident")).to_have_count(2)
    assert "service=search-agent" in page.url
    page.get_by_label("Severity", exact=True).select_option("critical")
    expect(page.locator("article.incident")).to_have_count(1)
    shot("triage-board-filtered")

    page.goto(f"{live_server.url}/studies/alpha/incidents/{loop['id']}/")
    expect(page.get_by_role("heading", name="History")).to_be_visible()
    expect(page.locator(".history li")).to_have_count(2)
    expect(page.locator(".history")).to_contain_text("new → triaged (assignee alice)")
    expect(page.locator(".artifact").first).to_contain_text("UPDATE payments SET refunds = 3")
    expect(page.get_by_role("link", name="https://logs.example.org/run/42")).to_be_visible()
    shot("incident-detail")

    page.goto(f"{live_server.url}/studies/alpha/incidents/")
    page.get_by_role("link", name=HOSTILE).click()
    expect(page.locator("h1")).to_have_text(HOSTILE)  # shown as text, never run
    shot("incident-hostile")
    assert dialogs == []


def test_a_user_creates_and_revokes_an_api_token(page, live_server, login, shot, bob):
    login("bob")
    page.get_by_role("link", name="API tokens").click()
    page.get_by_label("Name").fill("incident forwarder")
    page.get_by_role("button", name="Create token").click()
    key = page.get_by_label("Key").input_value()
    assert key.startswith("flt_")
    shot("api-token-created")
    headers = {"Authorization": f"Token {key}"}
    assert httpx.get(f"{live_server.url}/api/v1/studies/", headers=headers).status_code == 200
    expect(page.get_by_role("button", name="Copy key")).to_be_visible()
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.get_by_role("button", name="Revoke").click()
    expect(page.locator("#token-list")).to_contain_text("active")  # dismissed: nothing revoked
    assert asked and "incident forwarder" in asked[0]
    assert httpx.get(f"{live_server.url}/api/v1/studies/", headers=headers).status_code == 200
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke").click()
    expect(page.locator("#token-list")).to_contain_text("revoked")
    assert httpx.get(f"{live_server.url}/api/v1/studies/", headers=headers).status_code == 401
    shot("api-token-revoked")
