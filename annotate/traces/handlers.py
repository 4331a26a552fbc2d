"""Job handlers of the traces package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from annotate.imports.parsed import ImportFileError
from annotate.jobs.registry import job_handler
from annotate.models import Job
from annotate.traces.services import ProgressFn, import_traces


@job_handler("import_traces")
def job_import_traces(*, job: Job, progress: ProgressFn) -> dict[str, Any]:
    """Job handler: import the uploaded trace file named in job.params, then delete it."""
    media = Path(settings.MEDIA_ROOT).resolve()
    path = (media / job.params["path"]).resolve()
    if media not in path.parents:
        raise ImportFileError("the stored upload is outside MEDIA_ROOT")
    name = job.params.get("filename", path.name)
    try:
        result = import_traces(study=job.study, paths=[path], fmt=job.params["format"], progress=progress)
    except ImportFileError as exc:
        raise ImportFileError(f"{name}: {str(exc).replace(path.name, name)}. Nothing was imported.") from None
    finally:
        path.unlink(missing_ok=True)
    summary = result.as_dict()
    summary["skip_reasons"] = ", ".join(f"{reason}: {n}" for reason, n in sorted(result.skip_reasons.items()))
    return {"file": name, "format": job.params["format"], **summary}
