"""The import bench runs (--quick) and ends with its fixed JSON keys, so it cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "import_bench.py"


def test_it_runs_quick_and_ends_with_the_fixed_json_keys():
    out = subprocess.run(
        # Two children start gunicorn and run migrations: minutes on a busy machine.
        [sys.executable, str(BENCH), "--quick", "--body-bytes", "2048"], capture_output=True, text=True, timeout=600,
        check=True,
    )  # fmt: skip
    last = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("bench", "n", "first_per_s", "reimport_per_s", "peak_mb_10k", "peak_mb_50k", "db", "codable_s",
                "searchable_s", "sqlite"):  # fmt: skip
        assert key in last
    assert last["bench"] == "import" and last["n"] == 300 and last["body_mean_bytes"] == 2048
    assert last["first_per_s"] > 0 and last["reimport_per_s"] > 0
    assert set(last["cpu_ms_per_issue"]) == {"total", "web", "worker", "db"}
    assert last["cpu_ms_per_issue"]["total"] > 0
    assert last["searchable_s"] >= last["codable_s"] > 0
