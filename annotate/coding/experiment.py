"""The exposure experiment on the database: the arm a coding page offers, the report's rows, and the one
write, `exposure_record`, which a coder's first save makes.

The arm and the page-open time travel in a signed value (django.core.signing) that
the coding form posts back, so opening a page writes nothing and the time to save
is measured on the server's clock; `exposure_record` records it on save.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

from django.core import signing
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotate.coding.exposure import ExposureReport, ExposureRow, exposure_arm, exposure_report
from annotate.coding.labels import final_labels
from annotate.models import Coding, CodingExposure, Episode, FirstChoice, Study, Suggestion, SuggestionStatus
from taxonomy.models import FailureType

SALT = "faultline.exposure"
NAF = "(not a failure)"


@dataclass(frozen=True)
class Offer:
    arm: str
    token: str

    @property
    def guarded(self) -> bool:
        """Suggestions wait for the coder's first choice in the `after` arm."""
        return self.arm == "after"


def exposure_offer(*, study: Study, coder, episode: Episode) -> Offer | None:
    """The arm this coder is in for this episode, and the signed value the save posts back (None: no experiment)."""
    if not study.exposure_experiment:
        return None
    stored = CodingExposure.objects.filter(episode=episode, coder=coder).values_list("arm", flat=True).first()
    n_done = CodingExposure.objects.filter(episode__study=study, coder=coder).count()
    arm = stored or exposure_arm(study.queue_seed, coder.pk, n_done)
    token = signing.dumps({"e": episode.pk, "u": coder.pk, "a": arm, "t": round(time.time(), 3)}, salt=SALT)
    return Offer(arm=arm, token=token)


def suggestions_wait_for_choice(study: Study, offer: Offer | None) -> bool:
    """The one rule for when suggestions wait for the coder's first choice: the study's guard, or the `after` arm."""
    return study.suggestions_after_first_choice or (offer is not None and offer.guarded)


def suggestions_guarded(study: Study, offer: Offer | None, *, episode: Episode, coder, has_own: bool) -> bool:
    """Whether the suggestions must stay hidden from this coder now: the one rule every view asks.

    They wait (suggestions_wait_for_choice) until the coder has a coding of the episode or a stored
    first choice (first_choice_record, a POST). Nothing the request says counts: a type named in the
    URL (`?chosen=TUS-03`) would let the `after` arm of the experiment see suggestions unrecorded.
    """
    if not suggestions_wait_for_choice(study, offer) or has_own:
        return False
    return not FirstChoice.objects.filter(episode=episode, coder=coder).exists()


def first_choice_record(*, episode: Episode, coder, failure_type: str) -> FirstChoice:
    """Store the coder's first choice of a type on this episode; the first one stands, later ones change nothing.

    Raises ValidationError naming `failure_type` when the code is no type of the study's codebook.
    """
    code = (failure_type or "").strip()
    chosen = FailureType.objects.filter(codebook_id=episode.study.codebook_id, code=code).first()
    if chosen is None:
        raise ValidationError({"failure_type": f"{code or '(empty)'} is not a failure type of this study's codebook."})
    choice, _ = FirstChoice.objects.get_or_create(episode=episode, coder=coder, defaults={"failure_type": chosen})
    return choice


def exposure_token_read(token: str, *, episode_id: int, coder_id: int) -> tuple[str, float] | None:
    """(arm, opened at as a Unix time) from a page's signed value, if it is genuine and for this episode and coder."""
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    if not isinstance(data, dict) or data.get("e") != episode_id or data.get("u") != coder_id:
        return None
    if data.get("a") not in ("before", "after") or not isinstance(data.get("t"), int | float):
        return None
    return data["a"], float(data["t"])


def exposure_rows(study: Study) -> list[ExposureRow]:
    """One row per recorded (episode, coder) of the experiment, with the coding and the final label."""
    type_code = dict(FailureType.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    exposures = list(CodingExposure.objects.filter(episode__study=study).order_by("episode_id", "coder_id"))
    if not exposures:
        return []
    ids = {x.episode_id for x in exposures}
    codings = {
        (c.episode_id, c.coder_id): c
        for c in Coding.objects.filter(episode_id__in=ids).select_related("from_suggestion")
    }
    finals = {}
    for episode, label in final_labels(study, Episode.objects.filter(pk__in=ids)):
        if label.usable and not label.needs_new_type:
            finals[episode.pk] = NAF if label.not_a_failure else type_code.get(label.failure_type_id)
    firsts = {
        (f.episode_id, f.coder_id): type_code.get(f.failure_type_id)
        for f in FirstChoice.objects.filter(episode_id__in=ids).only("episode_id", "coder_id", "failure_type_id")
    }
    top = {}  # the newest usable suggestion's top type per episode: what a coder saw after choosing
    for episode_id, failure_type_id, not_a_failure in (
        Suggestion.objects.filter(episode_id__in=ids, error="")
        .order_by("episode_id", "-created_at", "-pk")
        .values_list("episode_id", "failure_type_id", "not_a_failure")
    ):
        top.setdefault(episode_id, NAF if not_a_failure else type_code.get(failure_type_id))
    rows = []
    for x in exposures:
        c = codings.get((x.episode_id, x.coder_id))
        chosen = None
        if c is not None and not c.needs_new_type:
            chosen = NAF if c.not_a_failure else type_code.get(c.failure_type_id)
        accepted = None
        s = c.from_suggestion if c is not None else None
        if s is not None and s.status == SuggestionStatus.ACCEPTED:
            accepted = NAF if s.not_a_failure else type_code.get(s.failure_type_id)
        rows.append(
            ExposureRow(
                episode_id=x.episode_id,
                coder_id=x.coder_id,
                arm=x.arm,
                chosen_type=chosen,
                final_type=finals.get(x.episode_id),
                seconds_to_save=x.seconds_to_save,
                accepted_type=accepted,
                first_choice_type=firsts.get((x.episode_id, x.coder_id)),
                suggested_type=top.get(x.episode_id),
            )
        )
    return rows


def study_exposure_report(study: Study) -> ExposureReport:
    return exposure_report(exposure_rows(study), seed=study.queue_seed)


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
