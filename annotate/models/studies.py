"""Studies and who works on them: memberships, invitations and API tokens."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from taxonomy.models import Codebook


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    CODER = "coder", "Coder"
    VIEWER = "viewer", "Viewer"


class QueueOrder(models.TextChoices):
    RANDOM = "random", "Random (stored seed)"
    IMPORT = "import", "Import order"
    UNCERTAIN = "uncertain", "Least certain suggestion first (active learning)"


class LabelRule(models.TextChoices):
    CONSENSUS = "consensus", "Adjudicated, else agreed by all coders"
    SINGLE_CODER = "single_coder", "One coder's labels"


class Study(models.Model):
    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    codebook = models.ForeignKey(Codebook, on_delete=models.PROTECT, related_name="studies")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="studies")
    created_at = models.DateTimeField(auto_now_add=True)

    # Coding settings (owner).
    coders_per_episode = models.PositiveSmallIntegerField(default=2)
    blind = models.BooleanField(default=True)
    queue_order = models.CharField(max_length=10, choices=QueueOrder.choices, default=QueueOrder.RANDOM)
    queue_seed = models.BigIntegerField(default=0)
    queue_splits = models.JSONField(default=list, blank=True)  # empty means ["primary"]
    suggestions_after_first_choice = models.BooleanField(default=False)
    # Imported documents get machine suggestions queued, as incidents do, unless the owner turns it off.
    suggest_on_import = models.BooleanField(default=True)
    # Randomised exposure: each (episode, coder) is assigned from the stored seed to see
    # suggestions before choosing a type, or only after a first choice (annotate.coding.exposure).
    exposure_experiment = models.BooleanField(default=False)
    # Below this top-1 confidence the coding page shows "no confident suggestion" (folded candidates).
    suggestion_min_confidence = models.FloatField(
        default=0.3, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )

    # Set when a codebook migration queued codings again (their type split or retired), so "next" looks
    # for a coder's queued codings only in such a study; cleared once none is left.
    recoding = models.BooleanField(default=False)

    # Which labels analysis uses.
    label_rule = models.CharField(max_length=20, choices=LabelRule.choices, default=LabelRule.CONSENSUS)
    label_coder = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    # Incidents posted through the API land only in a study that accepts them (an incident study, or one
    # whose owner opted in): they become episodes of its coding queue, so a research study refuses them.
    accepts_incidents = models.BooleanField(default=False)

    # Goes up by one in the same transaction as every write that can change the study's final labels or
    # what the analysis counts (codings, adjudications, splits, episodes, imports, the label rule): a stored
    # analysis result computed at an older version is stale (annotate.analysis.results).
    data_version = models.PositiveBigIntegerField(default=0)

    # Incident webhook (signed with HMAC-SHA256 using webhook_secret).
    webhook_url = models.URLField(blank=True)
    webhook_secret = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.slug

    @property
    def splits_in_queue(self) -> list[str]:
        return self.queue_splits or ["primary"]


class Membership(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.CODER)
    # Owners always adjudicate; a coder can be given the adjudicator duty too.
    adjudicator = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="membership_study_user_unique")]

    def __str__(self) -> str:
        return f"{self.user} {self.role} in {self.study}"

    @property
    def can_write(self) -> bool:
        return self.role in (Role.OWNER, Role.CODER)

    @property
    def can_adjudicate(self) -> bool:
        return self.role == Role.OWNER or (self.role == Role.CODER and self.adjudicator)


class Invitation(models.Model):
    """A single-use link that lets a person without an account (or not yet a member) join a study.

    Only a sha256 of the link's token is stored, as for API tokens: the owner copies the link once.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(blank=True)
    username_hint = models.CharField(max_length=150, blank=True)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.CODER)
    adjudicator = models.BooleanField(default=False)
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invitation to {self.study} for {self.email or self.username_hint or 'anyone'}"

    @property
    def invitee(self) -> str:
        return self.email or self.username_hint or "anyone with the link"


class TokenScope(models.TextChoices):
    READ = "read", "Read only"
    WRITE = "write", "Read and write"


class ApiToken(models.Model):
    """An API token. Only a sha256 of the key is stored; the key is shown once.

    A `read` token may only read (safe methods); a `write` token does whatever its user's roles
    allow. Past `expires_at` (if set) it no longer authenticates.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)
    key_hash = models.CharField(max_length=64, unique=True)
    # Tokens made before scopes existed could write: they keep that.
    scope = models.CharField(max_length=5, choices=TokenScope.choices, default=TokenScope.WRITE)
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def expired(self, now) -> bool:
        return self.expires_at is not None and self.expires_at <= now
