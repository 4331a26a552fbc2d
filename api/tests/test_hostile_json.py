"""Hostile JSON bodies and uploads: deep nesting, NUL and lone surrogates are a 400 that says why, never a 500."""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotate.models import Document, Study
from taxonomy.models import Codebook

TRACES = "/api/v1/studies/alpha/traces/"


@pytest.fixture
def owner_api(alice, study, as_user):
    return as_user(alice)  # a real token: the request-size limit for signed-in clients applies


def _who(content) -> dict:
    return {
        "question": "q", "question_ID": "x1", "ground_truth": "a", "is_correct": False,
        "history": [
            {"role": "user", "name": "Orchestrator", "content": "start"},
            {"role": "assistant", "name": "WebSurfer", "content": content},
        ],
        "mistake_agent": "WebSurfer", "mistake_step": "1", "mistake_reason": "r",
    }  # fmt: skip


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _post_raw(client, url: str, body: str | bytes):
    return client.generic("POST", url, body, content_type="application/json")


def test_a_body_nested_fifty_thousand_deep_is_a_400(owner_api):
    r = _post_raw(owner_api, TRACES, '{"format": "whowhen", "data": ' + _nested(50_000) + "}")
    assert r.status_code == 400
    assert "nested more than" in r.json()["detail"]


def test_a_who_and_when_entry_nested_nine_hundred_deep_is_a_400(owner_api):
    body = json.dumps({"format": "whowhen", "data": _who("x")}).replace('"content": "x"', '"content": ' + _nested(900))
    r = _post_raw(owner_api, TRACES, body)
    assert r.status_code == 400 and "nested more than" in r.json()["detail"]
    assert not Document.objects.exists()


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (json.dumps({"format": "whowhen", "data": _who("a\x00b")}), "NUL"),
        (json.dumps({"format": "whowhen", "data": _who("x")}).replace('"content": "x"', '"content": "a\\ud800b"'),
         "surrogate"),
        (json.dumps({"format": "whowhen", "data": _who("x")}).replace('"content": "x"', '"content": "\\udc00"'),
         "surrogate"),
        ('{"format": "whowhen", "data": {"a\\u0000": 1}}', "NUL"),
        (b'{"format": "\xff"}', "UTF-8"),
        ('{"format": NaN}', "NaN"),
    ],
)  # fmt: skip
def test_nul_lone_surrogates_and_bad_bytes_are_a_400(owner_api, body, says):
    r = _post_raw(owner_api, TRACES, body)
    assert r.status_code == 400, r.content[:300]
    # Bad bytes and NaN are the body's error; a NUL or a lone surrogate is the field's that holds it.
    errors = r.json()
    assert says in json.dumps(errors["detail"] if says in ("UTF-8", "NaN") else errors["data"])
    assert not Document.objects.exists()


def test_a_surrogate_pair_is_one_character_and_welcome(owner_api):
    body = json.dumps({"format": "whowhen", "data": _who("smile \U0001f600")})  # ensure_ascii: "\ud83d\ude00"
    assert "\\ud83d\\ude00" in body
    r = _post_raw(owner_api, TRACES, body)
    assert r.status_code == 201, r.content[:500]


def test_the_multipart_data_field_is_held_to_the_same_rules(owner_api):
    deep = owner_api.post(TRACES, {"format": "whowhen", "data": _nested(50_000)}, format="multipart")
    assert deep.status_code == 400 and "nested more than" in json.dumps(deep.json())
    nul = owner_api.post(TRACES, {"format": "whowhen", "data": json.dumps(_who("a\x00b"))}, format="multipart")
    assert nul.status_code == 400 and "NUL" in json.dumps(nul.json())


def test_other_json_endpoints_refuse_them_too(owner_api, study):
    r = _post_raw(owner_api, "/api/v1/incidents/", '{"study": "alpha", "title": "a\\u0000", "body": "b"}')
    assert r.status_code == 400 and "title" in r.json()
    r = _post_raw(owner_api, "/api/v1/incidents/", _nested(50_000))
    assert r.status_code == 400


def test_a_trace_file_nested_too_deep_fails_its_import_with_a_clear_error(tmp_path):
    from annotate.imports.parsed import ImportFileError
    from annotate.traces.parsers import iter_trace_records

    path = tmp_path / "deep.json"
    path.write_text(json.dumps(_who("x")).replace('"content": "x"', '"content": ' + _nested(900)))
    with pytest.raises(ImportFileError, match="nested more than"):
        list(iter_trace_records(path, "whowhen"))
    path.write_text(_nested(100_000))
    with pytest.raises(ImportFileError, match="nested more than"):
        list(iter_trace_records(path, "whowhen"))


def test_a_codebook_nested_a_hundred_thousand_deep_at_study_creation_is_a_form_error(client, alice, settings):
    settings.FAULTLINE_STUDY_CREATORS = "any"
    client.force_login(alice)
    upload = SimpleUploadedFile("codebook.json", _nested(100_000).encode(), content_type="application/json")
    r = client.post(
        "/new-study/",
        {"name": "Deep", "slug": "deep", "codebook_file": upload, "coders_per_episode": 2, "queue_order": "random"},
    )
    assert r.status_code == 400 and "nested more than" in r.content.decode()
    assert not Study.objects.filter(slug="deep").exists() and not Codebook.objects.exists()


def test_the_load_codebook_command_says_so_too(tmp_path, db):
    from django.core.management import CommandError, call_command

    path = tmp_path / "deep.json"
    path.write_text(_nested(100_000))
    with pytest.raises(CommandError, match="nested more than"):
        call_command("load_codebook", str(path), stdout=io.StringIO())


def test_import_dataset_refuses_a_line_nested_too_deep(tmp_path, codebook):
    from django.core.management import CommandError, call_command

    path = tmp_path / "deep.jsonl"
    path.write_text(_nested(100_000) + "\n")
    with pytest.raises(CommandError, match="nested more than"):
        call_command("import_dataset", str(path), stdout=io.StringIO())
