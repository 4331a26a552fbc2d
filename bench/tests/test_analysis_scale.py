"""bench/analysis_scale.py --units: lib.stats.agreement alone on the agreement document's six axes, ending with
its JSON (the 1,000,000-episode figures of issue 31 come from it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "analysis_scale.py"


def test_it_runs_lib_agreement_on_every_axis_and_ends_with_its_json():
    out = subprocess.run(
        [sys.executable, str(BENCH), "--units", "3000", "--bootstrap", "128"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert (last["bench"], last["units"], last["bootstrap_B"]) == ("agreement_lib", 3000, 128)
    axes = last["axes"]
    assert list(axes) == ["failure_type", "category", "source", "stage", "capability", "overall"]
    assert [axes[a]["categories"] for a in ("failure_type", "category", "source", "stage", "capability")] == [
        65, 12, 8, 7, 6
    ]  # fmt: skip
    assert 2_000 < axes["overall"]["categories"] <= 3_000  # random whole labels: nearly one per episode
    assert 0.9 < axes["failure_type"]["ac1"] < 1 and axes["source"]["ac1"] == 1.0  # 5% differ on the type only
    assert all(a["peak_mb"] > 0 and a["cpu_s"] >= 0 for a in axes.values()) and last["peak_mb"] < 200
    assert "overall: " in out.stderr
