"""The "bootstrap" job: a large-B analysis spread over Celery workers as a chord of chunks.

Replicates are drawn in fixed blocks (`taxonomy.stats.BLOCK`); block i draws
from `SeedSequence(seed).spawn(...)[i]`, so a chunk of blocks gives the same
numbers on any worker. The job reads the study's labels once, sends one
`bootstrap_chunk` task per chunk of blocks (on the analysis queue, see
FAULTLINE_ANALYSIS_QUEUE) and returns at once, freeing its worker; the chord's
body, `bootstrap_combine`, stacks the chunks in block order and writes the
document. The replicates, and so the document, are byte-identical whatever the
number of chunks and workers, and identical to `analyze` with the same B and seed.

Each chunk is acknowledged only once it has finished (acks_late), and a chunk
whose worker process dies is put back on the queue (reject_on_worker_lost), so
only that chunk runs again. Progress counts the replicates of finished chunks.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import time
import zlib
from contextlib import contextmanager
from dataclasses import asdict
from itertools import pairwise

import numpy as np
from celery import chord, shared_task
from django.conf import settings
from django.db.models import F
from django.db.models.functions import Least
from django.urls import reverse
from django.utils import timezone

from taxonomy import stats

from .analysis import (
    MAX_B,
    LabelArrays,
    analysis_document,
    codebook_axes,
    compute_replicates,
    designs,
    label_arrays,
    pack,
    parse_params,
    unpack,
)
from .jobs import DEFERRED, job_deferred_heartbeat
from .labels import FinalLabel
from .models import Job, JobStatus, Study

log = logging.getLogger(__name__)

PARAM_KEYS = ("bootstrap", "seed", "cell", "contrast", "cap", "bca", "interval")
# Chunks per job when a broker is configured: enough to keep 16 worker processes busy and
# to show progress as they finish, few enough that sending the labels to each stays cheap.
DEFAULT_CHUNKS = 16
_ARRAYS = ("episode_id", "kind", "stage", "capability", "source", "failure_type", "category")


def chunk_ranges(total_blocks: int, chunks: int) -> list[tuple[int, int]]:
    """Contiguous block ranges, as even as possible."""
    chunks = max(1, min(chunks, total_blocks))
    edges = [round(i * total_blocks / chunks) for i in range(chunks + 1)]
    return [(a, b) for a, b in pairwise(edges) if b > a]


def labels_pack(labels: LabelArrays) -> str:
    """The label arrays as one compressed JSON-safe string, so chunks and the combine step
    work on the snapshot the job read instead of querying the study again."""
    buf = io.BytesIO()
    cluster = labels.cluster.astype(str) if labels.cluster.size else np.zeros(0, dtype="U1")
    np.savez_compressed(buf, cluster=cluster, **{name: getattr(labels, name) for name in _ARRAYS})
    meta = {
        "excluded": {kind: dict(counter) for kind, counter in labels.excluded.items()},
        "holdout": [[e_id, kind, title, asdict(label)] for e_id, kind, title, label in labels.holdout],
        "n_episodes": labels.n_episodes,
        "fingerprint": labels.fingerprint,
        "as_of": labels.as_of,
    }
    blob = json.dumps({"arrays": base64.b64encode(buf.getvalue()).decode(), "meta": meta}).encode()
    return base64.b64encode(zlib.compress(blob, 6)).decode()


def labels_unpack(packed: str) -> LabelArrays:
    from collections import Counter

    data = json.loads(zlib.decompress(base64.b64decode(packed)))
    with np.load(io.BytesIO(base64.b64decode(data["arrays"])), allow_pickle=False) as arrays:
        ints = {name: arrays[name].astype(np.int64) for name in _ARRAYS}
        cluster = np.asarray(arrays["cluster"].tolist(), dtype=object)
    meta = data["meta"]
    return LabelArrays(
        **ints,
        cluster=cluster,
        excluded={kind: Counter(counts) for kind, counts in meta["excluded"].items()},
        holdout=[(e_id, kind, title, FinalLabel(**label)) for e_id, kind, title, label in meta["holdout"]],
        n_episodes=meta["n_episodes"],
        fingerprint=meta["fingerprint"],
        as_of=meta["as_of"],
    )


@contextmanager
def _timed(into: dict, name: str):
    """Wall and CPU seconds of a step, kept in `into`: the bench splits a job into serial and parallel work."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        into[name] = {"wall": round(time.perf_counter() - wall, 4), "cpu": round(time.process_time() - cpu, 4)}


def replicates_digest(reps: list[np.ndarray]) -> str:
    """sha256 of the replicate counts: equal digests mean byte-identical bootstraps."""
    digest = hashlib.sha256()
    for a in reps:
        digest.update(np.ascontiguousarray(a, dtype=np.int32).tobytes())
    return digest.hexdigest()


@shared_task(ignore_result=False, acks_late=True, reject_on_worker_lost=True)
def bootstrap_chunk(job_id: int, study_id: int, B: int, seed: int, start: int, stop: int, labels: str) -> dict:
    """Replicate counts for blocks [start, stop) of a B-replicate run, as compressed arrays."""
    t: dict = {}
    with _timed(t, "total"):
        with _timed(t, "inputs"):
            study = Study.objects.select_related("codebook").get(pk=study_id)
            ds = designs(labels_unpack(labels), codebook_axes(study))
        with _timed(t, "draw"):
            # One thread: the worker processes are the parallelism, and a chunk must not take two cores.
            reps = stats.replicate_blocks(ds, B=B, seed=seed, start=start, stop=stop, threads=1)
        with _timed(t, "pack"):
            packed = pack(reps)
        done = sum(min(stats.BLOCK, B - i * stats.BLOCK) for i in range(start, stop))
        Job.objects.filter(pk=job_id).update(done=Least(F("done") + done, F("total")))
        job_deferred_heartbeat(job_id=job_id)
    return {"start": start, "stop": stop, "replicates": packed, "timings": t}


@shared_task(acks_late=True, reject_on_worker_lost=True)
def bootstrap_combine(parts: list[dict], job_id: int, labels: str) -> None:
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
            "chunks": [part.get("timings", {}) for part in parts],
            "combine": t,
        }
    except Exception as exc:  # the job records the failure; the worker stays up
        log.exception("bootstrap job %s failed while combining its chunks", job_id)
        _job_fail(job_id, str(exc))
        return
    Job.objects.filter(pk=job_id).exclude(status=JobStatus.SUCCESS).update(
        status=JobStatus.SUCCESS, result=doc, done=F("total"), finished_at=timezone.now()
    )


@shared_task
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


def job_bootstrap(*, job, progress):
    """Handler for Job kind "bootstrap": params bootstrap, seed and optionally cell, contrast, cap, bca, chunks.

    With one chunk the job computes the document itself. With several it sends a
    chord and returns DEFERRED: `bootstrap_combine` finishes the job.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    t: dict = {}
    study = Study.objects.select_related("codebook").get(pk=job.study_id)
    axes = codebook_axes(study)
    p = parse_params(axes, **{k: job.params.get(k) for k in PARAM_KEYS}, max_bootstrap=MAX_B)
    with _timed(t, "labels"):
        labels = label_arrays(study, axes)
    ranges = chunk_ranges(stats.n_blocks(p.bootstrap), _chunks_wanted(job))
    if len(ranges) == 1:
        reps = compute_replicates(designs(labels, axes), p, progress=progress)
        doc = analysis_document(study, p, axes=axes, labels=labels, replicates=reps)
        doc["run"] = _run_info(job, study, 1, reps)
        return doc
    if job.params.get("chord_id"):
        # A redelivered job whose chord is already out: the chord finishes it.
        return DEFERRED
    with _timed(t, "labels_pack"):
        packed = labels_pack(labels)
    route = {"queue": settings.FAULTLINE_ANALYSIS_QUEUE} if settings.FAULTLINE_ANALYSIS_QUEUE else {}
    header = [bootstrap_chunk.si(job.pk, study.pk, p.bootstrap, p.seed, a, b, packed).set(**route)
              for a, b in ranges]  # fmt: skip
    body = bootstrap_combine.s(job.pk, packed).set(**route)
    Job.objects.filter(pk=job.pk).update(done=0, total=p.bootstrap)
    with _timed(t, "send"):
        result = chord(header, body).on_error(bootstrap_failed.si(job.pk)).apply_async()
    t["total"] = {"wall": round(time.perf_counter() - wall, 4), "cpu": round(time.process_time() - cpu, 4)}
    Job.objects.filter(pk=job.pk).update(
        params={**job.params, "chord_id": result.id, "chunks_sent": len(ranges), "timings": t}
    )
    return DEFERRED


def over_threshold(B: int) -> bool:
    return B > settings.FAULTLINE_BOOTSTRAP_JOB_THRESHOLD
