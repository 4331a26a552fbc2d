"""Step-level suggestions for traces: which step decided the failure, and which agent is to blame.

`suggestions_attribute` gives a batch's trace suggestions their step and agent (the local rule below, or the
LLM), and saves them.

The local backend has several candidate rules; `LOCAL_RULE` names the one it uses, chosen by
the accuracy each reaches against the Who&When references (bench/trace_bench.py --attribution
measures them all, on any folder of Who&When logs). The numbers are in README.md.

Every rule reads only the steps (no database), so it runs on parsed files as well as stored traces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

from annotate.models import (
    StepKind,
    StepStatus,
    Suggestion,
    TraceStep,
)


class StepLike(Protocol):
    index: int
    agent: str
    kind: str
    name: str
    input: str
    output: str
    status: str
    error: str
    paired_index: int | None


@dataclass(frozen=True)
class StepGuess:
    step: int | None
    agent: str
    rule: str
    evidence: str = ""


# Failure signals in a step's own text: a tool's non-zero exit, a traceback, an explicit error.
_FAILED = re.compile(
    r"exitcode: [1-9]|execution failed|Traceback \(most recent call last\)|\b(?:Error|Exception):|"
    r"\bfailed to\b|\bnot found\b|\bunable to\b|\bcannot\b|\bcould not\b",
    re.IGNORECASE,
)
_NON_AGENTS = {"", "human", "user", "computer_terminal"}


def _text(s: StepLike) -> str:
    return f"{s.input}\n{s.output}\n{s.error}"


def _is_agent(s: StepLike) -> bool:
    return s.agent.strip().lower() not in _NON_AGENTS


def _blame(steps: Sequence[StepLike], s: StepLike, rule: str) -> StepGuess:
    """A failed result is blamed on the call that asked for it, and on the agent that made that call."""
    if s.kind == StepKind.TOOL_RESULT and s.paired_index is not None and s.paired_index < len(steps):
        s = steps[s.paired_index]
    elif not _is_agent(s):
        earlier = [p for p in steps[: s.index] if _is_agent(p)]
        if earlier:
            s = earlier[-1]
    return StepGuess(s.index, s.agent, rule, _excerpt(s))


def _excerpt(s: StepLike) -> str:
    m = _FAILED.search(_text(s))
    text = _text(s).strip()
    if m:
        start = max(0, m.start() - 60)
        return text[start : m.end() + 60].strip() if start < len(text) else text[:160]
    return text[:160]


def rule_first_error(steps: Sequence[StepLike]) -> StepGuess:
    """The first step with an error status or a failure signal in its text (its call, for a tool result)."""
    for s in steps:
        if s.status == StepStatus.ERROR or s.error or _FAILED.search(_text(s)):
            return _blame(steps, s, "first_error")
    return rule_first_agent(steps)


def rule_first_failed_tool(steps: Sequence[StepLike]) -> StepGuess:
    """The first tool call whose result failed (error status or failure text); else the first error."""
    for s in steps:
        if s.kind in (StepKind.TOOL_RESULT, StepKind.TOOL_CALL) and (
            s.status == StepStatus.ERROR or s.error or _FAILED.search(s.output)
        ):
            return _blame(steps, s, "first_failed_tool")
    return rule_first_error(steps)


def rule_first_agent(steps: Sequence[StepLike]) -> StepGuess:
    """The first step written by an agent (not the human, not a terminal)."""
    for s in steps:
        if _is_agent(s):
            return StepGuess(s.index, s.agent, "first_agent", _excerpt(s))
    return StepGuess(steps[0].index if steps else None, steps[0].agent if steps else "", "first_agent")


def rule_last_agent(steps: Sequence[StepLike]) -> StepGuess:
    """The last step written by an agent: the answer that was wrong."""
    for s in reversed(steps):
        if _is_agent(s):
            return StepGuess(s.index, s.agent, "last_agent", _excerpt(s))
    return rule_first_agent(steps)


# A small learned rule: logistic regression over per-step features, the step with the highest score ------------

FEATURES = (
    "relative_position", "log_index", "is_first", "is_second", "is_agent", "error_marker", "first_error_marker",
    "agent_first_turn", "hand_off", "not_the_opening_agent", "next_step_fails", "log_length", "is_last",
)  # fmt: skip
MODEL_PATH = Path(__file__).with_name("step_model.json")


def step_features(steps: Sequence[StepLike]) -> np.ndarray:
    """Per step, the FEATURES (steps x features): position, error markers in its own text and in the next step's
    (a tool failure shows in the result that follows the call), and hand-offs between agents."""
    import numpy as np  # here, not at import: registering the job kinds loads this module and must stay light

    n = len(steps)
    rows = np.zeros((n, len(FEATURES)))
    fails = [bool(s.status == StepStatus.ERROR or s.error or _FAILED.search(_text(s))) for s in steps]
    opening = next((s.agent for s in steps if _is_agent(s)), "")
    seen: set[str] = set()
    previous = None
    before = False
    for i, s in enumerate(steps):
        agent = _is_agent(s)
        rows[i] = (
            i / max(n - 1, 1), np.log1p(i), i == 0, i == 1, agent, fails[i], fails[i] and not before,
            agent and s.agent not in seen, agent and previous is not None and s.agent != previous,
            agent and s.agent != opening, i + 1 < n and fails[i + 1], np.log1p(len(_text(s))), i == n - 1,
        )  # fmt: skip
        before = before or fails[i]
        if agent:
            seen.add(s.agent)
            previous = s.agent
    return rows


@lru_cache(maxsize=1)
def _model() -> tuple[np.ndarray, float]:
    import numpy as np

    data = json.loads(MODEL_PATH.read_text())
    if tuple(data["features"]) != FEATURES:
        raise ValueError(f"{MODEL_PATH.name} was fitted on other features; refit it with bench/fit_step_model.py")
    return np.asarray(data["coef"], dtype=float), float(data["intercept"])


def rule_learned(steps: Sequence[StepLike]) -> StepGuess:
    """The step the fitted model scores highest (bench/fit_step_model.py fits it on the choose split of the
    Who&When logs only); a step by no agent (a terminal, the human) is blamed on the agent step before it."""
    coef, intercept = _model()
    best = int((step_features(steps) @ coef + intercept).argmax())
    s = steps[best]
    if not _is_agent(s):
        earlier = [p for p in steps[:best] if _is_agent(p)]
        if earlier:
            s = earlier[-1]
    return StepGuess(s.index, s.agent, "learned", _excerpt(s))


RULES: dict[str, Callable[[Sequence[StepLike]], StepGuess]] = {
    "first_error": rule_first_error,
    "first_failed_tool": rule_first_failed_tool,
    "first_agent": rule_first_agent,
    "last_agent": rule_last_agent,
    "learned": rule_learned,
}
# Chosen by measured accuracy on the Who&When logs (see README.md, "Step-level suggestions").
LOCAL_RULE = "first_error"


def suggest_step(steps: Sequence[StepLike], rule: str = LOCAL_RULE) -> StepGuess:
    """The local backend's decisive step and responsible agent for a trace (None for an empty trace)."""
    if not steps:
        return StepGuess(None, "", rule)
    return RULES[rule](steps)


def suggestions_attribute(*, rows: list, suggester) -> int:
    """Give the suggestions of trace episodes a decisive step and responsible agent (in place, saved).

    The local backend uses the rule chosen in annotate.suggestions.steps; the openai backend asks the
    model for a step index from the trace's indices and a quote from that step (annotate.suggestions.llm).
    Returns how many suggestions got an attribution.
    """
    rows = [r for r in rows if not r.error]
    docs = {r.episode.document_id: r for r in rows if (r.episode.document.meta or {}).get("trace")}
    if not docs:
        return 0
    steps: dict[int, list[TraceStep]] = {}
    for s in TraceStep.objects.filter(document_id__in=list(docs)).order_by("document_id", "index"):
        steps.setdefault(s.document_id, []).append(s)
    changed = []
    for doc_id, row in docs.items():
        trace = steps.get(doc_id, [])
        if suggester.backend == "openai":
            from annotate.suggestions.llm import trace_attribution

            got = trace_attribution(suggester, title=row.episode.document.title, steps=trace)
            if got["error"]:
                row.rationale = f"{row.rationale}\n[attribution: {got['error']}]".strip()
                changed.append(row)
                continue
            row.decisive_step, row.responsible_agent = got["step"], got["agent"]
            row.input_tokens += got["input_tokens"]
            row.output_tokens += got["output_tokens"]
            if got["evidence"]:
                row.rationale = f"{row.rationale}\nDecisive step #{got['step']}: “{got['evidence']}”".strip()
            row.evidence_flagged = row.evidence_flagged or got["evidence_flagged"]
        else:
            guess = suggest_step(trace)
            row.decisive_step, row.responsible_agent = guess.step, guess.agent
        changed.append(row)
    # New rows were bulk-inserted without their keys coming back (ignore_conflicts): update by the
    # (episode, cache_key) pair that identifies each one.
    fields = ("decisive_step", "responsible_agent", "rationale", "input_tokens", "output_tokens", "evidence_flagged")
    for row in changed:
        Suggestion.objects.filter(episode_id=row.episode_id, cache_key=row.cache_key).update(
            **{name: getattr(row, name) for name in fields}
        )
    return sum(1 for r in changed if r.decisive_step is not None)
