"""Matrices, contrasts and coverage per codebook version: a study whose codebook moved mid-study analysed under the
version it moved away from gives the numbers it gave before the move, under the new one its own; stored results
are kept apart per version (page, API and job)."""

from __future__ import annotations

import pytest

from annotate.analysis.documents import analysis_document, coverage_document
from annotate.analysis.params import ParameterError, Params
from annotate.analysis.results import analysis_key, coverage_key, result_shown, result_store
from annotate.coding.adjudication import AdjudicationValues, adjudication_save
from annotate.coding.codebook_maps import codebook_map_validate
from annotate.coding.codebook_moves import codings_migrate
from annotate.coding.services import CodingValues, coding_save
from annotate.models import ResultKind, Study
from annotate.tests.factories.codebook_revision import MAP, revised_codebook

OLD, NEW = "agentic-failures@1.0", "agentic-failures@1.1"
B = 200


@pytest.fixture
def moved(study, codebook, make_episode, codes, alice, bob):
    """Alpha coded by Alice and Bob under 1.0 (k = 2), then moved to 1.1 by the revision's map.

    Under 1.0: a renamed type, a split one, a retired one and an adjudicated split one are agreed labels in two
    cells; the merge's two types disagree. Under 1.1 the merge makes them agree; the split, the retired and the
    adjudicated one wait to be coded (or decided) again. One hold-out episode has the split type."""

    def code(ep, coder, type_code, stage, capability="actuation"):
        values = CodingValues(failure_type=codes.type(type_code), source=codes.source("agent_design"),
                              stage=codes.stage(stage), capability=codes.capability(capability))  # fmt: skip
        coding_save(episode=ep, coder=coder, values=values, version=None)

    plan = [
        ("rename", "SPC-01", "SPC-01", "iterative_execution", "primary"),
        ("split", "TUS-03", "TUS-03", "iterative_execution", "primary"),
        ("retired", "CTL-01", "CTL-01", "setup", "primary"),
        ("merge", "PLN-02", "PLN-01", "setup", "primary"),
        ("adjudicated", "TUS-03", "EXT-04", "setup", "primary"),
        ("held out", "TUS-03", "TUS-03", "setup", "holdout"),
    ]
    episodes = {}
    for title, a, b, stage, split in plan:
        ep = episodes[title] = make_episode(study, title=title, cluster=f"acme/{title.replace(' ', '-')}",
                                            split=split)  # fmt: skip
        code(ep, alice, a, stage)
        code(ep, bob, b, stage)
    adjudication_save(
        episode=episodes["adjudicated"], adjudicator=alice,
        values=AdjudicationValues(failure_type=codes.type("TUS-03"), source=codes.source("agent_design"),
                                  stage=codes.stage("setup"), capability=codes.capability("actuation"),
                                  rationale="TUS fits"),
    )  # fmt: skip
    before = {
        "analysis": analysis_document(Study.objects.get(pk=study.pk), Params(bootstrap=B), sensitivity=False),
        "coverage": coverage_document(Study.objects.get(pk=study.pk)),
    }
    target = revised_codebook(codebook)
    codings_migrate(study=study, to_codebook=target, moves=codebook_map_validate(study=study, to_codebook=target,
                    raw=MAP), user=alice)  # fmt: skip
    return Study.objects.get(pk=study.pk), before


@pytest.fixture
def as_user():
    """An APIClient with a fresh API token of `user` (as api/tests' fixture)."""
    from rest_framework.test import APIClient

    from annotate.studies.tokens import token_create

    def make(user) -> APIClient:
        _, key = token_create(user=user, name=f"test {user.username}")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return client

    return make


def _matrix(doc: dict, kind: str = "github_issue") -> list[list[int]]:
    return next(k for k in doc["kinds"] if k["kind"] == kind)["counts"]


def _types(doc: dict) -> dict[str, int]:
    section = next(k for k in doc["kinds"] if k["kind"] == "github_issue")
    return {d["code"]: d["count"] for d in section["distributions"]["failure_type"] if d["count"]}


def test_the_earlier_version_gives_the_matrices_it_gave_before_the_move_and_the_new_one_its_own(moved):
    study, before = moved
    then = analysis_document(study, Params(bootstrap=B, version=OLD), sensitivity=False)
    now = analysis_document(study, Params(bootstrap=B), sensitivity=False)
    assert then["parameters"]["codebook"] == OLD and now["parameters"]["codebook"] == NEW
    assert then["parameters"]["codebook_versions"] == now["parameters"]["codebook_versions"] == [NEW, OLD]
    assert (then["parameters"]["version"], now["parameters"]["version"]) == (OLD, None)
    # Under 1.0: the same labels, cell for cell, as the analysis before the move gave.
    assert then["data"]["fingerprint"] == before["analysis"]["data"]["fingerprint"]
    assert _matrix(then) == _matrix(before["analysis"])
    assert then["excluded"] == before["analysis"]["excluded"]
    assert then["kinds"][0]["distributions"] == before["analysis"]["kinds"][0]["distributions"]
    assert _types(then) == {"SPC-01": 1, "TUS-03": 2, "CTL-01": 1}
    assert then["excluded"]["by_reason"] == {"disagreement": 1}
    # Under 1.1: the merge agrees now; the split, retired and adjudicated ones wait.
    assert _types(now) == {"SPC-11": 1, "PLN-01": 1}
    assert now["excluded"]["by_reason"] == {"awaiting_readjudication": 1, "awaiting_recoding": 2}
    assert _matrix(now) != _matrix(then)
    assert sum(map(sum, _matrix(then))) == 4 and sum(map(sum, _matrix(now))) == 2
    assert (
        then["contrast"]["a_count"] != now["contrast"]["a_count"] or then["contrast"]["cell"] != now["contrast"]["cell"]
    )


def test_coverage_per_version(moved):
    study, before = moved
    then, now = coverage_document(study, version=OLD), coverage_document(study)
    assert then["coverage"]["covered"] == before["coverage"]["coverage"]["covered"] == 1
    assert then["parameters"]["codebook"] == OLD and now["parameters"]["codebook"] == NEW
    # Under 1.1 the hold-out episode's split type waits to be coded again: no usable label.
    assert now["coverage"]["n"] == 0 and now["excluded"]["by_reason"] == {"awaiting_recoding": 1}


def test_a_version_the_study_never_used_is_a_field_error(moved):
    from annotate.analysis.versions import version_choice

    study, _ = moved
    with pytest.raises(ParameterError) as caught:
        version_choice(study, "9.9")
    assert list(caught.value.errors) == ["version"] and OLD in caught.value.errors["version"][0]
    assert version_choice(study, "1.0").key == OLD  # the bare version names it too
    assert version_choice(study, NEW).key is None  # naming the current version is naming none: one stored result


def test_stored_results_are_kept_apart_per_version(moved, settings):
    study, _ = moved
    settings.FAULTLINE_ANALYSIS_INLINE_EPISODES = 0  # a "large" study: only stored results are shown
    now_key, then_key = analysis_key(Params(bootstrap=B)), analysis_key(Params(bootstrap=B, version=OLD))
    assert now_key != then_key and "version" not in now_key  # the current version keeps its keys of before
    assert coverage_key() != coverage_key(version=OLD)
    then = analysis_document(study, Params(bootstrap=B, version=OLD), sensitivity=False)
    result_store(study_id=study.pk, kind=ResultKind.ANALYSIS, key=then_key, document=then,
                 data_version=study.data_version)  # fmt: skip
    fail = lambda: pytest.fail("a large study is not computed in a request")  # noqa: E731
    shown_now = result_shown(study, ResultKind.ANALYSIS, now_key, fail)
    assert shown_now.doc is None and shown_now.state == "missing"  # the 1.0 result is not the 1.1 one
    shown_then = result_shown(study, ResultKind.ANALYSIS, then_key, fail)
    assert shown_then.state == "current" and shown_then.doc["parameters"]["codebook"] == OLD


def test_the_api_and_the_page_serve_the_matrices_of_the_version_asked_for(moved, vera, as_user, client):
    _, before = moved
    api = as_user(vera)
    then = api.get(f"/api/v1/studies/alpha/matrix/?bootstrap={B}&version={OLD}")
    now = api.get(f"/api/v1/studies/alpha/matrix/?bootstrap={B}")
    assert then.status_code == now.status_code == 200
    assert then.json()["parameters"]["codebook"] == OLD and now.json()["parameters"]["codebook"] == NEW
    assert _matrix(then.json()) == _matrix(before["analysis"]) != _matrix(now.json())
    bad = api.get(f"/api/v1/studies/alpha/matrix/?bootstrap={B}&version=9.9")
    assert bad.status_code == 400 and list(bad.json()) == ["version"]
    # A cell is named by the codes of the version asked for.
    assert api.get(f"/api/v1/studies/alpha/matrix/?bootstrap={B}&version=1.0&cell=setup:actuation").status_code == 200
    cov = api.get(f"/api/v1/studies/alpha/coverage/?version={OLD}")
    assert cov.status_code == 200 and cov.json()["coverage"]["covered"] == 1
    assert api.get("/api/v1/studies/alpha/coverage/?version=9.9").status_code == 400
    client.force_login(vera)
    page = client.get(f"/studies/alpha/analysis/?bootstrap={B}&version={OLD}")
    assert page.status_code == 200
    html = page.content.decode()
    assert f"Codebook version: <strong>{OLD}</strong>, an earlier version" in html
    assert f'<option value="{OLD}" selected>' in html
    assert f"?version={OLD.replace('@', '%40')}" in html  # cells list the earlier version's episodes
    assert client.get(f"/studies/alpha/analysis/?bootstrap={B}&version=9.9").status_code == 400
    csv = client.get(f"/studies/alpha/analysis/github_issue.csv?bootstrap={B}&version=1.0")
    assert csv.status_code == 200 and "alpha-github_issue-agentic-failures-1.0.csv" in csv["Content-Disposition"]
    assert (
        'filename="alpha-github_issue.csv"'
        in client.get(f"/studies/alpha/analysis/github_issue.csv?bootstrap={B}")["Content-Disposition"]
    )


def test_the_cell_list_follows_the_version(moved, vera, client):
    client.force_login(vera)
    then = client.get(f"/studies/alpha/analysis/cell/github_issue/iterative_execution/actuation/?version={OLD}")
    now = client.get("/studies/alpha/analysis/cell/github_issue/iterative_execution/actuation/")
    assert then.status_code == now.status_code == 200
    assert "split" in then.content.decode() and "split" not in now.content.decode()


def test_a_job_computes_and_stores_the_earlier_versions_matrices(
    moved, alice, as_user, eager_jobs, settings, django_capture_on_commit_callbacks
):
    _, before = moved
    api = as_user(alice)
    with django_capture_on_commit_callbacks(execute=True):
        r = api.post("/api/v1/studies/alpha/analysis/", {"bootstrap": B, "version": "1.0"}, format="json")
    assert r.status_code == 202, r.content
    from annotate.models import Job

    job = Job.objects.get(pk=r.json()["id"])
    assert job.status == "success", (job.status, job.error, job.params)
    settings.FAULTLINE_ANALYSIS_INLINE_EPISODES = 0
    then = api.get(f"/api/v1/studies/alpha/matrix/?bootstrap={B}&version=1.0")
    assert then.status_code == 200 and then["X-Faultline-Result"] == "current"
    assert _matrix(then.json()) == _matrix(before["analysis"])
    assert api.get(f"/api/v1/studies/alpha/matrix/?bootstrap={B}").status_code == 409  # not the 1.1 result


def test_a_report_of_a_moved_study_says_its_version_and_reproduces_from_its_bundle(moved, tmp_path):
    """The report's numbers are all under the codebook now, and it says so (tables, methods, provenance); its
    bundle carries the earlier version the waiting codings and adjudication name, and `reproduce` loads the export
    (pending re-adjudication included) and finds every table identical."""
    import json

    from annotate.reports.bundle import report_write
    from annotate.reports.reproduce import bundle_reproduce

    study, _ = moved
    out = tmp_path / "alpha-report"
    prov = report_write(study=study, out=out, params=Params(bootstrap=B))
    assert prov["codebook"]["label"] == NEW and prov["codebook"]["versions_used"] == [NEW, OLD]
    [earlier] = prov["codebook"]["earlier"]
    assert earlier["label"] == OLD and json.loads((out / earlier["file"]).read_text())["version"] == "1.0"
    html = (out / "report.html").read_text(encoding="utf-8")
    assert f"Final labels under codebook {NEW} (the study also used {OLD})." in html
    assert f"moved from {OLD} to {NEW}" in (out / "methods.txt").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in (out / "export" / "alpha.jsonl").read_text().splitlines()]
    waiting = next(r for r in rows if r["title"] == "adjudicated")
    assert waiting["label_reason"] == "awaiting_readjudication" and waiting["adjudication_failure_type_original"] == (
        "TUS-03"
    )
    result = bundle_reproduce(out)
    assert result.identical, result.differences[:5]
    assert "agreement" in result.compared_tables and result.compared_cells > 0
    # From a fresh clone the earlier version is not loaded: reproduce loads it from the bundle (checked here with
    # a copy of it under a version this database lacks), and names a changed file.
    from annotate.reports.bundle import canonical_sha256
    from annotate.reports.reproduce import _codebook
    from taxonomy.models import Codebook

    data = json.loads((out / earlier["file"]).read_text())
    data["version"] = "0.9"
    (out / earlier["file"]).write_text(json.dumps(data))
    found = []
    _codebook(out, {**prov, "codebook": {**prov["codebook"], "earlier": [{**earlier, "sha256": canonical_sha256(
        data)}]}}, found)  # fmt: skip
    assert found == [] and Codebook.objects.filter(name="agentic-failures", version="0.9").exists()
    _codebook(out, prov, found)
    assert [d.table for d in found] == [earlier["file"]]


def test_the_commands_take_a_codebook_version(moved):
    import io
    import json

    from django.core.management import CommandError, call_command

    out = io.StringIO()
    call_command("analyze", "--study", "alpha", "--bootstrap", str(B), "--codebook-version", "1.0", "--json",
                 stdout=out, stderr=io.StringIO())  # fmt: skip
    assert json.loads(out.getvalue())["parameters"]["codebook"] == OLD
    out = io.StringIO()
    call_command("coverage", "--study", "alpha", "--codebook-version", OLD, "--json", stdout=out)
    assert json.loads(out.getvalue())["coverage"]["covered"] == 1
    with pytest.raises(CommandError, match=r"never used codebook version '9\.9'"):
        call_command("coverage", "--study", "alpha", "--codebook-version", "9.9", stdout=io.StringIO())
