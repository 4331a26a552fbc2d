"""The trace bench runs (--quick) and ends with its fixed JSON keys, so it cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "trace_bench.py"


def test_it_runs_quick_and_ends_with_the_fixed_json_keys():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}  # its own throwaway SQLite database
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=300, check=True, env=env
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    for key in (
        "bench", "whowhen_logs_per_s", "big_trace_import_s", "first_screen_median_ms",
        "first_screen_queries_small", "first_screen_queries_big",
    ):  # fmt: skip
        assert key in last
    assert last["bench"] == "trace" and last["logs"] == 60 and last["big_trace_steps"] == 400
    # The first screen of a long trace costs the same queries as a short one's.
    assert last["first_screen_queries_big"] == last["first_screen_queries_small"]
    assert last["whowhen_logs_per_s"] > 0 and last["big_trace_import_s"] > 0
