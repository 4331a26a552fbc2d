"""The analysis page's Report button in Chromium: a job with progress, then the zip (demo study)."""

import zipfile

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(codebook, settings, tmp_path):
    from django.contrib.auth import get_user_model

    from annotate.ops.demo import demo_build
    from conftest import PASSWORD

    settings.MEDIA_ROOT = tmp_path
    result = demo_build()
    owner = get_user_model().objects.get(username="demo-owner")
    owner.set_password(PASSWORD)
    owner.save()
    return result.study


def test_the_report_button_builds_the_zip_and_offers_it(page, live_server, login, shot, demo, eager_jobs):
    # Built once, on a phone (the harder screen); the finished card is then looked at on a laptop too.
    width = 390
    page.set_viewport_size({"width": width, "height": 900})
    login("demo-owner")
    page.goto(f"{live_server.url}/studies/demo/analysis/?bootstrap=300", timeout=60_000)
    card = page.locator("#report")
    expect(card.get_by_role("heading", name="Report for a paper")).to_be_visible()
    card.get_by_role("button", name="Build the report").click(timeout=120_000)
    page.wait_for_url("**report_job=*", timeout=120_000)
    link = card.get_by_role("link", name="Download the report")
    expect(link).to_be_visible(timeout=120_000)
    expect(card.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
    expect(card.get_by_role("button", name="Build the report again")).to_be_visible()
    card.scroll_into_view_if_needed()
    shot(f"report-button-{width}")
    with page.expect_download() as download:
        link.click()
    assert download.value.suggested_filename == "demo-report.zip"
    with zipfile.ZipFile(download.value.path()) as zf:
        names = zf.namelist()
    assert "demo-report/report.pdf" in names and "demo-report/report.html" in names
    page.set_viewport_size({"width": 1366, "height": 900})
    page.reload()
    expect(card.get_by_role("link", name="Download the report")).to_be_visible()
    expect(card.get_by_role("button", name="Build the report again")).to_be_visible()
    card.scroll_into_view_if_needed()
    shot("report-button-1366")
