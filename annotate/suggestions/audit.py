"""The suggester audited as an instrument, against known answers from the study itself. It writes nothing.

Checks, in order:
1. Cross-validated accuracy on the study's final labels (annotate.coding.labels: adjudicated or
   agreed): k=5 folds, leave-one-out below 50 labels. Per axis, top-1 and top-3 with
   Wilson intervals, the most-common-value baseline learnt on the training folds, and
   the expected calibration error of the top-1 type confidence. It fails when an axis
   is not better than its baseline at the 95% level (one-sided exact McNemar test) or
   the ECE is above 0.15, and says "not enough labels" below 20.
   The local backend is retrained on each training fold; the LLM backend asks with the
   very prompts suggestions get (the same example pool, services.fewshot_examples, and
   the same `messages`), except that no test-fold episode is ever an example.
2. Wrapping each of the study's episodes in a GitHub issue template (headings,
   checkboxes, an Environment block) keeps its top-1 type.
3. A template with no report in it gets "not a failure", a decline, or confidences under 0.3.
4. The study's episodes written in a script the model does not read (their letters
   mapped onto CJK characters, code blocks kept) are declined, or left under 0.3.
5. Each type's own codebook example gets that type in the top 3.
6. Empty or irrelevant text gets "not a failure", or every confidence under 0.3.
7. Harmless rewrites (case, whitespace, reordered sentences) keep the top-1 type.
8. A suggestion batch writes one Suggestion row per episode and changes nothing else in
   the database (every other table's row count and content hash, before and after). On
   episodes this suggester has answered already, their stored suggestions are first set
   aside (re-keyed, inside the transaction), so the batch always answers and writes.
9. Repeating the batch with the cache on sends nothing and changes nothing, and
   (local backend) scoring the same texts twice gives identical answers.

Read-only: everything runs inside one transaction that is rolled back at the end,
so the batch of checks 8-9 leaves no Suggestion behind and no job is enqueued
(on-commit hooks never run). Recording a result for the Suggestions page is a
separate, explicit write (annotate.suggestions.services.suggester_audit_record).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from django.apps import apps
from django.db import connection, transaction
from django.db.models import Count, Value
from django.db.models.functions import Concat, Substr

from annotate.coding.labels import final_labels
from annotate.models import Episode, Study, Suggestion, SuggestionBackend
from annotate.suggestions._eval import NAF, LabelledText, Measurement, audit_folds, cross_validate, predicted
from annotate.suggestions._text import TEMPLATE_ONLY, template_wrap
from annotate.suggestions.base import codebook_spec, episode_text, prompt_family
from annotate.suggestions.services import episodes_to_suggest, suggester_for, suggestions_make
from taxonomy.models import AxisValue, FailureType

IRRELEVANT = (
    "Thanks, closing this.",
    "",
    "+1",
    "Any update on this?",
    "Duplicate of #12.",
    "Merged, thank you!",
)
LOW_CONFIDENCE = 0.3
MAX_ECE = 0.15
MIN_LABELS = 20
MAX_LISTED = 25
INVARIANCE_EPISODES = 30
SET_ASIDE = "set aside by the audit"


@dataclass
class CheckResult:
    number: int
    name: str
    passed: bool | None  # None: could not be run (not enough labels)
    summary: str
    failures: list[str] = field(default_factory=list)
    data: dict | None = None

    def as_dict(self) -> dict:
        out = {
            "check": self.number,
            "name": self.name,
            "passed": self.passed,
            "summary": self.summary,
            "failures": self.failures[:MAX_LISTED],
            "n_failures": len(self.failures),
        }
        if self.data is not None:
            out["data"] = self.data
        return out


@dataclass
class AuditReport:
    backend: str
    model: str
    n_labels: int
    checks: list[CheckResult]

    @property
    def passed(self) -> bool | None:
        """False if any check failed; None if none failed but the labelled check lacked labels; else True."""
        if any(c.passed is False for c in self.checks):
            return False
        return None if any(c.passed is None for c in self.checks) else True

    def as_dict(self) -> dict:
        return {
            "backend": self.backend,
            "model": self.model,
            "n_labels": self.n_labels,
            "passed": self.passed,
            "checks": [c.as_dict() for c in self.checks],
        }


# --- 1: the study's own labels ---------------------------------------------------------------------


def labelled_items(study: Study, spec) -> list[LabelledText]:
    """The study's usable final labels as measurement items (labels needing a new type are left out)."""
    type_code = dict(FailureType.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    axis_code = dict(AxisValue.objects.filter(codebook_id=study.codebook_id).values_list("pk", "code"))
    items = []
    for episode, label in final_labels(study):
        if not label.usable or label.needs_new_type:
            continue
        items.append(
            LabelledText(
                key=episode.pk,
                title=episode.document.title,
                text=episode_text(episode),
                cluster=episode.document.cluster,
                kind=episode.document.kind,
                failure_type=NAF if label.not_a_failure else type_code.get(label.failure_type_id),
                source=axis_code.get(label.source_id),
                stage=axis_code.get(label.stage_id),
                capability=axis_code.get(label.capability_id),
            )
        )
    return items


def _fit_predict_for(backend: str, spec, study: Study, suggester):
    """How one fold is scored: the local model trained on the fold's training labels only; the LLM asked with the
    prompts suggestions get (the study's few-shot pool, nearest first), no test-fold episode among the examples."""
    if backend == SuggestionBackend.LOCAL:
        from annotate.suggestions.local import local_fit_predict

        return lambda train, test: local_fit_predict(spec, train, test)

    def llm(train, test):
        fold = suggester.excluding({i.key for i in test})
        return fold.suggest_texts([i.text for i in test], [i.key for i in test], [i.title for i in test])

    return llm


def _check_labels(items, fit_predict) -> tuple[CheckResult, Measurement | None]:
    name = "cross-validated accuracy on the study's final labels beats the most common value; ECE <= 0.15"
    n = len(items)
    if n < MIN_LABELS:
        return CheckResult(1, name, None, f"not enough labels: {n} final labels, {MIN_LABELS} needed"), None
    k = audit_folds(n)
    m = cross_validate(items, fit_predict, k=k)
    failures = []
    for f, s in m.axes.items():
        if s.n and not s.beats_baseline:
            failures.append(
                f"{f}: top-1 {s.top1:.0%} [{s.top1_low:.0%}, {s.top1_high:.0%}] is not better than the most "
                f"common value's {s.baseline:.0%} at the 95% level (p = {s.better_p})"
            )
    if m.ece is not None and m.ece > MAX_ECE:
        failures.append(f"calibration error {m.ece:.3f} is above {MAX_ECE}")
    folds = "leave-one-out" if k == n else f"{k}-fold"
    top = m.axes["failure_type"]
    summary = f"{n} labels, {folds}; type top-1 {top.top1:.0%}, top-3 {top.top3:.0%}, ECE {m.ece}"
    return CheckResult(1, name, not failures, summary, failures, data=m.as_dict()), m


# --- 2-4: invariance on the study's own episodes ------------------------------------------------------


def _sample_episodes(study: Study) -> list[Episode]:
    return list(Episode.objects.filter(study=study).select_related("document").order_by("id")[:INVARIANCE_EPISODES])


def _top1(answer) -> str | None:
    return predicted(answer)[0]["failure_type"]


def _unsure(answer) -> bool:
    """Declined, "not a failure", or no candidate at 0.3 or more."""
    if answer.error:
        return False
    return (
        bool(answer.abstain_reason)
        or answer.not_a_failure
        or all(c.confidence < LOW_CONFIDENCE for c in answer.candidates)
    )


def _check_template(suggester, episodes) -> CheckResult:
    name = "wrapping an episode in an issue template keeps its top-1 type"
    if not episodes:
        return CheckResult(2, name, True, "no episodes to check")
    texts = [episode_text(e) for e in episodes]
    titles = [e.document.title for e in episodes]
    answers = suggester.suggest_texts(texts + [template_wrap(t, x) for t, x in zip(titles, texts, strict=True)], None,
                                      titles + titles)  # fmt: skip
    base, wrapped = answers[: len(texts)], answers[len(texts) :]
    failures = [
        f"episode {e.pk}: top 1 {_top1(a)} → {_top1(b)}"
        for e, a, b in zip(episodes, base, wrapped, strict=True)
        if _top1(a) != _top1(b)
    ]
    n = len(episodes)
    return CheckResult(2, name, not failures, f"{n - len(failures)}/{n} episodes keep their top-1 type", failures)


def _check_template_only(suggester) -> CheckResult:
    name = f"a template with no report gets not a failure or confidences < {LOW_CONFIDENCE}"
    a = suggester.suggest_texts([TEMPLATE_ONLY], None, ["Bug report"])[0]
    ok = _unsure(a)
    top = a.candidates[0] if a.candidates else None
    summary = "declined or unsure" if ok else f"{top.failure_type} at {top.confidence:.2f}" if top else a.error
    return CheckResult(3, name, ok, summary, [] if ok else [summary])


_CJK = "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年"


def foreign_script(text: str) -> str:
    """The text with its prose letters mapped onto CJK characters (a script the local model does not read).

    Code blocks are kept, as a real report in another language would keep its logs.
    """
    out, code = [], False
    for line in text.split("\n"):
        if line.strip().startswith(("```", "~~~")):
            code = not code
            out.append(line)
            continue
        out.append(line if code else re.sub(r"[A-Za-z]", lambda m: _CJK[ord(m.group(0).lower()) - 97], line))
    return "\n".join(out)


def _check_language(suggester, episodes) -> CheckResult:
    name = f"text in a script the model does not read is declined, or left under {LOW_CONFIDENCE}"
    if not episodes:
        return CheckResult(4, name, True, "no episodes to check")
    answers = suggester.suggest_texts(
        [foreign_script(episode_text(e)) for e in episodes], None, [foreign_script(e.document.title) for e in episodes]
    )
    failures = [
        f"episode {e.pk}: {a.candidates[0].failure_type} at {a.candidates[0].confidence:.2f}"
        if a.candidates
        else f"episode {e.pk}: {a.error or 'answered'}"
        for e, a in zip(episodes, answers, strict=True)
        if not _unsure(a)
    ]
    n = len(episodes)
    return CheckResult(4, name, not failures, f"{n - len(failures)}/{n} declined or unsure", failures)


# --- 5-7: the codebook's own examples and harmless edits ----------------------------------------------


def rewrites(text: str) -> dict[str, str]:
    """Meaning-preserving variants of a text: case, whitespace, sentence order."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]
    return {
        "upper case": text.upper(),
        "lower case": text.lower(),
        "whitespace": "  " + re.sub(r"\s+", lambda m: "  \n " if m.start() % 2 else "   ", text) + "\n\n",
        "reordered sentences": " ".join(reversed(sentences)) if len(sentences) > 1 else text,
    }


def _check_examples(suggester, spec, sample: int | None) -> CheckResult:
    types = spec.types[:sample] if sample else spec.types
    answers = suggester.suggest_texts([t.example for t in types])
    failures = []
    for t, a in zip(types, answers, strict=True):
        top3 = [c.failure_type for c in a.candidates]
        if a.error or t.code not in top3:
            failures.append(f"{t.code}: top 3 {top3 or '-'}" + (f" (error: {a.error})" if a.error else ""))
    n = len(types)
    return CheckResult(5, "own example in top 3", not failures, f"{n - len(failures)}/{n} types", failures)


def _check_irrelevant(suggester) -> CheckResult:
    answers = suggester.suggest_texts(list(IRRELEVANT))
    failures = []
    for text, a in zip(IRRELEVANT, answers, strict=True):
        if not _unsure(a):
            high = [c for c in a.candidates if c.confidence >= LOW_CONFIDENCE]
            failures.append(
                f"{text!r}: " + (f"{high[0].failure_type} at {high[0].confidence:.2f}" if high else a.error)
            )
    n = len(IRRELEVANT)
    return CheckResult(
        6,
        f"irrelevant text: not a failure or all confidences < {LOW_CONFIDENCE}",
        not failures,
        f"{n - len(failures)}/{n} texts",
        failures,
    )


def _check_rewrites(suggester, spec, sample: int | None) -> CheckResult:
    types = spec.types[:sample] if sample else spec.types
    originals = [t.example for t in types]
    variants = [(i, name, v) for i, text in enumerate(originals) for name, v in rewrites(text).items()]
    answers = suggester.suggest_texts(originals + [v for _, _, v in variants])
    base, rest = answers[: len(originals)], answers[len(originals) :]
    failures = []
    for (i, name, _), a in zip(variants, rest, strict=True):
        before, after = _top1(base[i]), _top1(a)
        if before != after:
            failures.append(f"{types[i].code} example, {name}: top 1 {before} → {after}")
    n = len(variants)
    return CheckResult(7, "harmless rewrites keep the top-1 type", not failures, f"{n - len(failures)}/{n}", failures)


# --- 8-9: the batch, inside the rolled-back transaction -------------------------------------------------


def db_snapshot(exclude: tuple[type, ...] = ()) -> dict[str, tuple[int, str]]:
    """Row count and a content hash of every table (by model), except `exclude`."""
    out = {}
    tables = set(connection.introspection.table_names())
    for model in apps.get_models(include_auto_created=True):
        if model in exclude or model._meta.proxy or not model._meta.managed:
            continue
        if model._meta.db_table not in tables:
            continue
        h, n = hashlib.sha256(), 0
        for row in model._base_manager.order_by("pk").values_list().iterator(chunk_size=2000):
            # Binary columns come back as memoryview on PostgreSQL, whose repr is an address.
            h.update(repr(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)).encode())
            n += 1
        out[model._meta.label] = (n, h.hexdigest())
    return out


def _batch_episodes(suggester, study: Study, n_episodes: int) -> list[int]:
    """Up to `n_episodes` episodes for the batch: those this suggester has not answered first, then any."""
    todo = episodes_to_suggest(
        study=study, backend=suggester.backend, model=suggester.model, prompt_version=suggester.prompt_version
    )
    ids = list(todo.values_list("id", flat=True)[:n_episodes])
    if len(ids) < n_episodes:
        more = Episode.objects.filter(study=study).exclude(pk__in=ids).order_by("id").values_list("id", flat=True)
        ids += list(more[: n_episodes - len(ids)])
    return sorted(ids)


def _set_aside(suggester, ids: list[int]) -> int:
    """Re-key this suggester's stored suggestions of `ids` (inside the audit's rolled-back transaction), so the
    batch answers those episodes again and writes new rows: on a fully suggested study the batch would otherwise
    write nothing, and checks 8-9 would pass having tested nothing. Only Suggestion rows change."""
    # Every row the batch would count as done: the whole prompt family (an older example pool included).
    family = prompt_family(suggester.prompt_version)
    rows = Suggestion.objects.filter(
        episode_id__in=ids, backend=suggester.backend, model=suggester.model, prompt_version__startswith=family
    )
    # "-" is not a hex digit: a set-aside key can never equal a real one (64 hex digits).
    return rows.update(prompt_version=SET_ASIDE, cache_key=Concat(Value("-"), Substr("cache_key", 2)))


def _check_db_and_cache(suggester, study: Study, n_episodes: int) -> tuple[CheckResult, CheckResult]:
    ids = _batch_episodes(suggester, study, n_episodes)
    aside = _set_aside(suggester, ids)
    before = db_snapshot(exclude=(Suggestion,))
    n_before = Suggestion.objects.count()
    first = suggestions_make(study=study, backend=suggester.backend, episode_ids=ids, suggester=suggester)
    after = db_snapshot(exclude=(Suggestion,))
    changed = [
        f"{label}: {before.get(label)} → {after.get(label)}" for label in after if before.get(label) != after[label]
    ]
    written = Suggestion.objects.count() - n_before
    mine = Suggestion.objects.filter(
        episode_id__in=ids, backend=suggester.backend, model=suggester.model, prompt_version=suggester.prompt_version
    )
    per_episode = dict(mine.order_by().values_list("episode_id").annotate(n=Count("id")))
    wrong = [e for e in ids if per_episode.get(e, 0) != 1]
    if written != len(ids) or wrong:
        changed.append(
            f"the batch wrote {written} Suggestion rows for {len(ids)} episodes; expected one new row each"
            + (f" (episodes without exactly one: {wrong[:10]})" if wrong else "")
        )
    check8 = CheckResult(
        8,
        "a batch writes one Suggestion row per episode and changes nothing else (then rolled back)",
        not changed,
        f"{len(ids)} episodes ({aside} suggestions set aside to be made again), {written} Suggestion rows written, "
        f"{len(after)} other tables unchanged"
        if not changed
        else f"{len(changed)} problems",
        changed,
    )
    failures = []
    sugg_before = db_snapshot()["annotate.Suggestion"]
    requests_before = getattr(getattr(suggester, "stats", None), "requests", 0)
    second = suggestions_make(study=study, backend=suggester.backend, episode_ids=ids, suggester=suggester)
    if second["episodes"] != first["errors"]:
        failures.append(
            f"second batch worked on {second['episodes']} episodes; expected only the {first['errors']} failed"
        )
    if first["errors"] == 0 and db_snapshot()["annotate.Suggestion"] != sugg_before:
        failures.append("the second batch changed Suggestion rows")
    sent = getattr(getattr(suggester, "stats", None), "requests", 0) - requests_before
    if first["errors"] == 0 and sent:
        failures.append(f"the second batch sent {sent} requests")
    if suggester.backend == "local":
        texts = [t.example for t in suggester.spec.types] + list(IRRELEVANT)
        one = [a.comparable() for a in suggester.suggest_texts(texts)]
        two = [a.comparable() for a in suggester.suggest_texts(texts)]
        failures += [f"text {i}: answers differ" for i, (a, b) in enumerate(zip(one, two, strict=True)) if a != b]
    check9 = CheckResult(
        9,
        "repeated calls with the cache on give identical output",
        not failures,
        f"second batch: {second['episodes']} episodes to do, {sent} requests",
        failures,
    )
    return check8, check9


class _Rollback(Exception):
    pass


def suggester_audit(
    *, study: Study, backend: str, sample: int | None = None, n_episodes: int = 5, suggester=None
) -> AuditReport:
    """Run every check against the study's suggester of `backend`; the database is left exactly as it was."""
    report: AuditReport | None = None
    try:
        with transaction.atomic():
            report = _audit(study, backend, sample, n_episodes, suggester)
            raise _Rollback
    except _Rollback:
        pass
    assert report is not None
    return report


def _audit(study: Study, backend: str, sample: int | None, n_episodes: int, suggester) -> AuditReport:
    spec = codebook_spec(study.codebook)
    suggester = suggester or suggester_for(study=study, backend=backend, spec=spec)
    items = labelled_items(study, spec)
    check1, _ = _check_labels(items, _fit_predict_for(backend, spec, study, suggester))
    episodes = _sample_episodes(study)
    checks = [
        check1,
        _check_template(suggester, episodes),
        _check_template_only(suggester),
        _check_language(suggester, episodes),
        _check_examples(suggester, spec, sample),
        _check_irrelevant(suggester),
        _check_rewrites(suggester, spec, sample),
    ]
    checks += list(_check_db_and_cache(suggester, study, n_episodes))
    return AuditReport(backend=suggester.backend, model=suggester.model, n_labels=len(items), checks=checks)
