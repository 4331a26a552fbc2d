"""The pages bench runs (--quick), prints its fixed JSON keys, and its query counts do not grow with the study."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "pages_bench.py"


def test_it_runs_quick_with_the_same_queries_at_both_sizes():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}  # its own SQLite file
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=240, check=True, env=env
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["bench"] == "pages" and last["episodes"] == 2000
    names = {"next", "coding_get", "coding_post", "adjudication_list"}
    assert set(last["endpoints"]) == names
    for name in names:
        big, small = last["endpoints"][name], last["small_endpoints"][name]
        assert {"median_ms", "p95_ms", "queries"} <= set(big)
        assert big["queries"] == small["queries"], name  # constant in the number of episodes
        assert 0 < big["median_ms"] <= big["p95_ms"]
