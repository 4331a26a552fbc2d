"""The bootstrap's Celery tasks, thin: each calls its function in annotate.analysis.chords, imported when the
task runs, so that loading this module (every process does, with its first job or task lookup) costs nothing.
The names are pinned: queued messages and the chords name the tasks by them.
"""

from __future__ import annotations

from celery import shared_task

LATE = {"acks_late": True, "reject_on_worker_lost": True}


@shared_task(name="annotate.analysis_tasks.bootstrap_chunk", ignore_result=False, **LATE)
def bootstrap_chunk(job_id: int, B: int, seed: int, start: int, stop: int, packed_designs: str) -> dict:
    """Replicate counts for blocks [start, stop) of a B-replicate run, as compressed arrays."""
    from annotate.analysis import chords

    return chords.bootstrap_chunk(job_id, B, seed, start, stop, packed_designs)


@shared_task(name="annotate.analysis_tasks.bootstrap_combine", **LATE)
def bootstrap_combine(parts: list[dict], job_id: int, labels: str, timings: dict | None = None) -> None:
    """The chord's body: stack the chunks in block order and store the analysis document."""
    from annotate.analysis import chords

    chords.bootstrap_combine(parts, job_id, labels, timings)


@shared_task(name="annotate.analysis_tasks.bootstrap_failed")
def bootstrap_failed(job_id: int) -> None:
    """The chord's error callback: a chunk raised (a dead worker requeues its chunk instead)."""
    from annotate.analysis import chords

    chords.bootstrap_failed(job_id)


@shared_task(name="annotate.analysis_tasks.bootstrap_labels", ignore_result=False, **LATE)
def bootstrap_labels(job_id: int, lo: int, hi: int) -> dict:
    """The final labels of the job's study for episode ids [lo, hi), packed."""
    from annotate.analysis import chords

    return chords.bootstrap_labels(job_id, lo, hi)


@shared_task(name="annotate.analysis_tasks.bootstrap_scatter", **LATE)
def bootstrap_scatter(parts: list[dict], job_id: int, chunks: int) -> None:
    """The labels chord's body: join the parts, then send one chunk of replicates per block range."""
    from annotate.analysis import chords

    chords.bootstrap_scatter(parts, job_id, chunks)
