"""Suggestion pages: the batch button, the coding page's panel and its anchoring guard, reject, quality."""

from __future__ import annotations

import json

import pytest

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Coding, FirstChoice, Job, Suggestion, SuggestionStatus
from annotate.suggestions.services import suggestions_make
from conftest import PASSWORD

BODY = (
    "The agent kept calling the search API and got HTTP 429 Too Many Requests. "
    "It did not back off and the run failed after the provider throttled it."
)


@pytest.fixture
def login(client):
    def as_user(user):
        client.login(username=user.username, password=PASSWORD)
        return client

    return as_user


@pytest.fixture
def eager_jobs(monkeypatch):
    """Run jobs in-process, as without a broker, even when CI configures Redis."""
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


@pytest.fixture
def suggested(study, make_episode):
    ep = make_episode(study, title="Throttled", body=BODY)
    suggestions_make(study=study, backend="local")
    return ep, Suggestion.objects.get(episode=ep)


def test_it_starts_a_batch_from_the_study_page(
    study, make_episode, bob, vera, login, django_capture_on_commit_callbacks, eager_jobs
):
    make_episode(study, body=BODY)
    page = login(bob).get(f"/studies/{study.slug}/")
    assert b"Suggest codes for episodes without a suggestion" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        r = login(bob).post(f"/studies/{study.slug}/suggestions/run/", HTTP_HX_REQUEST="true")
    job = Job.objects.get(kind="suggest")
    assert r.status_code == 200 and f'id="job-{job.pk}"'.encode() in r.content
    assert job.params["backend"] == "local" and Suggestion.objects.count() == 1  # eager Celery ran it
    assert "refresh" not in job.params
    with django_capture_on_commit_callbacks(execute=True):
        login(bob).post(f"/studies/{study.slug}/suggestions/run/", {"refresh": "1"}, HTTP_HX_REQUEST="true")
    assert Job.objects.filter(kind="suggest").latest("pk").params["refresh"] is True
    plain = login(bob).post(f"/studies/{study.slug}/suggestions/run/")
    assert plain.status_code == 302 and plain["Location"].startswith("/jobs/")
    assert login(vera).post(f"/studies/{study.slug}/suggestions/run/").status_code == 403
    assert b"Suggest codes" not in login(vera).get(f"/studies/{study.slug}/").content


def test_it_refuses_a_retrain_below_the_minimum_with_a_clear_message(
    study, bob, login, django_capture_on_commit_callbacks, eager_jobs
):
    with django_capture_on_commit_callbacks(execute=True):
        r = login(bob).post(f"/studies/{study.slug}/suggestions/retrain/", HTTP_HX_REQUEST="true")
    job = Job.objects.get(kind="retrain")
    assert r.status_code == 200 and job.status == "failed" and "needs 30" in job.error
    page = login(bob).get(f"/jobs/{job.pk}/").content.decode()
    assert "needs 30" in page


def test_it_shows_the_top_three_with_confidence_text_and_an_accept_that_fills_the_form(suggested, study, bob, login):
    ep, s = suggested
    r = login(bob).get(f"/studies/{study.slug}/episodes/{ep.pk}/suggestions/", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and html.count('class="suggestion-candidate"') == 3
    assert "% confidence" in html and "<meter" in html and s.failure_type.code in html
    fill = json.loads(_attr(html, "data-fill"))
    assert fill["from_suggestion"] == s.pk and fill["failure_type"] == s.failure_type.code
    assert fill["source"] == s.source.code and fill["evidence"] == s.evidence


def _attr(html: str, name: str) -> str:
    import html as h

    start = html.index(f'{name}="') + len(name) + 2
    return h.unescape(html[start : html.index('"', start)])


def test_a_trace_suggestions_accept_fills_its_decisive_step_and_agent_too(suggested, study, bob, login):
    ep, s = suggested
    url = f"/studies/{study.slug}/episodes/{ep.pk}/suggestions/"
    plain = login(bob).get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "decisive_step" not in json.loads(_attr(plain, "data-fill")) and "suggestion-attribution" not in plain
    s.decisive_step, s.responsible_agent = 4, "WebSurfer"
    s.save(update_fields=["decisive_step", "responsible_agent"])
    html = login(bob).get(url, HTTP_HX_REQUEST="true").content.decode()
    fills = [json.loads(_attr(part, "data-fill")) for part in html.split('class="suggestion-candidate"')[1:]]
    assert len(fills) == 3
    assert all((f["decisive_step"], f["responsible_agent"]) == (4, "WebSurfer") for f in fills)
    assert "Suggested attribution: step #4" in html


def test_a_suggested_step_shows_even_when_the_type_suggestion_is_unconfident(suggested, study, bob, login):
    ep, s = suggested
    s.decisive_step, s.responsible_agent = 7, "Orchestrator"
    s.save(update_fields=["decisive_step", "responsible_agent"])
    study.suggestion_min_confidence = 0.99  # no type candidate clears it
    study.save(update_fields=["suggestion_min_confidence"])
    html = login(bob).get(f"/studies/{study.slug}/episodes/{ep.pk}/suggestions/", HTTP_HX_REQUEST="true").content
    html = html.decode()
    assert "No confident suggestion" in html
    assert "Suggested attribution: step #7" in html and "Orchestrator" in html
    # Its own Accept fills only the step and agent: the type stays the coder's, unlinked to the suggestion.
    step_button = html[html.index("suggestion-accept-step") :]
    assert json.loads(_attr(step_button, "data-fill")) == {"decisive_step": 7, "responsible_agent": "Orchestrator"}


def test_the_panel_is_for_members_who_code(suggested, study, vera, charlie, login):
    ep, _ = suggested
    url = f"/studies/{study.slug}/episodes/{ep.pk}/suggestions/"
    assert login(vera).get(url).status_code == 403
    assert login(charlie).get(url).status_code == 404


def test_the_anchoring_guard_keeps_suggestions_out_of_the_page_until_a_type_is_chosen(suggested, study, bob, login):
    ep, s = suggested
    study.suggestions_after_first_choice = True
    study.save(update_fields=["suggestions_after_first_choice"])
    page = login(bob).get(f"/studies/{study.slug}/episodes/{ep.pk}/code/").content.decode()
    panel = page[page.index('id="suggestion-panel"') : page.index("</section>", page.index('id="suggestion-panel"'))]
    assert "data-guard-note" in panel and "suggestion-candidate" not in panel and "hx-trigger" not in panel
    url = f"/studies/{study.slug}/episodes/{ep.pk}/suggestions/"
    hidden = login(bob).get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "data-guard-note" in hidden and "suggestion-candidate" not in hidden
    # A type named in the URL is not a choice: only the stored first choice (a POST) opens the panel.
    named = login(bob).get(url + "?chosen=TUS-03", HTTP_HX_REQUEST="true").content.decode()
    assert "data-guard-note" in named and "suggestion-candidate" not in named
    assert not FirstChoice.objects.exists()  # a GET records nothing
    shown = login(bob).post(url + "first-choice/", {"failure_type": "TUS-03"}, HTTP_HX_REQUEST="true")
    assert shown.status_code == 200
    assert "suggestion-candidate" in shown.content.decode() and s.failure_type.code in shown.content.decode()
    assert FirstChoice.objects.get(episode=ep, coder=bob).failure_type.code == "TUS-03"
    again = login(bob).get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "suggestion-candidate" in again


def test_without_the_guard_the_coding_page_loads_the_panel_at_once(suggested, study, bob, login):
    ep, _ = suggested
    page = login(bob).get(f"/studies/{study.slug}/episodes/{ep.pk}/code/").content.decode()
    assert f'hx-get="/studies/{study.slug}/episodes/{ep.pk}/suggestions/"' in page
    assert "js/suggestions.js" in page


def test_it_rejects_a_suggestion(suggested, study, bob, charlie, login):
    ep, s = suggested
    r = login(bob).post(f"/studies/{study.slug}/suggestions/{s.pk}/reject/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and s.rejections.get().coder == bob
    assert "Rejected" in r.content.decode() and "Reject suggestion" not in r.content.decode()
    plain = login(bob).post(f"/studies/{study.slug}/suggestions/{s.pk}/reject/")
    assert plain.status_code == 302 and plain["Location"] == f"/studies/{study.slug}/episodes/{ep.pk}/code/"
    assert login(charlie).post(f"/studies/{study.slug}/suggestions/{s.pk}/reject/").status_code == 404


def test_saving_the_form_filled_from_a_suggestion_links_the_coding(suggested, study, bob, login):
    ep, s = suggested
    client = login(bob)
    client.get(f"/studies/{study.slug}/episodes/{ep.pk}/code/")  # takes the lease, as a coder would
    data = {
        "failure_type": s.failure_type.code,
        "source": s.source.code,
        "stage": s.stage.code,
        "capability": s.capability.code,
        "confidence": "medium",
        "evidence": s.evidence,
        "version": "",
        "from_suggestion": s.pk,
    }
    r = client.post(f"/studies/{study.slug}/episodes/{ep.pk}/code/", data)
    assert r.status_code == 302, r.content.decode()[:2000]
    coding = Coding.objects.get(episode=ep, coder=bob)
    s.refresh_from_db()
    assert coding.from_suggestion == s and s.status == SuggestionStatus.ACCEPTED and coding.evidence == s.evidence


def test_the_quality_page_reports_each_backend(suggested, study, bob, alice, vera, charlie, codes, login):
    ep, s = suggested
    values = CodingValues(failure_type=s.failure_type, source=s.source, stage=s.stage, capability=s.capability)
    coding_save(episode=ep, coder=bob, values=values, version=None, from_suggestion=s)
    coding_save(episode=ep, coder=alice, values=values, version=None)
    html = login(vera).get(f"/studies/{study.slug}/suggestions/").content.decode()
    assert "codebook-tfidf" in html and "Calibration of the top-1 type" in html and "100%" in html
    assert "Suggest codes for episodes" not in html  # viewers cannot start batches
    assert login(charlie).get(f"/studies/{study.slug}/suggestions/").status_code == 404


def _after_arm(study, coder) -> None:
    """Put `coder`'s next episode of the exposure experiment in the `after` arm (suggestions wait for a choice)."""
    from annotate.coding.exposure import exposure_arm

    study.queue_seed = next(seed for seed in range(100) if exposure_arm(seed, coder.pk, 0) == "after")
    study.exposure_experiment = True
    study.save(update_fields=["queue_seed", "exposure_experiment"])


def test_in_the_after_arm_a_made_up_choice_does_not_show_suggestions(suggested, study, bob, login):
    ep, s = suggested
    _after_arm(study, bob)
    url = f"/studies/{study.slug}/episodes/{ep.pk}/suggestions/"
    for made_up in ("1", "true", "NOT-A-TYPE", "", "TUS-03"):  # a real code in the URL is no choice either
        html = login(bob).get(url, {"chosen": made_up}, HTTP_HX_REQUEST="true").content.decode()
        assert "data-guard-note" in html and "suggestion-candidate" not in html, made_up
    for made_up in ("1", "NOT-A-TYPE", ""):
        r = login(bob).post(url + "first-choice/", {"failure_type": made_up}, HTTP_HX_REQUEST="true")
        assert r.status_code == 400 and "suggestion-candidate" not in r.content.decode(), made_up
        assert "is not a failure type of this study" in r.content.decode()
    assert not FirstChoice.objects.exists()
    shown = login(bob).post(url + "first-choice/", {"failure_type": "TUS-03"}, HTTP_HX_REQUEST="true")
    assert "suggestion-candidate" in shown.content.decode() and s.failure_type.code in shown.content.decode()
    # The first choice stands: a second one is not recorded over it.
    login(bob).post(url + "first-choice/", {"failure_type": s.failure_type.code}, HTTP_HX_REQUEST="true")
    assert FirstChoice.objects.get(episode=ep, coder=bob).failure_type.code == "TUS-03"


def test_a_first_choice_is_the_coders_own_and_needs_write_access(suggested, study, bob, alice, vera, charlie, login):
    ep, _ = suggested
    _after_arm(study, bob)
    url = f"/studies/{study.slug}/episodes/{ep.pk}/suggestions/first-choice/"
    assert login(vera).post(url, {"failure_type": "TUS-03"}).status_code == 403
    assert login(charlie).post(url, {"failure_type": "TUS-03"}).status_code == 404
    assert login(bob).get(url).status_code == 405
    plain = login(bob).post(url, {"failure_type": "TUS-03"})
    assert plain.status_code == 302 and plain["Location"] == f"/studies/{study.slug}/episodes/{ep.pk}/code/"
    assert list(FirstChoice.objects.values_list("coder_id", flat=True)) == [bob.pk]


def test_in_the_after_arm_a_reject_before_choosing_neither_rejects_nor_shows(suggested, study, bob, login):
    _, s = suggested
    _after_arm(study, bob)
    r = login(bob).post(f"/studies/{study.slug}/suggestions/{s.pk}/reject/", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 400 and "suggestion-candidate" not in html and "data-guard-note" in html
    assert not s.rejections.exists()
    named = login(bob).post(
        f"/studies/{study.slug}/suggestions/{s.pk}/reject/", {"chosen": "TUS-03"}, HTTP_HX_REQUEST="true"
    )
    assert named.status_code == 400 and not s.rejections.exists()  # naming a type is no choice
    login(bob).post(
        f"/studies/{study.slug}/episodes/{s.episode_id}/suggestions/first-choice/", {"failure_type": "TUS-03"}
    )
    chosen = login(bob).post(f"/studies/{study.slug}/suggestions/{s.pk}/reject/", HTTP_HX_REQUEST="true")
    assert chosen.status_code == 200 and s.rejections.filter(coder=bob).exists()


def test_a_rejection_is_the_coders_own(suggested, study, alice, bob, codes, login, django_user_model):
    from annotate.models import Role
    from annotate.studies.services import membership_set

    ep, s = suggested
    carol = django_user_model.objects.create_user(username="carol", password=PASSWORD)
    membership_set(study=study, user=carol, role=Role.CODER)
    url = f"/studies/{study.slug}/episodes/{ep.pk}/suggestions/"
    rejected = login(bob).post(f"/studies/{study.slug}/suggestions/{s.pk}/reject/", HTTP_HX_REQUEST="true")
    assert "Rejected" in rejected.content.decode() and "Reject suggestion" not in rejected.content.decode()
    carols = login(carol).get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "Reject suggestion" in carols and "✗" not in carols  # Bob's reject is Bob's
    bobs = login(bob).get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "Reject suggestion" not in bobs and "✗ Rejected" in bobs
    login(carol).post(f"/studies/{study.slug}/suggestions/{s.pk}/reject/", HTTP_HX_REQUEST="true")
    s.refresh_from_db()
    assert s.status == SuggestionStatus.PENDING  # nothing is decided for the whole study
    assert sorted(s.rejections.values_list("coder__username", flat=True)) == ["bob", "carol"]
    assert all(r.created_at for r in s.rejections.all())  # when, and who: the audit trail


def test_the_quality_report_counts_a_suggestion_rejected_by_anyone_as_rejected(suggested, study, bob, login):
    from annotate.suggestions.quality import suggestion_quality

    _, s = suggested
    login(bob).post(f"/studies/{study.slug}/suggestions/{s.pk}/reject/", HTTP_HX_REQUEST="true")
    (backend,) = suggestion_quality(study).backends
    assert (backend.rejected, backend.pending, backend.rejection_rate) == (1, 0, 1.0)
