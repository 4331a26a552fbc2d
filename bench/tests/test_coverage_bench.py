"""The coverage bench runs (--quick), prints its fixed JSON keys, and its instrument can tell good from bad."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lib import stats

BENCH = Path(__file__).resolve().parent.parent / "coverage_bench.py"


def test_it_runs_quick_and_ends_with_the_fixed_json_keys():
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=300, check=True
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["bench"] == "coverage" and last["default_method"] == stats.DEFAULT_CELL_METHOD
    names = [s["name"] for s in last["scenarios"]]
    assert names == ["lognormal_icc0.17", "pareto_icc0.17", "lognormal_icc0.05"]
    for sc in last["scenarios"]:
        assert set(sc["coverage"]) == set(stats.CELL_METHODS) == set(sc["zero_width"])
        for method, cov in sc["coverage"].items():
            assert {"0.3", "0.05", "0.005"} <= set(cov), method
            assert all(0 <= c <= 1 for c in cov.values())
        default = sc["coverage"][stats.DEFAULT_CELL_METHOD]
        # 200 seeded studies: a standard error of about 1.5 points at 95%.
        assert default["0.3"] >= 0.9 and default["0.05"] >= 0.9 and default["0.005"] >= 0.87, sc["name"]
        assert sc["zero_width"][stats.DEFAULT_CELL_METHOD] == 0
    # The instrument sees what it must: empty cells give the percentile bootstrap zero-width misses.
    assert sum(sc["zero_width"]["percentile"] for sc in last["scenarios"]) > 0
    assert last["scenarios"][1]["coverage"]["percentile"]["0.005"] < 0.8
