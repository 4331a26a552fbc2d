"""Stored analysis results: one document per (study, what, parameters), with the data version it was computed on."""

from __future__ import annotations

from django.db import models

from annotate.models.jobs import Job
from annotate.models.studies import Study


class ResultKind(models.TextChoices):
    ANALYSIS = "analysis", "Stage x capability analysis"
    AGREEMENT = "agreement", "Inter-coder agreement"
    COVERAGE = "coverage", "Hold-out coverage"


class AnalysisResult(models.Model):
    """The latest computed document for a study, a kind of result and one set of parameters.

    `data_version` is the study's data version read before its labels were: when the study's is higher the
    result is stale (still shown, marked so). Only the latest computation per parameters is kept; an older
    data version's document is of no use once a newer one exists, and each can be megabytes."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="analysis_results", db_index=False)
    kind = models.CharField(max_length=20, choices=ResultKind.choices)
    params_key = models.CharField(max_length=400)  # canonical JSON of the parameters (annotate.analysis.results)
    data_version = models.PositiveBigIntegerField()
    document = models.JSONField()
    computed_at = models.DateTimeField()
    seconds = models.FloatField(default=0.0)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "kind", "params_key"], name="analysis_result_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} of {self.study_id} at version {self.data_version}"
