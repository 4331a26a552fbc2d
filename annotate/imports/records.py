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
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import orjson
from django.db import connection
from django.utils import timezone

from annotate.documents.search import search_deferred
from annotate.imports.parsed import Record, Skip
from annotate.models import Document, Episode, Study
from annotate.studies.services import queue_key_for, study_data_changed
from lib.db.copy import RawWriter, column_by_id_update

log = logging.getLogger(__name__)
BATCH_SIZE = 1000
UPDATE_FIELDS = ["url", "cluster", "title", "body", "labels", "meta", "raw", "content_hash", "updated_at"]


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


def _labels_field(labels: list[str]) -> str:
    # Stored as ",a,b," so `labels__icontains=",a,"` matches whole labels only.
    names = [name.replace(",", " ") for name in labels]
    return ("," + ",".join(names) + ",")[:2000] if names else ""


# Provenance, not content: the same record read from .bib and then .csv is "unchanged".
HASH_IGNORED_META = frozenset({"format", "entry_type"})


_HASH_JSON = {"sort_keys": True, "ensure_ascii": False, "separators": (",", ":"), "default": str}


def _json_string(text: str) -> bytes:
    """`json.dumps(text, ensure_ascii=False)` as UTF-8: orjson writes the same bytes for every code point
    (annotate/tests/imports/test_imports.py checks them all) several times faster; it refuses a lone surrogate."""
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
            return _sha256_hex(orjson.dumps(content, option=orjson.OPT_SORT_KEYS))
        except TypeError:  # an integer over 64 bits, a lone surrogate, a key that is not text
            pass
    return _record_hash_json(record.url, record.cluster, record.title, record.body, record.labels, meta)


# hashlib gives up the GIL to hash 2,048 bytes or more at once. The hash of a real-sized issue takes 2 µs, but
# getting the GIL back from the parse thread (pure Python, which keeps it until the switch interval) took the
# spool thread 31 µs on average: fed in smaller pieces, the hash keeps the GIL and costs what it costs.
_HASH_PIECE = 2047


def _sha256_hex(data: bytes) -> str:
    """hashlib.sha256(data).hexdigest(), without giving up the GIL (see _HASH_PIECE)."""
    if len(data) <= _HASH_PIECE:
        return hashlib.sha256(data).hexdigest()
    h = hashlib.sha256()
    view = memoryview(data)
    for start in range(0, len(data), _HASH_PIECE):
        h.update(view[start : start + _HASH_PIECE])
    return h.hexdigest()


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
    defer_search: bool = True,
) -> None:
    """Upsert one batch: one SELECT (none into a `fresh` study), then multi-row INSERT/UPDATE only for what changed.

    `written`, if given, receives the (kind, external_id) of every record inserted or updated;
    `digests` may hold record_hash of records, already computed (by a parser thread);
    `defer_search`: leave the search vectors to the search_index job (the caller queues it)."""
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
    if new or changed:
        with search_deferred(defer_search):
            _rows_write(study, new, changed, result, defer_search=defer_search)


def _rows_write(
    study: Study,
    new: list[dict[str, Any]],
    changed: list[tuple[int, dict[str, Any]]],
    result: ImportResult,
    *,
    defer_search: bool,
) -> None:
    """Insert the new documents (each with one episode) and update the changed ones."""
    now = timezone.now()
    if new and connection.vendor == "postgresql":
        ids = _ids_draw(len(new))
        for values, (doc_id, _) in zip(new, ids, strict=True):
            values["id"] = doc_id
        RawWriter(Document, {"study_id": study.pk, "imported_at": now, "updated_at": now}, with_pk=True).insert(new)
        episodes = [(ep_id, doc_id, queue_key_for(study, ep_id)) for doc_id, ep_id in ids]
        writer = RawWriter(Episode, {"study_id": study.pk, "created_at": now}, with_pk=True)
        writer.insert([{"id": ep_id, "document_id": doc_id, "queue_key": key} for ep_id, doc_id, key in episodes])
        result.created += len(new)
    elif new:
        doc_ids = RawWriter(Document, {"study_id": study.pk, "imported_at": now, "updated_at": now}).insert(new)
        if doc_ids is None:
            doc_ids = []
            for kind in {v["kind"] for v in new}:
                ids = [v["external_id"] for v in new if v["kind"] == kind]
                inserted = Document.objects.filter(study=study, kind=kind, external_id__in=ids)
                doc_ids += inserted.values_list("pk", flat=True)
        writer = RawWriter(Episode, {"study_id": study.pk, "created_at": now})
        episode_ids = writer.insert([{"document_id": pk} for pk in doc_ids])
        if episode_ids is None:
            episode_ids = list(Episode.objects.filter(document_id__in=doc_ids).values_list("pk", flat=True))
        _queue_keys_set(study, episode_ids)
        result.created += len(new)
    if changed:
        fields = [Document._meta.get_field(name) for name in UPDATE_FIELDS]
        qn = connection.ops.quote_name
        assignments = ", ".join(f"{qn(f.column)} = %s" for f in fields)
        if defer_search and connection.vendor == "postgresql":
            assignments += ", search = NULL"  # refilled by the follow-up job, as a new document's
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
    defer_search: bool = True,
    data_changed: bool = True,
) -> ImportResult:
    """Upsert records in batches (the caller owns the transaction).

    `data_changed`: bump the study's data version at the end when anything was written. Writers that keep a
    transaction open across several calls pass False and bump it themselves just before they commit
    (batches_data_changed): the bump holds the study's row until the commit.

    A record whose (kind, external_id) already appeared in this import is skipped
    as a duplicate, so a file that repeats an issue cannot flip it back and forth.
    `written`, if given, receives the (kind, external_id) of each record inserted or updated;
    `digests` may give record_hash(record) by (kind, external_id) where the caller has it already.

    `fresh`: the study had no documents when this import began (found out here when None). Then
    no batch looks for existing documents: the only ones are this import's, which `seen` skips
    (a concurrent import of the same documents fails on the unique key). Besides saving a query,
    it avoids a plan that grows with the import: PostgreSQL's statistics still say the new study
    is empty, so it finds the batch's ids by scanning every document written so far.

    `defer_search` (PostgreSQL): write the documents without their search vectors, which the
    caller then has the search_index job fill (annotate.documents.services.search_index_queue).
    """
    result = result if result is not None else ImportResult()
    created, updated = result.created, result.updated
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
            _write_batch(study=study, batch=batch, result=result, written=written, digests=digests, fresh=fresh,
                         defer_search=defer_search)  # fmt: skip
        if progress is not None:
            progress(result)
    if data_changed and (result.created > created or result.updated > updated):
        study_data_changed(study_id=study.pk)  # once, last: it holds the study's row until the caller commits
    return result


def batches_data_changed(*, study: Study, results: list[ImportResult]) -> None:
    """For writers that commit several import_records calls at once: bump the data version right before the
    commit, under the writers' shared lock, so parallel writers never wait on each other's open transactions."""
    if any(r.created or r.updated for r in results):
        study_data_changed(study_id=study.pk)
