"""NUL characters and lone surrogates in imported data: cleaned, never a raw database error.

PostgreSQL refuses NUL in text and jsonb, and no UTF-8 encoder accepts a lone
surrogate, so either one used to fail a whole import with the database's own
message (`COPY annotate_document, line 15...`). Assertions hold on any database.
"""

from __future__ import annotations

import json
import re

import pytest
from django.db import DataError

from annotate.imports.services import import_file
from annotate.incidents.services import IncidentData, incident_create
from annotate.models import Document, Job

BAD = re.compile("[\x00\ud800-\udfff]")
NUL, LONE = "\x00", "\ud800"


def _all_text(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_all_text(k), *_all_text(v))]
    if isinstance(value, list):
        return [s for v in value for s in _all_text(v)]
    return []


def _stored_text(study) -> list[str]:
    texts = []
    for doc in Document.objects.filter(study=study):
        texts += [doc.title, doc.body, doc.url, doc.cluster, doc.external_id, doc.labels]
        texts += _all_text(doc.meta) + _all_text(doc.raw)
    return texts


def _issue(n: int, **extra) -> dict:
    return {"number": n, "title": f"t{n}", "body": "b", "repository_url": "https://api.github.com/repos/a/b",
            "labels": [{"name": "bug"}], "user": {"login": "u"}, **extra}  # fmt: skip


def test_it_cleans_nul_and_lone_surrogates_in_every_field_of_a_github_import(study, tmp_path):
    issues = [_issue(n) for n in range(1, 20)]
    issues[14] = _issue(
        15, title=f"nul{NUL}in title {LONE}", body=f"body{NUL}{LONE}", labels=[{"name": f"bad{NUL}label{LONE}"}],
        user={"login": f"ev{NUL}il{LONE}"}, extra={f"key{NUL}": [f"deep{NUL}", {"x": LONE}]},
    )  # fmt: skip
    path = tmp_path / "issues.json"
    path.write_text(json.dumps(issues))  # ensure_ascii: \u0000 and \ud800 escapes, as an API would send them
    result = import_file(study=study, path=path)
    assert result.created == 19
    assert not [t for t in _stored_text(study) if BAD.search(t)]
    doc = Document.objects.get(study=study, external_id="a/b#15")
    assert doc.title == "nulin title \ufffd"
    assert doc.meta["author"] == "evil\ufffd"
    assert ",badlabel\ufffd," in doc.labels


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("r.bib", f"@article{{k1, title={{T{NUL}itle}}, author={{Sm{NUL}ith, A and Doe, B}}, abstract={{a{NUL}}}}}\n"),
        ("r.csv", f"key,title,authors,abstract,url\nk1,T{NUL}itle,Sm{NUL}ith A; Doe B,a{NUL},https://x.org/{NUL}\n"),
        ("r.ris", f"TY  - JOUR\nID  - k1{NUL}\nTI  - T{NUL}itle\nAU  - Sm{NUL}ith, A\nAB  - a{NUL}\nER  - \n"),
    ],
)  # fmt: skip
def test_it_cleans_nul_in_literature_files(study, tmp_path, name, text):
    path = tmp_path / name
    # A UTF-8 file cannot hold a lone surrogate (its bytes are refused as "not UTF-8 text"); NUL it can.
    path.write_text(text)
    result = import_file(study=study, path=path)
    assert result.created == 1
    assert not [t for t in _stored_text(study) if BAD.search(t)]
    doc = Document.objects.get(study=study)
    assert doc.title == "Title"
    assert doc.meta["authors"][0].startswith("Smith")


def failing_handler(*, job, progress):
    raise DataError('COPY annotate_document, line 15: invalid byte sequence for encoding "UTF8": 0x00')


def test_a_job_never_shows_a_database_error(study, alice, monkeypatch):
    """Whatever breaks inside the database, the job page gets a plain message, not the driver's text."""
    from annotate.jobs import registry
    from annotate.jobs import runner as jobs

    monkeypatch.setitem(registry.HANDLERS, "recount", failing_handler)
    job = jobs.job_start(kind="recount", study=study, user=alice)
    jobs.job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == "failed"
    assert "COPY" not in job.error and "annotate_document" not in job.error and "UTF8" not in job.error
    assert f"job {job.pk}" in job.error


@pytest.mark.parametrize("bad", [NUL, LONE])
def test_an_incident_trace_with_nul_or_a_lone_surrogate_is_a_400(incidents_open, bad, study, bob):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(bob)
    body = json.dumps({"study": "alpha", "service": "s", "title": "t", "description": "d",
                       "trace": {"spans": [{"name": f"x{bad}y", f"k{bad}": 1}]}})  # fmt: skip
    response = client.post("/api/v1/incidents/", body, content_type="application/json")
    assert response.status_code == 400
    assert "trace" in response.json()
    assert not Document.objects.filter(study=study).exists()
    assert not Job.objects.exists()


@pytest.mark.parametrize("field", ["title", "service", "description", "external_id"])
@pytest.mark.parametrize("bad", [NUL, LONE])
def test_an_incident_field_with_nul_or_a_lone_surrogate_is_a_400(incidents_open, bad, field, study, bob):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(bob)
    payload = {"study": "alpha", "service": "s", "title": "t", "description": "d", "external_id": "e1"}
    payload[field] = f"a{bad}b"
    response = client.post("/api/v1/incidents/", json.dumps(payload), content_type="application/json")
    assert response.status_code == 400
    assert field in response.json()
    assert not Document.objects.filter(study=study).exists()


def test_the_incident_service_refuses_a_bad_trace_by_itself(incidents_open, study, bob):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as caught:
        incident_create(study=study, user=bob, data=IncidentData(service="s", title="t", description="d",
                                                                   trace={"a": NUL}))  # fmt: skip
    assert "trace" in caught.value.message_dict
