"""The local suggester: scikit-learn only, and the default when no LLM key is set.

Cold start: a TF-IDF space fitted on the codebook itself (each type's name,
definition, indicators and example) ranks the types for an episode by cosine
similarity, turned into probabilities with a fixed temperature.

Once a study has FAULTLINE_LOCAL_MIN_LABELS final labels (annotate.labels),
`model_train` fits one logistic-loss linear classifier (SGD) per axis on them,
cross-fitted over folds. Probabilities are calibrated by temperature scaling on
the out-of-fold predictions and blended with the codebook prior, with a weight
also chosen on them (it is 0 when the labels do not beat the prior yet). A
labelled episode is scored with its own out-of-fold probabilities, so quality
measured against the labels is never in-sample.
"""

from __future__ import annotations

import datetime
import hashlib
import io
import re
from dataclasses import dataclass, field

import joblib
import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import SGDClassifier
from sklearn.preprocessing import normalize

from .evidence import quote_whole_words
from .suggest_base import AXES, MAX_CANDIDATES, Answer, Candidate, CodebookSpec, codebook_spec, reading, text_hash

LOCAL_VERSION = "local-3"  # bump when scoring changes, so cached suggestions are not mistaken for new ones
COLD_MODEL = "codebook-tfidf"
NAF = "__not_a_failure__"
# Cold-start calibration, chosen on the shipped samples (fixtures/samples, gold labels):
# cosine similarities to the codebook are small numbers, sharpened by a temperature;
# a virtual "matches nothing" alternative at a fixed similarity keeps weak matches
# unconfident; and texts with few codebook terms are shrunk towards it, so one
# shared word ("Thanks, closing this.") is not a confident match.
PRIOR_TEMPERATURE = 0.015
NO_MATCH_SIMILARITY = 0.06
SHRINK_TERMS = 4
MAX_TEXT_CHARS = 20_000
MAX_SENTENCES = 200
MAX_EVIDENCE_CHARS = 300
N_FOLDS = 3
SEED = 20240611

# A sentence ends at . ! or ? followed by a space or the end, not inside "CHANGELOG.md" or "v1.2".
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?]+(?=[^\s.!?]))+[.!?]*")
_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def _type_document(t) -> str:
    return " ".join([t.name, t.definition, *t.indicators, t.example])


@dataclass(frozen=True, eq=False)
class CodebookIndex:
    """The codebook's TF-IDF space: one fitted vectorizer, the type and axis-value vectors."""

    spec: CodebookSpec
    vectorizer: TfidfVectorizer
    types: sp.csr_matrix  # n_types x d, rows L2-normalised
    axes: dict[str, sp.csr_matrix]
    terms: np.ndarray
    indicator_tokens: tuple[tuple[tuple[str, frozenset[str]], ...], ...]
    types_dense: np.ndarray  # the type vectors as a dense array, for per-term rationale lookups
    axis_priors: dict[str, np.ndarray]  # axis -> n_types x n_values prior (see _axis_prior)


_INDEXES: dict[str, CodebookIndex] = {}


def _index_for(spec: CodebookSpec) -> CodebookIndex:
    if spec.fingerprint in _INDEXES:
        return _INDEXES[spec.fingerprint]
    vectorizer = TfidfVectorizer(
        lowercase=True, stop_words="english", ngram_range=(1, 2), sublinear_tf=True, min_df=1, dtype=np.float64
    )
    docs = [_type_document(t) for t in spec.types]
    axis_docs = {a: [f"{v.name} {v.definition}" for v in spec.axes[a]] for a in AXES}
    vectorizer.fit(docs + [d for a in AXES for d in axis_docs[a]])
    stop = vectorizer.get_stop_words() or frozenset()
    indicator_tokens = tuple(
        tuple((ind, frozenset(w for w in _TOKEN.findall(ind.lower()) if w not in stop)) for ind in t.indicators)
        for t in spec.types
    )
    types = normalize(vectorizer.transform(docs)).tocsr()
    index = CodebookIndex(
        spec=spec,
        vectorizer=vectorizer,
        types=types,
        axes={a: normalize(vectorizer.transform(axis_docs[a])).tocsr() for a in AXES},
        terms=vectorizer.get_feature_names_out(),
        indicator_tokens=indicator_tokens,
        types_dense=types.toarray(),
        axis_priors={a: np.vstack([_axis_prior(spec, t.code, a) for t in spec.types]) for a in AXES},
    )
    if len(_INDEXES) > 16:
        _INDEXES.clear()
    _INDEXES[spec.fingerprint] = index
    return index


def codebook_index(codebook) -> CodebookIndex:
    """The TF-IDF space of a codebook (a Codebook or a CodebookSpec), fitted once per process."""
    spec = codebook if isinstance(codebook, CodebookSpec) else codebook_spec(codebook)
    return _index_for(spec)


def _clip(texts: list[str]) -> list[str]:
    return [t[:MAX_TEXT_CHARS] for t in texts]


def text_vectors(codebook, texts: list[str]) -> sp.csr_matrix:
    """L2-normalised TF-IDF vectors of `texts` in the codebook's space (the space the local suggester ranks in).

    Rows of texts with no codebook vocabulary are all zero. Cosine similarity of
    two texts is the dot product of their rows.
    """
    index = codebook_index(codebook)
    return normalize(index.vectorizer.transform(_clip(texts))).tocsr()


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def prior_type_probabilities(index: CodebookIndex, X: sp.csr_matrix) -> np.ndarray:
    """P(type | text) from cosine similarity to the codebook (n_texts x n_types).

    Rows sum to less than 1: the rest is the "matches nothing in the codebook" mass.
    """
    sims = np.asarray((X @ index.types.T).todense())
    n_terms = np.diff(X.indptr).astype(float)
    sims *= (n_terms / (n_terms + SHRINK_TERMS))[:, None]
    z = np.hstack([sims, np.full((sims.shape[0], 1), NO_MATCH_SIMILARITY)]) / PRIOR_TEMPERATURE
    return _softmax_rows(z)[:, :-1]


def _axis_prior(spec: CodebookSpec, type_code: str | None, axis: str) -> np.ndarray:
    """The type's typical values get most of the mass; the rest is spread evenly so nothing is impossible."""
    codes = spec.axis_codes(axis)
    p = np.full(len(codes), 0.2 / len(codes))
    t = spec.type_by_code(type_code) if type_code else None
    typical = ()
    if t is not None:
        typical = {"source": (t.typical_source,), "stage": t.typical_stages, "capability": t.typical_capabilities}[axis]
    hits = [codes.index(c) for c in typical if c in codes]
    if hits:
        p[hits] += 0.8 / len(hits)
    else:
        p += 0.8 / len(codes)
    return p


# --- the trained model -------------------------------------------------------------------------


@dataclass
class AxisModel:
    classes: list[str]
    # One model per fold (cross-fitting): a new text gets their averaged probabilities,
    # and no extra full-data fit is needed. Empty when the labels hold a single class.
    models: list[SGDClassifier]
    temperature: float
    weight: float  # weight of the classifier against the codebook prior


@dataclass
class TrainedModel:
    fingerprint: str
    n_train: int
    vectorizer: TfidfVectorizer
    axes: dict[str, AxisModel]
    # Out-of-fold calibrated probabilities of each training episode, keyed by
    # episode id with the hash of the text they were computed on: a labelled
    # episode is scored as if its own label had never been seen.
    oof: dict[int, tuple[str, dict[str, np.ndarray]]]
    train_ids: np.ndarray
    train_types: list[str]
    train_vectors: sp.csr_matrix = field(repr=False)  # codebook-space vectors, for nearest labelled episodes
    model_id: int | None = None
    trained_at: datetime.datetime | None = None


def _features(vectorizer: TfidfVectorizer, texts: list[str], cb: sp.csr_matrix) -> sp.csr_matrix:
    """The codebook's TF-IDF space (`cb`, from text_vectors) beside a vocabulary learnt from the study's texts."""
    own = normalize(vectorizer.transform(_clip(texts)))
    return (sp.hstack([cb, own], format="csr") * (1 / np.sqrt(2))).astype(np.float64).tocsr()


def _fit(X, y) -> SGDClassifier:
    # Logistic loss gives probabilities; SGD keeps 65-class training on thousands of
    # episodes within seconds. Temperature scaling below does the calibration.
    model = SGDClassifier(loss="log_loss", alpha=1e-4, max_iter=4, tol=None, random_state=SEED, n_jobs=2).fit(X, y)
    # Single precision halves the stored model; scores differ in the 7th digit.
    model.coef_ = model.coef_.astype(np.float32)
    return model


def _proba_in(model: SGDClassifier, X, classes: list[str], temperature: float) -> np.ndarray:
    """Temperature-scaled probabilities on the full class list (classes a model never saw get 0)."""
    out = np.zeros((X.shape[0], len(classes)))
    cols = [classes.index(c) for c in model.classes_]
    out[:, cols] = model.predict_proba(X)
    return _temper(out, temperature)


def _temper(p: np.ndarray, temperature: float) -> np.ndarray:
    if temperature == 1.0:
        return p
    with np.errstate(divide="ignore"):
        q = np.power(p, 1.0 / temperature)
    return q / np.maximum(q.sum(axis=1, keepdims=True), 1e-300)


def _nll(p: np.ndarray, y_idx: np.ndarray) -> float:
    return float(-np.mean(np.log(np.maximum(p[np.arange(len(y_idx)), y_idx], 1e-12))))


def _train_axis(X, y: list[str], folds: np.ndarray, priors: np.ndarray) -> tuple[AxisModel, np.ndarray]:
    """One axis: the classifier, its temperature and blend weight, and out-of-fold probabilities."""
    classes = sorted(set(y))
    y_arr = np.array(y)
    if len(classes) == 1:
        return AxisModel(classes=classes, models=[], temperature=1.0, weight=0.0), np.ones((len(y), 1))
    oof = np.full((X.shape[0], len(classes)), 1.0 / len(classes))
    models = []
    for k in range(N_FOLDS):
        train, test = folds != k, folds == k
        if len(set(y_arr[train])) >= 2 and test.any():
            models.append(_fit(X[train], y_arr[train]))
            oof[test] = _proba_in(models[-1], X[test], classes, 1.0)
    y_idx = np.array([classes.index(c) for c in y])
    seen = oof[np.arange(len(y_idx)), y_idx] > 0
    temperature = 1.0
    if seen.sum() >= 5:
        temperature = float(min(np.geomspace(0.2, 5.0, 30), key=lambda t: _nll(_temper(oof[seen], t), y_idx[seen])))
    cal = _temper(oof, temperature)
    weight = float(min(np.linspace(0.0, 0.9, 10), key=lambda w: _nll(w * cal + (1 - w) * priors, y_idx)))
    return AxisModel(classes=classes, models=models, temperature=temperature, weight=weight), cal


def _prior_on(classes: list[str], codes: tuple[str, ...], p: np.ndarray) -> np.ndarray:
    """Re-index prior columns (over `codes`) onto a classifier's class list."""
    out = np.zeros((p.shape[0], len(classes)))
    for j, c in enumerate(classes):
        if c in codes:
            out[:, j] = p[:, codes.index(c)]
    return out


@dataclass(frozen=True)
class TrainingExample:
    episode_id: int
    text: str
    failure_type: str | None  # None when the label needs a new type
    not_a_failure: bool
    source: str | None
    stage: str | None
    capability: str | None


def model_train(spec: CodebookSpec, examples: list[TrainingExample]) -> TrainedModel:
    """Fit the per-axis classifiers on labelled examples (pure: no database)."""
    index = codebook_index(spec)
    texts = [e.text for e in examples]
    vectorizer = TfidfVectorizer(
        lowercase=True,
        stop_words="english",
        ngram_range=(1, 2),
        sublinear_tf=True,
        min_df=2 if len(examples) >= 200 else 1,
        max_features=10_000,
        dtype=np.float32,
    ).fit(_clip(texts))
    cb_X = text_vectors(spec, texts)
    X = _features(vectorizer, texts, cb_X)
    folds = np.random.default_rng(SEED).permutation(np.arange(len(examples)) % N_FOLDS)
    type_prior = prior_type_probabilities(index, cb_X)
    axes: dict[str, AxisModel] = {}
    oof: dict[int, dict[str, np.ndarray]] = {e.episode_id: {} for e in examples}

    def learn(axis: str, rows: list[int], y: list[str], prior: np.ndarray) -> None:
        model, cal = _train_axis(X[rows], y, folds[rows], prior)
        axes[axis] = model
        for r, p in zip(rows, cal, strict=True):
            oof[examples[r].episode_id][axis] = p.astype(np.float32)

    rows = [i for i, e in enumerate(examples) if e.not_a_failure or e.failure_type]
    if rows:
        y = [NAF if examples[i].not_a_failure else examples[i].failure_type for i in rows]
        classes = sorted(set(y))
        prior = _prior_on(classes, spec.type_codes, type_prior[rows])
        prior[:, [j for j, c in enumerate(classes) if c == NAF]] = 0.02
        learn("failure_type", rows, y, prior / prior.sum(axis=1, keepdims=True))
    for axis in AXES:
        rows = [i for i, e in enumerate(examples) if getattr(e, axis)]
        if rows:
            y = [getattr(examples[i], axis) for i in rows]
            prior = np.vstack([_axis_prior(spec, examples[i].failure_type, axis) for i in rows])
            learn(axis, rows, y, _prior_on(sorted(set(y)), spec.axis_codes(axis), prior) + 1e-6)
    return TrainedModel(
        fingerprint=spec.fingerprint,
        n_train=len(examples),
        vectorizer=vectorizer,
        axes=axes,
        oof={e.episode_id: (text_hash(e.text), oof[e.episode_id]) for e in examples},
        train_ids=np.array([e.episode_id for e in examples]),
        train_types=[NAF if e.not_a_failure else (e.failure_type or "") for e in examples],
        train_vectors=cb_X.astype(np.float32),
    )


def model_dumps(model: TrainedModel) -> bytes:
    buf = io.BytesIO()
    joblib.dump(model, buf, compress=3)
    return buf.getvalue()


def model_loads(blob: bytes) -> TrainedModel:
    return joblib.load(io.BytesIO(bytes(blob)))


# --- scoring ------------------------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    out = []
    for m in _SENTENCE.finditer(text):
        s = m.group(0).strip()
        if len(s.split()) >= 3:
            out.append(quote_whole_words(s, s, limit=MAX_EVIDENCE_CHARS))
        if len(out) >= MAX_SENTENCES:
            break
    return out


class LocalSuggester:
    """Scores texts against a codebook, with a study's trained model when it has one."""

    backend = "local"

    def __init__(self, spec: CodebookSpec, trained: TrainedModel | None = None):
        if trained is not None and trained.fingerprint != spec.fingerprint:
            trained = None  # trained on another codebook version: fall back to the codebook prior
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
    def _distributions(self, texts: list[str], episode_ids: list[int | None]):
        spec, index = self.spec, self.index
        cb_X = text_vectors(spec, texts)
        p_type = prior_type_probabilities(index, cb_X)
        p_naf = np.zeros(len(texts))
        p_axes = dict.fromkeys(AXES)
        neighbours: list[list[int]] = [[] for _ in texts]
        if self.trained is None:
            return cb_X, p_type, p_naf, p_axes, neighbours
        tm = self.trained
        X = _features(tm.vectorizer, texts, cb_X)
        hashes = [text_hash(t) for t in texts]
        # Labelled episodes whose text is unchanged use their out-of-fold probabilities.
        held = {}
        for i, eid in enumerate(episode_ids):
            stored = tm.oof.get(eid) if eid is not None else None
            if stored is not None and stored[0] == hashes[i]:
                held[i] = stored[1]

        def axis_proba(axis: str, am: AxisModel) -> np.ndarray:
            if not am.models:
                return np.ones((len(texts), len(am.classes))) / len(am.classes)
            mean = sum(_proba_in(m, X, am.classes, 1.0) for m in am.models) / len(am.models)
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
        sims = (cb_X @ tm.train_vectors.T).toarray()
        for i, eid in enumerate(episode_ids):
            if eid is not None:
                sims[i, tm.train_ids == eid] = -1
        k = min(5, sims.shape[1])
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        for i in range(len(texts)):
            best = sorted(top[i], key=lambda j, row=sims[i]: -row[j])
            neighbours[i] = [int(j) for j in best if sims[i, j] > 0.2]
        return cb_X, p_type, p_naf, p_axes, neighbours

    def suggest_texts(
        self, texts: list[str], episode_ids: list[int | None] | None = None, titles: list[str] | None = None
    ) -> list[Answer]:
        """Top-3 answers for many texts at once (vectorised; no database).

        Titles are read for context; evidence is always a sentence of the text itself.
        """
        if not texts:
            return []
        episode_ids = episode_ids or [None] * len(texts)
        spec, index = self.spec, self.index
        read = [reading(ti, t) for ti, t in zip(titles or [""] * len(texts), texts, strict=True)]
        cb_X, p_type, p_naf, p_axes, neighbours = self._distributions(read, episode_ids)
        top = np.argsort(-p_type, axis=1, kind="stable")[:, :MAX_CANDIDATES]
        # Evidence: the sentence closest to each candidate type, from one vectorised pass.
        sentences = [_sentences(t[:MAX_TEXT_CHARS]) for t in texts]
        flat = [s for ss in sentences for s in ss]
        S = normalize(index.vectorizer.transform(flat)).tocsr() if flat else None
        sent_sims = (S @ index.types.T).toarray() if S is not None else np.zeros((0, len(spec.types)))
        offsets = np.cumsum([0] + [len(ss) for ss in sentences])
        picks = {axis: self._axis_picks(axis, top, p_axes, cb_X) for axis in AXES}
        answers = []
        for i in range(len(texts)):
            cands = []
            lo, hi = offsets[i], offsets[i + 1]
            for rank, j in enumerate(top[i]):
                evidence = ""
                if hi > lo:
                    k = int(np.argmax(sent_sims[lo:hi, j]))
                    if sent_sims[lo + k, j] > 0:
                        evidence = sentences[i][k]
                cands.append(
                    Candidate(
                        failure_type=spec.types[j].code,
                        source=picks["source"][i][rank],
                        stage=picks["stage"][i][rank],
                        capability=picks["capability"][i][rank],
                        confidence=round(float(p_type[i, j]), 4),
                        rationale=self._rationale(i, j, cb_X, neighbours[i]),
                        evidence=evidence,
                    )
                )
            naf = bool(p_naf[i] > p_type[i, top[i][0]])
            answers.append(Answer(not_a_failure=naf, candidates=tuple(cands)))
        return answers

    def _axis_picks(self, axis: str, top: np.ndarray, p_axes, cb_X) -> list[list[str]]:
        """The axis value for each candidate: the type's typical values, the classifier if trained."""
        codes = self.spec.axis_codes(axis)
        prior = self.index.axis_priors[axis][top]  # n x k x values
        # Among equally typical values, the one whose definition reads closest to the text.
        closeness = (cb_X @ self.index.axes[axis].T).toarray()[:, None, :]
        score = prior + 0.01 * closeness
        if p_axes[axis] is not None:
            weight, full = p_axes[axis]
            score = weight * full[:, None, :] + (1 - weight) * score
        best = np.argmax(score, axis=2)
        return [[codes[v] for v in row] for row in best]

    def _rationale(self, i: int, j: int, cb_X, neighbour_rows: list[int]) -> str:
        t = self.spec.types[j]
        lo, hi = cb_X.indptr[i], cb_X.indptr[i + 1]
        cols = cb_X.indices[lo:hi]
        shared = cb_X.data[lo:hi] * self.index.types_dense[j, cols]
        order = [k for k in np.argsort(-shared)[:6] if shared[k] > 0]
        # Bare short numbers ("06", "40") match by accident (dates, counts), so they are not named.
        terms = [t for t in (str(self.index.terms[cols[k]]) for k in order) if not t.isdigit() or len(t) >= 3]
        words = {w for term in terms for w in term.split()}
        matched = [ind for ind, toks in self.index.indicator_tokens[j] if toks & words]
        parts = []
        if matched:
            parts.append("Matched indicators: " + "; ".join(f"“{m}”" for m in matched[:2]) + ".")
        if terms:
            parts.append("Shared codebook terms: " + ", ".join(terms) + ".")
        else:
            parts.append(f"No terms in common with the definition of {t.code}; low confidence.")
        if self.trained is not None and neighbour_rows:
            same = [int(self.trained.train_ids[k]) for k in neighbour_rows if self.trained.train_types[k] == t.code][:3]
            if same:
                parts.append("Similar labelled episodes: " + ", ".join(f"#{e}" for e in same) + ".")
        return " ".join(parts)
