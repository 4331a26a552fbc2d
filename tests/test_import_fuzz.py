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

from annotate.importers import ImportFileError, iter_file
from annotate.models import Document
from annotate.services.imports import import_file, import_upload_start

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
