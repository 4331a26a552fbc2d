"""Reads about the suggesters that pages and the API share: whether a suggestion is confident (a default Accept),
and the last recorded audit per backend."""

from __future__ import annotations

from annotate.models import Study, SuggesterAudit, Suggestion, SuggestionBackend


def suggestion_confident(suggestion: Suggestion | None, study: Study) -> bool:
    """Whether a suggestion is offered as the default (a primary Accept); every surface asks this.

    Not when the suggester declined, when the top confidence is below the study's threshold, when the text
    addressed a model, or when a report not in English was read through the local lexicon (both have their
    confidences capped too, but a study may set its threshold below the cap)."""
    return (
        suggestion is not None
        and not suggestion.error
        and not suggestion.abstain_reason
        and not suggestion.instructions_flagged
        and not suggestion.language_capped
        and suggestion.confidence is not None
        and suggestion.confidence >= study.suggestion_min_confidence
    )


def latest_audits(study: Study) -> list[SuggesterAudit]:
    """The newest recorded audit of each backend (at most one query per backend, two backends)."""
    out = []
    for backend in SuggestionBackend.values:
        row = SuggesterAudit.objects.filter(study=study, backend=backend).select_related("created_by").first()
        if row is not None:
            out.append(row)
    return out


def audit_as_dict(audit: SuggesterAudit) -> dict:
    return {
        "backend": audit.backend,
        "model": audit.model,
        "created_at": audit.created_at.isoformat(),
        "n_labels": audit.n_labels,
        "passed": audit.passed,
        "checks": audit.result.get("checks", []),
    }
