"""Who and when, measured: coder agreement on the responsible agent and the decisive step, and the
accuracy of each coder, of the final labels and of each suggester against a published reference.

The arrays are built here from the database (a fixed number of queries); the statistics are
lib.stats.agreement (agents, nominal) and lib.stats.attribution (steps, accuracy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.contrib.auth import get_user_model

from annotate.models import Adjudication, Coding, DocumentKind, Episode, LabelRule, Study, Suggestion
from lib import stats
from lib.stats.attribution import TOLERANCES, accuracy, step_agreement


def norm_agent(name: str) -> str:
    return (name or "").strip().lower()


@dataclass(frozen=True)
class Attribution:
    step: int | None
    agent: str


def final_attribution(*, adjudication: Adjudication | None, codings: list[Coding], k: int, study: Study) -> Attribution:
    """The attribution analysis uses, by the study's label rule, for step and agent separately:
    the adjudication's if there is one; else one coder's under the single-coder rule; else what
    all of at least k coders agree on (agents compared case-insensitively); else none."""
    if adjudication is not None:
        return Attribution(adjudication.decisive_step, adjudication.responsible_agent)
    if study.label_rule == LabelRule.SINGLE_CODER:
        mine = next((c for c in codings if c.coder_id == study.label_coder_id), None)
        return Attribution(mine.decisive_step, mine.responsible_agent) if mine else Attribution(None, "")
    if len(codings) < max(k, 2):
        return Attribution(None, "")
    steps = {c.decisive_step for c in codings}
    agents = {norm_agent(c.responsible_agent) for c in codings}
    step = steps.pop() if len(steps) == 1 else None
    agent = codings[0].responsible_agent.strip() if len(agents) == 1 else ""
    return Attribution(step, agent)


def _est(e: stats.Estimate) -> dict:
    f = lambda x: None if x is None or not np.isfinite(x) else round(float(x), 6)  # noqa: E731
    return {"value": f(e.value), "ci_low": f(e.low), "ci_high": f(e.high), "reason": e.reason}


def _prop(p: stats.Proportion) -> dict:
    return {"value": p.value, "ci_low": p.low, "ci_high": p.high, "k": p.k, "n": p.n, "reason": p.reason}


def _accuracy_row(name: str, kind: str, agents, ref_agents, steps, ref_steps, level: float) -> dict:
    acc = accuracy(agents, ref_agents, np.asarray(steps), np.asarray(ref_steps), level=level)
    return {
        "rater": name,
        "kind": kind,
        "agent": _prop(acc.agent),
        "step": {("exact" if t == 0 else f"within_{t}"): _prop(acc.step[t]) for t in TOLERANCES},
    }


def attribution_document(study: Study, *, bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> dict:
    """Agreement on agent and step among coders, and accuracy against the reference, for trace episodes.

    Five queries: trace episodes (with reference), their codings, adjudications, coder names, suggestions.
    """
    t = _trace_codings(study)
    refs = {pk: ref for pk, ref in t.episodes if ref and (ref.get("agent") or ref.get("step") is not None)}
    ref_ids = list(refs)
    return {
        "trace_episodes": len(t.ids),
        "agreement": _agreement_section(t, bootstrap=bootstrap, seed=seed, level=level),
        "reference": {
            "episodes": len(ref_ids),
            "note": "Accuracy against the published reference attribution (e.g. Who&When's mistake agent and "
            "step); n is the number of episodes where both the rater and the reference give a value.",
            "raters": _reference_rows(study, t, refs, level),
        },
    }


@dataclass(frozen=True)
class _TraceCodings:
    episodes: list[tuple[int, dict | None]]  # (episode id, reference) of every trace episode
    ids: list[int]
    codings: list[Coding]
    adjudications: dict[int, Adjudication]
    by_episode: dict[int, list[Coding]]
    coder_ids: list[int]
    names: dict[int, str]


def _trace_codings(study: Study) -> _TraceCodings:
    """The study's trace episodes with their codings, adjudications and coder names (four queries)."""
    episodes = list(
        Episode.objects.filter(study=study, document__kind=DocumentKind.TRACE).values_list("pk", "reference")
    )
    ids = [pk for pk, _ in episodes]
    codings = list(
        Coding.objects.filter(episode_id__in=ids)
        .only("episode_id", "coder_id", "decisive_step", "responsible_agent")
        .order_by("episode_id", "coder_id")
    )
    adjudications = {
        a.episode_id: a
        for a in Adjudication.objects.filter(episode_id__in=ids).only(
            "episode_id", "decisive_step", "responsible_agent"
        )
    }
    by_episode: dict[int, list[Coding]] = {}
    for c in codings:
        by_episode.setdefault(c.episode_id, []).append(c)
    coder_ids = sorted({c.coder_id for c in codings})
    names = dict(get_user_model().objects.filter(pk__in=coder_ids).values_list("pk", "username"))
    return _TraceCodings(episodes, ids, codings, adjudications, by_episode, coder_ids, names)


def _agreement_section(t: _TraceCodings, *, bootstrap: int, seed: int, level: float) -> dict:
    """Agreement among coders on the responsible agent (nominal) and on the decisive step (within tolerances)."""
    col = {c: i for i, c in enumerate(t.coder_ids)}
    U, R = len(t.ids), len(t.coder_ids)
    row = {pk: i for i, pk in enumerate(t.ids)}
    step_m = np.full((U, R), -1, dtype=np.int64)
    agent_s = [[""] * R for _ in range(U)]
    for c in t.codings:
        u, r = row[c.episode_id], col[c.coder_id]
        if c.decisive_step is not None:
            step_m[u, r] = c.decisive_step
        agent_s[u][r] = norm_agent(c.responsible_agent)
    vocab = sorted({a for rows in agent_s for a in rows if a})
    agent_m = np.array([[vocab.index(a) if a else -1 for a in rows] for rows in agent_s], dtype=np.int64).reshape(U, R)
    agent_res = stats.agreement(agent_m, max(len(vocab), 2), B=bootstrap, seed=seed, level=level)
    step_res = step_agreement(step_m, B=bootstrap, seed=seed, level=level)
    return {
        "agent": {
            "status": "ok" if agent_res.enough else "not_enough_data",
            "reason": agent_res.reason,
            "n_episodes": agent_res.n_units,
            "n_agents": len(vocab),
            "percent_agreement": _est(agent_res.percent),
            "fleiss_kappa": _est(agent_res.fleiss_kappa),
            "krippendorff_alpha": _est(agent_res.krippendorff_alpha),
            "pairs": [
                {
                    "a": t.names.get(t.coder_ids[p.coder_a], ""),
                    "b": t.names.get(t.coder_ids[p.coder_b], ""),
                    "n": p.n,
                    "percent_agreement": _est(p.percent),
                    "cohen_kappa": _est(p.kappa),
                }
                for p in agent_res.pairs
            ],
        },
        "step": {
            "status": "ok" if step_res.n_units >= 2 else "not_enough_data",
            "n_episodes": step_res.n_units,
            "n_pairs": step_res.n_pairs,
            **{("exact" if tol == 0 else f"within_{tol}"): _est(step_res.within[tol]) for tol in TOLERANCES},
        },
    }


def _reference_rows(study: Study, t: _TraceCodings, refs: dict[int, dict], level: float) -> list[dict]:
    """Accuracy against the reference of each coder, of the final labels, and of each suggester (one query)."""
    ref_ids = list(refs)
    ref_agent = [str(refs[e].get("agent") or "") for e in ref_ids]
    ref_step = [refs[e]["step"] if refs[e].get("step") is not None else -1 for e in ref_ids]
    rows = []
    for coder in t.coder_ids:
        mine = {c.episode_id: c for c in t.codings if c.coder_id == coder}
        a = [mine[e].responsible_agent if e in mine else "" for e in ref_ids]
        s = [mine[e].decisive_step if e in mine and mine[e].decisive_step is not None else -1 for e in ref_ids]
        rows.append(_accuracy_row(t.names.get(coder, str(coder)), "coder", a, ref_agent, s, ref_step, level))
    finals = [
        final_attribution(
            adjudication=t.adjudications.get(e), codings=t.by_episode.get(e, []), k=study.coders_per_episode,
            study=study,
        )
        for e in ref_ids
    ]  # fmt: skip
    rows.append(
        _accuracy_row(
            "final labels",
            "final",
            [f.agent for f in finals],
            ref_agent,
            [-1 if f.step is None else f.step for f in finals],
            ref_step,
            level,
        )
    )
    latest: dict[tuple[str, int], Suggestion] = {}
    for sug in (
        Suggestion.objects.filter(episode_id__in=ref_ids, error="")
        .only("episode_id", "backend", "model", "decisive_step", "responsible_agent", "created_at")
        .order_by("created_at", "pk")
    ):
        latest[(sug.backend, sug.episode_id)] = sug
    for backend in sorted({b for b, _ in latest}):
        got = {e: s for (b, e), s in latest.items() if b == backend}
        a = [got[e].responsible_agent if e in got else "" for e in ref_ids]
        s = [got[e].decisive_step if e in got and got[e].decisive_step is not None else -1 for e in ref_ids]
        rows.append(_accuracy_row(f"suggester: {backend}", "suggester", a, ref_agent, s, ref_step, level))
    return rows
