"""The local step rule against the position prior: one recorded measurement, the README and the agreement page
saying what it says, and a learned rule fitted on the choose split only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from annotate.suggestions import heldout
from annotate.suggestions.steps import FEATURES, MODEL_PATH, RULES, step_features
from annotate.traces.parsed import Step
from lib.stats.attribution import split_of

README = Path(settings.BASE_DIR) / "README.md"
WHO = Path(settings.BASE_DIR).parent / "shared" / "datasets" / "who_and_when"
if not WHO.is_dir():
    WHO = Path("/work/shared/datasets/who_and_when")


def _fig(k: int, n: int, low: float, high: float) -> dict:
    return {"value": k / n, "low": low, "high": high, "k": k, "n": n}


def _data(rule_agent: dict) -> dict:
    half = {
        "step_exact": _fig(6, 20, 0.15, 0.52), "prior_step_exact": _fig(4, 20, 0.08, 0.42),
        "step_pm3": _fig(15, 20, 0.53, 0.89), "prior_step_pm3": _fig(12, 20, 0.39, 0.78),
        "agent": rule_agent, "prior_agent": _fig(10, 20, 0.30, 0.70),
    }  # fmt: skip
    return {"chosen": "first_error", "logs": 80, "halves": {"algorithm_generated": half, "hand_crafted": half}}


def test_the_verdict_says_beats_only_when_the_rule_is_ahead_on_every_measure():
    ahead = _data(_fig(19, 20, 0.76, 0.99))
    assert "beats the position prior on every measure" in heldout.verdict(ahead)
    assert {r["outcome"] for r in heldout.comparisons(ahead) if r["measure"] == "agent"} == {"clearly ahead of"}
    behind = _data(_fig(9, 20, 0.26, 0.66))
    text = heldout.verdict(behind)
    assert "does not beat the position prior" in text
    assert "not ahead on agent on Algorithm-Generated, agent on Hand-Crafted" in text
    assert {r["outcome"] for r in heldout.comparisons(behind) if r["measure"] == "agent"} == {
        "behind (intervals overlap)"
    }
    assert "has not been measured" in heldout.verdict({})


def test_the_readme_says_what_the_recorded_measurement_says():
    data = heldout.record()
    assert data and set(data["halves"]) == {"algorithm_generated", "hand_crafted"}
    text = README.read_text()
    block = re.search(r"<!-- heldout:start -->\n(.*?)\n<!-- heldout:end -->", text, re.S)
    assert block, "README.md lost its held-out block"
    assert block.group(1) == heldout.readme_block(data)
    # The recorded rule is the one the local backend runs, and the claim in the heading matches the verdict.
    from annotate.suggestions.steps import LOCAL_RULE

    assert data["chosen"] == LOCAL_RULE
    beats_all = all(r["beats"] for r in heldout.comparisons(data))
    assert ("**Does it beat position alone? Not on every measure.**" in text) is not beats_all


@pytest.mark.skipif(not WHO.is_dir(), reason="needs ../shared/datasets/who_and_when")
def test_the_agreement_page_shows_the_verdict_and_the_figures(client, alice, study):
    from annotate.traces.services import import_traces

    import_traces(study=study, paths=[WHO / "Hand-Crafted" / "3.json"], fmt="whowhen")  # a trace study
    client.force_login(alice)
    html = client.get("/studies/alpha/agreement/?bootstrap=200").content.decode()
    assert 'id="step-rule-heldout"' in html
    assert heldout.verdict() in html.replace("&#x27;", "'").replace("&amp;", "&")
    for row in heldout.comparisons():
        assert row["rule"] in html and row["prior"] in html


def test_the_learned_rule_was_fitted_on_choose_split_logs_only():
    model = json.loads(MODEL_PATH.read_text())
    assert tuple(model["features"]) == FEATURES and len(model["coef"]) == len(FEATURES)
    assert model["fitted_on"] and all(split_of(name) == "choose" for name in model["fitted_on"])


def test_the_learned_rule_scores_every_step_and_blames_an_agent():
    steps = [
        Step(index=0, agent="human", kind="message", output="Find the file."),
        Step(index=1, agent="Planner", kind="message", output="Plan: search, then read."),
        Step(index=2, agent="Coder", kind="tool_call", output="open('x.csv')", paired_index=3),
        Step(index=3, agent="Computer_terminal", kind="tool_result", output="exitcode: 1 (execution failed)",
             paired_index=2),
        Step(index=4, agent="Coder", kind="message", output="The answer is 3."),
    ]  # fmt: skip
    f = step_features(steps)
    assert f.shape == (5, len(FEATURES))
    col = {name: i for i, name in enumerate(FEATURES)}
    assert f[:, col["error_marker"]].tolist() == [0, 0, 0, 1, 0]
    assert f[:, col["next_step_fails"]].tolist() == [0, 0, 1, 0, 0]  # the call whose result failed
    # Planner -> Coder is a hand-off; Coder after its own call (the terminal is no agent) is not.
    assert f[:, col["hand_off"]].tolist() == [0, 0, 1, 0, 0]
    guess = RULES["learned"](steps)
    assert guess.step in range(5) and guess.agent not in ("human", "Computer_terminal")


@pytest.mark.skipif(not WHO.is_dir(), reason="needs ../shared/datasets/who_and_when")
def test_the_fit_reads_no_evaluate_split_log():
    from bench.fit_step_model import fit

    model = fit(WHO)
    names = {f"{p.parent.name}/{p.name}" for p in WHO.rglob("*.json")}
    assert set(model["fitted_on"]) == {n for n in names if split_of(n) == "choose"}
    assert np.isfinite(model["coef"]).all()
