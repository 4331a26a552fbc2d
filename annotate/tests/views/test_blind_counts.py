"""Blinding on the documents list and the overview: a blind coder's "coded" is what the visibility rule shows them."""

from __future__ import annotations

import re

import pytest

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Role
from annotate.studies.services import membership_set


@pytest.fixture
def two_coded(study, bob, make_episode, codes, django_user_model):
    """Carol (another coder) coded `theirs`; Bob coded `his`; `untouched` has no coding."""
    carol = django_user_model.objects.create_user(username="carol", password="x")
    membership_set(study=study, user=carol, role=Role.CODER)
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    theirs, his, untouched = make_episode(study), make_episode(study), make_episode(study)
    coding_save(episode=theirs, coder=carol, values=values, version=None)
    coding_save(episode=his, coder=bob, values=values, version=None)
    return theirs, his, untouched


def _listed(client, **query) -> list[int]:
    html = client.get("/studies/alpha/documents/", query).content.decode()
    return sorted(int(pk) for pk in re.findall(r'<a href="/studies/alpha/documents/(\d+)/">', html))


def _coded_badges(client) -> int:
    html = client.get("/studies/alpha/documents/").content.decode()
    return sum(int(n) for n in re.findall(r'<span class="badge ok">(\d+) coded</span>', html))


def test_a_blind_coder_sees_only_their_own_coding_as_coded(client, study, bob, two_coded):
    theirs, his, untouched = two_coded
    client.force_login(bob)
    assert _coded_badges(client) == 1  # his own; Carol's coding is not revealed by a badge
    assert _listed(client, coded="coded") == [his.document_id]
    assert _listed(client, coded="uncoded") == sorted([theirs.document_id, untouched.document_id])
    counts = client.get("/studies/alpha/").context["counts"]
    assert (counts.coded, counts.complete) == (1, 0)
    assert "data-blind-counts" in client.get("/studies/alpha/").content.decode()


def test_owners_and_viewers_see_every_coding(client, study, alice, vera, two_coded):
    theirs, his, untouched = two_coded
    for user in (alice, vera):
        client.force_login(user)
        assert _coded_badges(client) == 2
        assert _listed(client, coded="coded") == sorted([theirs.document_id, his.document_id])
        assert _listed(client, coded="uncoded") == [untouched.document_id]
        assert client.get("/studies/alpha/").context["counts"].coded == 2


def test_an_adjudicator_also_sees_complete_episodes(client, study, bob, two_coded):
    theirs, his, _ = two_coded
    study.coders_per_episode = 1  # Carol's coding completes `theirs`
    study.save(update_fields=["coders_per_episode"])
    study.memberships.filter(user=bob).update(adjudicator=True)
    client.force_login(bob)
    assert _listed(client, coded="coded") == sorted([theirs.document_id, his.document_id])
    counts = client.get("/studies/alpha/").context["counts"]
    assert (counts.coded, counts.complete) == (2, 2)


def test_an_open_study_shows_every_coder_all_progress(client, study, bob, two_coded):
    study.blind = False
    study.save(update_fields=["blind"])
    client.force_login(bob)
    assert _coded_badges(client) == 2


def test_a_blind_coder_gets_no_study_wide_codings_histogram(client, study, bob, alice, two_coded):
    client.force_login(bob)
    page = client.get("/studies/alpha/")
    assert page.context["progress"].buckets == [] and "Episodes by number of codings" not in page.content.decode()
    client.force_login(alice)
    page = client.get("/studies/alpha/")
    assert dict(page.context["progress"].buckets) == {"0": 1, "1": 2, "2": 0}
