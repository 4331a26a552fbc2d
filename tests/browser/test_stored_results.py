"""Stored analysis results in Chromium (issue 31): not computed yet, computed as a job, stale after a coding."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(codebook, settings):
    from django.contrib.auth import get_user_model

    from annotate.ops.demo import demo_build
    from conftest import PASSWORD

    settings.FAULTLINE_ANALYSIS_INLINE_EPISODES = 5  # the demo study counts as large: no page computes it
    result = demo_build()
    owner = get_user_model().objects.get(username="demo-owner")
    owner.set_password(PASSWORD)
    owner.save()
    return result.study


def _code_one_more(study) -> None:
    from django.contrib.auth import get_user_model

    from annotate.coding.services import CodingValues, coding_save
    from annotate.models import Episode
    from taxonomy.models import AxisValue, FailureType

    episode = Episode.objects.filter(study=study, codings__isnull=True, split="primary").first()
    coder = get_user_model().objects.get(username="demo-coder1")
    value = {a: AxisValue.objects.filter(codebook=study.codebook, axis=a).first() for a in ("source", "stage",
                                                                                          "capability")}  # fmt: skip
    coding_save(
        episode=episode,
        coder=coder,
        version=None,
        values=CodingValues(failure_type=FailureType.objects.filter(codebook=study.codebook).first(), **value),
    )


def test_a_large_study_shows_its_stored_analysis_current_then_stale(page, live_server, login, shot, demo, eager_jobs):
    login("demo-owner")
    url = f"{live_server.url}/studies/demo/analysis/"
    page.goto(url)
    expect(page.get_by_text("Not computed yet")).to_be_visible()
    expect(page.locator("table.heatmap")).to_have_count(0)
    shot("i31-analysis-missing")
    page.get_by_role("button", name="Compute").click()
    expect(page.get_by_role("link", name="Open the result")).to_be_visible(timeout=60_000)
    page.goto(url)
    expect(page.get_by_text("Stored result, computed")).to_be_visible()
    expect(page.locator("table.diff td.selected")).to_have_count(1)

    _code_one_more(demo)
    page.goto(url)
    expect(page.get_by_text("Stale:")).to_be_visible()
    expect(page.get_by_role("button", name="Recompute")).to_be_visible()
    expect(page.locator("table.diff td.selected")).to_have_count(1)  # the stored result, shown as it was
    shot("i31-analysis-stale")
    page.set_viewport_size({"width": 390, "height": 844})
    shot("i31-analysis-stale-390")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.get_by_role("button", name="Recompute").click()
    expect(page.get_by_role("link", name="Open the result")).to_be_visible(timeout=60_000)
    page.goto(url)
    expect(page.get_by_text("Stored result, computed")).to_be_visible()

    page.goto(f"{live_server.url}/studies/demo/coverage/")
    expect(page.get_by_text("Not computed yet")).to_be_visible()
    page.get_by_role("button", name="Compute").click()
    expect(page.get_by_text("Stored result, computed")).to_be_visible(timeout=60_000)
    _code_one_more(demo)
    page.reload()
    expect(page.get_by_text("Stale:")).to_be_visible()
    shot("i31-coverage-stale")
    page.set_viewport_size({"width": 390, "height": 844})
    shot("i31-coverage-stale-390")
