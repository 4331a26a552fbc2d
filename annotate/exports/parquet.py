"""The dataset as Parquet: its schema (one typed column per field, codings as a list of structs) and the writer."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from annotate.exports.rows import BASE_COLUMNS, BOOL_COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, TIME_COLUMNS


def parquet_schema():
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    coding = pa.struct(
        [
            ("coder", pa.string()), ("failure_type", pa.string()), ("failure_type_original", pa.string()),
            ("source", pa.string()), ("stage", pa.string()),
            ("capability", pa.string()), ("not_a_failure", pa.bool_()), ("not_a_failure_reason", pa.string()),
            ("needs_new_type", pa.bool_()), ("confidence", pa.string()), ("evidence", pa.string()),
            ("from_suggestion", pa.bool_()), ("created_at", ts), ("updated_at", ts),
        ]
    )  # fmt: skip
    fields = []
    for col in BASE_COLUMNS:
        if col in BOOL_COLUMNS:
            typ = pa.bool_()
        elif col in INT_COLUMNS:
            typ = pa.int64()
        elif col in FLOAT_COLUMNS:
            typ = pa.float64()
        elif col in TIME_COLUMNS:
            typ = ts
        else:
            typ = pa.string()
        fields.append((col, typ))
    fields.append(("codings", pa.list_(coding)))
    return pa.schema(fields)


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _arrow_row(row: dict) -> dict:
    out = dict(row)
    for col in TIME_COLUMNS:
        out[col] = _parse_time(row[col])
    out["codings"] = [
        {**c, "created_at": _parse_time(c["created_at"]), "updated_at": _parse_time(c["updated_at"])}
        for c in row["codings"]
    ]
    return out


def parquet_write(rows: Iterable[dict], sink, *, batch_rows: int = 5000, progress: Callable | None = None) -> int:
    """Write rows to `sink` (a path or binary file) as Parquet, batch by batch. Returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema()
    n = 0
    with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        batch: list[dict] = []
        for row in rows:
            batch.append(_arrow_row(row))
            if len(batch) >= batch_rows:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                n += len(batch)
                batch = []
                if progress:
                    progress(n)
        if batch or n == 0:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
            n += len(batch)
    return n
