"""Langfuse and Phoenix exports as trace formats: the same command, API and upload as every other format, real
Langfuse downloads from the corpus mapped as the corpus test states, Phoenix exports mapped as the OpenInference
spans they hold, and bad files refused with the problem named and nothing written."""

from __future__ import annotations

import json
import re
from collections import Counter
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotate.models import Document, Job, TraceStep
from annotate.tests.factories.trace_fixtures import (
    langfuse_sdk_trace,
    openinference_trace,
    otlp_trace,
    phoenix_api_spans,
    phoenix_dataframe_records,
)
from annotate.tests.traces.corpus_data import CORPUS
from annotate.tests.traces.test_trace_corpus import CASES
from annotate.traces.parsers import FORMATS, parse_trace_value

URL = "/api/v1/studies/alpha/traces/"
REAL = ["openai-agents-2025-09-30.json", "pydantic-ai-tools-2025-12-04.json", "agno-2025-06-11.json"]


@pytest.fixture
def eager_jobs(monkeypatch):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


def api_as(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def stored(doc) -> list[TraceStep]:
    return list(TraceStep.objects.filter(document=doc).order_by("index"))


def assert_as_the_corpus_states(doc, file):
    case = next(c for c in CASES if c.file == file)
    steps = stored(doc)
    assert len(steps) == case.steps, file
    assert dict(Counter(s.kind for s in steps)) == case.kinds, file
    assert list(dict.fromkeys(s.agent for s in steps if s.agent)) == case.agents, file
    assert sum(1 for s in steps if not s.agent) == case.agentless, file
    tools = [(s.name, "ran" if s.ran else "requested") for s in steps if s.kind == "tool_call"]
    assert tools == case.tools, file


def trace_id(file) -> str:
    return json.loads((CORPUS / file).read_text())["trace"]["id"]


def step_key(steps):
    return [(s.index, s.parent_index, s.agent, str(s.kind), s.name, s.input, s.output, s.ran, s.status, s.error,
             s.started_at, s.ended_at) for s in steps]  # fmt: skip


# ------------------------------------------------------------------ Langfuse


def test_the_command_imports_real_langfuse_downloads_as_the_corpus_states(study):
    out = StringIO()
    call_command("import_traces", "--study", "alpha", "--format", "langfuse", *[str(CORPUS / f) for f in REAL],
                 stdout=out, stderr=StringIO())  # fmt: skip
    assert "3 created" in out.getvalue() or '"created": 3' in out.getvalue(), out.getvalue()
    for file in REAL:
        doc = Document.objects.get(study=study, external_id=f"langfuse:{trace_id(file)}")
        assert doc.meta["format"] == "langfuse"
        assert doc.title == json.loads((CORPUS / file).read_text())["trace"]["name"]
        assert_as_the_corpus_states(doc, file)
    agno = Document.objects.get(external_id=f"langfuse:{trace_id('agno-2025-06-11.json')}")
    sdk_chat = [s for s in stored(agno) if s.name == "chat gpt-4o-mini"]
    # Langfuse's own SDK wrote these two: no attributes, so their Langfuse fields make them model calls.
    assert [s.kind for s in sdk_chat] == ["llm_call", "llm_call"]
    assert sdk_chat[1].output.startswith("To find out what's currently trending on Twitter")
    assert sdk_chat[1].detail["model"] == "gpt-4o-mini" and sdk_chat[1].detail["total_tokens"] == 888
    again = StringIO()
    call_command("import_traces", "--study", "alpha", "--format", "langfuse", str(CORPUS / REAL[0]),
                 stdout=again, stderr=StringIO())  # fmt: skip
    assert Document.objects.filter(study=study).count() == 3  # re-import: upserted, nothing new


def test_the_command_reads_langfuse_json_lines_and_refuses_a_bad_file_whole(study, tmp_path):
    lines = tmp_path / "traces.jsonl"
    lines.write_text("\n".join((CORPUS / f).read_text().replace("\n", " ") for f in REAL[:2]))
    call_command("import_traces", "--study", "alpha", "--format", "langfuse", str(lines), stdout=StringIO(),
                 stderr=StringIO())  # fmt: skip
    assert Document.objects.filter(study=study, meta__format="langfuse").count() == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.json").write_text((CORPUS / REAL[2]).read_text())
    broken = json.loads((CORPUS / REAL[2]).read_text())
    broken["observations"][3]["startTime"] = "yesterday"
    broken["trace"]["id"] = broken["observations"][0]["traceId"] = "other"
    (bad / "b.json").write_text(json.dumps(broken))
    with pytest.raises(CommandError, match=r"b\.json observation 4: startTime is not an ISO 8601 time.*nothing was"):
        call_command("import_traces", "--study", "alpha", "--format", "langfuse", str(bad), stdout=StringIO(),
                     stderr=StringIO())  # fmt: skip
    assert Document.objects.filter(study=study).count() == 2  # a.json, read first, was not kept either


def test_the_api_imports_a_langfuse_sdk_trace_with_its_model_usage_and_error(study, alice):
    response = api_as(alice).post(URL, {"format": "langfuse", "data": langfuse_sdk_trace()}, format="json")
    assert response.status_code == 201, response.content
    doc = Document.objects.get(pk=response.json()["traces"][0]["document"])
    assert doc.title == "refund-bot" and doc.external_id == "langfuse:lf-trace-1"
    assert doc.meta["langfuse"] == {"userId": "u-7", "sessionId": "s-1", "tags": ["prod"],
                                    "timestamp": "2026-02-01T10:00:00.000Z"}  # fmt: skip
    steps = {s.name: s for s in stored(doc)}
    assert [(s.name, s.kind, s.agent) for s in stored(doc)] == [
        ("refund_agent", "other", "refund_agent"),
        ("chat", "llm_call", "refund_agent"),
        ("lookup_order", "tool_call", "refund_agent"),
        ("issue_refund", "other", "refund_agent"),
    ]
    chat = steps["chat"]
    assert chat.input == "system: You issue refunds.\nuser: refund order 42"
    assert chat.output == "assistant: Looking the order up first."
    assert (chat.detail["model"], chat.detail["total_tokens"], chat.detail["cost"]) == ("gpt-4o-mini", 42, 0.00021)
    assert steps["lookup_order"].ran and steps["lookup_order"].output == '{"status": "shipped"}'
    assert steps["issue_refund"].status == "error" and steps["issue_refund"].error == "payment gateway timeout"


def test_the_api_imports_langfuses_observation_list_as_one_document_per_trace(study, alice):
    first = langfuse_sdk_trace()["observations"]
    first[1] = {
        **first[1],
        "usageDetails": None,
        "usage": {"promptTokens": 7, "completionTokens": 5, "totalTokens": 12},
    }
    second = [
        {**o, "traceId": "lf-trace-2", "id": f"2{o['id']}", "parentObservationId": o["parentObservationId"] and "2a"}
        for o in first
    ]
    body = {"data": first + second, "meta": {"page": 1, "limit": 50, "totalItems": 8, "totalPages": 1}}
    response = api_as(alice).post(URL, {"format": "langfuse", "data": body}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["created"] == 2
    assert {d.external_id for d in Document.objects.filter(study=study)} == {
        "langfuse:lf-trace-1",
        "langfuse:lf-trace-2",
    }


@pytest.mark.parametrize(
    ("fmt", "data", "message"),
    [
        ("langfuse", {"trace": {"id": "t", "name": "x"}}, "has no 'observations' list"),
        ("langfuse", {"id": "t", "observations": ["o1", "o2"]}, "observations are only ids"),
        ("langfuse", {"trace": {"id": "t"}, "observations": []}, "holds no observations"),
        ("langfuse", {"trace": {"id": "t"}, "observations": [{"id": "o1"}]}, "observation 1: an observation needs"),
        ("langfuse", [1, 2], "observation 1: an observation must be an object"),
        ("phoenix", {"traces": []}, "expected Phoenix spans"),
        ("phoenix", {"data": [], "next_cursor": None}, "holds no spans"),
        ("phoenix", {"data": [{"name": "x", "span_kind": "LLM"}]}, "span 1: a span needs context.trace_id"),
        ("phoenix", [{"name": "x", "context": {"trace_id": "t", "span_id": "s"}, "start_time": "soon"}],
         "start_time is not an ISO 8601 time"),
    ],
)  # fmt: skip
def test_a_malformed_export_is_a_400_naming_the_problem_and_writes_nothing(study, alice, fmt, data, message):
    response = api_as(alice).post(URL, {"format": fmt, "data": data}, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["data"]
    assert any(message in e for e in (errors if isinstance(errors, list) else [errors])), errors
    assert not Document.objects.exists() and not TraceStep.objects.exists()


# ------------------------------------------------------------------ Phoenix


def test_phoenix_exports_map_as_the_openinference_spans_they_hold():
    (expected,) = parse_trace_value(openinference_trace(), "openinference", "x")
    assert {str(s.kind) for s in expected.steps} == {"other", "llm_call", "tool_call"}
    for export in (phoenix_api_spans(), phoenix_dataframe_records()):
        (record,) = parse_trace_value(export, "phoenix", "x")
        assert step_key(record.steps) == step_key(expected.steps)
        assert record.record.external_id == "phoenix:oi-trace-1"


def test_phoenixs_otlp_endpoint_maps_as_the_otlp_it_is():
    def snake(v):
        if isinstance(v, dict):
            return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): snake(x) for k, x in v.items()}
        return [snake(x) for x in v] if isinstance(v, list) else v

    data = otlp_trace()
    spans = [s for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    (expected,) = parse_trace_value(data, "otlp", "x")
    (record,) = parse_trace_value({"data": snake(spans), "next_cursor": None}, "phoenix", "x")
    assert step_key(record.steps) == step_key(expected.steps)


def test_the_api_takes_a_phoenix_file_as_a_job(study, alice, settings, tmp_path,
                                              django_capture_on_commit_callbacks, eager_jobs):  # fmt: skip
    settings.MEDIA_ROOT = tmp_path
    upload = SimpleUploadedFile("spans.json", json.dumps(phoenix_api_spans()).encode())
    with django_capture_on_commit_callbacks(execute=True):
        response = api_as(alice).post(URL, {"file": upload, "format": "phoenix"}, format="multipart")
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.status == "success", job.error
    doc = Document.objects.get(study=study)
    assert [(s.name, s.kind, s.ran) for s in stored(doc) if s.kind == "tool_call"] == [
        ("email", "tool_call", False),
        ("search", "tool_call", True),
        ("db_write", "tool_call", True),
    ]


# ------------------------------------------------------------------ the upload form


def test_the_upload_form_offers_every_format(client, study, alice):
    client.force_login(alice)
    html = client.get(reverse("study_overview", args=["alpha"])).content.decode()
    form = html[html.index('id="trace-format"') :]
    form = form[: form.index("</select>")]
    assert re.findall(r'<option value="(\w+)"', form) == list(FORMATS)


@pytest.mark.parametrize("fmt", ["langfuse", "phoenix"])
def test_the_upload_form_imports_each_export_and_fails_a_bad_one_whole(
    client, study, alice, settings, tmp_path, django_capture_on_commit_callbacks, eager_jobs, fmt
):
    settings.MEDIA_ROOT = tmp_path
    client.force_login(alice)
    if fmt == "langfuse":
        good = SimpleUploadedFile(REAL[0], (CORPUS / REAL[0]).read_bytes())
        bad = SimpleUploadedFile("bad.json", json.dumps({"trace": {"id": "t"}}).encode())
    else:
        good = SimpleUploadedFile("spans.jsonl", "\n".join(json.dumps(r) for r in phoenix_dataframe_records()).encode())
        bad = SimpleUploadedFile("bad.jsonl", b'{"name": "x", "span_kind": "LLM"}\n')
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("trace_upload", args=["alpha"]), {"file": good, "format": fmt}, HTTP_HX_REQUEST="true")
    job = Job.objects.get(kind="import_traces")
    assert job.status == "success" and job.result["created"] == 1 and job.result["format"] == fmt, job.error
    doc = Document.objects.get(study=study)
    if fmt == "langfuse":
        assert_as_the_corpus_states(doc, REAL[0])
    else:
        assert TraceStep.objects.filter(document=doc).count() == 5
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("trace_upload", args=["alpha"]), {"file": bad, "format": fmt}, HTTP_HX_REQUEST="true")
    failed = Job.objects.filter(kind="import_traces").latest("pk")
    assert failed.status == "failed" and failed.error.startswith(bad.name) and "Nothing was imported" in failed.error
    assert Document.objects.filter(study=study).count() == 1
