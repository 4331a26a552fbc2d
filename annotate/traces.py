"""Parsers for agent traces: OTLP/JSON (OpenTelemetry GenAI conventions), OpenInference spans
(Arize Phoenix), Who&When multi-agent logs and MAST trace records.

Parsers are pure, like annotate.importers: they read JSON and return `TraceRecord`s (a
Document record, its steps, a reference attribution and artifacts) without touching the
database. Anything malformed raises ImportFileError naming the record; nothing is written.

Every format ends as the same step list (annotate.models.TraceStep): index in reading order
(spans depth-first, siblings by start time; log entries in file order), parent, span id,
agent, kind, name, input, output, times, status and error. A tool call is paired with its
result where the trace has one, and `ran` records whether it ran at all.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from annotate.imports.parsed import ImportFileError, Record, clean_json, clean_text
from annotate.models import DocumentKind, StepKind, StepStatus

FORMATS = ("otlp", "openinference", "whowhen", "mast")
TRACE_EXTENSIONS = {".json", ".jsonl", ".ndjson"}
BODY_LIMIT = 1_000_000  # the searchable text of a trace; the steps themselves are stored whole
NAME_LIMIT = 500


@dataclass(slots=True)
class Step:
    index: int
    agent: str = ""
    kind: str = StepKind.OTHER
    name: str = ""
    input: str = ""
    output: str = ""
    parent_index: int | None = None
    depth: int = 0
    span_id: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    status: str = StepStatus.UNSET
    error: str = ""
    paired_index: int | None = None
    ran: bool = False


@dataclass(slots=True)
class TraceArtifact:
    kind: str
    name: str
    content: str = ""
    url: str = ""
    span_id: str = ""
    step: int | None = None


@dataclass(slots=True)
class TraceRecord:
    record: Record
    steps: list[Step]
    reference: dict[str, Any] = field(default_factory=dict)
    artifacts: list[TraceArtifact] = field(default_factory=list)


# ------------------------------------------------------------------ shared helpers


def _text(value: Any) -> str:
    """Any JSON value as display text: strings as they are, lists of lines joined, the rest as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return clean_text("\n".join(value))
    return clean_text(json.dumps(value, ensure_ascii=False, indent=1))


def _finish(steps: list[Step]) -> None:
    """Depths from parents, and tool-call ↔ result pairing by order within one agent's turn."""
    by_index = {s.index: s for s in steps}
    for s in steps:
        parent = by_index.get(s.parent_index) if s.parent_index is not None else None
        s.depth = min(parent.depth + 1, 30) if parent is not None else 0
    for s in steps:
        if s.kind == StepKind.TOOL_CALL and s.paired_index is not None:
            s.ran = True


def trace_summary(steps: list[Step]) -> dict[str, Any]:
    """What the viewer needs before it reads any step: count, agents (in order of appearance), time span."""
    agents: list[str] = []
    seen: set[str] = set()
    for s in steps:
        if s.agent and s.agent not in seen:
            seen.add(s.agent)
            agents.append(s.agent)
    starts = [s.started_at for s in steps if s.started_at]
    ends = [s.ended_at or s.started_at for s in steps if s.ended_at or s.started_at]
    return {
        "steps": len(steps),
        "agents": agents[:200],
        "start": min(starts).isoformat() if starts else None,
        "end": max(ends).isoformat() if ends else None,
        "tool_calls": sum(1 for s in steps if s.kind == StepKind.TOOL_CALL),
        "errors": sum(1 for s in steps if s.status == StepStatus.ERROR),
    }


def _steps_digest(steps: list[Step]) -> str:
    """sha256 over every stored field of every step, so a re-import sees any change beyond the body's cut."""
    # One string hashed once (the same bytes as hashing row by row, in a fraction of the calls).
    text = "".join(
        "\x1f".join(map(str, (s.index, s.parent_index, s.span_id, s.agent, s.kind, s.name, s.input, s.output,
                               s.status, s.error, s.started_at, s.ended_at, s.paired_index, s.ran))) + "\x1e"
        for s in steps
    )  # fmt: skip
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _body(steps: list[Step], head: str = "") -> str:
    """The trace as plain text: what suggesters read and evidence quotes are located in."""
    parts = [head] if head else []
    size = len(head)
    for s in steps:
        label = f"[{s.index}] {s.agent or '-'} · {s.kind}" + (f" · {s.name}" if s.name else "")
        chunk = "\n".join(x for x in (label, s.input, s.output, s.error) if x)
        size += len(chunk) + 2
        if size > BODY_LIMIT:
            parts.append(f"[… {len(steps) - s.index} more steps in the trace viewer]")
            break
        parts.append(chunk)
    return "\n\n".join(parts)


def _record(
    *, fmt: str, external_id: str, cluster: str, title: str, steps: list[Step], meta: dict, raw: dict, head: str = ""
) -> Record:
    _finish(steps)
    for s in steps:  # names and ids come from the file too: nothing a database cannot store
        s.agent, s.name, s.span_id = clean_text(s.agent), clean_text(s.name), clean_text(s.span_id)
    meta = {**clean_json(meta), "format": fmt, "trace": trace_summary(steps), "steps_sha256": _steps_digest(steps)}
    raw = clean_json(raw)
    return Record(
        kind=DocumentKind.TRACE,
        external_id=clean_text(external_id)[:500],
        cluster=clean_text(cluster or fmt)[:300],
        title=(clean_text(title).strip().splitlines() or [f"{fmt} trace"])[0][:1000] or f"{fmt} trace",
        body=_body(steps, head),
        meta=meta,
        raw=raw,
    )


def _short(text: str, limit: int = 140) -> str:
    """A title from a long question: its first line, cut at a word near `limit` characters."""
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + "…"


def _int(value: Any, what: str, where: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise ImportFileError(f"{where}: {what} must be a whole number, not {value!r}") from None
    if number < 0:
        raise ImportFileError(f"{where}: {what} must not be negative, not {number}")
    return number


# ------------------------------------------------------------------ Who&When

_ROLE_ARROW = re.compile(r"^(?P<agent>.*?)\s*\(\s*->\s*(?P<to>[^)]*)\)\s*$")
_ROLE_NOTE = re.compile(r"^(?P<agent>.*?)\s*\((?P<note>[^)]*)\)\s*$")
_CODE_BLOCK = re.compile(r"```")
_TERMINAL_NAMES = {"computer_terminal"}


def _whowhen_agent(entry: dict) -> tuple[str, str, str]:
    """(agent, kind, name) of a history entry: Algorithm-Generated logs name the agent in `name`;
    Hand-Crafted (Magentic-One) logs put it in `role`, as "Orchestrator (thought)" or
    "Orchestrator (-> WebSurfer)", the latter a handoff."""
    name = str(entry.get("name") or "").strip()
    role = str(entry.get("role") or "").strip()
    if name:
        return name, StepKind.MESSAGE, role if role not in ("assistant", "user") else ""
    arrow = _ROLE_ARROW.match(role)
    if arrow:
        return arrow["agent"].strip(), StepKind.HANDOFF, f"→ {arrow['to'].strip()}"
    note = _ROLE_NOTE.match(role)
    if note:
        return note["agent"].strip(), StepKind.MESSAGE, note["note"].strip()
    return role, StepKind.MESSAGE, ""


def _conversation_steps(history: list, where: str) -> list[Step]:
    steps: list[Step] = []
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise ImportFileError(f"{where}: history[{i}] must be an object with content, role and name")
        if "content" not in entry:
            raise ImportFileError(f"{where}: history[{i}] has no content")
        agent, kind, name = _whowhen_agent(entry)
        step = Step(index=i, agent=agent[:200], kind=kind, name=name[:NAME_LIMIT], output=_text(entry["content"]))
        # Code a conversational agent wrote, run by a terminal agent: a tool call and its result.
        if agent.lower() in _TERMINAL_NAMES and steps:
            prev = steps[-1]
            if prev.kind == StepKind.MESSAGE and _CODE_BLOCK.search(prev.output):
                prev.kind, prev.paired_index, prev.ran = StepKind.TOOL_CALL, i, True
                # What the agent wrote is the call (the code to run); the terminal's answer is its result.
                prev.input, prev.output = prev.output, ""
                prev.name = prev.name or "code execution"
                step.kind, step.paired_index = StepKind.TOOL_RESULT, prev.index
                if "exitcode: 1" in step.output or "execution failed" in step.output:
                    step.status = StepStatus.ERROR
        steps.append(step)
    return steps


def parse_whowhen(data: Any, where: str) -> TraceRecord:
    """A Who&When log: `history` of {content, role, name} plus question, ground_truth and the
    published attribution (mistake_agent, mistake_step, mistake_reason). Optional fields vary
    between files (is_correct or is_corrected, system_prompt, level, mistake_type, question_ID)."""
    if not isinstance(data, dict):
        raise ImportFileError(f"{where}: a Who&When log must be a JSON object")
    history = data.get("history")
    if not isinstance(history, list) or not history:
        raise ImportFileError(f"{where}: a Who&When log needs a non-empty 'history' list")
    steps = _conversation_steps(history, where)
    question = _text(data.get("question"))
    qid = str(data.get("question_ID") or data.get("question_id") or "").strip()
    digest = hashlib.sha256(orjson.dumps(history, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
    # The two published subsets share question ids; the log itself tells them apart.
    external_id = f"whowhen:{qid}:{digest}" if qid else f"whowhen:{digest}"
    subset = "algorithm-generated" if "system_prompt" in data or "is_correct" in data else "hand-crafted"
    correct = data.get("is_correct", data.get("is_corrected"))
    meta = {
        "question": question[:5000],
        "ground_truth": _text(data.get("ground_truth"))[:5000],
        "level": str(data.get("level") or ""),
        "is_correct": correct if isinstance(correct, bool) else None,
        "subset": subset,
        "question_id": qid,
    }
    reference: dict[str, Any] = {}
    if data.get("mistake_agent") not in (None, "") or data.get("mistake_step") not in (None, ""):
        step = data.get("mistake_step")
        step = _int(step, "mistake_step", where) if step not in (None, "") else None
        if step is not None and step >= len(steps):
            raise ImportFileError(f"{where}: mistake_step {step} is past the end of history ({len(steps)} entries)")
        reference = {
            "source": "who&when",
            "agent": str(data.get("mistake_agent") or "")[:200],
            "step": step,
            "reason": _text(data.get("mistake_reason"))[:5000],
            "mistake_type": str(data.get("mistake_type") or ""),
        }
    raw = {k: v for k, v in data.items() if k not in ("history", "system_prompt")}
    if isinstance(data.get("system_prompt"), dict):
        raw["system_prompt_agents"] = sorted(data["system_prompt"])
    head = f"Question: {question}" if question else ""
    record = _record(
        fmt="whowhen",
        external_id=external_id,
        cluster=f"who&when:{subset}",
        title=_short(question) or external_id,
        steps=steps,
        meta=meta,
        raw=raw,
        head=head,
    )
    return TraceRecord(record, steps, clean_json(reference))


# ------------------------------------------------------------------ MAST

_LOGURU = re.compile(
    r"^\d{4}-\d{2}-\d{2} [\d:.]+ \| \w+\s*\| [^\n]*? - (?P<who>[^\n:]+?): (?P<what>[^\n]*)$", re.MULTILINE
)
_COMM_FROM = re.compile(r"^\[[^\]]+\] FROM: (?P<who>[^\n]+?) TO: ", re.MULTILINE)
_COMM_NEW = re.compile(r"^\[[^\]]+\] NEW MESSAGES:\s*\n\s*\n(?P<who>[A-Za-z0-9_ .-]+):", re.MULTILINE)
_DASHES = re.compile(r"\n-{20,}\n")


def _log_steps(text: str) -> list[Step]:
    """Steps of a plain-text multi-agent log (MetaGPT's loguru lines or its communication log);
    a log of neither shape is one step, so nothing is lost."""
    heads = list(_LOGURU.finditer(text))
    if heads:
        steps = []
        for i, m in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            body = text[m.end() : end].strip("\n")
            steps.append(
                Step(
                    index=i,
                    agent=m["who"].strip()[:200],
                    kind=StepKind.MESSAGE,
                    name=m["what"].strip()[:NAME_LIMIT],
                    output=clean_text(body),
                )
            )
        return steps
    blocks = [b for b in _DASHES.split(text) if b.strip()]
    if len(blocks) > 1:
        steps = []
        for i, block in enumerate(blocks):
            m = _COMM_FROM.search(block) or _COMM_NEW.search(block)
            steps.append(
                Step(
                    index=i,
                    agent=(m["who"].strip() if m else "")[:200],
                    kind=StepKind.MESSAGE,
                    output=clean_text(block.strip("\n")),
                )
            )
        return steps
    return [Step(index=0, kind=StepKind.MESSAGE, output=clean_text(text))]


def _mast_modes(annotations: Any, where: str) -> list[dict]:
    if annotations in (None, ""):
        return []
    if not isinstance(annotations, list):
        raise ImportFileError(f"{where}: annotations must be a list")
    modes = []
    for n, a in enumerate(annotations):
        if not isinstance(a, dict):
            raise ImportFileError(f"{where}: annotations[{n}] must be an object")
        label = str(a.get("failure mode") or a.get("failure_mode") or "").strip()
        votes = {k: v for k, v in a.items() if k.startswith("annotator")}
        yes = sum(1 for v in votes.values() if v is True)
        if yes:
            modes.append({"mode": label.split("\n")[0].strip(), "yes": yes, "of": len(votes)})
    return modes


def parse_mast(data: Any, where: str) -> TraceRecord:
    """A MAST record: `trace` holds a JSON string with a `trajectory` of {content, role, name}
    (AG2), or a MetaGPT log as text (in `content`, or as the whole string); `annotations`
    lists failure modes with each annotator's yes/no."""
    if not isinstance(data, dict) or "trace" not in data:
        raise ImportFileError(f"{where}: a MAST record must be an object with a 'trace'")
    trace = data["trace"]
    parsed: Any = trace
    if isinstance(trace, str):
        try:
            parsed = json.loads(trace)
        except json.JSONDecodeError:
            parsed = trace
    meta = {k: data.get(k) for k in ("round", "mas_name", "benchmark_name", "trace_id") if data.get(k) is not None}
    raw: dict[str, Any] = {"mas": meta}
    title = ""
    if isinstance(parsed, dict) and isinstance(parsed.get("trajectory"), list):
        steps = _conversation_steps(parsed["trajectory"], where)
        problem = parsed.get("problem_statement")
        title = _text(problem)
        raw["instance_id"] = parsed.get("instance_id")
        raw["other_data"] = parsed.get("other_data")
    elif isinstance(parsed, dict) and isinstance(parsed.get("content"), str):
        steps = _log_steps(parsed["content"])
        title = _text(parsed.get("prompt"))
        raw["run"] = {k: parsed.get(k) for k in ("run_id", "timestamp", "cost", "log_file")}
    elif isinstance(parsed, str):
        steps = _log_steps(parsed)
    else:
        raise ImportFileError(f"{where}: 'trace' must be text or JSON with a 'trajectory' list or 'content' text")
    modes = _mast_modes(data.get("annotations"), where)
    reference = {"source": "mast", "failure_modes": modes, "agent": "", "step": None} if data.get("annotations") else {}
    key = ":".join(str(meta.get(k, "")) for k in ("mas_name", "benchmark_name", "round", "trace_id"))
    external_id = (
        f"mast:{key}"
        if meta.get("trace_id") is not None
        else "mast:" + hashlib.sha256(str(trace).encode()).hexdigest()[:16]
    )
    name = f"{meta.get('mas_name', 'MAST')} · {meta.get('benchmark_name', '')} · trace {meta.get('trace_id', '?')}"
    record = _record(
        fmt="mast",
        external_id=external_id,
        cluster=str(meta.get("mas_name") or "mast"),
        title=f"{name}: {_short(title)}" if title else name,
        steps=steps,
        meta=meta,
        raw=raw,
    )
    return TraceRecord(record, steps, reference)


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
            value = json.loads(value)
        except json.JSONDecodeError:
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
            value = json.loads(value)
        except json.JSONDecodeError:
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
            value = json.loads(value)
        except json.JSONDecodeError:
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


# ------------------------------------------------------------------ files


def _json_items(path: Path) -> Iterator[tuple[Any, str]]:
    """The JSON values of a file: one document, or JSON Lines (one per line)."""
    text = path.read_text(encoding="utf-8-sig", errors="strict")
    stripped = text.lstrip()
    if not stripped:
        raise ImportFileError(f"{path.name}: the file is empty")
    try:
        yield json.loads(text), path.name
        return
    except json.JSONDecodeError as exc:
        if path.suffix.lower() not in (".jsonl", ".ndjson") and "\n" not in stripped.strip():
            raise ImportFileError(f"{path.name}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        first_error = exc
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append((json.loads(line), f"{path.name} line {n}"))
        except json.JSONDecodeError:
            raise ImportFileError(
                f"{path.name}: not valid JSON (line {first_error.lineno}: {first_error.msg}) nor JSON Lines (line {n})"
            ) from None
    yield from items


def parse_trace_value(data: Any, fmt: str, where: str) -> list[TraceRecord]:
    """TraceRecords of one JSON value in format `fmt`."""
    if fmt == "whowhen":
        if isinstance(data, list):
            return [parse_whowhen(d, f"{where} record {n + 1}") for n, d in enumerate(data)]
        return [parse_whowhen(data, where)]
    if fmt == "mast":
        if isinstance(data, list):
            return [parse_mast(d, f"{where} record {n + 1}") for n, d in enumerate(data)]
        return [parse_mast(data, where)]
    if fmt == "otlp":
        return _span_records(otlp_spans(data, where), "otlp", where)
    if fmt == "openinference":
        return _span_records(openinference_spans(data, where), "openinference", where)
    raise ImportFileError(f"unknown trace format '{fmt}': use one of {', '.join(FORMATS)}")


def trace_files(paths: list[str | Path]) -> list[Path]:
    """Each path a file, or a folder whose .json/.jsonl files are read (recursively, in name order)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TRACE_EXTENSIONS)
            if not found:
                raise ImportFileError(f"{p}: the folder holds no .json or .jsonl files")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise ImportFileError(f"no such file or folder: {p}")
    return files


def iter_trace_records(path: Path, fmt: str) -> Iterator[TraceRecord]:
    if fmt == "openinference" and path.suffix.lower() in (".jsonl", ".ndjson"):
        spans: list[Any] = [value for value, _ in _json_items(path)]
        yield from parse_trace_value(spans, fmt, path.name)
        return
    for value, where in _json_items(path):
        yield from parse_trace_value(value, fmt, where)
