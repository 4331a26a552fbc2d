"""Moving a study's codings to another version of its codebook, and reverting that move.

A move runs in one transaction (the study row locked): every coding and adjudication of
the study gets the new version's rows for its codes, found by code through the map
(annotate.coding.codebook_maps). Codes that map one-to-one move (renames, merges, and
the codes that stay). Codes that are split or retired leave the coding without a type
and with `recode_from` set, which queues it again for its coder (annotate.coding.queue)
or, on an adjudicated episode, leaves the decision to the adjudicator; analysis and
agreement leave such codings out until they are coded again. Every changed row gets a
history record (who, when, "codebook migration ...") through django-simple-history,
and the move keeps a MigratedCode row per coding and adjudication with its codes
before and after, which is what a revert puts back (with history records too) and what
the earlier version's agreement is computed from.

The move runs in batches of BATCH rows (executemany updates, history by INSERT ... SELECT):
40,000 codings in 17 s on SQLite (bench/codebook_migration_bench.py). The page runs a small
study's move inline and a larger one as a "codebook_migration" job with progress; the command
runs it inline with a progress bar.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from annotate.coding.codebook_maps import MapError, TypeMove
from annotate.coding.disagreement import disagreement_refresh
from annotate.models import (
    Adjudication,
    CodebookMigration,
    Coding,
    EpisodeStatus,
    Membership,
    MigratedCode,
    Study,
)
from annotate.studies.access import check_level
from annotate.studies.services import study_data_changed
from taxonomy.models import AxisValue, Codebook, FailureType

BATCH = 1000
# What a move may change and a revert puts back. The two flags never change in a move, but a coding
# queued again may be re-coded as "not a failure", which a revert must undo as well.
CODE_COLUMNS = (
    "failure_type_id", "source_id", "stage_id", "capability_id", "recode_from_id", "failure_type_original",
    "not_a_failure", "needs_new_type",
)  # fmt: skip
UPDATE_FIELDS = [c.removesuffix("_id") for c in CODE_COLUMNS]
Progress = Callable[[int, int], None] | None


def codebook_move_allowed(*, study: Study, user) -> None:
    """Only the study's owners move or revert its codebook (the membership rule, annotate.studies.access)."""
    membership = Membership.objects.select_related("study").filter(study=study, user=user).first()
    if membership is None:
        raise PermissionDenied("Only the study's owners can change its codebook version.")
    check_level(membership, "owner")


@dataclass(frozen=True)
class _Plan:
    types: dict[int, int | None]  # old type id -> new type id, None: queued again
    values: dict[int, int]  # old axis value id -> new one
    codes: dict[int, str]  # old type id -> code


def _plan(study: Study, to_codebook: Codebook, moves: dict[str, TypeMove]) -> _Plan:
    old_types = dict(FailureType.objects.filter(codebook=study.codebook).values_list("pk", "code"))
    new_types = {code: pk for pk, code in FailureType.objects.filter(codebook=to_codebook).values_list("pk", "code")}
    types = {pk: None if moves[code].requeues else new_types[moves[code].targets[0]] for pk, code in old_types.items()}
    new_values = {
        (axis, code): pk for pk, axis, code in AxisValue.objects.filter(codebook=to_codebook).values_list(
            "pk", "axis", "code"
        )
    }  # fmt: skip
    values = {}
    for pk, axis, code in AxisValue.objects.filter(codebook=study.codebook).values_list("pk", "axis", "code"):
        if (axis, code) in new_values:
            values[pk] = new_values[(axis, code)]
    return _Plan(types, values, old_types)


def _state(obj) -> dict:
    return {c: getattr(obj, c) for c in CODE_COLUMNS}


class _Row:
    """The columns of a coding or adjudication that a move reads and writes. Not a model instance:
    building those took a quarter of a large study's move (profiled at 6,000 codings)."""

    __slots__ = ("pk", "episode_id", "coder_id", "status", "version", *CODE_COLUMNS)

    def __init__(self, values):
        for name, value in zip(self.__slots__, values, strict=True):
            setattr(self, name, value)

    def __str__(self) -> str:
        return f"{'coding' if self.coder_id is not None else 'adjudication'} {self.pk}"


def _rows(model, study: Study):
    """The study's codings (or adjudications) as _Rows, in id order, read in chunks."""
    if model is Coding:
        head: tuple = ("pk", "episode_id", "coder_id", "episode__status", "version")
    else:
        head = ("pk", "episode_id")
    qs = model.objects.filter(episode__study=study).order_by("pk").values_list(*head, *CODE_COLUMNS)
    for values in qs.iterator(chunk_size=BATCH):
        yield _Row(values if model is Coding else (*values[:2], None, None, None, *values[2:]))


def _record(migration_id: int, model, rows: list[tuple[_Row, dict, bool]]) -> None:
    """The MigratedCode rows of one batch, in one executemany (bulk_create prepared each JSON value and
    field in Python: a third of a large move)."""
    meta = MigratedCode._meta
    qn = connection.ops.quote_name
    names = ["migration", "coding", "adjudication", "episode_id_at", "coder_id_at", "before", "after", "requeued"]
    fields = [meta.get_field(n) for n in names]
    sql = (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "  # noqa: S608 - model names
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    params = []
    for row, before, requeued in rows:
        values = (
            migration_id, row.pk if model is Coding else None, row.pk if model is Adjudication else None,
            row.episode_id, row.coder_id, before, _state(row), requeued,
        )  # fmt: skip
        params.append([f.get_db_prep_save(v, connection) for f, v in zip(fields, values, strict=True)])
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _move(obj, plan: _Plan) -> bool:
    """Give `obj` (a coding or adjudication) the new version's codes; True when it is queued again."""
    for column in ("source_id", "stage_id", "capability_id"):
        value = getattr(obj, column)
        if value is not None:
            if value not in plan.values:
                raise MapError([f"{obj} has a {column[:-3]} from another codebook (id {value})"])
            setattr(obj, column, plan.values[value])
    type_id = obj.failure_type_id
    if type_id is None:
        return False
    if type_id not in plan.types:
        raise MapError([f"{obj} has a failure type from another codebook (id {type_id})"])
    if not obj.failure_type_original:
        obj.failure_type_original = plan.codes[type_id]
    new = plan.types[type_id]
    if new is None:
        obj.failure_type_id, obj.recode_from_id = None, type_id
        return True
    obj.failure_type_id = new
    return False


def _write(model, objs: list, *, user, reason: str, fields: list[str], when) -> None:
    """Update the rows' `fields` and add one history record each (who, when, why).

    One parameterised UPDATE per row through executemany: Django's bulk_update builds a CASE
    expression per field and row, which cost 7 of a move's 9 seconds at 600 codings (profiled);
    then the history records in one statement."""
    meta = model._meta
    qn = connection.ops.quote_name
    attnames = [meta.get_field(f).attname for f in fields]
    sets = ", ".join(f"{qn(meta.get_field(f).column)} = %s" for f in fields)
    sql = f"UPDATE {qn(meta.db_table)} SET {sets} WHERE {qn(meta.pk.column)} = %s"  # noqa: S608 - names from the model
    with connection.cursor() as cursor:
        cursor.executemany(sql, [[getattr(o, a) for a in attnames] + [o.pk] for o in objs])
        cursor.execute(*_history_insert(model, [o.pk for o in objs], user=user, reason=reason, when=when))


def _history_insert(model, ids: list[int], *, user, reason: str, when) -> tuple[str, list]:
    """INSERT ... SELECT of one django-simple-history record per row, as the rows now are: the records
    simple-history's bulk_history_create writes, built by the database (that call spent 0.4 s per 600 rows
    preparing the 30 values of each record in Python)."""
    history = model.history.model
    qn = connection.ops.quote_name
    own = {f.column for f in model._meta.concrete_fields}
    extra = {
        "history_date": connection.ops.adapt_datetimefield_value(when),
        "history_change_reason": reason[:100],
        "history_type": "~",
        "history_user": user.pk,
    }
    columns, values, params = [], [], []
    for f in history._meta.concrete_fields:
        if f.name == "history_id":
            continue
        columns.append(qn(f.column))
        if f.column in own:
            values.append(qn(f.column))
        else:
            values.append("%s")
            params.append(extra[f.name])  # a KeyError names a history field this does not know
    marks = ", ".join(["%s"] * len(ids))
    sql = (
        f"INSERT INTO {qn(history._meta.db_table)} ({', '.join(columns)}) "  # noqa: S608 - names from the models
        f"SELECT {', '.join(values)} FROM {qn(model._meta.db_table)} WHERE {qn(model._meta.pk.column)} IN ({marks})"
    )
    return sql, params + ids


@transaction.atomic
def codings_migrate(
    *, study: Study, to_codebook: Codebook, moves: dict[str, TypeMove], user, progress: Progress = None
) -> CodebookMigration:
    """Move every coding and adjudication of `study` to `to_codebook` by the validated `moves`; see the module."""
    codebook_move_allowed(study=study, user=user)
    study = Study.objects.select_for_update().select_related("codebook").get(pk=study.pk)
    plan = _plan(study, to_codebook, moves)
    new_codes = dict(FailureType.objects.filter(codebook=to_codebook).values_list("pk", "code"))
    now = timezone.now()
    reason = f"codebook migration {study.codebook.label} -> {to_codebook.label}"
    migration = CodebookMigration.objects.create(
        study=study, from_codebook=study.codebook, to_codebook=to_codebook, created_by=user,
        mapping={code: list(m.targets) for code, m in moves.items()},
    )  # fmt: skip
    total = Coding.objects.filter(episode__study=study).count()
    total += Adjudication.objects.filter(episode__study=study).count()
    counts: Counter = Counter()
    done = 0
    for model, prefix in ((Coding, ""), (Adjudication, "adjudications_")):
        batch: list[tuple[_Row, dict, bool]] = []
        for row in _rows(model, study):
            before = _state(row)
            requeued = _move(row, plan)
            _tally(counts, prefix, before, row, requeued, row.status == EpisodeStatus.ADJUDICATED, plan, new_codes)
            if model is Coding:
                row.version += 1
            batch.append((row, before, requeued))
            if len(batch) >= BATCH:
                done = _flush(model, migration.pk, batch, user, reason, now, done, total, progress)
                batch = []
        done = _flush(model, migration.pk, batch, user, reason, now, done, total, progress)
    study.codebook = to_codebook
    study.recoding = study.recoding or counts["requeued"] > 0
    study.save(update_fields=["codebook", "recoding"])
    study_data_changed(study_id=study.pk)  # the labels are under another codebook: stored analyses are stale
    disagreement_refresh(study_id=study.pk)
    migration.counts = {"codings": sum(v for k, v in counts.items() if not k.startswith("adj")), **counts}
    migration.save(update_fields=["counts"])
    return migration


def codings_move_preview(*, study: Study, to_codebook: Codebook, moves: dict[str, TypeMove]) -> dict:
    """The counts codings_migrate would record, read only (the page's preview, the command's --dry-run)."""
    plan = _plan(study, to_codebook, moves)
    new_codes = dict(FailureType.objects.filter(codebook=to_codebook).values_list("pk", "code"))
    counts: Counter = Counter()
    for model, prefix in ((Coding, ""), (Adjudication, "adjudications_")):
        for row in _rows(model, study):
            before = _state(row)
            requeued = _move(row, plan)
            _tally(counts, prefix, before, row, requeued, row.status == EpisodeStatus.ADJUDICATED, plan, new_codes)
    return {"codings": sum(v for k, v in counts.items() if not k.startswith("adj")), **counts}


def _tally(counts: Counter, prefix: str, before: dict, obj, requeued: bool, adjudicated: bool, plan, new_codes):
    """Count one row: requeued (or held, on an adjudicated episode), moved (its code changed), kept, without_type."""
    if requeued:
        counts[f"{prefix}held" if adjudicated else f"{prefix}requeued"] += 1
    elif before["failure_type_id"] is None:
        counts[f"{prefix}without_type"] += 1
    elif plan.codes[before["failure_type_id"]] != new_codes[obj.failure_type_id]:
        counts[f"{prefix}moved"] += 1
    else:
        counts[f"{prefix}kept"] += 1


def _flush(model, migration_id: int, batch, user, reason, when, done, total, progress: Progress) -> int:
    if not batch:
        return done
    fields = UPDATE_FIELDS + (["version"] if model is Coding else [])
    _write(model, [row for row, _, _ in batch], user=user, reason=reason, fields=fields, when=when)
    _record(migration_id, model, batch)
    done += len(batch)
    if progress is not None:
        progress(done, total)
    return done


def _restore(model, chunk: list[tuple[int, dict, dict]], *, user, reason: str, when) -> int:
    """Put one batch of rows back to their `before` codes (history too); the number edited since the move."""
    head = ("pk", "version") if model is Coding else ("pk",)
    now = {v[0]: v for v in model.objects.filter(pk__in=[pk for pk, _, _ in chunk]).values_list(*head, *CODE_COLUMNS)}
    rows, edited = [], 0
    for pk, before, after in chunk:
        current = now[pk]
        edited += dict(zip(CODE_COLUMNS, current[len(head) :], strict=True)) != after
        version = current[1] + 1 if model is Coding else None
        rows.append(_Row((pk, None, None, None, version, *(before[c] for c in CODE_COLUMNS))))
    fields = UPDATE_FIELDS + (["version"] if model is Coding else [])
    _write(model, rows, user=user, reason=reason, fields=fields, when=when)
    return edited


class RevertRefused(Exception):
    """A migration that cannot be reverted now; the message says why."""


def _revert_check(migration: CodebookMigration, study: Study) -> None:
    if migration.reverted_at is not None:
        raise RevertRefused(f"This migration was already reverted on {migration.reverted_at:%Y-%m-%d %H:%M}.")
    latest = study.codebook_migrations.filter(reverted_at__isnull=True).order_by("-created_at", "-id").first()
    if latest is None or latest.pk != migration.pk or study.codebook_id != migration.to_codebook_id:
        raise RevertRefused("Only the study's latest migration can be reverted: revert the later ones first.")
    recorded = migration.rows.values("coding_id")
    newer = Coding.objects.filter(episode__study=study).exclude(pk__in=recorded.filter(coding__isnull=False)).count()
    recorded_adj = migration.rows.filter(adjudication__isnull=False).values("adjudication_id")
    newer += Adjudication.objects.filter(episode__study=study).exclude(pk__in=recorded_adj).count()
    if newer:
        raise RevertRefused(
            f"{newer} coding(s) or adjudication(s) were made under {migration.to_codebook.label} after the "
            "migration; a revert would have to guess their earlier codes. Move forward with a new map instead."
        )


@transaction.atomic
def codebook_migration_revert(*, migration: CodebookMigration, user, progress: Progress = None) -> dict:
    """Put every coding and adjudication back as the migration found it, and the study on its earlier codebook.

    Edits made since the migration (re-codings of queued codings) are overwritten, and kept in
    history like the revert itself. Refused (RevertRefused) for a migration that is not the
    study's latest, or when codings were created since. Returns counts: restored, edited_since.
    """
    codebook_move_allowed(study=migration.study, user=user)
    study = Study.objects.select_for_update().get(pk=migration.study_id)
    _revert_check(migration, study)
    reason = f"revert of codebook migration {migration.pk}"
    now = timezone.now()
    total = migration.rows.filter(Q(coding__isnull=False) | Q(adjudication__isnull=False)).count()
    done = edited = 0
    for model, link in ((Coding, "coding"), (Adjudication, "adjudication")):
        recorded = migration.rows.filter(**{f"{link}__isnull": False}).order_by("pk")
        recorded = recorded.values_list(f"{link}_id", "before", "after")
        for start in range(0, total, BATCH):
            chunk = list(recorded[start : start + BATCH])
            if not chunk:
                break
            edited += _restore(model, chunk, user=user, reason=reason, when=now)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    study.codebook_id = migration.from_codebook_id
    queued = Coding.objects.filter(episode__study=study, recode_from__isnull=False)
    study.recoding = queued.exclude(episode__status=EpisodeStatus.ADJUDICATED).exists()
    study.save(update_fields=["codebook", "recoding"])
    study_data_changed(study_id=study.pk)
    disagreement_refresh(study_id=study.pk)
    migration.reverted_at, migration.reverted_by = now, user
    migration.save(update_fields=["reverted_at", "reverted_by"])
    return {"restored": total, "edited_since": edited}


@dataclass(frozen=True)
class StudyVersion:
    """A codebook version a study used: the current one (migration None), or one it was moved away from."""

    codebook: Codebook
    migration: CodebookMigration | None

    @property
    def label(self) -> str:
        return self.codebook.label

    @property
    def version(self) -> str:
        return self.codebook.version


def codebook_versions(study: Study) -> list[StudyVersion]:
    """The study's codebook now, then each earlier version it was moved away from (newest first), once each."""
    out = [StudyVersion(study.codebook, None)]
    seen = {study.codebook_id}
    migrations = study.codebook_migrations.filter(reverted_at__isnull=True).select_related("from_codebook")
    for migration in migrations.order_by("-created_at", "-id"):
        if migration.from_codebook_id not in seen:
            seen.add(migration.from_codebook_id)
            out.append(StudyVersion(migration.from_codebook, migration))
    return out


def coding_rows_before(migration: CodebookMigration) -> list[tuple]:
    """The study's codings as `migration` found them, as coder_arrays reads them (codings then queued
    again by an earlier migration left out): (episode, coder, type, source, stage, capability, not a
    failure, needs a new type)."""
    rows = []
    for episode_id, coder_id, before in migration.rows.filter(coder_id_at__isnull=False).values_list(
        "episode_id_at", "coder_id_at", "before"
    ):
        if before.get("recode_from_id") is not None:
            continue
        rows.append(
            (
                episode_id, coder_id, before["failure_type_id"], before["source_id"], before["stage_id"],
                before["capability_id"], before["not_a_failure"], before["needs_new_type"],
            )
        )  # fmt: skip
    return rows


@dataclass(frozen=True)
class RecodeNote:
    """What the coding page shows on a coding (or adjudication) a migration queued again."""

    old_code: str
    old_name: str
    from_label: str
    to_label: str
    targets: tuple[tuple[str, str], ...]  # (code, name) of the new types it was split into; empty: retired


def recode_note(row: Coding | Adjudication) -> RecodeNote | None:
    """Why `row` is queued again: its old type and what the migration made of it (two queries, only when queued)."""
    if row.recode_from_id is None:
        return None
    old = FailureType.objects.select_related("codebook").get(pk=row.recode_from_id)
    link = {"coding": row} if isinstance(row, Coding) else {"adjudication": row}
    record = (
        MigratedCode.objects.filter(requeued=True, migration__reverted_at__isnull=True, **link)
        .select_related("migration__to_codebook")
        .order_by("-id")
        .first()
    )
    to_codebook = record.migration.to_codebook if record else None
    codes = record.migration.mapping.get(old.code, []) if record else []
    names = dict(FailureType.objects.filter(codebook=to_codebook, code__in=codes).values_list("code", "name"))
    return RecodeNote(
        old_code=old.code, old_name=old.name, from_label=old.codebook.label,
        to_label=to_codebook.label if to_codebook else "", targets=tuple((c, names.get(c, "")) for c in codes),
    )  # fmt: skip


def readjudications(study: Study, *, limit: int = 50) -> list[Adjudication]:
    """Adjudications a migration queued again (their type split or retired), for the adjudication list."""
    return list(
        Adjudication.objects.filter(episode__study=study, recode_from__isnull=False)
        .select_related("episode__document", "recode_from")
        .order_by("episode_id")[:limit]
    )
