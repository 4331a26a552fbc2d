"""The "bootstrap" job: a large-B analysis spread over Celery workers as two chords.

Replicates are drawn in fixed blocks (`lib.stats.BLOCK`); block i draws
from `SeedSequence(seed).spawn(...)[i]`, so a chunk of blocks gives the same
numbers on any worker. Reading a large study's labels costs more than drawing
its replicates, so the workers do both: the job sends one `bootstrap_labels`
task per range of episode ids (on the analysis queue, see
FAULTLINE_ANALYSIS_QUEUE) and returns at once, freeing its worker;
`bootstrap_scatter` joins the parts into the study's label arrays and sends
one `bootstrap_chunk` per chunk of blocks, with only the designs' count
matrices; the second chord's body, `bootstrap_combine`, stacks the chunks in
block order and writes the document. The replicates, and so the document, are
byte-identical whatever the number of chunks and workers, and identical to
`analyze` with the same B and seed.

Every task is acknowledged only once it has finished (acks_late), and a task
whose worker process dies is put back on the queue (reject_on_worker_lost), so
only that part or chunk runs again. Progress counts the replicates of finished
chunks. Each step records its wall and CPU seconds in the document's
run.timings, which `bench/scale_bench.py` splits into serial and parallel work.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from celery import chord
from django.conf import settings
from django.db.models import F
from django.db.models.functions import Least
from django.urls import reverse
from django.utils import timezone

from annotate.analysis.arrays import (
    codebook_axes,
    designs,
    label_id_ranges,
    label_part,
    labels_join,
)
from annotate.analysis.bootstrap import (
    DEFAULT_CHUNKS,
    PARAM_KEYS,
    _timed,
    chunk_ranges,
    compute_replicates,
    designs_pack,
    designs_unpack,
    labels_pack,
    labels_unpack,
    pack,
    replicates_digest,
    unpack,
)
from annotate.analysis.documents import analysis_document
from annotate.analysis.params import MAX_B, parse_params
from annotate.analysis.results import analysis_key, data_version_now, result_store
from annotate.analysis.versions import params_for, version_labels
from annotate.jobs.registry import task_named
from annotate.jobs.runner import DEFERRED, job_deferred_heartbeat
from annotate.models import Job, JobStatus, ResultKind, Study
from lib import stats

log = logging.getLogger(__name__)

# The chord's tasks (annotate/analysis/tasks.py, which calls the functions here), by their pinned names.
CHUNK, COMBINE, FAILED, LABELS, SCATTER = (
    f"annotate.analysis_tasks.bootstrap_{x}" for x in ("chunk", "combine", "failed", "labels", "scatter")
)


def bootstrap_chunk(job_id: int, B: int, seed: int, start: int, stop: int, packed_designs: str) -> dict:
    """Replicate counts for blocks [start, stop) of a B-replicate run, as compressed arrays."""
    t: dict = {}
    with _timed(t, "total"):
        with _timed(t, "inputs"):
            ds = designs_unpack(packed_designs)
        with _timed(t, "draw"):
            # One thread: the worker processes are the parallelism, and a chunk must not take two cores.
            reps = stats.replicate_blocks(ds, B=B, seed=seed, start=start, stop=stop, threads=1)
        with _timed(t, "pack"):
            packed = pack(reps)
        done = sum(min(stats.BLOCK, B - i * stats.BLOCK) for i in range(start, stop))
        Job.objects.filter(pk=job_id).update(done=Least(F("done") + done, F("total")))
        job_deferred_heartbeat(job_id=job_id)
    return {"start": start, "stop": stop, "replicates": packed, "timings": t}


def bootstrap_combine(parts: list[dict], job_id: int, labels: str, timings: dict | None = None) -> None:
    """The chord's body: stack the chunks in block order and store the analysis document."""
    wall, cpu = time.perf_counter(), time.process_time()
    job = Job.objects.select_related("study__codebook").get(pk=job_id)
    if job.finished:
        return
    try:
        study = job.study
        axes = codebook_axes(study)
        p = parse_params(axes, **{k: job.params.get(k) for k in PARAM_KEYS}, max_bootstrap=MAX_B)
        t: dict = {}
        with _timed(t, "unpack"):
            parts = sorted(parts, key=lambda part: part["start"])
            arrays = [unpack(part["replicates"]) for part in parts]
            reps = [np.vstack([a[i] for a in arrays]) for i in range(len(arrays[0]))]
        with _timed(t, "document"):
            doc = analysis_document(study, p, axes=axes, labels=labels_unpack(labels), replicates=reps)
        doc["run"] = _run_info(job, study, len(parts), reps)
        t["total"] = {"wall": round(time.perf_counter() - wall, 4), "cpu": round(time.process_time() - cpu, 4)}
        doc["run"]["timings"] = {
            "job": job.params.get("timings", {}),
            **(timings or {}),
            "chunks": [part.get("timings", {}) for part in parts],
            "combine": t,
        }
        if "data_version" in job.params:
            _store(job, p, doc, job.params["data_version"], _job_seconds(job))
    except Exception as exc:  # the job records the failure; the worker stays up
        log.exception("bootstrap job %s failed while combining its chunks", job_id)
        _job_fail(job_id, str(exc))
        return
    Job.objects.filter(pk=job_id).exclude(status=JobStatus.SUCCESS).update(
        status=JobStatus.SUCCESS, result=doc, done=F("total"), finished_at=timezone.now()
    )


def _store(job: Job, p, doc: dict, version: int, seconds: float) -> None:
    """Keep the document as the study's analysis for these parameters, at the data version read first."""
    result_store(study_id=job.study_id, kind=ResultKind.ANALYSIS, key=analysis_key(p), document=doc,
                 data_version=version, seconds=seconds, job=job)  # fmt: skip


def _job_seconds(job: Job) -> float:
    """Wall seconds since the job started (a chord's steps run in several processes)."""
    return (timezone.now() - job.started_at).total_seconds() if job.started_at else 0.0


def bootstrap_failed(job_id: int) -> None:
    """The chord's error callback: a chunk raised (a dead worker requeues its chunk instead)."""
    _job_fail(job_id, "A chunk of the bootstrap failed; the workers' log says why. Start the analysis again.")


def _job_fail(job_id: int, error: str) -> None:
    Job.objects.filter(pk=job_id).exclude(status=JobStatus.SUCCESS).update(
        status=JobStatus.FAILED, error=error[:4000], finished_at=timezone.now()
    )


def _run_info(job: Job, study: Study, chunks: int, reps: list[np.ndarray]) -> dict:
    return {
        "job": job.pk,
        "chunks": chunks,
        "replicates_sha256": replicates_digest(reps),
        "url": reverse("analysis_page", args=[study.slug]) + f"?job={job.pk}",
    }


def _chunks_wanted(job: Job) -> int:
    if job.params.get("chunks"):
        return int(job.params["chunks"])
    from config.celery import app

    # Eager (no broker): one process anyway. Without a result backend a chord cannot gather.
    if app.conf.task_always_eager or not app.conf.result_backend:
        return 1
    return DEFAULT_CHUNKS


def _route() -> dict:
    return {"queue": settings.FAULTLINE_ANALYSIS_QUEUE} if settings.FAULTLINE_ANALYSIS_QUEUE else {}


def bootstrap_labels(job_id: int, lo: int, hi: int) -> dict:
    """The final labels of the job's study for episode ids [lo, hi), packed."""
    t: dict = {}
    with _timed(t, "total"):
        study = Study.objects.select_related("codebook").get(jobs__pk=job_id)
        packed = labels_pack(label_part(study, codebook_axes(study), ids=(lo, hi)))
    return {"lo": lo, "labels": packed, "timings": t}


def bootstrap_scatter(parts: list[dict], job_id: int, chunks: int) -> None:
    """The labels chord's body: join the parts, then send one chunk of replicates per block range."""
    wall, cpu = time.perf_counter(), time.process_time()
    job = Job.objects.select_related("study__codebook").get(pk=job_id)
    if job.finished:
        return
    t: dict = {}
    try:
        study = job.study
        axes = codebook_axes(study)
        p = parse_params(axes, **{k: job.params.get(k) for k in PARAM_KEYS}, max_bootstrap=MAX_B)
        parts = sorted(parts, key=lambda part: part["lo"])
        with _timed(t, "join"):
            labels = labels_join(study, [labels_unpack(part["labels"]) for part in parts])
        with _timed(t, "pack"):
            # Chunks get only the count matrices; the combine step, which names clusters, the labels.
            packed, packed_designs = labels_pack(labels), designs_pack(designs(labels, axes))
        ranges = chunk_ranges(stats.n_blocks(p.bootstrap), chunks)
        header = [task_named(CHUNK).si(job.pk, p.bootstrap, p.seed, a, b, packed_designs).set(**_route())
                  for a, b in ranges]  # fmt: skip
        t["total"] = {"wall": round(time.perf_counter() - wall, 4), "cpu": round(time.process_time() - cpu, 4)}
        timings = {"labels": [part.get("timings", {}) for part in parts], "scatter": t}
        body = task_named(COMBINE).s(job.pk, packed, timings).set(**_route())
        chord(header, body).on_error(task_named(FAILED).si(job.pk)).apply_async()
    except Exception as exc:  # the job records the failure; the worker stays up
        log.exception("bootstrap job %s failed while joining its labels", job_id)
        _job_fail(job_id, str(exc))


def bootstrap_run(*, job, progress):
    """Handler for Job kind "bootstrap": params bootstrap, seed and optionally cell, contrast, cap, bca, chunks.

    With one chunk the job computes the document itself. With several it sends a
    chord that reads the labels in parts and returns DEFERRED: `bootstrap_scatter`
    sends the chunks, and `bootstrap_combine` finishes the job.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    study = Study.objects.select_related("codebook").get(pk=job.study_id)
    p, choice, axes = params_for(study, {k: job.params.get(k) for k in (*PARAM_KEYS, "version")})
    # An earlier codebook version's labels come from the migration's record, not from ranges of the
    # study's codings: that analysis runs in this process (one chunk).
    ranges = chunk_ranges(stats.n_blocks(p.bootstrap), 1 if p.version else _chunks_wanted(job))
    if len(ranges) == 1:
        version = data_version_now(study.pk)  # before the labels: a change after it leaves the result stale
        labels = version_labels(study, choice, axes)
        reps = compute_replicates(designs(labels, axes), p, progress=progress)
        doc = analysis_document(study, p, axes=axes, labels=labels, replicates=reps)
        doc["run"] = _run_info(job, study, 1, reps)
        _store(job, p, doc, version, time.perf_counter() - wall)
        return doc
    if job.params.get("chord_id"):
        # A redelivered job whose chord is already out: the chord finishes it.
        return DEFERRED
    # The version is recorded before any part of the labels is read (the chord reads them later).
    job.params = {**job.params, "data_version": data_version_now(study.pk)}
    Job.objects.filter(pk=job.pk).update(params=job.params)
    # Reading a large study's labels costs more than its replicates: the workers read them in
    # parts of episode ids, as many as there are chunks.
    header = [task_named(LABELS).si(job.pk, lo, hi).set(**_route()) for lo, hi in label_id_ranges(study, len(ranges))]
    Job.objects.filter(pk=job.pk).update(done=0, total=p.bootstrap)
    result = chord(header, task_named(SCATTER).s(job.pk, len(ranges)).set(**_route()))
    result = result.on_error(task_named(FAILED).si(job.pk)).apply_async()
    t = {"total": {"wall": round(time.perf_counter() - wall, 4), "cpu": round(time.process_time() - cpu, 4)}}
    Job.objects.filter(pk=job.pk).update(
        params={**job.params, "chord_id": result.id, "chunks_sent": len(ranges), "timings": t}
    )
    return DEFERRED
