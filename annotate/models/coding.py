"""Human coding: leases on episodes, codings (with history), adjudications, and which arm a coder was shown."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from annotate.models.documents import Episode
from annotate.models.suggestions import Suggestion
from taxonomy.models import AxisValue, FailureType


class Lease(models.Model):
    """A coder's claim on an episode while they code it; expires after FAULTLINE_LEASE_MINUTES."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="leases", db_index=False)
    coder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="leases")
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "coder"], name="lease_episode_coder_unique")]
        indexes = [models.Index(fields=["episode", "expires_at"])]

    def __str__(self) -> str:
        return f"lease on {self.episode_id} by {self.coder_id} until {self.expires_at:%H:%M}"


class Confidence(models.TextChoices):
    LOW = "low", "Low"
    MEDIUM = "medium", "Medium"
    HIGH = "high", "High"


class Coding(models.Model):
    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="codings", db_index=False)
    coder = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="codings", db_index=False
    )
    failure_type = models.ForeignKey(FailureType, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    source = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    stage = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    capability = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    not_a_failure = models.BooleanField(default=False)
    not_a_failure_reason = models.TextField(blank=True)
    # The episode is a failure that no existing type fits (hold-out coverage).
    needs_new_type = models.BooleanField(default=False)
    confidence = models.CharField(max_length=10, choices=Confidence.choices, default=Confidence.MEDIUM)
    memo = models.TextField(blank=True)
    evidence = models.TextField(blank=True)
    evidence_start = models.PositiveIntegerField(null=True, blank=True)
    evidence_end = models.PositiveIntegerField(null=True, blank=True)
    from_suggestion = models.ForeignKey(
        Suggestion, null=True, blank=True, on_delete=models.SET_NULL, related_name="codings"
    )
    # Who and when (trace episodes only): the step that decided the failure and the agent to blame.
    decisive_step = models.PositiveIntegerField(null=True, blank=True)
    responsible_agent = models.CharField(max_length=200, blank=True)
    # After a codebook migration (annotate.coding.codebook_moves): the type of the earlier version this
    # coding had when that type was split or retired, so the coder chooses again; its failure_type is
    # empty meanwhile and analysis leaves it out. And the type the coder first chose, before any
    # migration, which exports carry next to the migrated one (blank: never migrated).
    recode_from = models.ForeignKey(FailureType, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    failure_type_original = models.CharField(max_length=20, blank=True)

    # Optimistic locking: a save must name the version it was built on.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["episode", "coder"], name="coding_episode_coder_unique"),
            models.CheckConstraint(
                condition=Q(not_a_failure=True)
                | (
                    Q(source__isnull=False, stage__isnull=False, capability__isnull=False)
                    & (Q(failure_type__isnull=False) | Q(needs_new_type=True) | Q(recode_from__isnull=False))
                ),
                name="coding_complete_unless_not_a_failure",
            ),
        ]
        indexes = [models.Index(fields=["coder", "updated_at"])]

    def __str__(self) -> str:
        return f"coding {self.pk} by {self.coder_id}"


class Adjudication(models.Model):
    """The consensus label that analysis uses once coders disagree."""

    episode = models.OneToOneField(Episode, on_delete=models.CASCADE, related_name="adjudication")
    adjudicator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    failure_type = models.ForeignKey(FailureType, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    source = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    stage = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    capability = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    not_a_failure = models.BooleanField(default=False)
    needs_new_type = models.BooleanField(default=False)
    # Who and when (trace episodes only): the step that decided the failure and the agent to blame.
    decisive_step = models.PositiveIntegerField(null=True, blank=True)
    responsible_agent = models.CharField(max_length=200, blank=True)
    # After a codebook migration (annotate.coding.codebook_moves): the type of the earlier version this
    # coding had when that type was split or retired, so the adjudicator decides again; its failure_type is
    # empty meanwhile and analysis leaves it out. And the type first decided, before any
    # migration, which exports carry next to the migrated one (blank: never migrated).
    recode_from = models.ForeignKey(FailureType, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    failure_type_original = models.CharField(max_length=20, blank=True)
    rationale = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(not_a_failure=True)
                | (
                    Q(source__isnull=False, stage__isnull=False, capability__isnull=False)
                    & (Q(failure_type__isnull=False) | Q(needs_new_type=True) | Q(recode_from__isnull=False))
                ),
                name="adjudication_complete_unless_not_a_failure",
            ),
        ]

    def __str__(self) -> str:
        return f"adjudication of episode {self.episode_id}"


class ExposureArm(models.TextChoices):
    BEFORE = "before", "Suggestions shown before the first choice"
    AFTER = "after", "Suggestions shown only after a first choice"


class CodingExposure(models.Model):
    """The exposure experiment's record of one coder's first save of an episode (annotate.coding.exposure).

    Written once, with that save: the arm the coder was in, when the coding page was
    opened (from a signed value the page carried, so no GET writes anything), and when
    the first save happened. Later edits of the coding do not change it.
    """

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="exposures", db_index=False)
    coder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    arm = models.CharField(max_length=10, choices=ExposureArm.choices)
    opened_at = models.DateTimeField(null=True, blank=True)
    saved_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "coder"], name="exposure_episode_coder_unique")]

    def __str__(self) -> str:
        return f"exposure {self.arm} of {self.episode_id} for {self.coder_id}"

    @property
    def seconds_to_save(self) -> float | None:
        return (self.saved_at - self.opened_at).total_seconds() if self.opened_at else None


class FirstChoice(models.Model):
    """A coder's first choice of a failure type on an episode whose suggestions wait for it
    (the study's anchoring guard, or the exposure experiment's `after` arm).

    Written by a POST when the coder first picks a type, before any suggestion is shown, and never
    changed after: the suggestions are shown because of it, so it is also the record of what the
    coder chose unaided. Without it the guard would have to trust a type named in the URL.
    """

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="first_choices", db_index=False)
    coder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    failure_type = models.ForeignKey(FailureType, on_delete=models.PROTECT, related_name="+")
    chosen_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["episode", "coder"], name="first_choice_episode_coder_unique")]

    def __str__(self) -> str:
        return f"first choice of {self.coder_id} on {self.episode_id}"
