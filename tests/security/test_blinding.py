"""Blind means blind on every surface: the differential probe over every API list, filter and parameter,
and the pages that show codings, progress and reports."""

from __future__ import annotations

import pytest
from django.utils import timezone
from django_filters import rest_framework as filters
from rest_framework.test import APIClient

from annotate.coding.services import CodingValues, coding_save
from annotate.exports.filters import EpisodeFilter
from annotate.models import Coding
from annotate.studies.services import membership_set
from tests.security.blinding_probe import leaks, probes


@pytest.fixture
def blind_study(study, bob, alice, django_user_model, make_episode, codes):
    """Alpha, blind, k = 2: Bob codes, Dana codes, Eve codes with the adjudicator duty.

    Bob and Dana both coded `shared`; nobody coded `target` yet.
    """
    dana = django_user_model.objects.create_user("dana", password="x")
    eve = django_user_model.objects.create_user("eve", password="x")
    membership_set(study=study, user=dana, role="coder")
    membership_set(study=study, user=eve, role="coder", adjudicator=True)
    assert study.blind and study.coders_per_episode == 2
    shared = make_episode(study, cluster="acme/agent")
    target = make_episode(study, cluster="acme/target")
    make_episode(study, cluster="acme/other")
    coding_save(episode=shared, coder=bob, values=_values(codes, "TUS-03"), version=None)
    coding_save(episode=shared, coder=dana, values=_values(codes, "TUS-01"), version=None)
    return study, dana, eve, shared, target


def _values(codes, type_code: str, source: str = "llm") -> CodingValues:
    return CodingValues(
        failure_type=codes.type(type_code), source=codes.source(source), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip


def _client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _pools(study, users, episodes, since) -> dict[str, list[str]]:
    # The values another coder will use, and ids and times around them: what a snooper would try.
    return {
        "strings": ["TUS-02", "TUS-05", "tool_service", "llm", "acme/target"],
        "ids": [str(users[1].pk), str(episodes[1].pk)],
        "times": [since.isoformat()],
    }


def _steps(dana, target, codes):
    def dana_codes_target():
        coding_save(episode=target, coder=dana, values=_values(codes, "TUS-02", "tool_service"), version=None)

    def dana_changes_her_coding():
        coding = Coding.objects.get(episode=target, coder=dana)
        coding_save(episode=target, coder=dana, values=_values(codes, "TUS-05", "llm"), version=coding.version)

    return [dana_codes_target, dana_changes_her_coding]


def test_it_shows_a_blind_coder_and_an_adjudicator_nothing_of_anothers_work_on_any_list(blind_study, bob, codes):
    study, dana, eve, shared, target = blind_study
    since = timezone.now()
    all_probes = probes(study.slug, _pools(study, [bob, dana, eve], [shared, target], since))
    assert len(all_probes) > 150  # every list, every parameter, every candidate value
    observers = {"bob (coder)": _client(bob), "eve (adjudicator, incomplete episode)": _client(eve)}
    assert leaks(observers, all_probes, _steps(dana, target, codes)) == []


def test_the_probe_sees_the_changes_an_owner_may_see(blind_study, alice, bob, codes):
    """The instrument can fail: to the owner, who sees everything, the same steps change many answers."""
    study, dana, eve, shared, target = blind_study
    all_probes = probes(study.slug, _pools(study, [bob, dana, eve], [shared, target], timezone.now()))
    all_probes = [p for p in all_probes if p.path.endswith(("/episodes/", "/codings/"))]
    found = leaks({"alice (owner)": _client(alice)}, all_probes, _steps(dana, target, codes))
    assert any("episodes/?failure_type=TUS-02" in f for f in found)
    assert any("codings/" in f for f in found)


def test_a_filter_added_without_the_visibility_rule_fails_the_probe(blind_study, bob, codes):
    """A test of the test: a new FilterSet filter that reads codings directly is caught, because the
    probe takes its parameters from the OpenAPI schema."""
    study, dana, eve, shared, target = blind_study

    def peek(queryset, name, value):
        return queryset.filter(codings__failure_type__code=value)

    EpisodeFilter.base_filters["peek_type"] = filters.CharFilter(method=peek, help_text="A careless new filter.")
    try:
        all_probes = probes(study.slug, _pools(study, [bob, dana, eve], [shared, target], timezone.now()))
        all_probes = [p for p in all_probes if p.path.endswith("/episodes/")]
        assert any(p.query and p.query[0][0] == "peek_type" for p in all_probes)
        found = leaks({"bob": _client(bob)}, all_probes, _steps(dana, target, codes))
    finally:
        del EpisodeFilter.base_filters["peek_type"]
    assert any("peek_type=TUS-02" in f for f in found)


def test_filters_act_on_the_members_own_codings_and_progress_fields_are_left_out(blind_study, bob, alice):
    _study, _dana, _eve, shared, _target = blind_study
    mine = _client(bob).get("/api/v1/studies/alpha/episodes/", {"failure_type": "TUS-01"}).json()["results"]
    # Dana chose TUS-01 on `shared`; Bob coded it too, so the rule lets him see hers there.
    assert [e["id"] for e in mine] == [shared.pk]
    rows = _client(bob).get("/api/v1/studies/alpha/episodes/").json()["results"]
    assert rows and all("n_codings" not in r and "status" not in r for r in rows)
    rows = _client(alice).get("/api/v1/studies/alpha/episodes/").json()["results"]
    assert all("n_codings" in r and "status" in r for r in rows)


def test_an_adjudicator_reads_others_codings_of_complete_episodes_only(blind_study, bob, codes):
    _study, dana, eve, shared, target = blind_study
    coding_save(episode=target, coder=dana, values=_values(codes, "TUS-02"), version=None)
    client = _client(eve)
    assert client.get("/api/v1/studies/alpha/codings/", {"episode": target.pk}).json()["results"] == []
    got = client.get("/api/v1/studies/alpha/codings/", {"episode": shared.pk}).json()["results"]
    assert sorted(c["coder_username"] for c in got) == ["bob", "dana"]
    coding_save(episode=target, coder=bob, values=_values(codes, "TUS-03"), version=None)
    got = client.get("/api/v1/studies/alpha/codings/", {"episode": target.pk}).json()["results"]
    assert sorted(c["coder_username"] for c in got) == ["bob", "dana"]  # complete now, as on the pages


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/studies/alpha/export/?format=jsonl",
        "/api/v1/studies/alpha/matrix/",
        "/api/v1/studies/alpha/agreement/",
        "/api/v1/studies/alpha/coverage/",
        "/api/v1/studies/alpha/suggestions/quality/",
    ],
)
def test_reports_of_everyones_codings_are_refused_to_blind_coders_and_adjudicators(blind_study, path, alice):
    _study, dana, eve, _shared, _target = blind_study
    for user in (dana, eve):
        response = _client(user).get(path)
        assert response.status_code == 403, (user, path)
        assert "blind" in response.json()["detail"]
    assert _client(alice).get(path).status_code == 200


@pytest.mark.parametrize("page", ["analysis/", "agreement/", "coverage/", "suggestions/"])
def test_report_pages_are_refused_to_blind_coders(blind_study, client, page):
    _study, dana, _eve, _shared, _target = blind_study
    client.force_login(dana)
    response = client.get(f"/studies/alpha/{page}")
    assert response.status_code == 403 and "blind" in response.content.decode()


def test_pages_hide_others_progress_from_a_blind_coder(blind_study, client, bob, codes):
    _study, dana, _eve, _shared, target = blind_study
    coding_save(episode=target, coder=dana, values=_values(codes, "TUS-02"), version=None)
    client.force_login(bob)
    episode_page = client.get(f"/studies/alpha/episodes/{target.pk}/").content.decode()
    document_page = client.get(f"/studies/alpha/documents/{target.document_id}/").content.decode()
    for html in (episode_page, document_page):
        assert "1 coding" not in html and "1 of 2 codings" not in html
    overview = client.get("/studies/alpha/").content.decode()
    assert "/studies/alpha/analysis/" not in overview and "format=jsonl" not in overview


def test_a_blind_coder_sees_only_their_own_jobs(blind_study, alice, bob):
    from annotate.jobs.runner import job_start

    study, _dana, _eve, _shared, _target = blind_study
    theirs = job_start(kind="recount", study=study, user=alice, params={})
    mine = job_start(kind="recount", study=study, user=bob, params={})
    assert _client(bob).get(f"/api/v1/jobs/{theirs.pk}/").status_code == 404
    assert _client(bob).get(f"/api/v1/jobs/{mine.pk}/").status_code == 200
    assert _client(alice).get(f"/api/v1/jobs/{mine.pk}/").status_code == 200
