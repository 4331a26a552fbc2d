"""Fuzzing the three importers (GitHub JSON/JSONL, BibTeX/RIS, CSV): whatever the bytes,
a parser either yields records or raises ImportFileError with a message. Never anything else."""

import contextlib
import io
import json
import zipfile

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotate.imports.parsed import ImportFileError
from annotate.imports.parsers import iter_file
from annotate.imports.services import import_file
from annotate.imports.uploads import import_upload_start
from annotate.models import Document

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25,
)
issue_like = st.fixed_dictionaries(
    {},
    optional={
        "url": st.one_of(st.text(max_size=60), st.just("https://api.github.com/repos/a/b/issues/1")),
        "repository_url": st.one_of(st.text(max_size=40), st.just("https://api.github.com/repos/a/b")),
        "html_url": st.one_of(st.text(max_size=40), st.just("https://github.com/a/b/issues/1")),
        "number": json_values, "title": json_values, "body": json_values, "labels": json_values,
        "user": json_values, "state": json_values, "pull_request": json_values, "created_at": json_values,
    },
)  # fmt: skip


def parse(tmp_path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    try:
        for _ in iter_file(path):
            pass
    except ImportFileError as exc:
        assert str(exc)


@FUZZ
@given(items=st.lists(st.one_of(issue_like, json_values), max_size=6))
def test_github_json_never_raises_anything_else(tmp_path, items):
    parse(tmp_path, "issues.json", json.dumps(items).encode())


@FUZZ
@given(data=st.binary(max_size=300))
def test_github_raw_bytes_never_raise_anything_else(tmp_path, data):
    parse(tmp_path, "issues.json", data)
    parse(tmp_path, "issues.jsonl", data)


@FUZZ
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from(["@article{", "@misc{", "title = ", "author = ", "{", "}", ",", "=", '"', "\\", "\n", "%"]),
            st.text(max_size=12),
        ),
        max_size=40,
    )
)
def test_bibtex_never_raises_anything_else(tmp_path, parts):
    parse(tmp_path, "refs.bib", "".join(parts).encode())


@FUZZ
@given(lines=st.lists(st.one_of(st.sampled_from(["TY  - JOUR", "ER  - ", "TI  - A title", "AB  - x", "ID  - k1"]),
                                st.text(max_size=30)), max_size=20))  # fmt: skip
def test_ris_never_raises_anything_else(tmp_path, lines):
    parse(tmp_path, "refs.ris", "\n".join(lines).encode())


@FUZZ
@given(rows=st.lists(st.lists(st.text(max_size=20), max_size=6), max_size=8), header=st.booleans())
def test_csv_never_raises_anything_else(tmp_path, rows, header):
    out = io.StringIO()
    if header:
        out.write("key,title,authors,year,abstract\n")
    for row in rows:
        out.write(",".join(f'"{c.replace(chr(34), chr(34) * 2)}"' for c in row) + "\n")
    parse(tmp_path, "refs.csv", out.getvalue().encode())


def test_deeply_nested_json_is_refused_with_a_message(study, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ImportFileError):
        import_file(study=study, path=path)
    assert Document.objects.count() == 0


def test_a_zip_bomb_or_archive_upload_is_refused(study, alice):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("issues.json", "[" + " " * 50_000_000 + "]")  # 50 MB of spaces, a few KB zipped
    bomb = buffer.getvalue()
    assert len(bomb) < 200_000
    with pytest.raises(ValidationError):
        import_upload_start(study=study, user=alice, uploaded_file=SimpleUploadedFile("issues.zip", bomb))
    # Renamed to look like JSON, it is still not text: refused by the parser, nothing stored.
    upload = SimpleUploadedFile("issues.json", bomb)
    with contextlib.suppress(ValidationError):
        import_upload_start(study=study, user=alice, uploaded_file=upload)
    from annotate.models import Job

    for job in Job.objects.filter(kind="import"):
        assert job.status in ("failed", "pending")
    assert Document.objects.count() == 0


# --- Malformed input through the web (issue 12): a 400 with a message, never a 500, nothing stored -----------

# Any code point, lone surrogates included (JSON's \ud800 escapes produce them), and NUL.
hostile_text = st.text(alphabet=st.characters(codec=None, categories=None), max_size=30) | st.just("\x00")
WEB = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def token_client():
    """An API client with a real token, one per user for the whole test (not per example)."""
    from rest_framework.test import APIClient

    from annotate.studies.tokens import token_create

    clients = {}

    def get(user):
        if user.pk not in clients:
            clients[user.pk] = APIClient()
            clients[user.pk].raise_request_exception = False
            clients[user.pk].credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='fuzz')[1]}")
        return clients[user.pk]

    return get


@WEB
@given(title=hostile_text, trace=json_values | st.dictionaries(hostile_text, hostile_text, max_size=3))
def test_incident_intake_never_fails_on_odd_text(incidents_open, study, bob, token_client, title, trace):
    client = token_client(bob)
    before = Document.objects.count()
    body = json.dumps({"study": "alpha", "service": "s", "title": title or "t", "description": "d", "trace": trace})
    response = client.post("/api/v1/incidents/", body, content_type="application/json")
    assert response.status_code in (201, 400), response.status_code
    if response.status_code == 400:
        assert response.json() and Document.objects.count() == before


@WEB
@given(depth=st.integers(min_value=1, max_value=60_000))
def test_nested_json_of_any_depth_is_answered(incidents_open, study, bob, token_client, depth):
    client = token_client(bob)
    trace = "[" * depth + "]" * depth
    body = '{"study": "alpha", "service": "s", "title": "t", "description": "d", "trace": ' + trace + "}"
    assert client.post("/api/v1/incidents/", body, content_type="application/json").status_code in (201, 400)


@WEB
@given(key=st.sampled_from(["q", "cluster", "label", "service", "type", "kind"]), value=hostile_text)
def test_page_and_api_queries_with_any_text_are_answered(client, alice, study, key, value):
    from urllib.parse import quote

    client.force_login(alice)
    for path in ("/studies/alpha/documents/", "/studies/alpha/incidents/", "/api/v1/studies/alpha/documents/"):
        url = f"{path}?{key}={quote(value.encode('utf-8', 'surrogatepass'), safe='')}"
        status = client.get(url).status_code
        assert status in (200, 400), (url, status)
        if "\x00" in value:
            assert status == 400


@WEB
@given(position=st.text(max_size=25) | st.integers().map(str), offset=st.text(max_size=5))
def test_any_cursor_is_a_page_or_a_400(alice, study, token_client, position, offset):
    import base64
    from urllib.parse import urlencode

    cursor = base64.b64encode(urlencode({"p": position, "o": offset}).encode()).decode()
    response = token_client(alice).get("/api/v1/studies/alpha/episodes/", {"cursor": cursor})
    assert response.status_code in (200, 400)


@WEB
@given(against=st.text(max_size=25))
def test_codebook_diff_against_anything_is_answered(client, alice, codebook, against):
    client.force_login(alice)
    assert client.get(f"/codebooks/{codebook.pk}/diff/", {"against": against}).status_code in (200, 400, 404)


@WEB
@given(title=hostile_text, label=hostile_text, login=hostile_text, extra=hostile_text)
def test_any_text_in_an_issue_is_imported_storable(study, tmp_path, title, label, login, extra):
    import re

    issue = {"number": 7, "title": title, "body": extra, "repository_url": "https://api.github.com/repos/a/b",
             "labels": [{"name": label}], "user": {"login": login}, extra or "k": [extra]}  # fmt: skip
    path = tmp_path / "one.json"
    path.write_text(json.dumps([issue]))
    import_file(study=study, path=path)
    doc = Document.objects.get(study=study, external_id="a/b#7")
    stored = json.dumps([doc.title, doc.body, doc.labels, doc.meta, doc.raw], ensure_ascii=False)
    assert not re.search("[\\x00\\ud800-\\udfff]", stored)
