"""Parsers for imported files: GitHub issues (REST objects or `gh --json`, as an array or
JSON Lines) and literature records (BibTeX, RIS, CSV).

Parsers are pure: they read a file and yield `Record`s (or `Skip`s) one at a time,
never touching the database, so `annotate.imports.records` can write them in batches and
a 50,000-issue file never sits in memory as a whole. Anything malformed raises
`ImportFileError` naming the record number (1-based) and, where known, the line.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from annotate.imports._issues import github_record, iter_github_items
from annotate.imports._literature import iter_bibtex, iter_csv, iter_ris
from annotate.imports.parsed import GITHUB_EXTENSIONS, ImportFileError, Record, Skip

# --- Dispatch -------------------------------------------------------------------------------


def detect_format(path: Path, head: str) -> str:
    """'github', 'bibtex', 'ris' or 'csv', by extension, else by the first characters."""
    ext = path.suffix.lower()
    if ext in GITHUB_EXTENSIONS:
        return "github"
    if ext in (".bib", ".bibtex"):
        return "bibtex"
    if ext == ".ris":
        return "ris"
    if ext == ".csv":
        return "csv"
    start = head.lstrip()
    if start[:1] in ("[", "{"):
        return "github"
    if start[:1] in ("@", "%"):
        return "bibtex"
    if start.startswith("TY  -"):
        return "ris"
    raise ImportFileError(
        f"cannot tell the format of '{path.name}': use .json/.jsonl (GitHub issues), .bib, .ris or .csv"
    )


def open_text(path: Path) -> IO[str]:
    """Open as UTF-8 (a BOM is dropped); undecodable bytes are reported where they occur."""
    return io.open(path, encoding="utf-8-sig", newline="")  # noqa: UP020 - explicit text wrapper


class _CountingReader:
    """A text stream that reports how many characters have been read, for progress estimates."""

    def __init__(self, fh: IO[str], on_read: Callable[[int], None]):
        self.fh, self.on_read, self.chars = fh, on_read, 0

    def read(self, size: int = -1) -> str:
        chunk = self.fh.read(size)
        self.chars += len(chunk)
        self.on_read(self.chars)
        return chunk

    def __iter__(self):
        for line in self.fh:
            self.chars += len(line)
            self.on_read(self.chars)
            yield line


def iter_file(
    path: Path, *, include_prs: bool = False, on_read: Callable[[int], None] | None = None
) -> Iterator[Record | Skip]:
    """Records from any supported file, streaming where the format allows it.

    `on_read(chars)` is told how far into the file the parser has read.
    """
    try:
        with open_text(path) as raw_fh:
            fmt = detect_format(path, raw_fh.read(64))
            raw_fh.seek(0)
            fh = _CountingReader(raw_fh, on_read) if on_read else raw_fh
            if fmt == "github":
                for n, (item, line) in enumerate(iter_github_items(fh), 1):
                    where = f", line {line}" if line else ""
                    yield github_record(item, n, include_prs=include_prs, where=where)
            elif fmt == "csv":
                yield from iter_csv(fh)
            else:
                # bibtexparser and rispy parse whole strings; literature files are small.
                text = fh.read()
                yield from (iter_bibtex(text) if fmt == "bibtex" else iter_ris(text))
    except UnicodeDecodeError as exc:
        raise ImportFileError(f"'{path.name}' is not UTF-8 text ({exc.reason})") from None
