"""The openai backend, through the real openai client against a local OpenAI-compatible server."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from annotate.jobs.runner import job_run
from annotate.models import Job, JobStatus, Suggestion, SuggestionStatus
from annotate.suggestions import prompts
from annotate.suggestions.base import cache_key, codebook_spec, episode_text, prompt_family, reading
from annotate.suggestions.llm import LLMConfigError, LLMSuggester
from annotate.suggestions.prompts import answer_validate, prompt_version_for
from annotate.suggestions.services import suggestion_batch_start, suggestions_make
from annotate.tests.factories.llm_server import FakeLLMServer, point_settings_at

BODY = "The agent hit 429 Too Many Requests from the provider and gave up after one try."


@pytest.fixture
def llm(settings):
    server = point_settings_at(
        settings, FakeLLMServer().start(), FAULTLINE_LLM_MAX_RETRIES=2, FAULTLINE_LLM_BACKOFF_BASE_S=0.01,
        FAULTLINE_LLM_CONCURRENCY=4, FAULTLINE_LLM_PRICE_INPUT_PER_M=2.5, FAULTLINE_LLM_PRICE_OUTPUT_PER_M=10.0,
    )  # fmt: skip
    yield server
    server.stop()


def _run(study, **kw):
    return suggestions_make(study=study, backend="openai", **kw)


def test_it_stores_a_valid_structured_answer_with_tokens_cost_and_cache_key(llm, study, make_episode, codes):
    ep = make_episode(study, body=BODY)
    result = _run(study)
    s = Suggestion.objects.get(episode=ep)
    assert (s.backend, s.model, s.error, s.status) == ("openai", "fake-model-1", "", SuggestionStatus.PENDING)
    assert s.failure_type == codes.type("EXT-01") and s.source == codes.source("tool_service")
    assert s.stage == codes.stage("iterative_execution") and s.capability == codes.capability("actuation")
    assert [c["failure_type"] for c in s.candidates] == ["EXT-01", "TUS-03"]
    assert s.confidence == pytest.approx(0.8) and s.evidence in episode_text(ep) and s.evidence
    assert not s.evidence_flagged
    assert (s.input_tokens, s.output_tokens) == (1200, 150)
    assert s.cost == Decimal("0.004500")  # 1200 * 2.5 / 1e6 + 150 * 10 / 1e6
    assert result["cost"] == pytest.approx(0.0045) and result["suggested"] == 1
    spec = codebook_spec(study.codebook)
    assert s.prompt_version == prompt_version_for(spec) and len(s.prompt_version) == 64
    assert s.cache_key == cache_key("fake-model-1", s.prompt_version, reading(ep.document.title, episode_text(ep)))
    # The request asked for structured output with the codebook's codes as enums, at temperature 0.
    request = llm.requests[0]
    fmt = request["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    item = fmt["json_schema"]["schema"]["properties"]["candidates"]["items"]["properties"]
    assert set(item["failure_type"]["enum"]) == set(spec.type_codes) and len(item["failure_type"]["enum"]) == 65
    assert item["source"]["enum"] == list(spec.axis_codes("source"))
    system = request["messages"][0]["content"]
    assert "TUS-03" in system and "Indicators:" in system and "Example:" in system and "R01" in system
    assert BODY in request["messages"][1]["content"] and ep.document.title in request["messages"][1]["content"]


def test_it_never_sends_the_same_request_twice(llm, study, make_episode):
    make_episode(study, body=BODY)
    make_episode(study, body="Another failure: the planner looped forever.")
    _run(study)
    assert len(llm.requests) == 2
    again = _run(study)
    assert len(llm.requests) == 2 and again["episodes"] == 0
    assert Suggestion.objects.count() == 2


def test_it_stores_invalid_json_as_an_error_without_codes_and_retries_it_in_place(llm, study, make_episode):
    ep = make_episode(study, body=BODY)
    llm.script = ["invalid_json"]
    result = _run(study)
    s = Suggestion.objects.get(episode=ep)
    assert "invalid JSON" in s.error and s.status == SuggestionStatus.FAILED
    assert s.failure_type is None and s.source is None and s.candidates == [] and s.confidence is None
    assert s.input_tokens == 1200  # the failed answer still cost tokens
    assert result["errors"] == 1 and result["suggested"] == 0
    # The next batch asks again (an error is not a suggestion) and updates the same row.
    _run(study)
    s = Suggestion.objects.get(episode=ep)
    assert s.error == "" and s.failure_type.code == "EXT-01" and s.input_tokens == 2400
    assert len(llm.requests) == 2


def test_it_never_stores_a_code_outside_the_codebook(llm, study, make_episode):
    ep = make_episode(study, body=BODY)
    llm.script = ["unknown_code"]
    _run(study)
    s = Suggestion.objects.get(episode=ep)
    assert "ZZZ-99" in s.error and "not in the codebook" in s.error
    assert s.failure_type is None and s.candidates == [] and s.status == SuggestionStatus.FAILED
    assert not Suggestion.objects.filter(candidates__icontains="ZZZ").exists()


def test_it_retries_a_429_and_then_stores_the_answer(llm, study, make_episode):
    ep = make_episode(study, body=BODY)
    llm.script = ["429", "valid"]
    _run(study)
    s = Suggestion.objects.get(episode=ep)
    assert s.error == "" and s.failure_type.code == "EXT-01"
    assert llm.modes == ["429", "valid"]


def test_it_gives_up_after_the_maximum_retries_on_500(llm, study, make_episode, settings):
    ep = make_episode(study, body=BODY)
    llm.default = "500"
    _run(study)
    s = Suggestion.objects.get(episode=ep)
    assert s.error.startswith("LLM request failed") and s.failure_type is None
    assert len(llm.requests) == settings.FAULTLINE_LLM_MAX_RETRIES + 1


def test_it_recovers_from_a_500(llm, study, make_episode):
    ep = make_episode(study, body=BODY)
    llm.script = ["500", "valid"]
    _run(study)
    assert Suggestion.objects.get(episode=ep).failure_type.code == "EXT-01"


def test_it_times_out_a_hanging_server(llm, study, make_episode, settings):
    ep = make_episode(study, body=BODY)
    settings.FAULTLINE_LLM_TIMEOUT = 0.3
    settings.FAULTLINE_LLM_MAX_RETRIES = 1
    llm.hang_s = 2.0
    llm.default = "hang"
    started = time.monotonic()
    _run(study)
    elapsed = time.monotonic() - started
    s = Suggestion.objects.get(episode=ep)
    assert "timed out" in s.error and s.failure_type is None
    assert len(llm.requests) == 2 and elapsed < 2.0


def test_it_drops_a_quote_that_is_not_in_the_episode_and_flags_it(llm, study, make_episode):
    ep = make_episode(study, body=BODY)
    llm.script = ["bad_quote"]
    _run(study)
    s = Suggestion.objects.get(episode=ep)
    assert s.evidence_flagged and s.evidence == "" and s.candidates[0]["evidence"] == ""
    assert s.failure_type.code == "EXT-01" and s.error == ""


def test_it_falls_back_to_json_mode_when_the_server_lacks_structured_output(llm, study, make_episode):
    ep = make_episode(study, body=BODY)
    llm.default = "no_schema"
    make_episode(study, body="A second episode of the agent failing.")
    _run(study)
    assert Suggestion.objects.get(episode=ep).failure_type.code == "EXT-01"
    types = [r["response_format"]["type"] for r in llm.requests]
    # Requests already in flight may each be refused once; after that only JSON mode is used.
    assert types[0] == "json_schema" and types.count("json_object") == 2 and types.count("json_schema") <= 2


def test_it_stores_a_not_a_failure_answer_without_codes(llm, study, make_episode):
    ep = make_episode(study, body="Thanks, closing this.")
    llm.script = ["not_a_failure"]
    _run(study)
    s = Suggestion.objects.get(episode=ep)
    assert s.not_a_failure and s.error == "" and s.failure_type is None


def test_it_keeps_requests_in_flight_under_the_per_study_limit(llm, study, make_episode, settings):
    settings.FAULTLINE_LLM_CONCURRENCY = 2
    llm.delay_s = 0.15
    for i in range(6):
        make_episode(study, body=f"Episode {i}: the tool call failed again.")
    _run(study)
    assert llm.max_inflight == 2 and Suggestion.objects.filter(error="").count() == 6


def test_it_fails_the_batch_on_a_rejected_key(llm, study, make_episode):
    make_episode(study, body=BODY)
    llm.default = "401"
    with pytest.raises(LLMConfigError):
        _run(study)
    assert len(llm.requests) == 1 and Suggestion.objects.count() == 0


def test_it_runs_a_batch_as_a_suggest_job_with_the_llm_when_a_key_is_set(llm, study, make_episode, bob, codes, alice):
    ep = make_episode(study, body=BODY)
    job = suggestion_batch_start(study=study, user=bob)
    job = job_run(job_id=job.pk) or Job.objects.get(pk=job.pk)
    assert job.kind == "suggest" and job.params["backend"] == "openai" and job.status == JobStatus.SUCCESS
    # (done == total is checked by the worker test: on PostgreSQL progress is written on its own connection,
    # which cannot see this test's uncommitted Job row.)
    assert job.result["suggested"] == 1 and job.result["episodes"] == 1
    assert Suggestion.objects.get(episode=ep).job_id == job.pk
    # A new label changes the example pool: a plain batch asks nothing, a refreshing one asks again.
    other = make_episode(study, title="Another 429", body="Provider said 429 Too Many Requests twice.")
    _adjudicate(other, codes, alice, "EXT-02", "tool_service", "iterative_execution", "actuation")
    for refresh, asked in ((False, 0), (True, 1)):
        again = suggestion_batch_start(study=study, user=bob, refresh=refresh, episode_ids=[ep.pk])
        again = job_run(job_id=again.pk) or Job.objects.get(pk=again.pk)
        assert again.params.get("refresh", False) is refresh and again.result["episodes"] == asked


def test_it_refuses_the_openai_backend_without_a_key(study, bob, settings):
    settings.OPENAI_API_KEY = ""
    with pytest.raises(ValidationError):
        suggestion_batch_start(study=study, user=bob, backend="openai")


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ("not json", "invalid JSON"),
        ('{"candidates": "EXT-01"}', "candidates list"),
        ('{"not_a_failure": false, "candidates": []}', "no candidates"),
        (
            '{"not_a_failure": false, "candidates": [{"failure_type": "EXT-01", "source": "tool_service", '
            '"stage": "iterative_execution", "capability": "actuation", "confidence": 1.5}]}',
            "confidence",
        ),
        (
            '{"not_a_failure": false, "candidates": [{"failure_type": "EXT-01", "source": "moon", '
            '"stage": "iterative_execution", "capability": "actuation", "confidence": 0.5}]}',
            "source 'moon'",
        ),
    ],
)
def test_it_validates_every_field_of_an_answer(codebook, content, error):
    answer = answer_validate(codebook_spec(codebook), "text", content)
    assert error in answer.error and answer.candidates == ()


def test_it_keeps_at_most_three_candidates(codebook):
    import json

    c = {
        "failure_type": "EXT-01",
        "source": "tool_service",
        "stage": "setup",
        "capability": "actuation",
        "confidence": 0.2,
        "rationale": "",
        "evidence": "text",
    }
    content = json.dumps({"not_a_failure": False, "candidates": [c] * 5})
    answer = answer_validate(codebook_spec(codebook), "some text", content)
    assert len(answer.candidates) == 3 and answer.candidates[0].evidence == "text"


def test_it_changes_the_prompt_version_with_the_codebook(codebook):
    from dataclasses import replace

    spec = codebook_spec(codebook)
    other = replace(spec, types=spec.types[:-1])
    assert prompt_version_for(spec) != prompt_version_for(other)
    assert LLMSuggester(spec, client=object()).prompt_version == prompt_version_for(spec)


def test_the_audit_runs_against_the_llm_writes_nothing_and_the_cache_sends_nothing_twice(llm, study, make_episode):
    from annotate.suggestions.audit import db_snapshot, suggester_audit

    for i in range(3):
        make_episode(study, body=f"{BODY} Run {i}.")
    before = db_snapshot()
    report = suggester_audit(study=study, backend="openai", sample=2, n_episodes=3)
    results = {r.number: r for r in report.checks}
    assert results[8].passed and "3 Suggestion rows written" in results[8].summary
    assert results[9].passed and "0 requests" in results[9].summary
    # Check 5 asks about SPC-01 and SPC-02; the fake server always answers EXT-01/TUS-03, so it fails, with cases.
    assert not results[5].passed and results[5].failures[0].startswith("SPC-01")
    assert results[1].passed is None and db_snapshot() == before and Suggestion.objects.count() == 0


def _adjudicate(ep, codes, adjudicator, code, source, stage, capability):
    from annotate.models import Adjudication

    return Adjudication.objects.create(
        episode=ep, adjudicator=adjudicator, failure_type=codes.type(code), source=codes.source(source),
        stage=codes.stage(stage), capability=codes.capability(capability), rationale="final",
    )  # fmt: skip


@pytest.fixture
def adjudicated(study, make_episode, codes, alice):
    from annotate.tests.factories.report_texts import JSON_EN, LOOP_EN, MAX_ITERATIONS, RATE_EN

    texts = [
        ("Search API 429 aborts the research run", RATE_EN, "EXT-02", "tool_service"),
        ("Agent repeats the same call", LOOP_EN, "CTL-01", "llm"),
        ("Planner output not valid JSON", JSON_EN, "OUT-02", "framework"),
        ("Iteration limit hit on refactor", MAX_ITERATIONS, "CTL-02", "framework"),
        ("Weather tool throttled", "The weather tool answered 429 rate limit exceeded on every call.", "EXT-02",
         "tool_service"),
        ("Docs question", "How do I configure the vector store path? The docs are unclear.", "SPC-02", "user_spec"),
    ]  # fmt: skip
    out = []
    for title, body, code, source in texts:
        ep = make_episode(study, title=title, body=body)
        _adjudicate(ep, codes, alice, code, source, "iterative_execution", "actuation")
        out.append(ep)
    return out


def test_it_sends_the_rules_and_the_nearest_adjudicated_episodes_with_their_codes(
    llm, study, make_episode, adjudicated
):
    import json as jsonlib

    new = make_episode(study, title="Provider throttles us", body=BODY)
    _run(study, episode_ids=[new.pk])
    request = llm.requests[-1]
    messages = request["messages"]
    system = messages[0]["content"]
    assert "## Decision rules for boundary cases" in system and "R05 (CTL-02, source)" in system
    shots = messages[1:-1]
    assert 3 <= len(shots) // 2 <= 5 and [m["role"] for m in shots] == ["user", "assistant"] * (len(shots) // 2)
    # Nearest first, each with its final codes; the two 429 reports are among them, the docs question is not.
    first = jsonlib.loads(shots[1]["content"])["candidates"][0]
    assert first["failure_type"] == "EXT-02" and first["source"] == "tool_service"
    assert "Too Many Requests" in shots[0]["content"]
    assert any("weather tool answered 429" in m["content"] for m in shots[0::2])
    assert BODY in messages[-1]["content"] and all(BODY not in m["content"] for m in shots)


def test_an_adjudicated_episode_is_never_its_own_example(llm, study, adjudicated):
    _run(study, episode_ids=[adjudicated[0].pk])
    shots = llm.requests[-1]["messages"][1:-1]
    assert shots and all("Too Many Requests and the whole run fails" not in m["content"] for m in shots)


def test_the_examples_are_part_of_the_prompt_version_and_cache_key(llm, study, make_episode, codes, alice, adjudicated):
    new = make_episode(study, title="Provider throttles us", body=BODY)
    _run(study, episode_ids=[new.pk])
    first = Suggestion.objects.get(episode=new)
    extra = make_episode(study, title="Another 429", body="Provider said 429 Too Many Requests twice.")
    _adjudicate(extra, codes, alice, "EXT-02", "tool_service", "iterative_execution", "actuation")
    n = len(llm.requests)
    # A new label changes the example pool, not the prompt's family: a batch re-asks nothing.
    assert _run(study, episode_ids=[new.pk])["episodes"] == 0 and len(llm.requests) == n
    _run(study, episode_ids=[new.pk], refresh=True)
    second = Suggestion.objects.filter(episode=new).exclude(pk=first.pk).get()
    assert second.prompt_version != first.prompt_version and second.cache_key != first.cache_key
    assert prompt_family(second.prompt_version) == prompt_family(first.prompt_version)
    assert len(llm.requests) == n + 1  # the changed examples are a new request, not a cached answer
    # Refreshing again with the same pool asks nothing: the stored answer is the current one.
    assert _run(study, refresh=True, episode_ids=[new.pk])["episodes"] == 0 and len(llm.requests) == n + 1


def test_new_labels_do_not_re_ask_the_study_but_a_new_template_does(
    llm, study, make_episode, codes, alice, monkeypatch
):
    """A study whose coders keep adding labels: each batch (the after-import one included) asks only the episodes
    without a suggestion, however the example pool changed; a new template is a new family, and every episode is
    asked again."""
    episodes = [make_episode(study, title=f"Report {i}", body=f"{BODY} (run {i})") for i in range(4)]
    _run(study)
    assert len(llm.requests) == 4
    for i, ep in enumerate(episodes[:3]):
        _adjudicate(ep, codes, alice, "EXT-02", "tool_service", "iterative_execution", "actuation")
        later = make_episode(study, title=f"Later {i}", body=f"Another report {i}: the provider answered 429.")
        result = _run(study)
        assert result["episodes"] == 1 and Suggestion.objects.filter(episode=later).count() == 1
    assert len(llm.requests) == 7
    versions = set(Suggestion.objects.values_list("prompt_version", flat=True))
    assert len(versions) == 4 and len({prompt_family(v) for v in versions}) == 1 and all(len(v) <= 64 for v in versions)
    refreshed = _run(study, refresh=True)
    assert refreshed["episodes"] == 7 - 1  # all but the episode asked with the current pool
    monkeypatch.setattr(prompts, "PROMPT_TEMPLATE_VERSION", f"{prompts.PROMPT_TEMPLATE_VERSION}-next")
    assert _run(study)["episodes"] == 7


def test_the_examples_are_trimmed_to_the_token_budget(llm, study, make_episode, settings, adjudicated):
    from annotate.suggestions.prompts import estimate_tokens, user_message
    from annotate.suggestions.services import fewshot_examples

    spec = codebook_spec(study.codebook)
    probe = LLMSuggester(spec, client=object(), token_budget=10**6, examples=fewshot_examples(study))
    full = probe.messages(BODY, "Provider throttles us")
    fixed = estimate_tokens(full[0]["content"], user_message(BODY, "Provider throttles us"))
    one_shot = estimate_tokens(full[1]["content"], full[2]["content"])
    settings.FAULTLINE_LLM_TOKEN_BUDGET = fixed + one_shot + 1
    new = make_episode(study, title="Provider throttles us", body=BODY)
    _run(study, episode_ids=[new.pk])
    messages = llm.requests[-1]["messages"]
    assert len(messages) == 4 and messages[1] == full[1]  # only the nearest example fits
    assert estimate_tokens(*(m["content"] for m in messages)) <= settings.FAULTLINE_LLM_TOKEN_BUDGET
