"""Langfuse trace exports as spans: the JSON its UI downloads ({"trace", "observations"}), its public API returns
(GET /api/public/traces/{id}: a trace with its observations; GET /api/public/observations: {"data": [...]}), or a
list / JSON Lines of either.

Langfuse keeps an OpenTelemetry span's attributes under `metadata.attributes` (JSON text parsed into objects) and
moves the GenAI message attributes and token usage it maps into its own `input`, `output` and `usageDetails`. For
spans a producer sent over OpenTelemetry that is undone: objects back to JSON text, the moved input and output
back under `gen_ai.input.messages`/`gen_ai.output.messages` (message lists) or `input.value`/`output.value`, usage
back under `gen_ai.usage.*`, so the spans map exactly as the producer's OTLP export would (annotate.traces._spans).
Nothing Langfuse inferred about such a span (its observation type, the cost it computed) is carried over.

Observations written by Langfuse's own SDKs (decorators, the OpenAI/LangChain integrations) have no attributes:
their Langfuse fields are the only source, so a GENERATION is a model call (model, usage and the cost Langfuse
shows), a TOOL a tool call, an AGENT an agent run, every other type a step with its input and output.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from annotate.imports.parsed import ImportFileError
from annotate.traces._spans import Span, _iso
from lib import safejson

_INPUT_KEYS = (
    "input.value", "gen_ai.input.messages", "gen_ai.prompt.", "llm.input_messages.", "tool_arguments",
    "gen_ai.tool.call.arguments", "gcp.vertex.agent.llm_request", "gcp.vertex.agent.tool_call_args",
    "ai.prompt.messages", "ai.toolCall.args",
)  # fmt: skip
_OUTPUT_KEYS = (
    "output.value", "gen_ai.output.messages", "gen_ai.completion.", "llm.output_messages.", "tool_response",
    "gen_ai.tool.call.result", "gcp.vertex.agent.llm_response", "gcp.vertex.agent.tool_response",
    "ai.response.text", "ai.response.toolCalls", "ai.toolCall.result",
)  # fmt: skip
_USAGE_KEYS = ("gen_ai.usage.", "llm.token_count.", "ai.usage.")
_SDK_SCOPES = {"langfuse-sdk", "langfuse"}
_LLM_TYPES = {"GENERATION", "EMBEDDING"}
_KNOWN = 'a Langfuse trace download ({"trace", "observations"}), a trace from its API with its observations, or {"data": [observations]}'  # noqa: E501


def _attr(v: Any) -> Any:
    """A value as the OTLP attribute it was before Langfuse parsed it: objects as JSON text, scalars as they are."""
    if isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, list) and all(isinstance(x, bool | int | float | str) for x in v):
        return v
    if v is None:
        return ""
    return json.dumps(v, ensure_ascii=False)


def _is_messages(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(m, dict) and "role" in m for m in v)


_LANGCHAIN_ROLES = {"ai": "assistant", "AIMessage": "assistant", "AIMessageChunk": "assistant", "human": "user",
                    "HumanMessage": "user", "system": "system", "SystemMessage": "system", "tool": "tool",
                    "ToolMessage": "tool"}  # fmt: skip


def _lift_tool_calls(m: dict) -> dict:
    """A LangChain message as a chat message: its `type` as the role, and its tool calls (LangChain's
    [{"name", "args", "id"}], or OpenAI's kept in `additional_kwargs.tool_calls`) in OpenAI's form."""
    if "role" not in m and m.get("type") in _LANGCHAIN_ROLES:
        m = {**m, "role": _LANGCHAIN_ROLES[m["type"]]}
    calls = m.get("tool_calls")
    if isinstance(calls, list) and calls and all(isinstance(c, dict) and "args" in c for c in calls):
        calls = [{"id": c.get("id"), "function": {"name": c.get("name"), "arguments": c["args"]}} for c in calls]
        m = {**m, "tool_calls": calls}
    extra = m.get("additional_kwargs")
    if not m.get("tool_calls") and isinstance(extra, dict) and isinstance(extra.get("tool_calls"), list):
        m = {**m, "tool_calls": extra["tool_calls"]}
    return m


def _message_like(v: Any) -> bool:
    return (
        isinstance(v, dict)
        and ("role" in v or v.get("type") in _LANGCHAIN_ROLES)
        and ("content" in v or "tool_calls" in v)
    )


def _langchain_tool_result(v: Any) -> bool:
    """A LangChain ToolMessage ({"type": "tool", "tool_call_id", ...}): the output of a tool run."""
    return isinstance(v, dict) and v.get("type") == "tool" and bool(v.get("tool_call_id"))


def _put_io(attrs: dict, o: dict, *, one_message: bool = False) -> None:
    """Langfuse's input and output back under the attribute they came from; `one_message`: a lone {role, content}
    (what Langfuse's OpenAI integration records as a generation's output) is a message list of one."""
    for field, keys, messages, value in (
        ("input", _INPUT_KEYS, "gen_ai.input.messages", "input.value"),
        ("output", _OUTPUT_KEYS, "gen_ai.output.messages", "output.value"),
    ):
        v = o.get(field)
        if v is None or any(k.startswith(keys) for k in attrs):
            continue
        if one_message and _message_like(v):
            v = [_lift_tool_calls(v)]
        elif one_message and isinstance(v, list) and v and all(_message_like(m) for m in v):
            v = [_lift_tool_calls(m) for m in v]
        attrs[messages if _is_messages(v) else value] = _attr(v)


# Older Langfuse APIs (v2) name usage {promptTokens, completionTokens, totalTokens} beside {input, output, total}.
_OLD_USAGE = {"promptTokens": "input", "completionTokens": "output", "totalTokens": "total"}


def _usage(o: dict) -> dict:
    usage = o.get("usageDetails") or o.get("usage") or {}
    if not isinstance(usage, dict):
        return {}
    return {**{new: usage[old] for old, new in _OLD_USAGE.items() if usage.get(old) is not None}, **usage}


def _restore(attrs: dict, o: dict) -> dict:
    """An OpenTelemetry span's attributes with what Langfuse moved out of them put back."""
    attrs = {k: _attr(v) for k, v in attrs.items()}
    if "ai.operationId" in attrs:  # Vercel AI SDK: its documented `ai.*` names
        _restore_vercel(attrs, o)
    _put_io(attrs, o)
    usage = _usage(o)
    if usage and not any(k.startswith(_USAGE_KEYS) for k in attrs):
        for ours, theirs in (("input_tokens", "input"), ("output_tokens", "output")):
            if theirs in usage:
                attrs[f"gen_ai.usage.{ours}"] = usage[theirs]
    return attrs


def _restore_vercel(attrs: dict, o: dict) -> None:
    if attrs["ai.operationId"] == "ai.toolCall":
        attrs.setdefault("ai.toolCall.args", _attr(o.get("input")))
        attrs.setdefault("ai.toolCall.result", _attr(o.get("output")))
        return
    if not str(attrs["ai.operationId"]).endswith((".doGenerate", ".doStream")):
        return  # the SDK call's own span: its prompt and result stay as input and output values
    attrs.setdefault("ai.prompt.messages", _attr(o.get("input")))
    out = o.get("output")
    if isinstance(out, str) and out[:1] in "[{":
        with contextlib.suppress(safejson.JSONError):
            out = safejson.loads(out, allow_nul=True)
    if isinstance(out, list):
        attrs.setdefault("ai.response.toolCalls", _attr(out))
    elif out is not None:
        attrs.setdefault("ai.response.text", _attr(out))


def _sdk_attrs(o: dict, meta: dict) -> dict:
    """Attributes for an observation Langfuse's own SDK wrote. Its SDK sends the observation type as the span
    attribute `langfuse.observation.type` (annotate.traces._spans reads it as the span kind) and model, usage,
    cost, input and output as attributes Langfuse moves into its own fields: they are all there is."""
    kind = str(o.get("type") or "SPAN").upper()
    if kind == "SPAN" and _langchain_tool_result(o.get("output")):
        kind = "TOOL"  # Langfuse's LangChain callback records a tool run as a SPAN whose output is a ToolMessage
    attrs: dict[str, Any] = {"langfuse.observation.type": kind} if kind != "SPAN" else {}  # SPAN: the default
    if kind == "TOOL" and _langchain_tool_result(o.get("output")):
        attrs["gen_ai.tool.call.id"] = str(o["output"]["tool_call_id"])
    node = meta.get("langgraph_node")
    if isinstance(node, str) and node:
        attrs["graph.node.id"] = node  # the LangGraph node it ran in: an agent of the graph
    if kind in _LLM_TYPES:
        if o.get("model"):
            attrs["gen_ai.request.model"] = str(o["model"])
        usage = _usage(o)
        for ours, theirs in (("input_tokens", "input"), ("output_tokens", "output"), ("total_tokens", "total")):
            if isinstance(usage.get(theirs), int | float):
                attrs[f"gen_ai.usage.{ours}"] = usage[theirs]
        cost = o.get("totalCost") or o.get("calculatedTotalCost")
        if isinstance(cost, int | float) and cost > 0:
            attrs["gen_ai.usage.cost"] = cost
    _put_io(attrs, o, one_message=kind in _LLM_TYPES)
    return attrs


def _observation_span(o: Any, n: int, where: str) -> Span:
    at = f"{where} observation {n + 1}"
    if not isinstance(o, dict):
        raise ImportFileError(f"{at}: an observation must be an object")
    if not o.get("id") or not o.get("traceId"):
        raise ImportFileError(f"{at}: an observation needs 'id' and 'traceId'")
    meta = o.get("metadata") or {}
    if isinstance(meta, str):
        try:
            meta = safejson.loads(meta, allow_nul=True)
        except safejson.JSONError:
            meta = {}
    meta = meta if isinstance(meta, dict) else {}
    scope = (meta.get("scope") or {}).get("name") if isinstance(meta.get("scope"), dict) else ""
    attrs = meta.get("attributes") if isinstance(meta.get("attributes"), dict) else {}
    attrs = _sdk_attrs(o, meta) if scope in _SDK_SCOPES or not attrs else _restore(attrs, o)
    resource = meta.get("resourceAttributes") if isinstance(meta.get("resourceAttributes"), dict) else {}
    error = str(o.get("level") or "").upper() == "ERROR"
    return Span(
        trace_id=str(o["traceId"]),
        span_id=str(o["id"]),
        parent_id=str(o.get("parentObservationId") or ""),
        name=str(o.get("name") or ""),
        start=_iso(o.get("startTime"), "startTime", at),
        end=_iso(o.get("endTime"), "endTime", at),
        status="error" if error else "",
        status_message=str(o.get("statusMessage") or "") if error else "",
        attrs=attrs,
        service=str(resource.get("service.name") or ""),
        order=n,
    )


def _observations(data: Any, where: str) -> list[Any]:
    """The observations of any accepted shape, in file order."""
    if isinstance(data, list):
        if all(isinstance(d, dict) and "observations" in d for d in data):
            return [o for d in data for o in _observations(d, where)]
        return data
    if not isinstance(data, dict):
        raise ImportFileError(f"{where}: a Langfuse export must be {_KNOWN}")
    if isinstance(data.get("data"), list):  # API list responses: observations, or traces with theirs
        return _observations(data["data"], where)
    obs = data.get("observations")
    if obs is None and isinstance(data.get("trace"), dict):
        obs = data["trace"].get("observations")
    if not isinstance(obs, list):
        raise ImportFileError(f"{where}: a Langfuse export must be {_KNOWN}; this one has no 'observations' list")
    if obs and all(isinstance(o, str) for o in obs):
        raise ImportFileError(
            f"{where}: its observations are only ids (the trace list of Langfuse's API); download each trace "
            "with its observations (GET /api/public/traces/{id}, or Download in the trace view)"
        )
    return obs


# What a Langfuse trace says about itself that a coder may want beside the steps (kept in the document's meta).
_TRACE_META = ("userId", "sessionId", "tags", "release", "version", "environment", "timestamp", "htmlPath")


def _trace_of(d: Any) -> dict | None:
    """The trace object of a download ({"trace": {...}}) or an API trace (the object itself), if any."""
    if not isinstance(d, dict):
        return None
    t = d.get("trace") if isinstance(d.get("trace"), dict) else d
    return t if t.get("id") and "traceId" not in t else None


def langfuse_spans(data: Any, where: str) -> tuple[list[Span], dict[str, dict]]:
    """Spans of a Langfuse export, and per trace id what its trace object says: its name as "title", its user,
    session, tags, release, environment and time as "meta" (Langfuse's own fields, under `langfuse`)."""
    observations = _observations(data, where)
    if not observations:
        raise ImportFileError(f"{where}: the Langfuse export holds no observations")
    traces: dict[str, dict] = {}
    items = data if isinstance(data, list) else data.get("data") if isinstance(data, dict) else None
    for d in items if isinstance(items, list) else [data]:
        if (t := _trace_of(d)) is not None:
            meta = {k: t[k] for k in _TRACE_META if t.get(k) not in (None, "", [])}
            traces[str(t["id"])] = {"title": str(t.get("name") or ""), "meta": {"langfuse": meta} if meta else {}}
    return [_observation_span(o, n, where) for n, o in enumerate(observations)], traces
