"""The local suggester on the test split of the real-issue set, beside the most-common-value floor.

One place for those figures: `real_issues.json` beside this module, written by
`python bench/suggest_quality_bench.py EXPORT --split test --record` on the export of bench/real_issues/
(build_export.py). README.md and the Suggestions page say what `rows()` and `verdict()` say, and a test holds
README.md to them, so the statement cannot drift from the measurement. The test split's repositories were never
used to build the suggester (its cold prior is fitted on the development split).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

PATH = Path(__file__).with_name("real_issues.json")
MEASURES = (
    ("type_top1", "type, top 1"),
    ("type_top3", "type, top 3"),
    ("source", "source"),
    ("stage", "stage"),
    ("capability", "capability"),
)


@lru_cache(maxsize=1)
def record() -> dict:
    """The recorded measurement (empty when none was recorded)."""
    return json.loads(PATH.read_text(encoding="utf-8")) if PATH.is_file() else {}


def _pct(value, interval) -> str:
    if value is None:
        return "—"
    lo, hi = interval or (None, None)
    return f"{value:.0%}" + (f" [{lo:.0%}, {hi:.0%}]" if lo is not None and hi is not None else "")


def rows(data: dict | None = None) -> list[dict]:
    """Per measure: cold and trained accuracy and the floor, with 95% intervals, and whether trained beats the floor
    at the 95% level (one-sided exact McNemar test). The floor of type top 3 is the three most common types."""
    data = record() if data is None else data
    if not data:
        return []
    cold, trained = data["cold"], data["trained"]
    out = []
    for key, label in MEASURES:
        p = trained["p_values"][key]
        out.append(
            {"measure": label, "cold": _pct(cold[key], cold["intervals"][key]),
             "trained": _pct(trained[key], trained["intervals"][key]),
             "floor": _pct(trained["baseline"][key], trained["baseline_intervals"][key]),
             "p": "—" if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}"), "beats": p is not None and p < 0.05}
        )  # fmt: skip
    return out


def verdict(data: dict | None = None) -> str:
    """One plain sentence: does the trained local suggester beat the floor on every axis of the test split?"""
    data = record() if data is None else data
    if not data:
        return "The local suggester has not been measured on the real-issue test split."
    lost = [r["measure"] for r in rows(data) if not r["beats"]]
    n = data["n"]
    if not lost:
        return (
            f"On {n} real issues of the test split, the trained local suggester beats the most common value on every "
            "measure at the 95% level."
        )
    return (
        f"On {n} real issues of the test split, the trained local suggester does not beat the most common value at "
        f"the 95% level on {', '.join(lost)}."
    )


def extras(data: dict | None = None) -> dict:
    """ECE and the template-quote share, cold and trained, with intervals."""
    data = record() if data is None else data
    if not data:
        return {}
    out = {}
    for part in ("cold", "trained"):
        d = data[part]
        lo, hi = d["intervals"]["ece"]
        q = d.get("quotes") or {}
        ece = "—" if d["ece"] is None else f"{d['ece']:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "")
        out[part] = {
            "ece": ece,
            "quotes": _pct(q.get("share"), q.get("interval")) + (f" of {q['quotes']}" if q.get("quotes") else ""),
        }
    return out


def readme_block(data: dict | None = None) -> str:
    """The verdict and its table as README.md carries them (a test compares the two)."""
    data = record() if data is None else data
    lines = [verdict(data)]
    if data:
        lines += ["", "| measure | cold | trained (5-fold) | most common value | trained vs floor, p |"]
        lines.append("| --- | --- | --- | --- | --- |")
        for r in rows(data):
            lines.append(f"| {r['measure']} | {r['cold']} | {r['trained']} | {r['floor']} | {r['p']} |")
        x = extras(data)
        lines += [
            "",
            f"ECE cold {x['cold']['ece']}, trained {x['trained']['ece']}; top-1 quotes that are template or cut "
            f"words: cold {x['cold']['quotes']}, trained {x['trained']['quotes']}.",
        ]
    return "\n".join(lines)
