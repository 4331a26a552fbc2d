"""Job handlers of the documents package."""

from __future__ import annotations

from typing import Any

from annotate.documents.search import search_pending
from annotate.documents.services import ANALYZE_AFTER, SEARCH_INDEX_JOB, search_vectors_fill, statistics_refresh
from annotate.jobs.registry import job_handler
from annotate.models import Job


@job_handler(SEARCH_INDEX_JOB)
def job_search_index(*, job: Job, progress) -> dict[str, Any]:
    """Job handler: after an import, refresh the planner's statistics if it was large, then fill the search
    vectors it deferred, batch by batch.

    Each batch commits on its own, so a job re-run after its worker was lost just fills what is
    still missing; the count shown is what was pending when it started, plus what came meanwhile."""
    total = search_pending(job.study_id)
    progress(0, total)
    if total >= ANALYZE_AFTER:
        statistics_refresh()
    filled = search_vectors_fill(study_id=job.study_id, progress=lambda n: progress(n, max(total, n)))
    progress(filled, max(total, filled))
    return {"indexed": filled}
