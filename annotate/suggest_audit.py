"""The suggester audited as an instrument: five known-answer controls.

1. Each type's own codebook example gets that type in the top 3.
2. Empty or irrelevant text gets "not a failure", or every confidence under 0.3.
3. Harmless rewrites (case, whitespace, reordered sentences) keep the top-1 type.
4. A batch writes Suggestion rows and changes nothing else in the database
   (every other table's row count and content hash, before and after).
5. Repeating the batch with the cache on sends nothing and changes nothing,
   and (local backend) scoring the same texts twice gives identical answers.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from django.apps import apps
from django.db import connection

from .models import Episode, Study, Suggestion
from .services.suggestions import episodes_to_suggest, suggester_for, suggestions_make
from .suggest_base import codebook_spec

IRRELEVANT = (
    "Thanks, closing this.",
    "",
    "+1",
    "Any update on this?",
    "Duplicate of #12.",
    "Merged, thank you!",
)
LOW_CONFIDENCE = 0.3
MAX_LISTED = 25


@dataclass
class CheckResult:
    number: int
    name: str
    passed: bool
    summary: str
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "check": self.number,
            "name": self.name,
            "passed": self.passed,
            "summary": self.summary,
            "failures": self.failures[:MAX_LISTED],
            "n_failures": len(self.failures),
        }


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
    return CheckResult(1, "own example in top 3", not failures, f"{n - len(failures)}/{n} types", failures)


def _check_irrelevant(suggester) -> CheckResult:
    answers = suggester.suggest_texts(list(IRRELEVANT))
    failures = []
    for text, a in zip(IRRELEVANT, answers, strict=True):
        high = [c for c in a.candidates if c.confidence >= LOW_CONFIDENCE]
        if a.error or not (a.not_a_failure or not high):
            top = f"{high[0].failure_type} at {high[0].confidence:.2f}" if high else a.error
            failures.append(f"{text!r}: {top}")
    n = len(IRRELEVANT)
    return CheckResult(
        2,
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
        before = base[i].top.failure_type if base[i].top else None
        after = a.top.failure_type if a.top else None
        if before != after:
            failures.append(f"{types[i].code} example, {name}: top 1 {before} → {after}")
    n = len(variants)
    return CheckResult(3, "harmless rewrites keep the top-1 type", not failures, f"{n - len(failures)}/{n}", failures)


def db_snapshot(exclude: tuple[type, ...] = ()) -> dict[str, tuple[int, str]]:
    """Row count and a content hash of every table (by model), except `exclude`."""
    out = {}
    for model in apps.get_models(include_auto_created=True):
        if model in exclude or model._meta.proxy or not model._meta.managed:
            continue
        if model._meta.db_table not in connection.introspection.table_names():
            continue
        h, n = hashlib.sha256(), 0
        for row in model._base_manager.order_by("pk").values_list().iterator(chunk_size=2000):
            # Binary columns come back as memoryview on PostgreSQL, whose repr is an address.
            h.update(repr(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)).encode())
            n += 1
        out[model._meta.label] = (n, h.hexdigest())
    return out


def _check_db_and_cache(suggester, study: Study, n_episodes: int) -> tuple[CheckResult, CheckResult]:
    # Episodes this suggester has not answered yet make the batch actually write; else any.
    todo = episodes_to_suggest(
        study=study, backend=suggester.backend, model=suggester.model, prompt_version=suggester.prompt_version
    )
    ids = list(todo.values_list("id", flat=True)[:n_episodes]) or list(
        Episode.objects.filter(study=study).order_by("id").values_list("id", flat=True)[:n_episodes]
    )
    before = db_snapshot(exclude=(Suggestion,))
    n_before = Suggestion.objects.count()
    first = suggestions_make(study=study, backend=suggester.backend, episode_ids=ids, suggester=suggester)
    after = db_snapshot(exclude=(Suggestion,))
    changed = [
        f"{label}: {before.get(label)} → {after.get(label)}" for label in after if before.get(label) != after[label]
    ]
    written = Suggestion.objects.count() - n_before
    check4 = CheckResult(
        4,
        "a batch changes nothing but Suggestion rows",
        not changed,
        f"{len(ids)} episodes, {written} Suggestion rows written, {len(after)} other tables unchanged"
        if not changed
        else f"{len(changed)} tables changed",
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
    check5 = CheckResult(
        5,
        "repeated calls with the cache on give identical output",
        not failures,
        f"second batch: {second['episodes']} episodes to do, {sent} requests",
        failures,
    )
    return check4, check5


def suggester_audit(
    *, study: Study, backend: str, sample: int | None = None, n_episodes: int = 5, suggester=None
) -> list[CheckResult]:
    """Run the five controls against the study's suggester of `backend` and return their results."""
    spec = codebook_spec(study.codebook)
    suggester = suggester or suggester_for(study=study, backend=backend, spec=spec)
    results = [
        _check_examples(suggester, spec, sample),
        _check_irrelevant(suggester),
        _check_rewrites(suggester, spec, sample),
    ]
    results += list(_check_db_and_cache(suggester, study, n_episodes))
    return results
