"""Analysis on a study: matrices against independent counts, the measurement invariants, commands and the job."""

from __future__ import annotations

import json
import random
from io import StringIO
from itertools import pairwise

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotate.analysis.arrays import codebook_axes, label_arrays
from annotate.analysis.coders import agreement_document
from annotate.analysis.documents import analysis_document, coverage_document
from annotate.analysis.params import Params, parse_params
from annotate.jobs.runner import job_run
from annotate.models import Job, JobStatus
from annotate.studies.services import study_create
from annotate.tests.factories.analysis_factory import (
    CAPS,
    STAGES,
    Row,
    build,
    db_snapshot,
    expected_counts,
    expected_excluded,
    paper_rows,
)
from lib.tests.test_stats import slow_cluster_bootstrap

VOLATILE = ("generated_at", "run")


def stable(doc: dict, *extra: str) -> dict:
    return {k: v for k, v in doc.items() if k not in (*VOLATILE, *extra)}


@pytest.fixture
def paper(study, codes, alice, bob):
    rows = paper_rows()
    build(study, rows, codes, [alice, bob])
    return study, rows


def run_json(command: str, *args) -> dict:
    out = StringIO()
    call_command(command, *args, "--json", stdout=out, stderr=StringIO())
    return json.loads(out.getvalue())


def test_it_reproduces_independently_counted_matrices_with_analyze_json(paper):
    study, rows = paper
    doc = run_json("analyze", "--study", study.slug, "--bootstrap", "500", "--seed", "3")
    expected = expected_counts(rows)
    for kind in doc["kinds"]:
        assert kind["counts"] == expected[kind["kind"]], kind["kind"]
        n = sum(map(sum, expected[kind["kind"]]))
        assert kind["n_episodes"] == n
        if n:
            assert kind["proportions"][3][3] == pytest.approx(expected[kind["kind"]][3][3] / n)
    assert [s["code"] for s in doc["axes"]["stages"]] == STAGES
    assert [c["code"] for c in doc["axes"]["capabilities"]] == CAPS
    p = doc["parameters"]
    assert (p["bootstrap"], p["seed"], p["codebook"], p["label_rule"]) == (500, 3, "agentic-failures@1.0", "consensus")
    assert doc["data"]["as_of"] and len(doc["data"]["fingerprint"]) == 64


def test_it_counts_and_reports_excluded_episodes_with_reasons(paper):
    study, rows = paper
    doc = analysis_document(study, Params(bootstrap=200))
    want = expected_excluded(rows)
    assert doc["excluded"]["by_reason"] == dict(want)
    assert doc["excluded"]["total"] == sum(want.values())
    gh = next(k for k in doc["kinds"] if k["kind"] == "github_issue")
    assert gh["excluded"] == {"disagreement": 2, "incomplete": 1, "not_a_failure": 1, "uncoded": 1}
    # Every primary episode is either in a matrix or counted as excluded: nothing silently dropped.
    primary = sum(1 for r in rows if r.split == "primary")
    assert sum(k["n_episodes"] for k in doc["kinds"]) + doc["excluded"]["total"] == primary


def test_it_keeps_holdout_episodes_out_of_the_primary_matrices(paper):
    study, rows = paper
    doc = analysis_document(study, Params(bootstrap=200))
    lit = next(k for k in doc["kinds"] if k["kind"] == "literature")
    gh = next(k for k in doc["kinds"] if k["kind"] == "github_issue")
    assert gh["counts"][STAGES.index("delivery")][CAPS.index("actuation")] == 0  # only a hold-out episode there
    assert lit["n_episodes"] == sum(map(sum, expected_counts(rows)["literature"]))
    assert doc["excluded"]["holdout_not_in_matrices"] == 4
    cov = coverage_document(study)
    assert cov["coverage"]["covered"] == 2 and cov["coverage"]["needs_new_type"] == 1
    assert cov["excluded"]["by_reason"] == {"disagreement": 1}
    assert [e["title"] for e in cov["new_type_episodes"]] == [f"literature {rows.index(rows[-3])}"]


def test_it_gives_identical_output_for_the_same_seed(paper):
    study, _ = paper
    a = run_json("analyze", "--study", study.slug, "--bootstrap", "400", "--seed", "7")
    b = run_json("analyze", "--study", study.slug, "--bootstrap", "400", "--seed", "7")
    c = run_json("analyze", "--study", study.slug, "--bootstrap", "400", "--seed", "8")
    assert stable(a) == stable(b)
    assert stable(a)["differences"] != stable(c)["differences"]  # bootstrapped
    assert stable(a)["kinds"] == stable(c)["kinds"]  # the default cell interval is analytic: no draws
    assert stable(run_json("agreement", "--study", study.slug)) == stable(run_json("agreement", "--study", study.slug))


def test_it_gives_identical_output_when_the_rows_are_shuffled(codebook, codes, alice, bob):
    rows = paper_rows()
    shuffled = rows[:]
    random.Random(5).shuffle(shuffled)
    docs = []
    for slug, order in (("one", rows), ("two", shuffled)):
        s = study_create(slug=slug, name=slug, codebook=codebook, owner=alice, coders=[bob])
        build(s, order, codes, [alice, bob])
        docs.append((analysis_document(s, Params(bootstrap=300, seed=2)), agreement_document(s, bootstrap=200)))
    (a, agr_a), (b, agr_b) = docs
    # Ids and timestamps differ between the two studies; every statistic is the same.
    assert stable(a, "study", "data") == stable(b, "study", "data")
    assert stable(agr_a, "study") == stable(agr_b, "study")


def test_it_leaves_the_database_unchanged(paper, client, alice):
    study, _ = paper
    before = db_snapshot()
    run_json("analyze", "--study", study.slug, "--bootstrap", "300")
    run_json("agreement", "--study", study.slug)
    run_json("coverage", "--study", study.slug)
    client.force_login(alice)
    for url in ("matrix/?bootstrap=300", "agreement/?bootstrap=200", "coverage/"):
        assert client.get(f"/api/v1/studies/{study.slug}/{url}").status_code == 200
    for url in ("analysis/?bootstrap=300", "agreement/", "coverage/", "analysis/github_issue.png?bootstrap=300"):
        assert client.get(f"/studies/{study.slug}/{url}").status_code == 200
    assert db_snapshot() == before


def test_it_says_not_enough_data_for_an_empty_study(study):
    doc = run_json("analyze", "--study", study.slug, "--bootstrap", "200")
    json.dumps(doc, allow_nan=False)  # no NaN anywhere
    assert {k["status"] for k in doc["kinds"]} == {"not_enough_data"}
    assert all(k["reason"] == "no episodes" and k["proportions"] is None for k in doc["kinds"])
    assert doc["contrast"]["status"] == "not_enough_data" and doc["contrast"]["estimate"] is None
    assert all(d["status"] == "not_enough_data" for d in doc["differences"])
    agr = run_json("agreement", "--study", study.slug)
    json.dumps(agr, allow_nan=False)
    assert {a["status"] for a in agr["axes"]} == {"not_enough_data"}
    cov = run_json("coverage", "--study", study.slug)
    assert cov["coverage"]["status"] == "not_enough_data" and cov["coverage"]["value"] is None
    assert "no hold-out" in cov["coverage"]["reason"]


def test_it_says_not_enough_data_for_a_kind_without_episodes(paper):
    study, _ = paper
    doc = analysis_document(study, parse_params(codebook_axes(study), bootstrap=200, contrast="github-incident"))
    json.dumps(doc, allow_nan=False)
    inc = next(k for k in doc["kinds"] if k["kind"] == "incident")
    assert inc["status"] == "not_enough_data" and inc["ci_low"] is None
    assert doc["contrast"]["status"] == "not_enough_data"
    assert "incident" in doc["contrast"]["reason"]
    assert doc["contrast"]["sensitivity"] == []
    ok = next(k for k in doc["kinds"] if k["kind"] == "github_issue")
    assert ok["status"] == "ok" and ok["ci_low"] is not None


def test_its_intervals_match_the_slow_reference_within_monte_carlo_error(paper):
    study, _ = paper
    doc = analysis_document(study, Params(bootstrap=3000, seed=1, interval="percentile"))
    labels = label_arrays(study)
    gh = labels.kind == 0
    cells = (labels.stage * 6 + labels.capability)[gh]
    ref = slow_cluster_bootstrap(cells.tolist(), labels.cluster[gh].tolist(), 42, 3000, seed=1)
    lo, hi = np.quantile(ref, [0.025, 0.975], axis=0)
    kind = next(k for k in doc["kinds"] if k["kind"] == "github_issue")
    ours_lo, ours_hi = np.array(kind["ci_low"]).ravel(), np.array(kind["ci_high"]).ravel()
    assert ours_lo == pytest.approx(lo, abs=0.04)
    assert ours_hi == pytest.approx(hi, abs=0.04)


def test_it_reports_the_contrast_and_its_sensitivity_checks(paper):
    study, _ = paper
    params = parse_params(codebook_axes(study), bootstrap=400, cell="iterative_execution:actuation", cap="2")
    c = analysis_document(study, params)["contrast"]
    assert (c["a"], c["b"], c["cell_chosen"]) == ("github_issue", "literature", "given")
    assert c["estimate"] == pytest.approx(c["a_count"] / c["a_n"] - c["b_count"] / c["b_n"])
    assert c["ci_low"] <= c["estimate"] <= c["ci_high"]
    names = [s["check"] for s in c["sensitivity"]]
    assert names == ["leave_one_cluster_out", "cluster_cap", "drop_largest_cluster", "record_bootstrap"]
    loo = c["sensitivity"][0]
    assert loo["detail"]["most_influential"]["kind"] in ("github_issue", "literature")
    assert all(isinstance(s["keeps_sign"], bool) for s in c["sensitivity"])
    # The reversed contrast is the same number with the other sign.
    reversed_params = parse_params(
        codebook_axes(study), bootstrap=400, cell="iterative_execution:actuation", contrast="literature-github_issue"
    )
    rev = analysis_document(study, reversed_params)["contrast"]
    assert rev["estimate"] == pytest.approx(-c["estimate"])
    assert (rev["ci_low"], rev["ci_high"]) == pytest.approx((-c["ci_high"], -c["ci_low"]))


def test_it_builds_the_label_arrays_in_a_fixed_number_of_queries(study, codes, alice, bob, django_assert_num_queries):
    build(study, paper_rows(3, 3), codes, [alice, bob])
    axes = codebook_axes(study)
    # The id range; the untouched episodes counted and their hold-outs listed; the touched ids; one
    # query each for the touched episodes, their codings and adjudications; three for as_of; and on
    # PostgreSQL the serial plans (SET LOCAL inside the test's transaction).
    from django.db import connection

    with django_assert_num_queries(11 + (connection.vendor == "postgresql")) as small:
        label_arrays(study, axes)
    build(study, paper_rows(12, 20), codes, [alice, bob])
    with django_assert_num_queries(len(small.captured_queries)):
        label_arrays(study, axes)


def test_it_uses_the_single_coder_label_rule(paper, bob):
    study, _ = paper
    study.label_rule, study.label_coder = "single_coder", bob
    study.save()
    doc = analysis_document(study, Params(bootstrap=200))
    assert doc["parameters"]["label_rule"] == "single_coder" and doc["parameters"]["label_coder"] == "bob"
    assert "disagreement" not in doc["excluded"]["by_reason"]


def test_it_computes_agreement_per_axis_and_pair(paper):
    study, rows = paper
    doc = agreement_document(study, bootstrap=300)
    assert doc["coders"] == ["alice", "bob"]
    stage = next(a for a in doc["axes"] if a["axis"] == "stage")
    double = [r for r in rows if r.how not in ("uncoded", "single")]
    disagree = sum(1 for r in double if r.how in ("disagree", "adjudicated"))
    assert stage["n_episodes"] == len(double)
    assert stage["percent_agreement"]["value"] == pytest.approx(1 - disagree / len(double))
    pair = stage["pairs"][0]
    assert (pair["a"], pair["b"], pair["n"]) == ("alice", "bob", len(double))
    conf = pair["confusion"]
    assert sum(map(sum, conf["matrix"])) == len(double)
    assert "verification" in conf["labels"]
    ft = next(a for a in doc["axes"] if a["axis"] == "failure_type")
    assert ft["percent_agreement"]["value"] == 1.0  # coders differ only on the stage


def test_commands_reject_bad_input(paper):
    study, _ = paper
    bad = (
        ["--study", "nope"],
        ["--study", study.slug, "--cell", "nowhere:actuation"],
        ["--study", study.slug, "--contrast", "github-github"],
        ["--study", study.slug, "--bootstrap", "5"],
    )
    for args in bad:
        with pytest.raises(CommandError):
            call_command("analyze", *args, stdout=StringIO(), stderr=StringIO())
    with pytest.raises(CommandError):
        call_command("agreement", "--study", "nope", stdout=StringIO())
    with pytest.raises(CommandError):
        call_command("coverage", "--study", "nope", stdout=StringIO())


def test_it_prints_readable_text(paper):
    study, _ = paper
    out = StringIO()
    call_command("analyze", "--study", study.slug, "--bootstrap", "200", stdout=out, stderr=StringIO())
    text = out.getvalue()
    assert "GitHub issue:" in text and "Contrast github_issue - literature" in text and "Excluded primary" in text
    out = StringIO()
    call_command("coverage", "--study", study.slug, stdout=out)
    assert "Coverage: 2/3" in out.getvalue()


def _job(study, **params) -> Job:
    job = Job.objects.create(kind="bootstrap", study=study, params={"bootstrap": 640, "seed": 4, **params})
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESS, job.error
    return job


def test_the_bootstrap_job_is_identical_whatever_the_number_of_chunks(paper, monkeypatch):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    study, _ = paper
    one = _job(study, chunks=1).result
    three = _job(study, chunks=3).result
    many = _job(study, chunks=50).result
    assert one["run"]["chunks"] == 1 and three["run"]["chunks"] == 3 and many["run"]["chunks"] == 5  # 5 blocks
    assert stable(one) == stable(three) == stable(many)
    assert one["run"]["replicates_sha256"] == three["run"]["replicates_sha256"] == many["run"]["replicates_sha256"]
    inline = analysis_document(study, Params(bootstrap=640, seed=4))
    assert stable(one) == stable(inline)


def test_the_bootstrap_job_records_bad_parameters_as_an_error(paper):
    study, _ = paper
    job = Job.objects.create(kind="bootstrap", study=study, params={"bootstrap": 1000, "cell": "x"})
    job_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "cell" in job.error


def test_it_uses_factory_rows_that_cover_every_label_path():
    hows = {r.how for r in paper_rows()}
    assert hows == {"agree", "disagree", "adjudicated", "uncoded", "single", "naf", "new_type"}
    assert Row("literature", "x").split == "primary"


def test_a_chunked_bootstrap_is_byte_identical_in_1_or_16_chunks_and_counts_their_progress(paper, monkeypatch):
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    study, _ = paper
    one = _job(study, bootstrap=2560, chunks=1)
    sixteen = _job(study, bootstrap=2560, chunks=16)
    assert sixteen.result["run"]["chunks"] == 16
    assert one.result["run"]["replicates_sha256"] == sixteen.result["run"]["replicates_sha256"]
    assert stable(one.result) == stable(sixteen.result)
    assert (sixteen.done, sixteen.total) == (2560, 2560)
    # The chord's last step stores the document too, at the data version read before the labels (issue 31).
    from annotate.models import AnalysisResult, Study

    stored = AnalysisResult.objects.get(study=study, kind="analysis", job=sixteen)
    assert stored.document == sixteen.result
    assert stored.data_version == sixteen.params["data_version"] == Study.objects.get(pk=study.pk).data_version
    other_seed = _job(study, bootstrap=2560, seed=5, chunks=16)
    assert other_seed.result["run"]["replicates_sha256"] != sixteen.result["run"]["replicates_sha256"]


def test_the_chunks_work_on_the_labels_the_job_read(paper):
    from annotate.analysis.arrays import label_arrays
    from annotate.analysis.bootstrap import labels_pack, labels_unpack

    study, _ = paper
    labels = label_arrays(study)
    back = labels_unpack(labels_pack(labels))
    for name in ("episode_id", "kind", "stage", "capability", "source", "failure_type", "category"):
        assert np.array_equal(getattr(back, name), getattr(labels, name)), name
    assert back.cluster.tolist() == labels.cluster.tolist()
    assert (back.excluded, back.holdout) == (labels.excluded, labels.holdout)
    assert (back.fingerprint, back.n_episodes, back.as_of) == (labels.fingerprint, labels.n_episodes, labels.as_of)


def test_labels_are_read_by_id_ranges_past_another_studys_episodes(study, other_study, codes, alice, bob, charlie):
    """Batches find their codings by a range of episode ids; the other study's episodes between them
    (coded too) change nothing."""
    from annotate.coding.labels import final_labels

    rows, others = paper_rows(), paper_rows(3, 4)
    for i in range(0, len(rows), 5):
        build(study, rows[i : i + 5], codes, [alice, bob])
        build(other_study, others[i // 5 :: 9], codes, [charlie, alice])
    small = [(e.id, label) for e, label in final_labels(study, chunk=3)]
    assert small == [(e.id, label) for e, label in final_labels(study, chunk=10_000)]
    assert len(small) == len(rows)
    doc = run_json("analyze", "--study", study.slug, "--bootstrap", "200", "--seed", "3")
    expected = expected_counts(rows)
    for kind in doc["kinds"]:
        assert kind["counts"] == expected[kind["kind"]], kind["kind"]
    assert doc["excluded"]["by_reason"] == dict(sorted(expected_excluded(rows).items()))


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_labels_read_in_parts_join_into_the_same_arrays(paper, make_episode, parts):
    from annotate.analysis.arrays import codebook_axes, label_arrays, label_id_ranges, label_part, labels_join
    from annotate.analysis.bootstrap import labels_pack, labels_unpack
    from annotate.models import Episode

    study, _ = paper
    for split in ("primary", "holdout", "excluded"):
        Episode.objects.filter(pk=make_episode(study, kind="literature").pk).update(split=split)
    whole = label_arrays(study)
    ranges = label_id_ranges(study, parts)
    ids = Episode.objects.filter(study=study).values_list("id", flat=True)
    assert len(ranges) == parts and ranges[0][0] == min(ids) and ranges[-1][1] == max(ids) + 1
    assert all(a[1] == b[0] for a, b in pairwise(ranges))
    # Parts go through the broker packed, and arrive in any order.
    pieces = [labels_unpack(labels_pack(label_part(study, codebook_axes(study), ids=r))) for r in ranges]
    joined = labels_join(study, pieces[::-1])
    for name in ("episode_id", "kind", "stage", "capability", "source", "failure_type", "category"):
        assert np.array_equal(getattr(joined, name), getattr(whole, name)), name
    assert joined.cluster.tolist() == whole.cluster.tolist()
    assert (joined.excluded, joined.holdout, joined.n_episodes) == (whole.excluded, whole.holdout, whole.n_episodes)
    assert [list(c) for c in joined.excluded.values()] == [list(c) for c in whole.excluded.values()]
    assert joined.fingerprint == whole.fingerprint and joined.as_of == whole.as_of
    assert sum(len(p.episode_id) for p in pieces) == len(whole.episode_id) and min(
        map(len, (p.episode_id for p in pieces))
    ) < len(whole.episode_id)


def test_the_chunks_draw_from_the_count_matrices_the_job_sent(paper):
    from annotate.analysis.arrays import codebook_axes, designs, label_arrays
    from annotate.analysis.bootstrap import designs_pack, designs_unpack
    from lib import stats

    study, _ = paper
    ds = designs(label_arrays(study), codebook_axes(study))
    back = designs_unpack(designs_pack(ds))
    assert len(back) == len(ds)
    for d, b in zip(ds, back, strict=True):
        assert b.counts.dtype == d.counts.dtype and np.array_equal(b.counts, d.counts)
        assert np.array_equal(b.cells, d.cells) and np.array_equal(b.episode_cluster, d.episode_cluster)
    mine = stats.replicate_blocks(back, B=600, seed=3, start=1, stop=4, threads=1)
    theirs = stats.replicate_blocks(ds, B=600, seed=3, start=1, stop=4, threads=1)
    assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))


def labels_one_by_one(study):
    """What label_arrays must give, from every episode's label read one by one (final_labels):
    (labelled episode ids, excluded counts, hold-outs, episodes)."""
    from collections import Counter

    from annotate.analysis.arrays import KINDS
    from annotate.coding.labels import final_labels
    from annotate.models import Split

    excluded = {k: Counter() for k in KINDS}
    holdout, labelled, n = [], [], 0
    for ep, label in final_labels(study):
        n += 1
        if ep.split == Split.HOLDOUT:
            holdout.append((ep.id, ep.document.kind, ep.document.title, label))
        elif ep.split == Split.EXCLUDED:
            excluded[ep.document.kind]["excluded by an owner"] += 1
        elif not label.usable:
            excluded[ep.document.kind][label.reason] += 1
        elif label.not_a_failure:
            excluded[ep.document.kind]["not_a_failure"] += 1
        else:
            labelled.append(ep.id)
    return labelled, excluded, holdout, n


def test_label_arrays_count_uncoded_episodes_without_reading_them(paper, make_episode):
    """The same arrays, counts and fingerprint as reading every episode's label one by one."""
    from annotate.models import Episode

    study, _ = paper
    for split in ("primary", "holdout", "excluded", "primary"):
        Episode.objects.filter(pk=make_episode(study, kind="literature").pk).update(split=split)
    labels = label_arrays(study)
    labelled, excluded, holdout, n = labels_one_by_one(study)
    assert labels.n_episodes == n == Episode.objects.filter(study=study).count()
    assert labels.excluded == excluded and excluded["literature"]["uncoded"] >= 2
    assert labels.holdout == holdout
    assert labels.episode_id.tolist() == labelled


@pytest.mark.parametrize("chunk", [1, 2, 5, 5000])
def test_labels_read_in_small_chunks_past_another_studys_codings(
    study, other_study, codes, alice, bob, charlie, make_episode, monkeypatch, chunk
):
    """The touched episodes are read in runs of LABEL_CHUNK ids, each looking up only its own range's
    codings and adjudications; the other study's coded episodes interleave with them, one episode has
    an adjudication and no codings, and uncoded ones sit between. Whatever the run length and the
    parts, the arrays are those of reading every label one by one."""
    from annotate.analysis import arrays as analysis
    from annotate.analysis.bootstrap import labels_pack, labels_unpack
    from annotate.models import Adjudication, Coding, Episode

    rows, others = paper_rows(), paper_rows(3, 4)
    for i in range(0, len(rows), 4):
        build(study, rows[i : i + 4], codes, [alice, bob])
        build(other_study, others[i // 4 :: 11], codes, [charlie, alice])
        for split in ("primary", "holdout", "excluded"):
            Episode.objects.filter(pk=make_episode(study).pk).update(split=split)
    adjudicated = Adjudication.objects.filter(episode__study=study).values_list("episode_id", flat=True)
    lone = adjudicated[len(adjudicated) // 2]
    Coding.objects.filter(episode_id=lone).delete()
    assert Coding.objects.filter(episode__study=other_study).exists()

    labelled, excluded, holdout, n = labels_one_by_one(study)
    assert lone in labelled and excluded["github_issue"]["uncoded"] >= 3 and holdout
    whole = label_arrays(study)  # the default run length: the reference fingerprint
    monkeypatch.setattr(analysis, "LABEL_CHUNK", chunk)
    axes = analysis.codebook_axes(study)
    for parts in (1, 3):
        ranges = analysis.label_id_ranges(study, parts)
        pieces = [labels_unpack(labels_pack(analysis.label_part(study, axes, ids=r))) for r in ranges]
        labels = analysis.labels_join(study, pieces)
        assert labels.episode_id.tolist() == labelled, (chunk, parts)
        assert (labels.excluded, labels.holdout, labels.n_episodes) == (excluded, holdout, n), (chunk, parts)
        assert labels.fingerprint == whole.fingerprint, (chunk, parts)


def test_it_counts_every_episode_once_whether_coded_or_not_in_every_split(paper, make_episode):
    """Untouched episodes are the range's episodes less the touched ones (issue 31): counted once each, in the
    right split, whatever is coded."""
    from annotate.models import Episode

    study, _ = paper
    before = label_arrays(study)
    added = {}
    for split in ("primary", "holdout", "excluded"):
        added[split] = make_episode(study, kind="literature").pk
        Episode.objects.filter(pk=added[split]).update(split=split)
    labels = label_arrays(study)
    assert labels.n_episodes == before.n_episodes + 3 == Episode.objects.filter(study=study).count()
    lit, was = labels.excluded["literature"], before.excluded["literature"]
    assert lit["uncoded"] == was["uncoded"] + 1 and lit["excluded by an owner"] == was["excluded by an owner"] + 1
    ids = [h[0] for h in labels.holdout]
    assert len(ids) == len(set(ids)) == len(before.holdout) + 1 and added["holdout"] in ids
    assert set(ids) == set(Episode.objects.filter(study=study, split="holdout").values_list("id", flat=True))
    assert next(h for h in labels.holdout if h[0] == added["holdout"])[3].reason == "uncoded"
