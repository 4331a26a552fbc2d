"""What the local suggester knows before a study has labels, beyond the codebook's words: a prior learnt on the
development split of the real-issue set (bench/real_issues/, fitted by bench/real_issues/fit_prior.py, never on
its test split) and the kind of repository an issue comes from.

`cold_prior.json` beside this module holds numbers only, no issue text:

- how often each type is the final code of a real agent-failure issue (smoothed, so every type stays possible),
  and the temperature that turns codebook similarities into probabilities beside it;
- a linear word model over the development issues' common words (terms of at least two issues; per type the
  weights that matter most), mixed with the codebook reading at a weight chosen by repository-grouped
  cross-validation on the development split;
- per type, how its source, stage and capability were coded (smoothed towards the codebook's typical values),
  and per kind of repository how source, stage and capability shift: a framework's own repository reports
  framework defects, a product built on a framework reports its prompts and loop (codebook rules R07/R08);
- the kinds of the development split's repositories;
- a temperature on the resulting type probabilities, so that the top type's confidence is calibrated on
  repositories the prior was not fitted on.

The kind of a repository comes from that table, else from well-known agent frameworks and products by name
(below, and the names the codebook's source definitions and decision rules give), else it is unknown and the
kind factors are neutral. The prior applies to a codebook that has every type code it was fitted on (v1 and
its extensions); any other codebook gets the codebook prior alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.preprocessing import normalize

from annotate.suggestions.base import AXES, CodebookSpec

PATH = Path(__file__).with_name("cold_prior.json")
KINDS = ("framework", "coding_agent", "agent_product", "tooling")
# Well-known agent frameworks and agent products, by repository name (lower case, punctuation dropped). A
# library users assemble agents on is a framework (R08); a turnkey agent users run is a coding agent or an
# agent product (R07). Public knowledge, written before looking at any test-split issue.
KNOWN_NAMES: dict[str, str] = {
    **dict.fromkeys(
        ("langchain", "langchainjs", "langgraph", "langgraphjs", "llamaindex", "llamaindexts", "crewai", "autogen",
         "ag2", "dify", "langflow", "flowise", "semantickernel", "haystack", "smolagents", "dspy", "pydanticai",
         "openaiagentspython", "openaiagentsjs", "agno", "phidata", "camel", "metagpt", "letta", "memgpt", "swarm",
         "mastra", "adkpython", "adkjs", "adkjava", "strands", "sdkpython", "beeaiframework", "agentscope",
         "qwenagent", "txtai", "n8n", "mcpagent", "taskweaver", "agentframework", "griptape", "marvin",
         "controlflow", "superagent", "botpress", "praisonai", "agentverse", "browseruse", "llamastack",
         "semantickerneldotnet", "langchaingo", "langchain4j", "springai", "fastmcp", "guidance", "julep"),
        "framework",
    ),
    **dict.fromkeys(
        ("claudecode", "cline", "roocode", "aider", "openhands", "opendevin", "geminicli", "codex", "continue",
         "cursor", "kilocode", "opencode", "goose", "plandex", "sweagent", "devika", "gptengineer",
         "openinterpreter", "qwencode", "amazonqdevelopercli", "windsurf", "void", "zed", "warp", "tabby",
         "autocoderover", "devon", "mentat", "sweep", "gptpilot", "boltnew", "boltdiy", "crush", "traeagent",
         "kimicli", "codebuff", "avantenvim", "codecompanionnvim", "copilot", "vscodecopilotrelease", "aide",
         "refact", "codestory", "gptme", "pythagora"),
        "coding_agent",
    ),
    **dict.fromkeys(
        ("autogpt", "gptresearcher", "chatdev", "librechat", "openwebui", "lobechat", "ragflow", "deerflow",
         "openmanus", "agenticseek", "khoj", "superagi", "agentgpt", "babyagi", "agentzero", "anythingllm", "jan",
         "cherrystudio", "nextchat", "chatgptnextweb", "skyvern", "suna", "perplexica", "storm", "openclaw",
         "agixt", "opencanvas", "mem0"),
        "agent_product",
    ),
}  # fmt: skip
# Words in a repository name that say it is a harness, benchmark, SDK or server an agent calls.
TOOLING_WORDS = ("bench", "benchmark", "eval", "evals", "harness", "mcp", "sdk", "client", "proxy", "server")
_NORM = re.compile(r"[^a-z0-9]+")


def _norm(name: str) -> str:
    return _NORM.sub("", name.lower())


@dataclass(frozen=True, eq=False)
class ColdPrior:
    """The fitted prior (cold_prior.json), as arrays over one codebook's type and axis codes."""

    type_codes: tuple[str, ...]
    temperature: float
    log_prior: np.ndarray  # n_types
    word_weight: float
    calibration: float  # a temperature on the mixed probabilities (ranks unchanged), chosen for calibration
    vectorizer: CountVectorizer | None
    idf: np.ndarray
    coef: np.ndarray  # n_types x n_terms (0 for types the word model never saw)
    intercept: np.ndarray  # n_types (-inf-like for unseen types)
    word_seen: np.ndarray  # bool per type: the word model has a class for it
    axis_given_type: dict[str, np.ndarray]  # axis -> n_types x n_values
    kind_factor: dict[str, dict[str, np.ndarray]]  # axis -> kind -> n_values multiplicative factor
    repositories: dict[str, str]  # lower-case owner/name -> kind
    owners: dict[str, str]


def repo_kind(cluster: str, prior: ColdPrior | None = None, spec: CodebookSpec | None = None) -> str:
    """framework, coding_agent, agent_product, tooling, or "" when the repository is not known."""
    name = (cluster or "").strip().lower()
    if not name:
        return ""
    if prior is not None and name in prior.repositories:
        return prior.repositories[name]
    repo = name.split("/")[-1]
    n = _norm(repo)
    if n in KNOWN_NAMES:
        return KNOWN_NAMES[n]
    for names, kind in _codebook_names(spec):
        if n in names:
            return kind
    words = set(_NORM.split(repo))
    if words & set(TOOLING_WORDS):
        return "tooling"
    for known, kind in sorted(KNOWN_NAMES.items(), key=lambda kv: -len(kv[0])):
        if len(known) >= 5 and known in n:  # "langchain-community", "crewai-tools"
            return kind
    if prior is not None and "/" in name and name.split("/")[0] in prior.owners:
        return prior.owners[name.split("/")[0]]
    return ""


@lru_cache(maxsize=8)
def _codebook_names_cached(rules: tuple[str, ...], framework_definition: str) -> tuple[tuple[frozenset, str], ...]:
    out = []
    product = re.compile(r"turnkey agent product[^(]*\(such as ([^)]*)\)", re.I)
    library = re.compile(r"(?:library|platform)[^(]*\(such as ([^)]*)\)", re.I)
    for rule in rules:
        for pattern, kind in ((product, "coding_agent"), (library, "framework")):
            for m in pattern.finditer(rule):
                out.append((frozenset(_norm(x) for x in re.split(r",|\bor\b|\band\b", m.group(1)) if _norm(x)), kind))
    m = re.search(r"\(e\.g\. ([^)]*)\)", framework_definition)
    if m:
        out.append((frozenset(_norm(x) for x in m.group(1).split(",") if _norm(x)), "framework"))
    return tuple(out)


def _codebook_names(spec: CodebookSpec | None) -> tuple[tuple[frozenset, str], ...]:
    """Names the codebook gives of agent products (R07-like rules) and frameworks (R08, the source definition)."""
    if spec is None:
        return ()
    framework = next((v.definition for v in spec.axes.get("source", ()) if v.code == "framework"), "")
    return _codebook_names_cached(tuple(r.rule for r in spec.rules), framework)


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> dict | None:
    p = Path(path)
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None


def prior_data(path: Path = PATH) -> dict | None:
    """The fitted prior's JSON (None when none was fitted)."""
    return _load(str(path), path.stat().st_mtime if path.is_file() else 0.0)


_PRIORS: dict[tuple[str, str], ColdPrior | None] = {}


def cold_prior(spec: CodebookSpec, data: dict | None = None) -> ColdPrior | None:
    """The fitted prior over this codebook's codes, or None when it was fitted on codes the codebook lacks."""
    data = prior_data() if data is None else data
    if not data:
        return None
    key = (spec.fingerprint, str(data.get("fitted_at", "")) + str(id(data)))
    if key not in _PRIORS:
        if len(_PRIORS) > 16:
            _PRIORS.clear()
        _PRIORS[key] = _build(spec, data)
    return _PRIORS[key]


def _build(spec: CodebookSpec, data: dict) -> ColdPrior | None:
    codes = spec.type_codes
    if not set(data["type_codes"]) <= set(codes):
        return None
    t_index = {c: j for j, c in enumerate(codes)}
    floor = float(data["unseen_log_prior"])
    log_prior = np.full(len(codes), floor)
    for c, v in data["log_prior"].items():
        log_prior[t_index[c]] = v
    words = data.get("words") or {}
    vocab = words.get("vocabulary") or []
    vectorizer = None
    coef = np.zeros((len(codes), len(vocab)))
    intercept = np.full(len(codes), -1e9)
    seen = np.zeros(len(codes), dtype=bool)
    if vocab:
        vectorizer = CountVectorizer(lowercase=True, stop_words="english", ngram_range=(1, 2), vocabulary=vocab)
        for c, row in words["coef"].items():
            j = t_index[c]
            seen[j] = True
            intercept[j] = words["intercept"][c]
            for k, w in row.items():
                coef[j, int(k)] = w
    axis_given_type = {}
    kind_factor: dict[str, dict[str, np.ndarray]] = {}
    for axis in AXES:
        values = spec.axis_codes(axis)
        table = np.full((len(codes), len(values)), 1.0 / len(values))
        for c, dist in data["axis_given_type"][axis].items():
            row = np.array([dist.get(v, 0.0) for v in values]) + 1e-4
            table[t_index[c]] = row / row.sum()
        axis_given_type[axis] = table
        kind_factor[axis] = {k: np.array([f.get(v, 1.0) for v in values]) for k, f in data["kind_factor"][axis].items()}
    return ColdPrior(
        type_codes=tuple(data["type_codes"]),
        temperature=float(data["temperature"]),
        log_prior=log_prior,
        word_weight=float(words.get("weight", 0.0)) if vocab else 0.0,
        calibration=float(data.get("calibration", 1.0)),
        vectorizer=vectorizer,
        idf=np.array(words.get("idf") or [], dtype=float),
        coef=coef,
        intercept=intercept,
        word_seen=seen,
        axis_given_type=axis_given_type,
        kind_factor=kind_factor,
        repositories={k.lower(): v for k, v in data.get("repositories", {}).items()},
        owners={k.lower(): v for k, v in data.get("owners", {}).items()},
    )


def word_features(prior: ColdPrior, texts: list[str]) -> sp.csr_matrix:
    """Sublinear TF-IDF over the prior's vocabulary, L2-normalised (as bench/real_issues/fit_prior.py fits it)."""
    counts = prior.vectorizer.transform(texts).astype(np.float64).tocsr()
    counts.data = 1.0 + np.log(counts.data)
    return normalize(counts.multiply(prior.idf[None, :]).tocsr())


def word_probabilities(prior: ColdPrior, texts: list[str]) -> np.ndarray:
    """P(type | words) of the word model, over all the codebook's types (0 for types it never saw)."""
    z = word_features(prior, texts) @ prior.coef.T + prior.intercept[None, :]
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z) * prior.word_seen[None, :]
    return e / np.maximum(e.sum(axis=1, keepdims=True), 1e-300)


def type_probabilities(
    prior: ColdPrior, similarities: np.ndarray, texts: list[str], words: np.ndarray | None = None
) -> np.ndarray:
    """P(type | text) rows summing to 1: the codebook similarities under the learnt type frequencies, mixed with the
    word model where `words` (a bool per text, default all) is true, else with the type frequencies."""
    z = similarities / prior.temperature + prior.log_prior[None, :]
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    if prior.word_weight > 0 and prior.vectorizer is not None and texts:
        pw = word_probabilities(prior, texts)
        if words is not None and not words.all():
            base = np.exp(prior.log_prior)
            pw[~words] = base / base.sum()  # the words are not read: the type frequencies stand in for them
        p = (1 - prior.word_weight) * p + prior.word_weight * pw
    if prior.calibration != 1.0:
        p = np.power(p, 1.0 / prior.calibration)
        p /= np.maximum(p.sum(axis=1, keepdims=True), 1e-300)
    return p


def kind_factors(prior: ColdPrior | None, axis: str, kinds: list[str], n_values: int) -> np.ndarray:
    """Per text, how its repository's kind reweighs the axis values (ones where the kind is unknown)."""
    out = np.ones((len(kinds), n_values))
    if prior is None:
        return out
    table = prior.kind_factor.get(axis, {})
    for i, k in enumerate(kinds):
        if k in table:
            out[i] = table[k]
    return out
