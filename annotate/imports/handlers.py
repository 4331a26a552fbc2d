"""Job handlers of the imports package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from annotate.imports._spool import spool_path_for
from annotate.imports.hooks import imported
from annotate.imports.parsed import ImportFileError
from annotate.imports.services import ProgressFn, import_file_resumable
from annotate.jobs.registry import job_handler
from annotate.models import Job


@job_handler("import")
def job_import(*, job: Job, progress: ProgressFn) -> dict[str, Any]:
    """Job handler: import the uploaded file named in job.params in resumable batches, then delete it.

    Each batch commits with the job's checkpoint, so a job re-run after its worker
    was lost continues after the last committed batch. The file is kept until the
    import succeeds or proves malformed, because a re-run needs it.
    """
    from annotate.jobs.runner import job_checkpoint_save

    media = Path(settings.MEDIA_ROOT).resolve()
    path = (media / job.params["path"]).resolve()
    if media not in path.parents:
        raise ImportFileError("the stored upload is outside MEDIA_ROOT")
    checkpointed = bool(job.lease_owner)
    resume = (job.checkpoint or {}).get("import") if checkpointed else None

    def on_batch(state: dict[str, Any]) -> None:
        if checkpointed:
            job_checkpoint_save(job=job, checkpoint={"import": state}, done=state["records"], total=state["total"])

    name = job.params.get("filename", path.name)
    try:
        result = import_file_resumable(
            study=job.study,
            path=path,
            include_prs=job.params.get("include_prs", False),
            resume=resume,
            on_batch=on_batch,
            progress=progress,
        )
    except ImportFileError as exc:
        path.unlink(missing_ok=True)
        spool_path_for(path).unlink(missing_ok=True)
        kept = ((job.checkpoint or {}).get("import") or {}).get("records", 0)
        if not kept:
            raise ImportFileError(f"{name}: {exc}. Nothing was imported.") from None
        raise ImportFileError(
            f"{name}: {exc}. The first {kept} records were imported and are kept; importing the file again skips them."
        ) from None
    path.unlink(missing_ok=True)
    spool_path_for(path).unlink(missing_ok=True)
    summary = result.as_dict()
    if result.created:
        summary.update(imported(job=job))
    # The job page lists the result as text; "pull request: 2" reads better there than a dict.
    summary["skip_reasons"] = ", ".join(f"{reason}: {n}" for reason, n in sorted(result.skip_reasons.items()))
    return {"file": name, **summary}
