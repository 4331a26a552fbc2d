"""Writes for the exposure experiment: a coder's first save records their arm and time to save."""

from __future__ import annotations

import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotate.exposure_selectors import exposure_token_read
from annotate.models import CodingExposure, Episode, Study

# A page open longer than this is not a measurement of coding time (a tab left overnight).
MAX_OPEN_S = 4 * 3600


def exposure_record(*, study: Study, episode: Episode, coder, token: str) -> CodingExposure | None:
    """Record the arm and times of a coder's first save of an episode, once; None if there is nothing to record.

    The arm comes from the page's signed value, so it is the arm the coder actually
    saw. A missing or forged value records nothing (the pair is left out of the
    experiment rather than guessed); an open time in the future or too long ago
    keeps the arm but not the time.
    """
    if not study.exposure_experiment or not token:
        return None
    read = exposure_token_read(token, episode_id=episode.pk, coder_id=coder.pk)
    if read is None:
        return None
    arm, opened = read
    now = timezone.now()
    opened_at = datetime.datetime.fromtimestamp(opened, tz=datetime.UTC)
    if not 0 <= (now - opened_at).total_seconds() <= MAX_OPEN_S:
        opened_at = None
    try:
        with transaction.atomic():
            return CodingExposure.objects.create(
                episode=episode, coder=coder, arm=arm, opened_at=opened_at, saved_at=now
            )
    except IntegrityError:
        return None  # not the first save: the first one is the measurement
