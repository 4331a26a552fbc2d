from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from simple_history.models import HistoricalRecords

from taxonomy.models import AxisValue, Codebook, FailureType


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
    # suggestions before choosing a type, or only after a first choice (annotate.exposure).
    exposure_experiment = models.BooleanField(default=False)
    # Below this top-1 confidence the coding page shows "no confident suggestion" (folded candidates).
    suggestion_min_confidence = models.FloatField(
        default=0.3, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )

    # Which labels analysis uses.
    label_rule = models.CharField(max_length=20, choices=LabelRule.choices, default=LabelRule.CONSENSUS)
    label_coder = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

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


class DocumentKind(models.TextChoices):
    GITHUB_ISSUE = "github_issue", "GitHub issue"
    LITERATURE = "literature", "Literature record"
    INCIDENT = "incident", "Incident"
    TRACE = "trace", "Agent trace"


class TriageStatus(models.TextChoices):
    NEW = "new", "New"
    TRIAGED = "triaged", "Triaged"
    RESOLVED = "resolved", "Resolved"


class Document(models.Model):
    # No index of its own: every index below starts with study_id, and each one more costs every import.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="documents", db_index=False)
    kind = models.CharField(max_length=20, choices=DocumentKind.choices)
    external_id = models.CharField(max_length=500)
    url = models.URLField(max_length=1000, blank=True)
    # The resampling unit: repository owner/name, citation key or DOI, or service.
    cluster = models.CharField(max_length=300)
    title = models.CharField(max_length=1000)
    body = models.TextField(blank=True)
    meta = models.JSONField(default=dict, blank=True)
    raw = models.JSONField(default=dict, blank=True)
    # Labels (GitHub labels, incident tags) as ",a,b,", so one indexed-friendly
    # `icontains=",a,"` filters by label on every database.
    labels = models.CharField(max_length=2000, blank=True)
    # sha256 of the normalised imported fields, so a re-import can tell
    # "unchanged" from "updated" without comparing bodies row by row.
    content_hash = models.CharField(max_length=64, blank=True)
    imported_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Incident triage (kind=incident only).
    triage_status = models.CharField(max_length=10, choices=TriageStatus.choices, blank=True)
    # Indexed only where set (document_assignee_idx): imports write NULL, which costs no index entry.
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="assigned_incidents",
        db_index=False,
    )
    severity = models.CharField(max_length=20, blank=True)
    occurred_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "kind", "external_id"], name="document_study_kind_extid_unique")
        ]
        indexes = [
            models.Index(fields=["study", "kind", "cluster"]),
            models.Index(fields=["study", "cluster"]),
            models.Index(fields=["study", "triage_status"]),
            # Keyset pages of a study's documents, and a search's newest matches, without walking other studies.
            models.Index(fields=["study", "id"], name="document_study_id_idx"),
            # Deleting a user sets their incidents' assignee to NULL; the few assigned rows are all indexed.
            models.Index(fields=["assignee"], condition=Q(assignee__isnull=False), name="document_assignee_idx"),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind}:{self.external_id}"


class Split(models.TextChoices):
    PRIMARY = "primary", "Primary"
    HOLDOUT = "holdout", "Hold-out"
    # Left out of analysis and hold-out coverage by an owner, e.g. a whole-document episode
    # that was split into smaller ones after it had been coded. Its codings are kept.
    EXCLUDED = "excluded", "Excluded"


class EpisodeStatus(models.TextChoices):
    OPEN = "open", "Open"  # fewer than k codings
    CODED = "coded", "Coded"  # k codings
    ADJUDICATED = "adjudicated", "Adjudicated"


class Episode(models.Model):
    # Neither key has an index of its own: episode_document_order_unique starts with document_id,
    # and every index below starts with study_id; each one more costs every import.
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="episodes", db_index=False)
    # Denormalised from document.study so the queue and analysis filter one table.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="episodes", db_index=False)
    excerpt = models.TextField(blank=True)  # empty means the whole document body
    start = models.PositiveIntegerField(null=True, blank=True)
    end = models.PositiveIntegerField(null=True, blank=True)
    order = models.PositiveIntegerField(default=0)
    split = models.CharField(max_length=10, choices=Split.choices, default=Split.PRIMARY)
    status = models.CharField(max_length=12, choices=EpisodeStatus.choices, default=EpisodeStatus.OPEN)
    # Maintained by the coding service so the queue never counts rows per request.
    n_codings = models.PositiveIntegerField(default=0)
    # Position in the random queue order, derived from the study's stored seed.
    queue_key = models.BigIntegerField(default=0)
    # A published attribution that came with the imported file (Who&When's mistake agent and
    # step, MAST's annotators' failure modes). Never a coding; hidden from blind coders until
    # they have saved their own (annotate.coding_selectors.reference_visible).
    reference = models.JSONField(default=dict, blank=True)
    # The axes the codings differ on, one bit each (services/disagreement.py); 0 when they agree.
    # Maintained by the coding and adjudication services in their transaction.
    disagreement = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "order"], name="episode_document_order_unique")]
        indexes = [
            models.Index(fields=["study", "split", "n_codings", "queue_key"]),
            models.Index(fields=["study", "split", "n_codings", "id"]),
            models.Index(fields=["study", "status"]),
            # The adjudication list: disagreements are few, so the index holds only them.
            models.Index(
                fields=["study", "status", "id"], condition=Q(disagreement__gt=0), name="episode_disagreement_idx"
            ),
            # The documents list's "coded" filter: the study's coded documents, without reading its uncoded ones.
            models.Index(fields=["study", "document"], condition=Q(n_codings__gt=0), name="episode_coded_idx"),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"episode {self.pk} of {self.document_id}"


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
                    & (Q(failure_type__isnull=False) | Q(needs_new_type=True))
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
                    & (Q(failure_type__isnull=False) | Q(needs_new_type=True))
                ),
                name="adjudication_complete_unless_not_a_failure",
            ),
        ]

    def __str__(self) -> str:
        return f"adjudication of episode {self.episode_id}"


class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCESS = "success", "Succeeded"
    FAILED = "failed", "Failed"


class Job(models.Model):
    """Long work run by Celery; pages poll its progress."""

    study = models.ForeignKey(
        Study, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs", db_index=False
    )
    kind = models.CharField(max_length=30)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.PENDING)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    celery_task_id = models.CharField(max_length=100, blank=True)
    # Claims so far: each worker that takes the job counts one (annotate.jobs).
    attempts = models.PositiveIntegerField(default=0)
    # The lease: which worker runs the job, and until when unless its heartbeat renews it.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The id of the one run_job message sent for the job while it is pending ("" once a worker claimed it).
    message_id = models.CharField(max_length=64, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    # How far the handler got, written in the same transaction as the work it describes.
    checkpoint = models.JSONField(default=dict, blank=True)
    # Why the job went back to pending (e.g. "worker lost"); shown while it is retried.
    retry_reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["study", "kind", "status"]),
            models.Index(fields=["status", "lease_expires_at"], name="job_status_lease"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.status})"

    @property
    def percent(self) -> int:
        return int(100 * self.done / self.total) if self.total else (100 if self.status == JobStatus.SUCCESS else 0)

    @property
    def finished(self) -> bool:
        return self.status in (JobStatus.SUCCESS, JobStatus.FAILED)

    @property
    def stalled(self) -> bool:
        """Running, but its worker stopped renewing the lease: beat will re-queue it."""
        return self.status == JobStatus.RUNNING and (
            self.lease_expires_at is None or self.lease_expires_at < timezone.now()
        )

    @property
    def retried(self) -> bool:
        return self.attempts > 1 or (self.status == JobStatus.PENDING and bool(self.retry_reason))

    @property
    def max_attempts(self) -> int:
        return settings.FAULTLINE_JOB_MAX_ATTEMPTS

    @property
    def state(self) -> str:
        """What the Jobs list and the job page call it: queued, running, stalled, retrying or the final status."""
        if self.status == JobStatus.PENDING:
            return "retrying" if self.retry_reason else "queued"
        if self.status == JobStatus.RUNNING:
            return "stalled" if self.stalled else "running"
        return self.status


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


class Artifact(models.Model):
    """Evidence attached to an incident: what actually changed, beside what a trace says was asked."""

    class Kind(models.TextChoices):
        DIFF = "diff", "Diff"
        TEST_RESULT = "test_result", "Test result"
        LOG = "log", "Log"
        DB_CHANGE = "db_change", "Database change"
        SCREENSHOT = "screenshot", "Screenshot"
        TRACE = "trace", "Trace"

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="artifacts")
    # The trace step that produced it: linking it is what makes a tool call's effect evidenced.
    step = models.ForeignKey("TraceStep", null=True, blank=True, on_delete=models.SET_NULL, related_name="artifacts")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=300)
    content = models.TextField(blank=True)
    url = models.URLField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.name}"


class TriageEvent(models.Model):
    """Who moved an incident, from what to what, and when."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="triage_events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    from_status = models.CharField(max_length=10, blank=True)
    to_status = models.CharField(max_length=10)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.from_status or '-'} → {self.to_status}"


class WebhookDelivery(models.Model):
    """One delivery attempt of a study's outgoing webhook."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="webhook_deliveries")
    document = models.ForeignKey(Document, null=True, on_delete=models.SET_NULL, related_name="webhook_deliveries")
    event = models.CharField(max_length=50)
    event_id = models.CharField(max_length=64)
    url = models.URLField(max_length=1000)
    payload = models.JSONField()
    attempt = models.PositiveIntegerField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    delivered = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.event} attempt {self.attempt}"


class ApiToken(models.Model):
    """An API token. Only a sha256 of the key is stored; the key is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class ExposureArm(models.TextChoices):
    BEFORE = "before", "Suggestions shown before the first choice"
    AFTER = "after", "Suggestions shown only after a first choice"


class CodingExposure(models.Model):
    """The exposure experiment's record of one coder's first save of an episode (annotate.exposure).

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


class StepKind(models.TextChoices):
    MESSAGE = "message", "Message"
    LLM_CALL = "llm_call", "LLM call"
    TOOL_CALL = "tool_call", "Tool call"
    TOOL_RESULT = "tool_result", "Tool result"
    HANDOFF = "handoff", "Handoff"
    OTHER = "other", "Other"


class StepStatus(models.TextChoices):
    UNSET = "", "Unset"
    OK = "ok", "OK"
    ERROR = "error", "Error"


class TraceStep(models.Model):
    """One step of an agent trace (a span, a message), in trace order.

    Steps are addressed by `index` (0-based, the order of the source file), which is what
    codings, references and suggestions name as the decisive step. The tree is kept as
    `parent_index`/`depth`, so a window of steps renders without walking the table.
    """

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="steps", db_index=False)
    index = models.PositiveIntegerField()
    parent_index = models.PositiveIntegerField(null=True, blank=True)
    depth = models.PositiveSmallIntegerField(default=0)
    span_id = models.CharField(max_length=100, blank=True)
    agent = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=12, choices=StepKind.choices, default=StepKind.OTHER)
    name = models.CharField(max_length=500, blank=True)
    input = models.TextField(blank=True)
    output = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=StepStatus.choices, blank=True)
    error = models.TextField(blank=True)
    # A tool call: the index of its result step, if the trace recorded one as a separate step,
    # and whether it ran at all (a result, or a finished span). A tool result: its call's index.
    paired_index = models.PositiveIntegerField(null=True, blank=True)
    ran = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "index"], name="tracestep_document_index_unique")]
        indexes = [models.Index(fields=["document", "span_id"])]
        ordering = ["document_id", "index"]

    def __str__(self) -> str:
        return f"step {self.index} ({self.kind}) of {self.document_id}"
