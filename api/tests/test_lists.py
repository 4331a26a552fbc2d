"""List endpoints: filters, cursor pagination, pinned query counts, the schema and the docs."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.coding.services import CodingValues, coding_save


@pytest.fixture
def many(study, bob, alice, make_episode, codes):
    """12 episodes over two kinds and clusters; the even ones coded by Bob, every fourth by Alice too."""
    llm = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    eps = []
    for n in range(12):
        kind = "github_issue" if n < 8 else "literature"
        ep = make_episode(study, kind=kind, cluster="acme/agent" if n % 3 else "other/repo")
        if n % 2 == 0:
            coding_save(episode=ep, coder=bob, values=llm, version=None)
        if n % 4 == 0:
            coding_save(episode=ep, coder=alice, values=llm, version=None)
        eps.append(ep)
    return eps


def _all(client, url):
    out, page = [], client.get(url).json()
    out += page["results"]
    while page["next"]:
        page = client.get(page["next"]).json()
        out += page["results"]
    return out


def test_it_pages_by_cursor_without_gaps_or_repeats(as_user, alice, many):
    rows = _all(as_user(alice), "/api/v1/studies/alpha/episodes/?page_size=5")
    assert [r["id"] for r in rows] == [e.pk for e in many]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("kind=literature", [8, 9, 10, 11]),
        ("cluster=other/repo", [0, 3, 6, 9]),
        ("coded=true", [0, 2, 4, 6, 8, 10]),
        ("coded=false", [1, 3, 5, 7, 9, 11]),
        ("failure_type=TUS-03&kind=github_issue", [0, 2, 4, 6]),
        ("source=llm&stage=iterative_execution&capability=actuation&split=primary", [0, 2, 4, 6, 8, 10]),
        ("coder={alice}", [0, 4, 8]),
    ],
)
def test_it_filters_episodes(as_user, alice, many, query, expected):
    rows = _all(as_user(alice), f"/api/v1/studies/alpha/episodes/?{query.format(alice=alice.pk)}")
    assert [r["id"] for r in rows] == [many[i].pk for i in expected]


def test_it_filters_documents_and_codings_the_same_way(as_user, alice, bob, many):
    client = as_user(alice)
    docs = _all(client, f"/api/v1/studies/alpha/documents/?coder={alice.pk}")
    assert [d["id"] for d in docs] == [many[i].document_id for i in (0, 4, 8)]
    codings = _all(client, f"/api/v1/studies/alpha/codings/?coder={bob.pk}&kind=literature")
    assert [c["episode"] for c in codings] == [many[8].pk, many[10].pk]


def test_updated_since_sees_only_later_changes(as_user, alice, bob, many, codes):
    from django.utils import timezone

    client = as_user(alice)
    mark = timezone.now()
    coding_save(
        episode=many[1], coder=bob, version=None,
        values=CodingValues(not_a_failure=True, not_a_failure_reason="user error"),
    )  # fmt: skip
    stamp = mark.isoformat().replace("+00:00", "Z")
    rows = _all(client, f"/api/v1/studies/alpha/episodes/?updated_since={stamp}")
    assert [r["id"] for r in rows] == [many[1].pk]
    rows = _all(client, f"/api/v1/studies/alpha/codings/?updated_since={stamp}")
    assert [r["episode"] for r in rows] == [many[1].pk]


def test_unknown_filter_codes_are_field_errors(as_user, alice, many):
    response = as_user(alice).get("/api/v1/studies/alpha/episodes/?failure_type=NOPE-1&split=sideways")
    assert response.status_code == 400
    assert set(response.json()) == {"failure_type", "split"}


@pytest.mark.parametrize(
    ("url", "queries"),
    [
        ("/api/v1/studies/", 2),
        ("/api/v1/codebooks/", 2),
        ("/api/v1/codebooks/{codebook}/types/", 3),
        ("/api/v1/studies/alpha/documents/", 3),
        ("/api/v1/studies/alpha/episodes/", 3),
        ("/api/v1/studies/alpha/codings/", 3),
        ("/api/v1/studies/alpha/episodes/?failure_type=TUS-03&coder={alice}", 5),
        ("/api/v1/incidents/", 5),
    ],
)
def test_list_query_counts_do_not_grow_with_rows(as_user, alice, many, codebook, url, queries):
    """Token lookup, membership, the page (and prefetches): a fixed number, however many rows."""
    from annotate.incidents.services import IncidentData, incident_create
    from annotate.traces.parsed import TraceArtifact

    many[0].study.accepts_incidents = True
    many[0].study.save(update_fields=["accepts_incidents"])
    for n in range(3):
        incident_create(
            study=many[0].study, user=alice,
            data=IncidentData(service="svc", title=f"i{n}", description="d",
                              artifacts=(TraceArtifact(kind="log", name="log", content="x"),)),
        )  # fmt: skip
    client = as_user(alice)
    url = url.format(codebook=codebook.pk, alice=alice.pk)
    client.get(url)  # the token's last_used_at is touched once a minute; keep that out of the count
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    assert response.json()["results"]
    assert len(ctx.captured_queries) == queries, [q["sql"][:120] for q in ctx.captured_queries]


def test_the_schema_and_docs_are_served(as_user, alice, client):
    schema = as_user(alice).get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in ("/api/v1/studies/{slug}/codings/", "/api/v1/studies/{slug}/export/", "/api/v1/incidents/"):
        assert path in paths
    client.force_login(alice)
    assert client.get("/api/docs/").status_code == 200


def test_every_operation_and_field_is_described(as_user, alice):
    schema = as_user(alice).get("/api/schema/?format=json").json()
    ours = {p: ops for p, ops in schema["paths"].items() if not p.endswith(("/matrix/", "/agreement/", "/coverage/"))}
    ours = {p: ops for p, ops in ours.items() if "/suggestions/" not in p}
    for path, ops in ours.items():
        for method, op in ops.items():
            assert op.get("summary") or op.get("description"), f"{method} {path}"
    mine = [
        "Coding", "CodingWriteRequest", "Episode", "Document", "Study", "Job", "Incident", "IncidentInRequest",
        "ArtifactInRequest", "TriageMoveRequest", "FailureType", "Codebook", "Manifest",
    ]  # fmt: skip
    components = schema["components"]["schemas"]
    for name in mine:
        for field, spec in components[name]["properties"].items():
            described = spec.get("description") or any("description" in s for s in spec.get("allOf", []))
            assert described or "$ref" in spec or "allOf" in spec, f"{name}.{field}"


def test_episodes_and_documents_filter_by_full_text_search(as_user, alice, many, other_study, make_episode):
    from annotate.models import Document

    Document.objects.filter(pk=many[3].document_id).update(title="The search tool timed out", body="timeouts")
    Document.objects.filter(pk=many[9].document_id).update(body="Every call hit a Timeout in the browser.")
    make_episode(other_study, kind="github_issue", cluster="x/y")
    Document.objects.filter(study=other_study).update(body="timeout")
    client = as_user(alice)
    episodes = _all(client, "/api/v1/studies/alpha/episodes/?q=timeout")
    assert [r["id"] for r in episodes] == [many[3].pk, many[9].pk]
    docs = _all(client, "/api/v1/studies/alpha/documents/?q=timeout%20-browser")
    assert [d["id"] for d in docs] == [many[3].document_id]
    assert _all(client, "/api/v1/studies/alpha/episodes/?q=timeout&kind=literature") == [
        r for r in episodes if r["id"] == many[9].pk
    ]
