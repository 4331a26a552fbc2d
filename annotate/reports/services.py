"""Starting and running report jobs, and where their zips live (MEDIA_ROOT/reports/<slug>-<job>.zip)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings

from annotate.analysis.arrays import codebook_axes
from annotate.analysis.params import Params, parse_params
from annotate.exports.datasets import file_sha256
from annotate.jobs.runner import job_start
from annotate.models import Job, JobStatus, Study
from annotate.reports.bundle import report_write, report_zip

REPORT_DIR = "reports"
PARAM_KEYS = ("bootstrap", "seed", "cell", "contrast", "cap", "bca", "interval")


def report_file_path(job: Job) -> Path:
    return Path(settings.MEDIA_ROOT) / REPORT_DIR / f"{job.study.slug}-{job.pk}.zip"


def report_params(study: Study, raw: dict) -> Params:
    """The analysis parameters of a report, checked as the analysis page checks them (ParameterError)."""
    return parse_params(codebook_axes(study), **{k: raw.get(k) for k in PARAM_KEYS})


def report_start(*, study: Study, user, raw: dict) -> Job:
    """Start a report job; ParameterError (with field errors) before anything is stored if a parameter is bad."""
    report_params(study, raw)
    params = {k: raw[k] for k in PARAM_KEYS if raw.get(k) not in (None, "")}
    return job_start(kind="report", study=study, user=user, params=params)


def report_finished(study: Study, params: Params) -> Job | None:
    """The newest successful report job of the study with these parameters on its current labels, if its zip
    is still there."""
    from annotate.analysis.arrays import label_arrays

    fingerprint = label_arrays(study, codebook_axes(study)).fingerprint
    # A report of the current codebook version has version None, which reports made before Params had a
    # version do not record: both are the same report.
    wanted = {k: v for k, v in json.loads(json.dumps(asdict(params))).items() if (k, v) != ("version", None)}
    jobs = Job.objects.filter(study=study, kind="report", status=JobStatus.SUCCESS).order_by("-finished_at")[:20]
    for job in jobs:
        result = job.result or {}
        got = {k: v for k, v in (result.get("parameters") or {}).items() if k in wanted}
        if result.get("fingerprint") == fingerprint and got == wanted and report_file_path(job).exists():
            return job
    return None


def report_build_zip(*, study: Study, params: Params, zip_path: Path, progress=None) -> dict:
    """Write the bundle in a temporary folder and zip it to `zip_path`; the provenance."""
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="faultline-report-") as tmp:
        folder = Path(tmp) / f"{study.slug}-report"
        prov = report_write(study=study, out=folder, params=params, progress=progress)
        partial = zip_path.with_suffix(".zip.part")
        report_zip(folder, partial)
        partial.replace(zip_path)  # a download never sees half a zip
    return prov


def report_job_run(*, job: Job, progress) -> dict[str, Any]:
    path = report_file_path(job)
    prov = report_build_zip(study=job.study, params=report_params(job.study, job.params), zip_path=path,
                            progress=progress)  # fmt: skip
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "sha256": file_sha256(path),
        "labels_sha256": prov["labels"]["sha256"],
        "fingerprint": prov["labels"]["fingerprint"],
        "parameters": prov["parameters"],
    }
