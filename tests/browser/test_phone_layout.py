"""Every page from a phone (390 x 844) to a laptop (1366 x 768): nothing scrolls sideways, the top bar folds into a
Menu whose links are all visible on the bar's dark background, and an episode can be coded by taps alone.

The pages are the demo study's (`make run`), with a Who&When trace and an incident added, so each page has its
longest real content: the Type filter's 65 options, the adjudication table, the trace viewer, the heatmaps.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from conftest import PASSWORD
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 1}
LAPTOP = {"viewport": {"width": 1366, "height": 768}}
SHOTS = Path(os.environ.get("FAULTLINE_SCREENSHOTS", "/tmp/faultline-screenshots"))
WHO = Path(settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")

# The page's width against the window's, and what sticks out (for the failure message). A mobile browser zooms out
# to show a page wider than the screen, and innerWidth then grows to the page's width: "inner" is the narrower of
# innerWidth and the screen's width, so a page that needs zooming out fails.
OVERFLOW = """() => {
  const width = Math.min(window.innerWidth, screen.width);
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (!r.width || r.right <= width + 0.5) continue;
    // Inside a scrolling box only what is positioned can stick out of it (and widen the page).
    const positioned = ["absolute", "fixed"].includes(getComputedStyle(el).position);
    if (positioned || !el.closest(".table-scroll, .heatmap-card, .scroll, .table-wrap, dialog, pre")) {
      const name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + "." + [...el.classList].join(".");
      out.push(`${name} right=${Math.round(r.right)}`);
    }
  }
  return {scroll: document.documentElement.scrollWidth, inner: width, out: out.slice(0, 8), zoomed: window.innerWidth};
}"""

# The contrast of an element's text against the first opaque background behind it (WCAG 2 ratio). "Behind it"
# means an ancestor whose box holds the element's box: a link that spills out of the dark bar sits on the page.
CONTRAST = """(el) => {
  const rgb = (s) => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const box = el.getBoundingClientRect();
  const holds = (n) => {
    const r = n.getBoundingClientRect();
    return r.left <= box.left + 1 && r.right >= box.right - 1 && r.top <= box.top + 1 && r.bottom >= box.bottom - 1;
  };
  let node = el, bg = null;
  while (node && node.nodeType === 1) {
    const c = rgb(getComputedStyle(node).backgroundColor);
    if (c.length >= 3 && (c.length === 3 || c[3] > 0.5) && (node === document.documentElement || holds(node))) {
      bg = c;
      break;
    }
    node = node.parentElement;
  }
  bg = bg || [255, 255, 255];
  const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""

IN_VIEW = """(el) => {
  const r = el.getBoundingClientRect();
  return r.width > 0 && r.height > 0 && r.left >= 0 && r.top >= 0 && r.right <= innerWidth && r.bottom <= innerHeight;
}"""


@pytest.fixture
def demo(codebook, eager_jobs):
    """The demo study with its owner's password known, one Who&When trace and one incident."""
    from django.contrib.auth import get_user_model

    from annotate.incidents.services import IncidentData, incident_create
    from annotate.models import Document, Episode
    from annotate.ops.demo import demo_build
    from annotate.traces.services import import_traces

    study = demo_build().study
    owner = get_user_model().objects.get(username="demo-owner")
    owner.set_password(PASSWORD)
    owner.save()
    import_traces(study=study, paths=[WHO / "Algorithm-Generated" / "1.json"], fmt="whowhen")
    # Every page in one study: this one opts in to incidents, as a triage study would.
    study.accepts_incidents = True
    study.save(update_fields=["accepts_incidents"])
    incident = incident_create(
        study=study, user=owner,
        data=IncidentData(service="checkout-agent", title="Refund tool called in a loop, a long title that wraps",
                          description="The agent called `refund_payment` three times for one order " + "x" * 120,
                          severity="high"),
    ).document  # fmt: skip
    trace = Document.objects.get(study=study, kind="trace")
    episodes = Episode.objects.filter(study=study)
    return {
        "study": study,
        "incident": incident,
        "trace_episode": episodes.filter(document=trace).first(),
        "uncoded": episodes.filter(document__kind="github_issue", codings__isnull=True).order_by("pk").first(),
        "coded": episodes.filter(codings__isnull=False).order_by("pk").first(),
        "disputed": _disputed(study),
    }


def _disputed(study):
    """An episode whose two codings differ and that has no adjudication yet."""
    from annotate.models import Episode

    for ep in Episode.objects.filter(study=study, adjudication__isnull=True).prefetch_related("codings"):
        pairs = {(c.failure_type_id, c.source_id, c.stage_id, c.capability_id) for c in ep.codings.all()}
        if len(ep.codings.all()) >= 2 and len(pairs) > 1:
            return ep
    raise AssertionError("the demo study has no disputed episode")


def pages(d) -> list[tuple[str, str]]:
    s = "/studies/demo"
    doc = d["coded"].document_id
    return [
        ("study-list", "/"),
        ("overview", f"{s}/"),
        ("documents", f"{s}/documents/"),
        ("document", f"{s}/documents/{doc}/"),
        ("episode", f"{s}/episodes/{d['coded'].pk}/"),
        ("coding", f"{s}/episodes/{d['uncoded'].pk}/code/"),
        ("trace", f"{s}/episodes/{d['trace_episode'].pk}/code/"),
        ("trace-episode", f"{s}/episodes/{d['trace_episode'].pk}/"),
        ("adjudication-list", f"{s}/adjudicate/"),
        ("adjudication", f"{s}/episodes/{d['disputed'].pk}/adjudicate/"),
        ("board", f"{s}/incidents/"),
        ("incident", f"{s}/incidents/{d['incident'].pk}/"),
        ("analysis", f"{s}/analysis/"),
        ("agreement", f"{s}/agreement/"),
        ("coverage", f"{s}/coverage/"),
        ("suggestions", f"{s}/suggestions/"),
        ("members", f"{s}/members/"),
        ("jobs", f"{s}/jobs/"),
        ("coding-settings", f"{s}/settings/coding/"),
        ("webhook-settings", f"{s}/settings/webhook/"),
        ("account", "/account/"),
        ("tokens", "/profile/tokens/"),
        ("codebooks", "/codebooks/"),
        ("codebook", f"/codebooks/{d['study'].codebook_id}/"),
        ("new-study", "/new-study/"),
    ]


def _log_in(page, base, username="demo-owner"):
    page.goto(f"{base}/login/", timeout=60_000)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")


def _open(page, url):
    response = page.goto(url, wait_until="load")
    assert response.status == 200, f"{url}: {response.status}"
    page.wait_for_load_state("networkidle")


def _check_menu(page, name) -> list[str]:
    """Open the Menu with a tap, check every entry is in view and legible, close it with Escape."""
    problems = []
    toggle = page.get_by_role("button", name="Menu")
    expect(toggle).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    entries = page.locator("#site-menu a, #site-menu button")
    expect(entries.first).to_be_hidden()
    toggle.tap()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    labels = entries.all_inner_texts()
    assert {"Studies", "Codebooks", "Account", "API tokens", "Log out"} <= set(labels), labels
    for i in range(entries.count()):
        entry = entries.nth(i)
        if not entry.is_visible() or not entry.evaluate(IN_VIEW):
            problems.append(f"{name}: menu entry {labels[i]!r} is not in view")
        ratio = entry.evaluate(CONTRAST)
        if ratio < 4.5:
            problems.append(f"{name}: menu entry {labels[i]!r} has contrast {ratio:.2f} (< 4.5)")
    page.keyboard.press("Escape")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_be_focused()
    expect(entries.first).to_be_hidden()
    return problems


def test_the_instruments_see_a_page_that_overflows_and_light_text_on_a_light_background(browser, live_server):
    """The two checks below must fail a wrong page: a 600 px wide block on a 390 px phone, pale grey on white."""
    context = browser.new_context(**PHONE)
    page = context.new_page()
    try:
        page.set_content(
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<p><a id="pale" style="color:#dbe6f7" href="#">pale</a>'
            ' <a id="dark" style="color:#1d2330" href="#">dark</a></p>'
            '<div id="wide" style="width:600px;height:10px"></div>'
        )
        wide = page.evaluate(OVERFLOW)
        assert wide["scroll"] > wide["inner"] == 390 and any("div#wide" in o for o in wide["out"])
        page.evaluate("document.getElementById('wide').remove()")
        fits = page.evaluate(OVERFLOW)
        assert fits["scroll"] <= fits["inner"] and not fits["out"]
        assert page.locator("#pale").evaluate(CONTRAST) < 1.3
        assert page.locator("#dark").evaluate(CONTRAST) > 14
        # Light text on a dark bar is fine; the same text spilling out below the bar is not.
        page.set_content(
            '<div style="background:#16202e;height:30px"><a id="in" style="color:#dbe6f7" href="#">in</a>'
            '<a id="out" style="color:#dbe6f7;display:block;margin-top:40px" href="#">out</a></div>'
        )
        assert page.locator("#in").evaluate(CONTRAST) > 10
        assert page.locator("#out").evaluate(CONTRAST) < 1.3
    finally:
        context.close()


def test_every_page_fits_a_phone_and_its_menu_opens_with_every_link_visible(browser, live_server, demo):
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems = []
    try:
        _log_in(page, live_server.url)
        for name, path in pages(demo):
            _open(page, f"{live_server.url}{path}")
            width = page.evaluate(OVERFLOW)
            if width["scroll"] > width["inner"]:
                problems.append(f"{name}: page is {width['scroll']} px wide at {width['inner']}: {width['out']}")
            screenshot(page, SHOTS / f"layout-{name}-390.png", full_page=True)
            problems += _check_menu(page, name)
            if name == "adjudication-list":  # each row's action within reach, without scrolling sideways
                action = page.get_by_role("link", name=re.compile("^Adjudicate episode")).first
                across = "el => { const r = el.getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth; }"
                if not action.evaluate(across):
                    problems.append("adjudication-list: the first row's Adjudicate button is off the screen")
        # The menu by keyboard: Enter opens it and Tab walks into its links.
        page.get_by_role("button", name="Menu").focus()
        page.keyboard.press("Enter")
        expect(page.get_by_role("button", name="Menu")).to_have_attribute("aria-expanded", "true")
        page.keyboard.press("Tab")
        expect(page.locator("#site-menu a").first).to_be_focused()
        screenshot(page, SHOTS / "layout-menu-open-390.png")
        page.keyboard.press("Escape")
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_every_page_still_fits_a_laptop_with_the_bar_in_one_row(browser, live_server, demo):
    context = browser.new_context(**LAPTOP)
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems = []
    try:
        _log_in(page, live_server.url)
        for name, path in pages(demo):
            _open(page, f"{live_server.url}{path}")
            width = page.evaluate(OVERFLOW)
            if width["scroll"] > width["inner"]:
                problems.append(f"{name}: page is {width['scroll']} px wide at {width['inner']}: {width['out']}")
            expect(page.get_by_role("button", name="Menu")).to_be_hidden()
            page.evaluate("window.scrollTo(0, 0)")  # a page may focus a field further down
            for label in ("Studies", "Account", "API tokens"):
                link = page.locator("#site-menu").get_by_role("link", name=label, exact=True)
                if not link.evaluate(IN_VIEW) or link.evaluate(CONTRAST) < 4.5:
                    problems.append(f"{name}: {label} not in the bar")
            screenshot(page, SHOTS / f"layout-{name}-1366.png", full_page=True)
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_every_page_fits_the_narrowest_phone_and_the_login_page_too(browser, live_server, demo):
    """360 px, the narrowest phone the layout is made for; and the pages a signed-out visitor sees."""
    context = browser.new_context(**{**PHONE, "viewport": {"width": 360, "height": 740}})
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems = []
    try:
        _open(page, f"{live_server.url}/login/")
        width = page.evaluate(OVERFLOW)
        if width["scroll"] > width["inner"]:
            problems.append(f"login: page is {width['scroll']} px wide at {width['inner']}: {width['out']}")
        _log_in(page, live_server.url)
        for name, path in pages(demo):
            _open(page, f"{live_server.url}{path}")
            width = page.evaluate(OVERFLOW)
            if width["scroll"] > width["inner"]:
                problems.append(f"{name}: page is {width['scroll']} px wide at {width['inner']}: {width['out']}")
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_without_javascript_the_menu_stays_open_and_fits(browser, live_server, demo):
    context = browser.new_context(**PHONE, java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        _log_in(page, live_server.url)
        _open(page, f"{live_server.url}/studies/demo/")
        expect(page.get_by_role("button", name="Menu")).to_be_hidden()  # it could not open anything
        entries = page.locator("#site-menu a, #site-menu button")
        for i in range(entries.count()):
            expect(entries.nth(i)).to_be_visible()
            assert entries.nth(i).evaluate(CONTRAST) >= 4.5
        width = page.evaluate(OVERFLOW)
        assert width["scroll"] <= width["inner"], width
        screenshot(page, SHOTS / "layout-overview-nojs-390.png")
    finally:
        context.close()


def test_a_user_who_may_not_create_studies_reads_how_on_a_phone(browser, live_server, demo):
    from django.contrib.auth import get_user_model

    coder = get_user_model().objects.get(username="demo-coder1")
    coder.set_password(PASSWORD)
    coder.save()
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        _log_in(page, live_server.url, "demo-coder1")
        expect(page.locator("#creation-refusal")).to_contain_text("ask an administrator to tick Staff status")
        expect(page.get_by_role("link", name="New study")).to_have_count(0)
        assert page.evaluate(OVERFLOW)["scroll"] <= 390
        screenshot(page, SHOTS / "layout-study-list-coder-390.png", full_page=True)
    finally:
        context.close()


def test_the_widest_screen_keeps_the_bar_in_one_row_and_pages_within_it(browser, live_server, demo):
    """2560 px: pages keep a readable measure (main is centred), nothing stretches past the window."""
    context = browser.new_context(viewport={"width": 2560, "height": 1440})
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        _log_in(page, live_server.url)
        wanted = {"overview", "coding", "board", "analysis", "adjudication-list"}
        for name, path in pages(demo):
            if name not in wanted:
                continue
            _open(page, f"{live_server.url}{path}")
            width = page.evaluate(OVERFLOW)
            assert width["scroll"] <= width["inner"], (name, width)
            expect(page.get_by_role("button", name="Menu")).to_be_hidden()
            bar = page.locator(".topbar").bounding_box()
            assert bar["height"] < 60, (name, bar)  # one row
            assert page.locator("main").bounding_box()["width"] <= 1800, name
            screenshot(page, SHOTS / f"layout-{name}-2560.png")
    finally:
        context.close()
