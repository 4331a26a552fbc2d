"""An owner sets the incident webhook, copies the secret shown once, and rotates it."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_owner_sets_a_webhook_and_rotates_its_secret(page, live_server, login, shot, study, alice, settings):
    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = False
    httpx.get(f"{live_server.url}/login/", timeout=120)  # the first request imports every view
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/settings/coding/")
    page.get_by_role("link", name="incident webhook and its signing secret").click()
    page.get_by_label("Webhook URL").fill("http://169.254.169.254/latest/meta-data/")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("link-local or metadata address")
    shot("webhook-refused")

    settings.FAULTLINE_WEBHOOK_ALLOW_PRIVATE = True
    page.get_by_label("Webhook URL").fill("http://127.0.0.1:9/hooks")
    page.get_by_role("button", name="Save").click()
    first = page.locator("#webhook-secret").input_value()
    assert first.startswith("whsec_")
    shot("webhook-secret-shown")

    page.goto(page.url)  # a later visit: the secret is not shown again
    expect(page.locator("#webhook-secret")).to_have_count(0)
    page.get_by_role("button", name="Rotate the secret").click()
    second = page.locator("#webhook-secret").input_value()
    assert second.startswith("whsec_") and second != first
    shot("webhook-rotated")
