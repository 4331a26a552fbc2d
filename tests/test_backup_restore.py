"""Backups restore into a fresh database with the same rows and the same codings."""

import json
import os
import subprocess
import sys
import uuid

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from annotate.models import Coding, Episode
from annotate.ops.backup import codings_digest, row_counts


@pytest.mark.django_db(transaction=True)
def test_it_backs_up_and_restores_into_an_empty_database(codebook, tmp_path, capsys, eager_jobs):
    call_command("demo")
    before_counts, before_digest = row_counts(), codings_digest()
    assert before_counts["annotate.Coding"] > 100
    call_command("backup", "--out", str(tmp_path / "b"))
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["codings_sha256"] == before_digest
    export = tmp_path / "b" / "exports" / "demo.jsonl"
    assert len(export.read_text().splitlines()) == Episode.objects.filter(study__slug="demo").count()
    assert (tmp_path / "b" / "exports" / "demo-incidents.jsonl").exists()
    assert "exports/demo.jsonl" in manifest["files"]

    call_command("flush", "--noinput")
    assert Coding.objects.count() == 0
    call_command("restore", str(tmp_path / "b"))
    assert row_counts() == before_counts
    assert codings_digest() == before_digest
    assert "restored and verified" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_damaged_backup_or_a_non_empty_database(codebook, tmp_path):
    call_command("demo")
    call_command("backup", "--out", str(tmp_path / "b"))
    with pytest.raises(CommandError, match="needs an empty database"):
        call_command("restore", str(tmp_path / "b"))
    data = tmp_path / "b" / "data.json"
    data.write_text(data.read_text().replace('"memo"', '"memo" ', 1))
    call_command("flush", "--noinput")
    with pytest.raises(CommandError, match="damaged"):
        call_command("restore", str(tmp_path / "b"))


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_pg_dump_restores_into_a_new_postgres_database(require_postgres, codebook, tmp_path):
    call_command("demo")
    expected = {"counts": row_counts(), "digest": codings_digest()}
    call_command("backup", "--out", str(tmp_path / "b"))
    dump = tmp_path / "b" / "database.pgdump"
    assert dump.exists()

    db = connection.settings_dict
    fresh = f"faultline_restore_{uuid.uuid4().hex[:8]}"
    base = ["-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432), "-U", db["USER"]]
    subprocess.run(["createdb", *base, fresh], check=True)
    try:
        subprocess.run(["pg_restore", *base, "-d", fresh, "--no-owner", str(dump)], check=True)
        env = {**os.environ, "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{fresh}",
               "FAULTLINE_DEV": "1"}  # fmt: skip
        code = (
            "import json; from annotate.ops.backup import row_counts, codings_digest; "
            "print(json.dumps({'counts': row_counts(), 'digest': codings_digest()}))"
        )
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code], cwd=settings.BASE_DIR, env=env,
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        assert json.loads(out.strip().splitlines()[-1]) == expected
    finally:
        subprocess.run(["dropdb", *base, "--if-exists", fresh], check=False)
