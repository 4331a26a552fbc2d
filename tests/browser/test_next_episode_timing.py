"""How long a coder waits from Ctrl+Enter to the next episode's form being ready, on the demo study.

A figure to record, not a timed assertion (the machine running the suite may be busy): the test prints the
median and every sample, and writes them to next-episode-timing.json beside the screenshots. It fails
only if a step does not land on the next episode with the previous one saved.
"""

from __future__ import annotations

import json
import re
import statistics

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Ctrl+Enter stamps the time (capture phase, before the page's own handler submits); on the next page the
# stamp is read once the DOMContentLoaded handlers (coding.js's initForm among them) have run and the
# next frame is painted: the form is then on screen and answers keys.
TIMER = """
(() => {
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) sessionStorage.setItem("fl-t0", String(Date.now()));
  }, true);
  document.addEventListener("DOMContentLoaded", () => setTimeout(() => requestAnimationFrame(() => {
    const t0 = sessionStorage.getItem("fl-t0");
    if (t0 && document.getElementById("type-filter")) {
      window.__flT0 = Number(t0);
      window.__flElapsed = Date.now() - Number(t0);
      sessionStorage.removeItem("fl-t0");
    }
  }), 0));
})();
"""


# Where the time goes, from the navigation's own timing: the save and the claim (htmx's POST, until its
# HX-Redirect starts the navigation to the next episode), the coding page's server time, then the
# browser's parsing, scripts and first paint.
PHASES = """
(() => {
  const n = performance.getEntriesByType("navigation")[0];
  return {
    save_and_claim: Math.round(performance.timeOrigin - window.__flT0),
    page_server: Math.round(n.responseStart - n.requestStart),
    page_download: Math.round(n.responseEnd - n.responseStart),
    dom_ready: Math.round(n.domContentLoadedEventEnd - n.responseEnd),
  };
})()
"""


def elapsed(page) -> int:
    """The stamp the timer leaves on the new page (polled here: the page's CSP forbids wait_for_function's eval)."""
    for _ in range(600):
        value = page.evaluate("window.__flElapsed")
        if value is not None:
            return value
        page.wait_for_timeout(50)
    raise AssertionError("the next episode's form never became ready")


@pytest.fixture
def demo(codebook):
    from django.contrib.auth import get_user_model

    from annotate.ops.demo import demo_build
    from conftest import PASSWORD

    result = demo_build()
    coder = get_user_model().objects.get(username="demo-coder1")
    coder.set_password(PASSWORD)
    coder.save()
    return result.study


def test_it_measures_ctrl_enter_to_the_next_episode_ready(page, live_server, login, shot, demo):
    from annotate.models import Coding
    from tests.browser.conftest import SCREENSHOTS

    page.set_default_timeout(30_000)  # a busy machine must not fail a measurement
    page.add_init_script(TIMER)
    login("demo-coder1")
    page.goto(f"{live_server.url}/studies/demo/next/")  # a GET claims nothing: it offers the button that does
    page.get_by_role("button", name=re.compile("Code next episode")).click()
    expect(page).to_have_url(re.compile(r"/episodes/\d+/code/$"))
    page.goto(page.url)  # once more: the first load warms the server's caches and the browser's
    samples, seen, phases = [], [], []
    for _ in range(12):
        episode = int(re.search(r"/episodes/(\d+)/code/", page.url).group(1))
        seen.append(episode)
        page.locator("#type-filter").fill("TUS-03")
        page.locator("#type-filter").press("Enter")
        expect(page.locator("#failure_type")).to_have_value("TUS-03")
        page.keyboard.press("Control+Enter")
        page.wait_for_url(lambda url, episode=episode: f"/episodes/{episode}/code/" not in url)
        if not re.search(r"/episodes/\d+/code/$", page.url):
            break  # the queue is empty
        samples.append(elapsed(page))
        phases.append(page.evaluate(PHASES))
    shot("next-episode-after-timing")
    assert len(samples) >= 5, samples
    assert Coding.objects.filter(coder__username="demo-coder1", episode_id__in=seen).count() == len(seen)
    assert len(set(seen)) == len(seen)  # every Ctrl+Enter saved and moved on to a new episode
    median = statistics.median(samples)
    parts = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    (SCREENSHOTS / "next-episode-timing.json").write_text(
        json.dumps({"median_ms": median, "samples_ms": samples, "phases_median_ms": parts})
    )
    print(f"\nCtrl+Enter to the next episode's form ready, demo study: median {median:.0f} ms, samples {samples}; "
          f"medians of its parts: {parts}")  # fmt: skip
