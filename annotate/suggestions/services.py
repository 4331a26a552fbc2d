"""Writes for code suggestions: batches (as Jobs), storing validated answers, rejecting, retraining.

A Suggestion is machine output and never a Coding. Accepting or editing one
happens through `coding_save(from_suggestion=...)`, which marks it accepted
(codes kept) or edited (codes changed); only rejection lives here.

Every stored answer is keyed by `cache_key` = sha256(model, prompt_version,
sha256(episode text)), unique per episode: the same request is never sent
twice, and a retried batch updates its failed rows instead of adding rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet
from django.utils import timezone

from annotate.coding.labels import final_labels
from annotate.jobs.runner import job_checkpoint_save, job_start
from annotate.models import (
    Adjudication,
    Coding,
    Episode,
    Job,
    LabelRule,
    LocalModel,
    Split,
    Study,
    SuggesterAudit,
    Suggestion,
    SuggestionBackend,
    SuggestionRejection,
    SuggestionStatus,
)
from annotate.suggestions.base import (
    AXES,
    Answer,
    CodebookSpec,
    cache_key,
    codebook_spec,
    episode_text,
    prompt_family,
    reading,
)
from annotate.suggestions.steps import suggestions_attribute
from taxonomy.models import AxisValue, FailureType

KEEP_MODELS = 3

# Local scoring is vectorised, so big chunks; LLM answers are stored every few
# requests so a crash mid-batch loses (and re-pays for) little.
CHUNK = {SuggestionBackend.LOCAL: 500, SuggestionBackend.OPENAI: 16}


def default_backend() -> str:
    """The LLM when a key is configured, else the local model."""
    return SuggestionBackend.OPENAI if settings.OPENAI_API_KEY else SuggestionBackend.LOCAL


def _check_backend(backend: str) -> None:
    if backend not in SuggestionBackend.values:
        raise ValidationError({"backend": f"unknown backend '{backend}' (choose local or openai)"})
    if backend == SuggestionBackend.OPENAI and not settings.OPENAI_API_KEY:
        raise ValidationError({"backend": "the openai backend needs OPENAI_API_KEY to be set"})


def suggestion_batch_start(
    *,
    study: Study,
    user,
    backend: str | None = None,
    episode_ids: list[int] | None = None,
    limit: int | None = None,
    refresh: bool = False,
) -> Job:
    """Start a "suggest" Job for the study's episodes that have no suggestion from this backend yet (with
    `refresh`, also those suggested under an older example pool)."""
    backend = backend or default_backend()
    _check_backend(backend)
    if limit is not None and limit < 1:
        raise ValidationError({"limit": "limit must be a positive number"})
    params: dict[str, Any] = {"backend": backend}
    if episode_ids is not None:
        params["episode_ids"] = [int(e) for e in episode_ids]
    if limit is not None:
        params["limit"] = int(limit)
    if refresh:
        params["refresh"] = True
    return job_start(kind="suggest", study=study, user=user, params=params)


def local_retrain_start(*, study: Study, user) -> Job:
    """Start a "retrain" Job for the study's local model."""
    return job_start(kind="retrain", study=study, user=user, params={})


# --- suggesters --------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _load_local_model(pk: int, trained_at):
    """Unpickle a stored model. The cache key has its training time too: SQLite can hand a rolled-back
    row's id out again, and a model cached inside a failed job must not stand in for the new one."""
    from annotate.suggestions.local_model import model_loads

    blob = LocalModel.objects.values_list("blob", flat=True).get(pk=pk)
    model = model_loads(blob)
    model.model_id = pk
    model.trained_at = trained_at
    return model


def local_model_current(study: Study):
    """The study's newest trained local model (unpickled, cached per process), or None."""
    row = LocalModel.objects.filter(study=study).values_list("pk", "trained_at").first()
    return _load_local_model(*row) if row else None


def fewshot_examples(study: Study, limit: int = 2000) -> list:
    """The LLM's few-shot pool: the study's final labels (annotate.coding.labels: agreed, single-coder or
    adjudicated, as analysis reads them) of its newest `limit` coded primary episodes, in episode order.

    Hold-out and excluded episodes are never examples: the hold-out split is kept apart to measure on, and an
    excluded episode repeats text that its smaller episodes carry. Labels asking for a new type have no code to
    show. Suggestions and the audit both take their examples from here (the audit leaves out its test fold).
    Six queries whatever the number of labels (up to 2000: one chunk of final_labels)."""
    from annotate.suggestions.prompts import FewShot

    adjudicated = Adjudication.objects.filter(episode=OuterRef("pk"))
    coded = Episode.objects.filter(Q(n_codings__gte=1) | Exists(adjudicated), study=study, split=Split.PRIMARY)
    ids = list(coded.order_by("-id").values_list("id", flat=True)[:limit])
    if not ids:
        return []
    type_code = dict(FailureType.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    axis_code = dict(AxisValue.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    out = []
    for episode, label in final_labels(study, coded.filter(id__gte=ids[-1]), chunk=limit):
        if not label.usable or label.needs_new_type or not (label.not_a_failure or label.failure_type_id):
            continue
        naf = label.not_a_failure
        out.append(
            FewShot(
                key=episode.pk,
                title=episode.document.title,
                text=episode_text(episode),
                failure_type=None if naf else type_code[label.failure_type_id],
                source=None if naf else axis_code.get(label.source_id),
                stage=None if naf else axis_code.get(label.stage_id),
                capability=None if naf else axis_code.get(label.capability_id),
            )
        )
    return out


def suggester_for(*, study: Study, backend: str, spec: CodebookSpec | None = None):
    """The configured suggester of `backend` for the study's codebook."""
    spec = spec or codebook_spec(study.codebook)
    if backend == SuggestionBackend.OPENAI:
        from annotate.suggestions.llm import LLMSuggester

        return LLMSuggester(spec, study_id=study.pk, examples=fewshot_examples(study))
    from annotate.suggestions.local import LocalSuggester

    return LocalSuggester(spec, local_model_current(study))


# --- storing answers ---------------------------------------------------------------------------


class _CodeMap:
    """Codes of one codebook to rows, loaded once per batch."""

    def __init__(self, codebook_id: int):
        self.types = {t.code: t for t in FailureType.objects.filter(codebook_id=codebook_id)}
        self.axes = {a: {} for a in AXES}
        for v in AxisValue.objects.filter(codebook_id=codebook_id):
            self.axes[v.axis][v.code] = v

    def unknown(self, answer: Answer) -> list[str]:
        bad = []
        for c in answer.candidates:
            if c.failure_type not in self.types:
                bad.append(f"failure_type '{c.failure_type}'")
            for axis in AXES:
                if getattr(c, axis) not in self.axes[axis]:
                    bad.append(f"{axis} '{getattr(c, axis)}'")
        return bad


def _apply_answer(row: Suggestion, answer: Answer, codes: _CodeMap) -> None:
    # Defence in depth: the suggesters validate codes already, but nothing outside
    # the codebook may ever reach a stored suggestion.
    unknown = codes.unknown(answer) if not answer.error else []
    error = answer.error or (f"codes outside the codebook: {', '.join(unknown)}" if unknown else "")
    row.error = error
    row.input_tokens = (row.input_tokens or 0) + answer.input_tokens
    row.output_tokens = (row.output_tokens or 0) + answer.output_tokens
    row.cost = Decimal(row.cost or 0) + Decimal(str(round(answer.cost, 6)))
    row.evidence_flagged = answer.evidence_flagged and not error
    top = answer.top if not error else None
    row.not_a_failure = answer.not_a_failure and not error
    row.candidates = [c.as_dict() for c in answer.candidates] if not error else []
    row.status = SuggestionStatus.FAILED if error else SuggestionStatus.PENDING
    use_top = top is not None and not row.not_a_failure
    row.failure_type = codes.types[top.failure_type] if use_top else None
    for axis in AXES:
        setattr(row, axis, codes.axes[axis][getattr(top, axis)] if use_top else None)
    row.confidence = top.confidence if top is not None else None
    row.rationale = top.rationale if top is not None else "; ".join(answer.notes)
    row.evidence = top.evidence if top is not None else ""
    row.abstain_reason = answer.abstain_reason if not error else ""
    row.instructions_flagged = answer.instructions_flagged and not error
    row.language_capped = answer.language_capped and not error


def _store(
    *,
    items: list[tuple[Episode, str, Answer]],
    suggester,
    codes: _CodeMap,
    existing: dict[tuple[int, str], Suggestion],
    job: Job | None,
    on_stored: Callable[[list[Suggestion]], None] | None = None,
) -> list[Suggestion]:
    """Write answers: new rows in bulk, failed rows of an earlier run updated in place.

    `on_stored(rows)` runs in the same transaction, so a job's checkpoint commits with its rows.
    """
    new, stale = [], []
    for episode, key, answer in items:
        row = existing.get((episode.pk, key))
        if row is None:
            row = Suggestion(
                episode=episode,
                backend=suggester.backend,
                model=suggester.model,
                prompt_version=suggester.prompt_version,
                cache_key=key,
                job=job,
            )
            new.append(row)
        else:
            row.job = job
            stale.append(row)
        _apply_answer(row, answer, codes)
    with transaction.atomic():
        # A concurrent run of the same batch may have written a row first: the unique
        # (episode, cache_key) constraint keeps the first, and nothing is duplicated.
        Suggestion.objects.bulk_create(new, ignore_conflicts=True)
        if stale:
            Suggestion.objects.bulk_update(
                stale,
                [
                    "error",
                    "input_tokens",
                    "output_tokens",
                    "cost",
                    "evidence_flagged",
                    "not_a_failure",
                    "candidates",
                    "status",
                    "failure_type",
                    "source",
                    "stage",
                    "capability",
                    "confidence",
                    "rationale",
                    "evidence",
                    "abstain_reason",
                    "instructions_flagged",
                    "language_capped",
                    "job",
                ],
            )
        if on_stored is not None:
            on_stored(new + stale)
    return new + stale


def episodes_to_suggest(
    *,
    study: Study,
    backend: str,
    model: str,
    prompt_version: str,
    episode_ids: Iterable[int] | None = None,
    refresh: bool = False,
) -> QuerySet[Episode]:
    """The study's episodes without a usable (non-error) suggestion from this backend, model and prompt family
    (base.prompt_family: an older example pool counts as done); with `refresh`, from this very prompt version."""
    same: dict = {"prompt_version": prompt_version}
    if not refresh:
        same = {"prompt_version__startswith": prompt_family(prompt_version)}
    done = Suggestion.objects.filter(episode=OuterRef("pk"), backend=backend, model=model, error="", **same)
    qs = Episode.objects.filter(study=study).exclude(Exists(done))
    if episode_ids is not None:
        qs = qs.filter(pk__in=list(episode_ids))
    return qs.select_related("document").order_by("id")


def _answer_chunk(
    suggester, texts: list[str], titles: list[str], ids: list[int], tick: Callable[[], None], documents=None
) -> list[tuple[int, Answer]]:
    """(position, answer) for each text; the LLM reports answers as they arrive, in any order."""
    if suggester.backend == SuggestionBackend.LOCAL:
        context = {}
        if documents is not None:
            context = {"clusters": [d.cluster for d in documents], "kinds": [d.kind for d in documents]}
        return list(enumerate(suggester.suggest_texts(texts, ids, titles, **context)))
    out: list[tuple[int, Answer]] = []

    def on_answer(j: int, answer: Answer) -> None:
        out.append((j, answer))
        tick()

    suggester.suggest_many(texts, on_answer, titles, ids)
    return out


def _batch_plan(qs: QuerySet[Episode], limit: int | None) -> dict[str, Any]:
    """A batch's fixed extent, taken when it starts: at most `limit` of the episodes up to the highest id now."""
    agg = qs.order_by().aggregate(n=Count("id"), last=Max("id"))
    total = min(agg["n"], limit) if limit else agg["n"]
    counts = {"suggested": 0, "errors": 0, "flagged": 0, "input_tokens": 0, "output_tokens": 0}
    return {"max_id": agg["last"] or 0, "after_id": 0, "done": 0, "total": total, "counts": counts, "cost": "0"}


def _chunk_answers(suggester, chunk: list[Episode], tick: Callable[[], None]) -> tuple[list, dict]:
    """Answers for a chunk's episodes that have no usable stored one: [(episode, cache key, answer)], and the
    suggestions already stored for the chunk by (episode id, cache key) (a failed one is answered again)."""
    texts = [episode_text(e) for e in chunk]
    titles = [e.document.title for e in chunk]
    keys = [
        cache_key(suggester.model, suggester.prompt_version, reading(ti, t))
        for ti, t in zip(titles, texts, strict=True)
    ]
    existing = {
        (s.episode_id, s.cache_key): s for s in Suggestion.objects.filter(episode__in=chunk, cache_key__in=keys)
    }
    cached = {k for k, s in existing.items() if not s.error}
    todo = [i for i, e in enumerate(chunk) if (e.pk, keys[i]) not in cached]
    pairs = _answer_chunk(
        suggester, [texts[i] for i in todo], [titles[i] for i in todo], [chunk[i].pk for i in todo], tick,
        [chunk[i].document for i in todo] if getattr(suggester, "reads_context", False) else None,
    )  # fmt: skip
    return [(chunk[todo[j]], keys[todo[j]], answer) for j, answer in pairs], existing


def suggestions_make(
    *,
    study: Study,
    backend: str,
    episode_ids: Iterable[int] | None = None,
    limit: int | None = None,
    job: Job | None = None,
    progress: Callable[[int, int], None] | None = None,
    suggester=None,
    refresh: bool = False,
) -> dict[str, Any]:
    """Suggest codes for the study's episodes that lack them; returns counts for the Job result. With `refresh`,
    also those whose suggestion came from an older prompt of the same template (another example pool).

    It writes Suggestion rows and nothing else (the audit checks that). With the local backend it first retrains
    the study's model when enough new labels exist.

    Episodes are taken in id order, a chunk at a time. Run by a job, each chunk's suggestions commit together with
    the job's checkpoint (how many episodes are done, the last id, the counts), so a retried job continues after
    the last committed chunk: it never suggests an episode twice, never goes past the `limit` the batch started
    with, and reports the counts of the whole batch.
    """
    if suggester is None:
        _check_backend(backend)
    trained = None
    if backend == SuggestionBackend.LOCAL and suggester is None:
        trained = local_model_refresh(study=study, job=job)
    suggester = suggester or suggester_for(study=study, backend=backend)
    which = {"backend": suggester.backend, "model": suggester.model, "prompt_version": suggester.prompt_version}
    qs = episodes_to_suggest(study=study, episode_ids=episode_ids, refresh=refresh, **which)
    checkpointed = job is not None and bool(job.lease_owner)
    saved = (job.checkpoint or {}).get("suggest") if checkpointed else None
    plan = dict(saved) if saved else _batch_plan(qs, limit)
    counts, cost, total = dict(plan["counts"]), Decimal(plan["cost"]), plan["total"]
    progress = progress or (lambda done, total: None)
    progress(plan["done"], total)
    codes = _CodeMap(study.codebook_id)
    size = CHUNK[suggester.backend]
    while plan["done"] < total:
        chunk = list(qs.filter(pk__gt=plan["after_id"], pk__lte=plan["max_id"])[: min(size, total - plan["done"])])
        if not chunk:
            break
        ticks = [plan["done"]]

        def tick(ticks=ticks) -> None:
            ticks[0] += 1
            progress(ticks[0], total)

        results, existing = _chunk_answers(suggester, chunk, tick)
        for _, _, answer in results:
            counts["input_tokens"] += answer.input_tokens
            counts["output_tokens"] += answer.output_tokens
            cost += Decimal(str(round(answer.cost, 6)))
        plan = {**plan, "after_id": chunk[-1].pk, "done": plan["done"] + len(chunk)}

        def record(rows: list[Suggestion], plan=plan, cost=cost) -> None:
            for row in rows:
                counts["errors" if row.error else "suggested"] += 1
                counts["flagged"] += int(row.evidence_flagged)
            plan.update(counts=dict(counts), cost=str(cost))
            if checkpointed:
                job_checkpoint_save(job=job, checkpoint={"suggest": plan}, done=plan["done"], total=total)

        stored = _store(items=results, suggester=suggester, codes=codes, existing=existing, job=job, on_stored=record)
        # After the rows' transaction: the openai backend's attribution is a request of its own.
        counts["attributed"] = counts.get("attributed", 0) + suggestions_attribute(rows=stored, suggester=suggester)
        progress(plan["done"], total)
    return {
        "episodes": total,
        **counts,
        "backend": suggester.backend,
        "model": suggester.model,
        "cost": float(cost),
        "trained_on": trained.n_train if trained is not None else None,
    }


@transaction.atomic
def suggestion_reject(*, suggestion: Suggestion, user) -> SuggestionRejection:
    """Record that `user` rejects a suggestion: their own reaction, not the study's (SuggestionRejection).

    Other coders still see the suggestion as it came. Rejecting twice keeps the first rejection;
    a suggestion the user's own coding came from cannot be rejected by them.
    """
    if suggestion.error:
        raise ValidationError({"suggestion": "A failed suggestion is not a suggestion and cannot be rejected."})
    if suggestion.codings.filter(coder=user).exists():
        raise ValidationError({"suggestion": "Your coding of this episode came from this suggestion."})
    rejection, _ = SuggestionRejection.objects.get_or_create(suggestion=suggestion, coder=user)
    return rejection


# --- the local model ---------------------------------------------------------------------------


def training_examples(study: Study, spec: CodebookSpec | None = None) -> list:
    """The study's final labels (annotate.coding.labels) as training examples, in episode order."""
    from annotate.suggestions.local_model import TrainingExample

    type_code = dict(FailureType.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    axis_code = dict(AxisValue.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    out = []
    for episode, label in final_labels(study):
        if not label.usable:
            continue
        out.append(
            TrainingExample(
                episode_id=episode.pk,
                text=episode_text(episode),
                title=episode.document.title,
                cluster=episode.document.cluster,
                kind=episode.document.kind,
                failure_type=type_code.get(label.failure_type_id),
                not_a_failure=label.not_a_failure,
                source=axis_code.get(label.source_id),
                stage=axis_code.get(label.stage_id),
                capability=axis_code.get(label.capability_id),
            )
        )
    return out


def local_model_train(*, study: Study, job: Job | None = None, examples: list | None = None) -> LocalModel:
    """Train the study's local model on its final labels and store it (refuses below the minimum)."""
    from annotate.suggestions.local_model import model_dumps, model_train

    spec = codebook_spec(study.codebook)
    examples = examples if examples is not None else training_examples(study, spec)
    minimum = settings.FAULTLINE_LOCAL_MIN_LABELS
    if len(examples) < minimum:
        raise ValidationError(
            {"labels": f"the study has {len(examples)} confirmed labels; the local model needs {minimum}"}
        )
    model = model_train(spec, examples)
    row = LocalModel.objects.create(study=study, blob=model_dumps(model), n_train=len(examples), job=job)
    # Models are megabytes each; the newest few are enough to compare and to fall back on.
    old = (
        LocalModel.objects.filter(study=study).order_by("-trained_at", "-pk").values_list("pk", flat=True)[KEEP_MODELS:]
    )
    LocalModel.objects.filter(pk__in=list(old)).delete()
    return row


def labels_upper_bound(study: Study) -> int:
    """At least as many as the study's usable final labels (annotate.coding.labels), from two index counts."""
    if study.label_rule == LabelRule.SINGLE_CODER:
        return Coding.objects.filter(episode__study=study, coder_id=study.label_coder_id).count()
    agreed_or_not = Episode.objects.filter(study=study, n_codings__gte=study.coders_per_episode).count()
    return agreed_or_not + Adjudication.objects.filter(episode__study=study).count()


def _stale(n_labels: int, n_train: int) -> bool:
    """A model is stale once the study has at least 10% (and 5) more labels than it was trained on."""
    return n_labels - n_train >= max(5, n_train // 10)


def local_model_refresh(*, study: Study, job: Job | None = None):
    """Retrain when the study has enough labels and the current model is missing, stale or for another codebook.

    Stale means at least 10% (and 5) more confirmed labels than it was trained on.
    Returns the trained model in use, or None for the codebook prior alone.
    """
    current = local_model_current(study)
    spec = codebook_spec(study.codebook)
    if current is not None and current.fingerprint == spec.fingerprint:
        # Retraining reads every episode's text and refits: not for every incident's one suggestion
        # while coders are busy. The model must be old enough, and a count must bound enough new labels.
        if (timezone.now() - current.trained_at).total_seconds() < settings.FAULTLINE_LOCAL_RETRAIN_EVERY_S:
            return current
        if not _stale(labels_upper_bound(study), current.n_train):
            return current
    elif labels_upper_bound(study) < settings.FAULTLINE_LOCAL_MIN_LABELS:
        return None
    examples = training_examples(study)
    if len(examples) < settings.FAULTLINE_LOCAL_MIN_LABELS:
        return current if current is not None and current.fingerprint == spec.fingerprint else None
    grown = current is not None and _stale(len(examples), current.n_train)
    if current is None or grown or current.fingerprint != spec.fingerprint:
        row = local_model_train(study=study, job=job, examples=examples)
        current = _load_local_model(row.pk, row.trained_at)
    return current


def suggester_audit_record(*, study: Study, report, user=None) -> SuggesterAudit:
    """Store an audit's result (annotate.suggestions.audit.AuditReport) for the Suggestions page: one row,
    nothing else."""
    return SuggesterAudit.objects.create(
        study=study,
        backend=report.backend,
        model=report.model,
        n_labels=report.n_labels,
        passed=report.passed,
        result=report.as_dict(),
        created_by=user,
    )


def suggester_audit_start(*, study: Study, user, backend: str | None = None) -> Job:
    """Start an "audit" Job: the read-only audit, then its result recorded."""
    backend = backend or default_backend()
    _check_backend(backend)
    return job_start(kind="audit", study=study, user=user, params={"backend": backend})
