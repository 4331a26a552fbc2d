"""The "bootstrap" job's handler: one chunk computes the document itself, more send the labels chord."""

from __future__ import annotations

import time

from celery import chord

from annotate.analysis.arrays import (
    codebook_axes,
    designs,
    label_arrays,
    label_id_ranges,
)
from annotate.analysis.bootstrap import PARAM_KEYS, chunk_ranges, compute_replicates
from annotate.analysis.documents import analysis_document
from annotate.analysis.params import MAX_B, parse_params
from annotate.analysis.tasks import (
    _chunks_wanted,
    _route,
    _run_info,
    bootstrap_failed,
    bootstrap_labels,
    bootstrap_scatter,
)
from annotate.jobs.registry import job_handler
from annotate.jobs.runner import DEFERRED
from annotate.models import Job, Study
from lib import stats


@job_handler("bootstrap")
def job_bootstrap(*, job, progress):
    """Handler for Job kind "bootstrap": params bootstrap, seed and optionally cell, contrast, cap, bca, chunks.

    With one chunk the job computes the document itself. With several it sends a
    chord that reads the labels in parts and returns DEFERRED: `bootstrap_scatter`
    sends the chunks, and `bootstrap_combine` finishes the job.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    study = Study.objects.select_related("codebook").get(pk=job.study_id)
    axes = codebook_axes(study)
    p = parse_params(axes, **{k: job.params.get(k) for k in PARAM_KEYS}, max_bootstrap=MAX_B)
    ranges = chunk_ranges(stats.n_blocks(p.bootstrap), _chunks_wanted(job))
    if len(ranges) == 1:
        labels = label_arrays(study, axes)
        reps = compute_replicates(designs(labels, axes), p, progress=progress)
        doc = analysis_document(study, p, axes=axes, labels=labels, replicates=reps)
        doc["run"] = _run_info(job, study, 1, reps)
        return doc
    if job.params.get("chord_id"):
        # A redelivered job whose chord is already out: the chord finishes it.
        return DEFERRED
    # Reading a large study's labels costs more than its replicates: the workers read them in
    # parts of episode ids, as many as there are chunks.
    header = [bootstrap_labels.si(job.pk, lo, hi).set(**_route()) for lo, hi in label_id_ranges(study, len(ranges))]
    Job.objects.filter(pk=job.pk).update(done=0, total=p.bootstrap)
    result = chord(header, bootstrap_scatter.s(job.pk, len(ranges)).set(**_route()))
    result = result.on_error(bootstrap_failed.si(job.pk)).apply_async()
    t = {"total": {"wall": round(time.perf_counter() - wall, 4), "cpu": round(time.process_time() - cpu, 4)}}
    Job.objects.filter(pk=job.pk).update(
        params={**job.params, "chord_id": result.id, "chunks_sent": len(ranges), "timings": t}
    )
    return DEFERRED
