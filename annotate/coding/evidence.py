"""Find a coder's evidence quote in the episode's source text.

The coder selects text in the *rendered* episode, so the selection lacks the
Markdown punctuation and line breaks of the stored text (`**`, backticks,
list bullets, wrapped lines). Offsets are stored against the source text (what
exports carry), so the quote is located there: exactly if possible, otherwise
word by word with any non-word characters in between. The stored quote is the
source slice, so it is always verbatim.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_QUOTE = 5000
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Located:
    start: int
    end: int
    quote: str


def _nearest(matches: list[tuple[int, int]], near: int | None) -> tuple[int, int]:
    if near is None:
        return matches[0]
    return min(matches, key=lambda m: abs(m[0] - near))


def evidence_locate(text: str, quote: str, near: int | None = None) -> Located | None:
    """The span of `text` that `quote` was selected from, or None if it is not in the text.

    `near` is an approximate start offset; among several matches the closest wins,
    and without it the first.
    """
    quote = quote.strip()
    if not quote or len(quote) > MAX_QUOTE:
        return None
    matches = {m.start(): (m.start(), m.end()) for m in re.finditer(re.escape(quote), text)}
    words = _WORD.findall(quote)
    if words:
        # Also the word-by-word matches: the selection may come from a formatted occurrence
        # while another occurrence happens to match exactly. Exact spans win at the same start.
        pattern = re.compile(r"[\W_]+".join(re.escape(w) for w in words))
        for m in pattern.finditer(text):
            matches.setdefault(m.start(), (m.start(), m.end()))
    if not matches:
        return None
    start, end = _nearest(sorted(matches.values()), near)
    return Located(start, end, text[start:end])


def quote_whole_words(text: str, quote: str, *, limit: int = 2000) -> str:
    """`quote` widened to whole words of `text` and cut to at most `limit` characters at a word boundary.

    Machine suggestions quote the text verbatim but may start or end inside a
    word ("md, and ran" from "CHANGELOG.md, and ran"); a coder must never be shown
    such a fragment. The result is still a verbatim slice of `text`; a quote not
    found in `text` is returned cut at a word boundary only.
    """
    at = text.find(quote) if quote else -1
    if at >= 0:
        start, end = at, at + len(quote)
        while start > 0 and not text[start - 1].isspace() and not text[start].isspace():
            start -= 1
        while end < len(text) and not text[end].isspace() and not text[end - 1].isspace():
            end += 1
        quote = text[start:end].strip()
    if len(quote) > limit:
        cut = quote[: limit + 1]
        space = cut.rfind(" ")
        quote = cut[:space].rstrip() if space > 0 else quote[:limit]
    return quote
