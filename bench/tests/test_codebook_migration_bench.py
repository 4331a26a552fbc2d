"""The codebook migration bench runs (--quick) and prints its JSON summary, so it cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "codebook_migration_bench.py"


def test_it_runs_quick_and_ends_with_its_json_summary():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}  # its own throwaway SQLite database
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=240, check=True, env=env
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["bench"] == "codebook_migration" and last["episodes"] == 300 and last["codings"] == 600
    assert last["migrate_s"] > 0 and last["revert_s"] > 0 and last["requeued"] > 0
    assert last["migrate_queries"] > 0
