"""Imports of a whole file (in one transaction, or resumable in checkpointed batches) and of a GitHub repository."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction

from annotate.documents.services import search_index_queue
from annotate.imports._issues import github_record
from annotate.imports._spool import (
    SPOOL_READ_BUFFER,
    _Batches,
    _spool_batch,
    _spool_write,
    _write_spooled_batch,
    spool_complete,
    spool_path_for,
)
from annotate.imports._threads import _EarlyWriters, _write_in_threads, import_writers, quick_thread_switches
from annotate.imports.parsed import ImportFileError, Record, Skip, clean_text
from annotate.imports.parsers import iter_file
from annotate.imports.records import ImportResult, fewer_collections, import_records
from annotate.models import Document, Study
from lib.db.prefetch import prefetched

ProgressFn = Callable[[int, int], None]


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
    _imported(study, result)
    if progress is not None:
        progress(result.seen, result.seen)
    return result


def _imported(study: Study, result: ImportResult) -> None:
    """After an import: queue the job that makes the new and updated documents searchable (their vectors were
    deferred, see annotate.documents.search); after a large import it refreshes the planner's statistics first."""
    if result.created or result.updated:
        search_index_queue(study=study)


def _spooled(
    study: Study, path: Path, spool: Path, *, resume, include_prs: bool, writers: int, fresh: bool, on_batch
) -> tuple[Path, _Batches]:
    """The file's spool and its batches' state: the spool of the run being resumed, or the file parsed into a
    new one (with several writers, the first batches are written meanwhile and committed once it parsed)."""
    if resume and spool.is_file():
        batches = _Batches(resume, resume["total"])
        if spool_complete(spool, batches):
            return spool, batches
        spool.unlink()  # a batch an early writer held never committed: the file is parsed again
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
    return spool, batches


def _pending(spool: Path, batches: _Batches) -> Iterator[tuple[int, list, dict]]:
    """The spool's batches still to write, as (index, records, digests)."""
    position = 0
    # A large buffer: a spooled batch is one line of megabytes, which the default 8 KB buffer reads in
    # hundreds of system calls, each giving up the GIL to the writer threads and waiting to get it back.
    with spool.open("rb", buffering=SPOOL_READ_BUFFER) as lines:
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


@fewer_collections()
@quick_thread_switches()
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
        spool, batches = _spooled(
            study, path, spool, resume=resume, include_prs=include_prs, writers=writers, fresh=fresh,
            on_batch=on_batch,
        )  # fmt: skip
    except IntegrityError as exc:
        raise _concurrent_import_error(exc) from exc
    total = batches.total
    if progress is not None:
        progress(batches.records, total)

    def write(index: int, items: list, digests: dict) -> None:
        _write_spooled_batch(study=study, index=index, items=items, digests=digests, fresh=fresh, batches=batches,
                             on_batch=on_batch)  # fmt: skip

    try:
        if writers == 1:
            for index, items, digests in _pending(spool, batches):
                write(index, items, digests)
                if progress is not None:
                    progress(batches.records, total)
        else:
            _write_in_threads(
                _pending(spool, batches), write, writers, lambda: progress and progress(batches.records, total)
            )
    except IntegrityError as exc:
        raise _concurrent_import_error(exc) from exc
    spool.unlink(missing_ok=True)
    _imported(study, batches.result)
    return batches.result


def _concurrent_import_error(exc: IntegrityError) -> ImportFileError:
    return ImportFileError(
        "another import wrote some of these documents at the same time; run this one again "
        f"(it is idempotent) [{str(exc).splitlines()[0][:200]}]"
    )


# Write batches while the file is still being parsed (see _EarlyWriters); tests that pin the order of
# per-batch checkpoints turn it off.
EARLY_WRITES = True


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
    """Import a repository's issues live from the GitHub REST API (annotate.imports.github).

    Each page is written in its own transaction, so when GitHub stops us (a rate
    limit that resets too late, an outage) what was imported is kept and
    `result.stopped` says why. An error before anything was imported raises GitHubError.
    """
    from annotate.imports.github import PER_PAGE, GitHubClient, GitHubError, comments_markdown

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
    _imported(study, result)
    if progress is not None:
        progress(result.seen, result.seen)
    return result
