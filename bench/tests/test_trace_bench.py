"""The trace bench runs (--quick) and ends with its fixed JSON keys, so it cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


# The shared data sit beside the repository (../shared); a worktree elsewhere reads the machine's copy.
WHO_AND_WHEN = next(
    (
        p / "datasets" / "who_and_when"
        for p in (Path(__file__).resolve().parents[2].parent / "shared", Path("/work/shared"))
        if (p / "datasets" / "who_and_when").is_dir()
    ),
    Path("../shared/datasets/who_and_when"),
)
ATTRIBUTION_KEYS = ("step_exact", "step_pm3", "agent", "prior_step_exact", "prior_step_pm3", "prior_agent")


@pytest.mark.skipif(not WHO_AND_WHEN.is_dir(), reason="needs ../shared/datasets/who_and_when")
def test_it_reports_the_rule_beside_the_prior_per_half_on_held_out_logs_only():
    from bench.trace_bench import attribution_accuracy
    from lib.stats.attribution import split_of

    acc = json.loads(json.dumps(attribution_accuracy(WHO_AND_WHEN)))  # what the summary line carries
    assert set(acc["halves"]) == {"algorithm_generated", "hand_crafted"}
    files = {half: sorted((WHO_AND_WHEN / half).glob("*.json")) for half in ("Algorithm-Generated", "Hand-Crafted")}
    for half, key in (("Algorithm-Generated", "algorithm_generated"), ("Hand-Crafted", "hand_crafted")):
        h = acc["halves"][key]
        evaluate = [p for p in files[half] if split_of(f"{half}/{p.name}") == "evaluate"]
        assert h["evaluate_logs"] == len(evaluate) and h["choose_logs"] == len(files[half]) - len(evaluate)
        for k in ATTRIBUTION_KEYS:
            f = h[k]
            assert f["n"] == h["evaluate_logs"] and 0 <= f["low"] <= f["value"] <= f["high"] <= 1
            assert f["value"] == pytest.approx(f["k"] / f["n"], abs=1e-3)
        assert set(h["prior"]) == {"k_exact", "k_pm3", "agent"}


@pytest.mark.skipif(not WHO_AND_WHEN.is_dir(), reason="needs ../shared/datasets/who_and_when")
def test_the_prior_figures_come_from_k_chosen_without_the_evaluate_logs(tmp_path):
    from bench.trace_bench import attribution_accuracy
    from lib.stats.attribution import split_of

    # Rewrite every evaluate log of one half to blame its last step: the choose split, and so k, must not move.
    half = WHO_AND_WHEN / "Hand-Crafted"
    out = tmp_path / "Hand-Crafted"
    out.mkdir()
    for p in half.glob("*.json"):
        data = json.loads(p.read_text())
        if split_of(f"Hand-Crafted/{p.name}") == "evaluate":
            data["mistake_step"] = str(len(data["history"]) - 1)
        (out / p.name).write_text(json.dumps(data))
    before = attribution_accuracy(half.parent)["halves"]["hand_crafted"]["prior"]
    after = attribution_accuracy(tmp_path)["halves"]["hand_crafted"]["prior"]
    assert before == after
