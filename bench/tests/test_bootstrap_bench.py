"""The bootstrap bench runs (--quick) and prints its fixed JSON keys, so it cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bootstrap_bench.py"


def test_it_runs_quick_and_ends_with_the_fixed_json_keys():
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=120, check=True
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    for key in (
        "bench",
        "B",
        "paper_s",
        "naive_paper_s",
        "ratio",
        "x100_s",
        "x100_peak_mb",
        "agreement_s",
        "alpha_abs_diff",
    ):
        assert key in last
    assert last["bench"] == "bootstrap"
    assert last["alpha_abs_diff"] < 1e-9
    assert last["ratio"] > 1
