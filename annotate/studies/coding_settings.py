"""Writes for a study's coding settings (overlap, blinding, queue order and splits)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from annotate.models import Episode, EpisodeStatus, QueueOrder, Split, Study
from annotate.studies.services import study_data_changed

MAX_CODERS_PER_EPISODE = 20


@transaction.atomic
def study_coding_settings_update(
    *,
    study: Study,
    coders_per_episode: int,
    blind: bool,
    queue_order: str,
    queue_splits: list[str],
    suggestions_after_first_choice: bool,
    suggest_on_import: bool = True,
    exposure_experiment: bool | None = None,
    suggestion_min_confidence: float | None = None,
) -> Study:
    """Change how a study is coded. A new k re-derives every episode's open/coded status in two updates.

    Existing codings are kept when k goes down: an episode may then hold more than k codings.
    """
    errors: dict[str, str] = {}
    if not 1 <= coders_per_episode <= MAX_CODERS_PER_EPISODE:
        errors["coders_per_episode"] = f"Coders per episode must be between 1 and {MAX_CODERS_PER_EPISODE}."
    if queue_order not in QueueOrder.values:
        errors["queue_order"] = f"Queue order must be one of {', '.join(QueueOrder.values)}."
    unknown = sorted(set(queue_splits) - set(Split.values))
    if unknown:
        errors["queue_splits"] = f"Unknown split(s): {', '.join(unknown)}."
    elif not queue_splits:
        errors["queue_splits"] = "Choose at least one split for the queue."
    if suggestion_min_confidence is not None and not 0.0 <= suggestion_min_confidence <= 1.0:
        errors["suggestion_min_confidence"] = "The confidence threshold must be between 0 and 1."
    if errors:
        raise ValidationError(errors)
    old_k = study.coders_per_episode
    study.coders_per_episode = coders_per_episode
    study.blind = blind
    study.queue_order = queue_order
    study.queue_splits = [s for s in Split.values if s in queue_splits]
    study.suggestions_after_first_choice = suggestions_after_first_choice
    study.suggest_on_import = suggest_on_import
    fields = [
        "coders_per_episode", "blind", "queue_order", "queue_splits", "suggestions_after_first_choice",
        "suggest_on_import",
    ]  # fmt: skip
    if exposure_experiment is not None:
        study.exposure_experiment = exposure_experiment
        fields.append("exposure_experiment")
    if suggestion_min_confidence is not None:
        study.suggestion_min_confidence = suggestion_min_confidence
        fields.append("suggestion_min_confidence")
    study.save(update_fields=fields)
    if old_k != coders_per_episode:
        episodes = Episode.objects.filter(study=study).exclude(status=EpisodeStatus.ADJUDICATED)
        episodes.filter(n_codings__gte=coders_per_episode).update(status=EpisodeStatus.CODED)
        episodes.filter(n_codings__lt=coders_per_episode).update(status=EpisodeStatus.OPEN)
        # Consensus needs k agreeing coders: a new k can change final labels.
        study_data_changed(study_id=study.pk)
    return study
