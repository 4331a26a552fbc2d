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
# A link every rule of safe_link passes, told without urlsplit (which costs an import a fifth of its
# parse): a lower-case http(s) scheme, a host of letters, digits, dots and hyphens with an optional
# port, then only printable ASCII other than space. Anything else takes the full check.
_PLAIN_LINK = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]*)?(?:[/?#][!-~]*)?", re.ASCII)


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
    if _PLAIN_LINK.fullmatch(url):
        return url
    return _safe_link_checked(url)


def _safe_link_checked(url: str) -> str:
    """safe_link's full check, for any string."""
    if _REFUSED_IN_LINK.search(url):
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme.lower() not in LINK_SCHEMES or not parts.hostname:
        return ""
    return url
