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
