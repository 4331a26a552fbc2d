"""The spool of a resumable import: the parsed file, one batch a line, and the checkpoints of written batches."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from contextlib import closing
from itertools import islice
from pathlib import Path
from typing import Any

import orjson
from django.db import connection, transaction

from annotate.imports.parsed import Record, Skip
from annotate.imports.parsers import iter_file
from annotate.imports.records import BATCH_SIZE, ImportResult, batches_data_changed, import_records, record_hash
from annotate.models import Study
from lib.db.prefetch import prefetched

SPOOL_READ_BUFFER = 4 << 20


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


SPOOL_TAKEN = b"-"  # a spool line for a batch an early writer took: "-<number of items>"


def spool_complete(spool: Path, batches: _Batches) -> bool:
    """Whether the spool holds every batch that has not committed: false when a batch an early writer took
    (a placeholder) never committed, because the run died or failed before the parse's commit."""
    with spool.open("rb", buffering=SPOOL_READ_BUFFER) as lines:
        for index, line in enumerate(lines):
            if line[:1] == SPOOL_TAKEN and not batches.committed(index):
                return False
    return True


def _spool_batch(line: bytes) -> tuple[list[Record | Skip], dict[tuple[str, str], str]]:
    if line[:1] == SPOOL_TAKEN:  # never pending: spool_complete sends such a run back to the file
        raise RuntimeError("the spool lacks a batch that did not commit")
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
    `offer(index, items, digests)`, if given, is handed each batch as it is parsed (see _EarlyWriters); a batch
    it takes (it returns True) is spooled as a placeholder, not written out: the early writer holds it.
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
                taken = False
                if offer is not None:  # a repeated key is a Skip by now: one digest a key
                    by_key = {(i.kind, i.external_id): d for i, d in zip(chunk, digests, strict=True) if d is not None}
                    taken = offer(index, chunk, by_key)
                # A batch an early writer took is spooled as its size only: it commits with the parse, or the
                # retry finds it missing and parses the file again (spool_complete).
                out.write(b"%s%d\n" % (SPOOL_TAKEN, len(chunk)) if taken else _spool_line(chunk, digests))
                index += 1
                total += len(chunk)
        part.replace(spool)
    finally:
        part.unlink(missing_ok=True)
    return spool, total


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
                                    digests=digests, data_changed=False)  # fmt: skip
            _constraints_check_now()
            batches.lock.acquire()
            held = True
            batches_data_changed(study=study, results=[result])
            saved = batches.checkpoint([(index, len(items), result)], on_batch)
    except BaseException:
        if held and saved is not None:
            batches.restore(saved)
        raise
    finally:
        if held:
            batches.lock.release()
