"""The analysis endpoints: the same documents as the commands, membership, field errors, the job threshold."""

from __future__ import annotations

import pytest

from annotate.models import Job, JobStatus
from annotate.tests.factories.analysis_factory import build, paper_rows


@pytest.fixture
def paper(study, codes, alice, bob):
    build(study, paper_rows(5, 6), codes, [alice, bob])
    return study


def test_it_serves_the_matrix_document_to_a_token_holding_member(paper, vera, as_user):
    r = as_user(vera).get("/api/v1/studies/alpha/matrix/?bootstrap=300&seed=4&cell=iterative_execution:actuation")
    assert r.status_code == 200
    doc = r.json()
    assert doc["schema"] == "faultline.analysis/1"
    assert (doc["parameters"]["bootstrap"], doc["parameters"]["seed"]) == (300, 4)
    assert doc["contrast"]["cell"] == {"stage": "iterative_execution", "capability": "actuation"}
    assert [k["kind"] for k in doc["kinds"]] == ["github_issue", "literature", "incident", "trace"]
    again = as_user(vera).get("/api/v1/studies/alpha/matrix/?bootstrap=300&seed=4&cell=iterative_execution:actuation")
    assert {k: v for k, v in again.json().items() if k != "generated_at"} == {
        k: v for k, v in doc.items() if k != "generated_at"
    }


def test_it_serves_agreement_and_coverage(paper, bob, as_user):
    paper.blind = False  # a coder reads reports of everyone's codings once coding is not blind
    paper.save()
    client = as_user(bob)
    agr = client.get("/api/v1/studies/alpha/agreement/?bootstrap=200&seed=1").json()
    assert agr["schema"] == "faultline.agreement/1" and agr["parameters"]["bootstrap"] == 200
    assert {a["axis"] for a in agr["axes"]} == {"failure_type", "category", "source", "stage", "capability", "overall"}
    cov = client.get("/api/v1/studies/alpha/coverage/").json()
    assert cov["schema"] == "faultline.coverage/1" and cov["coverage"]["n"] == 3


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("bootstrap=5", "bootstrap"),
        ("bootstrap=abc", "bootstrap"),
        ("seed=-1", "seed"),
        ("cell=iterative_execution", "cell"),
        ("cell=nowhere:actuation", "cell"),
        ("contrast=github-github", "contrast"),
        ("contrast=github_issue-papers", "contrast"),
        ("cap=0", "cap"),
        ("bca=maybe", "bca"),
        ("interval=wald", "interval"),
        ("interval=wilson_deff&bca=true", "bca"),
    ],
)
def test_it_rejects_bad_parameters_with_field_errors(paper, alice, as_user, query, field):
    r = as_user(alice).get(f"/api/v1/studies/alpha/matrix/?{query}")
    assert r.status_code == 400
    assert field in r.json()


def test_it_names_the_interval_method_and_flags_cells_on_few_clusters(paper, vera, as_user):
    doc = as_user(vera).get("/api/v1/studies/alpha/matrix/?bootstrap=200&interval=jeffreys_deff").json()
    p = doc["parameters"]
    assert (p["interval"], p["interval_default"], p["difference_interval"]) == (
        "jeffreys_deff", "beta_cr2_bm", "percentile"
    )  # fmt: skip
    assert p["interval_name"].startswith("Jeffreys") and p["min_clusters"] == 5
    gh = next(k for k in doc["kinds"] if k["kind"] == "github_issue")
    assert gh["interval"] == "jeffreys_deff" and gh["interval_name"] == p["interval_name"]
    for i, row in enumerate(gh["clusters_with_records"]):
        for j, n in enumerate(row):
            assert gh["few_clusters"][i][j] == (gh["effective_clusters"][i][j] < 5)
            assert gh["effective_clusters"][i][j] <= n and (n >= 5 or gh["few_clusters"][i][j])
            if gh["counts"][i][j] == 0:
                assert gh["ci_high"][i][j] > 0  # an empty cell still gets a real upper bound
    assert any(f for row in gh["few_clusters"] for f in row)
    default = as_user(vera).get("/api/v1/studies/alpha/matrix/?bootstrap=200").json()
    assert default["parameters"]["interval"] == "beta_cr2_bm"
    gd = next(k for k in default["kinds"] if k["kind"] == "github_issue")
    assert gd["interval_name"].startswith("Korn-Graubard beta interval, cell by cell")
    n = gd["n_episodes"]
    for i, row in enumerate(gd["counts"]):
        for j, c in enumerate(row):
            assert 1 <= gd["df_upper"][i][j] <= gd["df"][i][j] <= gd["n_clusters"] - 1
            if c == 0:  # the exact binomial bound on all the kind's episodes
                assert gd["ci_high"][i][j] == pytest.approx(1 - 0.025 ** (1 / n))
    old = as_user(vera).get("/api/v1/studies/alpha/matrix/?bootstrap=200&interval=korn_graubard").json()
    assert old["parameters"]["interval"] == "beta_cr2_bm" and old["kinds"] == default["kinds"]
    r = as_user(vera).get("/api/v1/studies/alpha/matrix/?bootstrap=200&interval=svyciprop_beta").json()
    assert r["parameters"]["interval_name"].startswith('R survey::svyciprop(method = "beta")')
    bca = as_user(vera).get("/api/v1/studies/alpha/matrix/?bootstrap=200&bca=true").json()
    assert bca["parameters"]["interval"] == bca["parameters"]["difference_interval"] == "bca"
    diff = doc["differences"][0]
    assert diff["interval"] == "percentile" and len(diff["few_clusters"]) == len(gh["counts"])
    assert isinstance(doc["contrast"]["few_clusters"], bool)


def test_it_reports_agreement_methods_undefined_shares_and_ac1_categories(paper, alice, as_user):
    agr = as_user(alice).get("/api/v1/studies/alpha/agreement/?bootstrap=200&seed=1").json()
    by_axis = {a["axis"]: a for a in agr["axes"]}
    # The codebook's categories, used or not: 7 stages + not a failure; whole labels: every combination.
    assert by_axis["stage"]["n_categories"] == 8
    ft = by_axis["failure_type"]
    assert ft["n_categories"] >= ft["categories_used"]
    assert by_axis["overall"]["n_categories"] > 1000
    for axis in agr["axes"]:
        if axis["status"] != "ok":
            continue
        for key in ("percent_agreement", "fleiss_kappa", "krippendorff_alpha", "gwet_ac1"):
            e = axis[key]
            assert e["interval"] in ("percentile", "clopper_pearson_one_sided")
            assert e["one_sided"] == (e["interval"] == "clopper_pearson_one_sided")
            assert 0 <= e["undefined_share"] <= 1 and (e["warning"] != "") == (e["undefined_share"] > 0.05)


def test_it_rejects_bad_agreement_parameters(paper, alice, as_user):
    r = as_user(alice).get("/api/v1/studies/alpha/agreement/?bootstrap=1")
    assert r.status_code == 400 and "bootstrap" in r.json()


def test_it_hides_studies_from_non_members_and_anonymous_users(paper, charlie, as_user, api):
    for path in ("matrix/", "agreement/", "coverage/"):
        assert as_user(charlie).get(f"/api/v1/studies/alpha/{path}").status_code == 404
        assert api.get(f"/api/v1/studies/alpha/{path}").status_code in (401, 403)


def test_it_sends_a_large_b_to_a_job_and_serves_the_finished_result(paper, alice, as_user, settings):
    settings.FAULTLINE_BOOTSTRAP_JOB_THRESHOLD = 500
    client = as_user(alice)
    r = client.get("/api/v1/studies/alpha/matrix/?bootstrap=640&seed=2")
    assert r.status_code == 409 and "/api/v1/studies/alpha/analysis/" in r.json()["detail"]
    from annotate.jobs.runner import job_run

    job = Job.objects.create(kind="bootstrap", study=paper, params={"bootstrap": 640, "seed": 2, "chunks": 1})
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESS
    r = client.get("/api/v1/studies/alpha/matrix/?bootstrap=640&seed=2")
    assert r.status_code == 200 and r.json()["run"]["job"] == job.pk and r["X-Faultline-Result"] == "current"
    # Other parameters are another analysis.
    assert client.get("/api/v1/studies/alpha/matrix/?bootstrap=640&seed=3").status_code == 409


def test_the_schema_describes_the_analysis_endpoints(alice, as_user):
    schema = as_user(alice).get("/api/schema/?format=json").json()
    matrix = schema["paths"]["/api/v1/studies/{slug}/matrix/"]["get"]
    assert {p["name"] for p in matrix["parameters"]} >= {"bootstrap", "seed", "cell", "contrast", "cap", "bca"}
    ref = matrix["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert {"kinds", "differences", "contrast", "excluded", "parameters", "data"} <= set(component["properties"])
    assert "400" in matrix["responses"]
    for path in ("agreement", "coverage"):
        assert "200" in schema["paths"][f"/api/v1/studies/{{slug}}/{path}/"]["get"]["responses"]


def test_it_serves_agreement_per_codebook_version(paper, alice, as_user, codebook):
    from annotate.coding.codebook_maps import codebook_map_validate
    from annotate.coding.codebook_moves import codings_migrate
    from annotate.models import Study
    from annotate.tests.factories.codebook_revision import MAP, revised_codebook

    study = Study.objects.get(slug="alpha")
    target = revised_codebook(codebook)
    codings_migrate(
        study=study, to_codebook=target, user=alice,
        moves=codebook_map_validate(study=study, to_codebook=target, raw=MAP),
    )  # fmt: skip
    client = as_user(alice)
    now = client.get("/api/v1/studies/alpha/agreement/?bootstrap=200").json()
    then = client.get("/api/v1/studies/alpha/agreement/?bootstrap=200&version=1.0").json()
    assert now["parameters"]["codebook"] == "agentic-failures@1.1"
    assert then["parameters"]["codebook"] == "agentic-failures@1.0"
    assert now["parameters"]["codebook_versions"] == ["agentic-failures@1.1", "agentic-failures@1.0"]
    bad = client.get("/api/v1/studies/alpha/agreement/?version=7.7")
    assert bad.status_code == 400 and "never used codebook version" in bad.json()["version"][0]
