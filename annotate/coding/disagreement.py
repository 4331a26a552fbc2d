"""The stored disagreement state of episodes: which axes their coders differ on, as bits.

`Episode.disagreement` is 0 when the episode's codings agree (or it has fewer than
two) and otherwise has one bit per axis in DISAGREEMENT_BITS. The coding and
adjudication services refresh it in the statement that refreshes the episode's
counts, inside their transaction, so the adjudication list reads it from a
partial index instead of comparing codings episode by episode. The test is the
one `labels.disagreeing_axes` makes: an axis differs when its smallest and
largest value differ, a missing code counting as a value of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Case, F, IntegerField, Max, Min, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Cast, Coalesce

from annotate.models import Coding, Episode

# Bit per axis; part of the stored data (migration 0007 backfills with the same bits).
DISAGREEMENT_BITS = {
    "failure_type": 1,
    "source": 2,
    "stage": 4,
    "capability": 8,
    "not_a_failure": 16,
    "needs_new_type": 32,
}


def _column(axis: str):
    if axis in ("not_a_failure", "needs_new_type"):
        return Cast(axis, IntegerField())  # PostgreSQL has no MIN/MAX of booleans
    return Coalesce(f"{axis}_id", Value(0), output_field=IntegerField())


def disagreement_mask(codings: QuerySet | None = None) -> Coalesce:
    """An expression for an Episode row: the bits of the axes its codings differ on (0: none).

    `codings` is the Coding manager or queryset to read (a migration passes its historical model's).
    """
    rows = (codings if codings is not None else Coding.objects).filter(episode_id=OuterRef("pk")).order_by()
    spread = rows.values("episode_id").annotate(
        **{f"lo_{a}": Min(_column(a)) for a in DISAGREEMENT_BITS},
        **{f"hi_{a}": Max(_column(a)) for a in DISAGREEMENT_BITS},
    )
    bits = None
    for axis, bit in DISAGREEMENT_BITS.items():
        term = Case(When(Q(**{f"lo_{axis}__lt": F(f"hi_{axis}")}), then=Value(bit)), default=Value(0))
        bits = term if bits is None else bits + term
    mask = spread.annotate(mask=bits).values("mask")
    return Coalesce(Subquery(mask, output_field=IntegerField()), Value(0))


def disagreement_refresh(*, episode_ids: Iterable[int] | None = None, study_id: int | None = None) -> int:
    """Recompute the stored disagreement of some episodes (or of a whole study) in one UPDATE.

    For bulk writers (dataset imports, repairs); the coding services fold the same
    expression into their own episode UPDATE. Returns the number of rows updated.
    """
    episodes = Episode.objects.all()
    if episode_ids is not None:
        episodes = episodes.filter(pk__in=list(episode_ids))
    if study_id is not None:
        episodes = episodes.filter(study_id=study_id)
    return episodes.update(disagreement=disagreement_mask())
