"""Writes for agent traces: import (upsert on external id, one transaction), steps, references, artifacts.

A trace is a Document of kind `trace` with its steps in TraceStep. Re-importing an unchanged
trace writes nothing; a changed one keeps its episode and codings and has its steps replaced.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Max, Q

from annotate.documents.services import search_index_queue
from annotate.imports.parsed import ImportFileError
from annotate.imports.records import ImportResult, import_records, record_hash
from annotate.imports.uploads import upload_store
from annotate.models import Artifact, Document, DocumentKind, Episode, Job, Study, TraceStep
from annotate.traces.parsed import Step, TraceArtifact, TraceRecord
from annotate.traces.parsers import FORMATS, TRACE_EXTENSIONS, iter_trace_records, trace_files, trace_format_of
from lib.db.copy import RawWriter, column_by_id_update
from lib.db.prefetch import prefetched

ProgressFn = Callable[[int, int], None]
BATCH = 200
MAX_TRACE_ARTIFACTS = 200
UPLOAD_DIR = "imports"


# TraceStep's columns in the order RawWriter inserts them (checked against the model in _step_writer).
STEP_COLUMNS = [
    "document_id", "index", "parent_index", "depth", "span_id", "agent", "kind", "name", "input", "output",
    "started_at", "ended_at", "status", "error", "paired_index", "ran", "detail",
]  # fmt: skip


def _step_writer() -> RawWriter:
    writer = RawWriter(TraceStep, {})
    if writer.names != STEP_COLUMNS:  # a field added to TraceStep must be added here too
        raise RuntimeError(f"TraceStep columns {writer.names} differ from STEP_COLUMNS")
    return writer


def _step_rows(document_id: int, steps: list[Step]) -> list[tuple]:
    """Rows in STEP_COLUMNS order (kind and status as plain str: a driver may adapt an Enum by its name;
    the detail as its JSON text, which is what a prepared row carries for a JSON column)."""
    return [
        (document_id, s.index, s.parent_index, s.depth, s.span_id, s.agent, str(s.kind), s.name, s.input, s.output,
         s.started_at, s.ended_at, str(s.status), s.error, s.paired_index, s.ran,
         json.dumps(s.detail, ensure_ascii=False, default=str) if s.detail else "{}")
        for s in steps
    ]  # fmt: skip


def steps_write(*, document_id: int, steps: list[Step]) -> None:
    """Replace a document's steps (multi-row inserts; the caller owns the transaction)."""
    TraceStep.objects.filter(document_id=document_id).delete()
    if steps:
        _step_writer().insert(_step_rows(document_id, steps), prepared=True)


def artifacts_link(*, document: Document, artifacts: Iterable[TraceArtifact]) -> list[Artifact]:
    """Store artifacts on a trace or incident, each under the step it names by `span_id` or `step` index.

    A span id or step the trace does not have is a field error (nothing is written by the caller's
    transaction), so an artifact is never silently detached from its operation.
    """
    artifacts = list(artifacts)
    if not artifacts:
        return []
    wanted_spans = {a.span_id for a in artifacts if a.span_id}
    wanted_steps = {a.step for a in artifacts if a.step is not None}
    rows = TraceStep.objects.filter(document=document).filter(Q(span_id__in=wanted_spans) | Q(index__in=wanted_steps))
    by_span, by_index = {}, {}
    for pk, span_id, index in rows.values_list("pk", "span_id", "index"):
        by_span.setdefault(span_id, pk)
        by_index[index] = pk
    errors: dict[str, str] = {}
    out = []
    for n, a in enumerate(artifacts):
        step_id = None
        if a.span_id:
            step_id = by_span.get(a.span_id)
            if step_id is None:
                errors[f"artifacts[{n}].span_id"] = f"The trace has no span '{a.span_id}'."
        elif a.step is not None:
            step_id = by_index.get(a.step)
            if step_id is None:
                errors[f"artifacts[{n}].step"] = f"The trace has no step {a.step}."
        out.append(
            Artifact(document=document, step_id=step_id, kind=a.kind, name=a.name[:300], content=a.content, url=a.url)
        )
    if errors:
        raise ValidationError(errors)
    return Artifact.objects.bulk_create(out)


def _references_write(study: Study, refs: dict[str, dict]) -> None:
    """Store each trace's published attribution on its first episode (changed ones only)."""
    if not refs:
        return
    rows = Episode.objects.filter(
        document__study=study, document__kind=DocumentKind.TRACE, order=0, document__external_id__in=list(refs)
    ).values_list("pk", "reference", "document__external_id")
    field = Episode._meta.get_field("reference")
    stale = [(field.get_db_prep_save(refs[ext], connection), pk) for pk, current, ext in rows if current != refs[ext]]
    column_by_id_update(Episode, "reference", "jsonb", stale)


def _write(
    study: Study,
    batch: list[TraceRecord],
    result: ImportResult,
    seen: set,
    digests: dict | None = None,
    *,
    defer_search: bool = True,
) -> list[Document]:
    """Upsert one batch of traces: documents through the shared importer, then the steps of every
    trace it inserted or updated (one multi-row insert for the whole batch), then references."""
    written: set[tuple[str, str]] = set()
    records = [tr.record for tr in batch]
    import_records(study=study, records=records, result=result, seen=seen, written=written, digests=digests,
                   defer_search=defer_search)  # fmt: skip
    unique: dict[str, TraceRecord] = {}
    for tr in batch:
        unique.setdefault(tr.record.external_id, tr)
    documents = list(
        Document.objects.filter(study=study, kind=DocumentKind.TRACE, external_id__in=list(unique)).only(
            "pk", "external_id", "study_id", "kind"
        )
    )
    ids = {d.external_id: d.pk for d in documents}
    # Only what import_records wrote: a trace repeated later in the same import was skipped there,
    # so its steps must not replace those of the copy that was kept.
    changed = [ext for ext in unique if (DocumentKind.TRACE, ext) in written]
    if changed:
        TraceStep.objects.filter(document_id__in=[ids[e] for e in changed]).delete()
        rows = [row for e in changed for row in _step_rows(ids[e], unique[e].steps)]
        if rows:
            _step_writer().insert(rows, prepared=True)
    _references_write(study, {ext: tr.reference for ext, tr in unique.items() if tr.reference})
    return documents


def _parsed(files: list[Path], fmt: str) -> Iterator[tuple[int, TraceRecord | None, str]]:
    """The files' trace records in order, as (file number, record, its record_hash), and
    (file number, None, "") after each file's last, parsed in a second thread while this one writes.

    Parsing and hashing are pure and never touch the database; writing spends most of its time in
    the database driver (SQLite's engine, PostgreSQL's round trips), which lets other threads
    run meanwhile. So on two cores the parse of the next records overlaps the write of the last
    (up to two batches ahead). A parse error is raised here, in file order, exactly as reading in
    this thread would raise it; closing the generator early (the writer failed) stops the parser.
    """

    def records() -> Iterator[tuple[int, TraceRecord | None, str]]:
        for n, path in enumerate(files, 1):
            for tr in iter_trace_records(path, fmt):
                yield n, tr, record_hash(tr.record)
            yield n, None, ""

    return prefetched(records(), chunk=BATCH // 4, ahead=8, name="trace-parse")


def import_traces(
    *, study: Study, paths: list[str | Path], fmt: str, progress: ProgressFn | None = None
) -> ImportResult:
    """Import trace files (or folders of them) in format `fmt` into `study`, all in one transaction.

    Upserts on (study, trace, external id): a re-import of the same files creates nothing and
    writes nothing. A malformed file raises ImportFileError naming the file and record. Steps of
    a whole batch of traces are written in one multi-row insert (or COPY), while the next records
    are parsed in a second thread (_parsed).
    """
    if fmt not in FORMATS:
        raise ImportFileError(f"unknown trace format '{fmt}': use one of {', '.join(FORMATS)}")
    files = trace_files(paths)
    result = ImportResult()
    seen: set = set()
    try:
        with transaction.atomic(), closing(_parsed(files, fmt)) as records:
            batch: list[TraceRecord] = []
            digests: dict[tuple[str, str], str] = {}
            for n, tr, digest in records:
                if tr is None:
                    if progress is not None:
                        progress(n, len(files))
                    continue
                batch.append(tr)
                digests.setdefault((tr.record.kind, tr.record.external_id), digest)
                if len(batch) >= BATCH:
                    _write(study, batch, result, seen, digests)
                    batch, digests = [], {}
            if batch:
                _write(study, batch, result, seen, digests)
    except IntegrityError as exc:
        raise ImportFileError(
            "another import wrote some of these traces at the same time; run this one again "
            f"(it is idempotent) [{str(exc).splitlines()[0][:200]}]"
        ) from exc
    if result.created or result.updated:
        search_index_queue(study=study)  # their vectors were deferred (annotate.documents.search)
    return result


@transaction.atomic
def trace_import_value(
    *, study: Study, data: Any, fmt: str, artifacts: list[TraceArtifact] | tuple = ()
) -> tuple[ImportResult, list[Document]]:
    """Import traces posted as JSON (the API), with artifacts linked to steps by span id or step index.

    Artifacts need exactly one trace in `data`: they are linked to its steps.
    """
    from annotate.traces.parsers import parse_trace_value

    if fmt not in FORMATS:
        raise ValidationError({"format": f"Use one of {', '.join(FORMATS)}."})
    try:
        records = parse_trace_value(data, fmt, "data")
    except ImportFileError as exc:
        raise ValidationError({"data": str(exc)}) from None
    if not records:
        raise ValidationError({"data": "The data holds no trace."})
    if artifacts and len(records) != 1:
        raise ValidationError({"artifacts": f"Artifacts need exactly one trace in data; it holds {len(records)}."})
    if len(artifacts) > MAX_TRACE_ARTIFACTS:
        raise ValidationError({"artifacts": f"At most {MAX_TRACE_ARTIFACTS} artifacts."})
    result = ImportResult()
    # A trace posted on its own is searchable at once: one vector is no cost worth a follow-up job.
    documents = _write(study, records, result, set(), defer_search=False)
    if artifacts:
        document = documents[0]
        Artifact.objects.filter(document=document).delete()
        artifacts_link(document=document, artifacts=artifacts)
    return result, documents


def trace_upload_start(*, study: Study, user, uploaded_file, fmt: str) -> Job:
    """Validate an uploaded trace file, store it under MEDIA_ROOT and start an "import_traces" Job."""
    from annotate.jobs.runner import job_start

    errors = {}
    if fmt not in FORMATS:
        errors["format"] = f"Choose a format: {', '.join(FORMATS)}."
    if uploaded_file is None:
        errors["file"] = "Choose a file to import."
    if errors:
        raise ValidationError(errors)
    name = Path(uploaded_file.name or "").name
    ext = Path(name).suffix.lower()
    if ext not in TRACE_EXTENSIONS:
        raise ValidationError({"file": f"'{name}' is not a supported trace file: use .json or .jsonl."})
    stored = upload_store(uploaded_file, name=name, ext=ext)
    params = {"path": f"{UPLOAD_DIR}/{stored.name}", "filename": name[:200], "format": fmt}
    try:
        return job_start(kind="import_traces", study=study, user=user, params=params)
    except Exception:
        stored.unlink(missing_ok=True)
        raise


MAX_UPLOAD_FILES = 50


def trace_uploads_start(*, study: Study, user, uploaded_files: list, fmt: str) -> list[Job]:
    """Several trace files at once: all are checked before any is stored (a bad one refuses the lot, naming it),
    then each starts its own "import_traces" Job, so each shows its own progress and failure."""
    files = [f for f in uploaded_files if f is not None]
    errors = {}
    if fmt not in FORMATS:
        errors["format"] = f"Choose a format: {', '.join(FORMATS)}."
    if not files:
        errors["file"] = "Choose a file to import."
    elif len(files) > MAX_UPLOAD_FILES:
        errors["file"] = f"At most {MAX_UPLOAD_FILES} files at once."
    else:
        bad = [Path(f.name or "").name for f in files if Path(f.name or "").suffix.lower() not in TRACE_EXTENSIONS]
        if bad:
            errors["file"] = f"Not a supported trace file (use .json or .jsonl): {', '.join(repr(b) for b in bad)}."
    if errors:
        raise ValidationError(errors)
    return [trace_upload_start(study=study, user=user, uploaded_file=f, fmt=fmt) for f in files]


def trace_step_count(document: Document) -> int:
    """Steps stored for a document (0 for documents without a trace)."""
    top = TraceStep.objects.filter(document=document).aggregate(m=Max("index"))["m"]
    return 0 if top is None else top + 1


def trace_steps_of_value(trace: Any) -> list[Step]:
    """Steps of a trace sent with an incident: OTLP/JSON, OpenInference spans, a Langfuse or a Phoenix export,
    detected by shape (trace_format_of).

    Incidents take any JSON as their trace (it is kept as sent); a trace in neither span format
    gets no steps and is shown as JSON. A span trace that is malformed is a field error.
    """
    from annotate.traces.parsers import parse_trace_value

    fmt = trace_format_of(trace)
    if not fmt:
        return []
    try:
        records = parse_trace_value(trace, fmt, "trace")
    except ImportFileError as exc:
        raise ValidationError({"trace": f"This {fmt} trace is malformed: {exc}"}) from None
    steps: list[Step] = []
    for tr in records:  # several trace ids in one incident: one step list, in file order
        offset = len(steps)
        for s in tr.steps:
            s.index += offset
            s.parent_index = s.parent_index + offset if s.parent_index is not None else None
            s.paired_index = s.paired_index + offset if s.paired_index is not None else None
            steps.append(s)
    return steps
