"""Arize Phoenix span exports as spans, in the shapes Phoenix hands them out:

- its REST API, GET /v1/projects/{project}/spans: {"data": [span], "next_cursor"}, each span {name, context:
  {trace_id, span_id}, span_kind, parent_id, start_time, end_time, status_code, status_message, attributes
  (flattened, dotted keys), events}. Phoenix moves `openinference.span.kind` out of the attributes into
  `span_kind`; it is put back, or LLM, TOOL and AGENT spans would lose their kind;
- GET /v1/projects/{project}/spans/otlpv1: {"data": [OTLP span in snake case]} (trace_id, span_id,
  parent_span_id, start_time_unix_nano, attributes [{key, value: {string_value}}], status {code, message});
- the spans dataframe (`px.Client().get_spans_dataframe()`) written with `to_json(orient="records")` or
  `lines=True`: flat columns ("context.span_id", "attributes.llm.model_name"), null where a span lacks a column,
  times as epoch milliseconds (pandas' default);
- a list, or JSON Lines, of spans in any of these forms.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from annotate.imports.parsed import ImportFileError
from annotate.traces._spans import Span, openinference_spans, otlp_spans

_KNOWN = "Phoenix spans (GET /v1/projects/{project}/spans, its otlpv1 variant, or the spans dataframe as JSON)"
_SNAKE = re.compile(r"_([a-z])")


def _camel(key: str) -> str:
    return _SNAKE.sub(lambda m: m[1].upper(), key)


def _camel_value(v: Any) -> Any:
    """An OTLP value written in snake case ({"string_value": ...}) as OTLP/JSON writes it ({"stringValue": ...})."""
    if isinstance(v, dict):
        return {_camel(k): _camel_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_camel_value(x) for x in v]
    return v


def _time(value: Any) -> Any:
    """A span time as ISO text: numbers are epoch seconds, milliseconds (pandas), micro- or nanoseconds, told
    apart by magnitude (any time after 1973 in milliseconds exceeds 1e11)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    scale = 1e9 if value > 1e17 else 1e6 if value > 1e14 else 1e3 if value > 1e11 else 1
    try:
        return datetime.fromtimestamp(value / scale, tz=UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return value  # left for the span reader to name as a bad time


def _span(raw: Any) -> Any:
    """One Phoenix span as an OpenInference span: nulls of absent dataframe columns dropped, the span kind back
    among the attributes, numeric times as ISO text."""
    if not isinstance(raw, dict):
        return raw
    span = {k: v for k, v in raw.items() if v is not None}
    kind = span.pop("span_kind", None)
    attrs = span.get("attributes")
    if kind not in (None, "", "UNKNOWN"):
        if isinstance(attrs, dict):
            span["attributes"] = {**attrs, "openinference.span.kind": attrs.get("openinference.span.kind", kind)}
        elif not any(k.startswith("attributes.openinference.span.kind") for k in span):
            span["attributes.openinference.span.kind"] = kind
    for key in ("start_time", "end_time"):
        if key in span:
            span[key] = _time(span[key])
    return span


def _items(data: Any, where: str) -> list[Any]:
    if isinstance(data, dict):
        if isinstance(data.get("data"), list):
            return data["data"]
        if isinstance(data.get("spans"), list):
            return data["spans"]
        if "context" in data or "context.span_id" in data or "span_id" in data:
            return [data]
        raise ImportFileError(f"{where}: expected {_KNOWN}; found an object with keys {', '.join(list(data)[:8])}")
    if isinstance(data, list):
        return data
    raise ImportFileError(f"{where}: expected {_KNOWN}")


def phoenix_spans(data: Any, where: str) -> list[Span]:
    items = _items(data, where)
    if not items:
        raise ImportFileError(f"{where}: the Phoenix export holds no spans")
    if all(isinstance(s, dict) and "start_time_unix_nano" in s for s in items):
        # The otlpv1 endpoint: OTLP spans in snake case, one list without resource or scope.
        spans = [_camel_value(s) for s in items]
        return otlp_spans({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}, where)
    return openinference_spans([_span(s) for s in items], where)
