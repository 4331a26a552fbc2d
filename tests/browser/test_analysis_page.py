"""The analysis pages in Chromium, on the demo study (GitHub + literature, double-coded, 4 hold-out records)."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
X = "\u00d7"  # the multiplication sign between stage and capability
HOT = f"Iterative execution {X} Actuation (tool use & action)"  # the paper's headline cell, by display names


@pytest.fixture
def demo(codebook):
    from django.contrib.auth import get_user_model

    from annotate.ops.demo import demo_build
    from conftest import PASSWORD

    result = demo_build()
    owner = get_user_model().objects.get(username="demo-owner")
    owner.set_password(PASSWORD)
    owner.save()
    return result.study


def test_the_analysis_pages_show_matrices_contrast_agreement_and_coverage(page, live_server, login, shot, demo):
    login("demo-owner")
    page.goto(f"{live_server.url}/studies/demo/")
    page.get_by_role("link", name="Analysis").click()
    expect(page.get_by_role("heading", name="Where failures concentrate")).to_be_visible()
    heatmaps = page.locator("table.heatmap:not(.diff)")
    expect(heatmaps).to_have_count(2)
    expect(page.locator("figcaption", has_text="GitHub issue")).to_contain_text("episodes in")
    # The paper's headline cell is the largest difference, and its interval excludes zero.
    selected = page.locator("table.diff td.selected")
    expect(selected).to_contain_text("◆")
    expect(page.locator("#sensitivity h2")).to_contain_text(HOT)
    expect(page.locator("#sensitivity tbody tr")).to_have_count(4)
    shot("analysis-page")

    # Intervals without a mouse: a cell reached with Tab shows its interval, and so does every cell on request.
    first_zero = heatmaps.first.locator("span.zero").first
    first_zero.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    expect(first_zero).to_be_focused()
    expect(first_zero.locator(".iv")).to_be_visible()
    page.keyboard.press("Tab")
    expect(heatmaps.first.locator("a:focus .iv, span.zero:focus .iv")).to_be_visible()
    expect(heatmaps.first.locator("td a .iv").first).to_be_hidden()
    page.get_by_label("Show each cell's 95% interval in the cell").check()
    expect(heatmaps.first.locator("td a .iv").first).to_be_visible()
    page.get_by_label("Show each cell's 95% interval in the cell").uncheck()

    # Clicking another cell swaps in its sensitivity panel (htmx), without a page load.
    page.locator("table.diff tbody tr").nth(5).locator("td").nth(5).locator("a").click()
    cold = f"Verification & termination {X} Self-monitoring & verification"
    expect(page.locator("#sensitivity h2")).to_contain_text(cold)
    expect(page.locator("#sensitivity")).to_contain_text("includes 0")
    assert "cell=" not in page.url
    expect(page.locator("table.diff td.selected")).to_have_count(1)
    expect(page.locator("table.diff td.selected")).to_contain_text("-18.8")
    shot("analysis-sensitivity")

    # A count opens the list of the cell's episodes.
    heatmaps.first.locator("tbody tr").nth(3).locator("td").nth(3).locator("a").click()
    expect(page.get_by_role("heading", name=f"GitHub issue: {HOT}")).to_be_visible()
    expect(page.locator("table.table tbody tr")).not_to_have_count(0)
    shot("analysis-cell")

    with page.expect_download() as download:
        page.goto(f"{live_server.url}/studies/demo/analysis/")
        page.locator("figure.heatmap-card").first.get_by_role("link", name="PNG").click()
    assert download.value.suggested_filename == "demo-github_issue.png"

    page.get_by_role("link", name="Agreement").first.click()
    expect(page.locator("table.table").first).to_contain_text("Krippendorff")
    expect(page.locator("table.confusion").first).to_be_visible()
    shot("agreement-page")

    page.get_by_role("link", name="Hold-out coverage").click()
    expect(page.locator(".big-number")).to_contain_text("%")
    expect(page.get_by_text("Wilson", exact=False).first).to_be_visible()
    shot("coverage-page")


def test_the_analysis_page_names_the_cell_interval_method_at_both_widths(browser, live_server, login, page, demo):
    from tests.browser.conftest import SCREENSHOTS

    login("demo-owner")
    for width in (1366, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_server.url}/studies/demo/analysis/")
        method = page.locator("select[name=interval]")
        expect(method).to_have_value("beta_cr2_bm")
        expect(method.locator("option:checked")).to_contain_text("Korn-Graubard beta, cell by cell")
        expect(page.locator("body")).to_contain_text("cell intervals: Korn-Graubard beta interval, cell by cell")
        expect(page.locator("p.muted", has_text="effective clusters").first).to_be_visible()
        # The long method names must not push the form past the viewport at 390 px.
        box = method.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        screenshot(page, SCREENSHOTS / f"analysis-interval-{width}.png", full_page=True)
