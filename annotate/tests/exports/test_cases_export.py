"""The cases export: one regression case per coded trace episode, steps up to the decisive one, the final
codes and attribution, the linked artifacts, and a manifest with the codebook version."""

import json

from django.core.management import call_command

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Episode
from annotate.tests.factories.trace_fixtures import openinference_trace, otlp_trace
from annotate.traces.parsed import TraceArtifact
from annotate.traces.services import trace_import_value


def values(codes, step, agent):
    return CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("agent_design"),
        stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"),
        decisive_step=step, responsible_agent=agent,
    )  # fmt: skip


def test_it_exports_coded_traces_as_regression_cases(study, alice, bob, codes, tmp_path):
    from rest_framework.test import APIClient

    _, (doc,) = trace_import_value(
        study=study, data=otlp_trace(), fmt="otlp",
        artifacts=[TraceArtifact("diff", "app.py", content="+fix", span_id="t1"),
                   TraceArtifact("log", "late.log", content="after", span_id="t3")],
    )  # fmt: skip
    trace_import_value(study=study, data=openinference_trace(), fmt="openinference")  # coded by nobody
    ep = Episode.objects.get(document=doc)
    for coder in (alice, bob):
        coding_save(episode=ep, coder=coder, values=values(codes, 4, "coder"), version=None)
    out = tmp_path / "cases.jsonl"
    call_command("export", "--study", study.slug, "--format", "cases", "--out", str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == 1
    case = json.loads(lines[0])
    assert case["label"]["failure_type"] == "TUS-03" and case["label"]["status"] == "agreed"
    assert case["attribution"] == {"decisive_step": 4, "responsible_agent": "coder"}
    assert [s["index"] for s in case["steps"]] == [0, 1, 2, 3, 4] and case["steps_total"] == 7
    assert case["steps"][4]["name"] == "run_tests" and case["steps"][4]["evidence"] == "effect"
    assert [a["name"] for a in case["artifacts"]] == ["app.py"]  # late.log belongs to a step after the decisive one
    assert case["artifacts"][0]["span_id"] == "t1"
    manifest = json.loads((tmp_path / "cases.jsonl.manifest.json").read_text())
    assert manifest["format"] == "cases" and manifest["rows"] == 1 and manifest["codebook"] == study.codebook.label

    api = APIClient()
    api.force_authenticate(alice)
    response = api.get(f"/api/v1/studies/{study.slug}/export/?format=cases")
    assert response.status_code == 200
    assert response["Content-Disposition"].endswith('.cases.jsonl"')
    body = b"".join(response.streaming_content).decode()
    assert json.loads(body.splitlines()[0]) == case
