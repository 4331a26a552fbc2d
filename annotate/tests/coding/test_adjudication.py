"""Adjudication: which episodes need it, the filters, the side-by-side page and the recorded final codes."""

from __future__ import annotations

import pytest

from annotate.coding.adjudication import AdjudicationValues, adjudication_save
from annotate.coding.labels import LabelStatus, final_labels
from annotate.coding.services import CodingValues, coding_save
from annotate.models import Adjudication, EpisodeStatus


@pytest.fixture
def code(codes):
    def make(episode, coder, type_code="TUS-03", source="agent_design", memo="", evidence="", **kw):
        values = CodingValues(
            failure_type=codes.type(type_code) if type_code else None,
            source=codes.source(source),
            stage=codes.stage(kw.pop("stage", "iterative_execution")),
            capability=codes.capability("actuation"),
            memo=memo,
            evidence=evidence,
            **kw,
        )
        return coding_save(episode=episode, coder=coder, values=values, version=None)

    return make


@pytest.fixture
def cases(study, make_episode, code, alice, bob):
    """agree: same codes; by_type: types differ; by_source: sources differ; single: one coding only."""
    agree, by_type, by_source, single = (make_episode(study, title=t) for t in ("Agree", "ByType", "BySource", "One"))
    for coder in (alice, bob):
        code(agree, coder)
    code(by_type, alice, "TUS-03", memo="alice memo", evidence="The agent failed.")
    code(by_type, bob, "EXT-04", memo="bob memo")
    code(by_source, alice, source="llm")
    code(by_source, bob, source="framework")
    code(single, bob, "EXT-04")
    return {"agree": agree, "by_type": by_type, "by_source": by_source, "single": single}


def listed(client, query=""):
    response = client.get(f"/studies/alpha/adjudicate/{query}")
    assert response.status_code == 200
    return [row.episode.document.title for row in response.context["rows"]]


def test_it_lists_only_complete_episodes_whose_coders_disagree(client, alice, cases):
    client.force_login(alice)
    assert listed(client) == ["ByType", "BySource"]


def test_it_filters_by_axis_and_by_type(client, alice, cases):
    client.force_login(alice)
    assert listed(client, "?axis=failure_type") == ["ByType"]
    assert listed(client, "?axis=source") == ["BySource"]
    assert listed(client, "?axis=capability") == []
    assert listed(client, "?type=EXT-04") == ["ByType"]
    assert listed(client, "?type=TUS-03&axis=source") == ["BySource"]
    response = client.get("/studies/alpha/adjudicate/?type=NOPE-1")
    assert "no type" in response.content.decode()


def test_the_filter_returns_a_fragment_for_htmx(client, alice, cases):
    client.force_login(alice)
    html = client.get("/studies/alpha/adjudicate/?axis=source", HTTP_HX_REQUEST="true").content.decode()
    assert html.startswith('<div id="adjudication-rows" data-nav-list>') and "BySource" in html and "ByType" not in html


def test_the_sql_disagreement_test_matches_the_label_rule(client, alice, study, cases, make_episode, code, bob):
    naf, nnt = make_episode(study, title="NotAFailure"), make_episode(study, title="NewType")
    code(naf, alice)
    code(naf, bob, None, not_a_failure=True, not_a_failure_reason="config")
    code(nnt, alice)
    code(nnt, bob, None, needs_new_type=True)
    client.force_login(alice)
    titles = set(listed(client))
    for episode, label in final_labels(study):
        assert (label.reason == "disagreement") == (episode.document.title in titles), episode.document.title


def test_the_side_by_side_page_shows_codes_memos_and_evidence(client, alice, cases):
    client.force_login(alice)
    html = client.get(f"/studies/alpha/episodes/{cases['by_type'].pk}/adjudicate/").content.decode()
    assert "alice memo" in html and "bob memo" in html and "The agent failed." in html
    assert "TUS-03" in html and "EXT-04" in html
    assert (
        html.count('<span class="badge bad">≠ differs</span>') == 1 and "= agree" in html
    )  # a symbol and words, not colour only


def test_an_owner_records_the_final_codes_with_a_rationale(client, alice, study, cases):
    ep = cases["by_type"]
    client.force_login(alice)
    data = {"failure_type": "EXT-04", "source": "tool_service", "stage": "iterative_execution",
            "capability": "actuation", "rationale": "The website refused the bot."}  # fmt: skip
    response = client.post(f"/studies/alpha/episodes/{ep.pk}/adjudicate/", data)
    # On to the next disagreement; after the last one, back to the (empty) list.
    assert (
        response.status_code == 302 and response.url == f"/studies/alpha/episodes/{cases['by_source'].pk}/adjudicate/"
    )
    adjudication = Adjudication.objects.get(episode=ep)
    assert (adjudication.failure_type.code, adjudication.source.code, adjudication.adjudicator) == (
        "EXT-04",
        "tool_service",
        alice,
    )
    ep.refresh_from_db()
    assert ep.status == EpisodeStatus.ADJUDICATED
    assert adjudication.history.get().history_user == alice
    assert listed(client) == ["BySource"]
    assert listed(client, "?state=adjudicated") == ["ByType"]
    labels = {e.pk: label for e, label in final_labels(study)}
    assert labels[ep.pk].status == LabelStatus.ADJUDICATED
    response = client.post(f"/studies/alpha/episodes/{cases['by_source'].pk}/adjudicate/", data)
    assert response.url == "/studies/alpha/adjudicate/"


def test_a_rationale_is_required_and_bad_codes_are_refused(client, alice, cases):
    ep = cases["by_type"]
    client.force_login(alice)
    response = client.post(f"/studies/alpha/episodes/{ep.pk}/adjudicate/", {"failure_type": "EXT-04"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="rationale-error"' in html and 'id="source-error"' in html
    response = client.post(
        f"/studies/alpha/episodes/{ep.pk}/adjudicate/",
        {"failure_type": "NOPE-9", "source": "llm", "stage": "setup", "capability": "memory", "rationale": "r"},
    )
    assert response.status_code == 400 and not Adjudication.objects.exists()


def test_not_a_failure_clears_the_codes(study, alice, cases):
    adjudication = adjudication_save(
        episode=cases["by_type"], adjudicator=alice, values=AdjudicationValues(not_a_failure=True, rationale="config")
    )
    assert adjudication.not_a_failure and adjudication.failure_type is None


def test_revising_keeps_every_version_in_history(study, alice, cases, codes):
    ep = cases["by_source"]
    values = AdjudicationValues(
        failure_type=codes.type("TUS-03"),
        source=codes.source("llm"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
        rationale="first",
    )
    adjudication_save(episode=ep, adjudicator=alice, values=values)
    adjudication_save(episode=ep, adjudicator=alice, values=AdjudicationValues(**{**values.__dict__, "rationale": "2"}))
    assert Adjudication.objects.count() == 1
    assert Adjudication.history.filter(episode_id=ep.pk).count() == 2


def test_use_these_codes_prefills_the_form(client, alice, cases):
    ep = cases["by_type"]
    client.force_login(alice)
    page = client.get(f"/studies/alpha/episodes/{ep.pk}/adjudicate/")
    assert page.context["v"]["failure_type"] == "" and page.context["v"]["source"] == "agent_design"  # agreed axes
    bob_coding = next(c for c in page.context["codings"] if c.coder.username == "bob")
    page = client.get(f"/studies/alpha/episodes/{ep.pk}/adjudicate/?from={bob_coding.pk}")
    assert page.context["v"]["failure_type"] == "EXT-04"


@pytest.mark.parametrize("n", [2, 30])
def test_the_list_costs_a_fixed_number_of_queries(
    client, alice, bob, study, make_episode, code, django_assert_num_queries, n
):
    from annotate.coding.selectors import codebook_picker

    for i in range(n):
        ep = make_episode(study)
        code(ep, alice)
        code(ep, bob, "EXT-04" if i % 2 else "TUS-03")
    codebook_picker(study.codebook)
    client.force_login(alice)
    # session, user, membership, adjudications to decide again after a codebook migration, grouped ids,
    # episodes, codings, adjudications
    with django_assert_num_queries(8):
        response = client.get("/studies/alpha/adjudicate/")
    assert len(response.context["rows"]) == n // 2
