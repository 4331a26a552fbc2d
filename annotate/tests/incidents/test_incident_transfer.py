"""Moving incidents to another study: out of a research study's queue into an incident study, all or none."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.coding.selectors import coder_queue_left
from annotate.coding.services import CodingValues, coding_save
from annotate.incidents.services import (
    IncidentData,
    incident_create,
    incident_move,
    incident_transfer_targets,
    incidents_transfer,
)
from annotate.models import Document, Episode, Study, Suggestion, TriageEvent
from annotate.studies.services import queue_key_for, study_create

BULK = "/studies/alpha/incidents/bulk/"


@pytest.fixture
def stray(study, bob, make_episode):
    """Alpha, a research study with 4 documents, got 2 incidents posted before studies had to opt in."""
    for _ in range(4):
        make_episode(study)
    study.accepts_incidents = True  # as it was before the rule
    made = [
        incident_create(study=study, user=bob, data=IncidentData(service="s", title=t, description="d", external_id=t))
        for t in ("inc-1", "inc-2")
    ]
    study.accepts_incidents = False
    study.save(update_fields=["accepts_incidents"])
    return [m.document for m in made]


@pytest.fixture
def ops(codebook, alice, bob):
    made = study_create(slug="ops", name="Ops incidents", codebook=codebook, owner=alice, coders=[bob])
    Study.objects.filter(pk=made.pk).update(accepts_incidents=True)
    made.refresh_from_db()
    return made


def test_the_owner_moves_stray_incidents_out_of_the_research_queue(study, ops, alice, bob, stray, codes):
    for d in stray:
        Suggestion.objects.create(
            episode=Episode.objects.get(document=d), backend="local", model="tfidf", prompt_version="v1",
            cache_key=f"k{d.pk}", confidence=0.5, failure_type=codes.type("TUS-03"), source=codes.source("llm"),
            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"),
        )  # fmt: skip
    assert (coder_queue_left(study, bob).left, coder_queue_left(study, bob).total) == (6, 6)  # "68 of 84"
    incident_move(document=stray[0], user=alice, to_status="triaged", assignee=bob)
    moved = incidents_transfer(study=study, user=alice, document_ids=[d.pk for d in stray], target=ops, note="wrong")
    assert moved == 2
    assert (coder_queue_left(study, bob).left, coder_queue_left(study, bob).total) == (4, 4)  # "82 of 82" again
    assert coder_queue_left(ops, bob).total == 2
    for d in stray:
        episode = Episode.objects.get(document=d)
        assert Document.objects.get(pk=d.pk).study_id == episode.study_id == ops.pk
        assert episode.queue_key == queue_key_for(ops, episode.pk)
        assert Suggestion.objects.filter(episode=episode).exists()  # the suggestion came along
        last = TriageEvent.objects.filter(document=d).latest("id")
        assert last.note == "Moved from alpha to ops. wrong" and last.actor == alice
    assert Document.objects.get(pk=stray[0].pk).assignee == bob  # bob codes in ops too


def test_only_the_owner_and_only_to_a_study_that_takes_incidents(study, ops, alice, bob, codebook, stray):
    assert incident_transfer_targets(study=study, user=bob) == []  # a coder of alpha does not move its documents
    assert incident_transfer_targets(study=study, user=alice) == [ops]
    closed = study_create(slug="closed", name="Closed", codebook=codebook, owner=alice)
    for user, target in ((bob, ops), (alice, closed)):
        with pytest.raises(ValidationError) as exc:
            incidents_transfer(study=study, user=user, document_ids=[stray[0].pk], target=target)
        assert "accepts incidents" in " ".join(exc.value.message_dict["study"])
    assert Document.objects.filter(study=study, kind="incident").count() == 2


def test_a_coded_or_clashing_incident_keeps_every_one_where_it_is(study, ops, alice, bob, stray, codes):
    coding_save(
        episode=Episode.objects.get(document=stray[0]), coder=bob, version=None,
        values=CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("llm"),
                            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation")),
    )  # fmt: skip
    Document.objects.create(study=ops, kind="incident", external_id="inc-2", cluster="s", title="already here")
    with pytest.raises(ValidationError) as exc:
        incidents_transfer(study=study, user=alice, document_ids=[d.pk for d in stray], target=ops)
    message = " ".join(exc.value.message_dict["incidents"])
    assert "Nothing was moved. 2 of 2 cannot" in message
    assert "coded in alpha" in message and "ops already has an incident inc-2" in message
    assert Document.objects.filter(study=study, kind="incident").count() == 2


def test_a_transfer_costs_the_same_queries_for_2_or_12_incidents(study, ops, alice, bob):
    study.accepts_incidents = True

    def transfer(n: int) -> int:
        docs = [
            incident_create(study=study, user=bob, data=IncidentData(service="s", title=f"t{i}", description="d"))
            for i in range(n)
        ]
        with CaptureQueriesContext(connection) as ctx:
            incidents_transfer(study=study, user=alice, document_ids=[d.document.pk for d in docs], target=ops)
        return len([q for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"]])

    few, many = transfer(2), transfer(12)
    assert few == many <= 14  # with the two studies' data versions


def test_the_board_offers_the_move_to_its_owner_only(client, study, ops, alice, bob, stray):
    client.force_login(bob)
    assert 'id="bulk-target"' not in client.get("/studies/alpha/incidents/").content.decode()
    client.force_login(alice)
    html = client.get("/studies/alpha/incidents/").content.decode()
    assert 'id="bulk-target"' in html and '<option value="ops">Ops incidents</option>' in html
    response = client.post(BULK, {"ids": [stray[1].pk], "action": "transfer", "bulk_target": "ops"},
                           HTTP_HX_REQUEST="true")  # fmt: skip
    assert response.status_code == 200 and "✓ Moved 1 incident to Ops incidents." in response.content.decode()
    assert Document.objects.get(pk=stray[1].pk).study_id == ops.pk
    client.force_login(bob)  # a coder posting the same form is refused
    refused = client.post(BULK, {"ids": [stray[0].pk], "action": "transfer", "bulk_target": "ops"})
    assert refused.status_code == 302 and Document.objects.get(pk=stray[0].pk).study_id == study.pk
