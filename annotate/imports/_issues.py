"""GitHub issues: REST objects or `gh --json`, as one array (read as a stream) or JSON Lines."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import IO, Any

import orjson

from annotate.documents.render import safe_link
from annotate.imports.parsed import ImportFileError, Record, Skip, _type_name, clean_text, record_clean
from annotate.models import DocumentKind

_CHUNK = 1 << 20
_NOT_ON_ITS_LINE = object()
_API_REPO = re.compile(r"/repos/([^/\s]+)/([^/\s]+?)(?:/|$)")
_HTML_ITEM = re.compile(r"^https?://[^/]+/([^/\s]+)/([^/\s]+)/(issues|pull|pulls)/(\d+)")


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
        # Values one a line (JSON Lines; arrays written an item a line, as json.dumps per item and most export
        # tools write them) are read whole by orjson, until a value turns out not to end its line.
        self.by_line = True

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

    def _line_value(self) -> Any:
        """The value starting here if it is all that is left of its line (a comma after it aside), decoded by
        orjson, three times faster than json on an issue; else _NOT_ON_ITS_LINE, and lines are not tried again.

        A line break can only stand between tokens, so such a line holds exactly one value, and orjson accepts
        only what json reads the same way: anything else it refuses (NaN, a lone surrogate, an integer past
        64 bits, a line holding more or less than a value) goes to json below, which decides as before."""
        nl = self.buf.find("\n", self.pos)
        while nl == -1 and len(self.buf) - self.pos < _CHUNK and self._more():
            nl = self.buf.find("\n", self.pos)
        if nl == -1 and not self.eof:  # a line longer than a chunk: the whole array on one line, say
            self.by_line = False
            return _NOT_ON_ITS_LINE
        segment = self.buf[self.pos : nl if nl != -1 else len(self.buf)].rstrip()
        if segment.endswith(","):
            segment = segment[:-1].rstrip()
        try:
            if segment[:1] not in ("{", "["):
                raise orjson.JSONDecodeError("not an object", segment, 0)
            obj = orjson.loads(segment)
        except orjson.JSONDecodeError:
            self.by_line = False
            return _NOT_ON_ITS_LINE
        self.pos += len(segment)  # just after the value: the comma, if any, is the caller's
        return obj

    def value(self, n: int) -> tuple[Any, int]:
        """Decode the value starting here; returns it with its line number."""
        start_line = self.line_at(self.pos)
        if self.by_line:
            obj = self._line_value()
            if obj is not _NOT_ON_ITS_LINE:
                return obj, start_line
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
