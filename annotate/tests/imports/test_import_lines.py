"""The JSON reader's line fast path (orjson on a value that ends its line) reads every layout of a file as the
json module reads it: an item a line with the comma before or after it, JSON Lines, the whole array on one line,
pretty-printed, and the values only json accepts (NaN, lone surrogates, big integers), which fall back to it."""

from __future__ import annotations

import io
import json

import pytest

from annotate.imports import _issues
from annotate.imports._issues import iter_github_items
from annotate.imports.parsed import ImportFileError

ITEMS = [
    {"number": 1, "title": "a", "body": "line\nbreak \u00e9 \U0001f600", "labels": [{"name": "x"}], "n": 1.5e-7},
    {"number": 2, "title": "b, with [brackets] and {braces}", "body": None, "deep": {"a": [1, {"b": None}]}},
    {"number": 3, "title": "c", "body": "\\u0000 is text here", "big": 2**63, "neg": -0.0},
]


def layouts(items: list) -> dict[str, str]:
    lines = [json.dumps(item) for item in items]
    return {
        "comma first": "[\n" + "\n".join(("," if i else "") + line for i, line in enumerate(lines)) + "\n]\n",
        "comma last": "[\n" + ",\n".join(lines) + "\n]",
        "crlf": "[\r\n" + ",\r\n".join(lines) + "\r\n]\r\n",
        "json lines": "\n".join(lines) + "\n",
        "one line": json.dumps(items),
        "pretty": json.dumps(items, indent=2),
        "last item ends the array": "[" + ",\n".join(lines) + "]",
    }


def read(text: str) -> list:
    return [item for item, _ in iter_github_items(io.StringIO(text))]


@pytest.mark.parametrize("layout", list(layouts(ITEMS)))
def test_every_layout_reads_the_same_items(layout):
    assert read(layouts(ITEMS)[layout]) == ITEMS


def test_values_orjson_refuses_are_read_by_json_as_before():
    odd = [{"number": 4, "nan": float("nan")}, {"number": 5, "s": "\ud800"}, {"number": 6, "huge": 2**70}]
    for text in layouts(odd).values():
        got = read(text)
        assert got[0]["nan"] != got[0]["nan"] and got[1:] == odd[1:]


def test_the_fast_path_is_taken_for_an_item_a_line(monkeypatch):
    calls = []
    real = _issues.orjson.loads
    monkeypatch.setattr(_issues.orjson, "loads", lambda text: calls.append(text) or real(text))
    assert read(layouts(ITEMS)["comma first"]) == ITEMS
    assert len(calls) == 3  # each item by orjson, none by json


def test_line_numbers_and_errors_are_unchanged():
    text = layouts(ITEMS)["comma last"]
    assert [line for _, line in iter_github_items(io.StringIO(text))] == [2, 3, 4]
    broken = text.replace('"title": "b', '"title": b', 1)
    with pytest.raises(ImportFileError, match=r"record 2 \(starting on line 3\): invalid JSON"):
        read(broken)
    with pytest.raises(ImportFileError, match="record 2: expected ',' or ']'"):
        read(text.replace(",\n", "\n", 1))
