"""The local suggester: scikit-learn only, and the default when no LLM key is set.

Reading: issue-template boilerplate is stripped first (annotate.suggest_text:
headings, checkboxes, environment blocks, bot lines; code blocks and tracebacks
kept), and the title and the body are scored apart as well as together.

Cold start: the codebook itself (each type's name, definition, indicators and
example) is the training data. Two TF-IDF spaces rank the types for a text: words
(unigrams and bigrams) and character n-grams within words, which carry over to
reports in other Latin-script languages ("límite de tasa", "timeout", "429").
Cosine similarities become probabilities with a fixed temperature beside a
"matches nothing" alternative, so weak matches stay unconfident. A text in a
script the model does not read (annotate.suggest_text.language_covered) is
declined, never forced into the first codebook types.

Once a study has FAULTLINE_LOCAL_MIN_LABELS final labels (annotate.labels),
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

import datetime
import hashlib
import io
import re
from dataclasses import dataclass, field

import joblib
import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction import FeatureHasher
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import SGDClassifier
from sklearn.preprocessing import normalize

from annotate.suggest_base import (
    AXES,
    MAX_CANDIDATES,
    Answer,
    Candidate,
    CodebookSpec,
    codebook_spec,
    reading,
    text_hash,
)
from annotate.suggest_text import (
    claim_spans,
    clean_report,
    code_lines,
    english_rendering,
    gloss,
    language_covered,
    reads_as_english,
)

LOCAL_VERSION = "local-5"  # bump when scoring changes, so cached suggestions are not mistaken for new ones
COLD_MODEL = "codebook-tfidf"
NAF = "__not_a_failure__"
DECLINED_LANGUAGE = "the text is in a language the local model does not read"
# Cold-start calibration, chosen on the development fold of the evaluation set
# (bench/suggest_eval_set.py; the hold-out fold was not used): cosine similarities
# to the codebook are small numbers, sharpened by a temperature; a virtual
# "matches nothing" alternative at a fixed similarity keeps weak matches
# unconfident; and texts with few codebook terms are shrunk towards it, so one
# shared word ("Thanks, closing this.") is not a confident match.
PRIOR_TEMPERATURE = 0.03
NO_MATCH_SIMILARITY = 0.08
SHRINK_TERMS = 4
# How the similarity of a text to a type is made up: the whole reading, the title
# and the body apart, and character n-grams (centred per text: any two English
# texts share many n-grams, so only the excess over the text's mean counts).
W_ALL, W_TITLE, W_BODY, W_CHAR, W_CODE = 0.4, 0.4, 0.2, 1.0, 0.0
MAX_TEXT_CHARS = 20_000
MAX_EVIDENCE_CHARS = 300
N_FOLDS = 3
SEED = 20240611

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
# Words that match across unrelated reports ("exceeded", "error", "agent") name no indicator alone.
MIN_INDICATOR_WORDS = 2


def _type_document(t) -> str:
    return " ".join([t.name, t.definition, *t.indicators, t.example])


@dataclass(frozen=True, eq=False)
class CodebookIndex:
    """The codebook's TF-IDF spaces: fitted vectorizers, the type, axis-value and rule vectors."""

    spec: CodebookSpec
    vectorizer: TfidfVectorizer
    char_vectorizer: TfidfVectorizer
    types: sp.csr_matrix  # n_types x d, rows L2-normalised
    types_char: sp.csr_matrix
    axes: dict[str, sp.csr_matrix]
    rules: sp.csr_matrix  # n_rules x d
    rule_names: tuple[frozenset[str], ...]  # capitalised names each rule mentions, lower-cased
    terms: np.ndarray
    stop: frozenset[str]
    indicator_tokens: tuple[tuple[tuple[str, frozenset[str]], ...], ...]
    types_dense: np.ndarray  # the type vectors as a dense array, for per-term rationale lookups
    axis_priors: dict[str, np.ndarray]  # axis -> n_types x n_values prior (see _axis_prior)
    words: frozenset[str]  # the single words of the word space (kept when rendering other languages in English)


_INDEXES: dict[str, CodebookIndex] = {}
_NAME = re.compile(r"\b[A-Z][\w-]*(?:\s+[A-Z][\w-]*)*")


def _index_for(spec: CodebookSpec) -> CodebookIndex:
    if spec.fingerprint in _INDEXES:
        return _INDEXES[spec.fingerprint]
    vectorizer = TfidfVectorizer(
        lowercase=True, stop_words="english", ngram_range=(1, 2), sublinear_tf=True, min_df=1, dtype=np.float64
    )
    docs = [_type_document(t) for t in spec.types]
    axis_docs = {a: [f"{v.name} {v.definition}" for v in spec.axes[a]] for a in AXES}
    vectorizer.fit(docs + [d for a in AXES for d in axis_docs[a]])
    char_vectorizer = TfidfVectorizer(
        lowercase=True,
        analyzer="char_wb",
        strip_accents="unicode",
        ngram_range=(3, 5),
        sublinear_tf=True,
        min_df=1,
        dtype=np.float64,
    ).fit(docs)
    stop = frozenset(vectorizer.get_stop_words() or ())
    indicator_tokens = tuple(
        tuple((ind, frozenset(w for w in _TOKEN.findall(ind.lower()) if w not in stop)) for ind in t.indicators)
        for t in spec.types
    )
    types = normalize(vectorizer.transform(docs)).tocsr()
    rule_texts = [r.rule for r in spec.rules] or [""]
    index = CodebookIndex(
        spec=spec,
        vectorizer=vectorizer,
        char_vectorizer=char_vectorizer,
        types=types,
        types_char=normalize(char_vectorizer.transform(docs)).tocsr(),
        axes={a: normalize(vectorizer.transform(axis_docs[a])).tocsr() for a in AXES},
        rules=normalize(vectorizer.transform(rule_texts)).tocsr(),
        rule_names=tuple(frozenset(m.lower() for m in _NAME.findall(r)) for r in rule_texts),
        terms=vectorizer.get_feature_names_out(),
        stop=stop,
        indicator_tokens=indicator_tokens,
        types_dense=types.toarray(),
        axis_priors={a: np.vstack([_axis_prior(spec, t.code, a) for t in spec.types]) for a in AXES},
        words=frozenset(str(t) for t in vectorizer.get_feature_names_out() if " " not in t),
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
    """L2-normalised TF-IDF vectors of `texts` in the codebook's word space (the space the local suggester ranks in).

    Rows of texts with no codebook vocabulary are all zero. Cosine similarity of
    two texts is the dot product of their rows.
    """
    index = codebook_index(codebook)
    return normalize(index.vectorizer.transform(_clip(texts))).tocsr()


@dataclass(frozen=True)
class Readings:
    """What the model reads of each text: cleaned body, title, both, and their codebook-space vectors."""

    combined: list[str]
    titles: list[str]
    bodies: list[str]
    X: sp.csr_matrix  # combined, word space
    X_title: sp.csr_matrix
    X_body: sp.csr_matrix
    X_code: sp.csr_matrix  # fenced code only (logs and tracebacks read the same in any language)
    C: sp.csr_matrix  # combined, character space
    covered: np.ndarray  # bool per text: a language the model reads


def readings(index: CodebookIndex, texts: list[str], titles: list[str]) -> Readings:
    # Other languages get the glossary's English readings beside their words (what the character
    # n-grams and a trained model read), and the codebook's word space reads their English rendering
    # alone, so that English phrases form. English is read as written.
    english = [reads_as_english(f"{ti}\n{t[:MAX_TEXT_CHARS]}") for ti, t in zip(titles, texts, strict=True)]
    cleaned = [clean_report(t[:MAX_TEXT_CHARS]) for t in texts]
    bodies = [b if en else gloss(b) for b, en in zip(cleaned, english, strict=True)]
    glossed_titles = [ti if en else gloss(ti) for ti, en in zip(titles, english, strict=True)]
    combined = [reading(ti, b) for ti, b in zip(glossed_titles, bodies, strict=True)]
    known = index.words
    word_bodies = [b if en else english_rendering(b, known) for b, en in zip(cleaned, english, strict=True)]
    word_titles = [ti if en else english_rendering(ti, known) for ti, en in zip(titles, english, strict=True)]
    word_combined = [reading(ti, b) for ti, b in zip(word_titles, word_bodies, strict=True)]
    return Readings(
        combined=combined,
        titles=glossed_titles,
        bodies=bodies,
        X=normalize(index.vectorizer.transform(word_combined)).tocsr(),
        X_title=normalize(index.vectorizer.transform(word_titles)).tocsr(),
        X_body=normalize(index.vectorizer.transform(word_bodies)).tocsr(),
        X_code=normalize(index.vectorizer.transform([code_lines(t[:MAX_TEXT_CHARS]) for t in texts])).tocsr(),
        C=normalize(index.char_vectorizer.transform(combined)).tocsr(),
        covered=np.array(
            [language_covered(f"{ti}\n{t[:MAX_TEXT_CHARS]}") for ti, t in zip(titles, texts, strict=True)]
        ),
    )


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _shrunk(X: sp.csr_matrix, sims: np.ndarray) -> np.ndarray:
    n_terms = np.diff(X.indptr).astype(float)
    return sims * (n_terms / (n_terms + SHRINK_TERMS))[:, None]


def type_similarities(index: CodebookIndex, r: Readings) -> np.ndarray:
    """How close each text is to each type (n_texts x n_types), words and characters, title and body."""
    word = W_ALL * _shrunk(r.X, (r.X @ index.types.T).toarray())
    word += W_TITLE * _shrunk(r.X_title, (r.X_title @ index.types.T).toarray())
    word += W_BODY * _shrunk(r.X_body, (r.X_body @ index.types.T).toarray())
    word += W_CODE * _shrunk(r.X_code, (r.X_code @ index.types.T).toarray())
    char = (r.C @ index.types_char.T).toarray()
    char -= char.mean(axis=1, keepdims=True)
    return word + W_CHAR * _shrunk(r.X, char)


def prior_type_probabilities(index: CodebookIndex, r: Readings) -> np.ndarray:
    """P(type | text) from similarity to the codebook (n_texts x n_types).

    Rows sum to less than 1: the rest is the "matches nothing in the codebook" mass.
    """
    sims = type_similarities(index, r)
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
    char_vectorizer: TfidfVectorizer
    title_vectorizer: TfidfVectorizer
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


_HASHER = FeatureHasher(n_features=2**12, input_type="string", alternate_sign=False)
# The axis classifiers' context features: few columns keep lbfgs fast; a rare collision only shares a weight.
_SMALL_HASHER = FeatureHasher(n_features=2**8, input_type="string", alternate_sign=False)


def _context_tokens(index: CodebookIndex, cluster: str, kind: str) -> list[str]:
    """The cluster and kind as features, and which decision rules name the cluster (e.g. a framework's repo)."""
    parts = {p for p in re.split(r"[/\s_.-]+", cluster.lower()) if len(p) > 2}
    tokens = [f"cluster={cluster.lower()}", f"kind={kind}"] + [f"repo={p}" for p in parts]
    for k, names in enumerate(index.rule_names):
        if parts & {w for n in names for w in n.split()}:
            tokens.append(f"rule-names-cluster={k}")
    return tokens


def _features(tm_or_vectorizers, index: CodebookIndex, r: Readings, clusters: list[str], kinds: list[str]):
    """Sparse features of texts for the trained model (each block L2-normalised, then weighted)."""
    vectorizer, char_vectorizer, title_vectorizer = tm_or_vectorizers
    own = normalize(vectorizer.transform(r.combined))
    chars = normalize(char_vectorizer.transform(r.combined))
    title = normalize(title_vectorizer.transform(r.titles))
    context = normalize(_HASHER.transform([_context_tokens(index, c, k) for c, k in zip(clusters, kinds, strict=True)]))
    rules = sp.csr_matrix((r.X @ index.rules.T).toarray())
    prior = sp.csr_matrix(prior_type_probabilities(index, r) * 3.0)
    blocks = [r.X, own, chars * 0.7, title * 0.5, context * 0.7, rules, prior]
    return sp.hstack(blocks, format="csr").astype(np.float64)


def _axis_features(index: CodebookIndex, r: Readings, p_type: np.ndarray, axis: str, clusters, kinds):
    """Features of the source, stage and capability classifiers: few, so that 30 labels can fit them.

    The codebook's own reading of the axis (log of the typical values of every type
    weighted by P(type)), the cluster and kind, and how close the text is to each
    decision rule. With these a study learns, e.g., that its literature records are
    planning failures, or that issues of a framework's own repository are `framework`.
    """
    prior = np.log(_marginal_axis_prior(index, p_type, axis) + 1e-3)
    context = _SMALL_HASHER.transform([_context_tokens(index, c, k) for c, k in zip(clusters, kinds, strict=True)])
    rules = (r.X @ index.rules.T).toarray() * 3.0
    return sp.hstack([sp.csr_matrix(prior), context, sp.csr_matrix(rules)], format="csr").astype(np.float64)


def _fit_small(X, y) -> SGDClassifier:
    # Plain logistic regression by SGD over a few hundred columns: many epochs cost little here.
    model = SGDClassifier(loss="log_loss", alpha=1e-3, max_iter=40, tol=None, random_state=SEED).fit(X, y)
    model.coef_ = model.coef_.astype(np.float32)
    return model


def _fit(X, y) -> SGDClassifier:
    # Logistic loss gives probabilities; SGD keeps 65-class training on thousands of
    # episodes within seconds. Temperature scaling below does the calibration.
    model = SGDClassifier(loss="log_loss", alpha=1e-4, max_iter=8, tol=None, random_state=SEED).fit(X, y)
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


def _train_axis(X, y: list[str], folds: np.ndarray, priors: np.ndarray, fit=None) -> tuple[AxisModel, np.ndarray]:
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
            models.append((fit or _fit)(X[train], y_arr[train]))
            oof[test] = _proba_in(models[-1], X[test], classes, 1.0)
    y_idx = np.array([classes.index(c) for c in y])
    seen = oof[np.arange(len(y_idx)), y_idx] > 0
    temperature = 1.0
    if seen.sum() >= 5:
        temperature = float(min(np.geomspace(0.2, 5.0, 30), key=lambda t: _nll(_temper(oof[seen], t), y_idx[seen])))
    cal = _temper(oof, temperature)
    weight = float(min(np.linspace(0.0, 1.0, 11), key=lambda w: _nll(w * cal + (1 - w) * priors, y_idx)))
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
    title: str = ""
    cluster: str = ""
    kind: str = ""


def _marginal_axis_prior(index: CodebookIndex, p_type: np.ndarray, axis: str) -> np.ndarray:
    """P(axis value | text) from the codebook alone: the typical values of every type, weighted by P(type)."""
    p = p_type / np.maximum(p_type.sum(axis=1, keepdims=True), 1e-12)
    return p @ index.axis_priors[axis]


def model_train(spec: CodebookSpec, examples: list[TrainingExample]) -> TrainedModel:
    """Fit the per-axis classifiers on labelled examples (pure: no database)."""
    index = codebook_index(spec)
    r = readings(index, [e.text for e in examples], [e.title for e in examples])
    min_df = 2 if len(examples) >= 200 else 1
    vectorizers = (
        TfidfVectorizer(
            lowercase=True, stop_words="english", ngram_range=(1, 2), sublinear_tf=True, min_df=min_df,
            max_features=10_000, dtype=np.float32,
        ).fit(r.combined),
        TfidfVectorizer(
            lowercase=True, analyzer="char_wb", strip_accents="unicode", ngram_range=(3, 5), sublinear_tf=True,
            min_df=min_df, max_features=20_000, dtype=np.float32,
        ).fit(r.combined),
        TfidfVectorizer(lowercase=True, stop_words="english", sublinear_tf=True, dtype=np.float32).fit(
            [t or "untitled" for t in r.titles]
        ),
    )  # fmt: skip
    clusters, kinds = [e.cluster for e in examples], [e.kind for e in examples]
    X = _features(vectorizers, index, r, clusters, kinds)
    folds = np.random.default_rng(SEED).permutation(np.arange(len(examples)) % N_FOLDS)
    type_prior = prior_type_probabilities(index, r)
    axes: dict[str, AxisModel] = {}
    oof: dict[int, dict[str, np.ndarray]] = {e.episode_id: {} for e in examples}

    def learn(axis: str, rows: list[int], y: list[str], prior: np.ndarray, features=None, fit=None) -> None:
        model, cal = _train_axis((X if features is None else features)[rows], y, folds[rows], prior, fit)
        axes[axis] = model
        for row, p in zip(rows, cal, strict=True):
            oof[examples[row].episode_id][axis] = p.astype(np.float32)

    rows = [i for i, e in enumerate(examples) if e.not_a_failure or e.failure_type]
    if rows:
        y = [NAF if examples[i].not_a_failure else examples[i].failure_type for i in rows]
        classes = sorted(set(y))
        prior = _prior_on(classes, spec.type_codes, type_prior[rows])
        prior[:, [j for j, c in enumerate(classes) if c == NAF]] = 0.02
        learn("failure_type", rows, y, prior / np.maximum(prior.sum(axis=1, keepdims=True), 1e-12))
    for axis in AXES:
        rows = [i for i, e in enumerate(examples) if getattr(e, axis)]
        if rows:
            y = [getattr(examples[i], axis) for i in rows]
            prior = _marginal_axis_prior(index, type_prior[rows], axis)
            features = _axis_features(index, r, type_prior, axis, clusters, kinds)
            learn(axis, rows, y, _prior_on(sorted(set(y)), spec.axis_codes(axis), prior) + 1e-6, features, _fit_small)
    return TrainedModel(
        fingerprint=spec.fingerprint,
        n_train=len(examples),
        vectorizer=vectorizers[0],
        char_vectorizer=vectorizers[1],
        title_vectorizer=vectorizers[2],
        axes=axes,
        oof={e.episode_id: (text_hash(reading(e.title, e.text)), oof[e.episode_id]) for e in examples},
        train_ids=np.array([e.episode_id for e in examples]),
        train_types=[NAF if e.not_a_failure else (e.failure_type or "") for e in examples],
        train_vectors=r.X.astype(np.float32),
    )


def model_dumps(model: TrainedModel) -> bytes:
    buf = io.BytesIO()
    joblib.dump(model, buf, compress=3)
    return buf.getvalue()


def model_loads(blob: bytes) -> TrainedModel:
    return joblib.load(io.BytesIO(bytes(blob)))


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
        p_axes = {a: (0.0, _marginal_axis_prior(index, p_type, a)) for a in AXES}
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
        picks = {axis: self._axis_picks(axis, top, p_axes, r.X) for axis in AXES}
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
                        confidence=round(float(p_type[i, j]), 4),
                        rationale=self._rationale(i, j, r.X, why, neighbours[i], texts[i], titles[i]),
                        evidence=evidence,
                    )
                )
            naf = bool(p_naf[i] > p_type[i, top[i][0]])
            answers.append(Answer(not_a_failure=naf, candidates=tuple(cands)))
        return answers

    def _axis_picks(self, axis: str, top: np.ndarray, p_axes, X) -> list[list[str]]:
        """The axis value for each candidate: the type's typical values, then the classifier once trained."""
        codes = self.spec.axis_codes(axis)
        prior = self.index.axis_priors[axis][top]  # n x k x values
        # Among equally typical values, the one whose definition reads closest to the text.
        closeness = (X @ self.index.axes[axis].T).toarray()[:, None, :]
        score = prior + 0.01 * closeness
        weight, full = p_axes[axis]
        if weight:
            score = weight * full[:, None, :] + (1 - weight) * score
        best = np.argmax(score, axis=2)
        return [[codes[v] for v in row] for row in best]

    def _evidence(self, text: str, claims: list[tuple[str, frozenset[str]]], j: int) -> tuple[str, list]:
        """The claim that best supports type j, and the indicators it matches ((indicator, words) pairs)."""
        best, best_score, best_why = "", 0.0, []
        type_words = set(_TOKEN.findall(_type_document(self.spec.types[j]).lower())) - self.index.stop
        for claim, words in claims:
            why = [
                (ind, sorted(toks & words))
                for ind, toks in self.index.indicator_tokens[j]
                if len(toks & words) >= min(MIN_INDICATOR_WORDS, len(toks))
            ]
            score = 2.0 * len(why) + len(words & type_words) / (3 + len(words))
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


def _claims(text: str) -> list[tuple[str, frozenset[str]]]:
    """The text's claims (annotate.suggest_text) with their lower-cased word sets."""
    out = []
    for span in claim_spans(text[:MAX_TEXT_CHARS])[:400]:
        claim = text[span.start : span.end][:MAX_EVIDENCE_CHARS]
        if span.end - span.start > MAX_EVIDENCE_CHARS:
            continue  # a cut claim could end inside a word
        out.append((claim, frozenset(_TOKEN.findall(claim.lower()))))
    return out


# --- measurement adapters (annotate.suggest_eval items in, answers out) ---------------------------


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
