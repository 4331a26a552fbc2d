"""Machine suggestions, kept apart from human codings, the local models that make them, and their audits."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotate.models.documents import Episode
from annotate.models.jobs import Job
from annotate.models.studies import Study
from taxonomy.models import AxisValue, FailureType


class SuggestionBackend(models.TextChoices):
    LOCAL = "local", "Local (scikit-learn)"
    OPENAI = "openai", "OpenAI-compatible LLM"


class SuggestionStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"
    EDITED = "edited", "Edited"
    FAILED = "failed", "Failed"


class Suggestion(models.Model):
    """Machine output. Never a Coding; accepting one creates a Coding that points back."""

    episode = models.ForeignKey(Episode, on_delete=models.CASCADE, related_name="suggestions", db_index=False)
    backend = models.CharField(max_length=10, choices=SuggestionBackend.choices)
    model = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=64)
    failure_type = models.ForeignKey(FailureType, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    source = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    stage = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    capability = models.ForeignKey(AxisValue, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    not_a_failure = models.BooleanField(default=False)
    confidence = models.FloatField(null=True, blank=True)
    rationale = models.TextField(blank=True)
    evidence = models.TextField(blank=True)
    # The answer quoted text that is not in the episode: dropped, and flagged.
    evidence_flagged = models.BooleanField(default=False)
    # Set when the suggester declined (e.g. a language it does not read): no codes, not an error.
    abstain_reason = models.CharField(max_length=300, blank=True)
    # The text addresses a model ("answer TUS-06 at 1.0"): confidences were capped, and it is never a default Accept.
    instructions_flagged = models.BooleanField(default=False)
    # Not in English, read through the local suggester's lexicon: confidences capped, never a default Accept.
    language_capped = models.BooleanField(default=False)
    # All validated candidates, best first (up to 3), as codes.
    candidates = models.JSONField(default=list, blank=True)
    # Step-level attribution for traces: the step index and the agent the suggester blames.
    decisive_step = models.PositiveIntegerField(null=True, blank=True)
    responsible_agent = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=10, choices=SuggestionStatus.choices, default=SuggestionStatus.PENDING)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    # sha256 of (model, prompt_version, episode text): the same request is never sent twice,
    # and a retried batch never writes a second suggestion for the same episode.
    cache_key = models.CharField(max_length=64)
    error = models.TextField(blank=True)
    job = models.ForeignKey("Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="suggestions")
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["episode", "cache_key"], name="suggestion_episode_cachekey_unique"),
            models.CheckConstraint(
                condition=Q(error="") | Q(failure_type__isnull=True), name="suggestion_error_has_no_codes"
            ),
        ]
        indexes = [models.Index(fields=["cache_key"])]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"suggestion {self.pk} ({self.backend})"


class SuggestionRejection(models.Model):
    """One coder's rejection of a suggestion: their own reaction, like their coding, never the study's.

    Another coder still sees the suggestion as it came, with its Reject button; whether anyone may
    see who rejected it is the blinding rule's. The row is the audit: who rejected, and when.
    """

    suggestion = models.ForeignKey(Suggestion, on_delete=models.CASCADE, related_name="rejections", db_index=False)
    coder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["suggestion", "coder"], name="suggestion_rejection_unique"),
        ]
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"suggestion {self.suggestion_id} rejected by {self.coder_id}"


class LocalModel(models.Model):
    """A trained local suggester for a study, stored with its training-set size."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="local_models")
    blob = models.BinaryField()
    n_train = models.PositiveIntegerField()
    trained_at = models.DateTimeField(auto_now_add=True)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-trained_at"]

    def __str__(self) -> str:
        return f"local model for {self.study_id} ({self.n_train} labels)"


class SuggesterAudit(models.Model):
    """A recorded result of `audit_suggester` (the audit itself writes nothing; recording is this one row)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="suggester_audits", db_index=False)
    backend = models.CharField(max_length=10, choices=SuggestionBackend.choices)
    model = models.CharField(max_length=200)
    n_labels = models.PositiveIntegerField()
    # True passed, False failed, None not enough labels for the cross-validated checks.
    passed = models.BooleanField(null=True)
    result = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["study", "backend", "created_at"])]

    def __str__(self) -> str:
        return f"audit of {self.backend} for {self.study_id}"
