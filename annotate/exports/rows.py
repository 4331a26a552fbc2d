"""The labelled dataset: one row per episode, streamed as JSONL or CSV, or written as Parquet.

Each row holds the document (kind, external id, url, cluster, title), the
episode text, the final label from `annotate.coding.labels.resolve_label` (the rule
analysis uses) as four codes plus names, each coder's codes under a stable
per-study pseudonym, the latest suggestion's provenance, the codebook
name@version and timestamps.

The export path never builds model instances: episodes, codings,
adjudications and suggestions are read with values_list in keyset chunks
(four queries per chunk), so memory stays flat and throughput is bounded by
serialisation, not by the ORM.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import Exists, Func, OuterRef, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from annotate.coding.codebook_moves import codebook_versions
from annotate.coding.labels import resolve_label
from annotate.models import Adjudication, Coding, Episode, Study, Suggestion, SuggestionRejection
from lib.db.plans import SERIAL_PLANS
from lib.db.prefetch import prefetched
from taxonomy.models import AxisValue, FailureType

# "cases": one regression case per coded trace episode (annotate.exports.cases), as JSON Lines.
FORMATS = ("jsonl", "csv", "parquet", "cases")
CODERS_PSEUDONYMOUS = "pseudonymous"
CODERS_USERNAMES = "usernames"
DATASET_CODERS_GROUP = "dataset-coders"
EXPORT_VERSION = 1
CHUNK = 2000

LABEL_AXES = ("failure_type", "source", "stage", "capability")
BASE_COLUMNS = [
    "study", "codebook", "episode_id", "document_kind", "external_id", "url", "cluster", "title", "episode_order",
    "split", "excerpt", "whole_document", "excerpt_start", "excerpt_end",
    "label_status", "label_reason",
    "label_failure_type", "label_failure_type_name", "label_source", "label_source_name",
    "label_stage", "label_stage_name", "label_capability", "label_capability_name",
    "label_not_a_failure", "label_needs_new_type", "adjudicator", "adjudication_rationale",
    "adjudication_failure_type", "adjudication_failure_type_original", "adjudication_source", "adjudication_stage",
    "adjudication_capability", "adjudication_not_a_failure", "adjudication_needs_new_type",
    "suggestion_backend", "suggestion_model", "suggestion_prompt_version", "suggestion_failure_type",
    "suggestion_confidence", "suggestion_status", "suggestion_accepted",
    "imported_at", "episode_created_at", "first_coded_at", "last_coded_at",
]  # fmt: skip
CODING_KEYS = [
    "coder", "failure_type", "failure_type_original", "source", "stage", "capability", "not_a_failure",
    "not_a_failure_reason", "needs_new_type", "confidence", "evidence", "from_suggestion", "created_at", "updated_at",
]  # fmt: skip
# The adjudication's own codes: the label's under consensus, but not under single_coder, where the label is one
# coder's and an adjudication would be lost without them. Files of export version 1 made before lack them.
# adjudication_failure_type_original is the code the adjudicator chose before a codebook migration moved it (or
# split or retired it: then the adjudication awaits a new decision, and import_dataset restores it so).
ADJUDICATION_CODES = (
    "adjudication_failure_type", "adjudication_failure_type_original", "adjudication_source", "adjudication_stage",
    "adjudication_capability", "adjudication_not_a_failure", "adjudication_needs_new_type",
)  # fmt: skip
BOOL_COLUMNS = {"whole_document", "label_not_a_failure", "label_needs_new_type", "suggestion_accepted",
                "adjudication_not_a_failure", "adjudication_needs_new_type"}  # fmt: skip
INT_COLUMNS = {"episode_id", "episode_order", "excerpt_start", "excerpt_end"}
# The episode's id in this database (as the API's episodes/ and codings/ name it), for joining the export
# back to them. An import (import_dataset) makes new episodes with ids of their own: it reads no id.
ASSIGNED_BY_DATABASE = {"episode_id"}
FLOAT_COLUMNS = {"suggestion_confidence"}
TIME_COLUMNS = {"imported_at", "episode_created_at", "first_coded_at", "last_coded_at"}
CODING_BOOLS = {"not_a_failure", "needs_new_type", "from_suggestion"}
CODING_TIMES = {"created_at", "updated_at"}


class _Codes(NamedTuple):
    """The codes of a coding or adjudication, shaped as resolve_label reads them."""

    coder_id: int | None
    failure_type_id: int | None
    source_id: int | None
    stage_id: int | None
    capability_id: int | None
    not_a_failure: bool
    needs_new_type: bool
    recode_from_id: int | None = None  # a type a codebook migration split or retired: not a label yet


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value is not None else None


def _ts(value: Any) -> str | None:
    """A timestamp as the database returned it (no ORM converters) to ISO 8601 UTC with Z.

    SQLite hands back Django's stored text, "YYYY-MM-DD HH:MM:SS[.ffffff]" in UTC;
    PostgreSQL hands back aware datetimes. Both come out exactly as _iso() would
    write them, without parsing the text.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value.replace(" ", "T", 1) + "Z"
    if value.tzinfo is None:  # SQLite's converter gives naive datetimes, which Django stores in UTC
        return value.isoformat() + "Z"
    return _iso(value)


class _UtcText(Func):
    """PostgreSQL: a timestamptz as the text SQLite stores, "YYYY-MM-DD HH:MM:SS[.ffffff]" in UTC
    (the fraction only when there is one, as Python's isoformat writes it)."""

    template = (
        "(to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || CASE WHEN "
        "date_trunc('second', %(expressions)s) = %(expressions)s THEN '' "
        "ELSE to_char(%(expressions)s AT TIME ZONE 'UTC', '.US') END)"
    )
    output_field = TextField()


def _timestamps_as_text(qs: QuerySet, fields: tuple[str, ...], times: tuple[str, ...]) -> QuerySet:
    """values_list of `fields`, with the `times` as text in UTC that _ts turns into ISO 8601 without parsing.

    On SQLite, CAST(column AS text) is the stored text, and it drops the column's declared type,
    so sqlite3 does not run Django's Python datetime converter on every value. On PostgreSQL the
    server writes the same text (_UtcText): loading a timestamptz into a datetime and formatting it
    again cost more than the rest of a row.
    """
    vendor = _vendor(qs.db or "default")
    text = Cast if vendor == "sqlite" else _UtcText if vendor == "postgresql" else None
    if text is None:
        return qs.values_list(*fields)
    casts = {f"_t_{name}": text(name, output_field=TextField()) for name in times}
    return qs.annotate(**casts).values_list(*[f"_t_{f}" if f in times else f for f in fields])


def _vendor(alias: str) -> str:
    return connections[alias].vendor


def _raw(qs: QuerySet) -> list[tuple]:
    """Rows of a values_list queryset straight from the cursor: the export's hot path skips the
    per-value ORM converters (datetime parsing costs more than everything else on SQLite)."""
    sql, params = qs.query.sql_with_params()
    with connections[qs.db].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _by_coder(coding: dict) -> str:
    return coding["coder"]


def pseudonym_key(study: Study) -> bytes:
    """A study-scoped HMAC key derived from SECRET_KEY: pseudonyms are stable within a study and unlinkable across."""
    return hmac.new(
        settings.SECRET_KEY.encode(), f"faultline-export-pseudonym:{study.slug}".encode(), "sha256"
    ).digest()


def pseudonym(key: bytes, user_id: int) -> str:
    return "coder-" + hmac.new(key, str(user_id).encode(), "sha256").hexdigest()[:12]


class CoderNames:
    """Maps user ids to the names an export shows: pseudonyms, or usernames when the owner asks.

    Coders created by `import_dataset` already are pseudonyms (their username
    is the one in the file), so they keep it: exporting an imported dataset
    again gives the same rows.
    """

    def __init__(self, study: Study, mode: str = CODERS_PSEUDONYMOUS):
        self.mode, self.key, self.cache = mode, pseudonym_key(study), {}
        ids = set(Coding.objects.filter(episode__study=study).values_list("coder_id", flat=True).distinct())
        ids |= set(Adjudication.objects.filter(episode__study=study).values_list("adjudicator_id", flat=True))
        users = get_user_model().objects.filter(pk__in=ids)
        self.usernames = dict(users.values_list("pk", "username"))
        self.dataset = set(users.filter(groups__name=DATASET_CODERS_GROUP).values_list("pk", flat=True))

    def __call__(self, user_id: int | None) -> str | None:
        if user_id is None:
            return None
        name = self.cache.get(user_id)
        if name is None:
            if self.mode == CODERS_USERNAMES or user_id in self.dataset:
                name = self.usernames.get(user_id) or pseudonym(self.key, user_id)
            else:
                name = pseudonym(self.key, user_id)
            self.cache[user_id] = name
        return name


def label_coder_name(study: Study, mode: str = CODERS_PSEUDONYMOUS) -> str | None:
    """The study's label coder as the export's rows name coders (CoderNames), or None without one."""
    if study.label_coder_id is None:
        return None
    user = get_user_model().objects.filter(pk=study.label_coder_id).first()
    if user is None:
        return None
    dataset = user.groups.filter(name=DATASET_CODERS_GROUP).exists()
    if mode == CODERS_USERNAMES or dataset:
        return user.username
    return pseudonym(pseudonym_key(study), user.pk)


def _names(study: Study) -> tuple[dict, dict, dict, dict]:
    """Codes and names of the codebook's types and axis values, by primary key (two queries)."""
    types, type_names, values, value_names = {}, {}, {}, {}
    for pk, code, name in FailureType.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code", "name"):
        types[pk] = code
        type_names[code] = name
    for pk, code, name in AxisValue.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code", "name"):
        values[pk] = code
        value_names[pk] = name
    return types, type_names, values, value_names


EPISODE_FIELDS = (
    "id", "document__kind", "document__external_id", "document__url", "document__cluster", "document__title",
    "document__body", "excerpt", "start", "end", "order", "split", "created_at", "document__imported_at",
)  # fmt: skip
CODING_FIELDS = (
    "episode_id", "coder_id", "failure_type_id", "source_id", "stage_id", "capability_id", "not_a_failure",
    "needs_new_type", "not_a_failure_reason", "confidence", "evidence", "from_suggestion_id", "created_at",
    "updated_at", "recode_from_id", "failure_type_original",
)  # fmt: skip
ADJ_FIELDS = (
    "episode_id", "adjudicator_id", "failure_type_id", "source_id", "stage_id", "capability_id", "not_a_failure",
    "needs_new_type", "rationale", "recode_from_id", "failure_type_original",
)  # fmt: skip
SUGGESTION_FIELDS = (
    "episode_id", "backend", "model", "prompt_version", "failure_type_id", "confidence", "status",
)  # fmt: skip


class _Chunk(NamedTuple):
    """One keyset page of the export as the database returned it: the episodes, and by episode id their
    codings (ordered by coder), adjudication and latest suggestion."""

    episodes: list[tuple]
    codings: dict[int, list[tuple]]
    adjudications: dict[int, tuple]
    suggestions: dict[int, tuple]


def _fetch_chunks(study: Study, qs: QuerySet[Episode], chunk: int) -> Iterator[_Chunk]:
    """The export's queries, four per page of `chunk` episodes in id order (keyset, never OFFSET)."""
    last = 0
    while True:
        page = qs.filter(id__gt=last).order_by("id")
        batch = _raw(_timestamps_as_text(page, EPISODE_FIELDS, ("created_at", "document__imported_at"))[:chunk])
        if not batch:
            return
        ids = [row[0] for row in batch]
        last = ids[-1]
        # The chunk's episodes are an id range of the study; filtering codings by that range (not by
        # 2000 ids) keeps the queries small, and rows of filtered-out episodes are simply not used.
        span = {"episode__study_id": study.pk, "episode_id__gte": ids[0], "episode_id__lte": last}
        codings: dict[int, list] = {}
        coding_rows = Coding.objects.filter(**span).order_by("episode_id", "coder_id")
        for row in _raw(_timestamps_as_text(coding_rows, CODING_FIELDS, ("created_at", "updated_at"))):
            codings.setdefault(row[0], []).append(row)
        adjudications = {row[0]: row for row in _raw(Adjudication.objects.filter(**span).values_list(*ADJ_FIELDS))}
        suggestions: dict[int, tuple] = {}
        # A rejection is each coder's own (SuggestionRejection): one by anybody makes a pending suggestion "rejected".
        rejected = Exists(SuggestionRejection.objects.filter(suggestion=OuterRef("pk")))
        for row in _raw(
            Suggestion.objects.filter(error="", **span)
            .annotate(rejected=rejected)
            .order_by("episode_id", "-created_at", "-id")
            .values_list(*SUGGESTION_FIELDS, "rejected")
        ):
            suggestions.setdefault(row[0], row)
        yield _Chunk(batch, codings, adjudications, suggestions)


def _chunks(study: Study, qs: QuerySet[Episode], chunk: int) -> Iterator[_Chunk]:
    """The export's pages, read ahead of their use when the database allows it.

    On PostgreSQL outside a transaction (a streamed response, a job), a thread with its own connection
    runs the next page's queries while this one turns the current page into rows: the server's work
    and ours overlap instead of alternating (about half of an export's time was waiting on the server).
    At most two pages are held besides the one being written, so memory stays flat. Inside a transaction
    (whose snapshot another connection would not share) and on SQLite, the pages are read here, in turn.
    Each page is read by the same four queries either way; like the pages read in turn, pages read ahead
    are each their own snapshot, not one of the whole export.
    """
    alias = qs.db or "default"
    conn = connections[alias]
    if conn.vendor != "postgresql":
        yield from _fetch_chunks(study, qs, chunk)
        return
    if conn.in_atomic_block:
        with conn.cursor() as cursor:
            cursor.execute(f"SET LOCAL {SERIAL_PLANS}")  # undone when the transaction ends
        yield from _fetch_chunks(study, qs, chunk)
        return
    yield from _read_ahead(study, qs, chunk, alias)


def _read_ahead(study: Study, qs: QuerySet[Episode], chunk: int, alias: str) -> Iterator[_Chunk]:
    """The pages, each read by a thread on a connection of its own, one page ahead of their use."""

    def pages() -> Iterator[_Chunk]:  # runs in the reader thread, which also closes it
        try:
            with connections[alias].cursor() as cursor:  # this thread's own connection
                cursor.execute(f"SET {SERIAL_PLANS}")
            yield from _fetch_chunks(study, qs, chunk)
        finally:
            connections[alias].close()  # the thread's connection, not the request's

    return prefetched(pages(), chunk=1, ahead=1, name="export-read-ahead")


def _codings(rows, names: CoderNames, types: dict, values: dict) -> list[dict[str, Any]]:
    """An episode's codings as dicts, by coder name, not id: ids differ between instances, so an imported
    dataset exports its codings in the same order."""
    return sorted(
        (
            {
                "coder": names(c[1]),
                "failure_type": types.get(c[2]),
                # The code the coder chose, before any codebook migration moved it (annotate.coding.codebook_moves).
                "failure_type_original": c[15] or types.get(c[2]),
                "source": values.get(c[3]),
                "stage": values.get(c[4]),
                "capability": values.get(c[5]),
                "not_a_failure": bool(c[6]),
                "not_a_failure_reason": c[8],
                "needs_new_type": bool(c[7]),
                "confidence": c[9],
                "evidence": c[10],
                "from_suggestion": c[11] is not None,
                "created_at": _ts(c[12]),
                "updated_at": _ts(c[13]),
            }
            for c in rows
        ),
        key=_by_coder,
    )


def export_rows(
    study: Study, episodes: QuerySet[Episode] | None = None, *, coders: str = CODERS_PSEUDONYMOUS, chunk: int = CHUNK
) -> Iterator[dict[str, Any]]:
    """One dict per episode, in episode id order, with `codings` as a list of dicts (see module docstring)."""
    qs = (episodes if episodes is not None else Episode.objects.filter(study=study)).order_by()
    names = CoderNames(study, coders)
    types, type_names, values, value_names = _names(study)
    codebook = study.codebook.label
    k, rule, label_coder = study.coders_per_episode, study.label_rule, study.label_coder_id
    for batch, codings, adjudications, suggestions in _chunks(study, qs, chunk):
        for ep in batch:
            ep_id = ep[0]
            rows = codings.get(ep_id, ())
            adj = adjudications.get(ep_id)
            label = resolve_label(
                adjudication=_Codes(*adj[1:8], adj[9]) if adj else None,
                codings=[_Codes(*c[1:8], c[14]) for c in rows],
                k=k,
                rule=rule,
                label_coder_id=label_coder,
            )
            sug = suggestions.get(ep_id)
            type_code = types.get(label.failure_type_id)
            yield {
                "study": study.slug,
                "codebook": codebook,
                "episode_id": ep_id,
                "document_kind": ep[1],
                "external_id": ep[2],
                "url": ep[3],
                "cluster": ep[4],
                "title": ep[5],
                "episode_order": ep[10],
                "split": ep[11],
                "excerpt": ep[7] or ep[6],
                "whole_document": not ep[7],
                "excerpt_start": ep[8],
                "excerpt_end": ep[9],
                "label_status": label.status,
                "label_reason": label.reason,
                "label_failure_type": type_code,
                "label_failure_type_name": type_names.get(type_code),
                "label_source": values.get(label.source_id),
                "label_source_name": value_names.get(label.source_id),
                "label_stage": values.get(label.stage_id),
                "label_stage_name": value_names.get(label.stage_id),
                "label_capability": values.get(label.capability_id),
                "label_capability_name": value_names.get(label.capability_id),
                "label_not_a_failure": bool(label.not_a_failure),
                "label_needs_new_type": bool(label.needs_new_type),
                "adjudicator": names(adj[1]) if adj else None,
                "adjudication_rationale": adj[8] if adj else None,
                "adjudication_failure_type": types.get(adj[2]) if adj else None,
                "adjudication_failure_type_original": (adj[10] or types.get(adj[2])) if adj else None,
                "adjudication_source": values.get(adj[3]) if adj else None,
                "adjudication_stage": values.get(adj[4]) if adj else None,
                "adjudication_capability": values.get(adj[5]) if adj else None,
                "adjudication_not_a_failure": bool(adj[6]) if adj else None,
                "adjudication_needs_new_type": bool(adj[7]) if adj else None,
                "suggestion_backend": sug[1] if sug else None,
                "suggestion_model": sug[2] if sug else None,
                "suggestion_prompt_version": sug[3] if sug else None,
                "suggestion_failure_type": types.get(sug[4]) if sug else None,
                "suggestion_confidence": sug[5] if sug else None,
                "suggestion_status": ("rejected" if sug[6] == "pending" and sug[7] else sug[6]) if sug else None,
                "suggestion_accepted": (sug[6] == "accepted") if sug else None,
                "imported_at": _ts(ep[13]),
                "episode_created_at": _ts(ep[12]),
                "first_coded_at": _ts(min(c[12] for c in rows)) if rows else None,
                "last_coded_at": _ts(max(c[13] for c in rows)) if rows else None,
                "codings": _codings(rows, names, types, values),
            }


# ---- JSONL and CSV: byte chunks for StreamingHttpResponse or a file ----


def jsonl_chunks(rows: Iterable[dict], *, rows_per_chunk: int = 500) -> Iterator[bytes]:
    """JSON Lines (compact UTF-8, by orjson), one episode per line, joined into chunks of `rows_per_chunk` lines."""
    buf: list[bytes] = []
    for row in rows:
        buf.append(orjson.dumps(row))
        if len(buf) >= rows_per_chunk:
            buf.append(b"")
            yield b"\n".join(buf)
            buf = []
    if buf:
        buf.append(b"")
        yield b"\n".join(buf)


def csv_columns(slots: int) -> list[str]:
    cols = list(BASE_COLUMNS)
    for i in range(1, slots + 1):
        cols += [f"coder{i}" if key == "coder" else f"coder{i}_{key}" for key in CODING_KEYS]
    return cols


# A spreadsheet reads a cell starting with one of these as a formula (or, for tab and CR, as the
# start of another cell): OWASP's "CSV Injection". A leading quote is escaped too, so decoding is exact.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


def csv_text_encode(value: str) -> str:
    """A text cell as it goes into a CSV export: prefixed with ' when it would start a formula."""
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def csv_text_decode(value: str) -> str:
    """The inverse of csv_text_encode, for reading a CSV export back (import_dataset)."""
    return value[1:] if value.startswith("'") else value


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return csv_text_encode(value)
    return value


def csv_chunks(rows: Iterable[dict], *, slots: int, rows_per_chunk: int = 500) -> Iterator[bytes]:
    """CSV with a header; each coder's codes in numbered columns (coder1, coder1_failure_type, ...).

    Every cell is quoted and formula-like text is neutralised (csv_text_encode), as OWASP
    advises; quoting also keeps a carriage return inside a cell from ending the row.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(csv_columns(slots))
    for n, row in enumerate(rows, 1):
        cells = [_cell(row[c]) for c in BASE_COLUMNS]
        codings = row["codings"]
        if len(codings) > slots:
            raise ValueError(f"episode {row['external_id']} has {len(codings)} codings, more than {slots} CSV slots")
        for coding in codings:
            cells += [_cell(coding[key]) for key in CODING_KEYS]
        cells += [""] * (len(CODING_KEYS) * (slots - len(codings)))
        writer.writerow(cells)
        if n % rows_per_chunk == 0:
            yield out.getvalue().encode()
            out.seek(0)
            out.truncate()
    yield out.getvalue().encode()


def coder_slots(study: Study, episodes: QuerySet[Episode] | None = None) -> int:
    """The most codings any exported episode has: the number of coder column groups in a CSV."""
    from django.db.models import Count, Max

    qs = Coding.objects.filter(episode__study=study)
    if episodes is not None:
        qs = qs.filter(episode__in=episodes.values("pk"))
    most = qs.values("episode_id").annotate(n=Count("id")).aggregate(m=Max("n"))["m"]
    return max(most or 0, 1)


# ---- The manifest ----


@dataclass
class Digest:
    """Counts rows and hashes bytes as they pass, for the manifest."""

    rows: int = 0
    size: int = 0
    sha: Any = field(default_factory=hashlib.sha256)

    def through(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.sha.update(chunk)
            self.size += len(chunk)
            yield chunk

    def count(self, rows: Iterable[dict]) -> Iterator[dict]:
        for row in rows:
            self.rows += 1
            yield row


def _earlier_versions(study: Study) -> list[str]:
    return [v.label for v in codebook_versions(study)[1:]]


def manifest(
    *, study: Study, fmt: str, digest: Digest, filters: dict, coders: str, slots: int | None = None
) -> dict[str, Any]:
    """What an export contains: row count, sha256 and size of the file, codebook, filters, label rule, time."""
    return {
        "export_version": EXPORT_VERSION,
        "study": study.slug,
        "study_name": study.name,
        "format": fmt,
        "rows": digest.rows,
        "bytes": digest.size,
        "sha256": digest.sha.hexdigest(),
        "codebook": study.codebook.label,
        # Earlier versions the study's codings were moved from (newest first): their codes are the
        # failure_type_original columns' where those differ from failure_type.
        "codebook_earlier": _earlier_versions(study),
        "coders_per_episode": study.coders_per_episode,
        "label_rule": study.label_rule,
        # Under single_coder the labels are one coder's: named as the rows name them, so an import can restore it.
        "label_coder": label_coder_name(study, coders),
        "coders": coders,
        "csv_coder_slots": slots,
        "filters": filters,
        "generated_at": _iso(timezone.now()),
    }


def export_stream(
    *, study: Study, episodes: QuerySet[Episode], fmt: str, coders: str, digest: Digest | None = None
) -> Iterator[bytes]:
    """The JSONL, CSV or cases export as byte chunks; pass a Digest to count and hash it on the way."""
    digest = digest or Digest()
    if fmt == "cases":
        from annotate.exports.cases import case_rows

        return digest.through(jsonl_chunks(digest.count(case_rows(study, episodes)), rows_per_chunk=5))
    rows = digest.count(export_rows(study, episodes, coders=coders))
    if fmt == "jsonl":
        return digest.through(jsonl_chunks(rows))
    if fmt == "csv":
        return digest.through(csv_chunks(rows, slots=coder_slots(study, episodes)))
    raise ValueError(f"cannot stream format '{fmt}'")
