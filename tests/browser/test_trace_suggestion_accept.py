"""Accepting a suggestion on a trace episode fills the attribution too: the decisive step and the responsible
agent the suggester proposed, with that step selected in the trace viewer, by the key `a` and by the button."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import expect

from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WHO = Path(django_settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")


def _open(page, live_server, login, episode):
    page.set_default_timeout(30_000)  # a loaded 2-core machine: the first requests can be slow
    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/episodes/{episode.pk}/code/")
    expect(page.locator("#suggestion-panel .suggestion-candidate").first).to_be_visible()
    # Nothing attributed yet: whatever is in the fields afterwards came from the accept.
    expect(page.locator("#decisive_step")).to_have_value("")
    expect(page.locator("#responsible_agent")).to_have_value("")


def _saved(page, episode, suggestion):
    from annotate.models import Coding

    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Saved (version 1)")).to_be_visible()
    coding = Coding.objects.get(episode=episode, coder__username="bob")
    assert coding.from_suggestion_id == suggestion.pk
    assert (coding.decisive_step, coding.responsible_agent) == (suggestion.decisive_step, suggestion.responsible_agent)
    return coding


def test_it_fills_the_local_suggesters_step_and_agent_when_a_is_pressed(
    page, live_server, login, shot, study, bob, settings
):
    from annotate.models import Suggestion
    from annotate.suggestions.services import suggestions_make
    from annotate.traces.services import import_traces

    settings.OPENAI_API_KEY = ""  # the local backend, which proposes a step and an agent for traces
    import_traces(study=study, paths=[WHO / "Algorithm-Generated"], fmt="whowhen")
    suggestions_make(study=study, backend="local")
    # The shortcut needs a confident suggestion; the cold local model is not, so let every one count.
    study.suggestion_min_confidence = 0.0
    study.save(update_fields=["suggestion_min_confidence"])
    suggestion = (
        Suggestion.objects.filter(episode__study=study, error="", decisive_step__gt=0)
        .exclude(responsible_agent="")
        .select_related("episode__document", "failure_type")
        .order_by("episode_id")
        .first()
    )
    assert suggestion is not None, "the local backend proposed no step beyond the first for any Who&When log"
    episode = suggestion.episode
    assert study.blind and episode.reference  # a blind study, and a log with a published attribution

    _open(page, live_server, login, episode)
    expect(page.locator("#reference-hidden")).to_be_visible()  # blind: the published attribution waits
    expect(page.locator("#suggestion-panel .suggestion-attribution")).to_contain_text(
        f"step #{suggestion.decisive_step}"
    )
    page.locator("#doc-title").click()  # focus outside any text field, as a coder reading
    page.keyboard.press("a")
    expect(page.locator("#failure_type")).to_have_value(suggestion.failure_type.code)
    expect(page.locator("#decisive_step")).to_have_value(str(suggestion.decisive_step))
    expect(page.locator("#responsible_agent")).to_have_value(suggestion.responsible_agent)
    step = page.locator(f"#step-{suggestion.decisive_step}")
    expect(step).to_have_class(re.compile(r"\bis-decisive\b"))
    expect(step).to_have_class(re.compile(r"\bis-current\b"))
    expect(step).to_be_in_viewport()
    shot("trace-suggestion-accepted")
    _saved(page, episode, suggestion)


def test_the_accept_button_fills_a_step_beyond_the_first_window_and_selects_it(
    page, live_server, login, study, bob, codes
):
    from annotate.models import Episode, Suggestion, TraceStep
    from annotate.traces.services import import_traces

    import_traces(study=study, paths=[WHO / "Hand-Crafted" / "8.json"], fmt="whowhen")
    episode = Episode.objects.select_related("document").get(study=study)
    assert episode.document.meta["trace"]["steps"] > 100  # the first screen holds 40 steps
    step = TraceStep.objects.get(document=episode.document, index=100)
    agent = "Orchestrator" if step.agent != "Orchestrator" else "WebSurfer"  # not the step's own: kept as suggested
    t = codes.type("TUS-03")
    candidate = {
        "failure_type": t.code,
        "source": codes.source("agent_design").code,
        "stage": codes.stage("iterative_execution").code,
        "capability": codes.capability("actuation").code,
        "confidence": 0.9,
        "rationale": "",
        "evidence": "",
    }
    suggestion = Suggestion.objects.create(
        episode=episode,
        backend="local",
        model="test",
        prompt_version="test",
        failure_type=t,
        source=codes.source("agent_design"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
        confidence=0.9,
        candidates=[candidate],
        decisive_step=100,
        responsible_agent=agent,
        cache_key="test",
    )

    _open(page, live_server, login, episode)
    expect(page.locator("#step-100")).to_have_count(0)
    page.locator("#suggestion-panel .suggestion-accept").first.click()
    expect(page.locator("#decisive_step")).to_have_value("100")
    expect(page.locator("#responsible_agent")).to_have_value(agent)
    expect(page.locator("#step-100")).to_have_class(re.compile(r"\bis-current\b"))
    expect(page.locator("#step-100")).to_have_class(re.compile(r"\bis-decisive\b"))
    expect(page.locator("#step-100")).to_be_in_viewport()
    _saved(page, episode, suggestion)


def test_an_unconfident_type_suggestion_still_shows_its_step_whose_own_accept_fills_only_the_step(
    page, live_server, login, shot, study, bob, codes
):
    from annotate.models import Episode, Suggestion
    from annotate.traces.services import import_traces

    import_traces(study=study, paths=[WHO / "Hand-Crafted" / "3.json"], fmt="whowhen")
    episode = Episode.objects.get(study=study)
    t = codes.type("TUS-03")
    axes = {
        "source": codes.source("agent_design"),
        "stage": codes.stage("iterative_execution"),
        "capability": codes.capability("actuation"),
    }
    candidate = {"failure_type": t.code, **{k: v.code for k, v in axes.items()}, "confidence": 0.12}
    Suggestion.objects.create(
        episode=episode, backend="local", model="test", prompt_version="test", failure_type=t, **axes,
        confidence=0.12, candidates=[candidate | {"rationale": "", "evidence": ""}], decisive_step=5,
        responsible_agent="WebSurfer", cache_key="test",
    )  # fmt: skip
    assert study.suggestion_min_confidence > 0.12  # the type suggestion is below the study's threshold

    page.set_viewport_size({"width": 1366, "height": 768})
    page.set_default_timeout(30_000)
    login("bob")
    page.goto(f"{live_server.url}/studies/alpha/episodes/{episode.pk}/code/")
    panel = page.locator("#suggestion-panel")
    expect(panel.locator(".suggestion-unsure")).to_be_visible()
    expect(panel.locator(".suggestion-attribution")).to_contain_text("step #5")
    expect(panel.locator(".suggestion-candidate").first).not_to_be_visible()  # the type stays folded away
    panel.get_by_role("button", name="Accept step and agent").click()
    expect(page.locator("#decisive_step")).to_have_value("5")
    expect(page.locator("#responsible_agent")).to_have_value("WebSurfer")
    expect(page.locator("#failure_type")).to_have_value("")  # the type is left to the coder
    expect(page.locator("#step-5")).to_have_class(re.compile(r"\bis-decisive\b"))
    from tests.browser.conftest import SCREENSHOTS

    shot("trace-step-suggestion-unconfident-1366")
    page.set_viewport_size({"width": 390, "height": 844})
    panel.scroll_into_view_if_needed()
    screenshot(panel, SCREENSHOTS / "trace-step-suggestion-unconfident-390.png")
