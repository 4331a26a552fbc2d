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
        assert default["0.3"] >= 0.9 and default["0.05"] >= 0.9, sc["name"]
        # The 0.5% cell: covered, or its misses marked by the few-clusters flag.
        kept = sc["unflagged_coverage"][stats.DEFAULT_CELL_METHOD]["0.005"]
        assert default["0.005"] >= 0.87 or kept is None or kept >= 0.87, sc["name"]
        assert sc["zero_width"][stats.DEFAULT_CELL_METHOD] == 0
        assert set(sc["median_width_ratio"]) == set(stats.CELL_METHODS)
        assert all(r == 1.0 for r in sc["median_width_ratio"]["percentile"].values() if r is not None)
        for method in stats.CELL_METHODS:
            for k, c in sc["coverage"][method].items():
                misses = sc["miss_below"][method][k] + sc["miss_above"][method][k]
                assert misses == round((1 - c) * sc["studies"]) and sc["flagged_misses"][method][k] <= misses
                kept = sc["studies"] - sc["few_clusters_studies"][k]
                u = sc["unflagged_coverage"][method][k]
                assert u is None if not kept else u == round(1 - (misses - sc["flagged_misses"][method][k]) / kept, 4)
    # The instrument sees what it must: empty cells give the percentile bootstrap zero-width misses.
    assert sum(sc["zero_width"]["percentile"] for sc in last["scenarios"]) > 0
    assert last["scenarios"][1]["coverage"]["percentile"]["0.005"] < 0.8
    assert isinstance(last["targets_met"], bool) and last["targets_met"] == (not last["target_failures"])


def test_it_checks_the_targets_and_names_each_miss():
    sys.path.insert(0, str(BENCH.parent.parent))
    from bench.coverage_bench import KEYS, target_failures

    def result(cov, pct, ratio, flagged=0, misses=(0, 0), few=0):
        methods = (stats.DEFAULT_CELL_METHOD, "percentile")
        return {
            "name": "s", "studies": 200, "few_clusters_studies": dict.fromkeys(KEYS, few),
            "coverage": {stats.DEFAULT_CELL_METHOD: cov, "percentile": pct},
            "median_width_ratio": {stats.DEFAULT_CELL_METHOD: ratio, "percentile": dict.fromkeys(KEYS, 1.0)},
            "miss_below": {m: dict.fromkeys(KEYS, misses[0]) for m in methods},
            "miss_above": {m: dict.fromkeys(KEYS, misses[1]) for m in methods},
            "flagged_misses": {m: dict.fromkeys(KEYS, flagged) for m in methods},
        }  # fmt: skip

    good = dict.fromkeys(KEYS, 0.95)
    assert target_failures(result(good, good, dict.fromkeys(KEYS, 1.2))) == []
    assert target_failures(result({**good, "0.05": 0.92}, good, dict.fromkeys(KEYS, 1.2))) == [
        "s: 0.05 cell covers 92.0%, outside 93-97%"
    ]
    assert target_failures(result({**good, "0.3": 0.975}, good, dict.fromkeys(KEYS, 1.2)))[0].startswith("s: 0.3 cell")
    wide = target_failures(result(good, good, {**dict.fromkeys(KEYS, 1.2), "0.4": 1.6}))
    assert wide == ["s: 0.4 cell is 1.60x the percentile's width where it covers 95.0%"]
    # Width only counts where the percentile covers at least 93%.
    assert target_failures(result(good, {**good, "0.4": 0.92}, {**dict.fromkeys(KEYS, 1.2), "0.4": 1.6})) == []
    # A rare cell under 90% passes when the intervals the flag leaves unmarked cover 90%: 200 studies, 100 flagged
    # (holding 20 of the 30 misses), 10 misses among the other 100.
    rare = {**good, "0.005": 0.85}
    kw = {"misses": (10, 20), "few": 100}
    assert target_failures(result(rare, good, dict.fromkeys(KEYS, 1.2), flagged=20, **kw)) == []
    assert target_failures(result(rare, good, dict.fromkeys(KEYS, 1.2), flagged=19, **kw)) == [
        "s: 0.005 cell covers 85.0%, and 89.0% where not flagged"
    ]
    every = target_failures(result(rare, good, dict.fromkeys(KEYS, 1.2), flagged=30, misses=(10, 20), few=200))
    assert every == []  # all flagged
