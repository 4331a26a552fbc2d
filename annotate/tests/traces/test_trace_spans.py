"""OTLP (GenAI conventions) and OpenInference traces: the tree, tool-call evidence and artifacts under their step."""

import json

import pytest
from django.core.exceptions import ValidationError

from annotate.imports.parsed import ImportFileError
from annotate.models import Artifact, Document, TraceStep
from annotate.tests.factories.trace_fixtures import openinference_trace, otlp_trace
from annotate.traces.parsed import TraceArtifact
from annotate.traces.selectors import trace_window
from annotate.traces.services import import_traces, trace_import_value


def steps_of(document):
    return {s.name: s for s in TraceStep.objects.filter(document=document)}


def evidence(document):
    return {r.step.name: r.evidence for r in trace_window(document).rows if r.evidence}


def test_it_builds_the_span_tree_of_an_otlp_trace(study, tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(otlp_trace()))
    result = import_traces(study=study, paths=[path], fmt="otlp")
    assert result.created == 1
    doc = Document.objects.get(study=study, kind="trace")
    assert doc.cluster == "checkout-agent"
    ordered = list(TraceStep.objects.filter(document=doc).order_by("index").values_list("name", "depth", "agent"))
    assert ordered == [
        ("invoke_agent planner", 0, "planner"),
        ("invoke_agent coder", 1, "coder"),
        ("chat gpt-4o", 2, "coder"),
        ("deploy", 3, "coder"),  # asked for by the chat, never executed: a step of its own
        ("run_tests", 2, "coder"),
        ("write_file", 2, "coder"),
        ("notify", 1, "planner"),
    ]
    s = steps_of(doc)
    assert s["invoke_agent coder"].kind == "handoff" and s["invoke_agent planner"].kind == "other"
    assert s["chat gpt-4o"].kind == "llm_call" and "fix it" in s["chat gpt-4o"].input
    assert s["run_tests"].parent_index == s["invoke_agent coder"].index
    assert s["run_tests"].output == "3 passed, 1 failed"
    assert s["write_file"].status == "error" and "PermissionError" in s["write_file"].error
    assert (s["run_tests"].ended_at - s["run_tests"].started_at).total_seconds() == pytest.approx(0.19)
    assert evidence(doc) == {"deploy": "requested", "run_tests": "ran", "write_file": "ran", "notify": "requested"}


def test_an_artifact_linked_by_span_id_evidences_the_effect_under_its_step(study):
    _, (doc,) = trace_import_value(
        study=study,
        data=otlp_trace(),
        fmt="otlp",
        artifacts=[
            TraceArtifact("diff", "app.py", content="+fix", span_id="t1"),
            TraceArtifact("test_result", "junit", content="ok", step=0),
        ],
    )
    s = steps_of(doc)
    assert Artifact.objects.get(name="app.py").step == s["run_tests"]
    assert Artifact.objects.get(name="junit").step == s["invoke_agent planner"]
    ev = evidence(doc)
    assert ev["run_tests"] == "effect" and ev["deploy"] == "requested"
    window = trace_window(doc)
    row = next(r for r in window.rows if r.step.name == "run_tests")
    assert [a.name for a in row.artifacts] == ["app.py"]


def test_an_artifact_naming_an_unknown_span_is_a_field_error_and_nothing_is_stored(study):
    with pytest.raises(ValidationError) as exc:
        trace_import_value(
            study=study,
            data=otlp_trace(),
            fmt="otlp",
            artifacts=[TraceArtifact("diff", "x", content="y", span_id="nope")],
        )
    assert "artifacts[0].span_id" in exc.value.message_dict
    assert not Document.objects.filter(study=study).exists()


def test_it_builds_the_tree_and_evidence_of_openinference_spans(study, tmp_path):
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(json.dumps(s) for s in openinference_trace()))
    import_traces(study=study, paths=[path], fmt="openinference")
    doc = Document.objects.get(study=study, kind="trace")
    ordered = list(TraceStep.objects.filter(document=doc).order_by("index").values_list("name", "depth", "kind"))
    assert ordered == [
        ("agent run", 0, "other"),
        ("ChatCompletion", 1, "llm_call"),
        ("email", 2, "tool_call"),  # requested by the LLM, no TOOL span with its id
        ("search", 1, "tool_call"),
        ("db_write", 2, "tool_call"),
    ]
    s = steps_of(doc)
    assert s["search"].output == "3 results" and s["search"].agent == "planner"
    assert s["db_write"].status == "error" and s["db_write"].error == "boom"
    assert evidence(doc) == {"email": "requested", "search": "ran", "db_write": "ran"}


def test_reimporting_spans_is_idempotent(study, tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(otlp_trace()))
    import_traces(study=study, paths=[path], fmt="otlp")
    again = import_traces(study=study, paths=[path], fmt="otlp")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 1)
    assert TraceStep.objects.count() == 7


def test_a_malformed_span_names_its_place(study, tmp_path):
    data = otlp_trace()
    data["resourceSpans"][0]["scopeSpans"][0]["spans"][3]["startTimeUnixNano"] = "yesterday"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ImportFileError, match=r"resourceSpans\[0\].scopeSpans\[0\].spans\[3\]"):
        import_traces(study=study, paths=[path], fmt="otlp")


def test_trace_text_is_never_rendered_as_html(client, study, alice, tmp_path):
    data = otlp_trace()
    data["resourceSpans"][0]["scopeSpans"][0]["spans"][3]["attributes"].append(
        {"key": "gen_ai.tool.call.result", "value": {"stringValue": "<script>alert(1)</script><img src=x onerror=1>"}}
    )
    _, (doc,) = trace_import_value(study=study, data=data, fmt="otlp")
    client.force_login(alice)
    episode = doc.episodes.get()
    html = client.get(f"/studies/{study.slug}/episodes/{episode.pk}/").content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert "<img src=x" not in html
