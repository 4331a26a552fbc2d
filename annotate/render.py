"""Imported Markdown and HTML to safe HTML: markdown-it-py renders, nh3 sanitises.

Everything that came from outside (issue bodies, abstracts, incident text,
memos) goes through `render_markdown` before it reaches a template, and is
only then marked safe.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import urlsplit

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "s", "span",
    "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "td": {"align"},
    "th": {"align"},
    "ol": {"start"},
}
URL_SCHEMES = {"http", "https", "mailto"}
LINK_SCHEMES = frozenset({"http", "https"})
# Whitespace (\s is str.isspace for str patterns) and control characters.
_REFUSED_IN_LINK = re.compile(r"[\s\x00-\x1f\x7f]")


@lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    # GitHub Markdown allows raw HTML, so we let it through the parser and rely on nh3.
    return (
        MarkdownIt("commonmark", {"html": True, "linkify": False, "breaks": True})
        .enable("table")
        .enable("strikethrough")
    )


def sanitise_html(html: str) -> str:
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def render_markdown(text: str | None) -> SafeString:
    """Render Markdown (with any embedded HTML) and sanitise the result."""
    if not text:
        return mark_safe("")
    return mark_safe(sanitise_html(_markdown().render(text)))  # noqa: S308 - sanitised by nh3 above


def safe_link(url: str | None) -> str:
    """The one rule for links that come from imported data: an absolute http(s) URL, else "".

    Importers keep only what passes, and every page renders such links through
    the `safe_link` filter, so a `javascript:` or `data:` URL stored by an older
    version is never clickable either. Browsers ignore tabs and newlines inside
    a scheme ("java\tscript:"), so any control character or whitespace refuses the URL.
    """
    if not isinstance(url, str):
        return ""
    if _REFUSED_IN_LINK.search(url):
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme.lower() not in LINK_SCHEMES or not parts.hostname:
        return ""
    return url
