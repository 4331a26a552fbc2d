"""lib.safejson: what json.loads accepts but no database stores is refused with a reason; the rest is unchanged."""

from __future__ import annotations

import json

import pytest

from lib import safejson


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('["a\\ud800"]', "surrogate"),
        ('{"x": "\\udfff tail"}', "surrogate"),
        ('["\\u0000"]', "NUL"),
        ('{"k\\u0000": 1}', "NUL"),
        ("[" * 101 + "]" * 101, "nested more than 100"),
        ("[" * 100_000 + "]" * 100_000, "nested more than 100"),
        ('{"a": NaN}', "NaN"),
        ("[1, 2", "Invalid JSON at line 1"),
        (b'["\xff"]', "not UTF-8"),
    ],
)
def test_it_refuses_with_the_reason(text, says):
    with pytest.raises(safejson.JSONError, match=says):
        safejson.loads(text)


def test_it_reads_what_json_reads():
    text = '["\\\\u0000", 123456789012345678901234567890, "\\ud83d\\ude00", {"deep": ' + "[" * 98 + "]" * 98 + "}]"
    assert safejson.loads(text) == json.loads(text)
    assert safejson.loads(text.encode("utf-8-sig")) == json.loads(text)  # bytes, with a BOM
    assert safejson.loads('["a\\u0000b"]', allow_nul=True) == ["a\x00b"]  # for importers that strip NULs


def test_depth_counts_levels_and_stops_early():
    assert safejson.json_depth(1) == 0 and safejson.json_depth([]) == 1
    assert safejson.json_depth({"a": [{"b": []}]}) == 4
    assert safejson.json_depth(json.loads("[" * 500 + "]" * 500), stop_above=100) == 101
