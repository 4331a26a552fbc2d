"""Span traces: OTLP/JSON (OpenTelemetry GenAI conventions) and OpenInference (Arize Phoenix), turned into one
step list, depth-first with siblings by start time, tool calls paired with their results."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from annotate.imports.parsed import ImportFileError, clean_text
from annotate.models import StepKind
from annotate.traces._genai import (
    call_ids,
    llm_input,
    llm_output,
    llm_requests,
    llm_results,
    same_arguments,
    step_detail,
    tool_io,
)
from annotate.traces.parsed import NAME_LIMIT, Step, TraceRecord, _record, _text, trace_summary

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


_LLM_OPS = {"chat", "text_completion", "generate_content", "embeddings", "retrieval"}
_AGENT_OPS = {"invoke_agent", "create_agent", "invoke_workflow"}
# A span with no operation name that names a model is a model call (AG2 writes no gen_ai.operation.name).
_GENAI_LLM = {"gen_ai.request.model", "gen_ai.response.model"}


# Vercel AI SDK: its own `ai.*` names (a tool span is operation "ai.toolCall").
def _vercel_tool(a: dict) -> bool:
    return bool(a.get("ai.toolCall.name")) or a.get("ai.operationId") == "ai.toolCall"


# Langfuse's SDK names a span's kind in `langfuse.observation.type`: read as the OpenInference kind it matches.
_LANGFUSE_KINDS = {"GENERATION": "LLM", "EMBEDDING": "EMBEDDING", "TOOL": "TOOL", "AGENT": "AGENT"}
_OI_KINDS = {"LLM": StepKind.LLM_CALL, "TOOL": StepKind.TOOL_CALL, "EMBEDDING": StepKind.LLM_CALL}
# Agent names in span names: "invoke_agent X" (GenAI convention), "agent_run [X]" (Google ADK), "X run"/"X.run".
_AGENT_NAME = re.compile(r"^(?:invoke_agent|create_agent|agent_run)\s+\[?(?P<a>[^\]]+?)\]?$|^(?P<b>.+?)[ .]run$")


def _agent_attr(a: dict) -> str:
    """The agent a span names by attribute: `gen_ai.agent.name` → `gen_ai.agent.id` → `graph.node.id`, then
    OpenInference's `agent.name` and Pydantic AI's `agent_name` (before it wrote gen_ai.agent.name)."""
    for key in ("gen_ai.agent.name", "gen_ai.agent.id", "graph.node.id", "agent.name", "agent_name"):
        if a.get(key) not in (None, ""):
            return str(a[key])
    return ""


def _describe(span: Span) -> dict[str, Any]:
    """kind, name, agent, input, output, tool call ids and requested calls of one span, by either convention."""
    a = span.attrs
    op = str(a.get("gen_ai.operation.name") or "")
    oi = str(a.get("openinference.span.kind") or "").upper() or _LANGFUSE_KINDS.get(
        a.get("langfuse.observation.type"), ""
    )
    d: dict[str, Any] = {
        "kind": StepKind.OTHER, "name": span.name, "input": "", "output": "", "ids": (), "requests": [],
        "results": {}, "agent": _agent_attr(a), "agent_span": op in _AGENT_OPS or oi == "AGENT",
        "named": False, "detail": step_detail(a, span.status_message),
    }  # fmt: skip
    match = _AGENT_NAME.match(span.name.strip())
    if match and (d["agent_span"] or match["a"]):  # "X run" names an agent only on an agent span
        d["agent"], d["agent_span"] = d["agent"] or (match["a"] or match["b"]).strip(), True
    d["named"] = bool(d["agent"])
    if op == "execute_tool" or oi == "TOOL" or (a.get("gen_ai.tool.name") and op not in _LLM_OPS) or _vercel_tool(a):
        d["kind"] = StepKind.TOOL_CALL
        d["name"] = str(a.get("gen_ai.tool.name") or a.get("tool.name") or a.get("ai.toolCall.name") or span.name)
        d["input"], d["output"] = tool_io(a)
        d["ids"] = call_ids(a.get("gen_ai.tool.call.id") or a.get("tool_call.id") or a.get("ai.toolCall.id"))
    elif op in _LLM_OPS or oi in _OI_KINDS or (not op and not oi and not d["agent_span"] and _GENAI_LLM & a.keys()):
        d["kind"] = _OI_KINDS.get(oi, StepKind.LLM_CALL)
        model = d["detail"].get("model", "")
        d["name"] = span.name or f"{op} {model}".strip()
        d["input"], d["output"] = llm_input(a), llm_output(a)
        d["requests"], d["results"] = llm_requests(a), llm_results(a)
    else:
        d["input"] = _text(a.get("input.value"))
        d["output"] = _text(a.get("output.value"))
    return d


def _tree(spans: list[Span]) -> tuple[dict[str, Span], dict[str, list[Span]], list[Span]]:
    by_id = {s.span_id: s for s in spans}
    children: dict[str, list[Span]] = {}
    roots = []
    for s in spans:
        if s.parent_id and s.parent_id in by_id and s.parent_id != s.span_id:
            children.setdefault(s.parent_id, []).append(s)
        else:
            roots.append(s)
    return by_id, children, roots


def _ancestors(span: Span, by_id: dict[str, Span]) -> list[Span]:
    out, seen = [], {span.span_id}
    while span.parent_id in by_id and span.parent_id not in seen:
        span = by_id[span.parent_id]
        seen.add(span.span_id)
        out.append(span)
    return out


def _name_agent_spans(spans: list[Span], by_id: dict[str, Span], described: dict[str, dict]) -> None:
    """An agent span (AGENT kind, invoke_agent) that names no agent is named by its span's name, unless an agent
    span below it names one (the OpenAI Agents SDK's "Agent workflow" wraps the agents that ran) or one above it
    does (BeeAI's per-event AGENT spans belong to the agent run they sit in)."""
    wraps_named: set[str] = set()
    for s in spans:
        if described[s.span_id]["named"]:
            wraps_named.update(p.span_id for p in _ancestors(s, by_id))
    lineage = {s.span_id: _ancestors(s, by_id) for s in spans}
    for s in sorted(spans, key=lambda s: len(lineage[s.span_id])):  # outer agent runs first
        d = described[s.span_id]
        outer = any(described[p.span_id]["agent"] for p in lineage[s.span_id])
        if d["agent_span"] and not d["agent"] and s.span_id not in wraps_named and not outer:
            d["agent"] = s.name.strip()


def _run_of(span: Span, by_id: dict[str, Span], described: dict[str, dict]) -> str:
    """The agent run a span belongs to: its nearest agent span (itself included), "" outside any."""
    for s in [span, *_ancestors(span, by_id)]:
        if described[s.span_id]["agent_span"]:
            return s.span_id
    return ""


def _match_requests(spans: list[Span], by_id: dict[str, Span], described: dict[str, dict]) -> None:
    """Pair each tool call an LLM asked for with the tool span that ran it, so it is not shown a second time as
    *requested*: by call id anywhere in the trace, else by tool name and arguments within the same agent run.
    A paired request's id is lent to its tool span (for the result the next LLM call was sent), and the
    requests left in `d["requests"]` are those nothing shows ran."""
    order = sorted(spans, key=lambda s: (s.start or datetime.max.replace(tzinfo=UTC), s.order))
    tools = [s for s in order if described[s.span_id]["kind"] == StepKind.TOOL_CALL]
    by_call: dict[str, str] = {i: s.span_id for s in tools for i in described[s.span_id]["ids"]}
    # Tool spans by (agent run, tool name), earliest first: a request looks only among its own.
    pool: dict[tuple[str, str], list[str]] = {}
    for t in tools:
        pool.setdefault((_run_of(t, by_id, described), described[t.span_id]["name"]), []).append(t.span_id)
    taken: set[str] = set()
    for span in order:
        d = described[span.span_id]
        if not d["requests"]:
            continue
        run = _run_of(span, by_id, described)
        left = []
        for call in d["requests"]:
            if any(i in by_call for i in call["ids"]):  # its id ran: paired, whatever else it says
                hit = next((by_call[i] for i in call["ids"] if by_call.get(i) and by_call[i] not in taken), None)
            else:
                same = (t for t in pool.get((run, call["name"]), []) if t not in taken)
                hit = next((t for t in same if same_arguments(described[t]["input"], call["arguments"])), None)
                if hit is None:
                    left.append(call)
            if hit is not None:
                taken.add(hit)
                described[hit]["ids"] = described[hit]["ids"] or call["ids"]
        d["requests"] = left


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
    agent's lane. A tool call an LLM asked for that no tool span ran (_match_requests) becomes a
    step of its own, evidence state *requested*, unless a later LLM call was sent its result.
    """
    by_id, children, roots = _tree(spans)

    def key(s: Span):
        return (s.start or datetime.max.replace(tzinfo=UTC), s.order)

    described = {s.span_id: _describe(s) for s in spans}
    _name_agent_spans(spans, by_id, described)
    _match_requests(spans, by_id, described)
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
        if d["agent_span"] and kind == StepKind.OTHER:
            kind = StepKind.HANDOFF if parent_agent and d["agent"] and d["agent"] != parent_agent else StepKind.OTHER
        step = Step(
            index=len(steps), agent=agent[:200], kind=kind, name=d["name"][:NAME_LIMIT], input=d["input"],
            output=d["output"], parent_index=parent_index, span_id=span.span_id[:100], started_at=span.start,
            ended_at=span.end, status=span.status, error=_span_error(span), detail=d["detail"],
        )  # fmt: skip
        if kind == StepKind.TOOL_CALL:
            if not step.output:
                step.output = next((results[i] for i in d["ids"] if i in results), "")
            step.ran = bool(step.output) or span.end is not None or span.status == "error"
        steps.append(step)
        for call in d["requests"]:
            result = next((results[i] for i in call["ids"] if i in results), "")
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
                    span_id=f"{span.span_id}/{call['ids'][-1]}"[:100] if call["ids"] else "",
                )
            )
        for child in sorted(children.get(span.span_id, []), key=key, reverse=True):
            stack.append((child, step.index, agent))
    return steps


def _span_records(spans: list[Span], fmt: str, where: str, traces: dict[str, dict] | None = None) -> list[TraceRecord]:
    """One TraceRecord per trace id; `traces` holds what the source says about a trace beyond its spans (Langfuse's
    trace name as "title", its user, session, tags, ... as "meta")."""
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
        told = (traces or {}).get(trace_id) or {}
        title = told.get("title") or title
        record = _record(
            fmt=fmt,
            external_id=f"{fmt}:{trace_id}",
            cluster=cluster,
            title=title,
            steps=steps,
            meta={**told.get("meta", {}), "trace_id": trace_id, "service": service},
            raw={"trace_id": trace_id, "spans": len(group)},
        )
        out.append(TraceRecord(record, steps, {}))
    return out
