"""The "bootstrap" job's handler. Its work is in annotate.analysis.chords, imported when a job runs: this
module is loaded with every process's first job lookup, and must not bring scipy with it."""

from __future__ import annotations

from annotate.jobs.registry import job_handler


@job_handler("bootstrap")
def job_bootstrap(*, job, progress):
    """Handler for Job kind "bootstrap": params bootstrap, seed and optionally cell, contrast, cap, bca, chunks.

    With one chunk the job computes the document itself. With several it sends a
    chord that reads the labels in parts and returns DEFERRED: `bootstrap_scatter`
    sends the chunks, and `bootstrap_combine` finishes the job.
    """
    from annotate.analysis.chords import bootstrap_run

    return bootstrap_run(job=job, progress=progress)


@job_handler("agreement")
def job_agreement(*, job, progress):
    """Handler for Job kind "agreement": params bootstrap, seed and result_key; stores the agreement document."""
    from annotate.analysis.results import agreement_job

    return agreement_job(job=job, progress=progress)


@job_handler("coverage")
def job_coverage(*, job, progress):
    """Handler for Job kind "coverage": params result_key; stores the hold-out coverage document."""
    from annotate.analysis.results import coverage_job

    return coverage_job(job=job, progress=progress)
