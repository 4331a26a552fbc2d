"""The documents list, the document page, splitting into episodes, and the import upload."""

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.urls import reverse

from annotate.coding.services import CodingValues, coding_save
from annotate.imports.services import import_file
from annotate.models import Document, Episode, Job

SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples"


@pytest.fixture
def eager_jobs(monkeypatch):
    """Run jobs in-process, as without a broker, even when CI configures Redis."""
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


@pytest.fixture
def imported(study):
    from annotate.documents.services import search_vectors_fill

    import_file(study=study, path=SAMPLES / "github_issues.json")
    import_file(study=study, path=SAMPLES / "literature.bib")
    search_vectors_fill(study_id=study.pk)  # the follow-up job's work (PostgreSQL defers it; SQLite: a no-op)
    return study


def listing(client, **query):
    return client.get(reverse("document_list", args=["alpha"]), query).content.decode()


def ids(html):
    return sorted(int(pk) for pk in re.findall(r'<a href="/studies/alpha/documents/(\d+)/">', html))


def test_members_see_the_documents_and_others_do_not(client, imported, vera, charlie):
    client.force_login(vera)
    assert "82 documents" in listing(client)
    client.force_login(charlie)
    assert client.get(reverse("document_list", args=["alpha"])).status_code == 404


def test_it_filters_by_kind_cluster_label_search_coding_and_split(client, imported, alice, bob, codes):
    client.force_login(alice)
    assert "24 documents match" in listing(client, kind="literature")
    assert "15 documents match" in listing(client, cluster="acme-agents/taskpilot")
    # Full-text, case-insensitive, stemmed, over title and body: "token" and "tokens" as words, in titles and bodies.
    word = re.compile(r"(?<![^\W_])tokens?(?![^\W_])", re.I)
    either = [d for d in Document.objects.filter(study=imported) if word.search(d.title) or word.search(d.body)]
    in_title = [d for d in either if word.search(d.title)]
    assert 0 < len(in_title) < len(either) <= 50
    assert ids(listing(client, q="TOKEN")) == sorted(d.pk for d in either)
    episode = Episode.objects.get(document__external_id="acme-agents/taskpilot#1378")
    values = CodingValues(
        failure_type=codes.type("TUS-03"),
        source=codes.source("llm"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )
    coding_save(episode=episode, coder=bob, values=values, version=None)
    Episode.objects.filter(document__external_id="cemri2025mast_fm12").update(split="holdout")
    assert ids(listing(client, coded="coded")) == [episode.document_id]
    assert "81 documents match" in listing(client, coded="uncoded")
    holdout = Document.objects.get(external_id="cemri2025mast_fm12")
    assert ids(listing(client, split="holdout")) == [holdout.pk]


def test_the_count_stops_at_its_limit(client, imported, alice, monkeypatch):
    from annotate.documents import selectors as document_selectors

    client.force_login(alice)
    monkeypatch.setattr(document_selectors, "COUNT_LIMIT", 24)
    assert "24 documents match" in listing(client, kind="literature")  # exactly at the limit: exact
    assert "24+ documents match" in listing(client, kind="github_issue")
    assert "24+ documents" in listing(client)
    assert "15 documents match" in listing(client, cluster="acme-agents/taskpilot")


def test_the_label_filter_matches_whole_labels(client, imported, alice):
    client.force_login(alice)
    expected = Document.objects.filter(study=imported, labels__contains=",auth,").count()
    assert expected and f"{expected} document" in listing(client, label="auth")
    assert "0 documents match" in listing(client, label="aut")


def test_cursor_pagination_walks_every_document_once(client, imported, alice):
    client.force_login(alice)
    seen, html = [], listing(client)
    while True:
        seen += re.findall(r'href="/studies/alpha/documents/(\d+)/"', html)
        after = re.search(r'rel="next" href="\?(?:[^"]*&amp;)?after=(\d+)"', html)
        if not after:
            break
        html = listing(client, after=after.group(1))
    assert len(seen) == len(set(seen)) == 82
    before = re.search(r'rel="prev" href="\?before=(\d+)"', html).group(1)
    assert len(re.findall(r'href="/studies/alpha/documents/(\d+)/"', listing(client, before=before))) == 50


def test_the_list_costs_a_fixed_number_of_queries(client, imported, alice, django_assert_num_queries):
    client.force_login(alice)
    listing(client)
    # session, user, membership, page, count, episode stats
    with django_assert_num_queries(6):
        listing(client, kind="github_issue", coded="uncoded", split="primary", label="bug")
    # A text search: ranked rows and their snippets, no count; on PostgreSQL also how many documents the
    # search_index job has still to make searchable (the page says "still indexing").
    with django_assert_num_queries(7 if connection.vendor == "postgresql" else 6):
        listing(client, q="agent")


def test_the_document_page_renders_the_sanitised_body_and_metadata(client, imported, vera):
    doc = Document.objects.get(study=imported, external_id="acme-agents/taskpilot#1315")
    client.force_login(vera)
    html = client.get(reverse("document_detail", args=["alpha", doc.pk])).content.decode()
    body = html.split('<div class="doc-body">', 1)[1].split("</article>", 1)[0]
    assert "<script" not in body.lower()
    assert "<pre><code" in body  # fenced code still renders
    assert 'href="https://github.com/acme-agents/taskpilot/issues/1315"' in html
    assert doc.meta["author"] in html and "<dt>Repository</dt><dd>acme-agents/taskpilot</dd>" in html
    assert "Split into episodes" not in html  # viewers cannot split


def test_the_huge_body_is_shown_truncated_with_a_notice(client, study, alice):
    import_file(study=study, path=SAMPLES / "bad" / "huge_body.json")
    doc = Document.objects.get(study=study)
    client.force_login(alice)
    html = client.get(reverse("document_detail", args=["alpha", doc.pk])).content.decode()
    assert "This body is 2,000,214 characters long; the first 100,000 are shown" in html
    assert len(html) < 400_000


def test_an_owner_splits_a_document_by_offsets(client, imported, alice):
    doc = Document.objects.get(study=imported, external_id="acme-agents/taskpilot#1378")
    client.force_login(alice)
    url = reverse("document_episode_add", args=["alpha", doc.pk])
    text = "Nothing ever looks at `expires_on`."
    start = doc.body.index(text)
    response = client.post(url, {"start": start, "end": start + len(text), "text": text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Episodes (2)" in response.content.decode()
    episode = doc.episodes.get(order=1)
    assert (episode.excerpt, episode.start, episode.end) == (text, start, start + len(text))
    assert episode.study_id == imported.pk
    assert episode.queue_key != 0
    # Offsets that drifted (e.g. a browser counting differently) are corrected from the text.
    second = "Restarting the worker fixes it for another hour."
    client.post(url, {"start": 0, "end": len(second), "text": second})
    assert doc.episodes.get(order=2).start == doc.body.index(second)
    # The same excerpt twice, or text that is not there, is refused without writing.
    html = client.post(url, {"start": start, "end": start + len(text), "text": text}, HTTP_HX_REQUEST="true")
    assert "already exists" in html.content.decode()
    html = client.post(url, {"start": 0, "end": 5, "text": "not in the body"}, HTTP_HX_REQUEST="true")
    assert "not in this document" in html.content.decode()
    assert doc.episodes.count() == 3


def test_an_owner_marks_an_episode_holdout_and_deletes_an_uncoded_one(client, imported, alice):
    doc = Document.objects.get(study=imported, external_id="acme-agents/taskpilot#1378")
    first = doc.episodes.get()
    client.force_login(alice)
    client.post(reverse("document_episode_split", args=["alpha", doc.pk, first.pk]), {"split": "holdout"})
    first.refresh_from_db()
    assert first.split == "holdout"
    delete = reverse("document_episode_delete", args=["alpha", doc.pk, first.pk])
    html = client.post(delete, HTTP_HX_REQUEST="true").content.decode()
    assert "keeps at least one episode" in html
    client.post(reverse("document_episode_add", args=["alpha", doc.pk]), {"start": 0, "end": 20})
    client.post(delete)
    assert list(doc.episodes.values_list("order", flat=True)) == [1]


def test_coders_and_viewers_cannot_split_or_change_splits(client, imported, bob, vera):
    doc = Document.objects.get(study=imported, external_id="acme-agents/taskpilot#1378")
    episode = doc.episodes.get()
    for user in (bob, vera):
        client.force_login(user)
        add = reverse("document_episode_add", args=["alpha", doc.pk])
        assert client.post(add, {"start": 0, "end": 9}).status_code == 403
        url = reverse("document_episode_split", args=["alpha", doc.pk, episode.pk])
        assert client.post(url, {"split": "holdout"}).status_code == 403
    assert doc.episodes.count() == 1 and doc.episodes.get().split == "primary"


def test_the_upload_runs_an_import_job_and_deletes_the_file(
    client, study, alice, settings, tmp_path, django_capture_on_commit_callbacks, eager_jobs
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(alice)
    upload = SimpleUploadedFile("issues.json", (SAMPLES / "github_issues.json").read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("study_import", args=["alpha"]), {"file": upload}, HTTP_HX_REQUEST="true")
    job = Job.objects.get(kind="import")
    html = client.get(reverse("job_status", args=[job.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert job.status == "success", job.error
    assert job.result["created"] == 58 and job.result["skipped"] == 2
    assert job.result["skip_reasons"] == "pull request: 2" and job.result["file"] == "issues.json"
    assert f'id="job-{job.pk}"' in html and "created" in html
    assert Document.objects.filter(study=study).count() == 58
    assert not any((tmp_path / "imports").iterdir())


def test_a_bad_upload_fails_the_job_with_the_record_named(
    client, study, alice, settings, tmp_path, django_capture_on_commit_callbacks, eager_jobs
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(alice)
    upload = SimpleUploadedFile("wrong.json", (SAMPLES / "bad" / "wrong_types.json").read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("study_import", args=["alpha"]), {"file": upload})
    job = Job.objects.get(kind="import")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.status == "failed" and "wrong.json: record 2" in job.error
    assert job.error.endswith("Nothing was imported.")
    assert "record 2, line 63 (openloop/loopkit#446)" in client.get(response["Location"]).content.decode()
    assert not Document.objects.exists()


def test_uploads_over_the_limit_or_of_unknown_type_are_refused(client, study, alice, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.FAULTLINE_MAX_UPLOAD_MB = 1
    client.force_login(alice)
    url = reverse("study_import", args=["alpha"])
    big = SimpleUploadedFile("huge.json", (SAMPLES / "bad" / "huge_body.json").read_bytes())
    response = client.post(url, {"file": big})
    assert response.status_code == 400
    assert "uploads are limited to 1 MB (FAULTLINE_MAX_UPLOAD_MB)" in response.content.decode()
    html = client.post(url, {"file": SimpleUploadedFile("a.exe", b"MZ")}, HTTP_HX_REQUEST="true").content.decode()
    assert "not a supported file" in html
    assert not Job.objects.exists() and not (tmp_path / "imports").exists()


def test_only_owners_can_upload(client, study, bob):
    client.force_login(bob)
    upload = SimpleUploadedFile("issues.json", b"[]")
    assert client.post(reverse("study_import", args=["alpha"]), {"file": upload}).status_code == 403


def test_the_overview_links_documents_and_shows_the_upload_to_owners(client, study, alice, bob):
    client.force_login(alice)
    html = client.get(reverse("study_overview", args=["alpha"])).content.decode()
    assert reverse("document_list", args=["alpha"]) in html and 'id="import-panel"' in html
    client.force_login(bob)
    html = client.get(reverse("study_overview", args=["alpha"])).content.decode()
    assert reverse("document_list", args=["alpha"]) in html and 'id="import-panel"' not in html


def test_a_search_combines_with_the_other_filters(client, imported, alice):
    client.force_login(alice)
    found = set(ids(listing(client, q="agent")))
    literature = set(Document.objects.filter(study=imported, kind="literature").values_list("pk", flat=True))
    assert found & literature and found - literature
    assert set(ids(listing(client, q="agent", kind="literature"))) == found & literature
    assert set(ids(listing(client, q="agent", coded="uncoded", split="primary"))) == found


def test_each_row_links_the_document_its_cluster_and_labels_and_counts_its_episodes(client, imported, alice, bob,
                                                                                    codes):  # fmt: skip
    doc = Document.objects.get(external_id="acme-agents/taskpilot#1378")
    Document.objects.filter(pk=doc.pk).update(title="T" * 130, labels=",bug,needs info,")
    episode = doc.episodes.get()
    coding_save(episode=episode, coder=bob, version=None, values=CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    ))  # fmt: skip
    Episode.objects.create(document=doc, study=imported, order=1, split="holdout", excerpt="x", start=0, end=1)
    client.force_login(alice)
    html = listing(client, cluster="acme-agents/taskpilot")
    row = next(r for r in html.split("<tr>") if f'documents/{doc.pk}/"' in r)
    assert f'<a href="/studies/alpha/documents/{doc.pk}/">{"T" * 119}…</a>' in row  # truncated as truncatechars
    assert '<span class="muted small">acme-agents/taskpilot#1378</span>' in row
    assert "<td>GitHub issue</td>" in row
    assert '<a href="?cluster=acme-agents/taskpilot">acme-agents/taskpilot</a>' in row
    badges = '<a class="badge" href="?label=bug">bug</a> <a class="badge" href="?label=needs%20info">needs info</a> '
    assert badges in row
    assert '<td>2 · <span class="badge ok">1 coded</span> · <span class="badge warn">1 hold-out</span></td>' in row


def test_the_rows_shorten_titles_exactly_as_djangos_truncator_does():
    """The documents list shortens titles and repositories without Truncator's walk when they are short and in
    NFC; every string, short or long, composed or not, combining marks included, comes out as Truncator's."""
    import random
    import unicodedata

    from django.utils.text import Truncator

    from annotate.views.documents import _chars

    pieces = ["a", "Z", " ", "é", "e\u0301", "\u0301", "한", "\u1100\u1161", "😀", "ﬁ", "Å", "A\u030a", "…", "<b>"]
    rng = random.Random(18)
    texts = ["", "x" * 40, "x" * 41, "x" * 120, "x" * 121, "e\u0301" * 40, unicodedata.normalize("NFD", "é" * 39)]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 60))) for _ in range(5_000)]
    for text in texts:
        for length in (1, 40, 120):
            assert _chars(text, length) == Truncator(text).chars(length), (text, length)
