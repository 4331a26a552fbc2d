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


def _dotted(value, prefix: str = "", sequences: bool = True) -> dict:
    """Nested attributes as Phoenix flattens them (phoenix.trace.attributes.flatten): dotted keys, lists of
    objects by position when `sequences`, else kept as lists of flattened objects (the dataframe's cells)."""
    out: dict = {}
    if isinstance(value, dict):
        for k, v in value.items():
            out.update(_dotted(v, f"{prefix}.{k}" if prefix else k, sequences))
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        if sequences:
            for i, v in enumerate(value):
                out.update(_dotted(v, f"{prefix}.{i}", sequences))
        else:
            out[prefix] = [_dotted(v, "", sequences) for v in value]
    else:
        out[prefix] = value
    return out


def phoenix_api_spans() -> dict:
    """openinference_trace() as Phoenix's REST API returns it (GET /v1/projects/{project}/spans): flattened
    attributes with `openinference.span.kind` moved out into `span_kind`, a Global ID, newest first, a cursor."""
    spans = []
    for n, s in enumerate(openinference_trace()):
        attrs = _dotted(s["attributes"])
        kind = attrs.pop("openinference.span.kind", "UNKNOWN")
        spans.append({"id": f"U3BhbjoxM{n}", **s, "span_kind": kind, "attributes": attrs,
                      "status_code": s["status_code"]})  # fmt: skip
    return {"data": spans[::-1], "next_cursor": None}


def phoenix_dataframe_records() -> list[dict]:
    """openinference_trace() as `px.Client().get_spans_dataframe().to_json(orient="records")` writes it: one
    flat object per span with every column (null where a span has none), times in epoch milliseconds."""
    rows = []
    for s in openinference_trace():
        attrs = _dotted(s["attributes"], sequences=False)
        kind = attrs.pop("openinference.span.kind", "UNKNOWN")
        row = {
            "name": s["name"], "span_kind": kind, "parent_id": s["parent_id"],
            "start_time": _epoch_ms(s["start_time"]), "end_time": _epoch_ms(s["end_time"]),
            "status_code": s["status_code"], "status_message": s["status_message"], "events": s["events"],
            "context.span_id": s["context"]["span_id"], "context.trace_id": s["context"]["trace_id"],
        }  # fmt: skip
        row.update({f"attributes.{k}": v for k, v in attrs.items()})
        rows.append(row)
    columns = sorted({k for r in rows for k in r})
    return [{c: r.get(c) for c in columns} for r in rows]


def _epoch_ms(iso):
    from datetime import datetime

    return None if not iso else int(datetime.fromisoformat(iso).timestamp() * 1000)


def langfuse_sdk_trace() -> dict:
    """A trace as Langfuse's API returns it (GET /api/public/traces/{id}) for an app traced with Langfuse's own
    SDK (no OpenTelemetry attributes): an agent, a generation that asks for a tool, the tool, a failing span."""

    def obs(oid, parent, kind, name, start, end, **extra):
        return {
            "id": oid, "traceId": "lf-trace-1", "type": kind, "name": name, "parentObservationId": parent,
            "startTime": f"2026-02-01T10:00:0{start}.000Z", "endTime": end and f"2026-02-01T10:00:0{end}.000Z",
            "level": "DEFAULT", "statusMessage": None, "metadata": {}, "input": None, "output": None,
            "model": None, "usageDetails": {}, "costDetails": {}, "totalCost": 0, **extra,
        }  # fmt: skip

    return {
        "id": "lf-trace-1", "name": "refund-bot", "timestamp": "2026-02-01T10:00:00.000Z", "userId": "u-7",
        "sessionId": "s-1", "tags": ["prod"], "input": {"question": "refund order 42"}, "output": None,
        "observations": [
            obs("a", None, "AGENT", "refund_agent", 0, 9, input={"question": "refund order 42"}),
            obs("g", "a", "GENERATION", "chat", 1, 2, model="gpt-4o-mini",
                input=[{"role": "system", "content": "You issue refunds."},
                       {"role": "user", "content": "refund order 42"}],
                output={"role": "assistant", "content": "Looking the order up first."},
                usageDetails={"input": 30, "output": 12, "total": 42}, totalCost=0.00021),
            obs("t", "a", "TOOL", "lookup_order", 3, 4, input={"order": 42}, output={"status": "shipped"}),
            obs("e", "a", "SPAN", "issue_refund", 5, 6, level="ERROR", statusMessage="payment gateway timeout",
                input={"order": 42}),
        ],
    }  # fmt: skip
