"""Parsers for agent traces: OTLP/JSON (OpenTelemetry GenAI conventions), OpenInference spans, Langfuse trace
exports, Arize Phoenix span exports, Who&When multi-agent logs and MAST trace records: one registry, FORMATS,
that the command, the API and the upload form all offer.

Parsers are pure, like annotate.imports.parsers: they read JSON and return `TraceRecord`s (a
Document record, its steps, a reference attribution and artifacts) without touching the
database. Anything malformed raises ImportFileError naming the record; nothing is written.

Every format ends as the same step list (annotate.models.TraceStep): index in reading order
(spans depth-first, siblings by start time; log entries in file order), parent, span id,
agent, kind, name, input, output, times, status and error. A tool call is paired with its
result where the trace has one, and `ran` records whether it ran at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from annotate.imports.parsed import ImportFileError
from annotate.traces._langfuse import langfuse_spans
from annotate.traces._logs import parse_mast, parse_whowhen
from annotate.traces._phoenix import phoenix_spans
from annotate.traces._spans import _span_records, openinference_spans, otlp_spans
from annotate.traces.parsed import TraceRecord
from lib import safejson

FORMATS = ("otlp", "openinference", "langfuse", "phoenix", "whowhen", "mast")
# Formats whose JSON Lines files hold one span (or observation) a line, all of them one export.
_LINE_PER_SPAN = {"openinference", "phoenix", "langfuse"}
TRACE_EXTENSIONS = {".json", ".jsonl", ".ndjson"}


# ------------------------------------------------------------------ files


def _json_items(path: Path) -> Iterator[tuple[Any, str]]:
    """The JSON values of a file: one document, or JSON Lines (one per line), read by lib.safejson
    (hostile nesting or a lone surrogate is the file's error, not the job's crash; NULs are stripped
    later, as for every import)."""
    text = path.read_text(encoding="utf-8-sig", errors="strict")
    stripped = text.lstrip()
    if not stripped:
        raise ImportFileError(f"{path.name}: the file is empty")
    try:
        yield safejson.loads(text, allow_nul=True), path.name
        return
    except safejson.JSONSyntaxError as exc:
        if path.suffix.lower() not in (".jsonl", ".ndjson") and "\n" not in stripped.strip():
            raise ImportFileError(f"{path.name}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
        first_error = exc
    except safejson.JSONError as exc:
        raise ImportFileError(f"{path.name}: {exc}") from None
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append((safejson.loads(line, allow_nul=True), f"{path.name} line {n}"))
        except safejson.JSONSyntaxError:
            raise ImportFileError(
                f"{path.name}: not valid JSON (line {first_error.lineno}: {first_error.msg}) nor JSON Lines (line {n})"
            ) from None
        except safejson.JSONError as exc:
            raise ImportFileError(f"{path.name} line {n}: {exc}") from None
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
    if fmt == "langfuse":
        spans, traces = langfuse_spans(data, where)
        return _span_records(spans, "langfuse", where, traces=traces)
    if fmt == "phoenix":
        return _span_records(phoenix_spans(data, where), "phoenix", where)
    raise ImportFileError(f"unknown trace format '{fmt}': use one of {', '.join(FORMATS)}")


def _span_dicts(items: Any) -> bool:
    return isinstance(items, list) and bool(items) and all(isinstance(s, dict) and "context" in s for s in items)


def trace_format_of(trace: Any) -> str:
    """The span format a JSON value is in, by its shape, or "" for none: OTLP's `resourceSpans`; a Langfuse
    download or API trace (`observations`), or its observation list (`data` of objects with `traceId`); Phoenix's
    API answer (`data` of spans with `context`); a plain list of OpenInference spans."""
    if isinstance(trace, dict):
        data = trace.get("data")
        if "resourceSpans" in trace:
            return "otlp"
        if isinstance(trace.get("observations"), list):
            return "langfuse"
        if isinstance(data, list) and data and all(isinstance(o, dict) and "traceId" in o for o in data):
            return "langfuse"
        if _span_dicts(data):
            return "phoenix"
    if _span_dicts(trace):
        return "openinference"
    return ""


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
    if fmt in _LINE_PER_SPAN and path.suffix.lower() in (".jsonl", ".ndjson"):
        spans: list[Any] = [value for value, _ in _json_items(path)]
        yield from parse_trace_value(spans, fmt, path.name)
        return
    for value, where in _json_items(path):
        yield from parse_trace_value(value, fmt, where)
