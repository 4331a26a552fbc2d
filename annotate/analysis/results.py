"""Stored analysis results: one rule for what the analysis, agreement and coverage pages (and the API) show.

A result is kept per (study, kind, parameters) with the study's data version read before its labels were
(`Study.data_version` goes up with every write that can change final labels, in that write's transaction).
`result_shown` is the rule every surface asks:

1. a stored result at the study's current data version is shown as it is ("current");
2. otherwise a small study (at most FAULTLINE_ANALYSIS_INLINE_EPISODES episodes) is computed for the
   request and NOT stored ("live"): a GET writes nothing, and a small study costs well under a second;
3. otherwise (a large study, or a replicate count above the job threshold) nothing is computed in the request:
   a stored result of an older data version is shown marked stale ("stale"), or there is none ("missing");
   either way a POST starts a job (analysis_result_job / the "bootstrap" job) that computes and stores it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from urllib.parse import urlencode

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from annotate.analysis.params import LEVEL, Params
from annotate.models import AnalysisResult, Episode, Job, JobStatus, ResultKind, Study

CURRENT, LIVE, STALE, MISSING = "current", "live", "stale", "missing"
# Job kinds that compute and store a result, by the result's kind.
JOB_KINDS = {ResultKind.ANALYSIS: "bootstrap", ResultKind.AGREEMENT: "agreement", ResultKind.COVERAGE: "coverage"}


@dataclass(frozen=True)
class Shown:
    """What a page shows: the document (None when there is none to show), why, and the job computing it."""

    doc: dict | None
    state: str  # CURRENT, LIVE, STALE or MISSING
    stored: AnalysisResult | None
    job: Job | None
    inline_limit: int

    @property
    def stale(self) -> bool:
        return self.state == STALE


# ---------------------------------------------------------------------------
# Parameter keys


def params_key(params: dict) -> str:
    """Canonical JSON of the parameters: the same parameters always give the same key."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def analysis_key(p: Params) -> str:
    """The parameters' key; the codebook version only when it is an earlier one, so that the current
    version's results keep the keys they were stored under."""
    params = asdict(p)
    if params["version"] is None:
        del params["version"]
    return params_key(params)


def agreement_key(*, bootstrap: int, seed: int, level: float = LEVEL, version: str | None = None) -> str:
    """`version`: agreement under an earlier codebook version of the study (None: the current one)."""
    return params_key(
        {"bootstrap": bootstrap, "seed": seed, "level": level, **({"version": version} if version else {})}
    )


def coverage_key(*, level: float = LEVEL, version: str | None = None) -> str:
    """`version`: coverage under an earlier codebook version of the study (None: the current one)."""
    return params_key({"level": level, **({"version": version} if version else {})})


# ---------------------------------------------------------------------------
# Reads


def inline_limit() -> int:
    return settings.FAULTLINE_ANALYSIS_INLINE_EPISODES


def study_is_large(study: Study) -> bool:
    """More episodes than a request may analyse; counted no further than the limit (a bounded query)."""
    limit = inline_limit()
    return Episode.objects.filter(study=study).order_by().values("id")[: limit + 1].count() > limit


def data_version_now(study_id: int) -> int:
    """The study's data version as committed now (read before the labels a result is computed from)."""
    return Study.objects.filter(pk=study_id).values_list("data_version", flat=True).get()


def job_running(study: Study, kind: str, key: str) -> Job | None:
    """The newest unfinished job computing this result, if any."""
    return (
        Job.objects.filter(study=study, kind=JOB_KINDS[kind], params__result_key=key)
        .filter(Q(status=JobStatus.PENDING) | Q(status=JobStatus.RUNNING))
        .order_by("-created_at")
        .first()
    )


def result_shown(study: Study, kind: str, key: str, compute: Callable[[], dict], *, inline_ok: bool = True) -> Shown:
    """The rule of the module docstring. `study.data_version` is the one loaded with the request; `compute`
    is called only for a small study without a current stored result (and `inline_ok`)."""
    row = AnalysisResult.objects.filter(study=study, kind=kind, params_key=key).first()
    job = job_running(study, kind, key)
    if row is not None and row.data_version == study.data_version:
        return Shown(row.document, CURRENT, row, job, inline_limit())
    if inline_ok and not study_is_large(study):
        return Shown(compute(), LIVE, row, job, inline_limit())
    return Shown(row.document if row else None, STALE if row else MISSING, row, job, inline_limit())


# ---------------------------------------------------------------------------
# Writes


@transaction.atomic
def result_store(
    *,
    study_id: int,
    kind: str,
    key: str,
    document: dict,
    data_version: int,
    seconds: float = 0.0,
    job: Job | None = None,
) -> AnalysisResult | None:
    """Keep `document` as the result for (study, kind, key) computed at `data_version`.

    A result computed on older data than the one stored is dropped (two jobs finishing out of order), so
    the stored one only ever moves forward; returns the stored row, or None when it was dropped."""
    row = AnalysisResult.objects.select_for_update().filter(study_id=study_id, kind=kind, params_key=key).first()
    if row is not None and row.data_version > data_version:
        return None
    row = row or AnalysisResult(study_id=study_id, kind=kind, params_key=key)
    row.data_version, row.document, row.computed_at = data_version, document, timezone.now()
    row.seconds, row.job = round(seconds, 3), job
    row.save()
    return row


def result_job_start(*, study: Study, kind: str, key: str, params: dict, user) -> Job:
    """Start the job that computes and stores a result, or return the one already computing it."""
    from annotate.jobs.runner import job_start

    running = job_running(study, kind, key)
    if running is not None:
        return running
    return job_start(kind=JOB_KINDS[kind], study=study, user=user, params={**params, "result_key": key})


def result_compute(*, job, kind: str, compute: Callable[[], dict], url: str) -> dict:
    """Run `compute` for a job and store its document at the data version read before it started."""
    version = data_version_now(job.study_id)
    t0 = time.perf_counter()
    doc = compute()
    key = job.params["result_key"]
    stored = result_store(study_id=job.study_id, kind=kind, key=key, document=doc, data_version=version,
                          seconds=time.perf_counter() - t0, job=job)  # fmt: skip
    return {"run": {"url": url}, "data_version": version, "stored": stored is not None}


def agreement_job(*, job, progress) -> dict:
    """Handler of "agreement" jobs: params bootstrap, seed, result_key."""
    from annotate.analysis.coders import agreement_document

    study = Study.objects.select_related("codebook").get(pk=job.study_id)
    b, seed, version = int(job.params["bootstrap"]), int(job.params["seed"]), job.params.get("version")
    url = reverse("agreement_page", args=[study.slug]) + "?" + urlencode(
        {"bootstrap": b, "seed": seed, **({"version": version} if version else {})})  # fmt: skip
    return result_compute(
        job=job, kind=ResultKind.AGREEMENT, url=url,
        compute=lambda: agreement_document(study, bootstrap=b, seed=seed, version=version),
    )  # fmt: skip


def coverage_job(*, job, progress) -> dict:
    """Handler of "coverage" jobs: params result_key."""
    from annotate.analysis.documents import coverage_document

    study = Study.objects.select_related("codebook").get(pk=job.study_id)
    version = job.params.get("version")
    url = reverse("coverage_page", args=[study.slug]) + (f"?{urlencode({'version': version})}" if version else "")
    return result_compute(job=job, kind=ResultKind.COVERAGE, url=url,
                          compute=lambda: coverage_document(study, version=version))  # fmt: skip
