"""Job handlers of the coding package."""

from __future__ import annotations

from typing import Any

from annotate.coding.services import episodes_recount
from annotate.jobs.registry import job_handler


@job_handler("recount")
def job_recount(*, job, progress) -> dict[str, Any]:
    """Job handler: repair a study's episode counters."""
    progress(0, 1)
    fixed = episodes_recount(study=job.study)
    progress(1, 1)
    return {"fixed": fixed}
