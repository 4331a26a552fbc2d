from __future__ import annotations

from django.db import models


class Axis(models.TextChoices):
    SOURCE = "source", "Responsibility source"
    STAGE = "stage", "Workflow stage"
    CAPABILITY = "capability", "Agent capability"


class Codebook(models.Model):
    name = models.CharField(max_length=100)
    version = models.CharField(max_length=20)
    description = models.TextField(blank=True)
    # Set once the codebook is published; from then on it is immutable and a
    # revision is a new version copied from it.
    published_at = models.DateTimeField(null=True, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions")
    # Uploaded when a study started: that study's own. It is listed and shown only to the members of the
    # studies that use it, offered to no new study, and named by no NAME@VERSION (which stays free for
    # a shared codebook): two studies may each upload their own "acme@1.0".
    private = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["name", "version"], condition=models.Q(private=False), name="codebook_name_version_unique"
            )
        ]
        ordering = ["name", "version"]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def is_published(self) -> bool:
        return self.published_at is not None


class AxisValue(models.Model):
    codebook = models.ForeignKey(Codebook, on_delete=models.CASCADE, related_name="axis_values", db_index=False)
    axis = models.CharField(max_length=20, choices=Axis.choices)
    code = models.CharField(max_length=50)
    name = models.CharField(max_length=200)
    definition = models.TextField()
    order = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["codebook", "axis", "code"], name="axisvalue_codebook_axis_code_unique")
        ]
        ordering = ["codebook", "axis", "order"]

    def __str__(self) -> str:
        return f"{self.axis}:{self.code}"


class Category(models.Model):
    codebook = models.ForeignKey(Codebook, on_delete=models.CASCADE, related_name="categories", db_index=False)
    code = models.CharField(max_length=20)
    name = models.CharField(max_length=200)
    definition = models.TextField(blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["codebook", "code"], name="category_codebook_code_unique")]
        ordering = ["codebook", "order"]
        verbose_name_plural = "categories"

    def __str__(self) -> str:
        return f"{self.code} {self.name}"


class FailureType(models.Model):
    codebook = models.ForeignKey(Codebook, on_delete=models.CASCADE, related_name="failure_types", db_index=False)
    code = models.CharField(max_length=20)
    name = models.CharField(max_length=200)
    category = models.ForeignKey(Category, on_delete=models.PROTECT, related_name="failure_types")
    definition = models.TextField()
    indicators = models.JSONField(default=list)
    example = models.TextField()
    # Axis codes of the same codebook; the loader checks they exist.
    typical_source = models.CharField(max_length=50)
    typical_stages = models.JSONField(default=list)
    typical_capabilities = models.JSONField(default=list)
    inspired_by = models.JSONField(default=list, blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["codebook", "code"], name="failuretype_codebook_code_unique")]
        ordering = ["codebook", "order"]

    def __str__(self) -> str:
        return f"{self.code} {self.name}"


class CodebookRule(models.Model):
    """A decision rule for boundary cases between types (the codebook's `rules`)."""

    codebook = models.ForeignKey(Codebook, on_delete=models.CASCADE, related_name="rules", db_index=False)
    rule_id = models.CharField(max_length=20)
    applies_to = models.JSONField(default=list)
    rule = models.TextField()
    order = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["codebook", "rule_id"], name="rule_codebook_id_unique")]
        ordering = ["codebook", "order"]

    def __str__(self) -> str:
        return self.rule_id
