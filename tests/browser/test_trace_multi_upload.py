"""The study page's trace upload in a real browser: choosing files runs the size check on each (no TypeError),
several files upload at once, each with its own job progress, and the study's counts follow without a reload."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WHO = Path(django_settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")


def test_several_trace_files_upload_at_once_and_an_oversized_one_is_refused_on_choice(
    page, live_server, login, study, alice, settings, tmp_path, eager_jobs
):
    from tests.browser.conftest import SCREENSHOTS

    settings.MEDIA_ROOT = tmp_path
    settings.FAULTLINE_MAX_UPLOAD_MB = 1
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(30_000)
    page.set_viewport_size({"width": 1366, "height": 768})
    login("alice")
    page.goto(f"{live_server.url}/studies/alpha/")
    documents = page.locator("#study-counts .stats div").filter(has_text="Documents").locator("dd")
    expect(documents).to_have_text("0")
    chooser = page.locator("#trace-file")
    chooser.set_input_files(
        [
            {"name": "small.json", "mimeType": "application/json", "buffer": b"{}"},
            {"name": "huge.json", "mimeType": "application/json", "buffer": b" " * (1024 * 1024 + 10)},
        ]
    )
    expect(page.locator("#trace-import-error")).to_contain_text("'huge.json' is 1.0 MB; uploads are limited to 1 MB.")
    assert not chooser.evaluate("(el) => el.checkValidity()")
    chooser.set_input_files([str(WHO / "Hand-Crafted" / "6.json"), str(WHO / "Hand-Crafted" / "10.json")])
    expect(page.locator("#trace-import-error")).to_have_text("")
    page.locator("#trace-format").select_option("whowhen")
    page.get_by_role("button", name="Import traces").click()
    jobs = page.locator("#trace-import-panel .job")
    expect(jobs).to_have_count(2)
    expect(page.locator("#trace-import-panel .job.job-success")).to_have_count(2, timeout=60_000)
    expect(documents).to_have_text("2")  # the counts follow the finished jobs, no reload
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    screenshot(page.locator("#trace-import-panel"), SCREENSHOTS / "trace-multi-upload-1366.png")
    assert errors == []
