"""The suggestion quality bench's smoke run on the evaluation set, and its handling of any export."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"type_top1", "type_top3", "source", "stage", "capability", "ece", "baseline"}


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, check=check, cwd=ROOT)


def test_it_runs_quick_on_the_evaluation_set_and_ends_with_the_json_line(tmp_path):
    data = tmp_path / "eval.jsonl"
    _run(str(ROOT / "bench" / "suggest_eval_set.py"), str(data))
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    assert len(rows) == 82 and {r["eval_fold"] for r in rows} == {"dev", "holdout"}
    out = _run(str(ROOT / "bench" / "suggest_quality_bench.py"), str(data), "--quick").stdout
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["bench"] == "suggest_quality" and doc["n"] == sum(r["eval_fold"] == "dev" for r in rows)
    for part in ("cold", "trained"):
        assert set(doc[part]) >= KEYS and set(doc[part]["baseline"]) >= KEYS - {"ece", "baseline"}
        assert 0 <= doc[part]["type_top1"] <= doc[part]["type_top3"] <= 1
    assert doc["trained"]["stage"] > doc["trained"]["baseline"]["stage"]


def test_it_refuses_an_export_without_enough_labels(tmp_path):
    data = tmp_path / "few.jsonl"
    data.write_text(json.dumps({"label_status": "none", "excerpt": "x", "title": "t"}) + "\n")
    done = _run(str(ROOT / "bench" / "suggest_quality_bench.py"), str(data), "--quick", check=False)
    assert done.returncode != 0 and "at least 10 are needed" in done.stderr
