"""The local step suggester against the position prior, as last measured on held-out Who&When logs.

One place for those figures: `heldout.json` beside this module, written by
`python bench/trace_bench.py --attribution DIR --record`. The agreement page and README.md say what
`verdict()` says, and a test holds README.md to it, so the statement cannot drift from the measurement.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

PATH = Path(__file__).with_name("heldout.json")
KEYS = ("step_exact", "step_pm3", "agent")
LABELS = {"step_exact": "step exact", "step_pm3": "step ±3", "agent": "agent"}
HALVES = {"algorithm_generated": "Algorithm-Generated", "hand_crafted": "Hand-Crafted"}


@lru_cache(maxsize=1)
def record() -> dict:
    """The recorded measurement (empty when none was recorded)."""
    return json.loads(PATH.read_text()) if PATH.is_file() else {}


def _pct(f: dict) -> str:
    return f"{f['value']:.0%} [{f['low']:.0%}, {f['high']:.0%}]"


def comparisons(data: dict | None = None) -> list[dict]:
    """Per half and measure: the rule's and the prior's held-out figures, and how they compare. "ahead" means a
    higher point estimate with overlapping 95% Wilson intervals; "clearly ahead"/"clearly behind" that the
    intervals do not overlap."""
    data = record() if data is None else data
    rows = []
    for key, half in HALVES.items():
        h = data.get("halves", {}).get(key)
        if not h or "error" in h:
            continue
        for m in KEYS:
            rule, prior = h[m], h[f"prior_{m}"]
            if rule["low"] > prior["high"]:
                outcome = "clearly ahead of"
            elif rule["high"] < prior["low"]:
                outcome = "clearly behind"
            elif rule["value"] > prior["value"]:
                outcome = "ahead of (intervals overlap)"
            elif rule["value"] == prior["value"]:
                outcome = "level with"
            else:
                outcome = "behind (intervals overlap)"
            rows.append(
                {"half": half, "measure": LABELS[m], "rule": _pct(rule), "prior": _pct(prior), "n": rule["n"],
                 "outcome": outcome, "beats": rule["value"] > prior["value"]}
            )  # fmt: skip
    return rows


def verdict(data: dict | None = None) -> str:
    """One plain sentence: does the local rule beat the position prior on held-out logs?"""
    data = record() if data is None else data
    rows = comparisons(data)
    if not rows:
        return "The local step rule has not been measured against the position prior on held-out logs."
    rule = data.get("chosen", "the local rule")
    lost = [f"{r['measure']} on {r['half']}" for r in rows if not r["beats"]]
    won = [f"{r['measure']} on {r['half']}{' (clearly)' if r['outcome'] == 'clearly ahead of' else ''}"
           for r in rows if r["beats"]]  # fmt: skip
    if not lost:
        return f"On held-out Who&When logs the local step rule ({rule}) beats the position prior on every measure."
    ahead = f"; it is ahead on {', '.join(won)}" if won else ""
    return (
        f"On held-out Who&When logs the local step rule ({rule}) does not beat the position prior: it is not ahead "
        f"on {', '.join(lost)}{ahead}."
    )


def readme_block(data: dict | None = None) -> str:
    """The verdict and its table as README.md carries them (a test compares the two)."""
    data = record() if data is None else data
    lines = [verdict(data), "", "| Who&When half | measure | local rule | position prior | held-out logs | outcome |"]
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for r in comparisons(data):
        lines.append(f"| {r['half']} | {r['measure']} | {r['rule']} | {r['prior']} | {r['n']} | {r['outcome']} |")
    return "\n".join(lines)
