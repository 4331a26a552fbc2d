"""The conformance corpus as the importer reads it: Langfuse trace downloads with `--format langfuse` (the
conversion lives in annotate.traces._langfuse), OTLP/JSON files with `--format otlp`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "corpus"


def corpus_format(name: str) -> str:
    return "otlp" if name.startswith("opentelemetry-") else "langfuse"


def corpus_data(name: str) -> tuple[Any, str]:
    """A corpus file's JSON and the format it is imported with."""
    data = json.loads((CORPUS / name).read_text(encoding="utf-8"))
    fmt = "otlp" if isinstance(data, dict) and "resourceSpans" in data else "langfuse"
    assert fmt == corpus_format(name), name
    return data, fmt
