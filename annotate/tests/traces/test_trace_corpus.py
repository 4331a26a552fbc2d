"""The conformance corpus: real traces from 14 producers (corpus/README.md), Langfuse downloads imported with
`--format langfuse`, the OTLP/JSON example with `--format otlp`.

Every expectation below was written from reading the source file (its spans, their attributes and parents),
not from the importer's output: how many steps, which kinds, which agents, which tool calls and whether each
ran, and which model calls carry no text in the source.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from annotate.models import TraceStep
from annotate.tests.traces.corpus_data import CORPUS, corpus_data
from annotate.traces._genai import DETAIL_LIMIT, step_detail
from annotate.traces._spans import Span, spans_to_steps
from annotate.traces.parsers import parse_trace_value
from annotate.traces.services import trace_import_value


@dataclass(frozen=True)
class Case:
    file: str
    producer: str
    steps: int
    kinds: dict[str, int]
    agents: list[str]
    agentless: int  # steps outside every agent run (the source names no agent above them)
    tools: list[tuple[str, str]]  # (tool, evidence) in trace order
    silent_llm: set[str] = field(default_factory=set)  # model calls whose span holds no reply text


KOOG = "f9f77d1a-437f-4ba6-890e-b592a50cbd21"
MAF = "99981f6a-abd1-4d09-9fba-00e2ab172193"
WIKI = "tool.search.wikipedia"
CASES = [
    # An AGENT span "Agent workflow" (the SDK's trace) around the agent "Hello world" (graph.node.id); the
    # model asked for get_weather by id, the TOOL span that ran it has no id but the same name and arguments.
    Case("openai-agents-2025-09-30.json", "OpenAI Agents SDK", 5, {"other": 2, "llm_call": 2, "tool_call": 1},
         ["Hello world"], 1, [("get_weather", "ran")]),
    # "agent_run [hello_agent]" names the agent; say_hello asked for without id, executed with an ADK id.
    Case("google-adk-2025-08-28.json", "Google ADK", 5, {"other": 2, "llm_call": 2, "tool_call": 1},
         ["hello_agent"], 1, [("say_hello", "ran")]),
    # gen_ai.agent.id on the create_agent and invoke_agent spans; tool spans carry only gen_ai.tool.* names.
    Case("koog-2025-08-26.json", "Koog", 11, {"other": 7, "llm_call": 2, "tool_call": 2},
         [KOOG], 0, [("ByeTool", "ran"), ("HelloTool", "ran")]),
    # Three tools run by gen_ai.tool.call.id; the evaluator's model answers through Pydantic AI's output tool
    # final_result, which no span executes: the one call the source shows requested and never run.
    Case("pydantic-ai-tools-2025-12-04.json", "Pydantic AI", 13, {"other": 5, "llm_call": 4, "tool_call": 4},
         ["joke_agent", "evaluator_agent"], 1,
         [("get_pun_suggestion", "ran"), ("get_dad_joke_suggestion", "ran"), ("get_one_liner_suggestion", "ran"),
          ("final_result", "requested")]),
    # The older Pydantic AI names its agent only in `agent_name`.
    Case("pydantic-ai-trace-2025-06-06.json", "Pydantic AI (2025-06)", 3, {"other": 2, "llm_call": 1},
         ["qa_agent"], 1, []),
    # The AGENT span "Agent.run" is the only name; two "chat" spans come from Langfuse's own SDK, no attributes:
    # their Langfuse fields (GENERATION, model, usage, input, output) make them model calls with text.
    Case("agno-2025-06-11.json", "Agno", 6, {"other": 1, "llm_call": 4, "tool_call": 1},
         ["Agent"], 0, [("duckduckgo_search", "ran")]),
    # One AGENT root; the per-event AGENT spans inside belong to it. The tool emits start/finish/success spans;
    # the model's reply is streamed into the success span, its start and finish spans hold none.
    Case("beeai-2025-08-01.json", "BeeAI", 29, {"other": 21, "llm_call": 5, "tool_call": 3},
         ["beeai-framework-main"], 0, [(f"{WIKI}.start-12", "ran"), (f"{WIKI}.finish-12", "ran"),
                                       (f"{WIKI}.success-12", "ran")],
         {"backend.openai.chat.start-14", "backend.openai.chat.start-15", "backend.openai.chat.start-16",
          "backend.openai.chat.finish-16"}),
    # Call ids are lists ([run id, call id]) on both the request and the execute_tool span.
    Case("microsoft-agent-2025-10-14.json", "Microsoft Agent Framework", 4, {"other": 1, "llm_call": 2, "tool_call": 1},
         [MAF], 0, [("get_weather", "ran")]),
    # Langfuse's LangChain callback, no OTel attributes: the graph nodes "agent" and "tools" (metadata.langgraph_node)
    # are the agents; Web-Search is a SPAN whose output is the ToolMessage answering the model's call by its id.
    Case("langgraph-2025-08-22.json", "LangGraph", 9, {"other": 6, "llm_call": 2, "tool_call": 1},
         ["agent", "tools"], 1, [("Web-Search", "ran")]),
    # One LangChain generation: its output is a serialized AIMessageChunk ({"type": "AIMessageChunk", "content"}).
    Case("google-vertex-tools-langchain-2025-09-19.json", "LangChain ChatVertexAI", 1, {"llm_call": 1}, [], 1, []),
    # Langfuse SDK only: a SPAN around one GENERATION whose text and model Langfuse's fields carry.
    Case("autogen-2025-06-06.json", "AutoGen", 2, {"other": 1, "llm_call": 1}, [], 2, []),
    # Three root SPANs of the Assistants API calls; the unnamed GENERATION (named by its model) sits under get_response.
    Case("openai-assistants-2024-05-29.json", "OpenAI Assistants API", 4, {"other": 3, "llm_call": 1}, [], 4, []),
    Case("llamaindex-2025-06-05.json", "LlamaIndex", 2, {"other": 1, "llm_call": 1}, [], 2, []),
    Case("google-gemini-2025-08-01.json", "Google GenAI SDK", 1, {"llm_call": 1}, [], 1, []),
    # "invoke_agent <name>" spans without gen_ai.operation.name; model spans known by gen_ai.request.model.
    Case("ag2-2026-03-09.json", "AG2", 7, {"other": 4, "llm_call": 2, "tool_call": 1},
         ["assistant", "user_proxy"], 1, [("get_weather", "ran")]),
    # The AGENT span is CrewAI's Task._execute_core (the role sits only in a Python repr inside input.value).
    Case("crewai-2025-07-11.json", "CrewAI", 6, {"other": 5, "llm_call": 1}, ["Task._execute_core"], 3, []),
    # LangSmith's OTel export of the Claude Agent SDK: tool_use blocks asked for by id, tool runs with
    # {"input": {...}} and no id, two calls of one tool told apart by their arguments.
    Case("claude-agent-2025-12-22.json", "Claude Agent SDK (LangSmith)", 7, {"other": 1, "llm_call": 4,
         "tool_call": 2}, [], 7, [("mcp__weather__get_weather", "ran"), ("mcp__weather__get_weather", "ran")]),
    # Vercel's own ai.* names: ai.toolCall span with ai.toolCall.id, the request in ai.response.toolCalls.
    Case("vercel-aisdk-2025-11-17.json", "Vercel AI SDK", 3, {"other": 1, "llm_call": 1, "tool_call": 1},
         [], 3, [("getWeather", "ran")]),
    Case("opentelemetry-proto-trace.json", "OTLP/JSON example", 1, {"other": 1}, [], 1, []),
]  # fmt: skip


def steps_of(case: Case):
    data, fmt = corpus_data(case.file)
    (record,) = parse_trace_value(data, fmt, case.file)
    return record.steps


def evidence(step) -> str:
    return ("ran" if step.ran else "requested") if step.kind == "tool_call" else ""


def test_the_corpus_holds_every_file_once_with_its_provenance():
    files = {p.name for p in CORPUS.glob("*.json")}
    assert files == {c.file for c in CASES}
    manifest = (CORPUS / "README.md").read_text()
    for c in CASES:
        assert c.file in manifest
    assert len({c.producer.split(" (")[0] for c in CASES}) >= 13
    assert all(p.stat().st_size < 300_000 for p in CORPUS.glob("*.json"))


@pytest.mark.parametrize("case", CASES, ids=[c.file.rsplit("-", 3)[0] for c in CASES])
def test_it_maps_each_real_trace_as_its_spans_say(case):
    steps = steps_of(case)
    assert len(steps) == case.steps
    assert dict(Counter(str(s.kind) for s in steps)) == case.kinds
    seen = list(dict.fromkeys(s.agent for s in steps if s.agent))
    assert seen == case.agents
    assert sum(1 for s in steps if not s.agent) == case.agentless
    assert [(s.name, evidence(s)) for s in steps if s.kind == "tool_call"] == case.tools
    for s in steps:
        if s.kind == "llm_call":
            assert bool(s.output.strip()) is (s.name not in case.silent_llm), s.name
            assert not s.output.lstrip().startswith('{\n "id"'), f"{s.name} shows a raw API response"
        if s.kind == "tool_call" and evidence(s) == "ran":
            assert s.output or s.name.endswith(("start-12", "finish-12")), f"{s.name} ran without its result"


def test_a_call_that_ran_is_not_shown_a_second_time_as_requested():
    """The phantoms of the issue: each requested call next to the span that ran it, in every corpus file."""
    for case in CASES:
        steps = steps_of(case)
        ran = Counter(s.name for s in steps if s.kind == "tool_call" and s.ran)
        requested = [s.name for s in steps if s.kind == "tool_call" and not s.ran]
        assert not [n for n in requested if ran[n]], case.file


def test_it_keeps_model_tokens_cost_and_finish_reason_per_step():
    by_name = {c.file: c for c in CASES}
    pyd = next(s for s in steps_of(by_name["pydantic-ai-tools-2025-12-04.json"]) if s.kind == "llm_call")
    assert pyd.detail["model"] == "gpt-4o-mini-2024-07-18"
    assert (pyd.detail["input_tokens"], pyd.detail["output_tokens"], pyd.detail["total_tokens"]) == (265, 73, 338)
    assert pyd.detail["cost"] == pytest.approx(0.00008355)
    assert pyd.detail["finish_reason"] == "tool_call"
    assert pyd.detail["attributes"]["server.address"] == "api.openai.com"
    vertex = steps_of(by_name["google-vertex-tools-langchain-2025-09-19.json"])[0]
    assert vertex.output == "assistant: Thank you, John Smith. Which of our services are you interested in?"
    assert (vertex.detail["model"], vertex.detail["cost"]) == ("gemini-2.5-flash", 0.00011)
    langgraph = steps_of(by_name["langgraph-2025-08-22.json"])
    assert langgraph[2].output == 'assistant calls Web-Search({\n "query": "example"\n})'
    oai = [s for s in steps_of(by_name["openai-agents-2025-09-30.json"]) if s.kind == "llm_call"][-1]
    assert oai.output.startswith("assistant: The weather in Tokyo is currently sunny.")
    assert (oai.detail["input_tokens"], oai.detail["output_tokens"], oai.detail["total_tokens"]) == (85, 29, 114)
    koog = {s.name: s for s in steps_of(by_name["koog-2025-08-26.json"])}
    assert koog["HelloTool"].input.replace(" ", "").replace("\n", "") == '{"name":"Bob"}'
    assert koog["HelloTool"].output == "Hello my darling Bob!"
    beeai = {s.name: s for s in steps_of(by_name["beeai-2025-08-01.json"])}
    streamed = beeai["backend.openai.chat.success-16"].output  # one output message per streamed token
    assert streamed.startswith("assistant: ") and "the Montjuïc Castle and the Magic Fountain" in streamed
    assert streamed.count("assistant:") == 1
    first_chat = next(s for s in steps_of(by_name["koog-2025-08-26.json"]) if s.kind == "llm_call")
    assert "system: You are a nice and polite assistant." in first_chat.input
    assert "calls HelloTool" in first_chat.output and first_chat.detail["finish_reason"] == "tool_calls"


def test_a_steps_remaining_attributes_are_cut_to_a_bounded_size():
    attrs = {f"custom.{n:03}": "x" * 1000 for n in range(40)} | {"gen_ai.request.model": "m", "input.value": "q"}
    d = step_detail(attrs)
    assert d["model"] == "m" and "input.value" not in d["attributes"]
    assert all(v.endswith("… [cut]") for v in d["attributes"].values())
    assert 0 < len(d["attributes"]) < 40 and d["attributes_omitted"] == 40 - len(d["attributes"])

    assert len(json.dumps(d["attributes"], ensure_ascii=False).encode()) <= DETAIL_LIMIT
    assert "attributes_omitted" not in step_detail({"a": "b"})


def _span(span_id, parent, name, attrs, order):
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=order)
    return Span("t", span_id, parent, name, at, at + timedelta(milliseconds=500), "", "", attrs, order=order)


def _chat_asking(calls):
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": [
            {"role": "assistant", "parts": [{"type": "tool_call", "name": n, "arguments": a} for n, a in calls]}
        ],
    }


def test_a_request_pairs_by_name_and_arguments_only_within_its_agent_run():
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    spans = [
        _span("a", "", "invoke_agent alice", {"gen_ai.operation.name": "invoke_agent"}, 0),
        _span("c1", "a", "chat", _chat_asking([("search", {"q": "x"}), ("search", {"q": "y"})]), 1),
        _span("t1", "a", "execute_tool search", tool | {"gen_ai.tool.call.arguments": '{"q": "y"}'}, 2),
        _span("b", "", "invoke_agent bob", {"gen_ai.operation.name": "invoke_agent"}, 3),
        _span("t2", "b", "execute_tool search", tool | {"gen_ai.tool.call.arguments": '{"q": "x"}'}, 4),
    ]
    steps = spans_to_steps(spans)
    calls = [(s.agent, s.input.replace("\n", "").replace(" ", ""), s.ran) for s in steps if s.kind == "tool_call"]
    # alice asked for x and y; only y ran in her run. bob's x is his own call, not alice's.
    assert sorted(calls) == [
        ("alice", '{"q":"x"}', False),
        ("alice", '{"q":"y"}', True),
        ("bob", '{"q":"x"}', True),
    ]


def test_corpus_traces_store_their_step_detail(study):
    case = next(c for c in CASES if c.file.startswith("microsoft-agent"))
    data, fmt = corpus_data(case.file)
    _, (doc,) = trace_import_value(study=study, data=data, fmt=fmt)
    chat = TraceStep.objects.filter(document=doc, kind="llm_call").order_by("index").first()
    assert chat.detail["model"] == "gpt-4o" and chat.detail["total_tokens"] == 95
    assert TraceStep.objects.filter(document=doc, kind="tool_call", ran=True).count() == 1
    assert not TraceStep.objects.filter(document=doc, kind="tool_call", ran=False).exists()


def test_the_step_view_and_the_api_show_model_tokens_and_cost(client, study, bob):
    from django.urls import reverse
    from rest_framework.test import APIClient

    data, fmt = corpus_data("pydantic-ai-tools-2025-12-04.json")
    _, (doc,) = trace_import_value(study=study, data=data, fmt=fmt)
    client.force_login(bob)
    url = reverse("coding_page", args=["alpha", doc.episodes.get().pk])
    client.get(url)  # takes the lease
    html = client.get(url).content.decode()
    assert "gpt-4o-mini-2024-07-18 · 338 tokens (265 → 73) · $0.000084 · tool_call" in html
    api = APIClient()
    api.force_authenticate(bob)
    steps = api.get(f"/api/v1/studies/alpha/traces/{doc.pk}/steps/?start=0&limit=5").json()["steps"]
    chat = next(s for s in steps if s["kind"] == "llm_call")
    assert chat["detail"]["total_tokens"] == 338 and chat["detail"]["cost"] == pytest.approx(0.00008355)
    assert next(s for s in steps if s["kind"] == "other")["detail"] == {}
