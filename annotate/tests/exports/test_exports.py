"""Dataset exports: the demo study round-trips through import_dataset in every format; API streaming and manifests."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.http import StreamingHttpResponse
from django.test.utils import CaptureQueriesContext

from annotate.models import Coding, Document, Study


@pytest.fixture
def demo(db, settings, eager_jobs):
    call_command("load_codebook", "fixtures/codebook-v1.json", "--publish", stdout=io.StringIO())
    call_command("demo", stdout=io.StringIO())
    return Study.objects.get(slug="demo")


def _wipe_study(slug: str) -> None:
    """Leave the codebook and nothing else of the study, as on an empty instance."""
    study = Study.objects.get(slug=slug)
    Coding.objects.filter(episode__study=study).delete()
    from annotate.models import Adjudication

    Adjudication.objects.filter(episode__study=study).delete()
    study.delete()


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_the_demo_study_round_trips_through_import_dataset(demo, tmp_path, fmt):
    first = tmp_path / f"demo.{fmt}"
    call_command("export", "--study", "demo", "--format", fmt, "--out", str(first), stdout=io.StringIO())
    manifest = json.loads((tmp_path / f"demo.{fmt}.manifest.json").read_text())
    assert manifest["rows"] == demo.episodes.count() == 82
    assert manifest["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    assert manifest["codebook"] == "agentic-failures@1.0"

    _wipe_study("demo")
    out = io.StringIO()
    call_command("import_dataset", str(first), stdout=out)
    assert "82 episodes" in out.getvalue()
    again = tmp_path / f"again.{fmt}"
    call_command("export", "--study", "demo", "--format", fmt, "--out", str(again), stdout=io.StringIO())
    # The imported episodes have ids of their own: everything else is the same, to the byte.
    before, after = _rows(first, fmt), _rows(again, fmt)
    assert [int(r.pop("episode_id")) for r in after] == list(
        Study.objects.get(slug="demo").episodes.order_by("pk").values_list("pk", flat=True)
    )
    assert all(r.pop("episode_id") for r in before)
    assert after == before
    if fmt != "parquet":
        assert _without_ids(again, fmt) == _without_ids(first, fmt)


def _rows(path, fmt: str) -> list[dict]:
    if fmt == "parquet":
        return pq.read_table(path).to_pylist()
    if fmt == "csv":
        return list(csv.DictReader(io.StringIO(path.read_text())))
    return [json.loads(line) for line in path.read_text().splitlines()]


def _without_ids(path, fmt: str) -> bytes:
    """The file's bytes with each row's episode id blanked, where it stands (the third field)."""
    import re

    text = path.read_text()
    if fmt == "csv":
        return re.sub(r'(?m)^((?:"[^"]*",){2})"\d+",', r'\1"",', text).encode()
    return re.sub(r'"episode_id":\d+', '"episode_id":0', text).encode()


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_single_coder_study_round_trips_with_its_label_coder(demo, tmp_path, fmt):
    """Issue 31: the label coder was not restored, and the import's own check refused the file."""
    from django.contrib.auth import get_user_model

    from annotate.exports.rows import pseudonym, pseudonym_key

    coder = get_user_model().objects.get(username="demo-coder2")
    Study.objects.filter(pk=demo.pk).update(label_rule="single_coder", label_coder=coder)
    first = tmp_path / f"demo.{fmt}"
    call_command("export", "--study", "demo", "--format", fmt, "--out", str(first), stdout=io.StringIO())
    manifest = json.loads((tmp_path / f"demo.{fmt}.manifest.json").read_text())
    name = pseudonym(pseudonym_key(demo), coder.pk)
    assert manifest["label_rule"] == "single_coder" and manifest["label_coder"] == name
    labelled = list(map(json.loads, first.read_text().splitlines())) if fmt == "jsonl" else []
    assert fmt == "csv" or {r["label_status"] for r in labelled} == {"single_coder", "none"}

    _wipe_study("demo")
    call_command("import_dataset", str(first), stdout=io.StringIO())
    study = Study.objects.get(slug="demo")
    assert study.label_rule == "single_coder" and study.label_coder.username == name
    again = tmp_path / f"again.{fmt}"
    call_command("export", "--study", "demo", "--format", fmt, "--out", str(again), stdout=io.StringIO())

    assert _without_ids(again, fmt) == _without_ids(first, fmt)  # the new study's episodes have new ids
    assert json.loads((tmp_path / f"again.{fmt}.manifest.json").read_text())["label_coder"] == name


def test_a_csv_made_before_the_adjudication_codes_were_exported_still_loads(demo, tmp_path):
    from annotate.exports.rows import ADJUDICATION_CODES
    from annotate.models import Adjudication

    path = tmp_path / "demo.csv"
    call_command("export", "--study", "demo", "--format", "csv", "--out", str(path), stdout=io.StringIO())
    adjudicated = Adjudication.objects.filter(episode__study=demo).count()
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"), newline="")))
    keep = [i for i, col in enumerate(rows[0]) if col not in ADJUDICATION_CODES]
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([[row[i] for i in keep] for row in rows])
    side = tmp_path / "demo.csv.manifest.json"
    side.write_text(json.dumps({**json.loads(side.read_text()), "sha256": None}))
    _wipe_study("demo")
    call_command("import_dataset", str(path), stdout=io.StringIO())
    assert adjudicated and Adjudication.objects.filter(episode__study__slug="demo").count() == adjudicated


def test_a_single_coder_file_without_its_label_coder_is_refused(demo, tmp_path):
    from django.contrib.auth import get_user_model

    coder = get_user_model().objects.get(username="demo-coder2")
    Study.objects.filter(pk=demo.pk).update(label_rule="single_coder", label_coder=coder)
    path = tmp_path / "demo.jsonl"
    call_command("export", "--study", "demo", "--format", "jsonl", "--out", str(path), stdout=io.StringIO())
    side = tmp_path / "demo.jsonl.manifest.json"
    side.write_text(json.dumps({**json.loads(side.read_text()), "label_coder": None}))
    _wipe_study("demo")
    with pytest.raises(CommandError, match="names no label_coder"):
        call_command("import_dataset", str(path), stdout=io.StringIO())
    assert not Study.objects.filter(slug="demo").exists()


def test_an_export_holds_labels_coders_and_provenance(demo, tmp_path):
    path = tmp_path / "demo.jsonl"
    call_command("export", "--study", "demo", "--format", "jsonl", "--out", str(path), stdout=io.StringIO())
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    statuses = {r["label_status"] for r in rows}
    assert {"agreed", "adjudicated", "none"} <= statuses
    none = [r for r in rows if r["label_status"] == "none"]
    assert {r["label_reason"] for r in none} >= {"uncoded", "disagreement"}
    agreed = next(r for r in rows if r["label_status"] == "agreed" and not r["label_not_a_failure"])
    assert agreed["label_failure_type"] and agreed["label_failure_type_name"] and agreed["label_source_name"]
    coders = {c["coder"] for r in rows for c in r["codings"]}
    assert len(coders) == 2 and all(c.startswith("coder-") for c in coders)
    assert "demo-coder1" not in path.read_text()
    assert all(r["codebook"] == "agentic-failures@1.0" for r in rows)
    assert rows[0]["imported_at"].endswith("Z")


def test_each_row_names_its_episode_by_the_id_the_api_uses(demo, client, tmp_path):
    from django.contrib.auth import get_user_model

    path = tmp_path / "demo.jsonl"
    call_command("export", "--study", "demo", "--format", "jsonl", "--out", str(path), stdout=io.StringIO())
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    ids = list(demo.episodes.order_by("pk").values_list("pk", flat=True))
    assert [r["episode_id"] for r in rows] == ids
    first = demo.episodes.select_related("document").get(pk=rows[0]["episode_id"])
    assert (first.document.external_id, first.order) == (rows[0]["external_id"], rows[0]["episode_order"])
    client.force_login(get_user_model().objects.get(username="demo-owner"))
    text = b"".join(client.get("/api/v1/studies/demo/export/?format=csv").streaming_content).decode()
    table = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["episode_id"]) for r in table] == ids and list(table[0])[:3] == ["study", "codebook", "episode_id"]
    assert pq.read_schema(_parquet(demo, tmp_path)).field("episode_id").type == "int64"


def _parquet(demo, tmp_path):
    path = tmp_path / "demo.parquet"
    call_command("export", "--study", "demo", "--format", "parquet", "--out", str(path), stdout=io.StringIO())
    return path


def test_pseudonyms_are_stable_per_study_and_differ_across_studies(demo, tmp_path):
    from annotate.exports.rows import CoderNames, pseudonym, pseudonym_key

    coder = Coding.objects.filter(episode__study=demo).first().coder_id
    assert CoderNames(demo)(coder) == CoderNames(demo)(coder) == pseudonym(pseudonym_key(demo), coder)
    assert pseudonym(pseudonym_key(Study(slug="other")), coder) != pseudonym(pseudonym_key(demo), coder)


def test_a_bad_dataset_writes_nothing(demo, tmp_path):
    path = tmp_path / "demo.jsonl"
    call_command("export", "--study", "demo", "--format", "jsonl", "--out", str(path), stdout=io.StringIO())
    _wipe_study("demo")
    lines = path.read_text().splitlines()
    broken = json.loads(lines[5])
    broken["codings"][0]["failure_type"] = "NOPE-99"
    lines[5] = json.dumps(broken)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(CommandError, match=r"row 6.*unknown failure type 'NOPE-99'"):
        call_command("import_dataset", str(bad), stdout=io.StringIO())
    assert not Study.objects.filter(slug="demo").exists()
    assert not Document.objects.filter(study__slug="demo").exists()
    # A file that no longer matches its manifest is refused too.
    (tmp_path / "bad.jsonl.manifest.json").write_text((tmp_path / "demo.jsonl.manifest.json").read_text())
    with pytest.raises(CommandError, match="sha256"):
        call_command("import_dataset", str(bad), stdout=io.StringIO())


def test_a_label_column_that_its_codings_contradict_is_refused(demo, tmp_path):
    """An adjudicated row's label is its adjudication's codes: a file whose label_stage says another stage (an
    edited export) is refused, naming the row and both values, rather than loaded as one of the two."""
    path = tmp_path / "demo.jsonl"
    call_command("export", "--study", "demo", "--format", "jsonl", "--out", str(path), stdout=io.StringIO())
    _wipe_study("demo")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    n, row = next((n, r) for n, r in enumerate(rows, 1) if r["label_status"] == "adjudicated")
    other = "setup" if row["label_stage"] != "setup" else "intake"
    row["label_stage"] = other
    bad = tmp_path / "edited.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        CommandError, match=rf"row {n} .*label_stage says '{other}'.*give '{rows[n - 1]['adjudication_stage']}'"
    ):
        call_command("import_dataset", str(bad), stdout=io.StringIO())
    assert not Study.objects.filter(slug="demo").exists()


@pytest.mark.parametrize("column", ["label_failure_type", "label_not_a_failure", "label_needs_new_type"])
def test_an_adjudicated_row_whose_label_its_adjudication_codes_contradict_is_refused_by_that_column(
    demo, tmp_path, column
):
    """The import reads an adjudicated row's label from its adjudication_* codes; a label_* column (the two
    flags too) saying otherwise is a field error named by the column, and nothing is written."""
    from django.core.exceptions import ValidationError

    from annotate.exports.datasets import dataset_import

    path = tmp_path / "demo.jsonl"
    call_command("export", "--study", "demo", "--format", "jsonl", "--out", str(path), stdout=io.StringIO())
    _wipe_study("demo")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    n, row = next(
        (n, r) for n, r in enumerate(rows, 1) if r["label_status"] == "adjudicated" and r["adjudication_failure_type"]
    )
    assert row[column] == row[column.replace("label_", "adjudication_")]  # as exported, they agree
    row[column] = (
        "SPC-01"
        if column == "label_failure_type" and row[column] != "SPC-01"
        else ("PLN-01" if column == "label_failure_type" else not row[column])
    )
    bad = tmp_path / "edited.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValidationError) as caught:
        dataset_import(path=bad)
    assert list(caught.value.message_dict) == [column]
    assert caught.value.message_dict[column][0].startswith(f"row {n} ({row['external_id']}): {column} says ")
    assert not Study.objects.filter(slug="demo").exists() and not Coding.objects.exists()
    with pytest.raises(CommandError, match=rf"row {n} .*{column} says .*nothing was written"):
        call_command("import_dataset", str(bad), stdout=io.StringIO())


def test_the_api_streams_jsonl_and_csv_in_a_fixed_number_of_queries(demo, client):
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.get(username="demo-owner")
    client.force_login(owner)
    counts = []
    for query in ("kind=literature", "kind=github_issue", ""):
        response = client.get(f"/api/v1/studies/demo/export/?format=jsonl&{query}")
        assert isinstance(response, StreamingHttpResponse)
        assert response["Content-Type"] == "application/x-ndjson"
        with CaptureQueriesContext(connection) as ctx:
            body = b"".join(response.streaming_content)
        counts.append(len(ctx.captured_queries))
        if query == "kind=literature":
            rows = [json.loads(line) for line in body.splitlines()]
            assert len(rows) == 24 and {r["document_kind"] for r in rows} == {"literature"}
    # Coders and names, then four per chunk of 2000 episodes: the same for 24 rows as for 82. On PostgreSQL
    # inside the test's transaction, one more: the SET LOCAL that keeps the pages' plans serial.
    assert counts[0] == counts[1] == counts[2] <= 11 + (connection.vendor == "postgresql")

    response = client.get("/api/v1/studies/demo/export/?format=csv&split=holdout")
    text = b"".join(response.streaming_content).decode()
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == 4 and {r["split"] for r in table} == {"holdout"}
    assert "coder1_failure_type" in table[0]

    manifest = client.get("/api/v1/studies/demo/export/?format=csv&split=holdout&manifest=true").json()
    assert manifest["rows"] == 4 and manifest["filters"] == {"split": "holdout"}
    assert manifest["sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_the_api_exports_parquet_directly_or_through_a_job(
    demo, client, settings, django_capture_on_commit_callbacks, monkeypatch
):
    from django.contrib.auth import get_user_model

    from config.celery import app

    owner = get_user_model().objects.get(username="demo-owner")
    client.force_login(owner)
    response = client.get("/api/v1/studies/demo/export/?format=parquet")
    table = pq.read_table(io.BytesIO(b"".join(response.streaming_content)))
    assert table.num_rows == 82 and "codings" in table.column_names

    settings.FAULTLINE_EXPORT_PARQUET_SYNC_ROWS = 10
    monkeypatch.setitem(app.conf, "task_always_eager", True)  # restored after the test
    with django_capture_on_commit_callbacks(execute=True):
        started = client.get("/api/v1/studies/demo/export/?format=parquet&kind=github_issue")
    assert started.status_code == 202
    job = client.get(f"/api/v1/jobs/{started.json()['id']}/").json()
    assert job["status"] == "success", job
    assert job["result"]["rows"] == 58
    file = client.get(f"/api/v1/jobs/{job['id']}/file/")
    data = b"".join(file.streaming_content)
    assert hashlib.sha256(data).hexdigest() == job["result"]["sha256"]


def test_only_owners_export_usernames(demo, client):
    from django.contrib.auth import get_user_model

    User = get_user_model()
    client.force_login(User.objects.get(username="demo-coder1"))
    Study.objects.filter(slug="demo").update(blind=False)
    assert client.get("/api/v1/studies/demo/export/?coders=usernames").status_code == 403
    client.force_login(User.objects.get(username="demo-owner"))
    body = b"".join(client.get("/api/v1/studies/demo/export/?coders=usernames").streaming_content)
    assert b'"coder":"demo-coder1"' in body


def test_timestamps_are_written_as_isoformat_writes_them_on_every_engine(demo):
    """The database writes the timestamps' text (no datetime is built per value): it must be the
    bytes Python's isoformat gives, with or without a fraction, trailing zeros and all."""
    from datetime import UTC, datetime

    from annotate.exports.rows import export_rows
    from annotate.models import Episode

    coding = Coding.objects.filter(episode__study=demo).order_by("pk").first()
    plain = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    Coding.objects.filter(pk=coding.pk).update(created_at=plain, updated_at=plain.replace(microsecond=120000))
    Episode.objects.filter(pk=coding.episode_id).update(created_at=plain.replace(microsecond=5))
    Document.objects.filter(pk=coding.episode.document_id).update(imported_at=plain.replace(year=2024))
    rows = {r["external_id"]: r for r in export_rows(demo)}
    row = rows[coding.episode.document.external_id]
    assert row["episode_created_at"] == "2025-03-04T05:06:07.000005Z"
    assert row["imported_at"] == "2024-03-04T05:06:07Z"
    mine = [c for c in row["codings"] if c["created_at"] == "2025-03-04T05:06:07Z"]
    assert len(mine) == 1 and mine[0]["updated_at"] == "2025-03-04T05:06:07.120000Z"
    assert row["first_coded_at"] <= "2025-03-04T05:06:07Z"
    for episode in Episode.objects.filter(study=demo).select_related("document")[:20]:
        got = rows[episode.document.external_id]
        assert got["episode_created_at"] == episode.created_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
        assert got["imported_at"] == episode.document.imported_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
