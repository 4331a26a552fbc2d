"""Span traces: OTLP/JSON (OpenTelemetry GenAI conventions) and OpenInference (Arize Phoenix), turned into one
step list, depth-first with siblings by start time, tool calls paired with their results."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from annotate.imports.parsed import ImportFileError, clean_text
from annotate.models import StepKind
from annotate.traces.parsed import NAME_LIMIT, Step, TraceRecord, _record, _text, trace_summary
from lib import safejson

# ------------------------------------------------------------------ spans (OTLP and OpenInference)


@dataclass(slots=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: datetime | None
    end: datetime | None
    status: str
    status_message: str
    attrs: dict[str, Any]
    service: str = ""
    events: list = field(default_factory=list)
    order: int = 0


def _flatten(value: Any, prefix: str = "", out: dict | None = None) -> dict[str, Any]:
    """Nested attribute objects (Phoenix writes {"llm": {"model_name": ...}}) as dotted keys."""
    out = {} if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and prefix:
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}.{i}", out)
    else:
        out[prefix] = value
    return out


def _otlp_value(v: Any) -> Any:
    """An OTLP AnyValue ({"stringValue": ...}, {"arrayValue": {"values": [...]}}, ...) as plain JSON."""
    if not isinstance(v, dict):
        return v
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_otlp_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv.get("key"): _otlp_value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values", [])}
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _otlp_attrs(items: Any, where: str) -> dict[str, Any]:
    if items in (None, ""):
        return {}
    if isinstance(items, dict):  # some exporters write a plain map
        return _flatten(items)
    if not isinstance(items, list):
        raise ImportFileError(f"{where}: attributes must be a list of key/value pairs")
    return {str(kv.get("key")): _otlp_value(kv.get("value")) for kv in items if isinstance(kv, dict)}


def _nanos(value: Any, what: str, where: str) -> datetime | None:
    if value in (None, "", 0, "0"):
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1e9, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        raise ImportFileError(f"{where}: {what} must be nanoseconds since the epoch, not {value!r}") from None


def _iso(value: Any, what: str, where: str) -> datetime | None:
    if value in (None, ""):
        return None
    if isinstance(value, int | float):
        return _nanos(value, what, where) if value > 1e14 else datetime.fromtimestamp(value, tz=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise ImportFileError(f"{where}: {what} is not an ISO 8601 time: {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# OTLP status codes (numbers in OTLP/JSON, names in some exporters) and OpenInference's strings.
_STATUS = {2: "error", "STATUS_CODE_ERROR": "error", "ERROR": "error", 1: "ok", "STATUS_CODE_OK": "ok", "OK": "ok"}


def otlp_spans(data: Any, where: str) -> list[Span]:
    """Spans of an OTLP/JSON export ({"resourceSpans": [{"resource", "scopeSpans": [{"spans": []}]}]})."""
    if not isinstance(data, dict) or not isinstance(data.get("resourceSpans"), list):
        raise ImportFileError(f"{where}: OTLP/JSON needs a 'resourceSpans' list")
    spans: list[Span] = []
    for r, rs in enumerate(data["resourceSpans"]):
        if not isinstance(rs, dict):
            raise ImportFileError(f"{where}: resourceSpans[{r}] must be an object")
        resource = _otlp_attrs((rs.get("resource") or {}).get("attributes"), f"{where} resourceSpans[{r}]")
        service = str(resource.get("service.name") or "")
        for s_i, ss in enumerate(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []):
            for n, raw in enumerate((ss or {}).get("spans") or []):
                at = f"{where} resourceSpans[{r}].scopeSpans[{s_i}].spans[{n}]"
                if not isinstance(raw, dict):
                    raise ImportFileError(f"{at}: a span must be an object")
                status = raw.get("status") or {}
                code = status.get("code")
                spans.append(
                    Span(
                        # A hand-written trace may leave the ids out: one trace, spans in file order.
                        trace_id=str(raw.get("traceId") or "trace"),
                        span_id=str(raw.get("spanId") or f"#{len(spans)}"),
                        parent_id=str(raw.get("parentSpanId") or ""),
                        name=str(raw.get("name") or ""),
                        start=_nanos(raw.get("startTimeUnixNano"), "startTimeUnixNano", at),
                        end=_nanos(raw.get("endTimeUnixNano"), "endTimeUnixNano", at),
                        status=_STATUS.get(code, ""),
                        status_message=str(status.get("message") or ""),
                        attrs=_otlp_attrs(raw.get("attributes"), at),
                        service=service,
                        events=[
                            {"name": e.get("name"), "attrs": _otlp_attrs(e.get("attributes"), at)}
                            for e in raw.get("events") or []
                            if isinstance(e, dict)
                        ],
                        order=len(spans),
                    )
                )
    return spans


def openinference_spans(data: Any, where: str) -> list[Span]:
    """Spans as Phoenix exports them: a list (or {"spans"/"data": [...]}, or JSON Lines) of
    {name, context: {trace_id, span_id}, parent_id, start_time, end_time, status_code,
    status_message, attributes}, attributes nested or dotted; flat dataframe-style keys
    ("context.span_id", "attributes.tool.name") are accepted too."""
    items = data
    if isinstance(data, dict):
        items = data.get("spans") or data.get("data") or ([data] if "context" in data or "span_id" in data else None)
    if not isinstance(items, list):
        raise ImportFileError(f"{where}: OpenInference needs a list of spans")
    spans = []
    for n, raw in enumerate(items):
        at = f"{where} span {n + 1}"
        if not isinstance(raw, dict):
            raise ImportFileError(f"{at}: a span must be an object")
        flat = _flatten(raw)
        ctx = raw.get("context") if isinstance(raw.get("context"), dict) else {}
        span_id = ctx.get("span_id") or flat.get("context.span_id") or raw.get("span_id")
        trace_id = ctx.get("trace_id") or flat.get("context.trace_id") or raw.get("trace_id")
        if not span_id or not trace_id:
            raise ImportFileError(f"{at}: a span needs context.trace_id and context.span_id")
        attrs = {k[len("attributes.") :]: v for k, v in flat.items() if k.startswith("attributes.")}
        code = str(raw.get("status_code") or flat.get("status.status_code") or "").upper()
        spans.append(
            Span(
                trace_id=str(trace_id),
                span_id=str(span_id),
                parent_id=str(raw.get("parent_id") or ""),
                name=str(raw.get("name") or ""),
                start=_iso(raw.get("start_time"), "start_time", at),
                end=_iso(raw.get("end_time"), "end_time", at),
                status=_STATUS.get(code, ""),
                status_message=str(raw.get("status_message") or ""),
                attrs=attrs,
                service=str(attrs.get("openinference.project.name") or attrs.get("session.id") or ""),
                events=[e for e in raw.get("events") or [] if isinstance(e, dict)],
                order=n,
            )
        )
    return spans


def _messages_text(value: Any) -> str:
    """GenAI `gen_ai.input.messages`/`output.messages` (a JSON string or list of {role, parts})."""
    if isinstance(value, str):
        try:
            value = safejson.loads(value, allow_nul=True)
        except safejson.JSONError:
            return clean_text(value)
    if not isinstance(value, list):
        return _text(value)
    lines = []
    for m in value:
        if not isinstance(m, dict):
            lines.append(_text(m))
            continue
        role = m.get("role", "")
        for part in m.get("parts") or []:
            kind = part.get("type") if isinstance(part, dict) else ""
            if kind == "text":
                lines.append(f"{role}: {part.get('content', '')}")
            elif kind == "tool_call":
                lines.append(f"{role} calls {part.get('name', '')}({_text(part.get('arguments'))})")
            elif kind == "tool_call_response":
                lines.append(f"tool result {part.get('id', '')}: {_text(part.get('response'))}")
            else:
                lines.append(f"{role}: {_text(part)}")
        if "content" in m and not m.get("parts"):
            lines.append(f"{role}: {_text(m['content'])}")
    return clean_text("\n".join(lines))


def _genai_tool_calls(value: Any) -> list[dict]:
    if isinstance(value, str):
        try:
            value = safejson.loads(value, allow_nul=True)
        except safejson.JSONError:
            return []
    calls = []
    for m in value if isinstance(value, list) else []:
        for part in (m.get("parts") or []) if isinstance(m, dict) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call":
                calls.append(
                    {
                        "id": str(part.get("id") or ""),
                        "name": str(part.get("name") or ""),
                        "arguments": _text(part.get("arguments")),
                    }
                )
    return calls


def _genai_tool_results(value: Any) -> dict[str, str]:
    if isinstance(value, str):
        try:
            value = safejson.loads(value, allow_nul=True)
        except safejson.JSONError:
            return {}
    out = {}
    for m in value if isinstance(value, list) else []:
        for part in (m.get("parts") or []) if isinstance(m, dict) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call_response" and part.get("id"):
                out[str(part["id"])] = _text(part.get("response"))
    return out


def _indexed(attrs: dict, prefix: str) -> list[dict[str, Any]]:
    """OpenInference's flattened lists ("llm.output_messages.0.message.content") as a list of dicts."""
    rows: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix + "."):
            head, _, rest = key[len(prefix) + 1 :].partition(".")
            if head.isdigit():
                rows.setdefault(int(head), {})[rest] = value
    return [rows[i] for i in sorted(rows)]


def _oi_messages_text(attrs: dict, prefix: str) -> str:
    lines = []
    for m in _indexed(attrs, prefix):
        role = m.get("message.role", "")
        if m.get("message.content"):
            lines.append(f"{role}: {m['message.content']}")
        for tc in _indexed(m, "message.tool_calls"):
            lines.append(
                f"{role} calls {tc.get('tool_call.function.name', '')}({tc.get('tool_call.function.arguments', '')})"
            )
    return clean_text("\n".join(lines))


def _oi_tool_calls(attrs: dict) -> list[dict]:
    calls = []
    for m in _indexed(attrs, "llm.output_messages"):
        for tc in _indexed(m, "message.tool_calls"):
            calls.append(
                {
                    "id": str(tc.get("tool_call.id") or ""),
                    "name": str(tc.get("tool_call.function.name") or ""),
                    "arguments": _text(tc.get("tool_call.function.arguments")),
                }
            )
    return calls


_LLM_OPS = {"chat", "text_completion", "generate_content", "embeddings", "retrieval"}
_AGENT_OPS = {"invoke_agent", "create_agent", "invoke_workflow"}
_OI_KINDS = {"LLM": StepKind.LLM_CALL, "TOOL": StepKind.TOOL_CALL, "EMBEDDING": StepKind.LLM_CALL}


def _describe(span: Span) -> dict[str, Any]:
    """kind, name, agent, input, output, tool call id and requested calls of one span, by either convention."""
    a = span.attrs
    op = str(a.get("gen_ai.operation.name") or "")
    oi = str(a.get("openinference.span.kind") or "").upper()
    d: dict[str, Any] = {
        "kind": StepKind.OTHER,
        "name": span.name,
        "agent": "",
        "input": "",
        "output": "",
        "call_id": "",
        "requests": [],
        "results": {},
        "agent_span": False,
    }
    d["agent"] = str(a.get("gen_ai.agent.name") or a.get("agent.name") or a.get("graph.node.name") or "")
    if op == "execute_tool" or oi == "TOOL":
        d["kind"] = StepKind.TOOL_CALL
        d["name"] = str(a.get("gen_ai.tool.name") or a.get("tool.name") or span.name)
        d["input"] = _text(a.get("gen_ai.tool.call.arguments") or a.get("input.value") or a.get("tool.parameters"))
        d["output"] = _text(a.get("gen_ai.tool.call.result") or a.get("output.value"))
        d["call_id"] = str(a.get("gen_ai.tool.call.id") or a.get("tool_call.id") or "")
    elif op in _LLM_OPS or oi in _OI_KINDS:
        d["kind"] = _OI_KINDS.get(oi, StepKind.LLM_CALL)
        model = a.get("gen_ai.request.model") or a.get("llm.model_name") or ""
        d["name"] = span.name or f"{op} {model}".strip()
        d["input"] = (
            _messages_text(a["gen_ai.input.messages"])
            if "gen_ai.input.messages" in a
            else _text(a.get("input.value")) or _oi_messages_text(a, "llm.input_messages")
        )
        d["output"] = (
            _messages_text(a["gen_ai.output.messages"])
            if "gen_ai.output.messages" in a
            else _text(a.get("output.value")) or _oi_messages_text(a, "llm.output_messages")
        )
        d["requests"] = _genai_tool_calls(a.get("gen_ai.output.messages")) or _oi_tool_calls(a)
        d["results"] = _genai_tool_results(a.get("gen_ai.input.messages"))
    else:
        d["agent_span"] = op in _AGENT_OPS or oi == "AGENT"
        d["input"] = _text(a.get("input.value"))
        d["output"] = _text(a.get("output.value"))
    return d


def _span_error(span: Span) -> str:
    if span.status != "error":
        return ""
    parts = [span.status_message, str(span.attrs.get("error.type") or "")]
    for e in span.events:
        ea = e.get("attrs") or e.get("attributes") or {}
        if e.get("name") == "exception":
            parts.append(f"{ea.get('exception.type', '')}: {ea.get('exception.message', '')}".strip(": "))
    return clean_text("\n".join(p for p in parts if p)) or "error"


def spans_to_steps(spans: list[Span]) -> list[Step]:
    """Spans of one trace as steps, depth-first with siblings by start time.

    Agents are inherited from the nearest ancestor that names one, so every step sits in its
    agent's lane. A tool call an LLM asked for (a tool_call part of its output) with no tool
    span carrying its id becomes a step of its own, evidence state *requested*, unless a
    later call shows its result.
    """
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[Span]] = {}
    roots = []
    for s in spans:
        if s.parent_id and s.parent_id in by_id and s.parent_id != s.span_id:
            children.setdefault(s.parent_id, []).append(s)
        else:
            roots.append(s)

    def key(s: Span):
        return (s.start or datetime.max.replace(tzinfo=UTC), s.order)

    described = {s.span_id: _describe(s) for s in spans}
    executed = {d["call_id"] for d in described.values() if d["call_id"]}
    results: dict[str, str] = {}
    for d in described.values():
        results.update(d["results"])
    steps: list[Step] = []
    stack: list[tuple[Span, int | None, str]] = [(s, None, "") for s in sorted(roots, key=key, reverse=True)]
    visited: set[str] = set()
    while stack:
        span, parent_index, parent_agent = stack.pop()
        if span.span_id in visited:
            continue  # a cycle in parent ids: each span once
        visited.add(span.span_id)
        d = described[span.span_id]
        agent = d["agent"] or parent_agent
        kind = d["kind"]
        if d["agent_span"]:
            kind = StepKind.HANDOFF if parent_agent and d["agent"] and d["agent"] != parent_agent else StepKind.OTHER
        step = Step(
            index=len(steps),
            agent=agent[:200],
            kind=kind,
            name=d["name"][:NAME_LIMIT],
            input=d["input"],
            output=d["output"],
            parent_index=parent_index,
            span_id=span.span_id[:100],
            started_at=span.start,
            ended_at=span.end,
            status=span.status,
            error=_span_error(span),
        )
        if kind == StepKind.TOOL_CALL:
            if not step.output and d["call_id"] in results:
                step.output = results[d["call_id"]]
            step.ran = bool(step.output) or span.end is not None or span.status == "error"
        steps.append(step)
        for call in d["requests"]:
            if call["id"] and call["id"] in executed:
                continue
            result = results.get(call["id"], "") if call["id"] else ""
            steps.append(
                Step(
                    index=len(steps),
                    agent=agent[:200],
                    kind=StepKind.TOOL_CALL,
                    name=call["name"][:NAME_LIMIT],
                    input=call["arguments"],
                    output=result,
                    parent_index=step.index,
                    ran=bool(result),
                    span_id=f"{span.span_id}/{call['id']}"[:100] if call["id"] else "",
                )
            )
        for child in sorted(children.get(span.span_id, []), key=key, reverse=True):
            stack.append((child, step.index, agent))
    return steps


def _span_records(spans: list[Span], fmt: str, where: str) -> list[TraceRecord]:
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    out = []
    for trace_id, group in by_trace.items():
        steps = spans_to_steps(group)
        root = steps[0] if steps else None
        service = next((s.service for s in group if s.service), "")
        agents = trace_summary(steps)["agents"]
        cluster = service or (agents[0] if agents else fmt)
        title = f"{root.name}" + (f" ({root.agent})" if root and root.agent else "") if root else trace_id
        record = _record(
            fmt=fmt,
            external_id=f"{fmt}:{trace_id}",
            cluster=cluster,
            title=title,
            steps=steps,
            meta={"trace_id": trace_id, "service": service},
            raw={"trace_id": trace_id, "spans": len(group)},
        )
        out.append(TraceRecord(record, steps, {}))
    return out
