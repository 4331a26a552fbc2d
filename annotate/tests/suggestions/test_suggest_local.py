"""The local suggester: codebook prior, trained model, batches, rejection, the retrain job and the audit."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.utils import timezone

from annotate.coding.services import CodingValues, coding_save
from annotate.jobs.runner import job_run
from annotate.models import Job, JobStatus, LocalModel, Suggestion, SuggestionStatus
from annotate.suggestions.base import cache_key, codebook_spec, codebook_spec_from_data, episode_text, reading
from annotate.suggestions.codebook_index import text_vectors
from annotate.suggestions.local import COLD_MODEL, LocalSuggester
from annotate.suggestions.services import (
    local_retrain_start,
    suggestion_batch_start,
    suggestion_reject,
    suggestions_make,
)

RATE_LIMIT = (
    "The agent kept calling the search API and got HTTP 429 Too Many Requests. "
    "It did not back off and the run failed after the provider throttled it."
)


def test_it_gives_unit_length_tfidf_vectors_in_the_codebook_space(codebook):
    X = text_vectors(codebook, [RATE_LIMIT, RATE_LIMIT.upper(), "zzz qqq", "a completely different memory failure"])
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    assert X.shape[0] == 4 and norms[0] == pytest.approx(1) and norms[2] == 0
    sims = (X @ X.T).toarray()
    assert sims[0, 1] == pytest.approx(1) and sims[0, 3] < sims[0, 1]


def test_it_reads_the_same_codebook_from_its_json_as_from_the_database(codebook):
    from conftest import CODEBOOK

    from_json = codebook_spec_from_data(json.loads(CODEBOOK.read_text()))
    assert (
        from_json.fingerprint == codebook_spec(codebook).fingerprint
        and from_json.types == codebook_spec(codebook).types
    )


def test_it_ranks_each_types_own_example_in_its_top_three(codebook):
    spec = codebook_spec(codebook)
    answers = LocalSuggester(spec).suggest_texts([t.example for t in spec.types])
    missing = [
        t.code for t, a in zip(spec.types, answers, strict=True) if t.code not in [c.failure_type for c in a.candidates]
    ]
    assert missing == []
    assert all(len(a.candidates) == 3 for a in answers)


def test_it_stores_local_suggestions_with_verbatim_evidence_and_a_rationale(study, make_episode, bob):
    ep = make_episode(study, title="Search tool throttled", body=RATE_LIMIT)
    result = suggestions_make(study=study, backend="local")
    s = Suggestion.objects.get(episode=ep)
    assert result["suggested"] == 1 and s.backend == "local" and s.model == COLD_MODEL and s.error == ""
    assert s.failure_type.codebook_id == study.codebook_id and s.source.axis == "source"
    assert s.stage.axis == "stage" and s.capability.axis == "capability"
    assert len(s.candidates) == 3 and s.candidates[0]["failure_type"] == s.failure_type.code
    assert 0 < s.confidence <= 1 and s.evidence and s.evidence in episode_text(ep)
    assert s.rationale.startswith(f"Matched indicator of {s.failure_type.code}: ")
    assert s.cache_key == cache_key(s.model, s.prompt_version, reading("Search tool throttled", episode_text(ep)))
    assert s.evidence in RATE_LIMIT  # quoted from the text the coder sees, never the title
    assert s.input_tokens == 0 and s.cost == 0


def test_it_writes_each_suggestion_once_and_respects_the_limit(study, make_episode, django_assert_max_num_queries):
    for i in range(12):
        make_episode(study, body=f"Run {i}: {RATE_LIMIT}")
    with django_assert_max_num_queries(20):
        first = suggestions_make(study=study, backend="local", limit=5)
    assert first["episodes"] == 5 and Suggestion.objects.count() == 5
    suggestions_make(study=study, backend="local")
    again = suggestions_make(study=study, backend="local")
    assert again["episodes"] == 0 and Suggestion.objects.count() == 12


def test_it_runs_a_batch_job_with_the_local_backend_without_a_key(study, make_episode, bob, settings):
    settings.OPENAI_API_KEY = ""
    ep = make_episode(study, body=RATE_LIMIT)
    make_episode(study, body=RATE_LIMIT + " Again.")
    job = suggestion_batch_start(study=study, user=bob, episode_ids=[ep.pk])
    job = job_run(job_id=job.pk) or Job.objects.get(pk=job.pk)
    assert job.kind == "suggest" and job.params["backend"] == "local" and job.status == JobStatus.SUCCESS
    assert list(Suggestion.objects.values_list("episode_id", flat=True)) == [ep.pk]


def _label(study, make_episode, bob, codes, n):
    """n episodes coded by Bob alone (one coder per episode makes each a final label)."""
    spec = codebook_spec(study.codebook)
    study.coders_per_episode = 1
    study.save(update_fields=["coders_per_episode"])
    episodes = []
    for i in range(n):
        t = spec.types[i % 6]
        ep = make_episode(study, body=f"{t.example} {t.indicators[0]}. Report {i}.")
        values = CodingValues(
            failure_type=codes.type(t.code),
            source=codes.source(t.typical_source),
            stage=codes.stage(t.typical_stages[0]),
            capability=codes.capability(t.typical_capabilities[0]),
        )
        coding_save(episode=ep, coder=bob, values=values, version=None)
        episodes.append(ep)
    return episodes


def test_it_trains_on_final_labels_once_there_are_enough_and_scores_labelled_episodes_out_of_fold(
    study, make_episode, bob, codes, settings
):
    settings.FAULTLINE_LOCAL_MIN_LABELS = 12
    labelled = _label(study, make_episode, bob, codes, 11)
    suggestions_make(study=study, backend="local")
    assert not LocalModel.objects.exists()  # 11 < 12: the codebook prior alone
    labelled += _label(study, make_episode, bob, codes, 1)
    new = make_episode(study, body=RATE_LIMIT)
    result = suggestions_make(study=study, backend="local")
    model = LocalModel.objects.get()
    assert model.n_train == 12 and result["trained_on"] == 12 and len(bytes(model.blob)) > 1000
    assert result["model"] == f"linear-{model.pk}" and Suggestion.objects.filter(model=result["model"]).count() == 13
    from annotate.suggestions.services import local_model_current

    trained = local_model_current(study)
    assert set(trained.oof) == {e.pk for e in labelled}
    spec = codebook_spec(study.codebook)
    suggester = LocalSuggester(spec, trained)
    text, title = episode_text(labelled[0]), labelled[0].document.title
    held_out = suggester.suggest_texts([text], [labelled[0].pk], [title])[0]
    anonymous = suggester.suggest_texts([text], titles=[title])[0]
    # A labelled episode is scored by models that never saw its label, unlike a new text.
    assert held_out.candidates != anonymous.candidates
    assert Suggestion.objects.get(episode=new, model=result["model"]).failure_type is not None


def test_a_refresh_with_few_new_labels_keeps_the_model_without_reading_the_study(
    study, make_episode, bob, codes, settings, django_assert_max_num_queries
):
    from annotate.suggestions.services import labels_upper_bound, local_model_refresh, training_examples

    settings.FAULTLINE_LOCAL_MIN_LABELS = 12
    settings.FAULTLINE_LOCAL_RETRAIN_EVERY_S = 0
    _label(study, make_episode, bob, codes, 12)
    first = local_model_refresh(study=study)
    assert LocalModel.objects.count() == 1 and first.fingerprint
    _label(study, make_episode, bob, codes, 4)  # fewer than max(5, 10%) new labels
    assert labels_upper_bound(study) >= len(training_examples(study)) == 16
    # The current model, its codebook fingerprint and two counts: not the study's texts.
    with django_assert_max_num_queries(8) as queries:
        assert local_model_refresh(study=study) is first
    read = " ".join(q["sql"] for q in queries.captured_queries)
    assert '"annotate_document"' not in read and '"annotate_coding"."memo"' not in read
    assert LocalModel.objects.count() == 1
    _label(study, make_episode, bob, codes, 1)  # now 5 new: stale
    local_model_refresh(study=study)
    assert LocalModel.objects.order_by("-pk").first().n_train == 17


def test_a_batch_retrains_at_most_once_per_interval(study, make_episode, bob, codes, settings):
    from datetime import timedelta

    from annotate.suggestions.services import local_model_refresh

    settings.FAULTLINE_LOCAL_MIN_LABELS = 10
    settings.FAULTLINE_LOCAL_RETRAIN_EVERY_S = 300
    _label(study, make_episode, bob, codes, 10)
    first = local_model_refresh(study=study)  # no model yet: trains at once
    _label(study, make_episode, bob, codes, 10)  # doubled, but the model is a second old
    assert local_model_refresh(study=study) is first and LocalModel.objects.count() == 1
    LocalModel.objects.update(trained_at=timezone.now() - timedelta(seconds=301))
    assert local_model_refresh(study=study).n_train == 20 and LocalModel.objects.count() == 2


def test_the_label_bound_counts_disagreements_and_adjudications_so_it_never_undercounts(
    study, make_episode, alice, bob, codes
):
    from annotate.suggestions.services import labels_upper_bound, training_examples

    def values(failure_type):
        return CodingValues(
            failure_type=codes.type(failure_type), source=codes.source("agent_design"),
            stage=codes.stage("iterative_execution"), capability=codes.capability("actuation"),
        )  # fmt: skip

    assert study.coders_per_episode == 2
    agreed, split = make_episode(study), make_episode(study)
    for coder in (alice, bob):
        coding_save(episode=agreed, coder=coder, values=values("TUS-03"), version=None)
    coding_save(episode=split, coder=alice, values=values("TUS-03"), version=None)
    coding_save(episode=split, coder=bob, values=values("TUS-01"), version=None)
    assert len(training_examples(study)) == 1 and labels_upper_bound(study) == 2


def test_it_retrains_as_a_job_and_refuses_below_the_minimum(study, make_episode, bob, codes, settings):
    settings.FAULTLINE_LOCAL_MIN_LABELS = 8
    _label(study, make_episode, bob, codes, 5)
    job = job_run(job_id=local_retrain_start(study=study, user=bob).pk)
    assert job.status == JobStatus.FAILED and "needs 8" in job.error and not LocalModel.objects.exists()
    _label(study, make_episode, bob, codes, 3)
    job = job_run(job_id=local_retrain_start(study=study, user=bob).pk)
    model = LocalModel.objects.get()
    assert job.status == JobStatus.SUCCESS and job.result["n_train"] == 8 and model.job_id == job.pk


def test_it_rejects_a_suggestion_but_not_a_failed_or_used_one(study, make_episode, bob, codes):
    ep = make_episode(study, body=RATE_LIMIT)
    suggestions_make(study=study, backend="local")
    s = Suggestion.objects.get(episode=ep)
    rejection = suggestion_reject(suggestion=s, user=bob)
    s.refresh_from_db()
    assert rejection.coder == bob and s.status == SuggestionStatus.PENDING  # Bob's own, not the study's
    assert suggestion_reject(suggestion=s, user=bob) == rejection  # twice is once
    failed = Suggestion.objects.create(
        episode=ep, backend="openai", model="m", prompt_version="p", cache_key="k", error="bad"
    )
    with pytest.raises(ValidationError):
        suggestion_reject(suggestion=failed, user=bob)
    other = make_episode(study, body=RATE_LIMIT + " Twice.")
    suggestions_make(study=study, backend="local")
    used = Suggestion.objects.get(episode=other)
    values = CodingValues(
        failure_type=used.failure_type, source=used.source, stage=used.stage, capability=used.capability
    )
    coding_save(episode=other, coder=bob, values=values, version=None, from_suggestion=used)
    used.refresh_from_db()
    assert used.status == SuggestionStatus.ACCEPTED
    with pytest.raises(ValidationError):
        suggestion_reject(suggestion=used, user=bob)
    assert suggestion_reject(suggestion=used, user=study.memberships.get(role="owner").user)  # Alice may


def test_the_suggest_command_reports(study, make_episode):
    make_episode(study, body=RATE_LIMIT)
    out = StringIO()
    call_command("suggest", "--study", "alpha", "--backend", "local", stdout=out, stderr=StringIO())
    assert "local (codebook-tfidf): 1 suggested, 0 failed" in out.getvalue()


def test_the_local_suggester_on_the_shipped_samples_is_better_than_chance(codebook):
    spec = codebook_spec(codebook)
    samples = Path(settings.BASE_DIR) / "fixtures" / "samples"
    gold = {g["id"]: g for g in json.loads((samples / "gold_labels.json").read_text())}
    issues = [i for i in json.loads((samples / "github_issues.json").read_text()) if i["html_url"] in gold]
    labelled = [(f"{i['title']}\n\n{i['body']}", gold[i["html_url"]]["failure_type"]) for i in issues]
    labelled = [(t, code) for t, code in labelled if code]
    answers = LocalSuggester(spec).suggest_texts([t for t, _ in labelled])
    top3 = np.mean(
        [code in [c.failure_type for c in a.candidates] for (_, code), a in zip(labelled, answers, strict=True)]
    )
    assert top3 > 0.5  # chance is 3/65
