"""One coding path: the coding page and the API save through the same service, with the same refusals.

Each refusal the page gives is replayed through POST /api/v1/studies/{slug}/codings/ and must get the
same status and leave the same stored state (no coding, no history, the existing coding unchanged).
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from annotate.coding.adjudication import AdjudicationValues, adjudication_save
from annotate.coding.queue import lease_claim
from annotate.coding.services import CodingValues, coding_save
from annotate.models import Coding, Episode, Lease
from annotate.studies.services import membership_set

BODY = "The agent called the search tool 40 times with the same query and never stopped."


@pytest.fixture
def people(study, django_user_model):
    dana = django_user_model.objects.create_user("dana", password="x")
    erin = django_user_model.objects.create_user("erin", password="x")
    membership_set(study=study, user=dana, role="coder")
    membership_set(study=study, user=erin, role="coder")
    return dana, erin


def _values(codes, type_code="TUS-03"):
    return CodingValues(
        failure_type=codes.type(type_code), source=codes.source("agent_design"),
        stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"),
    )  # fmt: skip


def _state():
    rows = sorted(
        Coding.objects.values_list(
            "episode_id", "coder_id", "failure_type_id", "version", "evidence", "evidence_start", "evidence_end"
        )
    )
    return rows, Coding.history.count()


def _page(client, user, episode, **fields):
    client.force_login(user)
    data = {"failure_type": "TUS-03", "source": "agent_design", "stage": "iterative_execution",
            "capability": "actuation", "confidence": "medium", "action": "save", **fields}  # fmt: skip
    return client.post(f"/studies/alpha/episodes/{episode.pk}/code/", data).status_code


def _api(user, episode, **fields):
    client = APIClient()
    client.force_authenticate(user)
    data = {"episode": episode.pk, "failure_type": "TUS-03", "source": "agent_design",
            "stage": "iterative_execution", "capability": "actuation", **fields}  # fmt: skip
    return client.post("/api/v1/studies/alpha/codings/", data, format="json")


def _full(study, make_episode, codes, bob, people):
    ep = make_episode(study, body=BODY)
    coding_save(episode=ep, coder=bob, values=_values(codes), version=None)
    coding_save(episode=ep, coder=people[0], values=_values(codes), version=None)
    return ep, people[1]  # a third coder on a k = 2 episode


def _adjudicated(study, make_episode, codes, bob, people):
    ep, third = _full(study, make_episode, codes, bob, people)
    adjudication_save(
        episode=ep, adjudicator=study.memberships.get(role="owner").user,
        values=AdjudicationValues(failure_type=codes.type("TUS-03"), source=codes.source("agent_design"),
                                  stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"),
                                  rationale="agreed"),
    )  # fmt: skip
    assert Episode.objects.get(pk=ep.pk).status == "adjudicated"
    return ep, third


def _leased(study, make_episode, codes, bob, people):
    ep = make_episode(study, body=BODY)
    assert lease_claim(episode=ep, coder=bob) and lease_claim(episode=ep, coder=people[0])
    return ep, people[1]  # both places are held by others' live leases


@pytest.mark.parametrize("setup", [_full, _adjudicated, _leased], ids=["full", "adjudicated", "leased-by-others"])
def test_it_refuses_a_coder_beyond_k_or_after_adjudication_on_both_paths(
    setup, client, study, make_episode, codes, bob, people
):
    episode, coder = setup(study, make_episode, codes, bob, people)
    before = _state()
    assert _page(client, coder, episode) == 409
    assert _state() == before
    response = _api(coder, episode)
    assert response.status_code == 409 and response.json()["detail"]
    assert _state() == before
    # ... and the refused coder still may not see the others' codings (no second way around blinding)
    rows = APIClient()
    rows.force_authenticate(coder)
    assert rows.get("/api/v1/studies/alpha/codings/", {"episode": episode.pk}).json()["results"] == []


def test_a_stale_version_is_a_409_with_the_current_coding_on_both_paths(client, study, make_episode, codes, bob):
    episode = make_episode(study, body=BODY)
    coding = coding_save(episode=episode, coder=bob, values=_values(codes), version=None)
    coding_save(episode=episode, coder=bob, values=_values(codes, "TUS-01"), version=coding.version)
    before = _state()
    assert _page(client, bob, episode, version="1") == 409
    assert _state() == before
    response = _api(bob, episode, version=1)
    assert response.status_code == 409 and response.json()["current"]["version"] == 2
    assert response.json()["current"]["failure_type"] == "TUS-01"
    assert _state() == before


@pytest.mark.parametrize(
    "fields, api_fields",
    [
        ({"evidence": "a sentence that is not there"}, {"evidence": "a sentence that is not there"}),
        ({"failure_type": "XXX-99"}, {"failure_type": "XXX-99"}),
        ({"source": ""}, {"source": None}),
    ],
    ids=["evidence-not-in-text", "unknown-type", "missing-source"],
)
def test_bad_values_are_a_400_with_nothing_stored_on_both_paths(
    fields, api_fields, client, study, make_episode, codes, bob
):
    episode = make_episode(study, body=BODY)
    before = _state()
    assert _page(client, bob, episode, **fields) == 400
    response = _api(bob, episode, **api_fields)
    assert response.status_code == 400 and set(response.json()) & {"evidence", "failure_type", "source"}
    assert _state() == before and not Lease.objects.filter(coder=bob).exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"evidence": "search tool", "evidence_start": 4294967301, "evidence_end": 4294967312},
        {"evidence": "search tool", "evidence_start": 70, "evidence_end": 200},
        {"evidence": "search tool", "evidence_start": 0, "evidence_end": 11},
        {"evidence_start": 4, "evidence_end": 9},
    ],
    ids=["offset-past-32-bits", "end-past-the-text", "offsets-not-at-the-quote", "offsets-without-quote"],
)
def test_the_api_applies_the_pages_evidence_rule(fields, study, make_episode, codes, bob):
    episode = make_episode(study, body=BODY)
    response = _api(bob, episode, **fields)
    assert response.status_code == 400, response.json()
    assert set(response.json()) & {"evidence", "evidence_start", "evidence_end"}
    assert not Coding.objects.exists()


def test_the_api_locates_a_quote_without_offsets_as_the_page_does(client, study, make_episode, codes, bob, people):
    episode = make_episode(study, body=BODY)
    response = _api(bob, episode, evidence="search tool")
    assert response.status_code == 201
    start = BODY.index("search tool")
    assert (response.json()["evidence_start"], response.json()["evidence_end"]) == (start, start + 11)
    other = make_episode(study, body=BODY)
    assert _page(client, bob, other, evidence="search tool") == 302
    assert Coding.objects.get(episode=other).evidence_start == start
