"""GET /api/v1/studies/{slug}/suggestions/quality/: rates, accuracy, kappa, calibration, cost."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotate.coding.services import CodingValues, coding_save
from annotate.models import Suggestion, SuggestionStatus


def _suggest(ep, *, codes, model="m1", top="EXT-01", second="TUS-03", confidence=0.8, status="pending", **extra):
    cand = lambda t, c: {  # noqa: E731
        "failure_type": t, "source": "tool_service", "stage": "iterative_execution",
        "capability": "actuation", "confidence": c, "rationale": "", "evidence": "",
    }  # fmt: skip
    return Suggestion.objects.create(
        episode=ep, backend="openai", model=model, prompt_version="p", cache_key=f"{ep.pk}{model}",
        failure_type=codes.type(top), source=codes.source("tool_service"), stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"), confidence=confidence, status=status,
        candidates=[cand(top, confidence), cand(second, 0.1)], input_tokens=100, output_tokens=10,
        cost=Decimal("0.001"), **extra,
    )  # fmt: skip


@pytest.fixture
def measured(study, make_episode, codes, alice, bob):
    """Four episodes both coders label EXT-01; the suggester is right on two, top-3 right on one more."""
    study_codes = CodingValues(
        failure_type=codes.type("EXT-01"),
        source=codes.source("tool_service"),
        stage=codes.stage("iterative_execution"),
        capability=codes.capability("actuation"),
    )
    eps = [make_episode(study) for _ in range(4)]
    for ep in eps:
        coding_save(episode=ep, coder=alice, values=study_codes, version=None)
        coding_save(episode=ep, coder=bob, values=study_codes, version=None)
    _suggest(eps[0], codes=codes, status=SuggestionStatus.ACCEPTED, confidence=0.9)
    _suggest(eps[1], codes=codes, status=SuggestionStatus.EDITED, confidence=0.85)
    _suggest(eps[2], codes=codes, top="TUS-03", second="EXT-01", status=SuggestionStatus.REJECTED, confidence=0.35)
    _suggest(eps[3], codes=codes, top="PLN-01", second="TUS-03", confidence=0.3)
    Suggestion.objects.create(
        episode=eps[3], backend="openai", model="m1", prompt_version="p", cache_key="err", error="invalid JSON",
        input_tokens=50, output_tokens=5, cost=Decimal("0.0005"),
    )  # fmt: skip
    return study


def test_it_reports_rates_accuracy_calibration_and_cost(measured, vera, as_user):
    r = as_user(vera).get("/api/v1/studies/alpha/suggestions/quality/")
    assert r.status_code == 200
    doc = r.json()
    assert doc["labelled_episodes"] == 4
    (b,) = doc["backends"]
    assert (b["backend"], b["model"], b["suggestions"], b["episodes"], b["errors"]) == ("openai", "m1", 5, 4, 1)
    assert (b["accepted"], b["edited"], b["rejected"], b["pending"]) == (1, 1, 1, 1)
    assert b["acceptance_rate"] == pytest.approx(1 / 3, abs=1e-3) and b["rejection_rate"] == pytest.approx(
        1 / 3, abs=1e-3
    )
    assert b["accuracy"]["failure_type"] == {"n": 4, "top1": 0.5, "top3": 0.75}
    assert b["accuracy"]["source"]["top1"] == 1.0
    assert b["by_type"]["EXT-01"]["n"] == 4
    bins = {(c["low"], c["high"]): c for c in b["calibration"]}
    assert bins[(0.8, 0.9)]["n"] == 1 and bins[(0.9, 1.0)]["accuracy"] == 1.0 and bins[(0.3, 0.4)]["n"] == 2
    assert bins[(0.3, 0.4)]["accuracy"] == 0.0
    assert b["input_tokens"] == 450 and b["output_tokens"] == 45 and Decimal(b["cost"]) == Decimal("0.0045")
    assert [k["coder"] for k in b["kappa"]["failure_type"]] == ["alice", "bob"]
    assert b["kappa"]["failure_type"][0]["n"] == 4


def test_it_is_for_members_only(measured, charlie, as_user, api):
    assert as_user(charlie).get("/api/v1/studies/alpha/suggestions/quality/").status_code == 404
    assert api.get("/api/v1/studies/alpha/suggestions/quality/").status_code in (401, 403)


def test_it_is_empty_without_suggestions(study, alice, as_user, django_assert_max_num_queries):
    client = as_user(alice)
    with django_assert_max_num_queries(12):
        doc = client.get("/api/v1/studies/alpha/suggestions/quality/").json()
    assert doc["backends"] == [] and doc["labelled_episodes"] == 0
