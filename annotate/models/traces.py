"""The steps of an agent trace and the artifacts that steps and incidents carry."""

from __future__ import annotations

from django.db import models

from annotate.models.documents import Document


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
    # What a span says beyond the columns above: model, token counts, cost, finish reason, HTTP status
    # and the span's remaining attributes (cut to a few KB, see annotate.traces._genai.step_detail).
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "index"], name="tracestep_document_index_unique")]
        indexes = [models.Index(fields=["document", "span_id"])]
        ordering = ["document_id", "index"]

    def __str__(self) -> str:
        return f"step {self.index} ({self.kind}) of {self.document_id}"
