"""The coding workspace: header progress, Skip's undo, Save and next's link back, the 409 badge, whole-word quotes."""

from __future__ import annotations

import pytest

from annotate.tests.views.test_coding_page import post_data, url


def _progress(client) -> str:
    html = client.get("/studies/alpha/progress/mine/").content.decode()
    return html.replace("<strong>", "").replace("</strong>", "")


@pytest.fixture
def three(study, make_episode):
    return [make_episode(study, body=f"The agent looped {i}.") for i in range(3)]


def test_it_shows_how_many_are_left_for_the_coder_and_how_many_they_coded_this_session(client, bob, alice, three):
    client.force_login(bob)
    assert "0 coded this session" in _progress(client)
    client.post(url(three[0]), post_data())
    text = _progress(client)
    assert "2 of 3 left for you in this study" in text and "1 coded this session" in text
    client.force_login(alice)  # alice sees bob's coded episode as still left for her (k = 2)
    text = _progress(client)
    assert "3 of 3 left for you" in text and "0 coded this session" in text


def test_the_coding_page_header_loads_the_progress(client, bob, three):
    client.force_login(bob)
    html = client.get(url(three[0])).content.decode()
    assert 'hx-get="/studies/alpha/progress/mine/"' in html and "faultline:saved from:body" in html


def test_a_viewer_gets_no_progress_fragment(client, vera, three):
    client.force_login(vera)
    assert client.get("/studies/alpha/progress/mine/").status_code == 403


def test_skip_says_what_happened_and_offers_undo(client, bob, three):
    client.force_login(bob)
    response = client.post(url(three[0], "skip/"), follow=True)
    html = response.content.decode()
    assert f"Skipped episode {three[0].pk}" in html
    assert f'<a href="/studies/alpha/episodes/{three[0].pk}/code/">Undo</a>' in html


def test_save_and_next_links_back_to_the_episode_just_saved(client, bob, three):
    client.force_login(bob)
    html = client.post(url(three[0]), post_data(action="next"), follow=True).content.decode()
    assert f'Saved your coding of episode {three[0].pk}. <a href="/studies/alpha/episodes/{three[0].pk}/code/">' in html


def test_after_a_409_the_badge_no_longer_says_saved(client, bob, three):
    client.force_login(bob)
    client.post(url(three[0]), post_data())
    client.post(url(three[0]), post_data(version="1", memo="second"))
    stale = client.post(url(three[0]), post_data(version="1", memo="stale"), HTTP_HX_REQUEST="true")
    assert stale.status_code == 409
    html = stale.content.decode()
    assert "⚠ not saved" in html and "✓ saved, version" not in html


def test_the_shortcut_sheet_lists_accept_and_confidence_keys(client, bob, three):
    client.force_login(bob)
    html = client.get(url(three[0])).content.decode()
    assert "<td><kbd>a</kbd></td><td>Accept the top suggestion" in html
    assert "<td><kbd>c</kbd></td><td>Change the confidence" in html


@pytest.mark.parametrize(
    ("text", "quote", "expected"),
    [
        ("It edited CHANGELOG.md, and ran the tests.", "md, and ran", "CHANGELOG.md, and ran"),
        ("It edited CHANGELOG.md, and ran the tests.", "edited CHANGEL", "edited CHANGELOG.md,"),
        ("The agent hangs forever.", "The agent", "The agent"),
        ("no match here", "elsewhere", "elsewhere"),
    ],
)
def test_quotes_are_widened_to_whole_words(text, quote, expected):
    from annotate.coding.evidence import quote_whole_words

    assert quote_whole_words(text, quote) == expected


def test_a_long_quote_is_cut_at_a_word_boundary():
    from annotate.coding.evidence import quote_whole_words

    assert quote_whole_words("alpha beta gamma", "alpha beta gamma", limit=12) == "alpha beta"


def test_local_evidence_sentences_do_not_split_file_names_or_versions():
    from annotate.suggestions._text import claim_spans

    text = "The agent edited CHANGELOG.md, and ran the suite. Then v1.2.3 broke the build again."
    sentences = [text[s.start : s.end] for s in claim_spans(text)]
    assert sentences == ["The agent edited CHANGELOG.md, and ran the suite.", "Then v1.2.3 broke the build again."]


def test_llm_evidence_is_widened_to_whole_words(codebook):
    import json

    from annotate.suggestions.base import codebook_spec
    from annotate.suggestions.prompts import answer_validate

    text = "The agent edited CHANGELOG.md, and ran the tests without asking."
    candidate = {"failure_type": "TUS-06", "source": "agent_design", "stage": "iterative_execution",
                 "capability": "actuation", "confidence": 0.6, "rationale": "r", "evidence": "md, and ran"}  # fmt: skip
    answer = answer_validate(
        codebook_spec(codebook), text, json.dumps({"not_a_failure": False, "candidates": [candidate]})
    )
    assert answer.candidates[0].evidence == "CHANGELOG.md, and ran"
