"""Writes on a document's episodes (split a document into excerpts, set an episode's split, delete one), and
the search vectors an import left to its follow-up job.

An excerpt episode stores its text and its [start, end) character offsets into
Document.body, so evidence and exports can point back into the original.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import DatabaseError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from annotate.documents.search import SEARCH_INDEX_JOB, VECTOR_SQL, search_pending
from annotate.documents.selectors import search_retry_at
from annotate.models import Document, Episode, Job, JobStatus, Split, Study
from annotate.studies.services import queue_key_for, study_data_changed

log = logging.getLogger(__name__)


def _locate(body: str, start: int, end: int, text: str | None) -> tuple[int, int]:
    """Offsets of the selection, trusting `text` over the offsets if they disagree."""
    if text is not None and body[start:end] != text:
        hits = []
        at = body.find(text)
        while at != -1 and len(hits) < 1000:
            hits.append(at)
            at = body.find(text, at + 1)
        if not text or not hits:
            raise ValidationError({"excerpt": "The selected text is not in this document's body."})
        start = min(hits, key=lambda hit: abs(hit - start))
        end = start + len(text)
    # Trim surrounding whitespace so two selections of the same sentence are the same excerpt.
    while start < end and body[start].isspace():
        start += 1
    while end > start and body[end - 1].isspace():
        end -= 1
    return start, end


@transaction.atomic
def episode_excerpt_create(*, document: Document, start: int, end: int, text: str | None = None) -> Episode:
    """Add an episode for body[start:end] of `document`.

    `text` is the selection as the browser saw it; if the offsets do not match
    it, the nearest occurrence of the text is used. Raises ValidationError for
    an empty, out-of-range or duplicate excerpt.
    """
    body = document.body
    if not (0 <= start < end <= len(body)):
        raise ValidationError({"excerpt": f"Select some text: offsets must satisfy 0 ≤ start < end ≤ {len(body)}."})
    start, end = _locate(body, start, end, text)
    if start >= end:
        raise ValidationError({"excerpt": "The selection is only whitespace."})
    # Lock the document so two owners splitting at once get distinct `order`s.
    Document.objects.select_for_update().filter(pk=document.pk).first()
    if Episode.objects.filter(document=document, start=start, end=end).exists():
        raise ValidationError({"excerpt": "An episode with exactly this excerpt already exists."})
    order = (Episode.objects.filter(document=document).aggregate(m=Max("order"))["m"] or 0) + 1
    episode = Episode.objects.create(
        document=document, study_id=document.study_id, excerpt=body[start:end], start=start, end=end, order=order
    )
    episode.queue_key = queue_key_for(document.study, episode.pk)
    episode.save(update_fields=["queue_key"])
    study_data_changed(study_id=document.study_id)
    return episode


@transaction.atomic
def episode_split_set(*, episode: Episode, split: str) -> Episode:
    """Put an episode in the primary set or the hold-out set."""
    if split not in Split.values:
        raise ValidationError({"split": f"Split must be one of {', '.join(Split.values)}."})
    if episode.split != split:
        episode.split = split
        episode.save(update_fields=["split"])
        study_data_changed(study_id=episode.study_id)
    return episode


@transaction.atomic
def episode_delete(*, episode: Episode) -> None:
    """Delete an episode nobody has coded or adjudicated; a document keeps at least one."""
    locked = Episode.objects.select_for_update().get(pk=episode.pk)
    if locked.codings.exists() or hasattr(locked, "adjudication"):
        raise ValidationError({"episode": "This episode has codings; it cannot be deleted."})
    if not Episode.objects.filter(document_id=locked.document_id).exclude(pk=locked.pk).exists():
        raise ValidationError({"episode": "A document keeps at least one episode."})
    locked.delete()
    study_data_changed(study_id=locked.study_id)


# Documents whose vectors one transaction of the search_index job fills: large enough that the GIN index takes
# its entries in bulk from its pending list, small enough that a batch commits in well under a second.
SEARCH_FILL_BATCH = 2000
# A search_index job with this many documents to fill first refreshes the planner's statistics of the
# tables the import wrote, and once they are filled those of the vectors.
ANALYZE_AFTER = 5_000
# The document columns that queries filter or join on: sampling the bodies and raw JSON as well
# tripled the ANALYZE (0.29 s against 0.87 s on 200,000 documents) for statistics no plan reads.
ANALYZED_DOCUMENT_COLUMNS = ("id", "study_id", "kind", "external_id", "cluster", "triage_status", "severity",
                             "assignee_id", "occurred_at")  # fmt: skip


def statistics_refresh(*, search: bool = False) -> bool:
    """PostgreSQL: ANALYZE the document and episode tables after a large import (with `search`, the
    search vectors alone, once filled). Returns whether it ran.

    Until the planner has statistics that include the new rows, it takes a new study for an
    empty one: on a 200,000-document study just imported, the documents list and search took
    370-480 ms a page instead of 19-30 ms. Autovacuum would analyze the tables in time, where
    it runs, but only once a tenth of the table has changed, which a new study in a big table
    may never reach. It costs under a second on a million-row table, so the search_index job
    runs it first thing, right after the import rather than inside it, and it never fails the job
    (a connection without the table's ownership only gets a warning)."""
    if connection.vendor != "postgresql":
        return False
    table = Document._meta.db_table
    sql = f"ANALYZE {table} (search)" if search else (
        f"ANALYZE {table} ({', '.join(ANALYZED_DOCUMENT_COLUMNS)}), {Episode._meta.db_table}")  # fmt: skip
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
    except DatabaseError:
        log.warning("could not refresh the planner's statistics after an import", exc_info=True)
        return False
    return True


def search_vectors_fill(
    *, study_id: int | None = None, batch: int = SEARCH_FILL_BATCH, progress: Callable[[int], None] | None = None
) -> int:
    """PostgreSQL: compute the search vectors an import deferred (search_defer), the study's or every
    study's, one committed batch at a time; returns how many it filled (0 on SQLite, which never defers).

    Rows another transaction holds (an import still writing) are skipped, not waited for: that
    import queues its own job. Batches commit as they go, so documents become searchable in
    order and a job that is stopped keeps what it filled. `progress(filled)` after each batch."""
    if connection.vendor != "postgresql":
        return 0
    where = "study_id = %s AND search IS NULL" if study_id is not None else "search IS NULL"
    params = [study_id] if study_id is not None else []
    sql = (
        f"UPDATE annotate_document AS d SET search = {VECTOR_SQL.format(doc='d')} "  # noqa: S608 - constants only
        f"WHERE d.id IN (SELECT id FROM annotate_document WHERE {where} "
        "ORDER BY study_id, id LIMIT %s FOR UPDATE SKIP LOCKED)"
    )
    filled = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [*params, batch])
            n = cursor.rowcount
        filled += n
        if n and progress is not None:
            progress(filled)
        if n < batch:
            break
    if filled >= ANALYZE_AFTER:
        statistics_refresh(search=True)
    return filled


def search_index_queue(*, study: Study) -> Job | None:
    """After an import on PostgreSQL: a search_index job for the study, unless one is already waiting
    to start (it will fill this import's documents too) or nothing is pending. None on SQLite."""
    from annotate.jobs.runner import job_start

    if connection.vendor != "postgresql" or not search_pending(study.pk):
        return None
    waiting = Job.objects.filter(study=study, kind=SEARCH_INDEX_JOB, status=JobStatus.PENDING).first()
    return waiting or job_start(kind=SEARCH_INDEX_JOB, study=study)


# Jobs that write documents with deferred vectors and queue their own search_index job when they end: while one
# of a study's is unfinished, the sweep leaves that study alone rather than index under a live import.
SEARCH_DEFERRING_JOBS = ("import", "import_traces")
_UNFINISHED = (JobStatus.PENDING, JobStatus.RUNNING)


def search_index_sweep(*, now: datetime | None = None) -> list[Job]:
    """PostgreSQL: a search_index job for every study that has documents without a search vector and nothing
    that will fill them: no search_index job waiting or running, no import still writing, and, after failed
    search_index jobs, once the back-off (search_retry_after) has passed. Returns the jobs started.

    Beat runs it every FAULTLINE_SEARCH_SWEEP_S (config/beat.py), so documents a failed or lost job left
    unsearchable become searchable without waiting for the study's next import."""
    if connection.vendor != "postgresql":
        return []
    now = now or timezone.now()
    # One probe per study through the partial index of pending documents: a study none of whose documents
    # wait costs one index lookup that finds nothing.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.id FROM annotate_study s WHERE EXISTS (SELECT 1 FROM annotate_document d "
            "WHERE d.study_id = s.id AND d.search IS NULL) ORDER BY s.id"
        )
        waiting = [row[0] for row in cursor.fetchall()]
    if not waiting:
        return []
    busy = set(
        Job.objects.filter(study_id__in=waiting, status__in=_UNFINISHED)
        .filter(kind__in=(SEARCH_INDEX_JOB, *SEARCH_DEFERRING_JOBS))
        .values_list("study_id", flat=True)
    )
    started = []
    for study in Study.objects.filter(pk__in=[pk for pk in waiting if pk not in busy]).order_by("pk"):
        retry_at = search_retry_at(study.pk)
        if retry_at is not None and retry_at > now:
            continue
        with transaction.atomic():
            started.append(search_index_queue(study=study))
    return [job for job in started if job is not None]
