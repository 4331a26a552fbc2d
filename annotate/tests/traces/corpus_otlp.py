"""The conformance corpus as OTLP/JSON: files already in OTLP/JSON as they are, and Langfuse trace downloads
(the "framework traces" of langfuse/langfuse, see corpus/README.md) turned back into the OTLP spans their
producers sent.

Langfuse keeps each span's OpenTelemetry attributes under `metadata.attributes` (JSON text parsed into objects)
and moves the GenAI message attributes and token usage it maps into its own `input`, `output` and
`usageDetails` fields. The conversion undoes exactly that: objects back to JSON text, lists of scalars back to
array values, and for spans of the producer's own instrumentation scope (not Langfuse's SDK) the moved input
and output back under `gen_ai.input.messages`/`gen_ai.output.messages` (message lists) or
`input.value`/`output.value`, and usage back under `gen_ai.usage.*`. Nothing of Langfuse's own inference
(observation types, costs it computed) is carried over.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "corpus"
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


def _any_value(v: Any) -> dict:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list) and all(isinstance(x, str | int | float | bool) for x in v):
        return {"arrayValue": {"values": [_any_value(x) for x in v]}}
    if isinstance(v, dict | list):
        return {"stringValue": json.dumps(v, ensure_ascii=False)}
    return {"stringValue": "" if v is None else str(v)}


def _nanos(iso: str | None) -> str | None:
    if not iso:
        return None
    return str(int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1_000_000) * 1000)


def _is_messages(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(m, dict) and "role" in m for m in v)


def _restore(attrs: dict, o: dict) -> dict:
    attrs = dict(attrs)
    if "ai.operationId" in attrs:  # Vercel AI SDK: its documented `ai.*` names
        _restore_vercel(attrs, o)
    if o.get("input") is not None and not any(k.startswith(_INPUT_KEYS) for k in attrs):
        attrs["gen_ai.input.messages" if _is_messages(o["input"]) else "input.value"] = o["input"]
    if o.get("output") is not None and not any(k.startswith(_OUTPUT_KEYS) for k in attrs):
        attrs["gen_ai.output.messages" if _is_messages(o["output"]) else "output.value"] = o["output"]
    usage = o.get("usageDetails") or {}
    if usage and not any(k.startswith(("gen_ai.usage.", "llm.token_count.", "ai.usage.")) for k in attrs):
        for ours, theirs in (("input_tokens", "input"), ("output_tokens", "output")):
            if theirs in usage:
                attrs[f"gen_ai.usage.{ours}"] = usage[theirs]
    return attrs


def _restore_vercel(attrs: dict, o: dict) -> None:
    if attrs["ai.operationId"] == "ai.toolCall":
        attrs.setdefault("ai.toolCall.args", o.get("input"))
        attrs.setdefault("ai.toolCall.result", o.get("output"))
        return
    if not attrs["ai.operationId"].endswith((".doGenerate", ".doStream")):
        return  # the SDK call's own span: its prompt and result stay as input and output values
    attrs.setdefault("ai.prompt.messages", o.get("input"))
    out = o.get("output")
    out = json.loads(out) if isinstance(out, str) and out[:1] in "[{" else out
    if isinstance(out, list):
        attrs.setdefault("ai.response.toolCalls", out)
    elif out is not None:
        attrs.setdefault("ai.response.text", out)


def langfuse_to_otlp(data: dict) -> dict:
    """A Langfuse trace download ({"trace", "observations"}) as one OTLP/JSON export."""
    resource_spans = []
    for o in data["observations"]:
        meta = o.get("metadata") or {}
        meta = json.loads(meta) if isinstance(meta, str) else meta
        scope = (meta.get("scope") or {}).get("name") or ""
        attrs = meta.get("attributes") or {}
        if scope != "langfuse-sdk":
            attrs = _restore(attrs, o)
        span = {
            "traceId": o["traceId"],
            "spanId": o["id"],
            "parentSpanId": o.get("parentObservationId") or "",
            "name": o.get("name") or "",
            "startTimeUnixNano": _nanos(o.get("startTime")),
            "endTimeUnixNano": _nanos(o.get("endTime")),
            "attributes": [{"key": k, "value": _any_value(v)} for k, v in attrs.items()],
        }
        if o.get("level") == "ERROR":
            span["status"] = {"code": 2, "message": o.get("statusMessage") or ""}
        resource = [{"key": k, "value": _any_value(v)} for k, v in (meta.get("resourceAttributes") or {}).items()]
        resource_spans.append(
            {"resource": {"attributes": resource}, "scopeSpans": [{"scope": {"name": scope}, "spans": [span]}]}
        )
    return {"resourceSpans": resource_spans}


def corpus_otlp(name: str) -> dict:
    data = json.loads((CORPUS / name).read_text(encoding="utf-8"))
    return data if "resourceSpans" in data else langfuse_to_otlp(data)
