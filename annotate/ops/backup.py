"""Backups that prove themselves: a data dump plus a manifest of row counts and a
digest of every coding, checked again after a restore.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from annotate.exports.files import file_sha256
from annotate.models import Coding

# Everything a study's work depends on; sessions, lockouts and content types are
# recreated by `migrate` or are transient.
DUMP_APPS = ["auth.user", "auth.group", "taxonomy", "annotate"]
COUNTED = [
    "taxonomy.Codebook", "taxonomy.FailureType", "annotate.Study", "annotate.Membership", "annotate.Document",
    "annotate.Episode", "annotate.Coding", "annotate.HistoricalCoding", "annotate.Adjudication",
    "annotate.Suggestion", "annotate.Job", "auth.User",
]  # fmt: skip


def codings_digest() -> str:
    """sha256 over every coding's identity, codes and version, in id order."""
    h = hashlib.sha256()
    fields = ["id", "episode_id", "coder_id", "failure_type_id", "source_id", "stage_id", "capability_id",
              "not_a_failure", "needs_new_type", "confidence", "memo", "version"]  # fmt: skip
    for row in Coding.objects.order_by("id").values_list(*fields).iterator(chunk_size=5000):
        h.update(json.dumps(row, default=str).encode())
    return h.hexdigest()


def row_counts() -> dict[str, int]:
    return {label: apps.get_model(label).objects.count() for label in COUNTED}


@dataclass(frozen=True)
class BackupResult:
    path: Path
    manifest: dict


def backup_write(*, out_dir: Path) -> BackupResult:
    """Write data.json (dumpdata), a pg_dump when on PostgreSQL, and manifest.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # One repeatable-read snapshot, so the counts match the dump exactly.
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        counts, digest = row_counts(), codings_digest()
        call_command(
            "dumpdata", *DUMP_APPS, "--natural-foreign", "--indent", "0", "--output", str(out_dir / "data.json")
        )
    files = ["data.json"]
    # The labelled datasets too, readable without Faultline (JSONL with manifests).
    from annotate.exports.datasets import export_write
    from annotate.models import Study

    for study in Study.objects.order_by("slug"):
        name = f"exports/{study.slug}.jsonl"
        export_write(study=study, fmt="jsonl", out=out_dir / name)
        files += [name, f"{name}.manifest.json"]
    db = settings.DATABASES["default"]
    if connection.vendor == "postgresql" and shutil.which("pg_dump"):
        dump = out_dir / "database.pgdump"
        cmd = ["pg_dump", "-Fc", "-h", db["HOST"] or "127.0.0.1", "-p", str(db["PORT"] or 5432), "-U", db["USER"],
               "-f", str(dump), db["NAME"]]  # fmt: skip
        env = {"PGPASSWORD": db.get("PASSWORD") or ""}
        subprocess.run(cmd, check=True, env={**_path_env(), **env})  # noqa: S603 - fixed argv, no shell
        files.append(dump.name)
    manifest = {
        "created_at": timezone.now().isoformat(),
        "database": connection.vendor,
        "counts": counts,
        "codings_sha256": digest,
        "files": {name: file_sha256(out_dir / name) for name in files},
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return BackupResult(path=out_dir, manifest=manifest)


def _path_env() -> dict[str, str]:
    import os

    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


class RestoreError(Exception):
    pass


def backup_restore(*, backup_dir: Path) -> dict:
    """Load data.json into an empty, migrated database and verify it against the manifest."""
    manifest = json.loads((backup_dir / "manifest.json").read_text())
    data = backup_dir / "data.json"
    if file_sha256(data) != manifest["files"]["data.json"]:
        raise RestoreError("data.json does not match its checksum in manifest.json; the backup is damaged")
    non_empty = {k: v for k, v in row_counts().items() if v and k != "auth.User"}
    if non_empty:
        raise RestoreError(f"restore needs an empty database, but it holds {non_empty}")
    with transaction.atomic():
        call_command("loaddata", str(data), verbosity=0)
        counts, digest = row_counts(), codings_digest()
        if counts != manifest["counts"] or digest != manifest["codings_sha256"]:
            raise RestoreError(
                f"restored data does not match the manifest: counts {counts} vs {manifest['counts']}, "
                f"codings digest {digest[:12]} vs {manifest['codings_sha256'][:12]}"
            )
    return {"counts": counts, "codings_sha256": digest}
