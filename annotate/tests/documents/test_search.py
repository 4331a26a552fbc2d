"""Document search: one function over PostgreSQL full-text search and SQLite FTS5, with the same answers.

The same expectations run on whichever database the suite uses (SQLite by default, PostgreSQL in CI),
so passing on both shows the two engines agree on this corpus.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.urls import reverse

from annotate.documents import search
from annotate.documents.search import (
    document_matches,
    document_search,
    search_after,
    search_cursor,
    search_index_ensure,
    search_parse,
)
from annotate.documents.search import search_snippets as snippets
from annotate.documents.selectors import PAGE_SIZE
from annotate.models import Document, Episode

CORPUS = {
    "t1": ("Search tool timeouts after 30 s", "The agent called the search tool and it timed out."),
    "t2": ("Planner loops", "The planner retried forever; every call hit a timeout in the browser tool."),
    "t3": ("Rate limit reached", "The provider answered 429: the rate limit was hit during planning."),
    "t4": ("Memory grows", "Limit the rate of memory growth; the context window filled up."),
    "t5": ("Browser clicks the wrong selector", "The browser agent clicked a stale selector and gave up."),
    "t6": ("Tool call schema", "The tool_call JSON did not parse: <script>alert(1)</script> then a timeout."),
    "t7": ("Nothing relevant", "A verifier passed a patch that broke the tests."),
}


@pytest.fixture
def corpus(study, other_study):
    docs = {}
    for key, (title, body) in CORPUS.items():
        docs[key] = Document.objects.create(
            study=study, kind="github_issue", external_id=key, cluster="org/repo", title=title, body=body
        )
    Document.objects.create(study=other_study, kind="github_issue", external_id="x", cluster="o/r",
                            title="Timeout elsewhere", body="timeout timeout")  # fmt: skip
    return study, docs


def found(study, text: str) -> list[str]:
    return [d.external_id for d in document_search(Document.objects.filter(study=study), text)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("timeout", {"t1", "t2", "t6"}),  # stemmed: "timeouts" matches; other studies never do
        ("TIMEOUTS", {"t1", "t2", "t6"}),
        ("timeout browser", {"t2"}),  # every word must match
        ('"rate limit"', {"t3"}),  # a phrase: "limit the rate" is not it
        ("rate limit", {"t3", "t4"}),
        ("timeout -browser", {"t1", "t6"}),  # exclusion
        ('timeout -"browser tool"', {"t1", "t6"}),
        ("the planner", {"t2"}),  # stop words are ignored, as PostgreSQL does
        ("tool_call", {"t6"}),  # punctuation splits words into a phrase
        ("planning", {"t3"}),  # "planner" is another word (stemmed: plan / planner)
        ("zebra", set()),
        ("the", set()),  # only stop words: no query, no results
        ("", set()),
    ],
)
def test_it_finds_the_same_documents_on_every_engine(corpus, text, expected):
    study, _ = corpus
    assert set(found(study, text)) == expected


def test_it_ranks_title_matches_first(corpus):
    study, _ = corpus
    ranked = found(study, "timeout")
    assert ranked[0] == "t1"  # the only one with "timeouts" in its title
    assert set(ranked[1:]) == {"t2", "t6"}


def test_it_follows_edits_and_deletions(corpus):
    study, docs = corpus
    Document.objects.filter(pk=docs["t7"].pk).update(body="Now the verifier hit a timeout too.")
    assert "t7" in found(study, "timeout")
    docs["t1"].delete()
    assert set(found(study, "timeout")) == {"t2", "t6", "t7"}


def test_the_snippets_mark_matches_and_escape_the_body(corpus):
    _, docs = corpus
    marked = snippets([docs["t6"].pk, docs["t2"].pk], "timeout")
    assert "<mark>timeout</mark>" in marked[docs["t6"].pk].lower()
    # PostgreSQL's headline drops the tag, FTS5's snippet keeps it as text: escaped either way, never markup.
    assert "<script" not in marked[docs["t6"].pk] and "alert(1)" in marked[docs["t6"].pk]
    assert "<mark>" in marked[docs["t2"].pk]
    assert snippets([], "timeout") == {} and snippets([docs["t2"].pk], "the") == {}


def test_the_parser_reads_words_phrases_and_exclusions():
    q = search_parse('Agent "rate  limit" -browser -"tool call" the')
    assert q.include == (("agent",), ("rate", "limit"))
    assert q.exclude == (("browser",), ("tool", "call"))
    assert search_parse("-browser").empty


def test_ranked_pages_follow_a_keyset_cursor(study):
    for i in range(PAGE_SIZE + 15):
        body = "timeout " * (1 + i % 7) + "and other words " * 5
        Document.objects.create(study=study, kind="github_issue", external_id=f"p{i}", cluster="o/r",
                                title=f"Issue {i}", body=body)  # fmt: skip
    qs = document_search(Document.objects.filter(study=study), "timeout")
    first = list(qs[:PAGE_SIZE])
    rest = list(search_after(qs, search_cursor(first[-1]))[:PAGE_SIZE])
    assert len(first) == PAGE_SIZE and len(rest) == 15
    assert {d.pk for d in first}.isdisjoint(d.pk for d in rest)
    ranks = [d.search_rank for d in first + rest]
    assert ranks == sorted(ranks, reverse=True)


def test_the_documents_page_shows_ranked_highlighted_matches(client, corpus, alice, django_assert_num_queries):
    study, docs = corpus
    client.force_login(alice)
    url = reverse("document_list", args=[study.slug])
    client.get(url, {"q": "timeout"})
    # session, user, membership, ranked page, snippets, episode stats: no count, no OFFSET; on PostgreSQL
    # also how many documents are still being indexed (an import's follow-up job)
    with django_assert_num_queries(6 + (connection.vendor == "postgresql")):
        html = client.get(url, {"q": "timeout"}).content.decode()
    order = re.findall(r'href="/studies/alpha/documents/(\d+)/"', html)
    assert order[0] == str(docs["t1"].pk) and len(order) == 3
    assert "<mark>" in html and "best match first" in html
    assert "<script>alert(1)</script>" not in html


def test_it_ranks_only_the_newest_candidates_and_the_page_says_so(client, corpus, alice, monkeypatch):
    study, docs = corpus
    # "rate limit" matches t3 and t4; "timeout" matches t1, t2 and t6. With one candidate (and the one
    # more that tells there were more), only the two newest matches are ranked: t1, the best match by
    # its title, is left out, the same set on every engine.
    assert set(found(study, "timeout")) == {"t1", "t2", "t6"}
    ranked = document_search(Document.objects.filter(study=study), "timeout", candidates=1)
    assert {d.external_id for d in ranked} == {"t2", "t6"}
    assert [d.search_pool for d in ranked] == [2, 2]
    client.force_login(alice)
    url = reverse("document_list", args=[study.slug])
    assert "only the newest" not in client.get(url, {"q": "timeout"}).content.decode()
    monkeypatch.setattr(search, "SEARCH_CANDIDATES", 2)
    html = client.get(url, {"q": "timeout"}).content.decode()
    assert "More than 2 documents match, and only the newest of them are ranked" in html
    assert len(re.findall(r'href="/studies/alpha/documents/(\d+)/"', html)) == 3
    assert "only the newest" not in client.get(url, {"q": "rate limit"}).content.decode()  # exactly 2: not cut
    monkeypatch.setattr(search, "SEARCH_CANDIDATES", 1)
    html = client.get(url, {"q": "timeout"}).content.decode()
    assert str(docs["t1"].pk) not in re.findall(r'href="/studies/alpha/documents/(\d+)/"', html)


def test_matches_work_as_a_subquery_of_another_table(corpus):
    """The engine's SQL names the document table as the subquery does (U0), not as the outer query would."""
    study, docs = corpus
    for doc in docs.values():
        Episode.objects.create(document=doc, study=study)
    matches = document_matches(Document.objects.filter(study=study), "timeout -browser")
    episodes = Episode.objects.filter(document_id__in=matches.values("pk"))
    assert {e.document.external_id for e in episodes} == {"t1", "t6"}


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite keeps its search index with triggers")
def test_it_repairs_the_sqlite_triggers_a_table_rebuild_dropped(corpus):
    study, docs = corpus
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER annotate_document_fts_update")
    Document.objects.filter(pk=docs["t7"].pk).update(body="a timeout, unseen by the index")
    assert "t7" not in found(study, "timeout")
    assert search_index_ensure() is True
    assert "t7" in found(study, "timeout")
    assert search_index_ensure() is False
