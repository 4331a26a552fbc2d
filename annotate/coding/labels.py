"""The label that analysis and exports use for an episode.

Analysis uses the Adjudication if there is one. Without one, it uses the codes
that all coders agree on, once the episode has its k codings. An episode whose
coders disagree and that has no adjudication is left out, and counted with its
reason. A study can instead analyse one coder's labels (LabelRule.SINGLE_CODER).

`resolve_label` is pure (rows in, a frozen dataclass out); `final_labels` is
the selector that feeds it from the database in a fixed number of queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from annotate.models import Adjudication, Coding, Episode, LabelRule, Study

AXES = ("failure_type_id", "source_id", "stage_id", "capability_id", "not_a_failure", "needs_new_type")


class LabelStatus:
    ADJUDICATED = "adjudicated"
    AGREED = "agreed"
    SINGLE_CODER = "single_coder"
    NONE = "none"


class Reason:
    UNCODED = "uncoded"
    INCOMPLETE = "incomplete"  # fewer than k codings
    DISAGREEMENT = "disagreement"  # coders disagree and nobody adjudicated
    NOT_CODED_BY_CODER = "not_coded_by_label_coder"
    # After a codebook migration split or retired its type (annotate.coding.codebook_moves).
    RECODE = "awaiting_recoding"
    READJUDICATE = "awaiting_readjudication"


@dataclass(frozen=True)
class FinalLabel:
    status: str
    reason: str = ""
    failure_type_id: int | None = None
    source_id: int | None = None
    stage_id: int | None = None
    capability_id: int | None = None
    not_a_failure: bool = False
    needs_new_type: bool = False

    @property
    def usable(self) -> bool:
        return self.status != LabelStatus.NONE


class CodingRow(NamedTuple):
    """The columns of a Coding that `resolve_label` reads: cheaper to load than a model instance."""

    episode_id: int
    coder_id: int
    failure_type_id: int | None
    source_id: int | None
    stage_id: int | None
    capability_id: int | None
    not_a_failure: bool
    needs_new_type: bool
    recode_from_id: int | None = None


def _pending(row) -> bool:
    """A coding or adjudication whose type a codebook migration split or retired, not yet coded again."""
    return getattr(row, "recode_from_id", None) is not None


def _codes(row) -> tuple:
    return tuple(getattr(row, a) for a in AXES)


def resolve_label(
    *,
    adjudication: Adjudication | None,
    codings: list[Coding] | list[CodingRow],
    k: int,
    rule: str = LabelRule.CONSENSUS,
    label_coder_id: int | None = None,
) -> FinalLabel:
    """The final label of one episode under the study's label rule."""
    if rule == LabelRule.SINGLE_CODER:
        mine = [c for c in codings if c.coder_id == label_coder_id]
        if not mine:
            return FinalLabel(LabelStatus.NONE, Reason.NOT_CODED_BY_CODER)
        if _pending(mine[0]):
            return FinalLabel(LabelStatus.NONE, Reason.RECODE)
        return FinalLabel(LabelStatus.SINGLE_CODER, "", *_codes(mine[0]))
    if adjudication is not None:
        if _pending(adjudication):
            return FinalLabel(LabelStatus.NONE, Reason.READJUDICATE)
        return FinalLabel(LabelStatus.ADJUDICATED, "", *_codes(adjudication))
    if not codings:
        return FinalLabel(LabelStatus.NONE, Reason.UNCODED)
    if any(_pending(c) for c in codings):
        return FinalLabel(LabelStatus.NONE, Reason.RECODE)
    if len(codings) < k:
        return FinalLabel(LabelStatus.NONE, Reason.INCOMPLETE)
    first = _codes(codings[0])
    if any(_codes(c) != first for c in codings[1:]):
        return FinalLabel(LabelStatus.NONE, Reason.DISAGREEMENT)
    return FinalLabel(LabelStatus.AGREED, "", *first)


def disagreeing_axes(codings: Iterable[Coding]) -> list[str]:
    """The axes ("failure_type", "source", ...) on which the given codings differ."""
    rows = list(codings)
    out = []
    for attr in AXES:
        if len({getattr(c, attr) for c in rows}) > 1:
            out.append(attr.removesuffix("_id"))
    return out


def final_labels(study: Study, episodes=None, *, chunk: int = 2000) -> Iterator[tuple[Episode, FinalLabel]]:
    """(episode, label) for the study's episodes, in id order, streaming in chunks.

    Each chunk costs three queries (episodes with documents, codings,
    adjudications), whatever the number of coders.
    """
    qs = episodes if episodes is not None else Episode.objects.filter(study=study)
    qs = qs.select_related("document").order_by("id")
    return _labelled(study, qs, chunk, lambda e: e.id)


def final_label_values(study: Study, episodes, fields: tuple[str, ...], *, chunk: int = 5000) -> Iterator[tuple]:
    """As `final_labels`, with each episode as a tuple of `fields` (the first must be "id"): for
    readers of every label of a large study, which need a few columns, not model instances."""
    if fields[0] != "id":
        raise ValueError('the first field must be "id"')
    return _labelled(study, episodes.order_by("id").values_list(*fields), chunk, lambda row: row[0])


def _labelled(study: Study, qs, chunk: int, id_of) -> Iterator[tuple]:
    last = 0
    while True:
        batch = list(qs.filter(id__gt=last)[:chunk])
        if not batch:
            return
        ids = [id_of(e) for e in batch]
        # The batch's ids as a range, not a list of thousands of parameters (which costs more to send
        # and parse than the rows): an index range scan of each table. Rows of episodes in the range
        # but not in the batch (another study's, interleaved) are never looked up. No join to the
        # episodes for their study: PostgreSQL planned it as a scan of all of the study's episodes.
        of_batch = {"episode_id__gte": ids[0], "episode_id__lte": ids[-1]}
        codings: dict[int, list[CodingRow]] = {}
        rows = Coding.objects.filter(**of_batch).order_by("coder_id").values_list(*CodingRow._fields)
        for row in rows:
            c = CodingRow._make(row)
            codings.setdefault(c.episode_id, []).append(c)
        adjudications = {a.episode_id: a for a in Adjudication.objects.filter(**of_batch)}
        for e, e_id in zip(batch, ids, strict=True):
            yield (
                e,
                resolve_label(
                    adjudication=adjudications.get(e_id),
                    codings=codings.get(e_id, []),
                    k=study.coders_per_episode,
                    rule=study.label_rule,
                    label_coder_id=study.label_coder_id,
                ),
            )
        if len(batch) < chunk:
            return  # the last batch: no query to find nothing more
        last = ids[-1]
