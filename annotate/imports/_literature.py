"""Literature records: BibTeX, RIS and CSV."""

from __future__ import annotations

import csv
import hashlib
import logging
import re
from collections.abc import Iterator
from typing import IO, Any

from annotate.documents.render import safe_link
from annotate.imports.parsed import ImportFileError, Record, clean_text, record_clean
from annotate.models import DocumentKind

CSV_COLUMNS = {"key", "title", "authors", "year", "doi", "url", "venue", "abstract", "failure_description"}


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
