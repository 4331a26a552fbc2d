"""What the report gathers: a fixed number of queries whatever the study's size, and the tables of suggestion
quality, the exposure experiment and trace attribution where a study has them."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotate.analysis import arrays
from annotate.analysis.params import Params
from annotate.reports.collect import report_documents
from annotate.reports.render import ReadTable
from annotate.reports.reproduce import Reproduction, compare_tables
from annotate.reports.tables import attribution_table, exposure_table, suggestions_table
from annotate.tests.factories.analysis_factory import build, paper_rows


def test_it_gathers_everything_in_a_fixed_number_of_queries(study, codes, alice, bob):
    build(study, paper_rows(3, 3), codes, [alice, bob])
    arrays._axes_cache.clear()  # each measure reads the codebook's axes itself (no per-process cache hit)
    with CaptureQueriesContext(connection) as small:
        report_documents(study, Params(bootstrap=100))
    build(study, paper_rows(12, 20), codes, [alice, bob])
    arrays._axes_cache.clear()
    with CaptureQueriesContext(connection) as large:
        data = report_documents(study, Params(bootstrap=100))
    assert len(large.captured_queries) == len(small.captured_queries)
    assert data["counts"]["episodes"] > 60 and data["pairs"] and data["suggestions"] is None


def _share(k, n, lo=0.1, hi=0.9):
    return {"k": k, "n": n, "value": k / n, "low": lo, "high": hi}


def test_it_tabulates_suggestions_exposure_and_attribution_where_the_study_has_them():
    data = {
        "suggestions": {"labelled_episodes": 40, "backends": [{
            "backend": "local", "model": "tfidf-1", "episodes": 38, "acceptance_rate": 0.5, "ece": 0.081,
            "accuracy": {"failure_type": {"n": 38, "top1": 0.42, "top3": 0.71}},
            "kappa_mean": {"failure_type": 0.3912},
        }]},
        "exposure": {"seed": 3, "arms": [{
            "arm": "before", "codings": 12, "coders": 2, "accuracy": _share(9, 12), "agreement": _share(4, 6),
            "time_to_save": {"n": 12, "median_s": 41.25, "low_s": 30.0, "high_s": 52.5},
            "automation_bias": _share(1, 5),
        }]},
        "agreement": {"attribution": {"trace_episodes": 5, "reference": {"episodes": 5, "note": "n", "raters": [{
            "rater": "coder-1", "kind": "coder",
            "agent": {"value": 0.8, "ci_low": 0.38, "ci_high": 0.96, "k": 4, "n": 5},
            "step": {t: {"value": 0.4, "ci_low": 0.12, "ci_high": 0.77, "k": 2, "n": 5}
                     for t in ("exact", "within_1", "within_3")},
        }]}}},
    }  # fmt: skip
    s = suggestions_table(data)
    assert s.rows == (("local · tfidf-1", "38", "50.0%", "42.0% (n=38)", "71.0%", "0.081", "0.391"),)
    x = exposure_table(data)
    assert x.rows[0][:4] == ("before", "12", "2", "75.0% [10.0, 90.0] (9/12)")
    assert x.rows[0][5] == "41.2 [30.0, 52.5]"
    a = attribution_table(data)
    assert a.rows[0][:2] == ("coder-1", "80.0% [38.0, 96.0] (4/5)")
    assert not (s.from_export or x.from_export or a.from_export)
    # Each says precisely why reproduce cannot recompute it, in the report and in reproduce's output.
    assert "ranked candidates that top-3 accuracy needs" in s.not_verified_because
    assert "no exposure records" in x.not_verified_because and "no trace attribution" in a.not_verified_because
    from django.template.loader import render_to_string

    from annotate.reports.tables import Table

    matrix = Table("matrix-x", "X", ("Stage", "A"), (("Setup", "1"),))
    html = render_to_string("annotate/report/report.html", {
        "tables": [matrix, s, x], "study": {"name": "S", "slug": "s"}, "figures": [], "methods": "", "provenance": {},
        "verified": "Table 1", "not_verified": [(2, s), (3, x)],
    })  # fmt: skip
    assert "compares every cell of Table 1 in report.html" in html
    assert f"Table 2 ({s.title}) is not verified: {s.not_verified_because}." in html.replace("&#x27;", "'")
    assert html.count("Not verified by <code>reproduce</code>") == 2
    assert suggestions_table({"suggestions": None}) is None and exposure_table({"exposure": None}) is None


def test_reproduce_compares_every_cell_but_leaves_out_what_the_export_cannot_recompute():
    t = ReadTable("matrix-x", ("Stage", "A", "B"), (("Setup", "1", "2"), ("Total", "1", "2")))
    changed = ReadTable("matrix-x", ("Stage", "A", "B"), (("Setup", "1", "3"), ("Total", "1", "2")))
    out = Reproduction()
    compare_tables("report.html", {"matrix-x": t, "suggestions": t}, {"matrix-x": changed}, {"matrix-x": "X"}, out)
    assert [str(d) for d in out.differences] == ["report.html: X · row 'Setup' · column 'B': expected '2', got '3'"]
    assert out.compared_cells == 6 and out.not_compared == ["suggestions"]
    out = Reproduction()
    compare_tables("tables.tex", {"matrix-x": t}, {}, {}, out)
    assert [(d.table, d.expected, d.got) for d in out.differences] == [("matrix-x", "present", "absent")]


def test_a_fresh_database_gets_the_bundles_codebook_and_a_changed_one_is_named(db, tmp_path):
    import json

    from annotate.reports.bundle import canonical_sha256
    from annotate.reports.reproduce import _codebook
    from conftest import CODEBOOK
    from taxonomy.models import Codebook

    data = json.loads(CODEBOOK.read_text(encoding="utf-8"))
    (tmp_path / "codebook.json").write_text(json.dumps(data), encoding="utf-8")
    prov = {"codebook": {"file": "codebook.json", "sha256": canonical_sha256(data)}}
    found = []
    _codebook(tmp_path, prov, found)
    assert found == [] and Codebook.objects.filter(name=data["name"], version=data["version"]).exists()
    prov["codebook"]["sha256"] = "0" * 64
    _codebook(tmp_path, prov, found)
    assert [(d.table, d.column) for d in found] == [("codebook.json", "sha256")]
