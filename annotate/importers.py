"""Parsers for imported files: GitHub issues (REST objects or `gh --json`, as an array or
JSON Lines) and literature records (BibTeX, RIS, CSV).

Parsers are pure: they read a file and yield `Record`s (or `Skip`s) one at a time,
never touching the database, so `services.imports` can write them in batches and
a 50,000-issue file never sits in memory as a whole. Anything malformed raises
`ImportFileError` naming the record number (1-based) and, where known, the line.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from annotate.documents.render import safe_link
from annotate.models import DocumentKind

GITHUB_EXTENSIONS = {".json", ".jsonl", ".ndjson"}
LITERATURE_EXTENSIONS = {".bib", ".bibtex", ".ris", ".csv"}
EXTENSIONS = GITHUB_EXTENSIONS | LITERATURE_EXTENSIONS
CSV_COLUMNS = {"key", "title", "authors", "year", "doi", "url", "venue", "abstract", "failure_description"}

_CHUNK = 1 << 20
_API_REPO = re.compile(r"/repos/([^/\s]+)/([^/\s]+?)(?:/|$)")
_HTML_ITEM = re.compile(r"^https?://[^/]+/([^/\s]+)/([^/\s]+)/(issues|pull|pulls)/(\d+)")


class ImportFileError(ValueError):
    """A malformed input file. The message names the record and/or line; nothing is written."""


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


# --- GitHub issues --------------------------------------------------------------------------


def _repo_of(item: dict) -> str | None:
    repo = item.get("repository")
    if isinstance(repo, str) and "/" in repo:
        return repo.strip("/")
    if isinstance(repo, dict):
        name = repo.get("nameWithOwner") or repo.get("full_name")
        if isinstance(name, str) and "/" in name:
            return name
        owner = repo.get("owner")
        owner = owner.get("login") if isinstance(owner, dict) else owner
        if isinstance(owner, str) and isinstance(repo.get("name"), str):
            return f"{owner}/{repo['name']}"
    for key in ("repository_url", "url", "html_url"):
        value = item.get(key)
        if not isinstance(value, str):
            continue
        m = _API_REPO.search(value) or _HTML_ITEM.match(value)
        if m:
            return f"{m.group(1)}/{m.group(2)}"
    return None


def _html_url(item: dict, repo: str, number: int, is_pr: bool) -> str:
    for key in ("html_url", "url"):
        value = item.get(key)
        if isinstance(value, str) and _HTML_ITEM.match(value) and "/repos/" not in value and safe_link(value):
            return value
    return f"https://github.com/{repo}/{'pull' if is_pr else 'issues'}/{number}"


def _is_pull_request(item: dict) -> bool:
    if item.get("pull_request") is not None or item.get("isPullRequest") is True:
        return True
    url = item.get("html_url") or item.get("url")
    return isinstance(url, str) and "/repos/" not in url and bool(re.search(r"/pulls?/\d+", url))


def github_record(item: Any, n: int, *, include_prs: bool = False, where: str = "") -> Record | Skip:
    """Normalise one REST issue object or `gh issue list --json` item; `n` is its 1-based number."""
    at = f"record {n}{where}"
    if not isinstance(item, dict):
        raise ImportFileError(f"{at}: expected an issue object, got {_type_name(item)}")
    number = item.get("number")
    repo = _repo_of(item)
    ident = f"{repo}#{number}" if repo and number is not None else None
    label = f"{at} ({ident})" if ident else at
    problems = []
    if isinstance(number, str) and number.isdigit():
        number = int(number)
    if not isinstance(number, int) or isinstance(number, bool):
        problems.append(f"'number' must be a number, got {_type_name(number)}")
    if not isinstance(item.get("title"), str):
        problems.append(f"'title' must be a string, got {_type_name(item.get('title'))}")
    if item.get("body") is not None and not isinstance(item.get("body"), str):
        problems.append(f"'body' must be a string or null, got {_type_name(item.get('body'))}")
    labels = item.get("labels") or []
    if not isinstance(labels, list) or not all(
        isinstance(x, str) or (isinstance(x, dict) and isinstance(x.get("name"), str)) for x in labels
    ):
        problems.append(f"'labels' must be a list of label objects, got {_type_name(labels)}")
    state = item.get("state")
    if state is not None and not isinstance(state, str):
        problems.append(f"'state' must be a string, got {_type_name(state)}")
    if repo is None:
        problems.append("no repository: give repository_url, html_url, url or repository")
    if problems:
        raise ImportFileError(f"{label}: " + "; ".join(problems))
    is_pr = _is_pull_request(item)
    if is_pr and not include_prs:
        return Skip(reason="pull request", external_id=ident)
    user = item.get("user") or item.get("author") or {}
    names = [x if isinstance(x, str) else x["name"] for x in labels]
    meta = {
        "repository": repo,
        "number": number,
        "state": state.lower() if isinstance(state, str) else None,
        "author": user.get("login") if isinstance(user, dict) else None,
        "created_at": item.get("created_at") or item.get("createdAt"),
        "updated_at": item.get("updated_at") or item.get("updatedAt"),
        "closed_at": item.get("closed_at") or item.get("closedAt"),
        "comments": item["comments"] if isinstance(item.get("comments"), int) else None,
        "state_reason": item.get("state_reason") or item.get("stateReason"),
    }
    if is_pr:
        meta["pull_request"] = True
    # The body is stored once, in Document.body; `raw` keeps every other field as given.
    raw = {k: v for k, v in item.items() if k != "body"}
    return record_clean(
        Record(
            kind=DocumentKind.GITHUB_ISSUE,
            external_id=ident,
            cluster=repo,
            title=clean_text(item["title"]).strip()[:1000] or f"{repo}#{number}",
            body=clean_text(item.get("body") or ""),
            url=_html_url(item, repo, number, is_pr),
            labels=[clean_text(x).strip() for x in names if x.strip()],
            meta={k: v for k, v in meta.items() if v is not None},
            raw=raw,
        )
    )


class _JsonStream:
    """Decode a JSON array (or JSON Lines) item by item from a text stream, in bounded chunks."""

    def __init__(self, fh: IO[str]):
        self.fh = fh
        self.buf = ""
        self.pos = 0
        # Lines are counted incrementally: buf[counted_pos] is on line counted_line.
        self.counted_pos = 0
        self.counted_line = 1
        self.eof = False
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self.eof:
            return False
        # Read at least as much as is pending, so one huge record costs O(size), not O(size²).
        chunk = self.fh.read(max(_CHUNK, len(self.buf) - self.pos))
        if not chunk:
            self.eof = True
            return False
        # Drop what has been consumed, remembering the line the kept part starts on.
        self.counted_line = self.line_at(self.pos)
        self.counted_pos = 0
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def line_at(self, pos: int) -> int:
        if pos >= self.counted_pos:
            self.counted_line += self.buf.count("\n", self.counted_pos, pos)
            self.counted_pos = pos
            return self.counted_line
        return self.counted_line - self.buf.count("\n", pos, self.counted_pos)

    def skip_ws(self) -> str:
        """The next non-whitespace character (consumed up to it), or '' at the end."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def value(self, n: int) -> tuple[Any, int]:
        """Decode the value starting here; returns it with its line number."""
        start_line = self.line_at(self.pos)
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.pos)
            except RecursionError:
                # Hostile or broken input: no issue object nests hundreds of levels deep.
                raise ImportFileError(
                    f"record {n} (starting on line {start_line}): JSON nested too deeply to be an issue"
                ) from None
            except json.JSONDecodeError as exc:
                if self._more():
                    continue
                line = self.line_at(exc.pos)
                raise ImportFileError(
                    f"record {n} (starting on line {start_line}): invalid JSON: {exc.msg} line {line}"
                    + (", where the file ends" if exc.pos >= len(self.buf) - 1 or "Unterminated" in exc.msg else "")
                ) from None
            # A number or literal cut at a chunk boundary decodes "successfully" too short.
            if end == len(self.buf) and not self.eof and self._more():
                continue
            self.pos = end
            return obj, start_line


def iter_github_items(fh: IO[str]) -> Iterator[tuple[Any, int]]:
    """Yield (item, line) from a JSON array, JSON Lines, or a search-style {"items": [...]} object."""
    stream = _JsonStream(fh)
    first = stream.skip_ws()
    if first == "":
        return
    if first == "[":
        stream.pos += 1
        n = 0
        while True:
            ch = stream.skip_ws()
            if ch == "]" and n == 0:
                stream.pos += 1
                break
            n += 1
            item, line = stream.value(n)
            yield item, line
            ch = stream.skip_ws()
            if ch == ",":
                stream.pos += 1
            elif ch == "]":
                stream.pos += 1
                break
            else:
                line = stream.line_at(stream.pos)
                got = "the end of the file" if ch == "" else repr(ch)
                raise ImportFileError(f"record {n + 1}: expected ',' or ']' at line {line}, got {got}")
        if stream.skip_ws() != "":
            raise ImportFileError(f"unexpected text after the JSON array at line {stream.line_at(stream.pos)}")
        return
    if first != "{":
        raise ImportFileError(
            f"line {stream.line_at(stream.pos)}: expected a JSON array of issues or JSON Lines, got {first!r}"
        )
    item, _ = stream.value(1)
    if stream.skip_ws() == "":
        # The whole file is one object: a search result, an API error saved by mistake, or one issue.
        if isinstance(item.get("items"), list):
            for i, sub in enumerate(item["items"], 1):
                yield sub, 1 if i == 1 else 0
            return
        if "message" in item and "number" not in item:
            raise ImportFileError(
                "expected a JSON array of issues, got a JSON object: it looks like a GitHub API error "
                f"response ({str(item.get('message'))[:100]!r}), not issues"
            )
        if "number" not in item:
            raise ImportFileError("expected a JSON array of issues (or JSON Lines), got a single JSON object")
        yield item, 1
        return
    # JSON Lines: one value per line.
    yield item, 1
    n = 1
    while stream.skip_ws() != "":
        n += 1
        yield stream.value(n)


# --- Literature -----------------------------------------------------------------------------


def _literature_record(
    *,
    key: str,
    title: str,
    authors: list[str],
    year: str,
    doi: str,
    url: str,
    venue: str,
    abstract: str,
    failure_description: str,
    entry_type: str,
    source: str,
    raw: dict,
) -> Record:
    doi = doi.strip()
    for prefix in ("https://doi.org/", "http://doi.org/", "http://dx.doi.org/", "doi:"):
        if doi.lower().startswith(prefix):
            doi = doi[len(prefix) :]
    key = key.strip()
    # Only http(s) links are kept; a javascript: or data: url is dropped, and the DOI's link stands in.
    url = safe_link(url.strip()) or (safe_link(f"https://doi.org/{doi}") if doi else "")
    if key:
        external_id = key
    elif doi:
        external_id = f"doi:{doi.lower()}"
    elif url:
        external_id = f"url:{url}"
    else:
        # No key, DOI or URL: the title and year identify the record, stably across re-imports.
        digest = hashlib.sha1(f"{title.casefold().strip()}|{year.strip()}".encode(), usedforsecurity=False)
        external_id = f"title:{digest.hexdigest()[:16]}"
    body = failure_description.strip() or abstract.strip()
    meta: dict[str, Any] = {
        "venue": venue.strip(),
        "year": int(year) if year.strip().isdigit() else year.strip(),
        "authors": [a for a in (x.strip() for x in authors) if a],
        "doi": doi,
        "key": key,
        "entry_type": entry_type,
        "format": source,
    }
    if failure_description.strip() and abstract.strip():
        meta["abstract"] = abstract.strip()
    return record_clean(
        Record(
            kind=DocumentKind.LITERATURE,
            external_id=external_id[:500],
            cluster=(key or doi or external_id)[:300],
            title=clean_text(title).strip()[:1000],
            body=clean_text(body),
            url=url[:1000],
            meta={k: v for k, v in meta.items() if v not in ("", [], None)},
            raw=raw,
        )
    )


def _latex(text: str) -> str:
    from pylatexenc.latex2text import LatexNodes2Text

    if "\\" not in text and "{" not in text and "$" not in text and "~" not in text:
        return text
    return LatexNodes2Text(math_mode="text").latex_to_text(text).strip()


class _ListHandler(logging.Handler):
    def __init__(self, messages: list[str]):
        super().__init__(logging.WARNING)
        self.messages = messages

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def iter_bibtex(text: str) -> Iterator[Record]:
    """BibTeX via bibtexparser 2. Any failed block rejects the whole file (atomic import)."""
    import bibtexparser

    messages: list[str] = []
    handler = _ListHandler(messages)
    bib_log = logging.getLogger("bibtexparser")
    bib_log.addHandler(handler)
    # Its warning says where and why a block failed; we put that in our error instead of on stderr.
    propagate, bib_log.propagate = bib_log.propagate, False
    try:
        library = bibtexparser.parse_string(text)
    finally:
        bib_log.removeHandler(handler)
        bib_log.propagate = propagate
    if library.failed_blocks:
        block = library.failed_blocks[0]
        m = re.search(r"@\s*\w+\s*[{(]\s*([^,\s]+)", block.raw or "")
        what = f"entry '{m.group(1)}'" if m else "block"
        reason = {
            "DuplicateBlockKeyBlock": "its key is used by an earlier entry",
            "DuplicateFieldKeyBlock": "it repeats a field",
        }.get(type(block).__name__, "braces or quotes do not balance, or a field is malformed")
        more = f" ({len(library.failed_blocks)} bad blocks in all)" if len(library.failed_blocks) > 1 else ""
        detail = next((m for m in messages if f"(line {block.start_line})" in m), "")
        detail = re.search(r"aborted on (line \d+).*?:\s*(.*)", detail, re.S)
        if detail:
            reason += f"; the parser gave up on {detail.group(1)}: {' '.join(detail.group(2).split())}"
        raise ImportFileError(
            f"BibTeX syntax error in the {what} starting on line {block.start_line + 1}: {reason}{more}"
        )
    for n, entry in enumerate(library.entries, 1):
        fields = {k.lower(): str(v.value) for k, v in entry.fields_dict.items()}
        if not fields.get("title", "").strip():
            raise ImportFileError(f"record {n} ('{entry.key}', line {entry.start_line + 1}): no title")
        authors = _latex(fields.get("author", ""))
        yield _literature_record(
            key=entry.key,
            title=_latex(fields["title"]),
            authors=re.split(r"\s+and\s+", authors) if authors else [],
            year=fields.get("year", ""),
            doi=fields.get("doi", ""),
            url=fields.get("url", ""),
            venue=_latex(fields.get("journal") or fields.get("booktitle") or fields.get("institution") or ""),
            abstract=_latex(fields.get("abstract", "")),
            failure_description=_latex(fields.get("failure_description", "")),
            entry_type=entry.entry_type,
            source="bibtex",
            raw={"entry_type": entry.entry_type, "key": entry.key, "fields": fields},
        )


def iter_ris(text: str) -> Iterator[Record]:
    """RIS via rispy. AB is the failure description; N1 "Paper summary:" the paper's abstract."""
    import rispy

    starts = [i + 1 for i, line in enumerate(text.splitlines()) if re.match(r"^TY  - ", line)]
    try:
        entries = rispy.loads(text)
    except Exception as exc:  # rispy raises plain IOError/ValueError subclasses with a line hint
        raise ImportFileError(f"RIS syntax error: {exc}") from None
    if not entries and text.strip():
        raise ImportFileError("no RIS records found (each record starts with a 'TY  - ' line)")
    for n, entry in enumerate(entries, 1):
        line = starts[n - 1] if n <= len(starts) else "?"
        title = entry.get("title") or entry.get("primary_title") or entry.get("translated_title") or ""
        if not isinstance(title, str) or not title.strip():
            raise ImportFileError(f"record {n} (line {line}): no title (TI or T1)")
        notes = entry.get("notes") or []
        summary = next((x.split(":", 1)[1] for x in notes if x.lower().startswith("paper summary:")), "")
        urls = entry.get("urls") or []
        yield _literature_record(
            key=str(entry.get("id") or ""),
            title=title,
            authors=list(entry.get("authors") or entry.get("first_authors") or []),
            year=str(entry.get("year") or entry.get("publication_year") or "")[:4],
            doi=str(entry.get("doi") or ""),
            url=urls[0] if urls else "",
            venue=str(entry.get("secondary_title") or entry.get("journal_name") or entry.get("alternate_title3") or ""),
            abstract=summary,
            failure_description=str(entry.get("abstract") or ""),
            entry_type=str(entry.get("type_of_reference") or ""),
            source="ris",
            raw={k: v for k, v in entry.items() if k != "abstract"},
        )


def iter_csv(fh: IO[str]) -> Iterator[Record]:
    """CSV with a header holding `title` and any of key, authors, year, doi, url, venue, abstract,
    failure_description. Authors are separated by ';'."""
    reader = csv.DictReader(fh)
    try:
        header = [h.strip().lower() for h in (reader.fieldnames or [])]
    except csv.Error as exc:
        raise ImportFileError(f"line 1: not a readable CSV header ({exc})") from None
    if "title" not in header:
        raise ImportFileError(
            f"line 1: the CSV header has no 'title' column (found: {', '.join(header) or 'nothing'}); "
            f"it needs 'title' and any of {', '.join(sorted(CSV_COLUMNS - {'title'}))}"
        )
    reader.fieldnames = header
    n = 0
    while True:
        line = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ImportFileError(f"record {n + 1} (line {line}): {exc}") from None
        n += 1
        if None in row:
            raise ImportFileError(f"record {n} (line {line}): more fields than the header has columns")
        row = {k: (v or "").strip() for k, v in row.items()}
        if not row.get("title"):
            raise ImportFileError(f"record {n} (line {line}): empty title")
        yield _literature_record(
            key=row.get("key", ""),
            title=row["title"],
            authors=re.split(r"\s*;\s*", row["authors"]) if row.get("authors") else [],
            year=row.get("year", ""),
            doi=row.get("doi", ""),
            url=row.get("url", ""),
            venue=row.get("venue", ""),
            abstract=row.get("abstract", ""),
            failure_description=row.get("failure_description", ""),
            entry_type="",
            source="csv",
            raw={k: v for k, v in row.items() if k not in ("abstract", "failure_description")},
        )


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
