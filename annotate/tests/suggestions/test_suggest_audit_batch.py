"""Audit checks 8-9 on a study whose every episode is suggested already: the batch still answers and writes
(inside the rolled-back transaction), nothing of it stays, and a bad suggester still fails them."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from annotate.models import Study, Suggestion
from annotate.suggestions import audit
from annotate.suggestions.audit import db_snapshot, suggester_audit
from annotate.suggestions.base import codebook_spec
from annotate.suggestions.local import LocalSuggester
from annotate.suggestions.services import suggestions_make
from annotate.tests.factories.report_texts import JSON_EN, LOOP_EN, MAX_ITERATIONS, RATE_EN, SHORT_LOOP

pytestmark = pytest.mark.django_db

BODIES = (RATE_EN, LOOP_EN, JSON_EN, MAX_ITERATIONS, SHORT_LOOP)


def _suggested(study, make_episode, suggester) -> list:
    episodes = [make_episode(study, body=b) for b in BODIES]
    result = suggestions_make(study=study, backend="local", suggester=suggester)
    assert result["suggested"] == len(BODIES) and Suggestion.objects.count() == len(BODIES)
    return episodes


def _rows() -> list[tuple]:
    return list(Suggestion.objects.order_by("pk").values_list("pk", "episode_id", "cache_key", "prompt_version"))


def test_on_a_fully_suggested_study_the_batch_writes_a_row_per_episode_and_none_stays(study, make_episode, monkeypatch):
    suggester = LocalSuggester(codebook_spec(study.codebook))
    _suggested(study, make_episode, suggester)
    stored, before = _rows(), db_snapshot()
    seen = []
    real = audit.suggestions_make

    def counting(**kw):
        n = Suggestion.objects.count()
        result = real(**kw)
        mine = Suggestion.objects.filter(prompt_version=suggester.prompt_version, backend="local")
        seen.append((Suggestion.objects.count() - n, mine.count(), sorted(mine.values_list("episode_id", flat=True))))
        return result

    monkeypatch.setattr(audit, "suggestions_make", counting)
    report = suggester_audit(study=study, backend="local", sample=2, n_episodes=5, suggester=suggester)

    by = {c.number: c for c in report.checks}
    ids = sorted(e for _, e, _, _ in stored)
    # Inside the transaction: the first batch wrote five new rows, one per episode, the stored five set aside;
    # the second batch (check 9) wrote none.
    assert seen == [(5, 5, ids), (0, 5, ids)]
    assert by[8].passed and "5 suggestions set aside" in by[8].summary and "5 Suggestion rows written" in by[8].summary
    assert by[9].passed and "0 episodes to do" in by[9].summary
    # After the audit: the stored suggestions as they were, and nothing else.
    assert _rows() == stored and db_snapshot() == before


class _Writes(LocalSuggester):
    """A bad suggester: every scoring also changes the study."""

    def suggest_texts(self, texts, episode_ids=None, titles=None, **context):
        Study.objects.filter(pk=self.study_pk).update(description=f"touched {random.random()}")
        return super().suggest_texts(texts, episode_ids, titles, **context)


class _Wobbles(LocalSuggester):
    """A bad suggester: the same text gets another confidence each time."""

    def suggest_texts(self, texts, episode_ids=None, titles=None, **context):
        answers = super().suggest_texts(texts, episode_ids, titles, **context)
        return [
            replace(a, candidates=tuple(replace(c, confidence=round(random.random(), 4)) for c in a.candidates))
            for a in answers
        ]


@pytest.mark.parametrize(("bad", "check"), [(_Writes, 8), (_Wobbles, 9)])
def test_a_bad_suggester_fails_checks_8_9_on_a_fully_suggested_study(study, make_episode, bad, check):
    suggester = bad(codebook_spec(study.codebook))
    suggester.study_pk = study.pk
    _suggested(study, make_episode, suggester)
    stored, before = _rows(), db_snapshot()
    by = {c.number: c for c in suggester_audit(study=study, backend="local", sample=2, suggester=suggester).checks}
    assert by[check].passed is False, by[check].summary
    if check == 8:
        assert any(f.startswith("annotate.Study:") for f in by[8].failures)
    else:
        assert any("answers differ" in f for f in by[9].failures)
    assert _rows() == stored and db_snapshot() == before


def test_suggestions_of_an_older_example_pool_are_set_aside_too(study, make_episode):
    """A batch counts a suggestion of the same prompt family (another example pool) as done, so the audit must set
    those aside as well, or its batch would answer nothing and check 8 would fail a sound suggester."""
    suggester = LocalSuggester(codebook_spec(study.codebook))
    _suggested(study, make_episode, suggester)
    older = f"{suggester.prompt_version[:32]}-{'0' * 31}"
    Suggestion.objects.update(prompt_version=older)
    stored = _rows()
    report = suggester_audit(study=study, backend="local", sample=2, n_episodes=5, suggester=suggester)
    by = {c.number: c for c in report.checks}
    assert by[8].passed, by[8].details
    assert "5 suggestions set aside" in by[8].summary and "5 Suggestion rows written" in by[8].summary
    assert _rows() == stored


def test_check_8_fails_a_batch_that_writes_no_row(study, make_episode, monkeypatch):
    suggester = LocalSuggester(codebook_spec(study.codebook))
    _suggested(study, make_episode, suggester)
    # A batch that answers nothing (e.g. one that takes cached answers for new ones) must not pass check 8.
    monkeypatch.setattr(audit, "suggestions_make", lambda **kw: {"episodes": 0, "errors": 0})
    by = {c.number: c for c in suggester_audit(study=study, backend="local", sample=2, suggester=suggester).checks}
    assert by[8].passed is False
    assert by[8].failures[-1].startswith("the batch wrote 0 Suggestion rows for 5 episodes")
