"""In a real browser: an owner uploads a Langfuse trace download through the study page's trace form, watches the
job finish, and codes the trace with its agent, tool call and model usage as Langfuse showed them."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def media(settings, tmp_path, monkeypatch):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


def test_an_owner_uploads_a_langfuse_download_and_codes_it(page, live_server, login, shot, study, alice, media):
    from annotate.models import Document
    from annotate.tests.traces.corpus_data import CORPUS

    page.set_default_timeout(30_000)
    login("alice")
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/studies/alpha/")
    page.locator("#trace-format").select_option("langfuse")
    page.locator("#trace-file").set_input_files(str(CORPUS / "openai-agents-2025-09-30.json"))
    page.get_by_role("button", name="Import traces").click()
    job = page.locator("#trace-import-panel .job")
    expect(job.locator(".badge")).to_have_text("Succeeded")
    shot("trace-upload-langfuse-1366")
    doc = Document.objects.get(study=study, meta__format="langfuse")
    assert doc.title == "Agent workflow"  # the Langfuse trace's name
    for width, height in ((1366, 768), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/studies/alpha/episodes/{doc.episodes.get().pk}/code/")
        expect(page.locator("#trace .trace-step")).to_have_count(5)
        expect(page.locator("#trace .badge.evidence-ran")).to_have_count(1)
        expect(page.locator("#trace .badge.evidence-requested")).to_have_count(0)  # no phantom get_weather
        expect(page.locator("#trace .agent-chip").first).to_have_text("Hello world")
        shot(f"trace-upload-langfuse-coding-{width}")
