"""Writes for codings: the save with optimistic locking and room checks, its validators, delete, and the repair
of a study's denormalised episode counts."""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Count, OuterRef, Q, Value, When
from django.db.models.lookups import GreaterThanOrEqual
from django.db.models.sql import UpdateQuery
from django.utils import timezone

from annotate.coding.disagreement import disagreement_mask, disagreement_refresh
from annotate.coding.evidence import evidence_locate
from annotate.models import Coding, Confidence, Episode, EpisodeStatus, Lease, Study
from annotate.studies.selectors import count_per_outer_row
from annotate.studies.services import study_data_changed
from taxonomy.models import Axis, AxisValue, FailureType


class CodingConflict(Exception):
    """A save built on a stale version. Carries the coding as it is now."""

    def __init__(self, current: Coding | None):
        super().__init__("This coding was changed since you opened it.")
        self.current = current


@dataclass(frozen=True)
class CodingValues:
    failure_type: FailureType | None = None
    source: AxisValue | None = None
    stage: AxisValue | None = None
    capability: AxisValue | None = None
    not_a_failure: bool = False
    not_a_failure_reason: str = ""
    needs_new_type: bool = False
    confidence: str = Confidence.MEDIUM
    memo: str = ""
    evidence: str = ""
    evidence_start: int | None = None
    evidence_end: int | None = None
    decisive_step: int | None = None
    responsible_agent: str = ""


CODING_FIELDS = list(CodingValues.__dataclass_fields__)
CODE_FIELDS = ("failure_type", "source", "stage", "capability")  # the foreign keys among them


def _differs(coding: Coding, values: CodingValues, name: str) -> bool:
    """Whether the stored coding differs from `values` in field `name` (codes compared by id, without loading them)."""
    if name in CODE_FIELDS:
        return getattr(coding, f"{name}_id") != getattr(getattr(values, name), "pk", None)
    return getattr(coding, name) != getattr(values, name)


def coding_values_validate(*, values: CodingValues, codebook_id: int) -> None:
    """Field errors for codes that are missing, from another codebook or on the wrong axis."""
    errors: dict[str, str] = {}
    if values.not_a_failure:
        if not values.not_a_failure_reason.strip():
            errors["not_a_failure_reason"] = "Say why this is not a failure."
    else:
        if values.failure_type is None and not values.needs_new_type:
            errors["failure_type"] = "Choose a failure type, or mark that it needs a new type."
        for axis in Axis.values:
            if getattr(values, axis) is None:
                errors[axis] = f"Choose a {Axis(axis).label.lower()}."
    if values.failure_type is not None and values.failure_type.codebook_id != codebook_id:
        errors["failure_type"] = "This type is not in the study's codebook."
    for axis in Axis.values:
        value = getattr(values, axis)
        if value is not None and (value.codebook_id != codebook_id or value.axis != axis):
            errors[axis] = f"'{value.code}' is not a {axis} of the study's codebook."
    if values.confidence not in Confidence.values:
        errors["confidence"] = f"Confidence must be one of {', '.join(Confidence.values)}."
    if (values.evidence_start is None) != (values.evidence_end is None) or (
        values.evidence_start is not None and values.evidence_end < values.evidence_start
    ):
        errors["evidence"] = "Evidence offsets must be a start and an end, in order."
    if errors:
        raise ValidationError(errors)


def attribution_validate(*, decisive_step: int | None, responsible_agent: str, document) -> None:
    """Field errors for a decisive step or responsible agent the episode's document cannot have.

    Only documents with trace steps take an attribution, and the step must be one of the trace's.
    """
    if decisive_step is None and not responsible_agent:
        return
    n_steps = int(((document.meta or {}).get("trace") or {}).get("steps") or 0)
    errors = {}
    if n_steps == 0:
        errors["decisive_step" if decisive_step is not None else "responsible_agent"] = (
            "This document has no trace steps: it takes no decisive step or responsible agent."
        )
    elif decisive_step is not None and not 0 <= decisive_step < n_steps:
        errors["decisive_step"] = f"The trace has steps 0 to {n_steps - 1}; there is no step {decisive_step}."
    if len(responsible_agent) > 200:
        errors["responsible_agent"] = "At most 200 characters."
    if errors:
        raise ValidationError(errors)


# Coding fields that can change an episode's stored disagreement.
DISAGREEMENT_FIELDS = {"failure_type", "source", "stage", "capability", "not_a_failure", "needs_new_type"}


def evidence_checked(text: str, quote: str, start: int | None, end: int | None) -> tuple[str, int | None, int | None]:
    """The page's evidence rule, for every writer: (quote, start, end) as stored, or ValidationError.

    The quote is a passage of the episode text; offsets, when given, lie inside the text and
    point at that quote. Without offsets the quote is located as the page does, so stored
    offsets always match the stored quote.
    """
    if not quote.strip():
        if start is not None or end is not None:
            raise ValidationError({"evidence": "Evidence offsets need the quoted evidence."})
        return "", None, None
    if start is not None and end is not None:
        if not 0 <= start < end <= len(text):
            raise ValidationError(
                {"evidence_start": f"Evidence offsets must lie inside the episode text (0 to {len(text)})."}
            )
        if text[start:end] != quote:
            raise ValidationError({"evidence": "The evidence is not the passage of the episode text at these offsets."})
        return quote, start, end
    located = evidence_locate(text, quote)
    if located is None:
        raise ValidationError({"evidence": "The evidence must be a passage of the episode text."})
    return located.quote, located.start, located.end


def _evidence_resolved(episode: Episode, values: CodingValues) -> CodingValues:
    if not values.evidence.strip() and values.evidence_start is None and values.evidence_end is None:
        return replace(values, evidence="")
    text = episode.excerpt or episode.document.body
    quote, start, end = evidence_checked(text, values.evidence, values.evidence_start, values.evidence_end)
    return replace(values, evidence=quote, evidence_start=start, evidence_end=end)


def _refresh_episode_counts(episode_id: int, k: int, *, locked: bool = False) -> None:
    """Store the episode's number of codings, its open/coded status and its disagreement state.

    The count runs in a statement after the episode's row lock is held (taken
    here unless the caller holds it), so it sees every coding committed before.
    """
    if not locked:
        Episode.objects.select_for_update().filter(pk=episode_id).values_list("pk").first()
    _episode_update("refresh", episode_id, k)


def _episode_values(name: str, k) -> dict:
    """The SET clause of the coding services' episode UPDATEs: "refresh" (counts, status and
    disagreement, after a coding is added or removed) or "disagreement" (after an edit)."""
    if name == "disagreement":
        return {"disagreement": disagreement_mask()}
    n = count_per_outer_row(Coding.objects.filter(episode_id=OuterRef("pk")), "episode_id")
    status = Case(
        When(status=EpisodeStatus.ADJUDICATED, then=Value(EpisodeStatus.ADJUDICATED)),
        When(GreaterThanOrEqual(n, Value(k)), then=Value(EpisodeStatus.CODED)),
        default=Value(EpisodeStatus.OPEN),
    )
    return {"n_codings": n, "status": status, "disagreement": disagreement_mask()}


# Building the disagreement expression through the ORM costs more CPU than the rest of a save,
# and its SQL never changes: each UPDATE is compiled once per database with marker values
# for the episode id and k, which each run puts back in their places among the parameters.
_MARK_PK, _MARK_K = -790_001, -790_002
_compiled: dict[tuple[str, str], tuple[str, tuple, list[int], list[int]] | None] = {}


def _compile(name: str) -> tuple[str, tuple, list[int], list[int]] | None:
    query = Episode.objects.filter(pk=_MARK_PK).query.chain(UpdateQuery)
    query.add_update_values(_episode_values(name, _MARK_K))
    sql, params = query.get_compiler(connection=connection).as_sql()
    pk_at = [i for i, p in enumerate(params) if p == _MARK_PK]
    k_at = [i for i, p in enumerate(params) if p == _MARK_K]
    if len(pk_at) != 1 or len(k_at) != (0 if name == "disagreement" else 1):
        return None  # a backend that inlines values: stay with the ORM
    return sql, tuple(params), pk_at, k_at


def _episode_update(name: str, episode_id: int, k: int = 0) -> None:
    """Run one of the episode UPDATEs of _episode_values on one episode, in one statement."""
    key = (connection.vendor, name)
    if key not in _compiled:
        _compiled[key] = _compile(name)
    compiled = _compiled[key]
    if compiled is None:
        Episode.objects.filter(pk=episode_id).update(**_episode_values(name, k))
        return
    sql, params, pk_at, k_at = compiled
    params = list(params)
    for i in pk_at:
        params[i] = episode_id
    for i in k_at:
        params[i] = k
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _suggestion_mark_used(*, suggestion, episode: Episode, values: CodingValues, user) -> None:
    """A coding built from a suggestion marks it accepted if kept as suggested, edited if changed."""
    from annotate.models import SuggestionStatus

    if suggestion.episode_id != episode.pk or suggestion.error:
        raise ValidationError({"from_suggestion": "This suggestion is not a valid suggestion for this episode."})
    same = (
        suggestion.not_a_failure == values.not_a_failure
        and suggestion.failure_type_id == getattr(values.failure_type, "pk", None)
        and suggestion.source_id == getattr(values.source, "pk", None)
        and suggestion.stage_id == getattr(values.stage, "pk", None)
        and suggestion.capability_id == getattr(values.capability, "pk", None)
    )
    suggestion.status = SuggestionStatus.ACCEPTED if same else SuggestionStatus.EDITED
    suggestion.reviewed_by = user
    suggestion.save(update_fields=["status", "reviewed_by", "updated_at"])


class EpisodeFull(Exception):
    """The episode takes no new coder: it has k codings or leases held by others, or it is adjudicated."""

    def __init__(self, episode: Episode):
        if episode.status == EpisodeStatus.ADJUDICATED:
            message = "This episode has been adjudicated; it takes no new codings."
        else:
            message = (
                f"This episode already has its {episode.study.coders_per_episode} coders "
                "(coded, or being coded by others right now)."
            )
        super().__init__(message)
        self.episode = episode


def has_room(episode: Episode, coder, now) -> bool:
    """Whether `coder` may start coding `episode`: k minus its codings and others' live leases.

    Under the row lock it is the final word (a fresh statement sees every committed lease).
    """
    others = Lease.objects.filter(episode=episode, expires_at__gt=now).exclude(coder=coder).count()
    return episode.n_codings + others < episode.study.coders_per_episode


@dataclass(frozen=True)
class _Places:
    """What a first save reads under the episode's row lock (each a fresh read of committed rows)."""

    mine: bool  # the coder held a live lease, which the read ended
    others: int  # live leases of other coders
    stale: bool  # the coder has an expired lease left to end
    coded: bool | None  # the coder has a coding of the episode; None: not read here


def _places_under_lock(*, episode_id: int, coder_id: int, now) -> _Places:
    """End the coder's live lease and count the places taken, after the episode's row lock.

    PostgreSQL does it in one statement, which also tells whether the coder's coding exists: its
    snapshot is taken after the lock, so it sees every lease and coding committed before it (the
    DELETE in the WITH is not visible to the counts, which only look at others' and expired leases).
    Elsewhere: the DELETE, then one aggregate (`coded` is then left to the caller)."""
    if connection.vendor == "postgresql":
        lease, coding = Lease._meta.db_table, Coding._meta.db_table
        sql = f"""
            WITH mine AS (
                DELETE FROM {lease} WHERE episode_id = %(e)s AND coder_id = %(c)s AND expires_at > %(now)s RETURNING 1
            )
            SELECT (SELECT count(*) FROM mine),
                   (SELECT count(*) FROM {lease}
                     WHERE episode_id = %(e)s AND expires_at > %(now)s AND coder_id <> %(c)s),
                   EXISTS (SELECT 1 FROM {lease}
                            WHERE episode_id = %(e)s AND coder_id = %(c)s AND expires_at <= %(now)s),
                   EXISTS (SELECT 1 FROM {coding} WHERE episode_id = %(e)s AND coder_id = %(c)s)
        """  # noqa: S608 - table names from the models
        with connection.cursor() as cursor:
            cursor.execute(sql, {"e": episode_id, "c": coder_id, "now": now})
            mine, others, stale, coded = cursor.fetchone()
        return _Places(mine=mine > 0, others=others, stale=stale, coded=coded)
    # (episode, coder) is unique, so deleting the coder's live lease both tells whether they held
    # it and ends it, as the save does (a failed save rolls the delete back with everything else).
    mine = Lease.objects.filter(episode_id=episode_id, coder_id=coder_id, expires_at__gt=now).delete()[0] > 0
    if mine:
        return _Places(mine=True, others=0, stale=False, coded=None)
    leases = Lease.objects.filter(episode_id=episode_id).aggregate(
        others=Count("pk", filter=Q(expires_at__gt=now) & ~Q(coder_id=coder_id)),
        stale=Count("pk", filter=Q(coder_id=coder_id)),
    )
    return _Places(mine=False, others=leases["others"], stale=leases["stale"] > 0, coded=None)


@transaction.atomic
def coding_save(
    *,
    episode: Episode,
    coder,
    values: CodingValues,
    version: int | None,
    from_suggestion=None,
    has_coding: bool | None = None,
) -> Coding:
    """Save `coder`'s coding of `episode`: the one path for the coding page, the API and every other writer.

    It gives the same refusals everywhere: EpisodeFull for an adjudicated episode or one
    whose k places are taken, CodingConflict (with the coding as it is now) for a stale
    `version` (None or 0 for a new coding), ValidationError with field errors for codes
    outside the codebook or evidence that is not a passage of the episode text.

    A first coding needs the coder's live lease or a free place (checked under
    the episode's row lock, so concurrent first codings cannot exceed k);
    editing an existing coding is always allowed. The lease ends with the save.
    `has_coding` is what the caller already read (a coding created since then ends as
    CodingConflict, through the unique constraint); None looks it up.
    Raises EpisodeFull, CodingConflict or ValidationError and then writes nothing.
    """
    if has_coding is None:
        has_coding = Coding.objects.filter(episode=episode, coder=coder).exists()
    stray = has_coding
    absent = False  # known, under the lock, that the coder has no coding of the episode
    if not has_coding:
        now = timezone.now()
        locked = Episode.objects.select_for_update().only("status", "n_codings").get(pk=episode.pk)
        locked.study = episode.study
        held = _places_under_lock(episode_id=locked.pk, coder_id=coder.pk, now=now)
        if held.coded:
            # Saved meanwhile (a second submit of the same form): the version check decides.
            has_coding = stray = True
        else:
            absent = held.coded is False
            room = held.mine or (
                locked.status != EpisodeStatus.ADJUDICATED
                and locked.n_codings + held.others < episode.study.coders_per_episode
            )
            stray = held.stale and not held.mine
            if locked.status == EpisodeStatus.ADJUDICATED or not room:
                if held.coded is None and Coding.objects.filter(episode=episode, coder=coder).exists():
                    has_coding = stray = True  # saved meanwhile, as above
                else:
                    raise EpisodeFull(locked)
        episode.n_codings = locked.n_codings
    coding = coding_write(
        episode=episode, coder=coder, values=values, version=version, from_suggestion=from_suggestion,
        locked=not has_coding, absent=absent,
    )  # fmt: skip
    if stray:
        Lease.objects.filter(episode=episode, coder=coder).delete()  # an expired or stray lease
    return coding


def _recode_done(coding: Coding) -> list[str]:
    """A coding saved again after a codebook migration split or retired its type is no longer queued."""
    if coding.recode_from_id is None:
        return []
    coding.recode_from = None
    return ["recode_from"]


def coding_write(
    *,
    episode: Episode,
    coder,
    values: CodingValues,
    version: int | None,
    from_suggestion=None,
    locked: bool = False,
    absent: bool = False,
) -> Coding:
    """coding_save's write once its refusals passed: validation, optimistic locking, history.

    Only coding_save and writers of whole studies (the demo, dataset imports) call it, inside
    a transaction; `locked`: the caller holds the episode's row lock; `absent`: under that lock,
    the caller read that the coder has no coding of the episode (no need to look again)."""
    study = episode.study
    coding_values_validate(values=values, codebook_id=study.codebook_id)
    if values.decisive_step is not None or values.responsible_agent:
        attribution_validate(
            decisive_step=values.decisive_step, responsible_agent=values.responsible_agent, document=episode.document
        )
    values = _evidence_resolved(episode, values)
    if values.not_a_failure:
        values = CodingValues(
            not_a_failure=True,
            not_a_failure_reason=values.not_a_failure_reason,
            confidence=values.confidence,
            memo=values.memo,
            evidence=values.evidence,
            evidence_start=values.evidence_start,
            evidence_end=values.evidence_end,
        )
    if from_suggestion is not None:
        _suggestion_mark_used(suggestion=from_suggestion, episode=episode, values=values, user=coder)
    current = None if absent else Coding.objects.select_for_update().filter(episode=episode, coder=coder).first()
    if current is None and not locked:
        # Every first coding is written under the episode's row lock, so two first codings of one
        # coder cannot race to the unique constraint: take the lock, then look again (a statement
        # after the lock sees every coding committed before it).
        Episode.objects.select_for_update().filter(pk=episode.pk).values_list("pk").first()
        locked = True
        current = Coding.objects.select_for_update().filter(episode=episode, coder=coder).first()
    if current is None:
        if version:
            raise CodingConflict(None)
        coding = Coding(episode=episode, coder=coder, from_suggestion=from_suggestion, version=1)
        for name in CODING_FIELDS:
            setattr(coding, name, getattr(values, name))
        coding._history_user = coder
        try:
            coding.save()
        except IntegrityError as exc:  # a writer that skipped the lock; the transaction is lost, not the data
            raise CodingConflict(None) from exc
        _refresh_episode_counts(episode.pk, study.coders_per_episode, locked=True)
        study_data_changed(study_id=study.pk)
        return coding
    if version != current.version:
        raise CodingConflict(current)
    changed = [name for name in CODING_FIELDS if _differs(current, values, name)]
    if from_suggestion is not None and current.from_suggestion_id != from_suggestion.pk:
        current.from_suggestion = from_suggestion
        changed.append("from_suggestion")
    changed += _recode_done(current)
    # The codes as the caller has them (same ids where unchanged), so reading them back costs no query.
    current.coder = coder
    for name in CODE_FIELDS:
        setattr(current, name, getattr(values, name))
    if not changed:
        return current
    for name in changed:
        if name not in ("from_suggestion", "recode_from"):
            setattr(current, name, getattr(values, name))
    # The row is locked (select_for_update), so a plain increment is safe.
    current.version += 1
    current._history_user = coder
    current.save()
    if set(changed) & DISAGREEMENT_FIELDS:
        _episode_update("disagreement", episode.pk)
    study_data_changed(study_id=study.pk)
    return current


@transaction.atomic
def coding_delete(*, coding: Coding, user) -> None:
    """Delete a coding; its history keeps the deleted values."""
    episode_id, k = coding.episode_id, coding.episode.study.coders_per_episode
    coding._history_user = user
    study_id = coding.episode.study_id
    coding.delete()
    _refresh_episode_counts(episode_id, k)
    study_data_changed(study_id=study_id)


@transaction.atomic
def episodes_recount(*, study: Study) -> int:
    """Repair the denormalised coding counts and statuses of a study's episodes."""
    k = study.coders_per_episode
    episodes = list(
        Episode.objects.filter(study=study).annotate(
            real=Count("codings"), adjudicated=Count("adjudication", filter=Q(adjudication__isnull=False))
        )
    )
    stale = []
    for ep in episodes:
        status = (
            EpisodeStatus.ADJUDICATED
            if ep.adjudicated
            else (EpisodeStatus.CODED if ep.real >= k else EpisodeStatus.OPEN)
        )
        if ep.n_codings != ep.real or ep.status != status:
            ep.n_codings, ep.status = ep.real, status
            stale.append(ep)
    Episode.objects.bulk_update(stale, ["n_codings", "status"], batch_size=1000)
    disagreement_refresh(study_id=study.pk)
    return len(stale)
