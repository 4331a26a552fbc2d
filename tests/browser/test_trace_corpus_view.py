"""A real framework trace (Pydantic AI, from the conformance corpus) in the coding page: the agent lanes, the tool
calls that ran, and each model call's model, tokens and cost in its step head, at laptop and phone width."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_real_trace_shows_agents_tools_and_model_usage(page, live_server, login, shot, study, bob):
    from annotate.tests.traces.corpus_data import corpus_data
    from annotate.traces.services import trace_import_value

    data, fmt = corpus_data("pydantic-ai-tools-2025-12-04.json")
    _, (doc,) = trace_import_value(study=study, data=data, fmt=fmt)
    page.set_default_timeout(30_000)
    login("bob")
    for width, height in ((1366, 768), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server.url}/studies/alpha/episodes/{doc.episodes.get().pk}/code/")
        expect(page.locator("#trace .trace-step")).to_have_count(13)
        chat = page.locator("#trace .trace-step.kind-llm_call").first
        usage = "gpt-4o-mini-2024-07-18 · 338 tokens (265 → 73) · $0.000084 · tool_call"
        expect(chat.locator(".step-meta")).to_have_text(usage)
        expect(chat.locator(".agent-chip")).to_have_text("joke_agent")
        expect(page.locator("#trace .badge.evidence-ran")).to_have_count(3)
        expect(page.locator("#trace .badge.evidence-requested")).to_have_count(1)  # final_result: no span ran it
        box = chat.locator(".step-meta").bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
        shot(f"trace-corpus-pydantic-{width}")
