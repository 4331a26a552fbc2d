"""Writes for adjudication: the final label of an episode whose coders disagree."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from annotate.coding.disagreement import disagreement_mask
from annotate.coding.services import CodingValues, attribution_validate, coding_values_validate
from annotate.models import Adjudication, Coding, Episode, EpisodeStatus
from annotate.studies.services import study_data_changed
from taxonomy.models import AxisValue, FailureType


@dataclass(frozen=True)
class AdjudicationValues:
    failure_type: FailureType | None = None
    source: AxisValue | None = None
    stage: AxisValue | None = None
    capability: AxisValue | None = None
    not_a_failure: bool = False
    needs_new_type: bool = False
    rationale: str = ""
    decisive_step: int | None = None
    responsible_agent: str = ""


@transaction.atomic
def adjudication_save(*, episode: Episode, adjudicator, values: AdjudicationValues) -> Adjudication:
    """Record (or revise) the final codes of `episode` and mark it adjudicated.

    The codes are checked against the study's codebook exactly as a coding is;
    a rationale is required. History (django-simple-history) keeps every revision
    with the adjudicator. Raises ValidationError with field errors and writes nothing.
    """
    errors: dict[str, str] = {}
    if not values.rationale.strip():
        errors["rationale"] = "Give the rationale for the final codes."
    try:
        coding_values_validate(
            values=CodingValues(
                failure_type=values.failure_type,
                source=values.source,
                stage=values.stage,
                capability=values.capability,
                not_a_failure=values.not_a_failure,
                not_a_failure_reason=values.rationale or "-",
                needs_new_type=values.needs_new_type,
            ),
            codebook_id=episode.study.codebook_id,
        )
    except ValidationError as exc:
        errors.update({k: v[0] for k, v in exc.message_dict.items() if k != "not_a_failure_reason"})
    try:
        attribution_validate(
            decisive_step=values.decisive_step, responsible_agent=values.responsible_agent, document=episode.document
        )
    except ValidationError as exc:
        errors.update({k: v[0] for k, v in exc.message_dict.items()})
    locked = Episode.objects.select_for_update().get(pk=episode.pk)
    if not Coding.objects.filter(episode=locked).exists():
        errors["__all__"] = "This episode has no codings to adjudicate."
    if errors:
        raise ValidationError(errors)
    codes = {
        "failure_type": values.failure_type,
        "source": values.source,
        "stage": values.stage,
        "capability": values.capability,
    }
    if values.not_a_failure:
        codes = dict.fromkeys(codes)
    adjudication = Adjudication.objects.filter(episode=locked).first() or Adjudication(episode=locked)
    adjudication.adjudicator = adjudicator
    for name, value in codes.items():
        setattr(adjudication, name, value)
    adjudication.not_a_failure = values.not_a_failure
    adjudication.needs_new_type = values.needs_new_type and not values.not_a_failure
    adjudication.rationale = values.rationale.strip()
    adjudication.recode_from = None  # decided again after a codebook migration split or retired its type
    adjudication.decisive_step = None if values.not_a_failure else values.decisive_step
    adjudication.responsible_agent = "" if values.not_a_failure else values.responsible_agent.strip()
    adjudication._history_user = adjudicator
    adjudication.save()
    # The stored disagreement is refreshed with the status, under the same lock, so the
    # adjudication list's two states (to do, adjudicated) always read a current one.
    Episode.objects.filter(pk=locked.pk).update(status=EpisodeStatus.ADJUDICATED, disagreement=disagreement_mask())
    episode.status = EpisodeStatus.ADJUDICATED
    study_data_changed(study_id=locked.study_id)
    return adjudication


@transaction.atomic
def adjudication_delete(*, adjudication: Adjudication, user) -> None:
    """Withdraw an adjudication; the episode goes back to coded or open. History keeps it."""
    episode = Episode.objects.select_for_update().select_related("study").get(pk=adjudication.episode_id)
    adjudication._history_user = user
    adjudication.delete()
    k = episode.study.coders_per_episode
    status = EpisodeStatus.CODED if episode.n_codings >= k else EpisodeStatus.OPEN
    Episode.objects.filter(pk=episode.pk).update(status=status, disagreement=disagreement_mask())
    study_data_changed(study_id=episode.study_id)
