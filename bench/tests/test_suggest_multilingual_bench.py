"""The multilingual bench's smoke run: it reads the dev reports and ends with its JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_runs_quick_on_the_dev_reports_and_ends_with_the_json_line():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "suggest_multilingual_bench.py"), "--quick"],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
    ).stdout  # fmt: skip
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["bench"] == "suggest_multilingual" and doc["fold"] == "dev" and doc["groups"] == 4
    assert doc["pairs"] >= 4 and 0 <= doc["agreement"] <= 1 and 0 <= doc["en_top1"] <= 1
    assert len(doc["disagreements"]) == round(doc["pairs"] * (1 - doc["agreement"]))


def test_it_counts_confident_wrong_translations_per_language_on_the_five_language_fold():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "suggest_multilingual_bench.py"), "--fold", "five", "--quick"],
        capture_output=True, text=True, timeout=300, check=True, cwd=ROOT,
    ).stdout  # fmt: skip
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["fold"] == "five" and set(doc["by_language"]) == {"es", "de", "pt", "zh", "ja"}
    assert sum(row["pairs"] for row in doc["by_language"].values()) == doc["pairs"] == 4 * 5
    # Every translation is read through word lists, so none may be confident; and none is declined.
    assert doc["confident_wrong"] == 0 and doc["unsure"] == doc["pairs"] and doc["declined"] == 0
