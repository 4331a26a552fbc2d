"""What a span's attributes say, by the OpenTelemetry GenAI semantic conventions and OpenInference: LLM input
and output text, the tool calls an LLM asked for and the results it was sent, a tool span's arguments and result,
and a step's detail (model, tokens, cost, finish reason, HTTP status and the remaining attributes, bounded)."""

from __future__ import annotations

import json
from typing import Any

import orjson

from annotate.imports.parsed import clean_text
from annotate.traces.parsed import _text
from lib import safejson

DETAIL_LIMIT = 4096  # bytes of a step's remaining attributes, as JSON
VALUE_LIMIT = 400  # characters of one attribute value in a step's detail


def _json(value: Any) -> Any:
    """An attribute that holds JSON text (OTLP attributes are strings) as the value it encodes."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return safejson.loads(value, allow_nul=True)
        except safejson.JSONError:
            return value
    return value


def call_ids(value: Any) -> tuple[str, ...]:
    """A tool call id: one string, or a list of them (Microsoft Agent Framework writes [run id, call id])."""
    value = _json(value)
    if isinstance(value, list):
        return tuple(str(v) for v in value if v not in (None, ""))
    return (str(value),) if value not in (None, "") else ()


def _indexed(attrs: dict, prefix: str) -> list[dict[str, Any]]:
    """Flattened lists ("llm.output_messages.0.message.content", "gen_ai.prompt.1.role") as a list of dicts."""
    rows: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    for key, value in attrs.items():
        if key.startswith(start):
            head, _, rest = key[len(start) :].partition(".")
            if head.isdigit():
                rows.setdefault(int(head), {})[rest] = value
    return [rows[i] for i in sorted(rows)]


def _call(cid: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"ids": call_ids(cid), "name": str(name or ""), "arguments": _text(_json(arguments))}


# ------------------------------------------------------------------ GenAI messages ({role, parts}) and Gemini contents


def _part_lines(role: str, part: Any) -> list[str]:
    if not isinstance(part, dict):
        return [f"{role}: {_text(part)}"]
    kind = part.get("type")
    if kind == "text" or (kind is None and "text" in part):
        return [f"{role}: {part.get('content', part.get('text', ''))}"]
    if kind == "tool_call" or "function_call" in part:
        fc = part.get("function_call") or part
        return [f"{role} calls {fc.get('name', '')}({_text(_json(fc.get('arguments', fc.get('args'))))})"]
    if kind == "tool_call_response" or "function_response" in part:
        fr = part.get("function_response") or part
        return [f"tool result {fr.get('id') or fr.get('name') or ''}: {_text(fr.get('response'))}"]
    return [f"{role}: {_text(part)}"]


def _messages(value: Any) -> list:
    value = _json(value)
    if isinstance(value, dict):  # Gemini: {"contents": [...]} in a request, {"content": {...}} in a response
        value = value.get("contents") or ([value["content"]] if isinstance(value.get("content"), dict) else [value])
    return value if isinstance(value, list) else []


def _messages_text(value: Any) -> str:
    """`gen_ai.input.messages`/`output.messages` (JSON text or a list of {role, parts}), Gemini contents too."""
    if isinstance(_json(value), str):
        return clean_text(value)
    lines = []
    for m in _messages(value):
        if not isinstance(m, dict):
            lines.append(_text(m))
            continue
        role = str(m.get("role") or "")
        for part in m.get("parts") or []:
            lines += _part_lines(role, part)
        if m.get("content") not in (None, "") and not m.get("parts"):
            lines.append(f"{role}: {_text(_json(m['content']))}")
        lines += [f"{role} calls {c['name']}({c['arguments']})" for c in _openai_calls(m)]
    return clean_text("\n".join(lines))


def _openai_calls(m: dict) -> list[dict]:
    """A chat message's `tool_calls` ([{"id", "function": {"name", "arguments"}}]), as some producers write
    them inside `gen_ai.*.messages` instead of parts."""
    out = []
    for tc in m.get("tool_calls") or []:
        if isinstance(tc, dict) and isinstance(tc.get("function"), dict):
            out.append(_call(tc.get("id"), tc["function"].get("name"), tc["function"].get("arguments")))
    return out


def _messages_calls(value: Any) -> list[dict]:
    calls = []
    for m in _messages(value):
        for part in (m.get("parts") or []) if isinstance(m, dict) else []:
            if isinstance(part, dict) and (part.get("type") == "tool_call" or "function_call" in part):
                fc = part.get("function_call") or part
                calls.append(_call(fc.get("id"), fc.get("name"), fc.get("arguments", fc.get("args"))))
        calls += _openai_calls(m) if isinstance(m, dict) else []
    return calls


def _messages_results(value: Any) -> dict[str, str]:
    out = {}
    for m in _messages(value):
        for part in (m.get("parts") or []) if isinstance(m, dict) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call_response":
                for cid in call_ids(part.get("id")):
                    out[cid] = _text(part.get("response"))
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id"):
            out[str(m["tool_call_id"])] = _text(_json(m.get("content")))
    return out


# ------------------------------------------------------------------ indexed messages (OpenInference, OpenLLMetry/Koog)


def _oi_content(m: dict) -> str:
    """A message's text: `message.content`, or its `message.contents.N.message_content.text` parts."""
    if m.get("message.content") not in (None, ""):
        return _text(_json(m["message.content"]))
    return "\n".join(
        str(c.get("message_content.text")) for c in _indexed(m, "message.contents") if c.get("message_content.text")
    )


def _oi_calls(m: dict) -> list[dict]:
    return [
        _call(tc.get("tool_call.id"), tc.get("tool_call.function.name"), tc.get("tool_call.function.arguments"))
        for tc in _indexed(m, "message.tool_calls")
    ]


def _streamed(messages: list[dict]) -> str | None:
    """One reply written as a message per streamed token (BeeAI: hundreds of one-word assistant messages), joined
    back into its text; None for an ordinary message list."""
    if len(messages) < 8 or len({m.get("message.role") for m in messages}) != 1:
        return None
    if any(_indexed(m, "message.tool_calls") for m in messages):
        return None
    parts = [_oi_content(m) for m in messages]
    if sum(map(len, parts)) / len(parts) > 12:
        return None
    return f"{messages[0].get('message.role', '')}: {''.join(parts)}"


def _oi_text(attrs: dict, prefix: str) -> str:
    messages = _indexed(attrs, prefix)
    if (joined := _streamed(messages)) is not None:
        return clean_text(joined)
    lines = []
    for m in messages:
        role = m.get("message.role", "")
        if text := _oi_content(m):
            lines.append(f"{role}: {text}")
        lines += [f"{role} calls {c['name']}({c['arguments']})" for c in _oi_calls(m)]
    return clean_text("\n".join(lines))


def _indexed_calls(m: dict) -> list[dict]:
    """Tool calls of a `gen_ai.completion.N` message: `tool_calls.M.*` (OpenLLMetry), or content holding
    [{"id", "function": {"name", "arguments"}}] (Koog)."""
    calls = [_call(tc.get("id"), tc.get("name"), tc.get("arguments")) for tc in _indexed(m, "tool_calls")]
    content = _json(m.get("content"))
    if isinstance(content, list):
        for c in content:
            if isinstance(c, dict) and isinstance(c.get("function"), dict):
                calls.append(_call(c.get("id"), c["function"].get("name"), c["function"].get("arguments")))
    return calls


def _indexed_text(attrs: dict, prefix: str) -> str:
    lines = []
    for m in _indexed(attrs, prefix):
        role = m.get("role", "")
        calls = _indexed_calls(m)
        if m.get("content") not in (None, "") and not (calls and isinstance(_json(m["content"]), list)):
            lines.append(f"{role}: {_text(_json(m['content']))}")
        lines += [f"{role} calls {c['name']}({c['arguments']})" for c in calls]
    return clean_text("\n".join(lines))


# ------------------------------------------------------------------ OpenAI Responses JSON


def _api_output(value: Any) -> tuple[list[str], list[dict]] | None:
    """An OpenAI response body as (lines of text, tool calls), else None: a Responses object
    ({"output": [message | function_call items]}) or a Chat Completion ({"choices": [{"message"}]})."""
    value = _json(value)
    if not isinstance(value, dict):
        return None
    lines: list[str] = []
    calls: list[dict] = []
    if isinstance(value.get("output"), list):
        for item in (i for i in value["output"] if isinstance(i, dict)):
            if item.get("type") == "message":
                texts = [c["text"] for c in item.get("content") or [] if isinstance(c, dict) and c.get("text")]
                lines += [f"{item.get('role', 'assistant')}: {t}" for t in texts]
            elif item.get("type") == "function_call":
                calls.append(_call(item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments")))
    elif isinstance(value.get("content"), list):  # an Anthropic message: text and tool_use blocks
        for block in (b for b in value["content"] if isinstance(b, dict)):
            if block.get("type") == "text" and block.get("text"):
                lines.append(f"{value.get('role', 'assistant')}: {block['text']}")
            elif block.get("type") == "tool_use":
                calls.append(_call(block.get("id"), block.get("name"), block.get("input")))
    elif isinstance(value.get("choices"), list):
        for choice in (c for c in value["choices"] if isinstance(c, dict)):
            message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
            if message.get("content"):
                lines.append(f"{message.get('role', 'assistant')}: {_text(message['content'])}")
            for tc in (t for t in message.get("tool_calls") or [] if isinstance(t, dict)):
                fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
                calls.append(_call(tc.get("id"), fn.get("name"), fn.get("arguments")))
    else:
        return None
    lines += [f"assistant calls {c['name']}({c['arguments']})" for c in calls]
    return lines, calls


# ------------------------------------------------------------------ what the describer asks


def _vercel_calls(value: Any) -> list[dict]:
    """Vercel AI SDK's `ai.response.toolCalls`: [{"toolCallId", "toolName", "args" | "input"}]."""
    value = _json(value)
    return [
        _call(c.get("toolCallId"), c.get("toolName"), c.get("args", c.get("input")))
        for c in (value if isinstance(value, list) else [])
        if isinstance(c, dict) and c.get("toolName")
    ]


def llm_input(a: dict) -> str:
    if "gen_ai.input.messages" in a:
        return _messages_text(a["gen_ai.input.messages"])
    return (
        _oi_text(a, "llm.input_messages")
        or _indexed_text(a, "gen_ai.prompt")
        or _messages_text(a.get("ai.prompt.messages"))
        or _text(a.get("input.value") or a.get("gen_ai.prompt") or a.get("ai.prompt"))
        or _messages_text(a.get("gcp.vertex.agent.llm_request"))
    )


def llm_output(a: dict) -> str:
    if "gen_ai.output.messages" in a:
        return _messages_text(a["gen_ai.output.messages"])
    text = _oi_text(a, "llm.output_messages") or _indexed_text(a, "gen_ai.completion")
    if text:
        return text
    if a.get("ai.response.text") or a.get("ai.response.toolCalls"):
        calls = _vercel_calls(a.get("ai.response.toolCalls"))
        lines = [f"assistant: {a['ai.response.text']}"] if a.get("ai.response.text") else []
        return clean_text("\n".join(lines + [f"assistant calls {c['name']}({c['arguments']})" for c in calls]))
    raw = a.get("output.value") or a.get("gen_ai.completion")
    api = _api_output(raw)
    if api is not None:
        return clean_text("\n".join(api[0]))
    return _text(raw) or _messages_text(a.get("gcp.vertex.agent.llm_response"))


def llm_requests(a: dict) -> list[dict]:
    """The tool calls an LLM span asked for: [{"ids", "name", "arguments"}]."""
    if "gen_ai.output.messages" in a:
        return _messages_calls(a["gen_ai.output.messages"])
    calls = [c for m in _indexed(a, "llm.output_messages") for c in _oi_calls(m)]
    calls += [c for m in _indexed(a, "gen_ai.completion") for c in _indexed_calls(m)]
    if not calls and "gcp.vertex.agent.llm_response" in a:
        calls = _messages_calls(a["gcp.vertex.agent.llm_response"])
    if not calls and "ai.response.toolCalls" in a:
        calls = _vercel_calls(a["ai.response.toolCalls"])
    if not calls and (api := _api_output(a.get("output.value") or a.get("gen_ai.completion"))) is not None:
        calls = api[1]
    return calls


def llm_results(a: dict) -> dict[str, str]:
    """Tool results an LLM span was sent, by call id."""
    out = _messages_results(a.get("gen_ai.input.messages"))
    for m in _indexed(a, "llm.input_messages"):
        if m.get("message.tool_call_id"):
            out[str(m["message.tool_call_id"])] = _oi_content(m)
    for m in _indexed(a, "gen_ai.prompt"):
        if m.get("tool_call_id"):
            out[str(m["tool_call_id"])] = _text(_json(m.get("content")))
    return out


_TOOL_ARGS = ("gen_ai.tool.call.arguments", "input.value", "tool_arguments", "gcp.vertex.agent.tool_call_args",
              "ai.toolCall.args", "ai.toolCall.input")  # fmt: skip
_TOOL_RESULT = ("gen_ai.tool.call.result", "output.value", "tool_response", "gcp.vertex.agent.tool_response",
                "ai.toolCall.result", "ai.toolCall.output")  # fmt: skip


def tool_io(a: dict) -> tuple[str, str]:
    """A tool span's arguments and result (GenAI, OpenInference, Pydantic AI, Google ADK names)."""
    args = next((a[k] for k in _TOOL_ARGS if a.get(k) not in (None, "")), a.get("tool.parameters"))
    result = next((a[k] for k in _TOOL_RESULT if a.get(k) not in (None, "")), None)
    return _text(args), _text(result)  # JSON text stays as the producer wrote it


def same_arguments(left: str, right: str) -> bool:
    """Two calls' arguments are the same JSON (whitespace and key order aside); none at all matches {}."""

    def norm(text: str) -> Any:
        value = _json(text.strip()) if text.strip() else {}
        return json.dumps(value, sort_keys=True) if not isinstance(value, str) else value.strip()

    def unwrapped(text: str) -> str:
        """Arguments a tool span wraps in {"input": ...} (LangSmith's tool runs), as the call sent them."""
        value = _json(text.strip())
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("input", "args", "arguments"):
            return json.dumps(next(iter(value.values())))
        return text

    return norm(left) == norm(right) or norm(unwrapped(left)) == norm(unwrapped(right))


# ------------------------------------------------------------------ a step's detail

_CONTENT_PREFIXES = (
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.",
    "llm.output_messages.", "input.value", "output.value", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
    "tool_arguments", "tool_response", "gcp.vertex.agent.llm_request", "gcp.vertex.agent.llm_response",
    "gcp.vertex.agent.tool_call_args", "gcp.vertex.agent.tool_response", "logfire.json_schema", "ai.prompt.messages",
    "ai.response.text", "ai.response.toolCalls", "ai.toolCall.args", "ai.toolCall.result", "ai.toolCall.input",
    "ai.toolCall.output",
)  # fmt: skip
_FIRST = {
    "model": ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "ai.response.model", "ai.model.id"),
    "input_tokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt",
                     "ai.usage.promptTokens"),
    "output_tokens": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion",
                      "ai.usage.completionTokens"),
    "total_tokens": ("gen_ai.usage.total_tokens", "llm.usage.total_tokens", "llm.token_count.total"),
    "cost": ("gen_ai.usage.cost", "operation.cost", "llm.cost.total"),
    "finish_reason": ("gen_ai.response.finish_reasons", "gen_ai.completion.0.finish_reason",
                      "llm.output_messages.0.message.finish_reason", "ai.response.finishReason"),
    "http_status": ("http.response.status_code", "http.status_code"),
}  # fmt: skip


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # what orjson refuses (integers past 64 bits, keys that are not strings)
        return json.dumps(value, ensure_ascii=False, default=str)


def _number(value: Any, kind: type) -> int | float | None:
    try:
        return kind(float(value)) if kind is int else float(value)
    except (TypeError, ValueError):
        return None


def _first(a: dict, keys: tuple[str, ...]) -> Any:
    return next((a[k] for k in keys if a.get(k) not in (None, "", [])), None)


def step_detail(a: dict, status_message: str = "") -> dict[str, Any]:
    """Model, tokens, cost, finish reason, HTTP status, and every other attribute, its text cut at VALUE_LIMIT
    characters and the whole at DETAIL_LIMIT bytes (what is left out is counted under "attributes_omitted")."""
    d: dict[str, Any] = {}
    if model := _first(a, _FIRST["model"]):
        d["model"] = str(model)[:200]
    for key in ("input_tokens", "output_tokens", "total_tokens", "http_status"):
        if (n := _number(_first(a, _FIRST[key]), int)) is not None:
            d[key] = n
    if "total_tokens" not in d and "input_tokens" in d and "output_tokens" in d:
        d["total_tokens"] = d["input_tokens"] + d["output_tokens"]
    if (cost := _number(_first(a, _FIRST["cost"]), float)) is not None:
        d["cost"] = cost
    if (reason := _json(_first(a, _FIRST["finish_reason"]))) is not None:
        d["finish_reason"] = ", ".join(map(str, reason)) if isinstance(reason, list) else str(reason)
    if status_message:
        d["status_message"] = status_message[:VALUE_LIMIT]
    used = {k for keys in _FIRST.values() for k in keys}
    rest: dict[str, str] = {}
    size, omitted = 2, 0
    for key in sorted(a):
        if key in used or key.startswith(_CONTENT_PREFIXES) or a[key] in (None, ""):
            continue
        value = a[key] if isinstance(a[key], str) else _dumps(a[key])
        value = value if len(value) <= VALUE_LIMIT else value[:VALUE_LIMIT] + "… [cut]"
        cost_of = len(orjson.dumps(key)) + len(orjson.dumps(value)) + 4  # "key": "value", as json.dumps writes it
        if size + cost_of > DETAIL_LIMIT:
            omitted += 1
            continue
        rest[key] = value
        size += cost_of
    if rest:
        d["attributes"] = rest
    if omitted:
        d["attributes_omitted"] = omitted
    return d
