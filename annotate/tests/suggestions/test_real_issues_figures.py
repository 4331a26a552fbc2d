"""The local suggester's real-issue test-split figures: one recorded measurement, and README.md and the Suggestions
page saying what it says."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from annotate.suggestions import real_issues

README = Path(settings.BASE_DIR) / "README.md"
KEYS = ("type_top1", "type_top3", "source", "stage", "capability")


def _part(value: float, p: float, floor: float = 0.4) -> dict:
    return {
        **dict.fromkeys(KEYS, value), "ece": 0.1,
        "intervals": {**{k: [value - 0.1, value + 0.1] for k in KEYS}, "ece": [0.05, 0.15]},
        "baseline": dict.fromkeys(KEYS, floor), "baseline_intervals": {k: [floor - 0.1, floor + 0.1] for k in KEYS},
        "p_values": dict.fromkeys(KEYS, p), "quotes": {"share": 0.02, "interval": [0.0, 0.1], "quotes": 50},
    }  # fmt: skip


def test_the_verdict_names_every_measure_the_trained_model_does_not_beat_the_floor_on():
    ahead = {"n": 120, "split": "test", "cold": _part(0.5, 0.2), "trained": _part(0.6, 0.001)}
    assert "beats the most common value on every measure" in real_issues.verdict(ahead)
    behind = {**ahead, "trained": _part(0.45, 0.01)}
    behind["trained"]["p_values"]["stage"] = 0.3
    behind["trained"]["p_values"]["source"] = None
    text = real_issues.verdict(behind)
    assert "does not beat the most common value at the 95% level on source, stage." in text
    rows = {r["measure"]: r for r in real_issues.rows(behind)}
    assert rows["stage"]["trained"] == "45% [35%, 55%]" and rows["stage"]["floor"] == "40% [30%, 50%]"
    assert not rows["stage"]["beats"] and rows["type, top 3"]["beats"]
    assert "has not been measured" in real_issues.verdict({})


def test_the_readme_says_what_the_recorded_test_split_measurement_says():
    data = real_issues.record()
    assert data and data["split"] == "test" and data["n"] >= 100
    block = re.search(r"<!-- real-issues:start -->\n(.*?)\n<!-- real-issues:end -->", README.read_text(), re.S)
    assert block, "README.md lost its real-issue block"
    assert block.group(1) == real_issues.readme_block(data)


def test_the_suggestions_page_shows_the_recorded_figures(client, alice, study):
    client.force_login(alice)
    html = client.get(f"/studies/{study.slug}/suggestions/").content.decode()
    html = html.replace("&#x27;", "'").replace("&amp;", "&")
    assert 'id="suggester-real-issues"' in html
    assert real_issues.verdict() in html
    for row in real_issues.rows():
        assert row["trained"] in html and row["floor"] in html and row["cold"] in html
