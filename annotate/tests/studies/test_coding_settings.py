"""The owner's coding settings page and service."""

from __future__ import annotations

import pytest

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Episode, EpisodeStatus

SETTINGS = {"coders_per_episode": "3", "blind": "", "queue_order": "import", "queue_splits": ["primary", "holdout"],
            "suggestions_after_first_choice": "on"}  # fmt: skip


def test_the_owner_changes_the_coding_settings(client, alice, study):
    client.force_login(alice)
    page = client.get("/studies/alpha/settings/coding/").content.decode()
    assert 'name="coders_per_episode"' in page and str(study.queue_seed) in page
    response = client.post("/studies/alpha/settings/coding/", SETTINGS)
    assert response.status_code == 302
    study.refresh_from_db()
    assert (study.coders_per_episode, study.blind, study.queue_order) == (3, False, "import")
    assert study.queue_splits == ["primary", "holdout"] and study.suggestions_after_first_choice


def test_a_new_k_rederives_the_episode_statuses(client, alice, bob, study, make_episode, codes):
    values = CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("llm"),
                          stage=codes.stage("setup"), capability=codes.capability("memory"))  # fmt: skip
    ep = make_episode(study)
    coding_save(episode=ep, coder=alice, values=values, version=None)
    coding_save(episode=ep, coder=bob, values=values, version=None)
    assert Episode.objects.get().status == EpisodeStatus.CODED
    client.force_login(alice)
    client.post("/studies/alpha/settings/coding/", SETTINGS)
    assert Episode.objects.get().status == EpisodeStatus.OPEN
    client.post("/studies/alpha/settings/coding/", {**SETTINGS, "coders_per_episode": "1"})
    assert Episode.objects.get().status == EpisodeStatus.CODED


@pytest.mark.parametrize(
    ("field", "value"),
    [("coders_per_episode", "0"), ("coders_per_episode", "x"), ("queue_order", "alphabetical"), ("queue_splits", [])],
)
def test_bad_settings_are_refused_with_a_field_error(client, alice, study, field, value):
    client.force_login(alice)
    response = client.post("/studies/alpha/settings/coding/", {**SETTINGS, field: value})
    assert response.status_code == 400 and "Not saved" in response.content.decode()
    study.refresh_from_db()
    assert study.coders_per_episode == 2 and study.queue_order == "random"
