"""The analysis, agreement and coverage pages, the cell lists, figure downloads and the job start."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from annotate.models import Job
from annotate.tests.factories.analysis_factory import build, paper_rows


@pytest.fixture
def paper(study, codes, alice, bob):
    build(study, paper_rows(5, 6), codes, [alice, bob])
    return study


def test_it_shows_heatmaps_the_difference_and_the_sensitivity_panel(paper, client, vera, django_assert_max_num_queries):
    client.force_login(vera)
    # 25 + 3 (issue 31): the stored result, the job computing it, and the bounded episode count.
    with django_assert_max_num_queries(28):
        r = client.get("/studies/alpha/analysis/?bootstrap=300&cell=iterative_execution:actuation")
    html = r.content.decode()
    assert r.status_code == 200
    assert html.count('<table class="heatmap">') == 2  # GitHub and literature; no incidents here
    assert 'class="heatmap diff"' in html and "◆" in html
    assert 'id="sensitivity"' in html and "Leave one cluster out" in html
    assert "/studies/alpha/analysis/cell/github_issue/iterative_execution/actuation/" in html
    assert "disagreement" in html  # excluded episodes are reported with reasons


def test_it_serves_the_sensitivity_panel_as_an_htmx_fragment(paper, client, alice):
    client.force_login(alice)
    r = client.get("/studies/alpha/analysis/?bootstrap=300&cell=setup:memory", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<section id="sensitivity"')
    assert "Setup &amp; initialization \u00d7 Memory &amp; context" in html and "<html" not in html


def test_it_lists_the_episodes_of_a_cell(paper, client, alice):
    client.force_login(alice)
    r = client.get("/studies/alpha/analysis/cell/literature/planning/reasoning/")
    assert r.status_code == 200
    doc = client.get("/api/v1/studies/alpha/matrix/?bootstrap=200").json()
    lit = next(k for k in doc["kinds"] if k["kind"] == "literature")
    n = lit["counts"][2][1]
    assert r.content.decode().count("/studies/alpha/episodes/") == n and n > 0
    assert client.get("/studies/alpha/analysis/cell/literature/nowhere/reasoning/").status_code == 404


FIGURES = (
    ("github_issue", "svg", lambda b: b.lstrip().startswith(b"<?xml") and b"<svg" in b),
    ("difference", "png", lambda b: b.startswith(b"\x89PNG")),
    ("literature", "png", lambda b: b.startswith(b"\x89PNG")),
    ("difference", "svg", lambda b: b"<svg" in b),
)


def test_it_draws_figures(paper, client, alice):
    client.force_login(alice)
    for name, fmt, check in FIGURES:
        r = client.get(f"/studies/alpha/analysis/{name}.{fmt}?bootstrap=200")
        assert r.status_code == 200 and check(r.content), (name, fmt)
        assert r["Content-Disposition"] == f'attachment; filename="alpha-{name}.{fmt}"'


def test_it_downloads_csv_and_json_that_match_the_document(paper, client, alice):
    client.force_login(alice)
    doc = json.loads(client.get("/studies/alpha/analysis/analysis.json?bootstrap=200&seed=1").content)
    rows = list(
        csv.DictReader(
            io.StringIO(client.get("/studies/alpha/analysis/github_issue.csv?bootstrap=200&seed=1").content.decode())
        )
    )
    gh = next(k for k in doc["kinds"] if k["kind"] == "github_issue")
    assert len(rows) == 42
    hot = next(r for r in rows if (r["stage"], r["capability"]) == ("iterative_execution", "actuation"))
    assert int(hot["count"]) == gh["counts"][3][3] and float(hot["ci_low"]) == gh["ci_low"][3][3]
    diff = list(
        csv.DictReader(
            io.StringIO(client.get("/studies/alpha/analysis/difference.csv?bootstrap=200&seed=1").content.decode())
        )
    )
    assert {r["a"] for r in diff} == {"github_issue"} and len(diff) == 42
    assert hot["interval"] == "beta_cr2_bm" and int(hot["clusters_with_records"]) == gh["clusters_with_records"][3][3]
    assert hot["interval_name"] == gh["interval_name"] and hot["interval_name"].startswith("Korn-Graubard beta")
    assert float(hot["df"]) == gh["df"][3][3] and float(hot["df_upper"]) == gh["df_upper"][3][3]
    assert "True" in {r["few_clusters"] for r in rows}
    # The flag is the effective number of clusters below 5 (which includes fewer than 5 clusters with records).
    assert all((r["few_clusters"] == "True") == (float(r["effective_clusters"]) < 5) for r in rows)
    assert all(float(r["effective_clusters"]) <= int(r["clusters_with_records"]) for r in rows)
    assert {r["interval"] for r in diff} == {"percentile"} and "few_clusters" in diff[0]
    section = json.loads(client.get("/studies/alpha/analysis/difference.json?bootstrap=200&seed=1").content)
    assert section["difference"]["a"] == "github_issue"
    assert client.get("/studies/alpha/analysis/nothing.svg").status_code == 404
    assert client.get("/studies/alpha/analysis/github_issue.gif").status_code == 404
    assert client.get("/studies/alpha/analysis/github_issue.csv?cell=bad").status_code == 400


def test_it_hides_the_pages_from_non_members(paper, client, charlie):
    client.force_login(charlie)
    for path in (
        "analysis/",
        "agreement/",
        "coverage/",
        "analysis/github_issue.svg",
        "analysis/cell/literature/planning/reasoning/",
    ):
        assert client.get(f"/studies/alpha/{path}").status_code == 404


def test_it_offers_the_interval_methods_and_marks_cells_on_few_clusters(paper, client, alice):
    client.force_login(alice)
    html = client.get("/studies/alpha/analysis/?bootstrap=200").content.decode()
    assert '<option value="beta_cr2_bm" selected>' in html and "(default)" in html
    assert "Korn-Graubard beta interval, cell by cell: CR2 cluster variance, Bell-McCaffrey degrees of freedom" in html
    assert "exact binomial (Clopper-Pearson) bound" in html and "svyciprop" in html
    assert 'aria-label="fewer than 5 effective clusters">†</span>' in html
    # A link from before the rename still works and shows what the method now is called.
    html = client.get("/studies/alpha/analysis/?bootstrap=200&interval=korn_graubard").content.decode()
    assert '<option value="beta_cr2_bm" selected>' in html
    html = client.get("/studies/alpha/analysis/?bootstrap=200&interval=wilson_deff").content.decode()
    assert '<option value="wilson_deff" selected>' in html and "cell intervals: Wilson" in html
    r = client.get("/studies/alpha/analysis/?interval=wald")
    assert r.status_code == 400 and "interval:" in r.content.decode()


def test_it_explains_bad_parameters(paper, client, alice):
    client.force_login(alice)
    r = client.get("/studies/alpha/analysis/?cell=foo&bootstrap=3")
    assert r.status_code == 400
    assert "cell:" in r.content.decode() and "bootstrap:" in r.content.decode()


@pytest.mark.usefixtures("eager_jobs")
def test_a_large_b_runs_as_a_job_started_by_a_coder_not_a_viewer(
    paper, client, bob, vera, settings, django_capture_on_commit_callbacks
):
    settings.FAULTLINE_BOOTSTRAP_JOB_THRESHOLD = 500
    paper.blind = False  # a coder sees reports of everyone's codings only once coding is not blind
    paper.save()
    client.force_login(vera)
    page = client.get("/studies/alpha/analysis/?bootstrap=640")
    html = page.content.decode()
    assert "Not computed yet" in html and "background job" in html and "Ask a coder or the owner" in html
    assert ">Compute</button>" not in html
    assert client.post("/studies/alpha/analysis/run/", {"bootstrap": "640"}).status_code == 403
    client.force_login(bob)
    assert ">Compute</button>" in client.get("/studies/alpha/analysis/?bootstrap=640").content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        r = client.post("/studies/alpha/analysis/run/", {"bootstrap": "640", "seed": "3", "cell": "setup:memory"})
    job = Job.objects.get(kind="bootstrap")
    key = job.params.pop("result_key")
    assert job.params == {
        "bootstrap": 640, "seed": 3, "cap": 5, "bca": False, "cell": "setup:memory", "interval": "beta_cr2_bm"
    }  # fmt: skip
    assert '"bootstrap":640' in key and '"seed":3' in key
    assert r.status_code == 302 and f"job={job.pk}" in r["Location"]
    page = client.get(r["Location"])
    assert f'id="job-{job.pk}"' in page.content.decode()  # the shared progress partial
    from annotate.jobs.runner import job_run

    job_run(job_id=job.pk)
    page = client.get(r["Location"]).content.decode()
    assert "Open the result" in page and 'class="heatmap diff"' in page  # the finished job's document is shown
    assert f"?job={job.pk}" in client.get(f"/jobs/{job.pk}/").content.decode()


def test_it_shows_agreement_and_coverage(paper, client, vera):
    client.force_login(vera)
    r = client.get("/studies/alpha/agreement/?axis=stage&bootstrap=200")
    html = r.content.decode()
    assert r.status_code == 200 and "Krippendorff" in html and "alice \u00d7 bob" in html and "Confusion matrix" in html
    assert client.get("/studies/alpha/agreement/?bootstrap=nope").status_code == 400
    assert "over 8 categories" in html and "Gwet's generalised formulas" in html
    data = json.loads(client.get("/studies/alpha/agreement/?format=json&bootstrap=200").content)
    assert data["schema"] == "faultline.agreement/1"
    r = client.get("/studies/alpha/coverage/")
    assert r.status_code == 200 and "Wilson" in r.content.decode() and "need a new type" in r.content.decode()


def test_the_study_overview_links_the_analysis_pages(paper, client, vera):
    client.force_login(vera)
    html = client.get("/studies/alpha/").content.decode()
    for path in ("analysis/", "agreement/", "coverage/"):
        assert f"/studies/alpha/{path}" in html


def test_a_cell_list_pages_by_keyset(paper, alice):
    from annotate.analysis.documents import cell_episodes

    study = paper
    whole = cell_episodes(study, "literature", "planning", "reasoning")
    assert whole["total"] >= 3 and whole["next_after"] is None
    seen, after = [], 0
    while True:
        page = cell_episodes(study, "literature", "planning", "reasoning", after=after, limit=2)
        seen += [e.pk for e in page["episodes"]]
        if page["next_after"] is None:
            break
        after = page["next_after"]
    assert seen == [e.pk for e in whole["episodes"]] == sorted(seen)


def test_the_cell_page_links_its_next_page(paper, client, alice, monkeypatch):
    from annotate.analysis import documents as analysis

    real = analysis.cell_episodes
    monkeypatch.setattr("annotate.views.analysis.cell_episodes", lambda *a, **kw: real(*a, **{**kw, "limit": 2}))
    client.force_login(alice)
    html = client.get("/studies/alpha/analysis/cell/literature/planning/reasoning/").content.decode()
    after = re.search(r'rel="next" href="\?after=(\d+)"', html).group(1)
    rest = client.get(f"/studies/alpha/analysis/cell/literature/planning/reasoning/?after={after}").content.decode()
    assert "First page" in rest and html.count("/studies/alpha/episodes/") == 2
