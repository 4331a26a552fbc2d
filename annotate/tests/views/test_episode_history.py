"""The episode page shows owners every change to the codings: who, when, and the values before and after."""

from __future__ import annotations

from annotate.coding.services import CodingValues, coding_delete, coding_save


def base(codes, **kw):
    values = {
        "failure_type": codes.type("TUS-03"),
        "source": codes.source("agent_design"),
        "stage": codes.stage("iterative_execution"),
        "capability": codes.capability("actuation"),
    }
    values.update(kw)
    return CodingValues(**values)


def test_three_saves_give_three_history_rows_with_who_and_before_after(client, alice, bob, study, make_episode, codes):
    ep = make_episode(study)
    coding_save(episode=ep, coder=bob, values=base(codes), version=None)
    coding_save(episode=ep, coder=bob, values=base(codes, memo="first thought"), version=1)
    coding_save(episode=ep, coder=bob, values=base(codes, memo="first thought", source=codes.source("llm")), version=2)
    client.force_login(alice)
    response = client.get(f"/studies/alpha/episodes/{ep.pk}/")
    history = response.context["history"]
    assert [(row.who, row.subject, row.action) for row in history] == [("bob", "bob's coding", "created")] + [
        ("bob", "bob's coding", "changed")
    ] * 2
    assert ("Memo", "", "first thought") in history[1].changes
    assert history[2].changes == [("Source", "Agent logic & prompting", "LLM / model behaviour")]  # names, not codes
    html = response.content.decode()
    assert html.count('class="history-row first"') == 3
    assert "<del>Agent logic &amp; prompting</del>" in html and "<ins>LLM / model behaviour</ins>" in html


def test_three_edits_after_creation_are_three_more_rows_and_a_delete_is_kept(
    client, alice, bob, study, make_episode, codes
):
    ep = make_episode(study)
    coding = coding_save(episode=ep, coder=bob, values=base(codes), version=None)
    for version, memo in enumerate(["a", "b", "c"], start=1):
        coding = coding_save(episode=ep, coder=bob, values=base(codes, memo=memo), version=version)
    coding_delete(coding=coding, user=alice)
    client.force_login(alice)
    history = client.get(f"/studies/alpha/episodes/{ep.pk}/").context["history"]
    assert [row.action for row in history] == ["created", "changed", "changed", "changed", "deleted"]
    assert [row.changes for row in history[1:4]] == [[("Memo", "", "a")], [("Memo", "a", "b")], [("Memo", "b", "c")]]
    assert history[4].who == "alice" and ("Memo", "c", "") in history[4].changes


def test_only_owners_see_the_history(client, bob, vera, study, make_episode, codes):
    ep = make_episode(study)
    coding_save(episode=ep, coder=bob, values=base(codes), version=None)
    for user in (bob, vera):
        client.force_login(user)
        response = client.get(f"/studies/alpha/episodes/{ep.pk}/")
        assert response.context["history"] is None and 'id="history-h"' not in response.content.decode()
