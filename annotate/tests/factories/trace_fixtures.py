"""Traces built in tests: an OTLP/JSON export following the OpenTelemetry GenAI conventions and the same
run as OpenInference spans (Phoenix's JSON), each with nested spans and tool calls with and without results."""

from __future__ import annotations

import json

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z in nanoseconds


def _kv(key, value):
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(span_id, parent, name, start_ms, end_ms, attrs, *, error=None):
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(T0 + start_ms * 1_000_000),
        "attributes": [_kv(k, v) for k, v in attrs.items()],
        "status": {"code": 2, "message": error} if error else {"code": 1},
    }
    if parent:
        span["parentSpanId"] = parent
    if end_ms is not None:
        span["endTimeUnixNano"] = str(T0 + end_ms * 1_000_000)
    return span


def otlp_trace() -> dict:
    """planner invokes coder; coder's chat asks for two tools: run_tests (executed, with a result) and
    deploy (never executed); write_file runs (a finished span, no result recorded) and fails."""
    ask = json.dumps(
        [
            {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": "call_1", "name": "run_tests", "arguments": {"path": "tests/"}},
                    {"type": "tool_call", "id": "call_2", "name": "deploy", "arguments": {"env": "prod"}},
                ],
            }
        ]
    )
    spans = [
        _span(
            "a1",
            None,
            "invoke_agent planner",
            0,
            1000,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
        ),
        _span(
            "a2",
            "a1",
            "invoke_agent coder",
            100,
            900,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"},
        ),
        _span(
            "c1",
            "a2",
            "chat gpt-4o",
            110,
            300,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "fix it"}]}]
                ),
                "gen_ai.output.messages": ask,
            },
        ),
        _span(
            "t1",
            "a2",
            "execute_tool run_tests",
            310,
            500,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "run_tests",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": '{"path": "tests/"}',
                "gen_ai.tool.call.result": "3 passed, 1 failed",
            },
        ),
        _span(
            "t2",
            "a2",
            "execute_tool write_file",
            510,
            600,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "write_file",
                "gen_ai.tool.call.id": "call_3",
                "gen_ai.tool.call.arguments": '{"path": "app.py"}',
            },
            error="PermissionError",
        ),
        _span(
            "t3",
            "a1",
            "execute_tool notify",
            950,
            None,
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "notify", "gen_ai.tool.call.id": "call_4"},
        ),
    ]
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_kv("service.name", "checkout-agent")]},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
            }
        ]
    }


def openinference_trace() -> list[dict]:
    """The same run as Phoenix exports it (nested attribute objects, ISO times, status strings)."""

    def span(span_id, parent, name, start, end, attrs, status="OK"):
        return {
            "name": name,
            "context": {"trace_id": "oi-trace-1", "span_id": span_id},
            "parent_id": parent,
            "start_time": f"2026-01-01T00:00:0{start}+00:00",
            "end_time": end and f"2026-01-01T00:00:0{end}+00:00",
            "status_code": status,
            "status_message": "boom" if status == "ERROR" else "",
            "attributes": attrs,
            "events": [],
        }

    return [
        span(
            "r",
            None,
            "agent run",
            0,
            9,
            {
                "openinference": {"span": {"kind": "AGENT"}},
                "agent": {"name": "planner"},
                "input": {"value": "fix the bug"},
            },
        ),
        span(
            "l",
            "r",
            "ChatCompletion",
            1,
            2,
            {
                "openinference": {"span": {"kind": "LLM"}},
                "llm": {
                    "model_name": "gpt-4o",
                    "output_messages": [
                        {
                            "message": {
                                "role": "assistant",
                                "tool_calls": [
                                    {
                                        "tool_call": {
                                            "id": "x1",
                                            "function": {"name": "search", "arguments": '{"q": "bug"}'},
                                        }
                                    },
                                    {
                                        "tool_call": {
                                            "id": "x2",
                                            "function": {"name": "email", "arguments": '{"to": "ops"}'},
                                        }
                                    },
                                ],
                            }
                        }
                    ],
                },
            },
        ),
        span(
            "s",
            "r",
            "search",
            3,
            4,
            {
                "openinference": {"span": {"kind": "TOOL"}},
                "tool": {"name": "search"},
                "tool_call": {"id": "x1"},
                "input": {"value": '{"q": "bug"}'},
                "output": {"value": "3 results"},
            },
        ),
        span(
            "d",
            "s",
            "db write",
            4,
            5,
            {"openinference": {"span": {"kind": "TOOL"}}, "tool": {"name": "db_write"}},
            status="ERROR",
        ),
    ]
