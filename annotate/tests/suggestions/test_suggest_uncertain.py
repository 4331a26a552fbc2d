"""Unconfident suggestions on the coding page, and the `uncertain` queue order (active learning)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotate.coding.queue import episode_next
from annotate.models import QueueOrder, Suggestion
from conftest import PASSWORD

pytestmark = pytest.mark.django_db


def _suggest(ep, codes, confidence, *, abstain=""):
    cand = {
        "failure_type": "EXT-02", "source": "tool_service", "stage": "iterative_execution",
        "capability": "actuation", "confidence": confidence, "rationale": "r", "evidence": "",
    }  # fmt: skip
    return Suggestion.objects.create(
        episode=ep, backend="local", model="m", prompt_version="p", cache_key=f"k{ep.pk}",
        failure_type=None if abstain else codes.type("EXT-02"),
        source=None if abstain else codes.source("tool_service"),
        stage=None if abstain else codes.stage("iterative_execution"),
        capability=None if abstain else codes.capability("actuation"),
        confidence=None if abstain else confidence, candidates=[] if abstain else [cand], abstain_reason=abstain,
    )  # fmt: skip


def _panel(client, study, ep) -> str:
    return client.get(reverse("suggestion_panel", args=[study.slug, ep.pk])).content.decode()


def test_below_the_threshold_the_panel_says_no_confident_suggestion_and_has_no_default_accept(
    study, make_episode, codes, bob, client
):
    client.login(username=bob.username, password=PASSWORD)
    low, high = make_episode(study), make_episode(study)
    _suggest(low, codes, 0.12)
    _suggest(high, codes, 0.85)
    page = _panel(client, study, low)
    assert "No confident suggestion." in page and "below this study's threshold of 30%" in page
    assert '<details class="suggestion-folded">' in page and 'data-confident="0"' in page
    assert "suggestion-accept primary" not in page and "<kbd>a</kbd>" not in page
    page = _panel(client, study, high)
    assert "No confident suggestion." not in page and "suggestion-accept primary" in page and "<kbd>a</kbd>" in page
    study.suggestion_min_confidence = 0.9  # the threshold is the study's setting
    study.save(update_fields=["suggestion_min_confidence"])
    assert "No confident suggestion." in _panel(client, study, high)


def test_a_declined_suggestion_says_why_and_offers_nothing_to_accept(study, make_episode, codes, bob, client):
    client.login(username=bob.username, password=PASSWORD)
    ep = make_episode(study)
    _suggest(ep, codes, None, abstain="the text is in a language the local model does not read")
    page = _panel(client, study, ep)
    assert "The suggester declined: the text is in a language the local model does not read." in page
    assert "suggestion-accept" not in page


def test_the_owner_sets_the_threshold_and_the_experiment_in_the_coding_settings(study, alice, client):
    client.login(username=alice.username, password=PASSWORD)
    url = reverse("study_coding_settings", args=[study.slug])
    data = {
        "coders_per_episode": 2, "blind": "on", "queue_order": "uncertain", "queue_splits": ["primary"],
        "exposure_experiment": "on", "suggestion_min_confidence": "0.45",
    }  # fmt: skip
    assert client.post(url, data).status_code == 302
    study.refresh_from_db()
    assert study.exposure_experiment and study.suggestion_min_confidence == 0.45
    assert study.queue_order == QueueOrder.UNCERTAIN
    bad = client.post(url, {**data, "suggestion_min_confidence": "1.5"})
    assert bad.status_code == 400
    study.refresh_from_db()
    assert study.suggestion_min_confidence == 0.45


def test_the_uncertain_order_serves_the_least_confident_suggestion_first(study, make_episode, codes, bob):
    study.queue_order = QueueOrder.UNCERTAIN
    study.save(update_fields=["queue_order"])
    unsuggested = make_episode(study)
    sure, unsure, middling = make_episode(study), make_episode(study), make_episode(study)
    _suggest(sure, codes, 0.95)
    _suggest(unsure, codes, 0.05)
    _suggest(middling, codes, 0.4)
    served, skipped = [], set()
    for _ in range(4):
        ep = episode_next(study=study, coder=bob, skipped=skipped)
        served.append(ep.pk)
        skipped.add(ep.pk)
        from annotate.coding.queue import lease_release

        lease_release(episode=ep, coder=bob)
    assert served == [unsure.pk, middling.pk, sure.pk, unsuggested.pk]
