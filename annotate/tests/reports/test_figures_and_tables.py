"""The report's figures fit one column of a two-column paper; its tables read back as they were written."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest

from annotate.analysis.params import Params
from annotate.reports import plots
from annotate.reports.bundle import inline_svg
from annotate.reports.collect import report_documents
from annotate.reports.render import read_html_tables, read_tex_tables, table_csv, tables_tex, tex_escape
from annotate.reports.tables import AXIS_TITLES, Table, report_tables


@pytest.fixture
def data(codebook):
    from annotate.ops.demo import demo_build

    return report_documents(demo_build().study, Params(bootstrap=200))


def test_it_draws_every_figure_85_mm_wide_with_no_text_under_7_pt_inside_the_canvas(data):
    figures = plots.report_figures(data, AXIS_TITLES)
    assert set(figures) == {"matrix-github_issue", "matrix-literature", "difference-github_issue-literature",
                            "sensitivity", "agreement"}  # fmt: skip
    for name, draw in figures.items():
        fig = draw()
        assert fig.get_size_inches()[0] * 25.4 == pytest.approx(85), name
        assert plots.layout_problems(fig) == [], name
        plt.close(fig)
        svg = plots.render(draw(), "svg").decode()
        width = float(re.search(r'<svg[^>]* width="([\d.]+)pt"', svg).group(1))
        assert width * 25.4 / 72 == pytest.approx(85, abs=0.05), name
        sizes = [float(s) for s in re.findall(r"font-size: ([\d.]+)px", svg)]
        assert sizes and min(sizes) >= 7, name  # SVG user units are points here
        assert plots.render(draw(), "pdf")[:5] == b"%PDF-"
    svg = plots.render(figures["matrix-github_issue"](), "svg").decode()
    assert "Iterative" in svg and "Agent capability" in svg and "Workflow stage" in svg and "61%" in svg
    assert "setup" not in svg  # display names, not codes


def test_the_layout_check_catches_small_text_clipped_text_and_overlapping_labels():
    with plt.rc_context(plots.STYLE):
        fig, ax = plt.subplots(figsize=(plots.WIDTH_IN, 2), layout="constrained")
        ax.text(0.5, 0.5, "tiny", fontsize=5)
        assert any("tiny" in p for p in plots.layout_problems(fig))
        fig.text(0.9, 0.5, "a long label running off the right edge of the figure", fontsize=8)
        assert any("outside the canvas" in p for p in plots.layout_problems(fig))
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(plots.WIDTH_IN, 2), layout="constrained")
        ax.set_xticks(range(6), ["Perception & understanding"] * 6)
        assert "x tick labels overlap" in plots.layout_problems(fig)
        plt.close(fig)


def test_inline_figures_keep_their_ids_apart():
    svg = b'<?xml version="1.0"?>\n<svg><clipPath id="p1"/><path clip-path="url(#p1)"/><use xlink:href="#g"/></svg>'
    out = inline_svg(svg, "agreement")
    assert out.startswith("<svg") and 'id="agreement-p1"' in out and "url(#agreement-p1)" in out
    assert 'xlink:href="#agreement-g"' in out


def test_tables_read_back_from_html_and_tex_cell_for_cell(data):
    from django.template.loader import render_to_string

    tables = report_tables(data)
    html = render_to_string("annotate/report/report.html", {"tables": tables, "study": data["study"],
                                                           "figures": [], "methods": "", "provenance": {}})  # fmt: skip
    back = read_html_tables(html)
    for t in tables:
        assert back[t.key].header == t.header and back[t.key].rows == t.rows, t.key
    tex = read_tex_tables(tables_tex(tables, title="Demo & co"))
    for t in tables:
        assert tex[t.key].rows == tuple(tuple(_tex(c) for c in row) for row in t.rows), t.key
    assert tex_escape("50% of A & B_c") == r"50\% of A \& B\_c"


def _tex(cell: str) -> str:
    lines = [tex_escape(x) for x in cell.split("\n")]
    return lines[0] if len(lines) == 1 else r"\makecell[l]{" + r" \\ ".join(lines) + "}"


def test_a_table_as_csv_keeps_its_cells_on_one_line():
    t = Table("x", "X", ("Stage", "Share"), (("Setup", "3 · 6.5%\n[1.1, 19.2]†"),))
    assert table_csv(t) == 'Stage,Share\nSetup,"3 · 6.5% [1.1, 19.2]†"\n'


def test_the_tables_name_the_demo_numbers(data):
    tables = {t.key: t for t in report_tables(data)}
    counts = tables["counts"]
    assert counts.header == ("Responsibility source", "GitHub issue", "Literature record", "All kinds")
    assert counts.rows[-2] == ("In the matrices", "46", "16", "62")
    contrast = tables["contrast"]
    assert contrast.title.startswith("Contrast GitHub issue − Literature record in Iterative execution × Actuation")
    assert [r[0] for r in contrast.rows][1:] and all(r[3] in ("yes", "no") for r in contrast.rows[1:])
    adjudication = dict(tables["adjudication"].rows)
    assert adjudication["Adjudicated"] == "2" and adjudication["Episodes"] == "82"
    cov = tables["coverage"].rows[-1]
    assert cov[:5] == ("All hold-out", "2", "0", "2", "100.0%")
    assert tables["agreement"].header[3:-1] == ("Fleiss' κ", "Krippendorff's α", "Gwet's AC1")
    assert "suggestions" not in tables and "exposure" not in tables  # the demo has neither


def test_one_sided_bounds_have_their_own_column_in_html_tex_and_csv(data):
    """A collapsed interval's one-sided lower bound is never written inline as if it were an interval: the
    statistic is marked ‡ and the bound is in the row's last column (as on the agreement page)."""
    from annotate.reports.tables import BOUND_COLUMN, ONE_SIDED

    tables = {t.key: t for t in report_tables(data)}
    for key in ("agreement", "agreement-pairs"):
        t = tables[key]
        assert t.header[-1] == BOUND_COLUMN
        for row in t.rows:
            assert not any("≥" in cell or "one-sided" in cell for cell in row[:-1]), row
    axes = {a["axis"]: a for a in data["agreement"]["axes"]}
    rows = {r[0]: r for r in tables["agreement"].rows}
    category = axes["category"]["fleiss_kappa"]
    assert category["one_sided"]  # the demo's categories agree perfectly: their intervals collapse
    assert rows["Category"][3] == f"{category['value']:.3f} {ONE_SIDED}"
    assert f"κ ≥ {category['ci_low']:.3f}" in rows["Category"][-1].split(";\n")
    two_sided = axes["failure_type"]["fleiss_kappa"]
    assert not two_sided["one_sided"] and rows["Failure type"][-1] == "–"
    assert (
        rows["Failure type"][3] == f"{two_sided['value']:.3f}\n[{two_sided['ci_low']:.3f}, {two_sided['ci_high']:.3f}]"
    )
    csv_rows = table_csv(tables["agreement"]).splitlines()
    assert csv_rows[0].endswith(",One-sided lower bound") and "κ ≥ " in next(r for r in csv_rows if "Category" in r)
    tex = read_tex_tables(tables_tex(list(tables.values()), title="Demo"))["agreement"]
    assert tex.header[-1] == "One-sided lower bound" and r"\ddag{}" in {r[0]: r for r in tex.rows}["Category"][3]


def test_the_pdf_layout_check_catches_text_past_the_page_and_text_over_text():
    from annotate.reports.bundle import pdf_layout_problems

    page = "<style>@page { size: A4; margin: 20mm }</style>"
    assert pdf_layout_problems(f"{page}<table><tr><td>{'x' * 30} {'y' * 30}</td></tr></table>") == []
    wide = pdf_layout_problems(f"{page}<table><tr><td>{'x' * 200}</td><td>after</td></tr></table>")
    assert any("runs past the page's content box" in p for p in wide)
    over = pdf_layout_problems(f'{page}<p>first words</p><p style="margin-top: -1.2em">second words</p>')
    assert any("overlap" in p for p in over)


def test_the_reports_tables_fit_the_pdf_page(data):
    """Every table of the report, the agreement tables' bound column included, laid out as report.pdf lays it
    out: no text past the page, none over other text."""
    from django.template.loader import render_to_string

    from annotate.reports.bundle import pdf_layout_problems

    html = render_to_string("annotate/report/report.html", {"tables": report_tables(data), "study": data["study"],
                                                           "figures": [], "methods": "", "provenance": {}})  # fmt: skip
    assert pdf_layout_problems(html) == []
