"""The agreement table: one-sided bounds in their own column (never inside the interval cells), and which
codebook version the numbers use."""

from __future__ import annotations

import re

from annotate.templatetags.analysis_tags import estimate, one_sided_bounds

TWO = {"value": 0.8, "ci_low": 0.7, "ci_high": 0.9, "one_sided": False}
ONE = {"value": 1.0, "ci_low": 0.561, "ci_high": 1.0, "one_sided": True}


def test_it_marks_a_one_sided_value_and_leaves_its_bound_to_the_column():
    cell = str(estimate(ONE, "num", "column"))
    assert cell.startswith("1.000") and "†" in cell and "≥" not in cell and "0.561" not in cell
    assert "[0.700, 0.900]" in str(estimate(TWO, "num", "column"))
    row = {"percent_agreement": ONE, "fleiss_kappa": ONE, "krippendorff_alpha": TWO, "gwet_ac1": ONE}
    bounds = str(one_sided_bounds(row))
    assert re.sub("<[^>]+>", "", bounds) == "† % agreement ≥ 56.1% κ ≥ 0.561 AC1 ≥ 0.561"
    assert "\u2013" in str(one_sided_bounds({"fleiss_kappa": TWO}))  # a dash: none here


def test_inline_text_names_the_bound_one_sided():
    text = re.sub("<[^>]+>", "", str(estimate(ONE, "pct")))
    assert text == "100.0% ≥ 56.1% (one-sided lower bound)"


def test_the_page_puts_one_sided_bounds_only_in_their_column(client, alice, study, make_episode, codes, bob):
    from annotate.coding.services import CodingValues, coding_save

    values = CodingValues(
        failure_type=codes.type("TUS-03"), source=codes.source("llm"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )  # fmt: skip
    for _ in range(12):  # perfect agreement: every axis's interval collapses to a one-sided bound
        ep = make_episode(study)
        for coder in (alice, bob):
            coding_save(episode=ep, coder=coder, values=values, version=None)
    client.force_login(alice)
    html = client.get("/studies/alpha/agreement/?bootstrap=200").content.decode()
    table = html[html.index('class="table agreement-table"') : html.index("</table>", html.index("agreement-table"))]
    assert '<th scope="col">One-sided lower bound</th>' in table
    cells = re.findall(r'<td(?: class="(\w+)")?>(.*?)</td>', table, flags=re.S)
    stat_cells = [text for cls, text in cells if cls not in ("bounds", "num", "empty")]
    bound_cells = [text for cls, text in cells if cls == "bounds"]
    assert stat_cells and all("≥" not in c for c in stat_cells)
    assert sum(c.count("†") for c in stat_cells) == sum(c.count("≥") for c in bound_cells) > 0
    assert "Codebook version: <strong>agentic-failures@1.0</strong>" in html


def test_an_unknown_codebook_version_is_a_clear_400(client, alice, study):
    client.force_login(alice)
    response = client.get("/studies/alpha/agreement/?version=9.9")
    assert response.status_code == 400
    assert "never used codebook version" in response.content.decode()
