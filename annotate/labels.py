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

from .models import Adjudication, Coding, Episode, LabelRule, Study

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


def _codes(row) -> tuple:
    return tuple(getattr(row, a) for a in AXES)


def resolve_label(
    *,
    adjudication: Adjudication | None,
    codings: list[Coding],
    k: int,
    rule: str = LabelRule.CONSENSUS,
    label_coder_id: int | None = None,
) -> FinalLabel:
    """The final label of one episode under the study's label rule."""
    if rule == LabelRule.SINGLE_CODER:
        mine = [c for c in codings if c.coder_id == label_coder_id]
        if not mine:
            return FinalLabel(LabelStatus.NONE, Reason.NOT_CODED_BY_CODER)
        return FinalLabel(LabelStatus.SINGLE_CODER, "", *_codes(mine[0]))
    if adjudication is not None:
        return FinalLabel(LabelStatus.ADJUDICATED, "", *_codes(adjudication))
    if not codings:
        return FinalLabel(LabelStatus.NONE, Reason.UNCODED)
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
    last = 0
    while True:
        batch = list(qs.filter(id__gt=last)[:chunk])
        if not batch:
            return
        ids = [e.id for e in batch]
        codings: dict[int, list[Coding]] = {}
        for c in Coding.objects.filter(episode_id__in=ids).order_by("coder_id"):
            codings.setdefault(c.episode_id, []).append(c)
        adjudications = {a.episode_id: a for a in Adjudication.objects.filter(episode_id__in=ids)}
        for e in batch:
            yield (
                e,
                resolve_label(
                    adjudication=adjudications.get(e.id),
                    codings=codings.get(e.id, []),
                    k=study.coders_per_episode,
                    rule=study.label_rule,
                    label_coder_id=study.label_coder_id,
                ),
            )
        last = ids[-1]
