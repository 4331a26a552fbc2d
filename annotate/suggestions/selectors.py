"""Reads about the suggesters that pages and the API share: the last recorded audit per backend."""

from __future__ import annotations

from annotate.models import Study, SuggesterAudit, SuggestionBackend


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
