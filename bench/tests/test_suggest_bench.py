"""The suggestion benchmark's smoke run, so it cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_runs_quick_and_ends_with_the_json_line():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "suggest_bench.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
        cwd=ROOT,
    ).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["bench"] == "suggest"
    assert doc["local_score_per_s"] > 0 and doc["train_s"] > 0
    assert doc["llm_speedup_8_vs_1"] > 2  # 200 ms per request: concurrency must overlap them
    assert doc["synthetic_top1"] > 0.5
