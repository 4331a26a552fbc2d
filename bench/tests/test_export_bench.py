"""The export bench runs (--quick) through a real gunicorn and prints its fixed JSON keys, so it cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "export_bench.py"


def test_it_runs_quick_and_ends_with_the_fixed_json_keys():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}  # its own throwaway SQLite database
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=240, check=True, env=env
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("bench", "rows", "rows_per_s", "rss_mb_10k", "rss_mb_100k", "parquet_s"):
        assert key in last
    assert last["bench"] == "export"
    assert last["rows"] == 2000 and last["small_rows"] == 500
    assert last["rows_per_s"] > 0 and last["rss_mb_100k"] > 0
