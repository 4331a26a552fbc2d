"""Links from imported data are data: only http(s) URLs are kept, and every page renders them through one filter."""

from __future__ import annotations

import json

import pytest

from annotate.coding.services import CodingValues, coding_save
from annotate.imports.parsers import iter_file
from annotate.imports.services import import_file
from annotate.models import Artifact, Document

HOSTILE = ["javascript:alert(document.domain)", " JavaScript:alert(1)", "data:text/html,<script>x</script>",
           "vbscript:msgbox(1)", "java\tscript:alert(1)", "//evil.example/x", "ftp://example.org/f"]  # fmt: skip


@pytest.mark.parametrize("url", HOSTILE)
def test_it_drops_every_scheme_but_http_and_https(url):
    from annotate.documents.render import safe_link

    assert safe_link(url) == ""


@pytest.mark.parametrize("url", ["https://doi.org/10.1/x", "http://example.org/a?b=c", "HTTPS://EXAMPLE.ORG/"])
def test_it_keeps_http_and_https_links(url):
    from annotate.documents.render import safe_link

    assert safe_link(url) == url


def _records(tmp_path, name: str, text: str) -> list:
    path = tmp_path / name
    path.write_text(text)
    return list(iter_file(path))


def test_it_keeps_no_javascript_url_from_bibtex_csv_ris_or_github(tmp_path):
    bib = _records(tmp_path, "r.bib", "@article{k1, title={T}, url={javascript:alert(1)}}\n")
    csv_ = _records(tmp_path, "r.csv", "key,title,url\nk2,T,javascript:alert(1)\n")
    ris = _records(tmp_path, "r.ris", "TY  - JOUR\nID  - k3\nTI  - T\nUR  - javascript:alert(1)\nER  - \n")
    doi = _records(tmp_path, "d.csv", 'key,title,url,doi\nk4,T,"data:text/html;base64,PHNjcmlwdD4=",10.1/abc\n')
    issue = {"number": 1, "title": "t", "repository_url": "https://api.github.com/repos/a/b",
             "html_url": "javascript:alert(1)", "url": "javascript:alert(2)"}  # fmt: skip
    gh = _records(tmp_path, "i.json", json.dumps([issue]))
    assert [r.url for r in bib + csv_ + ris] == ["", "", ""]
    assert doi[0].url == "https://doi.org/10.1/abc"  # a bad url falls back to the DOI's link
    assert gh[0].url == "https://github.com/a/b/issues/1"


def test_it_stores_no_javascript_url_through_an_import(study, tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("key,title,url\nk2,T,javascript:alert(1)\n")
    import_file(study=study, path=path)
    assert Document.objects.get(study=study).url == ""


@pytest.fixture
def hostile_everywhere(study, alice, bob, make_episode, codes):
    """A stored document with a javascript: url (data imported before this check), coded alike by two coders."""
    episode = make_episode(study, title="Hostile link")
    Document.objects.filter(pk=episode.document_id).update(url="javascript:alert(document.cookie)")
    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    coding_save(episode=episode, coder=bob, values=values, version=None)
    coding_save(episode=episode, coder=alice, values=values, version=None)
    incident = make_episode(study, kind="incident", cluster="checkout")
    Artifact.objects.create(document=incident.document, kind="log", name="l", url="javascript:alert(2)")
    return episode, incident


def test_no_page_renders_a_javascript_link(client, alice, study, hostile_everywhere):
    episode, incident = hostile_everywhere
    client.force_login(alice)
    base = f"/studies/{study.slug}"
    pages = [
        f"{base}/documents/{episode.document_id}/",
        f"{base}/episodes/{episode.pk}/",
        f"{base}/episodes/{episode.pk}/code/",
        f"{base}/episodes/{episode.pk}/adjudicate/",
        f"{base}/analysis/cell/github_issue/iterative_execution/actuation/",
        f"{base}/incidents/{incident.document_id}/",
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode().lower()
        assert "javascript:" not in html, url
    assert "Hostile link" in client.get(pages[4]).content.decode()  # the cell lists the episode, without the link


def test_the_fast_path_for_plain_links_agrees_with_the_full_check():
    """safe_link accepts a plain http(s) URL by one regex before urlsplit; on every string, hostile or
    not, the answer must be the full check's. The strings are built from the pieces that matter:
    schemes in any case, hosts, ports, userinfo, brackets, whitespace and controls, non-ASCII."""
    import random

    from annotate.documents import render

    pieces = ["http", "https", "HTTP", "javascript", "data", "ftp", ":", "//", "/", "?", "#", "@", "[", "]",
              "::1", "github.com", "a", "-", ".", "x.y", ":80", ":", ":b", "%20", " ", "\t", "\n", "\x00", "\x7f",
              "\x85", "\u2028", "é", "issues/1", "~", "\\", '"', "<", ">"]  # fmt: skip
    rng = random.Random(18)
    urls = [*HOSTILE, "https://github.com/o/r/issues/1", "https://doi.org/10.1/x"]
    urls += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 9))) for _ in range(20_000)]
    urls += ["https://" + "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6))) for _ in range(20_000)]
    disagree = [u for u in urls if render.safe_link(u) != render._safe_link_checked(u)]
    assert disagree == []
    fast = [u for u in urls if render._PLAIN_LINK.fullmatch(u)]
    assert "https://github.com/o/r/issues/1" in fast
    assert len(fast) > 1_000  # the comparison covered the fast path, not only the slow one
