"""The codebook version page in Chromium: the mapping table pre-filled from the diff, preview, move; then the
agreement table (one-sided bounds in their own column) and the heatmap headers (no word broken) at 1366 px."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTES = Path(os.environ.get("FAULTLINE_SHOTS_DIR", "/tmp/faultline-screenshots"))
DESKTOP, PHONE = {"width": 1366, "height": 768}, {"width": 390, "height": 844}

# For each header cell: the words whose letters the browser laid out on more than one line (a word broken
# mid-word, "understandin g"; a compound may break after its hyphen). A Range over a word has one client
# rect per line box it occupies.
BROKEN_WORDS_JS = """
(selector) => {
  const broken = [];
  for (const th of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const re = /[^\\s-]+-?/g;  // a hyphen is a break opportunity: "Self-" and "monitoring" are two parts
      let m;
      while ((m = re.exec(node.data)) !== null) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set(Array.from(range.getClientRects()).filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}
"""


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


def _shot(page, name: str) -> None:
    screenshot(page, NOTES / f"{name}.png", full_page=True)


def test_an_owner_moves_the_demo_study_to_a_revised_codebook(page, live_server, login, demo, codebook):
    from annotate.models import CodebookMigration, Study
    from annotate.tests.factories.codebook_revision import revised_codebook

    target = revised_codebook(codebook)
    page.set_viewport_size(DESKTOP)
    login("demo-owner")
    page.goto(f"{live_server.url}/studies/demo/settings/coding/")
    page.get_by_role("link", name="codebook version (agentic-failures@1.0)", exact=False).click()
    expect(page.get_by_role("heading", name="Codebook version")).to_be_visible()
    rows = page.locator("table.map-table tbody tr")
    expect(rows.first).to_contain_text("removed")
    expect(page.get_by_label("New type(s) for SPC-01")).to_have_value("SPC-11")  # the rename, found by name
    expect(page.get_by_label("New type(s) for EXT-04")).to_have_value("EXT-04")

    # A removed type that codings use must be decided: left open, the move is refused, naming it; nothing moves.
    # (PLN-02, unused in the demo, comes pre-filled as retired.)
    expect(page.get_by_label("PLN-02 retired")).to_be_checked()
    page.get_by_role("button", name="Move the codings to agentic-failures@1.1").click()
    expect(page.locator("#map-problems")).to_contain_text("CTL-01: give the new code(s), or tick retired")
    assert Study.objects.get(pk=demo.pk).codebook_id == codebook.pk

    page.get_by_label("PLN-02 retired").uncheck()
    page.get_by_label("New type(s) for PLN-02").fill("PLN-01")
    page.get_by_label("CTL-01 retired").check()
    page.get_by_label("New type(s) for TUS-03").fill("TUS-03, TUS-09")
    page.get_by_role("button", name="Preview the counts").click()
    expect(page.locator("#map-preview")).to_contain_text("codings in all")
    expect(page.get_by_label("New type(s) for TUS-03")).to_have_value("TUS-03, TUS-09")  # kept as typed
    _shot(page, "mapping-page-1366")
    page.set_viewport_size(PHONE)
    _shot(page, "mapping-page-390")
    # Nothing of the page's own content is wider than the phone (the mapping table scrolls in its card).
    assert page.evaluate("document.querySelector('main').scrollWidth <= document.querySelector('main').clientWidth")
    page.set_viewport_size(DESKTOP)

    page.get_by_role("button", name="Move the codings to agentic-failures@1.1").click()
    expect(page.locator(".messages, [role=status]").first).to_contain_text("Moved the codings to agentic-failures@1.1")
    assert Study.objects.get(pk=demo.pk).codebook_id == target.pk
    expect(page.get_by_role("button", name="Revert")).to_be_visible()
    _shot(page, "mapping-page-after-move-1366")
    assert CodebookMigration.objects.filter(study=demo).count() == 1

    # Agreement now says which version its numbers use, and offers the earlier one.
    page.goto(f"{live_server.url}/studies/demo/agreement/")
    expect(page.locator(".codebook-version")).to_contain_text("agentic-failures@1.1")
    page.get_by_label("Show agreement under").select_option("agentic-failures@1.0")
    page.get_by_role("button", name="Show", exact=True).first.click()
    expect(page.locator(".codebook-version strong")).to_have_text("agentic-failures@1.0")


def test_the_agreement_table_keeps_one_sided_bounds_in_their_own_column(page, live_server, login, demo):
    login("demo-owner")
    for name, size in (("1366", DESKTOP), ("390", PHONE)):
        page.set_viewport_size(size)
        page.goto(f"{live_server.url}/studies/demo/agreement/")
        table = page.locator("table.agreement-table")
        expect(table.locator("thead th").last).to_have_text("One-sided lower bound")
        _shot(page, f"agreement-table-{name}")
    # No statistic cell carries a one-sided bound: those sit in the last column, each value marked †.
    cells = table.locator("tbody td:not(.bounds)").all_inner_texts()
    assert cells and not any("≥" in c or "one-sided" in c for c in cells)
    bounds = table.locator("tbody td.bounds").all_inner_texts()
    marked = sum(c.count("†") for c in cells)
    assert marked == sum(c.count("≥") for c in bounds)
    assert marked > 0, "the demo has near-perfect agreement on some axis: its bound must show"


def test_heatmap_headers_wrap_between_words_at_1366(page, live_server, login, demo):
    login("demo-owner")
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/studies/demo/analysis/")
    expect(page.locator("table.heatmap").first).to_be_visible()
    assert page.evaluate(BROKEN_WORDS_JS, "table.heatmap thead th, table.heatmap tbody th") == []
    _shot(page, "analysis-heatmaps-1366")


def test_the_overall_confusion_folds_the_least_used_whole_labels(page, live_server, login, demo, monkeypatch):
    from annotate.analysis import coders

    monkeypatch.setattr(coders, "CONFUSION_LABELS", 5)  # the demo's pairs use more whole labels than that
    login("demo-owner")
    for name, size in (("1366", DESKTOP), ("390", PHONE)):
        page.set_viewport_size(size)
        page.goto(f"{live_server.url}/studies/demo/agreement/?axis=overall#pairs-h")
        table = page.locator("table.confusion").first
        expect(page.locator(".folded-note").first).to_contain_text("used least are folded into the last row and column")
        box = page.locator(".folded-note").first.bounding_box()
        assert box and box["x"] + box["width"] <= size["width"]  # the note wraps within the page, never cut off
        assert table.locator("thead th").count() == 1 + 5 + 1
        expect(table.locator("tbody tr").last.locator("th")).to_contain_text("other whole labels")
        assert table.locator("tbody tr").last.locator("td.diag").count() == 0  # the folded cell is no agreement
        _shot(page, f"agreement-overall-folded-{name}")
