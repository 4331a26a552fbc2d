"""JSON request bodies with a bound on nesting: hostile depth is a 400, not a RecursionError."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 100  # no incident, trace or coding we accept nests anywhere near this deep


def json_depth(value) -> int:
    """How deeply lists and objects nest in a parsed JSON value (iterative: any depth is safe)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        message = f"JSON nested more than {MAX_DEPTH} levels deep is not accepted."
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(message) from None
        if json_depth(data) > MAX_DEPTH:
            raise ParseError(message)
        return data
