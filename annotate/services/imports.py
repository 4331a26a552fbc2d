"""Writes for imports: idempotent, batched upserts of parsed records into a study.

A record is keyed on (study, kind, external_id). `Document.content_hash` (sha256 of
what we store) tells "unchanged" from "updated" without reading bodies back, so a
no-change re-import costs one indexed SELECT per batch and no writes. New documents
get one Episode each; an updated document keeps its episodes and their codings.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import date, time
from itertools import islice
from pathlib import Path
from queue import Empty, Full, Queue
from typing import Any, TypeVar

import orjson
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.move import file_move_safe
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import JSONField
from django.utils import timezone

from annotate.importers import EXTENSIONS, ImportFileError, Record, Skip, clean_text, github_record, iter_file
from annotate.jobs.registry import job_handler
from annotate.models import Document, Episode, Job, QueueOrder, Study
from annotate.studies.members import may_create_studies
from annotate.studies.services import queue_key_for, study_create
from lib.db.prefetch import prefetched
from taxonomy.models import Codebook
from taxonomy.services import CodebookError, codebook_load

ProgressFn = Callable[[int, int], None]
T = TypeVar("T")
log = logging.getLogger(__name__)
BATCH_SIZE = 1000
UPDATE_FIELDS = ["url", "cluster", "title", "body", "labels", "meta", "raw", "content_hash", "updated_at"]
UPLOAD_DIR = "imports"

__all__ = [
    "ImportFileError",
    "ImportResult",
    "import_file",
    "import_file_resumable",
    "import_github_repo",
    "import_records",
    "import_upload_start",
    "job_import",
    "record_hash",
]


@dataclass
class ImportResult:
    """What an import did. `skip_reasons` counts skipped items by reason."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    skip_reasons: Counter = field(default_factory=Counter)
    # Set when a live import had to stop early (what was imported before is kept).
    stopped: str = ""

    @property
    def seen(self) -> int:
        return self.created + self.updated + self.unchanged + self.skipped

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skip_reasons[reason] += 1

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "skip_reasons": dict(self.skip_reasons),
        }
        if self.stopped:
            data["stopped"] = self.stopped
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImportResult:
        """The inverse of as_dict (a resumed import continues its counts)."""
        return cls(
            created=data.get("created", 0),
            updated=data.get("updated", 0),
            unchanged=data.get("unchanged", 0),
            skipped=data.get("skipped", 0),
            skip_reasons=Counter(data.get("skip_reasons") or {}),
            stopped=data.get("stopped", ""),
        )

    def add(self, other: ImportResult) -> None:
        """Count another part of the same import (a batch written by another connection) into this one."""
        self.created += other.created
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.skipped += other.skipped
        self.skip_reasons.update(other.skip_reasons)

    def summary(self) -> str:
        text = f"{self.created} created, {self.updated} updated, {self.unchanged} unchanged, {self.skipped} skipped"
        if self.skip_reasons:
            text += " (" + ", ".join(f"{n} {reason}" for reason, n in sorted(self.skip_reasons.items())) + ")"
        return text


# Objects the cyclic collector may let pile up during an import before it looks (Python's default: 700).
IMPORT_GC_THRESHOLD = 50_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the cyclic garbage collector less often for the block, and as before after it.

    An import allocates a dozen containers per record (its JSON, its Record, its spool row),
    all acyclic and all freed by reference counting; at the default threshold the collector
    runs every ~60 records and walks them, a sixth of the parse's CPU and a quarter of the
    spool read's. Cycles still get collected, only in larger, rarer passes. The thresholds
    are the process's: two imports at once in one process just restore them in turn."""
    before = gc.get_threshold()
    gc.set_threshold(max(IMPORT_GC_THRESHOLD, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


# An import that creates or updates this many documents refreshes the planner's statistics when it ends.
ANALYZE_AFTER = 5_000
# The document columns that queries filter, join or search on: sampling the bodies and raw JSON as well
# tripled the ANALYZE (0.29 s against 0.87 s on 200,000 documents) for statistics no plan reads.
ANALYZED_DOCUMENT_COLUMNS = ("id", "study_id", "kind", "external_id", "cluster", "triage_status", "severity",
                             "assignee_id", "occurred_at", "search")  # fmt: skip


def statistics_refresh(result: ImportResult) -> bool:
    """After a large import on PostgreSQL: ANALYZE the document and episode tables. Returns whether it ran.

    Until the planner has statistics that include the new rows, it takes a new study for an
    empty one: on a 200,000-document study just imported, the documents list and search took
    370-480 ms a page instead of 19-30 ms. Autovacuum would analyze the tables in time, where
    it runs, but only once a tenth of the table has changed, which a new study in a big table
    may never reach. It costs under a second on a million-row table and never fails the import
    (a connection without the table's ownership only gets a warning)."""
    if connection.vendor != "postgresql" or result.created + result.updated < ANALYZE_AFTER:
        return False
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"ANALYZE {Document._meta.db_table} ({', '.join(ANALYZED_DOCUMENT_COLUMNS)}), {Episode._meta.db_table}"
            )
    except DatabaseError:
        log.warning("could not refresh the planner's statistics after an import", exc_info=True)
        return False
    return True


def _labels_field(labels: list[str]) -> str:
    # Stored as ",a,b," so `labels__icontains=",a,"` matches whole labels only.
    names = [name.replace(",", " ") for name in labels]
    return ("," + ",".join(names) + ",")[:2000] if names else ""


# Provenance, not content: the same record read from .bib and then .csv is "unchanged".
HASH_IGNORED_META = frozenset({"format", "entry_type"})


_HASH_JSON = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":"), "default": str}


def _json_string(text: str) -> bytes:
    """`json.dumps(text, ensure_ascii=False)` as UTF-8: orjson writes the same bytes for every code point
    (annotate/tests/test_imports.py checks them all) several times faster; it refuses a lone surrogate."""
    try:
        return orjson.dumps(text)
    except TypeError:
        return json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")


_PLAIN = frozenset({str, int, bool, type(None)})


def record_hash(record: Record) -> str:
    """sha256 of a record's content: url, cluster, title, body, labels and meta.

    `raw` is left out: for GitHub, meta carries `updated_at`, which moves on any change.
    The hash is of the compact, key-sorted JSON of `[url, cluster, title, body, labels, meta]`
    as `json.dumps(..., **_HASH_JSON)` writes it (`_record_hash_json`); it is stored, so it must
    never change. For the usual record (text, whole numbers and booleans, as every importer
    gives) orjson writes those same bytes several times faster: the same escapes for every
    code point, keys sorted in the same order. Anything else (a float, a nested value, an
    integer over 64 bits, a lone surrogate) takes the reference path.
    """
    meta = {k: v for k, v in record.meta.items() if k not in HASH_IGNORED_META}
    if (
        all(type(v) in _PLAIN for v in meta.values())
        and type(record.body) is str
        and type(record.labels) is list
        and all(type(x) is str for x in record.labels)
        and type(record.url) in _PLAIN
        and type(record.cluster) in _PLAIN
        and type(record.title) in _PLAIN
    ):
        content = [record.url, record.cluster, record.title, record.body, record.labels, meta]
        try:
            return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()
        except TypeError:  # an integer over 64 bits, a lone surrogate, a key that is not text
            pass
    return _record_hash_json(record.url, record.cluster, record.title, record.body, record.labels, meta)


def _record_hash_json(url, cluster, title, body, labels, meta) -> str:
    """The reference form of record_hash, for any value json.dumps takes."""
    head = json.dumps([url, cluster, title], **_HASH_JSON)  # "[url,cluster,title]"
    tail = json.dumps([labels, meta], **_HASH_JSON)  # "[labels,meta]"
    h = hashlib.sha256(head[:-1].encode("utf-8", "surrogatepass"))
    h.update(b",")
    h.update(_json_string(body))
    h.update(b",")
    h.update(tail[1:].encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _max_params() -> int:
    """Bound parameters one statement may carry on this database."""
    if connection.vendor == "sqlite":
        import sqlite3

        connection.ensure_connection()
        getlimit = getattr(connection.connection, "getlimit", None)  # Python 3.11+
        return getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if getlimit else 999
    return 65535 if connection.vendor == "postgresql" else (connection.features.max_query_params or 999)


def _copy_field(value: Any) -> str:
    """One value in COPY's text format (the caller escapes strings)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (date, time)):  # datetime too
        return value.isoformat()
    return str(value)


def _copy_escape(text: str) -> str:
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\n" in text:
        text = text.replace("\n", "\\n")
    if "\r" in text:
        text = text.replace("\r", "\\r")
    if "\t" in text:
        text = text.replace("\t", "\\t")
    return text


def _json_text(value: Any, field: JSONField) -> str:
    """A JSON field's value as text for COPY: orjson, or the field's own encoder for what orjson refuses."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, cls=field.encoder, ensure_ascii=False)


# The column types _RawWriter copies in PostgreSQL's binary format, by db_type without its length, with the
# type OIDs psycopg picks its dumpers by. A JSON column goes as bytea, whose dumper sends bytes as they are:
# jsonb's binary form is a version byte and the JSON text (_jsonb_binary). Any other type keeps the text format.
_BINARY_OIDS = {"bigint": 20, "integer": 23, "smallint": 21, "varchar": 1043, "text": 25, "boolean": 16,
                "timestamp with time zone": 1184, "double precision": 701, "jsonb": 17}  # fmt: skip


def _base_type(db_type: str | None) -> str | None:
    return db_type.split("(", 1)[0] if db_type else None


def _jsonb_binary(value: Any, field: JSONField) -> bytes:
    """A JSON field's value in jsonb's binary COPY form: version 1, then the JSON text of _json_text."""
    return b"\x01" + _json_text(value, field).encode()


class _RawWriter:
    """Many rows at once, straight through the DB-API: COPY on PostgreSQL, multi-row INSERT elsewhere.

    Django's bulk_create spends ~50 µs per row compiling expressions (and its SQLite
    backend splits statements at 999 parameters), which alone would cap an import
    below 4,000 issues/s. Each value is still prepared by its field, but only JSON
    fields need per-row work; defaults and timestamps are prepared once.

    With `with_pk`, rows carry their primary key (ids the caller drew from the
    table's sequence, see `_ids_draw`), so nothing has to be read back.
    """

    def __init__(self, model, overrides: dict[str, Any], *, with_pk: bool = False):
        self.model = model
        self.fields = [f for f in model._meta.concrete_fields if with_pk or not f.primary_key]
        qn = connection.ops.quote_name
        self.table = qn(model._meta.db_table)
        self.columns = ", ".join(qn(f.column) for f in self.fields)
        self.marks = "(" + ", ".join(["%s"] * len(self.fields)) + ")"
        self.pk = qn(model._meta.pk.column)
        self.constant = {}
        self.constant_text = {}
        for f in self.fields:
            value = overrides[f.attname] if f.attname in overrides else f.get_default()
            self.constant[f.attname] = f.get_db_prep_save(value, connection)
            if isinstance(f, JSONField):
                self.constant_text[f.attname] = _copy_escape(_json_text(value, f))
            else:
                value = self.constant[f.attname]
                self.constant_text[f.attname] = _copy_escape(value) if isinstance(value, str) else _copy_field(value)
        self.json = {f.attname: f for f in self.fields if isinstance(f, JSONField)}
        # PostgreSQL: the type of each column for COPY's binary format, or None (a column of a type not in
        # _BINARY_OIDS) to keep the text format.
        self.binary_types = None
        self.constant_binary: dict[str, Any] = {}
        if connection.vendor == "postgresql":
            types = [_BINARY_OIDS.get(_base_type(f.db_type(connection))) for f in self.fields]
            if None not in types:
                self.binary_types = types
                for f in self.fields:
                    value = overrides[f.attname] if f.attname in overrides else f.get_default()
                    binary = _jsonb_binary(value, f) if f.attname in self.json else self.constant[f.attname]
                    self.constant_binary[f.attname] = binary

    @property
    def names(self) -> list[str]:
        """The attnames of the columns, in the order `insert(..., prepared=True)` expects each row."""
        return [f.attname for f in self.fields]

    def row(self, values: dict[str, Any]) -> list:
        out = []
        for f in self.fields:
            name = f.attname
            if name not in values:
                out.append(self.constant[name])
            elif name in self.json:
                out.append(self.json[name].get_db_prep_save(values[name], connection))
            else:
                out.append(values[name])
        return out

    def _copy_line(self, values: dict[str, Any]) -> str:
        out = []
        for f in self.fields:
            name = f.attname
            if name not in values:
                out.append(self.constant_text[name])
                continue
            value = values[name]
            if name in self.json:
                out.append(_copy_escape(_json_text(value, self.json[name])))
            elif isinstance(value, str):
                out.append(_copy_escape(value))
            else:
                out.append(_copy_field(value))
        return "\t".join(out)

    def _copy_binary(self, rows: list[dict[str, Any]]) -> None:
        """COPY in PostgreSQL's binary format. psycopg's C dumpers, picked by each column's type, write the
        values, and the server takes them without parsing text: no escapes to undo, no timestamps or ids
        to read from digits (3-5 µs less server CPU per document, and less here than our own text lines)."""
        slots = [(f.attname, self.json.get(f.attname), self.constant_binary[f.attname]) for f in self.fields]
        connection.ensure_connection()
        sql = f"COPY {self.table} ({self.columns}) FROM STDIN (FORMAT BINARY)"
        with connection.wrap_database_errors, connection.connection.cursor() as cursor, cursor.copy(sql) as copy:
            copy.set_types(self.binary_types)
            write = copy.write_row
            for values in rows:
                write([
                    constant if name not in values
                    else values[name] if json_field is None
                    else _jsonb_binary(values[name], json_field)
                    for name, json_field, constant in slots
                ])  # fmt: skip

    def _copy_prepared(self, values) -> str:
        return "\t".join(_copy_escape(v) if isinstance(v, str) else _copy_field(v) for v in values)

    def insert(self, rows: list, *, prepared: bool = False) -> list[int] | None:
        """Insert the rows: dicts by attname, or with `prepared`, sequences of every column's value
        in `names` order (no JSON fields to prepare), which skips the per-value dict lookups.
        Returns their new primary keys (in no particular order), or None when the caller must
        look them up (PostgreSQL's COPY returns none)."""
        if connection.vendor == "postgresql" and not prepared and self.binary_types is not None:
            self._copy_binary(rows)
            return None
        if connection.vendor == "postgresql":
            # COPY in its text format, written by us in one piece: about twice as fast as multi-row INSERTs
            # on the server, and several times faster here than adapting value by value. It takes what the
            # binary format would refuse: `prepared` rows, whose values need only print as their column
            # reads them, and columns of a type _BINARY_OIDS does not know.
            line = self._copy_prepared if prepared else self._copy_line
            data = "".join(line(values) + "\n" for values in rows).encode()
            connection.ensure_connection()
            sql = f"COPY {self.table} ({self.columns}) FROM STDIN"
            # Driver errors (a unique key another import took) as Django's, which callers catch.
            with connection.wrap_database_errors, connection.connection.cursor() as cursor, cursor.copy(sql) as copy:
                copy.write(data)
            return None
        make = (lambda values: values) if prepared else self.row
        per_statement = max(1, min(1000, _max_params() // len(self.fields)))
        returning = connection.features.can_return_rows_from_bulk_insert
        ids: list[int] = []
        sqlite = connection.vendor == "sqlite"
        # SQLite's own cursor, with its own placeholders: Django's rewrites every %s of a statement
        # of thousands of them with a regex.
        marks_one = "(" + ", ".join(["?"] * len(self.fields)) + ")" if sqlite else self.marks
        raw = connection.connection if sqlite else connection
        with connection.wrap_database_errors, closing(raw.cursor()) as cursor:
            for i in range(0, len(rows), per_statement):
                chunk = rows[i : i + per_statement]
                marks = ", ".join([marks_one] * len(chunk))
                sql = f"INSERT INTO {self.table} ({self.columns}) VALUES {marks}"  # noqa: S608 - names from the model
                params = [value for values in chunk for value in make(values)]
                if returning:
                    cursor.execute(f"{sql} RETURNING {self.pk}", params)
                    ids.extend(row[0] for row in cursor.fetchall())
                else:
                    cursor.execute(sql, params)
        return ids if returning else None


# The sequences are looked up once, in a materialised CTE: called per row, pg_get_serial_sequence
# and the text-to-regclass cast cost ten times what nextval does (6 µs of server CPU per issue).
_IDS_SQL = (
    "WITH seq AS MATERIALIZED (SELECT pg_get_serial_sequence(%s, 'id')::regclass AS d, "
    "pg_get_serial_sequence(%s, 'id')::regclass AS e) "
    "SELECT nextval(seq.d), nextval(seq.e) FROM seq, generate_series(1, %s)"
)


def _ids_draw(n: int) -> list[tuple[int, int]]:
    """PostgreSQL: n (document id, episode id) pairs drawn from the tables' sequences in one query,
    so new rows are COPYed with their ids and nothing is read back to learn them."""
    with connection.cursor() as cursor:
        cursor.execute(_IDS_SQL, [Document._meta.db_table, Episode._meta.db_table, n])
        return cursor.fetchall()


def _document_values(record: Record, digest: str) -> dict[str, Any]:
    return {
        "kind": str(record.kind),  # a plain str: a DB driver may adapt an Enum by its name
        "external_id": record.external_id,
        "url": record.url,
        "cluster": record.cluster,
        "title": record.title,
        "body": record.body,
        "labels": _labels_field(record.labels),
        "meta": record.meta,
        "raw": record.raw,
        "content_hash": digest,
    }


def column_by_id_update(model, column: str, pg_type: str, pairs: list[tuple[Any, int]]) -> None:
    """Set `column` of many rows of `model`, each to its own value: `pairs` is [(value, id), ...], values already
    prepared for the database. PostgreSQL gets one UPDATE ... FROM (VALUES ...) (executemany would still be one
    UPDATE per row on the server); SQLite runs executemany in-process on one prepared statement."""
    if not pairs:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    name = connection.ops.quote_name(model._meta.get_field(column).column)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            values = ", ".join([f"(%s::{pg_type}, %s::bigint)"] * len(pairs))
            cursor.execute(
                f"UPDATE {table} AS t SET {name} = v.x FROM (VALUES {values}) AS v(x, id) WHERE t.id = v.id",  # noqa: S608
                [x for pair in pairs for x in pair],
            )
        else:
            cursor.executemany(f"UPDATE {table} SET {name} = %s WHERE id = %s", pairs)  # noqa: S608 - model names


def _queue_keys_set(study: Study, episode_ids: list[int]) -> None:
    """Give new episodes their place in the study's random order (it hashes the episode id)."""
    column_by_id_update(Episode, "queue_key", "bigint", [(queue_key_for(study, pk), pk) for pk in episode_ids])


def _existing(study: Study, batch: list[Record]) -> dict[tuple[str, str], tuple[int, str]]:
    """(kind, external_id) -> (id, content_hash) of the batch's records the study already has."""
    existing: dict[tuple[str, str], tuple[int, str]] = {}
    for kind in {r.kind for r in batch}:
        ids = [r.external_id for r in batch if r.kind == kind]
        if connection.vendor == "postgresql":
            # One array parameter rather than one per id: psycopg parses a query's placeholders in Python.
            sql = (
                "SELECT id, external_id, content_hash FROM annotate_document "
                "WHERE study_id = %s AND kind = %s AND external_id = ANY(%s)"
            )
            with connection.cursor() as cursor:
                cursor.execute(sql, [study.pk, kind, ids])
                rows = cursor.fetchall()
        else:
            rows = Document.objects.filter(study=study, kind=kind, external_id__in=ids).values_list(
                "pk", "external_id", "content_hash"
            )
        existing.update({(kind, ext): (pk, digest) for pk, ext, digest in rows})
    return existing


def _write_batch(
    *,
    study: Study,
    batch: list[Record],
    result: ImportResult,
    written: set[tuple[str, str]] | None = None,
    digests: dict[tuple[str, str], str] | None = None,
    fresh: bool = False,
) -> None:
    """Upsert one batch: one SELECT (none into a `fresh` study), then multi-row INSERT/UPDATE only for what changed.

    `written`, if given, receives the (kind, external_id) of every record inserted or updated;
    `digests` may hold record_hash of records, already computed (by a parser thread)."""
    existing = {} if fresh else _existing(study, batch)
    new: list[dict[str, Any]] = []
    changed: list[tuple[int, dict[str, Any]]] = []
    for record in batch:
        digest = (digests or {}).get((record.kind, record.external_id)) or record_hash(record)
        found = existing.get((record.kind, record.external_id))
        if found is None:
            new.append(_document_values(record, digest))
        elif found[1] != digest:
            changed.append((found[0], _document_values(record, digest)))
        else:
            result.unchanged += 1
            continue
        if written is not None:
            written.add((record.kind, record.external_id))
    now = timezone.now()
    if new and connection.vendor == "postgresql":
        ids = _ids_draw(len(new))
        for values, (doc_id, _) in zip(new, ids, strict=True):
            values["id"] = doc_id
        _RawWriter(Document, {"study_id": study.pk, "imported_at": now, "updated_at": now}, with_pk=True).insert(new)
        episodes = [(ep_id, doc_id, queue_key_for(study, ep_id)) for doc_id, ep_id in ids]
        writer = _RawWriter(Episode, {"study_id": study.pk, "created_at": now}, with_pk=True)
        writer.insert([{"id": ep_id, "document_id": doc_id, "queue_key": key} for ep_id, doc_id, key in episodes])
        result.created += len(new)
    elif new:
        doc_ids = _RawWriter(Document, {"study_id": study.pk, "imported_at": now, "updated_at": now}).insert(new)
        if doc_ids is None:
            doc_ids = []
            for kind in {v["kind"] for v in new}:
                ids = [v["external_id"] for v in new if v["kind"] == kind]
                inserted = Document.objects.filter(study=study, kind=kind, external_id__in=ids)
                doc_ids += inserted.values_list("pk", flat=True)
        writer = _RawWriter(Episode, {"study_id": study.pk, "created_at": now})
        episode_ids = writer.insert([{"document_id": pk} for pk in doc_ids])
        if episode_ids is None:
            episode_ids = list(Episode.objects.filter(document_id__in=doc_ids).values_list("pk", flat=True))
        _queue_keys_set(study, episode_ids)
        result.created += len(new)
    if changed:
        fields = [Document._meta.get_field(name) for name in UPDATE_FIELDS]
        qn = connection.ops.quote_name
        assignments = ", ".join(f"{qn(f.column)} = %s" for f in fields)
        sql = f"UPDATE {qn(Document._meta.db_table)} SET {assignments} WHERE id = %s"  # noqa: S608
        values = [({**v, "updated_at": now}, pk) for pk, v in changed]
        with connection.cursor() as cursor:
            cursor.executemany(
                sql, [(*(f.get_db_prep_save(v[f.attname], connection) for f in fields), pk) for v, pk in values]
            )
        result.updated += len(changed)


def import_records(
    *,
    study: Study,
    records: Iterable[Record | Skip],
    progress: Callable[[ImportResult], None] | None = None,
    result: ImportResult | None = None,
    seen: set[tuple[str, str]] | None = None,
    batch_size: int = BATCH_SIZE,
    written: set[tuple[str, str]] | None = None,
    digests: dict[tuple[str, str], str] | None = None,
    fresh: bool | None = None,
) -> ImportResult:
    """Upsert records in batches (the caller owns the transaction).

    A record whose (kind, external_id) already appeared in this import is skipped
    as a duplicate, so a file that repeats an issue cannot flip it back and forth.
    `written`, if given, receives the (kind, external_id) of each record inserted or updated;
    `digests` may give record_hash(record) by (kind, external_id) where the caller has it already.

    `fresh`: the study had no documents when this import began (found out here when None). Then
    no batch looks for existing documents: the only ones are this import's, which `seen` skips
    (a concurrent import of the same documents fails on the unique key). Besides saving a query,
    it avoids a plan that grows with the import: PostgreSQL's statistics still say the new study
    is empty, so it finds the batch's ids by scanning every document written so far.
    """
    result = result if result is not None else ImportResult()
    seen = seen if seen is not None else set()
    if fresh is None:
        fresh = not Document.objects.filter(study=study).exists()
    iterator = iter(records)
    while True:
        chunk = list(islice(iterator, batch_size))
        if not chunk:
            break
        batch = []
        for item in chunk:
            if isinstance(item, Skip):
                result.skip(item.reason)
                continue
            key = (item.kind, item.external_id)
            if key in seen:
                result.skip("duplicate in this import")
                continue
            seen.add(key)
            batch.append(item)
        if batch:
            _write_batch(study=study, batch=batch, result=result, written=written, digests=digests, fresh=fresh)
        if progress is not None:
            progress(result)
    return result


def import_file(
    *, study: Study, path: str | Path, include_prs: bool = False, progress: ProgressFn | None = None
) -> ImportResult:
    """Import a GitHub-issues (.json/.jsonl) or literature (.bib/.ris/.csv) file into `study`.

    The format is chosen by extension, else by content. The whole file is one
    transaction: any malformed record raises ImportFileError and writes nothing.
    `progress(done, total)` counts records; `total` is estimated from the share
    of the file read so far, and is exact at the end.
    """
    path = Path(path)
    if not path.is_file():
        raise ImportFileError(f"no such file: {path}")
    size = max(path.stat().st_size, 1)
    read = [0]

    def on_batch(result: ImportResult) -> None:
        if progress is not None and read[0]:
            done = result.seen
            progress(done, max(done, round(done * size / read[0])))

    def on_read(chars: int) -> None:
        read[0] = chars

    try:
        with fewer_collections(), transaction.atomic():
            records = iter_file(path, include_prs=include_prs, on_read=on_read if progress else None)
            with closing(prefetched(records, name="import-parse")) as records:
                result = import_records(study=study, records=records, progress=on_batch)
    except IntegrityError as exc:
        # Only a concurrent import of the same documents can collide on the unique key.
        raise ImportFileError(
            "another import wrote some of these documents at the same time; run this one again (it is idempotent)"
        ) from exc
    if not connection.in_atomic_block:  # else the caller's transaction has not committed the rows yet
        statistics_refresh(result)
    if progress is not None:
        progress(result.seen, result.seen)
    return result


def _spool_line(items: list[Record | Skip], digests: list[str | None]) -> bytes:
    """One spooled batch as one line of JSON: each record's fields and its content hash, or a skip."""
    rows = [
        ["s", item.reason, item.external_id]
        if isinstance(item, Skip)
        else [
            str(item.kind),
            item.external_id,
            item.cluster,
            item.title,
            item.body,
            item.url,
            item.labels,
            item.meta,
            item.raw,
            digest,
        ]
        for item, digest in zip(items, digests, strict=True)
    ]
    try:
        return b"o" + orjson.dumps(rows) + b"\n"
    except TypeError:  # an integer over 64 bits, say, in a record's raw JSON
        return b"j" + json.dumps(rows, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"


def _spool_batch(line: bytes) -> tuple[list[Record | Skip], dict[tuple[str, str], str]]:
    rows = orjson.loads(line[1:]) if line[:1] == b"o" else json.loads(line[1:])
    items: list[Record | Skip] = []
    digests: dict[tuple[str, str], str] = {}
    for row in rows:
        if row[0] == "s" and len(row) == 3:
            items.append(Skip(reason=row[1], external_id=row[2]))
            continue
        kind, external_id, cluster, title, body, url, labels, meta, raw, digest = row
        items.append(Record(kind, external_id, cluster, title, body, url, labels, meta, raw))
        # The first of two records with one key is the one imported (the second is a duplicate).
        digests.setdefault((kind, external_id), digest)
    return items, digests


def spool_path_for(path: Path) -> Path:
    return path.with_name(path.name + ".spool")


def _spool_write(
    path: Path, *, include_prs: bool, offer: Callable[[int, list, dict], None] | None = None
) -> tuple[Path, int]:
    """Parse the whole file once, in batches of BATCH_SIZE, into a spool beside it: each batch's records
    and their hashes as a line of JSON. Raises ImportFileError, writing no spool, for a malformed file.

    A record whose key came earlier in the file is spooled as a Skip ("duplicate in this import"),
    so batches can be written in any order, by several connections at once. The writing pass
    then reads the spool instead of parsing the file a second time. The spool is renamed into
    place only when whole, so a retried job reuses it or makes it anew.
    `offer(index, items, digests)`, if given, is handed each batch as it is spooled (see _EarlyWriters).
    Returns the spool and the number of items (records and skips) in the file."""
    spool = spool_path_for(path)
    part = spool.with_name(spool.name + ".part")
    total = index = 0
    seen: set[tuple[str, str]] = set()
    try:
        with (
            part.open("wb") as out,
            closing(prefetched(iter_file(path, include_prs=include_prs), name="import-parse")) as items,
        ):
            while chunk := list(islice(items, BATCH_SIZE)):
                for i, item in enumerate(chunk):
                    if isinstance(item, Record):
                        key = (item.kind, item.external_id)
                        if key in seen:
                            chunk[i] = Skip(reason="duplicate in this import", external_id=item.external_id)
                        seen.add(key)
                digests = [record_hash(item) if isinstance(item, Record) else None for item in chunk]
                out.write(_spool_line(chunk, digests))
                if offer is not None:  # a repeated key is a Skip by now: one digest a key
                    by_key = {(i.kind, i.external_id): d for i, d in zip(chunk, digests, strict=True) if d is not None}
                    offer(index, chunk, by_key)
                index += 1
                total += len(chunk)
        part.replace(spool)
    finally:
        part.unlink(missing_ok=True)
    return spool, total


def import_writers() -> int:
    """How many connections write an import's batches at once: FAULTLINE_IMPORT_WRITERS on PostgreSQL
    (default 2), where each batch's inserts, full-text vectors and index entries cost the server far
    more than the spool costs us; always 1 on SQLite, which has one writer, and inside a transaction,
    whose uncommitted rows other connections cannot see."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return 1
    return max(1, settings.FAULTLINE_IMPORT_WRITERS)


class _Batches:
    """Which of the spool's batches have committed, and the counts so far, shared by the writers.

    A checkpoint names the committed batches as `through` (every batch before it) and `also`
    (later ones that a faster writer committed first); a checkpoint from before batches were
    numbered gives only `records`, a prefix of the file."""

    def __init__(self, resume: dict[str, Any] | None, total: int):
        self.total = total
        self.lock = threading.Lock()
        if resume:
            self.records = resume["records"]
            self.result = ImportResult.from_dict(resume["result"])
            self.through = resume.get("through")
            self.also = set(resume.get("also") or ())
        else:
            self.records, self.result, self.through, self.also = 0, ImportResult(), 0, set()
        self.prefix = self.records if self.through is None else None  # the old form

    def pending(self, index: int, start: int, items: list) -> list | None:
        """The items of batch `index` (its first item is the file's `start`-th) still to write, or None."""
        if self.prefix is None:
            return None if index < self.through or index in self.also else items
        if start + len(items) <= self.prefix:
            return None
        return items[max(0, self.prefix - start) :]

    def committed(self, index: int) -> bool:
        """Batch `index` is known to have committed (a checkpoint of the old form never says so)."""
        return self.prefix is None and (index < self.through or index in self.also)

    def commit(self, index: int, n: int, result: ImportResult) -> dict[str, Any]:
        """Count a batch as written (the caller holds `lock`); returns the checkpoint to save."""
        self.records += n
        self.result.add(result)
        if self.prefix is None:
            self.also.add(index)
            while self.through in self.also:
                self.also.remove(self.through)
                self.through += 1
        state: dict[str, Any] = {"records": self.records, "total": self.total, "result": self.result.as_dict()}
        if self.prefix is None:
            state.update(through=self.through, also=sorted(self.also))
        return state

    def checkpoint(self, written: list[tuple[int, int, ImportResult]], on_batch) -> tuple:
        """Count (index, records, result) batches as written and save the checkpoint with `on_batch(state)`,
        in the caller's transaction, holding `lock`. Returns the state from before, for restore() should
        the transaction then fail to commit; restores it itself if on_batch fails."""
        saved = self.snapshot()
        try:
            for index, n, result in written:
                state = self.commit(index, n, result)
            if on_batch is not None:
                on_batch(state)
        except BaseException:
            self.restore(saved)
            raise
        return saved

    def snapshot(self) -> tuple:
        return (self.records, self.result.as_dict(), self.through, set(self.also))

    def restore(self, saved: tuple) -> None:
        self.records, result, self.through, self.also = saved
        self.result = ImportResult.from_dict(result)


def _constraints_check_now() -> None:
    """Run the deferred foreign-key checks of every row this transaction wrote now, while the other writers
    run theirs: at the commit, which holds the batches' lock, they would run one writer after another."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _write_spooled_batch(
    *, study: Study, index: int, items: list, digests: dict, fresh: bool, batches: _Batches, on_batch
) -> None:
    """One batch in one transaction, with its checkpoint. The checkpoint is taken under the shared lock
    and the lock is held until the commit, so checkpoints commit in the order they were counted."""
    held = False
    saved = None
    try:
        with transaction.atomic():
            result = import_records(study=study, records=items, result=ImportResult(), seen=set(), fresh=fresh,
                                    digests=digests)  # fmt: skip
            _constraints_check_now()
            batches.lock.acquire()
            held = True
            saved = batches.checkpoint([(index, len(items), result)], on_batch)
    except BaseException:
        if held and saved is not None:
            batches.restore(saved)
        raise
    finally:
        if held:
            batches.lock.release()


@fewer_collections()
def import_file_resumable(
    *,
    study: Study,
    path: str | Path,
    include_prs: bool = False,
    resume: dict[str, Any] | None = None,
    on_batch: Callable[[dict[str, Any]], None] | None = None,
    progress: ProgressFn | None = None,
    writers: int | None = None,
) -> ImportResult:
    """Import a file in committed batches, so that a retried job continues where the last one stopped.

    The file is parsed once first, into a spool beside it (_spool_write): a
    malformed file still raises ImportFileError and writes nothing. With several
    writers, batches are written during the parse into transactions that commit
    only once it has succeeded (_EarlyWriters). Then every other batch of the spool
    commits in a transaction of its
    own, together with `on_batch(state)`, where `state` holds how many records are
    done, the file's record count, the counts so far and which batches committed.
    Pass the last committed state as `resume` to continue after it. `writers`
    connections (import_writers() by default) write batches at once. The spool is
    deleted at the end, and kept when a batch fails, for the retry.
    """
    path = Path(path)
    if not path.is_file():
        raise ImportFileError(f"no such file: {path}")
    spool = spool_path_for(path)
    writers = writers or import_writers()
    fresh = not Document.objects.filter(study=study).exists()
    try:
        if resume and spool.is_file():
            total = resume["total"]
            batches = _Batches(resume, total)
        else:
            batches = _Batches(resume, 0)  # a checkpoint whose spool is gone: parse again, then resume
            early = None
            if writers > 1 and EARLY_WRITES and not resume:
                early = _EarlyWriters(writers, study=study, fresh=fresh, batches=batches, on_batch=on_batch)
            try:
                spool, total = _spool_write(path, include_prs=include_prs, offer=early and early.offer)
            except BaseException:
                if early is not None:
                    early.finish(commit=False)
                raise
            batches.total = total
            if early is not None:
                early.finish(commit=True)
    except IntegrityError as exc:
        raise _concurrent_import_error(exc) from exc
    if progress is not None:
        progress(batches.records, total)

    def work() -> Iterator[tuple[int, list, dict]]:
        position = 0
        with spool.open("rb") as lines:
            for index, line in enumerate(lines):
                if batches.committed(index):
                    # Written early, or before a restart: not worth decoding. (`position` is only read
                    # for a checkpoint of the old form, for which this is never true.)
                    continue
                items, digests = _spool_batch(line)
                start, position = position, position + len(items)
                todo = batches.pending(index, start, items)
                if todo:
                    yield index, todo, digests

    def write(index: int, items: list, digests: dict) -> None:
        _write_spooled_batch(study=study, index=index, items=items, digests=digests, fresh=fresh, batches=batches,
                             on_batch=on_batch)  # fmt: skip

    try:
        if writers == 1:
            for index, items, digests in work():
                write(index, items, digests)
                if progress is not None:
                    progress(batches.records, total)
        else:
            _write_in_threads(work(), write, writers, lambda: progress and progress(batches.records, total))
    except IntegrityError as exc:
        raise _concurrent_import_error(exc) from exc
    spool.unlink(missing_ok=True)
    if not connection.in_atomic_block:
        statistics_refresh(batches.result)
    return batches.result


def _concurrent_import_error(exc: IntegrityError) -> ImportFileError:
    return ImportFileError(
        "another import wrote some of these documents at the same time; run this one again "
        f"(it is idempotent) [{str(exc).splitlines()[0][:200]}]"
    )


# Write batches while the file is still being parsed (see _EarlyWriters); tests that pin the order of
# per-batch checkpoints turn it off.
EARLY_WRITES = True
_END = object()


class _RolledBack(Exception):
    pass


class _EarlyWriters:
    """Write batches while the parse goes on, without giving up "a malformed file writes nothing".

    The parse takes one core for a third of an import; the writes, mostly the server's
    work, wait for it. Here `n` threads, each with its own connection, take the batches
    the parse offers whenever one of them is free (the parse never waits for them), and
    write them into one transaction per thread that stays open until the parse ends.
    `finish(commit=True)` (the whole file parsed) then commits them one after another,
    each with a checkpoint naming its batches; `finish(commit=False)` rolls them all back,
    so nobody ever sees a row of a file that turns out malformed. A batch the parse offered
    while every writer was busy is written from the spool afterwards, as before.

    A job whose worker dies during the parse starts again from nothing, as it did when
    nothing was written before the parse ended; after `finish`, batches commit one by one.
    """

    def __init__(self, n: int, *, study: Study, fresh: bool, batches: _Batches, on_batch) -> None:
        self.study, self.fresh, self.batches, self.on_batch = study, fresh, batches, on_batch
        self.todo: Queue = Queue(maxsize=n)
        self.failed = threading.Event()
        self.commit = False
        self.errors: list[BaseException] = []
        self.written = 0  # batches written early, committed or not
        self.threads = [threading.Thread(target=self._run, name=f"import-early-{i}", daemon=True) for i in range(n)]
        for thread in self.threads:
            thread.start()

    def offer(self, index: int, items: list, digests: dict) -> None:
        if self.failed.is_set():
            raise self.errors[0]
        with suppress(Full):
            self.todo.put_nowait((index, items, digests))

    def finish(self, *, commit: bool) -> None:
        """Commit (or roll back) every writer's batches and stop the writers; raises a writer's error."""
        self.commit = commit
        for _ in self.threads:  # every writer takes tasks until it gets this, even after an error
            while True:
                try:
                    self.todo.put(_END, timeout=0.1)
                    break
                except Full:
                    if not any(thread.is_alive() for thread in self.threads):
                        break
        for thread in self.threads:
            thread.join()
        if commit and self.errors:
            raise self.errors[0]

    def _fail(self, exc: BaseException) -> None:
        self.errors.append(exc)
        self.failed.set()

    def _run(self) -> None:
        from django.db import connections

        atomic = None
        staged: list[tuple[int, int, ImportResult]] = []
        try:
            while (task := self.todo.get()) is not _END:
                if self.failed.is_set():
                    continue
                index, items, digests = task
                try:
                    if atomic is None:
                        atomic = transaction.atomic()
                        atomic.__enter__()
                    result = import_records(study=self.study, records=items, result=ImportResult(), seen=set(),
                                            fresh=self.fresh, digests=digests)  # fmt: skip
                    staged.append((index, len(items), result))
                    self.written += 1
                except BaseException as exc:
                    self._fail(exc)
                    if atomic is not None:
                        with suppress(Exception):  # the error is already told; the connection may be gone
                            atomic.__exit__(type(exc), exc, exc.__traceback__)  # rolls back
                        atomic = None
            if atomic is not None:
                self._close(atomic, staged)
        except BaseException as exc:  # not expected; told rather than lost with the thread
            self._fail(exc)
        finally:
            connections.close_all()

    def _close(self, atomic, staged: list[tuple[int, int, ImportResult]]) -> None:
        """Commit this writer's batches with their checkpoint, or roll them back. The shared lock is held
        until the commit, so checkpoints commit in the order they were counted (as _write_spooled_batch)."""
        held = False
        try:
            if not self.commit or self.failed.is_set():
                raise _RolledBack
            _constraints_check_now()
            self.batches.lock.acquire()
            held = True
            if self.failed.is_set():  # another writer's commit failed while this one waited
                raise _RolledBack
            saved = self.batches.checkpoint(staged, self.on_batch)  # undone by itself if it fails
        except BaseException as exc:
            if not isinstance(exc, _RolledBack):
                self._fail(exc)
            try:
                with suppress(Exception):
                    atomic.__exit__(type(exc), exc, exc.__traceback__)  # rolls back
            finally:
                if held:
                    self.batches.lock.release()
            return
        try:
            atomic.__exit__(None, None, None)  # commits
        except BaseException as exc:
            self.batches.restore(saved)
            self._fail(exc)
        finally:
            self.batches.lock.release()


def _write_in_threads(tasks: Iterator[tuple], write: Callable[..., None], writers: int, report: Callable) -> None:
    """Run write(*task) for every task on `writers` threads, each with its own database connection;
    `report()` runs in this thread after each task. The first error stops the rest (a batch in
    flight finishes or rolls back) and is raised here."""
    from django.db import connections

    todo: Queue = Queue(maxsize=writers)
    finished: Queue = Queue()
    failed = threading.Event()
    stop = object()

    def run() -> None:
        try:
            while (task := todo.get()) is not stop:
                if failed.is_set():
                    continue
                try:
                    write(*task)
                except BaseException as exc:  # handed to the main thread, which raises it
                    failed.set()
                    finished.put(exc)
                    continue
                finished.put(None)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, name=f"import-writer-{i}", daemon=True) for i in range(writers)]
    for thread in threads:
        thread.start()
    errors: list[BaseException] = []

    def drain(block: bool) -> None:
        while True:
            try:
                got = finished.get(block=block, timeout=0.05 if block else None)
            except Empty:
                return
            if got is None:
                report()
            else:
                errors.append(got)
            block = False

    try:
        for task in tasks:
            while not failed.is_set():
                try:
                    todo.put(task, timeout=0.05)
                    break
                except Full:
                    drain(block=False)
            drain(block=False)
            if failed.is_set():
                break
    except BaseException:
        # This thread failed (the spool, or report() finding the job's lease lost): the writers skip what
        # is still queued instead of writing it after the job has given up.
        failed.set()
        raise
    finally:
        for _ in threads:
            todo.put(stop)
        for thread in threads:
            thread.join()
        drain(block=False)
    if errors:
        raise errors[0]


def import_github_repo(
    *,
    study: Study,
    repo: str,
    labels: list[str] | tuple[str, ...] = (),
    since: str | None = None,
    state: str = "all",
    with_comments: bool = False,
    include_prs: bool = False,
    progress: ProgressFn | None = None,
    client=None,
) -> ImportResult:
    """Import a repository's issues live from the GitHub REST API (annotate.github).

    Each page is written in its own transaction, so when GitHub stops us (a rate
    limit that resets too late, an outage) what was imported is kept and
    `result.stopped` says why. An error before anything was imported raises GitHubError.
    """
    from annotate.github import PER_PAGE, GitHubClient, GitHubError, comments_markdown

    result = ImportResult()
    seen: set[tuple[str, str]] = set()
    n = 0
    own_client = client is None
    client = client or GitHubClient()
    try:
        for page in client.issue_pages(repo, labels=labels, since=since, state=state):
            records: list[Record | Skip] = []
            for item in page.items:
                n += 1
                record = github_record(item, n, include_prs=include_prs)
                if with_comments and isinstance(record, Record) and item.get("comments"):
                    record.body += clean_text(comments_markdown(client.comments(item)))
                    record.meta["with_comments"] = True
                records.append(record)
            with transaction.atomic():
                import_records(study=study, records=records, result=result, seen=seen)
            if progress is not None:
                total = page.last_page * PER_PAGE if page.last_page else n + (PER_PAGE if page.next_url else 0)
                progress(result.seen, max(total, result.seen))
    except GitHubError as exc:
        if result.seen == 0:
            raise
        result.stopped = str(exc)
    finally:
        if own_client:
            client.close()
    if not connection.in_atomic_block:
        statistics_refresh(result)
    if progress is not None:
        progress(result.seen, result.seen)
    return result


def upload_max_bytes() -> int:
    return settings.FAULTLINE_MAX_UPLOAD_MB * 1024 * 1024


def upload_store(uploaded_file, *, name: str, ext: str) -> Path:
    """Check an upload's size and store it under MEDIA_ROOT for a job; ValidationError if too big or empty."""
    if uploaded_file.size > upload_max_bytes():
        raise ValidationError(
            {
                "file": f"'{name}' is {uploaded_file.size / 1048576:.1f} MB; "
                f"uploads are limited to {settings.FAULTLINE_MAX_UPLOAD_MB} MB (FAULTLINE_MAX_UPLOAD_MB)."
            }
        )
    if uploaded_file.size == 0:
        raise ValidationError({"file": f"'{name}' is empty."})
    directory = Path(settings.MEDIA_ROOT) / UPLOAD_DIR
    directory.mkdir(parents=True, exist_ok=True)
    # Our own name, never the client's: no path tricks, no collisions.
    stored = directory / f"{uuid.uuid4().hex}{ext}"
    temporary = getattr(uploaded_file, "temporary_file_path", None)
    if temporary is not None:
        # Django spooled a large upload to a file already: move it (a rename on one file system) rather than
        # copy it, which took 0.5-0.7 s of a 90 MB upload's 1.7-2.3 s.
        file_move_safe(temporary(), str(stored))
        if settings.FILE_UPLOAD_PERMISSIONS is not None:  # as Django's storage does: a temporary file is 0600
            os.chmod(stored, settings.FILE_UPLOAD_PERMISSIONS)
        return stored
    with stored.open("wb") as out:
        for chunk in uploaded_file.chunks():
            out.write(chunk)
    return stored


def import_upload_start(*, study: Study, user, uploaded_file, include_prs: bool = False) -> Job:
    """Validate an uploaded file, store it under MEDIA_ROOT and start an "import" Job.

    Raises ValidationError({"file": ...}) for a missing, empty, oversized or
    unsupported file. The job deletes the stored file when it finishes.
    """
    from annotate.jobs.runner import job_start

    if uploaded_file is None:
        raise ValidationError({"file": "Choose a file to import."})
    name = Path(uploaded_file.name or "").name
    ext = Path(name).suffix.lower()
    if ext not in EXTENSIONS:
        raise ValidationError(
            {"file": f"'{name}' is not a supported file: use .json or .jsonl (GitHub issues), .bib, .ris or .csv."}
        )
    stored = upload_store(uploaded_file, name=name, ext=ext)
    params = {"path": f"{UPLOAD_DIR}/{stored.name}", "filename": name[:200], "include_prs": bool(include_prs)}
    try:
        return job_start(kind="import", study=study, user=user, params=params)
    except Exception:
        stored.unlink(missing_ok=True)
        raise


def _suggestions_after_import(job: Job) -> int | None:
    """Queue suggestions for the study's new episodes (those without one); an import never fails for it."""
    from annotate.services.suggestions import suggestion_batch_start

    try:
        return suggestion_batch_start(study=job.study, user=job.created_by).pk
    except Exception:  # a missing key or a broker hiccup must not undo a finished import
        log.warning("could not queue suggestions after import job %s", job.pk, exc_info=True)
        return None


@job_handler("import")
def job_import(*, job: Job, progress: ProgressFn) -> dict[str, Any]:
    """Job handler: import the uploaded file named in job.params in resumable batches, then delete it.

    Each batch commits with the job's checkpoint, so a job re-run after its worker
    was lost continues after the last committed batch. The file is kept until the
    import succeeds or proves malformed, because a re-run needs it.
    """
    from annotate.jobs.runner import job_checkpoint_save

    media = Path(settings.MEDIA_ROOT).resolve()
    path = (media / job.params["path"]).resolve()
    if media not in path.parents:
        raise ImportFileError("the stored upload is outside MEDIA_ROOT")
    checkpointed = bool(job.lease_owner)
    resume = (job.checkpoint or {}).get("import") if checkpointed else None

    def on_batch(state: dict[str, Any]) -> None:
        if checkpointed:
            job_checkpoint_save(job=job, checkpoint={"import": state}, done=state["records"], total=state["total"])

    name = job.params.get("filename", path.name)
    try:
        result = import_file_resumable(
            study=job.study,
            path=path,
            include_prs=job.params.get("include_prs", False),
            resume=resume,
            on_batch=on_batch,
            progress=progress,
        )
    except ImportFileError as exc:
        path.unlink(missing_ok=True)
        spool_path_for(path).unlink(missing_ok=True)
        kept = ((job.checkpoint or {}).get("import") or {}).get("records", 0)
        if not kept:
            raise ImportFileError(f"{name}: {exc}. Nothing was imported.") from None
        raise ImportFileError(
            f"{name}: {exc}. The first {kept} records were imported and are kept; importing the file again skips them."
        ) from None
    path.unlink(missing_ok=True)
    spool_path_for(path).unlink(missing_ok=True)
    summary = result.as_dict()
    if result.created and job.study.suggest_on_import:
        summary["suggestion_job"] = _suggestions_after_import(job)
    # The job page lists the result as text; "pull request: 2" reads better there than a dict.
    summary["skip_reasons"] = ", ".join(f"{reason}: {n}" for reason, n in sorted(result.skip_reasons.items()))
    return {"file": name, **summary}


@dataclass(frozen=True)
class StudyStart:
    study: Study
    jobs: list


@transaction.atomic
def study_start(
    *,
    creator,
    name: str,
    slug: str,
    codebook: Codebook | None = None,
    codebook_data: dict | None = None,
    coders_per_episode: int = 2,
    blind: bool = True,
    queue_order: str = QueueOrder.RANDOM,
    files: list | tuple = (),
) -> StudyStart:
    """Create a study owned by `creator`, with a published or uploaded codebook, and start its first imports.

    One transaction: a bad codebook or file leaves no study behind. An uploaded
    codebook is loaded and published (a study codes against a frozen codebook);
    if its name@version exists published with other contents, that is an error.
    """
    if not may_create_studies(creator):
        raise ValidationError("You may not create studies here; ask an administrator.")
    if (codebook is None) == (codebook_data is None):
        raise ValidationError({"codebook": "Choose a published codebook or upload one, not both."})
    if not 1 <= coders_per_episode <= 10:
        raise ValidationError({"coders_per_episode": "Between 1 and 10 coders per episode."})
    if queue_order not in QueueOrder.values:
        raise ValidationError({"queue_order": f"Queue order is one of {', '.join(QueueOrder.values)}."})
    if codebook_data is not None:
        try:
            codebook = codebook_load(data=codebook_data, publish=True).codebook
        except CodebookError as exc:
            raise ValidationError({"codebook_file": str(exc)}) from None
    elif not codebook.is_published:
        raise ValidationError({"codebook": "Studies code against a published codebook."})
    study = study_create(slug=slug, name=name, codebook=codebook, owner=creator)
    study.coders_per_episode, study.blind, study.queue_order = coders_per_episode, blind, queue_order
    study.save(update_fields=["coders_per_episode", "blind", "queue_order"])
    jobs = []
    for uploaded in files:
        try:
            jobs.append(import_upload_start(study=study, user=creator, uploaded_file=uploaded))
        except ValidationError as exc:
            raise ValidationError({"files": exc.messages}) from None
    return StudyStart(study=study, jobs=jobs)
