"""Imported text reaches the document page only through the sanitiser: XSS payloads in issue
bodies, titles, labels and literature records, imported from files, never survive."""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from annotate.documents.services import search_vectors_fill
from annotate.imports.services import import_file
from annotate.models import Document

SAMPLES = Path(settings.BASE_DIR) / "fixtures" / "samples"

PAYLOADS = [
    "<script>alert(1)</script>",
    "[click me](javascript:alert(1))",
    '<a href="JaVaScRiPt:alert(1)">x</a>',
    '<img src=x onerror="alert(1)">',
    '<iframe src="https://evil.example/"></iframe>',
    "<svg><script>alert(1)</script></svg>",
    '<svg onload="alert(1)"><circle r="4"/></svg>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    '<details open ontoggle="alert(1)">x</details>',
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>',
    '<div style="background:url(javascript:alert(1))">x</div>',
    '<object data="data:text/html,<script>alert(1)</script>"></object>',
]


def rendered_body(html: str) -> str:
    return html.split('<div class="doc-body">', 1)[1].split("</article>", 1)[0].lower()


class Elements(HTMLParser):
    """The elements and attributes a browser would build (escaped text in code blocks is not one)."""

    def __init__(self, html: str):
        super().__init__()
        self.found: list[tuple[str, list]] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, attrs))


def assert_safe(fragment: str) -> None:
    for tag, attrs in Elements(fragment).found:
        assert tag not in {"script", "iframe", "object", "embed", "svg", "math", "style", "form", "input"}, tag
        for name, value in attrs:
            assert not name.startswith("on") and name != "style", (tag, name)
            if name in ("href", "src", "action", "data"):
                assert not re.match(r"\s*(javascript|data|vbscript):", value or "", re.I), (tag, name, value)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_an_imported_issue_body_renders_safely(client, study, alice, tmp_path, payload):
    item = {
        "number": 1,
        "title": f"Title {payload}",
        "body": f"Before the payload.\n\n{payload}\n\nAfter it:\n\n```\n{payload}\n```\n",
        "labels": [{"name": '"><script>alert(2)</script>'}],
        "repository_url": "https://api.github.com/repos/acme-agents/taskpilot",
        "html_url": "https://github.com/acme-agents/taskpilot/issues/1",
    }
    (tmp_path / "x.json").write_text(json.dumps([item]))
    import_file(study=study, path=tmp_path / "x.json")
    search_vectors_fill(study_id=study.pk)  # the import's follow-up job (PostgreSQL), for the search below
    doc = Document.objects.get(study=study)
    client.force_login(alice)
    html = client.get(reverse("document_detail", args=["alpha", doc.pk])).content.decode()
    body = rendered_body(html)
    assert_safe(body)
    assert "before the payload." in body
    if "<style" not in payload:  # an unclosed <style> swallows the rest of the body, which is then dropped
        assert "<pre><code>" in body  # code still renders, as escaped text
    # Titles, labels and the owner's plain-text source view are escaped, never interpreted.
    page = html.lower()
    assert page.count("<script") == page.count("<script src=")
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    listing = client.get(reverse("document_list", args=["alpha"])).content.decode().lower()
    assert listing.count("<script") == listing.count("<script src=")
    # The rows are built in Python (annotate.views.documents._document_rows): every value escaped there too,
    # in the plain list and in a search's highlighted snippets.
    for query in ({}, {"q": "payload"}):
        page = client.get(reverse("document_list", args=["alpha"]), query).content.decode().lower()
        table = page.split('<table class="table documents">', 1)[1].split("</table>", 1)[0]
        assert_safe(table)
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in table and "title " in table


def test_the_sample_issue_with_a_raw_script_renders_safely(client, study, vera):
    import_file(study=study, path=SAMPLES / "github_issues.json")
    doc = Document.objects.get(study=study, external_id="acme-agents/taskpilot#1315")
    assert "<script>alert(1)</script>" in doc.body  # stored as written
    client.force_login(vera)
    html = client.get(reverse("document_detail", args=["alpha", doc.pk])).content.decode()
    body = rendered_body(html)
    assert_safe(body)
    assert "alert(1)" not in body.split("<pre>")[0]  # the script and its content are gone from the prose


def test_a_literature_record_renders_safely(client, study, alice, tmp_path):
    path = tmp_path / "lit.csv"
    rows = ["key,title,failure_description"]
    for n, payload in enumerate(PAYLOADS):
        rows.append(f'k{n},"Paper {n}","The agent failed. {payload.replace(chr(34), chr(34) * 2)}"')
    path.write_text("\n".join(rows) + "\n")
    import_file(study=study, path=path)
    client.force_login(alice)
    for doc in Document.objects.filter(study=study):
        assert_safe(rendered_body(client.get(reverse("document_detail", args=["alpha", doc.pk])).content.decode()))
