"""The triage board and incident page: grouping, filters, moves, hostile text, similar incidents."""

from __future__ import annotations

import pytest

from annotate.coding.services import CodingValues, coding_save
from annotate.incidents.services import IncidentData, incident_create
from annotate.models import Suggestion, TriageEvent
from annotate.traces.parsed import TraceArtifact

pytestmark = pytest.mark.usefixtures("incidents_open")

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture
def board(study, bob, codes):
    """Three incidents: one suggested as an LLM fault, one coded as a tool/service fault, one unsuggested."""

    def make(title, service, severity, **kw):
        return incident_create(
            study=study, user=bob,
            data=IncidentData(service=service, title=title, description=kw.get("body", "The agent failed."),
                              severity=severity, artifacts=kw.get("artifacts", ())),
        )  # fmt: skip

    llm = make("Model invented a refund policy", "support-agent", "high")
    Suggestion.objects.create(
        episode=llm.episode, backend="local", model="tfidf", prompt_version="v1", cache_key="k1", confidence=0.81,
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    tool = make("Payments API returned 500 during refund", "checkout-agent", "critical")
    coding_save(
        episode=tool.episode, coder=bob, version=None,
        values=CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("tool_service"),
                            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation")),
    )  # fmt: skip
    hostile = make(
        XSS, "support-agent", "low", body=f"Steps: {XSS}",
        artifacts=(TraceArtifact(kind="diff", name=XSS, content=f"- a\n+ {XSS}"),
                   TraceArtifact(kind="screenshot", name="shot", url="https://example.org/x.png")),
    )  # fmt: skip
    return llm.document, tool.document, hostile.document


def test_the_board_groups_open_incidents_by_responsibility_source(client, alice, board):
    client.force_login(alice)
    page = client.get("/studies/alpha/incidents/")
    groups = {g.source: [c.document.pk for c in g.cards] for g in page.context["groups"]}
    llm, tool, hostile = board
    assert groups == {"llm": [llm.pk], "tool_service": [tool.pk], "unknown": [hostile.pk]}
    states = {c.document.pk: c.responsibility.state for g in page.context["groups"] for c in g.cards}
    assert states == {llm.pk: "suggested", tool.pk: "coded", hostile.pk: "unknown"}
    html = page.content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    assert page.context["total"] == 3
    # A card reported a moment ago says so, not "0 minutes ago".
    assert "0 minutes" not in html and "now" in html


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("service=support-agent", [0, 2]),
        ("severity=critical", [1]),
        ("failure_type=TUS-03", [0, 1]),
        ("age=1d", [0, 1, 2]),
    ],
)
def test_the_board_filters(client, alice, board, query, expected):
    client.force_login(alice)
    page = client.get(f"/studies/alpha/incidents/?{query}", HTTP_HX_REQUEST="true")
    shown = sorted(c.document.pk for g in page.context["groups"] for c in g.cards)
    assert shown == sorted(board[i].pk for i in expected)
    assert "<html" not in page.content.decode()  # htmx gets the fragment


def test_moving_an_incident_records_who_and_when(client, bob, alice, board):
    llm = board[0]
    client.force_login(bob)
    response = client.post(
        f"/studies/alpha/incidents/{llm.pk}/move/", {"status": "triaged", "assignee": alice.pk}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    llm.refresh_from_db()
    assert (llm.triage_status, llm.assignee) == ("triaged", alice)
    event = TriageEvent.objects.filter(document=llm).last()
    assert (event.actor, event.from_status, event.to_status, event.assignee) == (bob, "new", "triaged", alice)
    # A plain form post redirects; resolved incidents leave the open board.
    response = client.post(f"/studies/alpha/incidents/{llm.pk}/move/", {"status": "resolved"})
    assert response.status_code == 302
    page = client.get("/studies/alpha/incidents/")
    assert llm.pk not in [c.document.pk for g in page.context["groups"] for c in g.cards]
    page = client.get("/studies/alpha/incidents/?show=resolved")
    assert [c.document.pk for g in page.context["groups"] for c in g.cards] == [llm.pk]


def test_a_bad_move_says_why(client, bob, board):
    client.force_login(bob)
    response = client.post(
        f"/studies/alpha/incidents/{board[0].pk}/move/", {"status": "triaged"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400
    assert "Choose who handles it" in response.content.decode()


def test_viewers_cannot_move_and_strangers_cannot_see(client, vera, charlie, board):
    client.force_login(vera)
    assert client.get("/studies/alpha/incidents/").status_code == 200
    assert client.post(f"/studies/alpha/incidents/{board[0].pk}/move/", {"status": "resolved"}).status_code == 403
    client.force_login(charlie)
    assert client.get("/studies/alpha/incidents/").status_code == 404
    assert client.get(f"/studies/alpha/incidents/{board[0].pk}/").status_code == 404


def test_the_incident_page_shows_artifacts_sanitised_and_similar_incidents(client, alice, board):
    client.force_login(alice)
    hostile = board[2]
    html = client.get(f"/studies/alpha/incidents/{hostile.pk}/").content.decode()
    assert "<script>alert(" not in html and "<img src=x onerror" not in html
    assert "&lt;script&gt;" in html
    assert 'href="https://example.org/x.png"' in html
    page = client.get(f"/studies/alpha/incidents/{board[1].pk}/")
    similar = page.context["similar"]
    assert [s.document.pk for s in similar][:1] == [board[0].pk]
    assert similar[0].reason == "same type TUS-03"


def test_board_cards_link_to_the_episode_and_to_coding_it(client, alice, vera, board):
    from annotate.models import Episode

    llm = board[0]
    episode = Episode.objects.get(document=llm)
    client.force_login(alice)
    html = client.get("/studies/alpha/incidents/").content.decode()
    assert f'href="/studies/alpha/episodes/{episode.pk}/"' in html
    assert f'href="/studies/alpha/incidents/{llm.pk}/#code-h">Code it' in html
    assert 'class="badge sev sev-critical"' in html
    client.force_login(vera)
    html = client.get("/studies/alpha/incidents/").content.decode()
    assert f'href="/studies/alpha/episodes/{episode.pk}/"' in html and "Code it" not in html


def test_the_incident_page_offers_a_default_accept_only_for_a_confident_suggestion(client, alice, board):
    llm = board[0]
    url = f"/studies/alpha/incidents/{llm.pk}/"
    client.force_login(alice)
    page = client.get(url).content.decode()
    assert '<button type="submit" class="primary" id="accept-suggestion">' in page  # 0.81 clears 0.3
    # The same suggestion for a text that addressed a model (annotate.suggestions.selectors.suggestion_confident).
    Suggestion.objects.filter(episode__document=llm).update(instructions_flagged=True)
    page = client.get(url).content.decode()
    assert '<button type="submit" id="accept-suggestion">' in page and "Not a confident suggestion." in page
    assert "instructions addressed to a model" in page
    Suggestion.objects.filter(episode__document=llm).update(instructions_flagged=False, confidence=0.1)
    page = client.get(url).content.decode()
    assert '<button type="submit" id="accept-suggestion">' in page and "below this study's threshold" in page


def test_a_triager_accepts_the_suggestion_in_place_with_history(client, alice, board):
    from annotate.models import Coding, Episode

    llm = board[0]
    episode = Episode.objects.get(document=llm)
    suggestion = Suggestion.objects.get(episode=episode)
    client.force_login(alice)
    page = client.get(f"/studies/alpha/incidents/{llm.pk}/").content.decode()
    assert "Accept the suggestion" in page and "LLM / model behaviour" in page
    data = {"failure_type": "TUS-03", "source": "llm", "stage": "iterative_execution", "capability": "actuation",
            "confidence": "medium", "from_suggestion": suggestion.pk}  # fmt: skip
    response = client.post(f"/studies/alpha/incidents/{llm.pk}/code/", data, follow=True)
    assert "Coded: LLM / model behaviour, TUS-03" in response.content.decode()
    coding = Coding.objects.get(episode=episode, coder=alice)
    assert coding.from_suggestion == suggestion and coding.history.count() == 1
    suggestion.refresh_from_db()
    assert suggestion.status == "accepted"


def test_a_triager_corrects_the_suggestion_and_the_change_is_in_history(client, alice, board):
    from annotate.models import Coding, Episode

    llm = board[0]
    episode = Episode.objects.get(document=llm)
    suggestion = Suggestion.objects.get(episode=episode)
    client.force_login(alice)
    data = {"failure_type": "EXT-01", "source": "tool_service", "stage": "iterative_execution",
            "capability": "actuation", "confidence": "high", "from_suggestion": suggestion.pk}  # fmt: skip
    client.post(f"/studies/alpha/incidents/{llm.pk}/code/", data)
    coding = Coding.objects.get(episode=episode, coder=alice)
    assert (coding.failure_type.code, coding.source.code) == ("EXT-01", "tool_service")
    suggestion.refresh_from_db()
    assert suggestion.status == "edited"
    client.post(f"/studies/alpha/incidents/{llm.pk}/code/", {**data, "source": "framework", "version": coding.version})
    coding.refresh_from_db()
    assert coding.source.code == "framework" and coding.version == 2 and coding.history.count() == 2
    page = client.get(f"/studies/alpha/incidents/{llm.pk}/").content.decode()
    assert "✓ saved, version 2" in page


def test_a_stale_or_bad_incident_coding_writes_nothing(client, alice, board):
    from annotate.models import Coding

    llm = board[0]
    client.force_login(alice)
    bad = client.post(
        f"/studies/alpha/incidents/{llm.pk}/code/", {"failure_type": "NOPE-1", "source": "llm"}, follow=True
    )
    assert "Not saved" in bad.content.decode()
    assert not Coding.objects.filter(coder=alice).exists()


def test_viewers_cannot_code_incidents(client, vera, board):
    llm = board[0]
    client.force_login(vera)
    data = {"failure_type": "TUS-03", "source": "llm", "stage": "iterative_execution", "capability": "actuation"}
    assert client.post(f"/studies/alpha/incidents/{llm.pk}/code/", data).status_code == 403
    assert "Accept the suggestion" not in client.get(f"/studies/alpha/incidents/{llm.pk}/").content.decode()
