"""Who may code, adjudicate and change coding settings: viewers cannot code, coders cannot adjudicate,
non-members get 404 everywhere (the study's existence is not revealed)."""

from __future__ import annotations

import pytest

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Adjudication, Coding, Lease
from annotate.studies.services import membership_set

CODE = {"failure_type": "TUS-03", "source": "llm", "stage": "setup", "capability": "memory", "confidence": "low"}


@pytest.fixture
def ep(study, make_episode):
    return make_episode(study)


def routes(ep):
    return {
        "next": ("get", "/studies/alpha/next/"),
        "code": ("get", f"/studies/alpha/episodes/{ep.pk}/code/"),
        "save": ("post", f"/studies/alpha/episodes/{ep.pk}/code/"),
        "skip": ("post", f"/studies/alpha/episodes/{ep.pk}/skip/"),
        "episode": ("get", f"/studies/alpha/episodes/{ep.pk}/"),
        "adjudication list": ("get", "/studies/alpha/adjudicate/"),
        "adjudicate": ("get", f"/studies/alpha/episodes/{ep.pk}/adjudicate/"),
        "adjudicate post": ("post", f"/studies/alpha/episodes/{ep.pk}/adjudicate/"),
        "settings": ("get", "/studies/alpha/settings/coding/"),
        "settings post": ("post", "/studies/alpha/settings/coding/"),
    }


def call(client, method, url):
    return getattr(client, method)(url, CODE if method == "post" else None)


def test_a_non_member_gets_404_everywhere(client, charlie, ep):
    client.force_login(charlie)
    for name, (method, url) in routes(ep).items():
        assert call(client, method, url).status_code == 404, name


def test_an_episode_of_another_study_is_404(client, alice, study, other_study, make_episode):
    foreign = make_episode(other_study)
    client.force_login(alice)  # may do everything in alpha, but this episode is Charlie's
    for name, (method, url) in routes(foreign).items():
        if "/episodes/" in url:
            assert call(client, method, url).status_code == 404, name


def test_a_viewer_cannot_code(client, vera, ep):
    client.force_login(vera)
    for name in ("next", "code", "save", "skip"):
        method, url = routes(ep)[name]
        assert call(client, method, url).status_code == 403, name
    assert not Coding.objects.exists() and not Lease.objects.exists()
    assert client.get(routes(ep)["episode"][1]).status_code == 200  # but may read


def test_a_coder_cannot_adjudicate_or_change_settings(client, bob, ep):
    client.force_login(bob)
    for name in ("adjudication list", "adjudicate", "adjudicate post", "settings", "settings post"):
        method, url = routes(ep)[name]
        assert call(client, method, url).status_code == 403, name
    assert not Adjudication.objects.exists()


def test_a_coder_with_the_adjudicator_duty_adjudicates_complete_episodes_only(
    client, alice, bob, study, ep, make_episode, codes
):
    membership_set(study=study, user=bob, role="coder", adjudicator=True)
    values = CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("llm"),
                          stage=codes.stage("setup"), capability=codes.capability("memory"))  # fmt: skip
    coding_save(episode=ep, coder=alice, values=values, version=None)
    client.force_login(bob)
    assert client.get("/studies/alpha/adjudicate/").status_code == 200
    # Still blind: one coding, and Bob has not coded it.
    assert client.get(f"/studies/alpha/episodes/{ep.pk}/adjudicate/").status_code == 403
    other = make_episode(study)
    coding_save(episode=other, coder=alice, values=values, version=None)
    coding_save(episode=other, coder=study.memberships.get(role="viewer").user, values=values, version=None)
    assert client.get(f"/studies/alpha/episodes/{other.pk}/adjudicate/").status_code == 200


def test_an_anonymous_user_is_sent_to_log_in(client, ep):
    for name, (method, url) in routes(ep).items():
        response = call(client, method, url)
        assert response.status_code == 302 and response.url.startswith("/login/"), name
