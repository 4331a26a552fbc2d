"""JSON from strangers: every value a database can store, or a JSONError saying what is wrong.

`json.loads` accepts what PostgreSQL and our own code then refuse, and refuses some of it with the
wrong exception: nesting deep enough to exhaust the recursion limit raises RecursionError (a
500), a lone UTF-16 surrogate ("\\ud800") becomes a str no encoder writes, and a NUL ("\\u0000")
is stored by no PostgreSQL text or jsonb column. `loads` refuses all of these with one exception
and a message fit for the user, and bounds nesting at MAX_DEPTH, far beyond any trace, incident,
codebook or coding we accept and far below any recursion limit. NaN and Infinity are not JSON.

The checks that walk the value run only when the text could hold what they look for, so a clean
multi-megabyte trace costs a few `str.count`s more than `json.loads`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

MAX_DEPTH = 100

# A \u escape of a UTF-16 surrogate: a pair is one character to json.loads, a lone one is refused below.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class JSONError(ValueError):
    """Not JSON we accept; str() is the reason, for the user."""

    expected_failure = True  # a refusal of the input, not a bug: job runners log it as one line


class JSONSyntaxError(JSONError):
    """Not JSON at all; `lineno`, `colno` and `msg` as json.JSONDecodeError has them."""

    def __init__(self, exc: json.JSONDecodeError):
        self.lineno, self.colno, self.msg = exc.lineno, exc.colno, exc.msg
        super().__init__(f"Invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}.")


def _reject_constant(name: str):
    raise JSONError(f"{name} is not a JSON number; send null or a string instead.")


def json_depth(value: Any, *, stop_above: int | None = None) -> int:
    """How deeply lists and objects nest in a parsed JSON value, level by level (no recursion: any
    depth is safe). With `stop_above`, counting stops once the depth passes it."""
    depth, level = 0, [value] if isinstance(value, dict | list) else []
    while level:
        depth += 1
        if stop_above is not None and depth > stop_above:
            break
        below: list = []
        for item in level:
            below.extend(
                [c for c in (item.values() if type(item) is dict else item) if type(c) is dict or type(c) is list]
            )
        level = below
    return depth


def _strings(value: Any):
    """Every string in a parsed JSON value, object keys included."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _encoded(value: Any) -> str | None:
    """The value as compact JSON text, by orjson (fast); None when a string holds a lone surrogate."""
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError as exc:
        if "surrogates" in str(exc):
            return None
    # What orjson does not write (an integer past 64 bits): the standard library's encoder, slower.
    text = json.dumps(value, ensure_ascii=False)
    return None if _has_lone_surrogate(text) else text


def check_value(value: Any, *, max_depth: int = MAX_DEPTH, nul: bool = True, surrogates: bool = True) -> None:
    """Refuse a parsed value nested deeper than `max_depth` or holding a NUL or a lone surrogate.

    The strings are checked through one encoding of the whole value: a lone surrogate makes it fail,
    and a NUL is written as \\u0000 (a string that only spells it, backslash and all, is told apart by
    the exact walk that follows).
    """
    if json_depth(value, stop_above=max_depth) > max_depth:
        raise JSONError(f"JSON nested more than {max_depth} levels deep is not accepted.")
    if not (nul or surrogates):
        return
    text = _encoded(value)
    if text is None:
        if surrogates:
            raise JSONError("A string holds a lone UTF-16 surrogate (such as \\ud800), which is not a character.")
        return
    if nul and "\\u0000" in text and any("\x00" in s for s in _strings(value)):
        raise JSONError("A string holds a NUL character (\\u0000), which no text may contain.")


def loads(
    data: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH, allow_nul: bool = False, check_strings: bool = True
) -> Any:
    """Parse JSON text (bytes are read as UTF-8, a BOM allowed), or raise JSONError with the reason.

    `allow_nul`: for importers that strip NULs themselves (annotate.imports.parsed) instead of refusing.
    `check_strings=False` leaves NULs and lone surrogates to the caller (the API's fields, which name the
    field that holds one); the depth bound holds either way."""
    if isinstance(data, bytes | bytearray):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise JSONError(f"The JSON is not UTF-8 text (byte {exc.start}).") from None
    else:
        text = data
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise JSONError(f"JSON nested more than {max_depth} levels deep is not accepted.") from None
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(exc) from None
    # Each check only where the text could hold what it looks for (see the module docstring).
    deep = text.count("[") + text.count("{") > max_depth
    nul = check_strings and not allow_nul and "\\u0000" in text
    surrogates = check_strings and (_SURROGATE_ESCAPE.search(text) is not None or _has_lone_surrogate(text))
    if deep or nul or surrogates:
        check_value(value, max_depth=max_depth if deep else 10**9, nul=nul, surrogates=surrogates)
    return value
