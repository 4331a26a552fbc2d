"""Stored analysis results (issue 31): the data version, stale results, recomputation, and GETs that write nothing."""

from __future__ import annotations

import json

import pytest

from annotate.analysis.arrays import codebook_axes, designs, label_arrays
from annotate.analysis.bootstrap import compute_replicates, replicates_digest
from annotate.analysis.documents import analysis_document
from annotate.analysis.params import parse_params
from annotate.analysis.results import coverage_key, result_store
from annotate.coding.adjudication import AdjudicationValues, adjudication_delete, adjudication_save
from annotate.coding.services import CodingValues, coding_delete, coding_save
from annotate.documents.services import episode_split_set
from annotate.jobs.runner import job_run
from annotate.models import AnalysisResult, Coding, Episode, Job, ResultKind, Study
from annotate.studies.coding_settings import study_coding_settings_update
from annotate.tests.factories.analysis_factory import build, db_snapshot, paper_rows

QUERY = {"bootstrap": "300", "seed": "4"}


@pytest.fixture(autouse=True)
def _in_process(eager_jobs):
    """Jobs and their chunk tasks run here, as without a broker, also where CI configures Redis."""


@pytest.fixture
def paper(study, codes, alice, bob):
    build(study, paper_rows(5, 6), codes, [alice, bob])
    return study


@pytest.fixture
def large(settings):
    """Every study counts as large: nothing may be computed inside a request."""
    settings.FAULTLINE_ANALYSIS_INLINE_EPISODES = 5


def version(study) -> int:
    return Study.objects.values_list("data_version", flat=True).get(pk=study.pk)


def uncoded_episode(study) -> Episode:
    return Episode.objects.filter(study=study, codings__isnull=True, split="primary").order_by("id").first()


def values(codes, stage="planning") -> CodingValues:
    return CodingValues(failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage(stage),
                        capability=codes.capability("actuation"))  # fmt: skip


def run_started_job(client, url: str, data: dict, django_capture_on_commit_callbacks) -> Job:
    with django_capture_on_commit_callbacks(execute=False):
        r = client.post(url, data)
    assert r.status_code == 302
    job = Job.objects.order_by("-pk").first()
    return job_run(job_id=job.pk)


def comparable(doc: dict) -> str:
    """The document as bytes, without when it was generated and the job's own bookkeeping (its id and url)."""
    return json.dumps({k: v for k, v in doc.items() if k not in ("generated_at", "run")}, sort_keys=True)


# ---------------------------------------------------------------------------
# The data version


def test_it_bumps_the_data_version_with_every_write_that_changes_final_labels(paper, codes, alice, bob):
    ep = uncoded_episode(paper)
    steps = []

    def bumped(label, fn, by=1):
        before = version(paper)
        result = fn()
        steps.append((label, version(paper) - before, by))
        return result

    coding = bumped("first coding", lambda: coding_save(episode=ep, coder=bob, values=values(codes), version=None))
    bumped("unchanged save", lambda: coding_save(episode=ep, coder=bob, values=values(codes), version=1), by=0)
    coding = bumped("edit", lambda: coding_save(episode=ep, coder=bob, values=values(codes, "setup"), version=1))
    bumped("second coding", lambda: coding_save(episode=ep, coder=alice, values=values(codes), version=None))
    adj = bumped("adjudication", lambda: adjudication_save(episode=ep, adjudicator=alice, values=AdjudicationValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("setup"),
        capability=codes.capability("actuation"), rationale="the first reading")))  # fmt: skip
    bumped("adjudication withdrawn", lambda: adjudication_delete(adjudication=adj, user=alice))
    bumped("coding deleted", lambda: coding_delete(coding=Coding.objects.get(pk=coding.pk), user=bob))
    bumped("split", lambda: episode_split_set(episode=Episode.objects.get(pk=ep.pk), split="holdout"))
    bumped("same split", lambda: episode_split_set(episode=Episode.objects.get(pk=ep.pk), split="holdout"), by=0)
    settings = {"blind": True, "queue_order": "random", "queue_splits": ["primary"],
                "suggestions_after_first_choice": False}  # fmt: skip
    bumped("k", lambda: study_coding_settings_update(study=Study.objects.get(pk=paper.pk), coders_per_episode=3,
                                                     **settings))  # fmt: skip
    bumped("same k", lambda: study_coding_settings_update(study=Study.objects.get(pk=paper.pk), coders_per_episode=3,
                                                          **settings), by=0)  # fmt: skip
    assert [(label, got) for label, got, _ in steps] == [(label, by) for label, _, by in steps]


def test_it_bumps_the_data_version_with_an_import(paper):
    from annotate.imports.parsed import Record
    from annotate.imports.records import import_records

    def record(title):
        return Record(kind="github_issue", external_id="acme/x#1", url="https://github.com/acme/x/issues/1",
                      cluster="acme/x", title=title, body="It failed.")  # fmt: skip

    before = version(paper)
    import_records(study=paper, records=[record("Fails")])
    assert version(paper) == before + 1
    import_records(study=paper, records=[record("Fails")])  # unchanged: nothing written, nothing stale
    assert version(paper) == before + 1
    import_records(study=paper, records=[record("Fails at step 2")])
    assert version(paper) == before + 2


def test_a_resumable_import_bumps_the_data_version_with_each_committed_batch(paper, tmp_path):
    from annotate.imports.services import import_file_resumable

    issues = [{"html_url": f"https://github.com/acme/agent/issues/{i}", "number": i, "title": f"Tool call {i} fails",
               "body": "The search tool timed out.", "state": "open", "labels": []} for i in range(25)]  # fmt: skip
    path = tmp_path / "issues.json"
    path.write_text(json.dumps(issues))
    before, states = version(paper), []
    import_file_resumable(study=paper, path=path, writers=1, on_batch=states.append)
    assert states and version(paper) - before == len(states)


# ---------------------------------------------------------------------------
# Stale results and recomputation


def test_a_coding_after_an_analysis_marks_it_stale_and_the_recomputed_result_equals_a_fresh_one_byte_for_byte(
    paper, codes, client, alice, bob, large, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    page = client.get("/studies/alpha/analysis/", QUERY).content.decode()
    assert "Not computed yet" in page and ">Compute</button>" in page and 'class="heatmap diff"' not in page
    job = run_started_job(client, "/studies/alpha/analysis/run/", QUERY, django_capture_on_commit_callbacks)
    assert job.status == "success"
    stored = AnalysisResult.objects.get(study=paper, kind=ResultKind.ANALYSIS)
    assert stored.data_version == version(paper) and stored.job_id == job.pk
    page = client.get("/studies/alpha/analysis/", QUERY).content.decode()
    assert "Stored result" in page and "Stale" not in page and 'class="heatmap diff"' in page
    before = stored.document

    coding_save(episode=uncoded_episode(paper), coder=bob, values=values(codes), version=None)
    page = client.get("/studies/alpha/analysis/", QUERY).content.decode()
    assert "Stale" in page and ">Recompute</button>" in page and 'class="heatmap diff"' in page
    download = client.get("/studies/alpha/analysis/analysis.json", QUERY)
    assert download["X-Faultline-Result"] == "stale" and json.loads(download.content) == before
    assert AnalysisResult.objects.get(pk=stored.pk).document == before  # shown as it was, not recomputed

    job = run_started_job(client, "/studies/alpha/analysis/run/", QUERY, django_capture_on_commit_callbacks)
    stored = AnalysisResult.objects.get(pk=stored.pk)
    assert stored.data_version == version(paper) and stored.job_id == job.pk
    assert "Stored result" in client.get("/studies/alpha/analysis/", QUERY).content.decode()
    p = parse_params(codebook_axes(paper), bootstrap=300, seed=4)
    fresh = analysis_document(Study.objects.get(pk=paper.pk), p)
    assert comparable(stored.document) == comparable(fresh)
    assert comparable(before) != comparable(fresh)  # the coding changed the analysis: the check can fail
    axes = codebook_axes(paper)
    reps = compute_replicates(designs(label_arrays(paper, axes), axes), p)
    assert stored.document["run"]["replicates_sha256"] == replicates_digest(reps)


def test_a_result_computed_while_the_data_changed_is_stored_as_stale(paper, monkeypatch, client, alice, large):
    """The version is read before the labels: a change during the computation leaves the result stale."""
    from annotate.analysis import documents
    from annotate.studies.services import study_data_changed

    real = documents.coverage_document

    def changing(study, **kw):
        doc = real(study, **kw)
        study_data_changed(study_id=study.pk)  # a coder saves while the job reads
        return doc

    monkeypatch.setattr(documents, "coverage_document", changing)
    job = Job.objects.create(kind="coverage", study=paper, params={"result_key": coverage_key()})
    assert job_run(job_id=job.pk).status == "success"
    stored = AnalysisResult.objects.get(study=paper, kind=ResultKind.COVERAGE)
    assert stored.data_version == version(paper) - 1
    client.force_login(alice)
    assert "Stale" in client.get("/studies/alpha/coverage/").content.decode()


def test_it_never_replaces_a_stored_result_by_one_of_older_data(paper):
    key = coverage_key()
    assert result_store(study_id=paper.pk, kind="coverage", key=key, document={"v": 2}, data_version=2)
    assert result_store(study_id=paper.pk, kind="coverage", key=key, document={"v": 1}, data_version=1) is None
    assert AnalysisResult.objects.get(study=paper).document == {"v": 2}
    assert result_store(study_id=paper.pk, kind="coverage", key=key, document={"v": 3}, data_version=3)
    assert AnalysisResult.objects.get(study=paper).document == {"v": 3}


# ---------------------------------------------------------------------------
# Agreement and coverage follow the same rule


@pytest.mark.parametrize(
    ("page", "data"),
    [("agreement", {"bootstrap": "200", "seed": "1"}), ("coverage", {})],
)
def test_the_agreement_and_coverage_pages_follow_the_stored_result_rule(
    page, data, paper, codes, client, alice, bob, vera, settings, django_capture_on_commit_callbacks
):
    url = f"/studies/alpha/{page}/"
    client.force_login(vera)
    settings.FAULTLINE_ANALYSIS_INLINE_EPISODES = 10_000
    small = client.get(url, data).content.decode()
    assert "Computed for this view" in small and "Not computed yet" not in small
    settings.FAULTLINE_ANALYSIS_INLINE_EPISODES = 5
    html = client.get(url, data).content.decode()
    assert "Not computed yet" in html and "Ask a coder or the owner" in html and ">Compute</button>" not in html
    assert client.get(url, {**data, "format": "json"}).status_code == 404
    assert client.post(f"{url}run/", data).status_code == 403  # viewers read results, never start them
    client.force_login(bob)
    paper.blind = False  # a coder sees reports of everyone's codings only once coding is not blind
    paper.save()
    assert ">Compute</button>" in client.get(url, data).content.decode()
    job = run_started_job(client, f"{url}run/", data, django_capture_on_commit_callbacks)
    assert job.kind == page and job.status == "success" and job.result["stored"]
    html = client.get(url, data).content.decode()
    assert "Stored result" in html and "Stale" not in html
    stored = AnalysisResult.objects.get(study=paper, kind=page)
    body = client.get(url, {**data, "format": "json"}).content
    assert json.loads(body) == stored.document

    coding_save(episode=uncoded_episode(paper), coder=bob, values=values(codes), version=None)
    html = client.get(url, data).content.decode()
    assert "Stale" in html and ">Recompute</button>" in html
    job = run_started_job(client, f"{url}run/", data, django_capture_on_commit_callbacks)
    assert AnalysisResult.objects.get(pk=stored.pk).data_version == version(paper)
    assert "Stored result" in client.get(url, data).content.decode()


def test_a_second_compute_while_one_runs_joins_it(paper, client, alice, large, django_capture_on_commit_callbacks):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=False):
        client.post("/studies/alpha/coverage/run/")
        client.post("/studies/alpha/coverage/run/")
    assert Job.objects.filter(kind="coverage").count() == 1
    html = client.get("/studies/alpha/coverage/").content.decode()
    job = Job.objects.get(kind="coverage")
    assert f'id="job-{job.pk}"' in html and "Being computed" in html and ">Compute</button>" not in html


# ---------------------------------------------------------------------------
# A GET writes nothing


@pytest.mark.parametrize("inline", [5, 10_000], ids=["large", "small"])
def test_a_get_of_any_analysis_page_or_endpoint_writes_nothing(paper, codes, client, alice, bob, settings, inline):
    settings.FAULTLINE_ANALYSIS_INLINE_EPISODES = inline
    # One stale stored result (the analysis), the others missing.
    result_store(study_id=paper.pk, kind="analysis", key="{}", document={"stale": True}, data_version=0)
    coding_save(episode=uncoded_episode(paper), coder=bob, values=values(codes), version=None)
    client.force_login(alice)
    before = db_snapshot(), version(paper), list(AnalysisResult.objects.values_list("id", "data_version"))
    for url in ("/studies/alpha/analysis/?bootstrap=300", "/studies/alpha/agreement/?bootstrap=200",
                "/studies/alpha/coverage/", "/studies/alpha/coverage/?format=json",
                "/api/v1/studies/alpha/matrix/?bootstrap=300", "/api/v1/studies/alpha/agreement/?bootstrap=200",
                "/api/v1/studies/alpha/coverage/"):  # fmt: skip
        r = client.get(url)
        assert r.status_code in (200, 404, 409), (url, r.status_code)
    assert (db_snapshot(), version(paper), list(AnalysisResult.objects.values_list("id", "data_version"))) == before


def test_the_api_serves_the_stored_result_marked_as_such(paper, codes, alice, bob, large):
    from rest_framework.test import APIClient

    from annotate.studies.tokens import token_create

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='results')[1]}")
    r = client.get("/api/v1/studies/alpha/coverage/")
    assert r.status_code == 409 and "too large" in r.json()["detail"]
    job = Job.objects.create(kind="coverage", study=paper, params={"result_key": coverage_key()})
    job_run(job_id=job.pk)
    r = client.get("/api/v1/studies/alpha/coverage/")
    assert r.status_code == 200 and r["X-Faultline-Result"] == "current"
    assert r["X-Faultline-Data-Version"] == str(version(paper))
    coding_save(episode=uncoded_episode(paper), coder=bob, values=values(codes), version=None)
    r = client.get("/api/v1/studies/alpha/coverage/")
    assert r.status_code == 200 and r["X-Faultline-Result"] == "stale"
    assert r.json() == AnalysisResult.objects.get(study=paper).document
