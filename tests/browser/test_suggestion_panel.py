"""The suggestion panel in Chromium: local suggestions on the demo study, accept with `a`, save, the guard."""

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(codebook, settings):
    from django.contrib.auth import get_user_model

    from annotate.ops.demo import demo_build
    from annotate.suggestions.services import suggestions_make
    from conftest import PASSWORD

    settings.OPENAI_API_KEY = ""  # no key: the local backend, as `make run` does
    result = demo_build()
    coder = get_user_model().objects.get(username="demo-coder1")
    coder.set_password(PASSWORD)
    coder.save()
    suggestions_make(study=result.study, backend="local")
    return result.study


def _uncoded(study, username, skip=()):
    """An episode the coder has not coded whose suggestion is confident (below the threshold Accept has no key)."""
    from annotate.models import Episode

    return (
        Episode.objects.filter(
            study=study, suggestions__error="", suggestions__confidence__gte=study.suggestion_min_confidence
        )
        .exclude(codings__coder__username=username)
        .exclude(pk__in=skip)
        .order_by("id")
        .first()
    )


def test_it_shows_local_suggestions_and_accepting_with_a_then_saving_links_the_coding(
    page, live_server, login, shot, demo
):
    from annotate.models import Coding, Suggestion, SuggestionStatus

    episode = _uncoded(demo, "demo-coder1")
    suggestion = Suggestion.objects.filter(episode=episode, error="").latest("created_at")
    login("demo-coder1")
    page.goto(f"{live_server.url}/studies/demo/episodes/{episode.pk}/code/")
    panel = page.locator("#suggestion-panel")
    expect(panel.locator(".suggestion-candidate")).to_have_count(3)
    expect(panel.locator(".confidence-text").first).to_contain_text("% confidence")
    expect(panel.locator(".suggestion-candidate").first).to_contain_text(suggestion.failure_type.code)
    # The demo study is blind: the suggestion's quote is not highlighted before the coder has a type.
    expect(page.locator("#episode-text mark.suggestion-evidence")).to_have_count(0)
    shot("suggestion-panel")

    page.locator("#doc-title").click()  # focus outside any text field, as a coder reading the text
    page.keyboard.press("a")
    expect(page.locator("#from_suggestion")).to_have_value(str(suggestion.pk))
    expect(page.locator("#failure_type")).to_have_value(suggestion.failure_type.code)
    expect(page.locator(f"#source-{suggestion.source.code}")).to_be_checked()
    expect(panel.locator(".suggestion-filled")).to_contain_text("Filled the form")
    shot("suggestion-accepted")

    page.locator("#save").click()
    expect(page.locator("#coding-panel")).to_contain_text("Saved")
    coding = Coding.objects.get(episode=episode, coder__username="demo-coder1")
    suggestion.refresh_from_db()
    assert coding.from_suggestion_id == suggestion.pk
    assert coding.failure_type_id == suggestion.failure_type_id
    assert suggestion.status == SuggestionStatus.ACCEPTED


def test_the_anchoring_guard_shows_suggestions_only_after_a_first_choice(page, live_server, login, shot, demo):
    demo.suggestions_after_first_choice = True
    demo.save(update_fields=["suggestions_after_first_choice"])
    episode = _uncoded(demo, "demo-coder1")
    login("demo-coder1")
    page.goto(f"{live_server.url}/studies/demo/episodes/{episode.pk}/code/")
    panel = page.locator("#suggestion-panel")
    expect(panel).to_contain_text("Suggestions appear once you have chosen a failure type")
    expect(panel.locator(".suggestion-candidate")).to_have_count(0)
    shot("suggestion-panel-guarded")
    page.locator("#type-filter").fill("TUS-03")
    page.locator("#type-filter").press("Enter")
    expect(panel.locator(".suggestion-candidate")).to_have_count(3)
    # The panel opened because the choice was stored (a POST), which a reload keeps.
    from annotate.models import FirstChoice

    assert FirstChoice.objects.get(episode=episode, coder__username="demo-coder1").failure_type.code == "TUS-03"
    page.reload()
    expect(page.locator("#suggestion-panel .suggestion-candidate")).to_have_count(3)


def test_rejecting_marks_the_suggestion(page, live_server, login, demo):
    from annotate.models import SuggestionRejection

    episode = _uncoded(demo, "demo-coder1")
    login("demo-coder1")
    page.goto(f"{live_server.url}/studies/demo/episodes/{episode.pk}/code/")
    page.get_by_role("button", name="Reject suggestion").click()
    expect(page.locator("#suggestion-panel")).to_contain_text("Rejected")
    assert SuggestionRejection.objects.filter(suggestion__episode=episode, coder__username="demo-coder1").exists()


def test_the_study_page_starts_a_batch_and_the_quality_page_reports_it(
    page, live_server, login, shot, demo, monkeypatch
):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)  # the job runs in the server, as without a broker
    from annotate.models import Episode, Suggestion

    Suggestion.objects.filter(episode__in=Episode.objects.filter(study=demo).order_by("id")[:3]).delete()
    login("demo-coder1")
    page.goto(f"{live_server.url}/studies/demo/")
    page.get_by_role("button", name="Suggest codes for episodes without a suggestion").click()
    expect(page.locator("#suggest-job .badge")).to_contain_text("Succeeded", timeout=30_000)
    expect(page.locator("#suggest-job")).to_contain_text("suggested")
    shot("suggestion-study-button")
    # The quality report is built from everyone's codings: in a blind study it is the owner's to read.
    expect(page.get_by_role("link", name="Suggestions")).to_have_count(0)
    from django.contrib.auth import get_user_model

    from conftest import PASSWORD

    owner = get_user_model().objects.get(username="demo-owner")
    owner.set_password(PASSWORD)
    owner.save()
    page.context.clear_cookies()
    login("demo-owner")
    page.goto(f"{live_server.url}/studies/demo/")
    page.get_by_role("link", name="Suggestions").click()
    expect(page.get_by_role("heading", name="Suggestion quality")).to_be_visible()
    expect(page.locator("caption", has_text="Calibration of the top-1 type").first).to_be_visible()
    shot("suggestion-quality")
