"""The "bootstrap" job: a large-B analysis, split over Celery workers when several are free.

Replicates are drawn in fixed seeded blocks (`taxonomy.stats.BLOCK`), so a
chunk of blocks gives the same numbers on any worker; the chunks are gathered
in a Celery group and concatenated in block order. The document is therefore
identical whatever the number of chunks, and identical to `analyze` with the
same B and seed.
"""

from __future__ import annotations

import time
from itertools import pairwise

import numpy as np
from celery import group, shared_task
from django.conf import settings
from django.urls import reverse

from taxonomy import stats

from .analysis import (
    MAX_B,
    analysis_document,
    codebook_axes,
    compute_replicates,
    designs,
    label_arrays,
    pack,
    parse_params,
    unpack,
)
from .models import Study

PARAM_KEYS = ("bootstrap", "seed", "cell", "contrast", "cap", "bca", "interval")
CHUNK_TIMEOUT_S = 6 * 3600


class DataChanged(RuntimeError):
    pass


@shared_task(ignore_result=False, acks_late=True)
def bootstrap_chunk(study_id: int, B: int, seed: int, start: int, stop: int, fingerprint: str) -> dict:
    """Replicate counts for blocks [start, stop) of a B-replicate run, as compressed arrays."""
    study = Study.objects.select_related("codebook").get(pk=study_id)
    axes = codebook_axes(study)
    labels = label_arrays(study, axes)
    if labels.fingerprint != fingerprint:
        return {"error": "The study's labels changed during the run."}
    reps = stats.replicate_blocks(designs(labels, axes), B=B, seed=seed, start=start, stop=stop)
    return {"start": start, "stop": stop, "replicates": pack(reps)}


def worker_slots() -> int:
    """Free worker processes for chunks: all pool slots but the one running this job (1 when eager)."""
    from config.celery import app

    if app.conf.task_always_eager or not app.conf.result_backend:
        return 1
    replies = {}
    for _ in range(2):  # a busy worker may miss the first broadcast
        try:
            replies = app.control.inspect(timeout=1.5).stats() or {}
        except Exception:  # an unreachable broker means no parallelism, not a failed job
            return 1
        if replies:
            break
    total = sum(int(r.get("pool", {}).get("max-concurrency", 1)) for r in replies.values())
    return max(1, total - 1)


def chunk_ranges(total_blocks: int, chunks: int) -> list[tuple[int, int]]:
    """Contiguous block ranges, as even as possible."""
    chunks = max(1, min(chunks, total_blocks))
    edges = [round(i * total_blocks / chunks) for i in range(chunks + 1)]
    return [(a, b) for a, b in pairwise(edges) if b > a]


def parallel_replicates(study: Study, p, fingerprint: str, chunks: int, progress) -> list:
    """Run the chunks as a Celery group and concatenate their replicates in block order."""
    ranges = chunk_ranges(stats.n_blocks(p.bootstrap), chunks)
    sigs = [bootstrap_chunk.s(study.pk, p.bootstrap, p.seed, a, b, fingerprint) for a, b in ranges]
    result = group(sigs).apply_async()
    deadline = time.monotonic() + CHUNK_TIMEOUT_S
    while not result.ready():
        if time.monotonic() > deadline:
            raise TimeoutError("The bootstrap chunks did not finish in time.")
        progress(result.completed_count(), len(ranges))
        time.sleep(0.5)
    parts = result.get(disable_sync_subtasks=False)
    for part in parts:
        if "error" in part:
            raise DataChanged(part["error"] + " Start the analysis again.")
    parts.sort(key=lambda part: part["start"])
    arrays = [unpack(part["replicates"]) for part in parts]
    return [np.vstack([a[i] for a in arrays]) for i in range(len(arrays[0]))]


def job_bootstrap(*, job, progress) -> dict:
    """Handler for Job kind "bootstrap": params bootstrap, seed and optionally cell, contrast, cap, bca, chunks."""
    study = Study.objects.select_related("codebook").get(pk=job.study_id)
    axes = codebook_axes(study)
    p = parse_params(axes, **{k: job.params.get(k) for k in PARAM_KEYS}, max_bootstrap=MAX_B)
    labels = label_arrays(study, axes)
    chunks = int(job.params.get("chunks") or worker_slots())
    if chunks > 1 and stats.n_blocks(p.bootstrap) > 1:
        reps = parallel_replicates(study, p, labels.fingerprint, chunks, progress)
    else:
        reps = compute_replicates(designs(labels, axes), p, progress=progress)
    doc = analysis_document(study, p, axes=axes, labels=labels, replicates=reps)
    doc["run"] = {
        "job": job.pk,
        "chunks": len(chunk_ranges(stats.n_blocks(p.bootstrap), chunks)),
        "url": reverse("analysis_page", args=[study.slug]) + f"?job={job.pk}",
    }
    return doc


def over_threshold(B: int) -> bool:
    return B > settings.FAULTLINE_BOOTSTRAP_JOB_THRESHOLD
