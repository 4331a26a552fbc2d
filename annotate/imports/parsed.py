"""What the parsers yield: a Record to import or a Skip with its reason, and the file error that names the
record and line. Text is cleaned here of what PostgreSQL cannot store (NUL, lone surrogates)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

GITHUB_EXTENSIONS = {".json", ".jsonl", ".ndjson"}
LITERATURE_EXTENSIONS = {".bib", ".bibtex", ".ris", ".csv"}
EXTENSIONS = GITHUB_EXTENSIONS | LITERATURE_EXTENSIONS


class ImportFileError(ValueError):
    """A malformed input file. The message names the record and/or line; nothing is written."""

    expected_failure = True  # a refusal of the input: logged as one line (annotate.jobs.runner)


@dataclass(slots=True)
class Record:
    """One document to upsert, normalised from any input format."""

    kind: str
    external_id: str
    cluster: str
    title: str
    body: str = ""
    url: str = ""
    labels: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Skip:
    """An input item deliberately not imported, with the reason the import reports."""

    reason: str
    external_id: str = ""


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(text: str) -> str:
    """Drop NUL, which PostgreSQL text and jsonb refuse, and replace a lone surrogate (which
    JSON's \\ud800 escapes can produce, but no UTF-8 encoder accepts) by U+FFFD."""
    if text.isascii():  # most text, checked far faster than by the regex: only NUL can be in it
        return text.replace("\x00", "") if "\x00" in text else text
    if not _UNSTORABLE.search(text):
        return text
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


def clean_text(text: str) -> str:
    """One newline convention (a browser turns CRLF into LF, so stored offsets stay true),
    and nothing a database cannot store (see _storable)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _storable(text)


def clean_json(value: Any) -> Any:
    """A JSON value with every string in it, keys included, made storable; newlines are kept as given."""
    if isinstance(value, (dict, list)):
        # Nearly always nothing to clean, which one encoding tells far faster than a walk: orjson
        # refuses a lone surrogate and writes NUL as \u0000 (a literal backslash-u0000 only costs the walk).
        try:
            if b"\\u0000" not in orjson.dumps(value):
                return value
        except TypeError:
            pass
    return _clean_json(value)


def _clean_json(value: Any) -> Any:
    if isinstance(value, str):
        return _storable(value)
    if isinstance(value, dict):
        return {_storable(k) if isinstance(k, str) else k: _clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v) for v in value]
    return value


def unstorable_at(value: Any, path: str = "") -> str | None:
    """Where in a JSON value the first NUL or lone surrogate is (e.g. "spans[0].name"), or None.

    For input that is refused rather than cleaned (the incident API answers 400 naming the place)."""
    if isinstance(value, str):
        return (path or "(the value)") if _UNSTORABLE.search(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and _UNSTORABLE.search(k):
                return f"{path or '(top level)'}: a key"
            found = unstorable_at(v, here)
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = unstorable_at(v, f"{path}[{i}]")
            if found:
                return found
    return None


def record_clean(record: Record) -> Record:
    """Make every field of a parsed record storable, whichever importer made it: a NUL or lone
    surrogate in one issue's title, labels, author or raw JSON must not fail a whole import."""
    for name in ("external_id", "cluster", "title", "url"):
        setattr(record, name, _storable(getattr(record, name)))
    record.body = clean_text(record.body)
    record.labels = [label for label in (_storable(x) for x in record.labels) if label]
    record.meta = clean_json(record.meta)
    record.raw = clean_json(record.raw)
    return record


def _type_name(value: Any) -> str:
    return {str: "string", int: "number", float: "number", bool: "boolean", list: "list", dict: "object"}.get(
        type(value), "null" if value is None else type(value).__name__
    )
