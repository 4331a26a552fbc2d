"""A study's move to another version of its codebook, kept code by code so that it can be reverted exactly."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from annotate.models.coding import Adjudication, Coding
from annotate.models.studies import Study
from taxonomy.models import Codebook


class CodebookMigration(models.Model):
    """An owner moved the study's codings from one codebook version to another (annotate.coding.codebook_moves).

    `mapping` is the validated map, old type code -> list of new type codes: one code moves the
    codings (a rename, or a merge when several old codes name it), several is a split and none
    retires the type; codings on a split or retired type are queued again.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="codebook_migrations")
    from_codebook = models.ForeignKey(Codebook, on_delete=models.PROTECT, related_name="+")
    to_codebook = models.ForeignKey(Codebook, on_delete=models.PROTECT, related_name="+")
    mapping = models.JSONField(default=dict)
    counts = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    reverted_at = models.DateTimeField(null=True, blank=True)
    reverted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.study} {self.from_codebook} -> {self.to_codebook}"


class MigratedCode(models.Model):
    """One coding's or adjudication's codes before and after a migration: what a revert puts back.

    `before`/`after` hold the foreign key ids (failure_type, source, stage, capability, recode_from)
    and failure_type_original, plus the coder (codings) so that the earlier version's agreement can
    be recomputed from the record alone.
    """

    migration = models.ForeignKey(CodebookMigration, on_delete=models.CASCADE, related_name="rows")
    coding = models.ForeignKey(Coding, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    adjudication = models.ForeignKey(Adjudication, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    episode_id_at = models.PositiveBigIntegerField()
    coder_id_at = models.PositiveBigIntegerField(null=True, blank=True)
    before = models.JSONField()
    after = models.JSONField()
    requeued = models.BooleanField(default=False)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"row {self.pk} of migration {self.migration_id}"
