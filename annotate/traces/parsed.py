"""What the trace parsers yield: a TraceRecord (a document record, its steps, a reference attribution and its
artifacts), and the helpers every format shares to finish, summarise and digest a step list."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from annotate.imports.parsed import ImportFileError, Record, clean_json, clean_text
from annotate.models import DocumentKind, StepKind, StepStatus

NAME_LIMIT = 500
BODY_LIMIT = 1_000_000  # the searchable text of a trace; the steps themselves are stored whole


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
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class TraceArtifact:
    """A file, log or screenshot a trace or an incident carries: the one artifact type of imports and the API."""

    kind: str
    name: str
    content: str = ""
    url: str = ""
    # The trace step that produced it, by span id or step index (see annotate.traces.services).
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
    # Details only where a step has them, so formats without (Who&When, MAST) keep the digests they had.
    text += "".join(f"{s.index}\x1f{json.dumps(s.detail, sort_keys=True, default=str)}\x1e" for s in steps if s.detail)
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
