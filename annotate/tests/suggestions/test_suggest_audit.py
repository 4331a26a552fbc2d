"""audit_suggester: read-only, measured on the study's own final labels, failing where the suggester is at the floor."""

from __future__ import annotations

import contextlib
import json
import random
from io import StringIO

import pytest
from django.core.management import call_command

from annotate.models import Adjudication, Episode, SuggesterAudit, Suggestion
from annotate.suggestions.audit import db_snapshot, foreign_script, suggester_audit
from annotate.suggestions.base import Answer, Candidate, codebook_spec
from annotate.suggestions.local import LocalSuggester
from bench.suggest_eval_set import eval_rows

pytestmark = pytest.mark.django_db


def _dev_rows(n: int | None = None) -> list[dict]:
    rows = [r for r in eval_rows() if r["eval_fold"] == "dev"]
    return rows[:n] if n else rows


def _labelled_study(study, make_episode, codes, adjudicator, rows, *, shuffle_axis: str | None = None) -> list:
    """One adjudicated episode per evaluation row; `shuffle_axis` permutes that axis's labels (a floor study)."""
    values = [r[f"label_{shuffle_axis}"] for r in rows] if shuffle_axis else []
    random.Random(5).shuffle(values)
    episodes = []
    for i, r in enumerate(rows):
        ep = make_episode(study, kind=r["document_kind"], cluster=r["cluster"], title=r["title"], body=r["excerpt"])
        labels = {a: r[f"label_{a}"] for a in ("source", "stage", "capability")}
        if shuffle_axis and not r["label_not_a_failure"] and values[i]:
            labels[shuffle_axis] = values[i]
        naf = r["label_not_a_failure"] or not all(labels.values())
        Adjudication.objects.create(
            episode=ep,
            adjudicator=adjudicator,
            failure_type=None if naf else codes.type(r["label_failure_type"]),
            source=None if naf else codes.source(labels["source"]),
            stage=None if naf else codes.stage(labels["stage"]),
            capability=None if naf else codes.capability(labels["capability"]),
            not_a_failure=naf,
            rationale="gold label",
        )
        episodes.append(ep)
    return episodes


def test_it_changes_nothing_in_any_table(study, make_episode, codes, alice):
    _labelled_study(study, make_episode, codes, alice, _dev_rows(50))  # 5 folds: fewer fits than leave-one-out
    make_episode(study, title="Unsuggested", body="The search tool returned HTTP 429 Too Many Requests again.")
    before = db_snapshot()
    report = suggester_audit(study=study, backend="local", sample=5)
    assert db_snapshot() == before
    assert Suggestion.objects.count() == 0
    # The batch checks did run (and wrote, inside the transaction that was rolled back).
    assert "Suggestion rows written" in report.checks[7].summary and report.checks[7].passed


def test_it_says_not_enough_labels_below_twenty(study, make_episode, codes, alice):
    _labelled_study(study, make_episode, codes, alice, _dev_rows(12))
    report = suggester_audit(study=study, backend="local", sample=3)
    assert report.checks[0].passed is None and "not enough labels: 12" in report.checks[0].summary
    assert report.passed in (None, False) and report.n_labels == 12


def test_it_passes_where_the_suggester_is_clearly_above_the_most_common_value(study, make_episode, codes, alice):
    _labelled_study(study, make_episode, codes, alice, _dev_rows())
    report = suggester_audit(study=study, backend="local", sample=5)
    check = report.checks[0]
    assert check.passed, check.failures
    axes = check.data["axes"]
    assert all(axes[a]["beats_baseline"] for a in axes) and check.data["folds"] == 5 and check.data["ece"] <= 0.15
    assert axes["failure_type"]["top1_low"] < axes["failure_type"]["top1"] < axes["failure_type"]["top1_high"]


def test_it_fails_where_an_axis_is_at_the_most_common_value(study, make_episode, codes, alice):
    _labelled_study(study, make_episode, codes, alice, _dev_rows(), shuffle_axis="source")
    check = suggester_audit(study=study, backend="local", sample=5).checks[0]
    assert check.passed is False
    assert any(f.startswith("source:") and "not better than the most common value" in f for f in check.failures)
    assert not any(f.startswith("failure_type:") for f in check.failures)


class _FirstTypes(LocalSuggester):
    """A wrong suggester: always the first codebook types, confidently."""

    def suggest_texts(self, texts, episode_ids=None, titles=None, **context):
        first = self.spec.types[:3]
        return [
            Answer(
                candidates=tuple(
                    Candidate(t.code, t.typical_source, t.typical_stages[0], t.typical_capabilities[0], 0.9 - k / 10)
                    for k, t in enumerate(first)
                )
            )
            for _ in texts
        ]


def test_it_fails_a_suggester_that_forces_the_first_codebook_types(study, make_episode, codes, alice, monkeypatch):
    _labelled_study(study, make_episode, codes, alice, _dev_rows(24))
    wrong = _FirstTypes(codebook_spec(study.codebook))
    monkeypatch.setattr(
        "annotate.suggestions.local.local_fit_predict", lambda spec, train, test: wrong.suggest_texts(test)
    )
    report = suggester_audit(study=study, backend="local", sample=3, suggester=wrong)
    by = {c.number: c for c in report.checks}
    assert by[1].passed is False and any("calibration error" in f for f in by[1].failures)
    assert by[3].passed is False and by[4].passed is False and report.passed is False


def test_the_invariance_checks_pass_for_the_local_model_on_real_looking_episodes(study, make_episode, codes, alice):
    _labelled_study(study, make_episode, codes, alice, _dev_rows(10))
    by = {c.number: c for c in suggester_audit(study=study, backend="local", sample=3).checks}
    assert by[2].passed, by[2].failures
    assert by[3].passed, by[3].summary
    assert by[4].passed, by[4].failures


def test_the_foreign_script_keeps_code_and_maps_prose():
    text = "The agent looped.\n```\nTimeoutError: 30s\n```\n"
    out = foreign_script(text)
    assert "TimeoutError: 30s" in out and "agent" not in out and out.count("\n") == text.count("\n")


def test_the_command_writes_nothing_unless_told_to_record(study, make_episode, codes, alice):
    _labelled_study(study, make_episode, codes, alice, _dev_rows(50))
    before = db_snapshot()
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command("audit_suggester", "--study", study.slug, "--backend", "local", "--sample", "2", "--json",
                     stdout=out)  # fmt: skip
    data = json.loads(out.getvalue())
    assert data["n_labels"] == 50 and [c["check"] for c in data["checks"]] == list(range(1, 10))
    assert db_snapshot() == before
    with contextlib.suppress(SystemExit):  # exit 1 or 2 by the result; the row is what matters here
        call_command("audit_suggester", "--study", study.slug, "--backend", "local", "--sample", "2", "--record",
                     "--user", "alice", stdout=StringIO())  # fmt: skip
    row = SuggesterAudit.objects.get()
    assert row.n_labels == 50 and row.backend == "local" and row.created_by == alice
    assert row.result["checks"][0]["check"] == 1 and Episode.objects.filter(study=study).count() == 50
