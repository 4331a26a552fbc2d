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

The move runs inline, in bulk statements of BATCH rows: a study with 20,000 codings
moves in seconds, so no job is needed; commands pass a progress callback for a bar.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone
from simple_history.utils import bulk_update_with_history

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
    bulk_update_with_history(
        objs, model, fields, batch_size=BATCH, default_user=user, default_change_reason=reason[:100], default_date=when
    )


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
    codings = Coding.objects.filter(episode__study=study).select_related("episode").order_by("pk")
    adjudications = Adjudication.objects.filter(episode__study=study).order_by("pk")
    total = codings.count() + adjudications.count()
    counts: Counter = Counter()
    done = 0
    for model, qs, prefix in ((Coding, codings, ""), (Adjudication, adjudications, "adjudications_")):
        objs, rows = [], []
        for obj in qs.iterator(chunk_size=BATCH):
            before = _state(obj)
            requeued = _move(obj, plan)
            adjudicated = prefix == "" and obj.episode.status == EpisodeStatus.ADJUDICATED
            _tally(counts, prefix, before, obj, requeued, adjudicated, plan, new_codes)
            if model is Coding:
                obj.version += 1
            objs.append(obj)
            rows.append(
                MigratedCode(
                    migration=migration, episode_id_at=obj.episode_id, before=before, after=_state(obj),
                    requeued=requeued, coder_id_at=getattr(obj, "coder_id", None),
                    **({"coding": obj} if model is Coding else {"adjudication": obj}),
                )
            )  # fmt: skip
            if len(objs) >= BATCH:
                done = _flush(model, objs, rows, user, reason, now, done, total, progress)
                objs, rows = [], []
        done = _flush(model, objs, rows, user, reason, now, done, total, progress)
    study.codebook = to_codebook
    study.recoding = study.recoding or counts["requeued"] > 0
    study.save(update_fields=["codebook", "recoding"])
    disagreement_refresh(study_id=study.pk)
    migration.counts = {"codings": sum(v for k, v in counts.items() if not k.startswith("adj")), **counts}
    migration.save(update_fields=["counts"])
    return migration


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


def _flush(model, objs, rows, user, reason, when, done, total, progress: Progress) -> int:
    if not objs:
        return done
    fields = UPDATE_FIELDS + (["version"] if model is Coding else [])
    _write(model, objs, user=user, reason=reason, fields=fields, when=when)
    MigratedCode.objects.bulk_create(rows, batch_size=BATCH)
    done += len(objs)
    if progress is not None:
        progress(done, total)
    return done


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
    rows = list(migration.rows.filter(coding__isnull=False).select_related("coding"))
    adj_rows = list(migration.rows.filter(adjudication__isnull=False).select_related("adjudication"))
    total, done, edited = len(rows) + len(adj_rows), 0, 0
    batches = ((Coding, [(r.coding, r) for r in rows]), (Adjudication, [(r.adjudication, r) for r in adj_rows]))
    for model, batch in batches:
        objs = []
        for obj, row in batch:
            edited += _state(obj) != row.after
            for column, value in row.before.items():
                setattr(obj, column, value)
            if model is Coding:
                obj.version += 1
            objs.append(obj)
        fields = UPDATE_FIELDS + (["version"] if model is Coding else [])
        for i in range(0, len(objs), BATCH):
            _write(model, objs[i : i + BATCH], user=user, reason=reason, fields=fields, when=now)
            done += len(objs[i : i + BATCH])
            if progress is not None:
                progress(done, total)
    study.codebook_id = migration.from_codebook_id
    queued = Coding.objects.filter(episode__study=study, recode_from__isnull=False)
    study.recoding = queued.exclude(episode__status=EpisodeStatus.ADJUDICATED).exists()
    study.save(update_fields=["codebook", "recoding"])
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
