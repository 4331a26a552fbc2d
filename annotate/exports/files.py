"""Reading an export file back, whatever its format (JSONL, CSV, Parquet), and its manifest's checks.

Split from annotate.exports.datasets, whose `import_dataset` reads through `dataset_rows`.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError

from annotate.exports import rows as exports
from lib import safejson


def _bool(value: str) -> bool | None:
    return {"true": True, "false": False, "": None}[value]


def _rows_jsonl(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield safejson.loads(line)
            except safejson.JSONSyntaxError as exc:
                raise ValidationError({"file": f"line {n}: not JSON ({exc.msg})"}) from None
            except safejson.JSONError as exc:
                raise ValidationError({"file": f"line {n}: {exc}"}) from None


def _rows_csv(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        wanted = [c for c in exports.BASE_COLUMNS if c not in exports.ASSIGNED_BY_DATABASE]
        missing = [c for c in wanted if c not in (header or []) and c not in exports.ADJUDICATION_CODES]
        if missing:
            raise ValidationError({"file": f"not a Faultline CSV export: missing columns {', '.join(missing[:5])}"})
        slots = sum(1 for c in header if c.startswith("coder") and "_" not in c)
        for n, cells in enumerate(reader, 2):
            if len(cells) != len(header):
                raise ValidationError({"file": f"line {n}: {len(cells)} cells, the header has {len(header)}"})
            raw = dict(zip(header, cells, strict=True))
            row: dict[str, Any] = {}
            for col in wanted:
                value = raw.get(col, "")  # only the adjudication's codes may be missing (older files)
                if col in exports.BOOL_COLUMNS:
                    row[col] = _bool(value)
                elif col in exports.INT_COLUMNS:
                    row[col] = int(value) if value else None
                elif col in exports.FLOAT_COLUMNS:
                    row[col] = float(value) if value else None
                else:
                    value = exports.csv_text_decode(value)
                    row[col] = value if value or col in _TEXT_NOT_NULL else None
            codings = []
            for i in range(1, slots + 1):
                prefix = f"coder{i}"
                if not raw[prefix]:
                    continue
                coding: dict[str, Any] = {}
                for key in exports.CODING_KEYS:
                    # .get: exports from before a column was added (failure_type_original) still load.
                    value = raw.get(prefix if key == "coder" else f"{prefix}_{key}", "")
                    if key in exports.CODING_BOOLS:
                        coding[key] = _bool(value)
                    else:
                        value = exports.csv_text_decode(value)
                        coding[key] = value if value or key in _CODING_TEXT_NOT_NULL else None
                codings.append(coding)
            row["codings"] = codings
            yield row


# Columns that are never null in an export: an empty CSV cell is "" there, not None.
_TEXT_NOT_NULL = {"study", "codebook", "document_kind", "external_id", "url", "cluster", "title", "split", "excerpt",
                  "label_status", "label_reason"}  # fmt: skip
_CODING_TEXT_NOT_NULL = {"not_a_failure_reason", "confidence", "evidence"}


def _iso_out(value) -> str | None:
    return exports._iso(value) if isinstance(value, datetime) else value


def _rows_parquet(path: Path) -> Iterator[dict]:
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(str(path)).iter_batches(batch_size=5000):
        for row in batch.to_pylist():
            for col in exports.TIME_COLUMNS:
                row[col] = _iso_out(row.get(col))
            row["codings"] = [
                {**c, "created_at": _iso_out(c["created_at"]), "updated_at": _iso_out(c["updated_at"])}
                for c in row.get("codings") or []
            ]
            yield row


def dataset_rows(path: Path) -> Iterator[dict]:
    """Rows of an export file, as the JSONL export shapes them, whatever its format (by extension)."""
    readers = {".jsonl": _rows_jsonl, ".csv": _rows_csv, ".parquet": _rows_parquet}
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise ValidationError({"file": f"'{path.name}': use a .jsonl, .csv or .parquet export"})
    return reader(path)


def manifest_for(path: Path) -> dict | None:
    side = Path(f"{path}.manifest.json")
    return json.loads(side.read_text(encoding="utf-8")) if side.exists() else None


def file_sha256(path: Path) -> str:
    """The file's SHA-256, read in 1 MB blocks (the manifest's check; the report's provenance too)."""
    sha = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            sha.update(chunk)
    return sha.hexdigest()
