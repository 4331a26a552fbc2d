"""The stored disagreement state: kept by the coding and adjudication services in their transaction,
equal to what the codings say, backfilled by its migration, and what the adjudication list reads."""

from __future__ import annotations

import random

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotate.coding.adjudication import AdjudicationValues, adjudication_delete, adjudication_save
from annotate.coding.disagreement import DISAGREEMENT_BITS, disagreement_refresh
from annotate.coding.labels import disagreeing_axes
from annotate.coding.services import CodingValues, coding_delete, coding_save, episodes_recount
from annotate.models import Coding, Episode


def bits(*axes: str) -> int:
    return sum(DISAGREEMENT_BITS[a] for a in axes)


def stored(episode) -> int:
    return Episode.objects.values_list("disagreement", flat=True).get(pk=episode.pk)


@pytest.fixture
def values(codes):
    def make(type_code="TUS-03", source="llm", stage="iterative_execution", **kw):
        return CodingValues(
            failure_type=codes.type(type_code) if type_code else None, source=codes.source(source),
            stage=codes.stage(stage), capability=codes.capability("actuation"), **kw,
        )  # fmt: skip

    return make


def test_the_coding_service_keeps_it_on_create_update_and_delete(study, make_episode, values, alice, bob):
    ep = make_episode(study)
    coding_save(episode=ep, coder=alice, values=values(), version=None)
    assert stored(ep) == 0  # one coding cannot disagree
    mine = coding_save(episode=ep, coder=bob, values=values("EXT-04", source="tool_service"), version=None)
    assert stored(ep) == bits("failure_type", "source")
    mine = coding_save(episode=ep, coder=bob, values=values("EXT-04"), version=mine.version)
    assert stored(ep) == bits("failure_type")
    coding_save(episode=ep, coder=bob, values=values(memo="only a memo"), version=mine.version)
    assert stored(ep) == 0
    coding_save(episode=ep, coder=bob, values=values(stage="planning", memo="x"), version=mine.version + 1)
    assert stored(ep) == bits("stage")
    coding_delete(coding=Coding.objects.get(episode=ep, coder=bob), user=bob)
    assert stored(ep) == 0


def test_needs_a_new_type_and_not_a_failure_are_axes_too(study, make_episode, values, alice, bob):
    ep = make_episode(study)
    coding_save(episode=ep, coder=alice, values=values(), version=None)
    coding_save(episode=ep, coder=bob, values=CodingValues(not_a_failure=True, not_a_failure_reason="a question"),
                version=None)  # fmt: skip
    assert stored(ep) == bits("failure_type", "source", "stage", "capability", "not_a_failure")


def test_adjudication_keeps_it_and_the_list_finds_it_in_both_states(client, study, make_episode, values, alice, bob):
    ep = make_episode(study, title="Split")
    coding_save(episode=ep, coder=alice, values=values(), version=None)
    coding_save(episode=ep, coder=bob, values=values("EXT-04"), version=None)
    client.force_login(alice)
    assert [r.episode.pk for r in client.get("/studies/alpha/adjudicate/").context["rows"]] == [ep.pk]
    adjudication = adjudication_save(episode=ep, adjudicator=alice, values=AdjudicationValues(
        failure_type=values().failure_type, source=values().source, stage=values().stage,
        capability=values().capability, rationale="The first reading fits."))  # fmt: skip
    assert stored(ep) == bits("failure_type")
    assert client.get("/studies/alpha/adjudicate/").context["rows"] == []
    done = client.get("/studies/alpha/adjudicate/?state=adjudicated").context["rows"]
    assert [r.episode.pk for r in done] == [ep.pk]
    adjudication_delete(adjudication=adjudication, user=alice)
    assert [r.episode.pk for r in client.get("/studies/alpha/adjudicate/").context["rows"]] == [ep.pk]


def test_the_stored_bits_equal_what_the_codings_say(study, make_episode, codes, alice, bob, vera):
    """Random codings by three coders: the stored state is labels.disagreeing_axes, bit for bit."""
    from annotate.studies.services import membership_set

    membership_set(study=study, user=vera, role="coder")
    study.coders_per_episode = 3  # up to three coders per episode; coding_save keeps k
    study.save(update_fields=["coders_per_episode"])
    rng = random.Random(5)
    pools = {"type": ["TUS-03", "EXT-04", None], "source": ["llm", "tool_service"], "stage": ["planning", "setup"]}
    episodes = []
    for _ in range(25):
        ep = make_episode(study)
        for coder in rng.sample([alice, bob, vera], rng.randint(1, 3)):
            t = rng.choice(pools["type"])
            v = CodingValues(
                failure_type=codes.type(t) if t else None, needs_new_type=t is None,
                source=codes.source(rng.choice(pools["source"])), stage=codes.stage(rng.choice(pools["stage"])),
                capability=codes.capability("actuation"), not_a_failure=rng.random() < 0.1,
                not_a_failure_reason="no",
            )  # fmt: skip
            coding_save(episode=ep, coder=coder, values=v, version=None)
        episodes.append(ep)
    for ep in episodes:
        expected = bits(*disagreeing_axes(Coding.objects.filter(episode=ep)))
        assert stored(ep) == expected, ep
    assert any(stored(ep) for ep in episodes) and not all(stored(ep) for ep in episodes)
    Episode.objects.filter(study=study).update(disagreement=0)
    disagreement_refresh(study_id=study.pk)
    assert all(stored(ep) == bits(*disagreeing_axes(Coding.objects.filter(episode=ep))) for ep in episodes)
    Episode.objects.filter(study=study).update(disagreement=63)
    episodes_recount(study=study)  # the repair job repairs this too
    assert all(stored(ep) == bits(*disagreeing_axes(Coding.objects.filter(episode=ep))) for ep in episodes)


def test_the_adjudication_list_is_an_index_lookup(client, study, make_episode, values, alice, bob):
    for n in range(30):
        ep = make_episode(study)
        coding_save(episode=ep, coder=alice, values=values(), version=None)
        coding_save(episode=ep, coder=bob, values=values("EXT-04" if n == 29 else "TUS-03"), version=None)
    from annotate.coding.selectors import disagreeing_episodes

    sql = str(disagreeing_episodes(study).query)
    assert "annotate_coding" not in sql and '"disagreement" > 0' in sql  # no per-episode comparison of codings
    client.force_login(alice)
    assert len(client.get("/studies/alpha/adjudicate/").context["rows"]) == 1


@pytest.mark.django_db(transaction=True)
def test_the_migration_backfills_existing_episodes(study, make_episode, values, alice, bob):
    agree, differ = make_episode(study), make_episode(study)
    for coder, t in ((alice, "TUS-03"), (bob, "TUS-03")):
        coding_save(episode=agree, coder=coder, values=values(t), version=None)
    for coder, t in ((alice, "TUS-03"), (bob, "EXT-04")):
        coding_save(episode=differ, coder=coder, values=values(t), version=None)
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([("annotate", "0006_trace15_traces")])
        executor.loader.build_graph()
        executor.migrate([("annotate", "0007_scale18_disagreement")])
    finally:
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert (stored(agree), stored(differ)) == (0, bits("failure_type"))
