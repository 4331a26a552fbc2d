"""The local suggester: scikit-learn only, and the default when no LLM key is set.

Reading: issue-template boilerplate is stripped first (annotate.suggestions._text:
headings, checkboxes, environment blocks, bot lines; code blocks and tracebacks
kept), and the title and the body are scored apart as well as together.

Cold start: the codebook itself (each type's name, definition, indicators and
example) is the training data. Two TF-IDF spaces rank the types for a text: words
(unigrams and bigrams) and character n-grams within words, which carry over to
reports in other Latin-script languages ("límite de tasa", "timeout", "429").
Cosine similarities become probabilities with a fixed temperature beside a
"matches nothing" alternative, so weak matches stay unconfident. A text in a
script the model does not read (annotate.suggestions._text.language_covered) is
declined, never forced into the first codebook types.

Once a study has FAULTLINE_LOCAL_MIN_LABELS final labels (annotate.coding.labels),
`model_train` fits one logistic-loss linear classifier (SGD) per axis on them,
cross-fitted over folds. Besides the words and character n-grams of title and
body, its features are the episode's cluster (repository, service) and document
kind, the codebook prior itself, and the codebook's decision rules: how close the
text is to each rule, and whether the rule names the cluster (a framework or a
product built on one). Probabilities are calibrated by temperature scaling on the
out-of-fold predictions and blended with the codebook prior with a weight also
chosen on them. A labelled episode is scored with its own out-of-fold
probabilities, so quality measured against the labels is never in-sample.

Evidence is a claim: a sentence of the report or a log line, never a heading,
template label, version line or a piece of a word. Rationales name the codebook
indicator that matched and quote the sentence where it did.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from annotate.suggestions._text import (
    claim_spans,
)
from annotate.suggestions.base import (
    AXES,
    MAX_CANDIDATES,
    Answer,
    Candidate,
    CodebookSpec,
    reading,
    text_hash,
)
from annotate.suggestions.codebook_index import (
    _TOKEN,
    MAX_TEXT_CHARS,
    NAF,
    Readings,
    _type_document,
    candidate_axis_prior,
    codebook_index,
    prior_type_probabilities,
    readings,
)
from annotate.suggestions.local_model import (
    AxisModel,
    TrainedModel,
    TrainingExample,
    _axis_features,
    _features,
    _marginal_axis_prior,
    _proba_in,
    _temper,
    model_train,
)

LOCAL_VERSION = "local-8"  # bump when scoring changes, so cached suggestions are not mistaken for new ones
COLD_MODEL = "codebook-tfidf"
DECLINED_LANGUAGE = "the text is in a language the local model does not read"
READ_THROUGH_LEXICON = "not in English: read through a word list, so the confidence is kept under the floor"
MAX_EVIDENCE_CHARS = 300
# Words that match across unrelated reports ("exceeded", "error", "agent") name no indicator alone.
MIN_INDICATOR_WORDS = 2
# A log line's support counts half a sentence's: quotes are the reporter's words when they say it.
LOG_QUOTE_WEIGHT = 0.5
_LABEL_ONLY = re.compile(r"^\s*[\w .()-]{1,40}:\s*$")
# A claim that opens with what is left of a form label ("To Reproduce**", "Sandbox:** none", "log:" on its own
# line) or a heading marker is the template speaking, whatever follows it.
_LABEL_RESIDUE = re.compile(r"^\s*(?:#{1,6}\s|[\w ()/.-]{1,40}(?::\s*\*\*|\*\*\s*:?|:\s*\n))")


# --- scoring ------------------------------------------------------------------------------------


class LocalSuggester:
    """Scores texts against a codebook, with a study's trained model when it has one."""

    backend = "local"
    reads_context = True  # takes clusters= and kinds= (a test double subclassing it may not)

    def __init__(self, spec: CodebookSpec, trained: TrainedModel | None = None):
        if trained is not None and (trained.fingerprint != spec.fingerprint or not hasattr(trained, "char_vectorizer")):
            trained = None  # another codebook version, or an older model format: the codebook prior alone
        self.spec = spec
        self.index = codebook_index(spec)
        self.trained = trained

    @property
    def model(self) -> str:
        if self.trained is None:
            return COLD_MODEL
        return f"linear-{self.trained.model_id}" if self.trained.model_id else "linear"

    @property
    def prompt_version(self) -> str:
        return hashlib.sha256(f"{LOCAL_VERSION}:{self.spec.fingerprint}".encode()).hexdigest()

    # Probabilities for every type (and not-a-failure) and every axis value, per text.
    def _distributions(self, r: Readings, texts, titles, episode_ids, clusters, kinds):
        spec, index = self.spec, self.index
        p_type = prior_type_probabilities(index, r)
        p_naf = np.zeros(len(texts))
        p_axes = {a: (0.0, _marginal_axis_prior(index, p_type, a, clusters)) for a in AXES}
        neighbours: list[list[int]] = [[] for _ in texts]
        if self.trained is None:
            return p_type, p_naf, p_axes, neighbours
        tm = self.trained
        X = _features((tm.vectorizer, tm.char_vectorizer, tm.title_vectorizer), index, r, clusters, kinds)
        hashes = [text_hash(reading(ti, t)) for ti, t in zip(titles, texts, strict=True)]
        # Labelled episodes whose text is unchanged use their out-of-fold probabilities.
        held = {}
        for i, eid in enumerate(episode_ids):
            stored = tm.oof.get(eid) if eid is not None else None
            if stored is not None and stored[0] == hashes[i]:
                held[i] = stored[1]

        prior_type = p_type

        def axis_proba(axis: str, am: AxisModel) -> np.ndarray:
            if not am.models:
                return np.ones((len(texts), len(am.classes))) / len(am.classes)
            F = X if axis == "failure_type" else _axis_features(index, r, prior_type, axis, clusters, kinds)
            mean = sum(_proba_in(m, F, am.classes, 1.0) for m in am.models) / len(am.models)
            out = _temper(mean, am.temperature)
            for i, probs in held.items():
                if axis in probs:
                    out[i] = probs[axis]
            return out

        tmodel = tm.axes.get("failure_type")
        if tmodel is not None:
            clf = axis_proba("failure_type", tmodel)
            codes = spec.type_codes
            full = np.zeros((len(texts), len(codes)))
            for j, c in enumerate(tmodel.classes):
                if c == NAF:
                    p_naf = tmodel.weight * clf[:, j]
                elif c in codes:
                    full[:, codes.index(c)] = clf[:, j]
            # Not renormalised: the prior's "matches nothing" mass stays uncommitted.
            p_type = tmodel.weight * full + (1 - tmodel.weight) * p_type
            bt = getattr(tmodel, "blend_temperature", 1.0)
            if bt != 1.0:
                # Calibrated as trained (annotate.suggestions.local_model._train_axis), within the committed mass.
                both = np.hstack([p_type, p_naf[:, None]])
                mass = both.sum(axis=1, keepdims=True)
                both = _temper(both, bt) * mass
                p_type, p_naf = both[:, :-1], both[:, -1]
        for axis in AXES:
            am = tm.axes.get(axis)
            if am is not None:
                axis_codes = spec.axis_codes(axis)
                full = np.zeros((len(texts), len(axis_codes)))
                clf = axis_proba(axis, am)
                for j, c in enumerate(am.classes):
                    if c in axis_codes:
                        full[:, axis_codes.index(c)] = clf[:, j]
                p_axes[axis] = (am.weight, full)
        # Nearest labelled episodes (never the episode itself), for the rationale.
        sims = (r.X @ tm.train_vectors.T).toarray()
        for i, eid in enumerate(episode_ids):
            if eid is not None:
                sims[i, tm.train_ids == eid] = -1
        k = min(5, sims.shape[1])
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        for i in range(len(texts)):
            best = sorted(top[i], key=lambda j, row=sims[i]: -row[j])
            neighbours[i] = [int(j) for j in best if sims[i, j] > 0.2]
        return p_type, p_naf, p_axes, neighbours

    def suggest_texts(
        self,
        texts: list[str],
        episode_ids: list[int | None] | None = None,
        titles: list[str] | None = None,
        *,
        clusters: list[str] | None = None,
        kinds: list[str] | None = None,
    ) -> list[Answer]:
        """Top-3 answers for many texts at once (vectorised; no database).

        Titles are read for context; evidence is always a claim of the text itself.
        """
        if not texts:
            return []
        n = len(texts)
        episode_ids = episode_ids or [None] * n
        titles = titles or [""] * n
        clusters = clusters or [""] * n
        kinds = kinds or [""] * n
        r = readings(self.index, texts, titles)
        p_type, p_naf, p_axes, neighbours = self._distributions(r, texts, titles, episode_ids, clusters, kinds)
        top = np.argsort(-p_type, axis=1, kind="stable")[:, :MAX_CANDIDATES]
        scale = _language_scale(p_type, top, r.caps)
        picks = {axis: self._axis_picks(axis, top, p_type, p_axes, r.X, clusters, episode_ids) for axis in AXES}
        answers = []
        for i in range(n):
            if not r.covered[i]:
                answers.append(Answer(abstain_reason=DECLINED_LANGUAGE, notes=(DECLINED_LANGUAGE,)))
                continue
            claims = _claims(texts[i])
            cands = []
            for rank, j in enumerate(top[i]):
                evidence, why = self._evidence(texts[i], claims, j)
                cands.append(
                    Candidate(
                        failure_type=self.spec.types[j].code,
                        source=picks["source"][i][rank],
                        stage=picks["stage"][i][rank],
                        capability=picks["capability"][i][rank],
                        confidence=round(float(p_type[i, j] * scale[i]), 4),
                        rationale=self._rationale(i, j, r.X, why, neighbours[i], texts[i], titles[i]),
                        evidence=evidence,
                    )
                )
            naf = bool(p_naf[i] > p_type[i, top[i][0]])
            capped = r.caps is not None and bool(r.caps[i] < 1)
            notes = (READ_THROUGH_LEXICON,) if capped else ()
            answers.append(Answer(not_a_failure=naf, candidates=tuple(cands), notes=notes, language_capped=capped))
        return answers

    def _axis_picks(self, axis: str, top: np.ndarray, p_type, p_axes, X, clusters, episode_ids) -> list[list[str]]:
        """The axis value for each candidate: the type's values and the text's, reweighed by the repository's
        kind (annotate.suggestions.codebook_index.candidate_axis_prior), then the classifier once trained."""
        codes = self.spec.axis_codes(axis)
        prior = candidate_axis_prior(self.index, axis, p_type, top, clusters)  # n x k x values
        # Among equally typical values, the one whose definition reads closest to the text.
        closeness = (X @ self.index.axes[axis].T).toarray()[:, None, :]
        score = prior + 0.01 * closeness
        weight, full = p_axes[axis]
        if weight:
            score = weight * full[:, None, :] + (1 - weight) * score
        shares = _repository_shares(self.trained, axis, codes, clusters, episode_ids)
        if shares is not None:  # the repository's own labels, for every candidate alike
            score = score + REPOSITORY_WEIGHTS[axis] * shares[:, None, :]
        best = np.argmax(score, axis=2)
        return [[codes[v] for v in row] for row in best]

    def _evidence(self, text: str, claims: list[tuple[str, frozenset[str], bool]], j: int) -> tuple[str, list]:
        """The claim that best supports type j, and the indicators it matches ((indicator, words) pairs).

        The reporter's own sentences come before log lines: a log line is quoted only when it
        supports the type clearly better than every sentence.
        """
        best, best_score, best_why = "", 0.0, []
        type_words = set(_TOKEN.findall(_type_document(self.spec.types[j]).lower())) - self.index.stop
        for claim, words, log in claims:
            why = [
                (ind, sorted(toks & words))
                for ind, toks in self.index.indicator_tokens[j]
                if len(toks & words) >= min(MIN_INDICATOR_WORDS, len(toks))
            ]
            score = (2.0 * len(why) + len(words & type_words) / (3 + len(words))) * (LOG_QUOTE_WEIGHT if log else 1.0)
            if score > best_score:
                best, best_score, best_why = claim, score, why
        return best, best_why

    def _rationale(self, i: int, j: int, X, why: list, neighbour_rows: list[int], text: str, title: str) -> str:
        t = self.spec.types[j]
        parts = []
        if why:
            named = "; ".join(f"“{ind}” ({', '.join(words)})" for ind, words in why[:2])
            parts.append(
                f"Matched indicator{'s' if len(why) > 1 else ''} of {t.code}: {named}, in the quoted sentence."
            )
        else:
            # Only terms the coder can find: glossary readings of other languages are not in the text.
            words = set(_TOKEN.findall(f"{title}\n{text}".lower()))
            terms = [t for t in self._shared_terms(i, j, X) if set(t.split()) <= words]
            if terms:
                parts.append(
                    f"No indicator of {t.code} matched; ranked by closeness to its definition "
                    f"(shared terms: {', '.join(terms)})."
                )
            else:
                parts.append(f"No indicator or defining term of {t.code} in the text; low confidence.")
        if self.trained is not None and neighbour_rows:
            same = [int(self.trained.train_ids[k]) for k in neighbour_rows if self.trained.train_types[k] == t.code][:3]
            if same:
                parts.append("Similar labelled episodes: " + ", ".join(f"#{e}" for e in same) + ".")
        return " ".join(parts)

    def _shared_terms(self, i: int, j: int, X) -> list[str]:
        """Codebook terms of type j in the text: phrases, or words of 5+ letters; never bare numbers."""
        lo, hi = X.indptr[i], X.indptr[i + 1]
        cols = X.indices[lo:hi]
        shared = X.data[lo:hi] * self.index.types_dense[j, cols]
        out = []
        for k in np.argsort(-shared):
            if shared[k] <= 0 or len(out) >= 4:
                break
            term = str(self.index.terms[cols[k]])
            if any(ch.isdigit() for ch in term) or (" " not in term and len(term) < 5):
                continue
            out.append(term)
        return out


# How much the study's labelled episodes of the same repository weigh in the axis pick, against the text's own
# score. Chosen on the real-issue development split (bench/real_issues, 5-fold; 0, 0.3, 1 and 3 tried): the
# repository says most about the source (56.9% -> 60.3% at 1), little about stage and capability (flat at 0.3,
# worse at 1), and weighed higher it crowds out the candidates' own values.
REPOSITORY_WEIGHTS = {"source": 1.0, "stage": 0.3, "capability": 0.3}


def _repository_shares(tm, axis: str, codes: list[str], clusters, episode_ids) -> np.ndarray | None:
    """Per text, how its repository's labelled episodes were coded on this axis (shares; zeros where it has none).
    A labelled episode's own label is left out of its repository's count: it must not vote for itself."""
    table = ((getattr(tm, "cluster_axes", None) or {}).get(axis) or {}) if tm is not None else {}
    if not table or REPOSITORY_WEIGHTS.get(axis, 0) <= 0:
        return None
    own = dict(zip(tm.train_ids.tolist(), getattr(tm, "train_axes", {}).get(axis, ()), strict=False))
    out = np.zeros((len(clusters), len(codes)))
    for i, cluster in enumerate(clusters):
        counts = dict(table.get(cluster) or {}) if cluster else {}
        mine = own.get(episode_ids[i]) if episode_ids[i] is not None else None
        if mine in counts:
            counts[mine] -= 1
        n = sum(counts.values())
        if n > 0:
            out[i] = [counts.get(code, 0) / n for code in codes]
    return out


def _language_scale(p_type: np.ndarray, top: np.ndarray, caps: np.ndarray | None) -> np.ndarray:
    """Per text, the factor that brings its top-1 confidence down to its language cap (ranking unchanged)."""
    if caps is None:
        return np.ones(len(p_type))
    top1 = p_type[np.arange(len(p_type)), top[:, 0]]
    return np.minimum(1.0, caps / np.maximum(top1, 1e-12))


def _claims(text: str) -> list[tuple[str, frozenset[str], bool]]:
    """The text's claims (annotate.suggestions._text), their lower-cased word sets, and whether each is a log line."""
    out = []
    for span in claim_spans(text[:MAX_TEXT_CHARS])[:400]:
        claim = text[span.start : span.end][:MAX_EVIDENCE_CHARS]
        if span.end - span.start > MAX_EVIDENCE_CHARS:
            continue  # a cut claim could end inside a word
        if _LABEL_ONLY.match(claim) or _LABEL_RESIDUE.match(claim):
            continue  # "except Exception:", "Output:": a line that only introduces what follows claims nothing
        out.append((claim, frozenset(_TOKEN.findall(claim.lower())), span.code))
    return out


# --- measurement adapters (annotate.suggestions._eval items in, answers out) ---------------------------


def local_predict(spec: CodebookSpec, items) -> list[Answer]:
    """Cold-start answers for labelled items (the codebook alone)."""
    return LocalSuggester(spec).suggest_texts(
        [i.text for i in items],
        None,
        [i.title for i in items],
        clusters=[i.cluster for i in items],
        kinds=[i.kind for i in items],
    )


def local_fit_predict(spec: CodebookSpec, train, test) -> list[Answer]:
    """Answers for `test` from a model trained on `train` only."""
    examples = [
        TrainingExample(
            episode_id=-1 - n,
            text=i.text,
            failure_type=None if i.failure_type == NAF else i.failure_type,
            not_a_failure=i.failure_type == NAF,
            source=i.source,
            stage=i.stage,
            capability=i.capability,
            title=i.title,
            cluster=i.cluster,
            kind=i.kind,
        )
        for n, i in enumerate(train)
    ]
    model = model_train(spec, examples)
    return LocalSuggester(spec, model).suggest_texts(
        [i.text for i in test],
        None,
        [i.title for i in test],
        clusters=[i.cluster for i in test],
        kinds=[i.kind for i in test],
    )
