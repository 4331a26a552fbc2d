"""Job handlers of the reports package: a study's report bundle, written and zipped under MEDIA_ROOT/reports/."""

from __future__ import annotations

from typing import Any

from annotate.jobs.registry import job_handler


@job_handler("report")
def job_report(*, job, progress) -> dict[str, Any]:
    """Job handler: the report bundle (params: the analysis parameters) as a zip, with its provenance."""
    # Imported here: this module loads with every process's first job lookup; the report brings matplotlib.
    from annotate.reports.services import report_job_run

    return report_job_run(job=job, progress=progress)
