"""Job handlers of the exports package: the Parquet export."""

from __future__ import annotations

from typing import Any

from annotate.jobs.registry import job_handler


@job_handler("export_parquet")
def job_export_parquet(*, job, progress) -> dict[str, Any]:
    """Job handler: write a Parquet export (params: filters, coders) under MEDIA_ROOT/exports/."""
    # Imported here: this module loads with every process's first job lookup; the export brings DRF's filters.
    from annotate.exports import rows as exports
    from annotate.exports.datasets import export_file_path, export_write

    path = export_file_path(job)
    man = export_write(
        study=job.study,
        fmt="parquet",
        out=path,
        filters=job.params.get("filters") or {},
        coders=job.params.get("coders", exports.CODERS_PSEUDONYMOUS),
        progress=progress,
    )
    return {"rows": man["rows"], "bytes": man["bytes"], "sha256": man["sha256"], "manifest": man}
