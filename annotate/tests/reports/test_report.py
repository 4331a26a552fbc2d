"""The report bundle on the demo study: what `manage.py report` writes, and `manage.py reproduce` re-running it."""

from __future__ import annotations

import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from annotate.analysis.documents import KIND_LABELS
from annotate.models import Episode, Study
from annotate.reports.bundle import labels_sha256
from annotate.reports.render import read_html_tables, read_tex_tables
from lib import stats

B = "300"  # replicates: enough to exercise every interval, quick enough for a test


@pytest.fixture
def demo(codebook):
    from annotate.ops.demo import demo_build

    return demo_build().study


def _report(out: Path, *extra: str) -> str:
    buf = io.StringIO()
    call_command("report", "--study", "demo", "--out", str(out), "--bootstrap", B, *extra, stdout=buf,
                 stderr=io.StringIO())  # fmt: skip
    return buf.getvalue()


def _reproduce(path: Path) -> tuple[str, CommandError | None]:
    buf = io.StringIO()
    try:
        call_command("reproduce", str(path), stdout=buf, stderr=io.StringIO())
    except CommandError as exc:
        return buf.getvalue(), exc
    return buf.getvalue(), None


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def test_it_writes_the_bundle_reproduce_recomputes_it_and_names_a_changed_label(demo, tmp_path):
    out = tmp_path / "demo-report"
    said = _report(out, "--zip")
    assert "reproduce" in said

    for name in ("report.html", "report.pdf", "tables.tex", "provenance.json", "methods.txt", "codebook.json"):
        assert (out / name).is_file(), name
    assert (out / "report.pdf").read_bytes()[:5] == b"%PDF-"
    svgs = sorted(p.name for p in (out / "figures").glob("*.svg"))
    assert {"matrix-github_issue.svg", "matrix-literature.svg", "sensitivity.svg", "agreement.svg"} <= set(svgs)
    assert all((out / "figures" / n.replace(".svg", ".pdf")).is_file() for n in svgs)
    html = (out / "report.html").read_text(encoding="utf-8")
    # Self-contained: styles and figures inline, nothing fetched.
    assert "<style>" in html and html.count("<svg") == len(svgs)
    assert not re.search(r"<link|<script|src=\"http|url\(http", html)
    tables = read_html_tables(html)
    assert {"counts", "matrix-github_issue", "matrix-literature", "contrast", "agreement", "agreement-pairs",
            "adjudication", "coverage"} <= set(tables)  # fmt: skip
    assert {p.stem for p in (out / "tables").glob("*.csv")} == set(tables)
    # Display names, intervals and the exact interval method name, never short codes.
    matrix = tables["matrix-github_issue"]
    assert matrix.header[1] == "Perception & understanding" and matrix.rows[3][0] == "Iterative execution"
    assert matrix.rows[3][4].startswith("28 · 60.9%\n[")
    methods = (out / "methods.txt").read_text(encoding="utf-8")
    for needle in ("agentic-failures@1.0", "k = 2", "blind", "adjudicated", "Krippendorff", "Gwet's AC1",
                   stats.CELL_METHOD_NAMES[stats.DEFAULT_CELL_METHOD], f"B = {B}",
                   "seed 0", "leave one cluster out", "Faultline 0.1.0"):  # fmt: skip
        assert needle in methods, needle
    tex = (out / "tables.tex").read_text(encoding="utf-8")
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"Actuation (tool use \& action)" in tex
    assert set(read_tex_tables(tex)) == set(tables)

    prov = json.loads((out / "provenance.json").read_text(encoding="utf-8"))
    assert prov["study"]["slug"] == "demo" and prov["codebook"]["label"] == "agentic-failures@1.0"
    assert re.fullmatch(r"[0-9a-f]{64}", prov["codebook"]["sha256"]) and prov["labels"]["rows"] == 82
    assert prov["parameters"]["bootstrap"] == int(B) and prov["seeds"]["analysis"] == 0
    assert prov["software"]["version"] == "0.1.0" and re.fullmatch(r"[0-9a-f]{40}", prov["software"]["commit"])
    assert prov["generated_at"] and "report.pdf" in prov["files"] and "export/demo.jsonl" in prov["files"]
    # The report says which tables reproduce verifies: here all of them (the demo has no suggestions, exposure
    # experiment or traces).
    assert prov["verification"] == {"compared": list(tables), "not_compared": {}}
    assert f"compares every cell of {', '.join(f'Table {n}' for n in range(1, len(tables) + 1))} in" in html
    # The final labels' hash is the export's: a reader recomputes it from the bundle alone.
    assert labels_sha256(out / "export" / "demo.jsonl") == (prov["labels"]["sha256"], Episode.objects.count())

    studies, users = Study.objects.count(), get_user_model().objects.count()
    text, err = _reproduce(out)
    assert err is None, text
    assert re.search(r"identical: \d{3,} cells in 9 tables", text)
    text, err = _reproduce(out.with_name("demo-report.zip"))
    assert err is None, text
    assert (Study.objects.count(), get_user_model().objects.count()) == (studies, users)  # all rolled back

    # One adjudicated label moved to another stage: reproduce names the cells it changes.
    export = out / "export" / "demo.jsonl"
    rows = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    row = next(r for r in rows if r["label_status"] == "adjudicated")
    stages = {s["code"]: s["name"] for s in json.loads((out / "codebook.json").read_text())["axes"]["stage"]}
    old, new = row["label_stage"], next(c for c in stages if c != row["label_stage"])
    row["label_stage"], row["label_stage_name"] = new, stages[new]
    row["adjudication_stage"] = new  # an adjudicated label is the adjudication's codes, which the import reads
    _write_rows(export, rows)
    text, err = _reproduce(out)
    assert err is not None and "numbers differ" in str(err)
    table = f"{KIND_LABELS[row['document_kind']]}: workflow stage × agent capability"
    lines = [ln for ln in text.splitlines() if ln.startswith("DIFFERENT report.html: " + table)]
    assert any(f"row '{stages[old]}'" in ln for ln in lines) and any(f"row '{stages[new]}'" in ln for ln in lines)
    assert any("DIFFERENT tables.tex: " + table in ln for ln in text.splitlines())
    assert "DIFFERENT bundle: export/demo.jsonl · column 'sha256'" in text
    assert "DIFFERENT bundle: final labels · column 'sha256'" in text
    assert Study.objects.count() == studies

    # An export that no longer loads is named as such, and nothing is left behind either.
    row["label_failure_type"] = row["adjudication_failure_type"] = "NOT-A-TYPE"
    _write_rows(export, rows)
    text, err = _reproduce(out)
    assert err is not None and "does not load" in str(err) and "NOT-A-TYPE" in str(err)
    assert Study.objects.count() == studies


def test_it_refuses_a_folder_that_is_not_a_bundle_and_bad_parameters(demo, tmp_path):
    _, err = _reproduce(tmp_path)
    assert err is not None and "provenance.json is missing" in str(err)
    with pytest.raises(CommandError, match="no study with slug"):
        call_command("report", "--study", "nope", "--out", str(tmp_path / "x"), stdout=io.StringIO())
    with pytest.raises(CommandError, match="bootstrap"):
        call_command("report", "--study", "demo", "--out", str(tmp_path / "x"), "--bootstrap", "5")


def test_it_makes_a_zip_on_the_analysis_page_button_for_members_who_see_the_analysis(
    demo, client, settings, tmp_path, django_capture_on_commit_callbacks, eager_jobs
):
    from annotate.models import Job, JobStatus

    settings.MEDIA_ROOT = tmp_path
    owner = get_user_model().objects.get(username="demo-owner")
    coder = get_user_model().objects.get(username="demo-coder1")
    client.force_login(coder)  # a coder of a blind study sees no aggregates
    assert client.post("/studies/demo/analysis/report/", {"bootstrap": B}).status_code == 403
    client.force_login(owner)
    bad = client.post("/studies/demo/analysis/report/", {"bootstrap": "5"})
    assert bad.status_code == 302 and not Job.objects.filter(kind="report").exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/studies/demo/analysis/report/", {"bootstrap": B})
    job = Job.objects.get(kind="report")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESS, job.error  # eager Celery: the job ran
    assert response["Location"].endswith(f"report_job={job.pk}#report")
    page = client.get(f"/studies/demo/analysis/?bootstrap={B}&report_job={job.pk}").content.decode()
    assert f"/studies/demo/analysis/report/{job.pk}.zip" in page
    zipped = client.get(f"/studies/demo/analysis/report/{job.pk}.zip")
    assert zipped["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(b"".join(zipped.streaming_content))).namelist()
    assert {"demo-report/report.html", "demo-report/report.pdf", "demo-report/provenance.json"} <= set(names)
    client.force_login(coder)
    assert client.get(f"/studies/demo/analysis/report/{job.pk}.zip").status_code == 403
