"""Bulk assign, move and close on the triage board: all or nothing, in the history, a fixed number of queries."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.incidents.services import IncidentData, incident_create, incident_move, incidents_bulk_move
from annotate.models import Document, Study, TriageEvent

pytestmark = pytest.mark.usefixtures("incidents_open")
BULK = "/studies/alpha/incidents/bulk/"
VIEW_QUERIES = 24  # session, membership, the bulk write and the board re-rendered (SQLite and PostgreSQL alike)
SERVICE_QUERIES = 4


@pytest.fixture
def make(study, bob):
    def make(title: str = "Agent looped", **kw) -> Document:
        data = IncidentData(service=kw.get("service", "checkout-agent"), title=title, description="It failed.")
        return incident_create(study=study, user=bob, data=data).document

    return make


def _state(*docs) -> list[tuple[str, str | None]]:
    fresh = {d.pk: d for d in Document.objects.filter(pk__in=[d.pk for d in docs]).select_related("assignee")}
    return [(fresh[d.pk].triage_status, fresh[d.pk].assignee.username if fresh[d.pk].assignee else None) for d in docs]


def test_assigning_triages_new_incidents_and_reassigns_triaged_ones(study, alice, bob, make):
    a, b, c = make("a"), make("b"), make("c")
    incident_move(document=c, user=alice, to_status="triaged", assignee=alice)
    events = incidents_bulk_move(study=study, user=alice, document_ids=[a.pk, b.pk, c.pk], action="assign",
                                 assignee=bob, note="on call this week")  # fmt: skip
    assert _state(a, b, c) == [("triaged", "bob")] * 3
    assert [(e.document_id, e.from_status, e.to_status, e.assignee_id, e.actor_id, e.note) for e in events] == [
        (a.pk, "new", "triaged", bob.pk, alice.pk, "on call this week"),
        (b.pk, "new", "triaged", bob.pk, alice.pk, "on call this week"),
        (c.pk, "triaged", "triaged", bob.pk, alice.pk, "on call this week"),
    ]
    assert TriageEvent.objects.filter(document=c).count() == 3  # reported, triaged to alice, reassigned to bob


def test_one_incident_that_cannot_move_leaves_every_one_unchanged(study, alice, bob, make):
    a, b, done = make("a"), make("b"), make("already fixed")
    incident_move(document=done, user=alice, to_status="resolved")
    before = TriageEvent.objects.count()
    with pytest.raises(ValidationError) as exc:
        incidents_bulk_move(study=study, user=alice, document_ids=[a.pk, b.pk, done.pk], action="assign", assignee=bob)
    message = " ".join(exc.value.message_dict["incidents"])
    assert "Nothing was changed. 1 of 3 cannot" in message and f"#{done.pk} “already fixed”: resolved" in message
    assert _state(a, b, done) == [("new", None), ("new", None), ("resolved", None)]
    assert TriageEvent.objects.count() == before


def test_move_follows_the_one_move_rules_and_close_resolves(study, alice, bob, make):
    a, b = make("a"), make("b")
    with pytest.raises(ValidationError) as exc:  # triaged needs someone to handle it
        incidents_bulk_move(study=study, user=alice, document_ids=[a.pk, b.pk], action="move", to_status="triaged")
    assert "Choose who handles it." in " ".join(exc.value.message_dict["incidents"])
    incidents_bulk_move(study=study, user=alice, document_ids=[a.pk, b.pk], action="move", to_status="triaged",
                        assignee=alice)  # fmt: skip
    incidents_bulk_move(study=study, user=bob, document_ids=[a.pk], action="move", to_status="new")
    assert _state(a, b) == [("new", "alice"), ("triaged", "alice")]
    incidents_bulk_move(study=study, user=bob, document_ids=[a.pk, b.pk], action="close")
    assert _state(a, b) == [("resolved", "alice"), ("resolved", "alice")]
    with pytest.raises(ValidationError):  # resolved cannot be resolved again
        incidents_bulk_move(study=study, user=bob, document_ids=[a.pk], action="close")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"document_ids": [], "action": "close"}, "incidents"),
        ({"action": "delete"}, "action"),
        ({"action": "assign"}, "assignee"),
        ({"action": "move", "to_status": "gone"}, "status"),
        ({"action": "close", "note": "x" * 5001}, "note"),
    ],
)
def test_a_bad_request_is_a_field_error(study, alice, make, kwargs, field):
    a = make()
    with pytest.raises(ValidationError) as exc:
        incidents_bulk_move(study=study, user=alice, **{"document_ids": [a.pk], **kwargs})
    assert field in exc.value.message_dict
    assert _state(a) == [("new", None)]


def test_incidents_of_another_study_and_non_members_are_refused(study, other_study, alice, charlie, make):
    a = make()
    Study.objects.filter(pk=other_study.pk).update(accepts_incidents=True)
    other_study.refresh_from_db()
    theirs = incident_create(
        study=other_study, user=charlie, data=IncidentData(service="s", title="theirs", description="d")
    ).document
    with pytest.raises(ValidationError) as exc:
        incidents_bulk_move(study=study, user=alice, document_ids=[a.pk, theirs.pk], action="close")
    assert str(theirs.pk) in " ".join(exc.value.message_dict["incidents"])
    with pytest.raises(ValidationError) as exc:
        incidents_bulk_move(study=study, user=alice, document_ids=[a.pk], action="assign", assignee=charlie)
    assert "coder or owner of this study" in " ".join(exc.value.message_dict["assignee"])
    assert _state(a, theirs) == [("new", None), ("new", None)]


def _bulk_queries(client, docs, bob) -> int:
    data = {"ids": [d.pk for d in docs], "action": "assign", "bulk_assignee": bob.pk, "show": "open"}
    with CaptureQueriesContext(connection) as ctx:
        response = client.post(BULK, data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content.decode()[:500]
    return len(ctx.captured_queries)


def test_the_bulk_view_costs_the_same_queries_for_3_or_15_incidents(client, alice, bob, make):
    client.force_login(alice)
    few, many = [make(f"f{i}") for i in range(3)], [make(f"m{i}") for i in range(15)]
    client.get("/studies/alpha/incidents/")  # session and caches warm
    assert _bulk_queries(client, few, bob) == _bulk_queries(client, many, bob) <= VIEW_QUERIES
    assert _state(*many) == [("triaged", "bob")] * 15


@pytest.mark.parametrize("n", [2, 20])
def test_the_bulk_write_is_a_fixed_handful_of_queries(study, alice, bob, make, n):
    """The member check, the locked read, one UPDATE and one INSERT of the history (no webhook set)."""
    docs = [make(f"i{i}") for i in range(n)]
    with CaptureQueriesContext(connection) as ctx:
        incidents_bulk_move(study=study, user=alice, document_ids=[d.pk for d in docs], action="assign", assignee=bob)
    writes = [q["sql"].split()[0] for q in ctx.captured_queries if q["sql"].split()[0] in ("UPDATE", "INSERT")]
    assert writes == ["UPDATE", "INSERT"]
    assert len([q for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"]]) <= SERVICE_QUERIES


def test_the_bulk_view_shows_what_it_did_or_why_not_and_keeps_the_selection(client, alice, bob, vera, make):
    a, b = make("a"), make("b")
    client.force_login(vera)
    assert client.post(BULK, {"ids": [a.pk], "action": "close"}).status_code == 403
    client.force_login(alice)
    incident_move(document=b, user=alice, to_status="resolved")
    bad = client.post(BULK, {"ids": [a.pk, b.pk], "action": "close", "show": "all"}, HTTP_HX_REQUEST="true")
    html = bad.content.decode()
    assert bad.status_code == 400 and 'id="bulk-error"' in html and "Nothing was changed" in html
    assert f'id="sel-{a.pk}" class="select-card" data-nav-select' in html
    assert html.count("checked>") >= 2  # both boxes stay ticked to fix the selection
    ok = client.post(BULK, {"ids": [a.pk], "action": "close", "show": "all"}, HTTP_HX_REQUEST="true")
    assert ok.status_code == 200 and "✓ Closed 1 incident." in ok.content.decode()
    redirect = client.post(BULK, {"ids": [a.pk], "action": "move", "bulk_status": "triaged", "bulk_assignee": bob.pk})
    assert redirect.status_code == 302
    assert _state(a) == [("triaged", "bob")]
