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
    # The top-3 floor is the three most common types, not the top-1 floor printed again.
    assert doc["cold"]["baseline"]["type_top3"] > doc["cold"]["baseline"]["type_top1"]
    assert 0 <= doc["quotes_template_share"] <= 1
    lo, hi = doc["trained"]["intervals"]["type_top3"]
    assert lo <= doc["trained"]["type_top3"] <= hi
    assert set(doc["trained"]["p_values"]) == {"type_top1", "type_top3", "source", "stage", "capability"}


def test_it_scores_one_split_and_counts_template_quotes(tmp_path):
    """Rows of another split are left out; quotes the suggester takes from a template are counted as template."""
    rows = []
    for n in range(24):
        body = (
            f"## Describe the bug\n\n**Sandbox:** docker {n}\n\nThe agent repeated the same tool call {n} times "
            "in a loop until the step limit stopped the run."
        )
        rows.append(
            {"label_status": "agreed", "title": f"Loop {n}", "excerpt": body, "cluster": f"acme/r{n % 4}",
             "document_kind": "github_issue", "split": "test" if n < 12 else "dev", "label_failure_type": "CTL-01",
             "label_source": "llm", "label_stage": "iterative_execution", "label_capability": "self_monitoring"}
        )  # fmt: skip
    data = tmp_path / "split.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = _run(str(ROOT / "bench" / "suggest_quality_bench.py"), str(data), "--quick", "--split", "test").stdout
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["n"] == 12 and doc["split"] == "test"
    quotes = doc["cold"]["quotes"]
    assert quotes["quotes"] == 12 and quotes["template"] == round(quotes["share"] * 12)


def test_it_refuses_an_export_without_enough_labels(tmp_path):
    data = tmp_path / "few.jsonl"
    data.write_text(json.dumps({"label_status": "none", "excerpt": "x", "title": "t"}) + "\n")
    done = _run(str(ROOT / "bench" / "suggest_quality_bench.py"), str(data), "--quick", check=False)
    assert done.returncode != 0 and "at least 10 are needed" in done.stderr
