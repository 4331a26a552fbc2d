"""The local suggester's trained model: per-axis classifiers, cross-fitted and calibrated, over the codebook's
features and a study's adjudicated episodes. Pickled into LocalModel.blob by model_dumps: the classes keep
this module path (annotate/suggest_local.py re-exports them for models pickled before the layout move)."""

from __future__ import annotations

import datetime
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

from annotate.suggestions._eval import calibration_error
from annotate.suggestions.base import (
    AXES,
    CodebookSpec,
    reading,
    text_hash,
)
from annotate.suggestions.codebook_index import (
    N_FOLDS,
    NAF,
    SEED,
    CodebookIndex,
    Readings,
    axis_table,
    codebook_index,
    context_factors,
    prior_type_probabilities,
    readings,
)
from annotate.suggestions.cold_prior import cold_prior, repo_kind

# --- the trained model -------------------------------------------------------------------------


@dataclass
class AxisModel:
    classes: list[str]
    # One model per fold (cross-fitting): a new text gets their averaged probabilities,
    # and no extra full-data fit is needed. Empty when the labels hold a single class.
    models: list[SGDClassifier]
    temperature: float
    weight: float  # weight of the classifier against the codebook prior
    # A temperature on the blend of classifier and prior (ranks unchanged), so that the top value's confidence is
    # calibrated on the out-of-fold predictions; models pickled before it have none (getattr default 1.0).
    blend_temperature: float = 1.0


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
    # How the study's labelled episodes of each repository (cluster) were coded, per axis: {axis: {cluster: {code:
    # n}}}. Issues of one repository mostly share a source (a framework's own repository versus a product built on
    # one), which the words alone say less reliably; annotate.suggestions.local blends it in for unlabelled episodes.
    cluster_axes: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    train_axes: dict[str, list[str]] = field(default_factory=dict)  # each training episode's code, per axis


_HASHER = FeatureHasher(n_features=2**12, input_type="string", alternate_sign=False)
# The axis classifiers' context features: few columns keep lbfgs fast; a rare collision only shares a weight.
_SMALL_HASHER = FeatureHasher(n_features=2**8, input_type="string", alternate_sign=False)


def _context_tokens(index: CodebookIndex, cluster: str, kind: str) -> list[str]:
    """The cluster and kind as features, and which decision rules name the cluster (e.g. a framework's repo)."""
    parts = {p for p in re.split(r"[/\s_.-]+", cluster.lower()) if len(p) > 2}
    tokens = [f"cluster={cluster.lower()}", f"kind={kind}"] + [f"repo={p}" for p in parts]
    # The kind of repository (a framework's own, a coding agent, a product built on a framework) carries over
    # to repositories the study has no label from.
    rk = repo_kind(cluster, cold_prior(index.spec), index.spec)
    if rk:
        tokens.append(f"repokind={rk}")
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
    prior = np.log(_marginal_axis_prior(index, p_type, axis, clusters) + 1e-3)
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
    blend = weight * cal + (1 - weight) * priors
    hit = np.argmax(blend, axis=1) == y_idx
    blend_temperature = float(
        min(np.geomspace(0.5, 3.0, 16), key=lambda t: calibration_error(_temper(blend, t).max(axis=1), hit) or 0.0)
    )
    model = AxisModel(classes=classes, models=models, temperature=temperature, weight=weight,
                      blend_temperature=blend_temperature)  # fmt: skip
    return model, cal


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


def _marginal_axis_prior(
    index: CodebookIndex, p_type: np.ndarray, axis: str, clusters: list[str] | None = None
) -> np.ndarray:
    """P(axis value | text) before labels: each type's values (annotate.suggestions.codebook_index.axis_table),
    weighted by P(type), reweighed by the kind of the text's repository."""
    p = p_type / np.maximum(p_type.sum(axis=1, keepdims=True), 1e-12)
    q = (p @ axis_table(index, axis)) * context_factors(index, axis, clusters, p.shape[0])
    return q / np.maximum(q.sum(axis=1, keepdims=True), 1e-12)


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
            prior = _marginal_axis_prior(index, type_prior[rows], axis, [clusters[i] for i in rows])
            features = _axis_features(index, r, type_prior, axis, clusters, kinds)
            learn(axis, rows, y, _prior_on(sorted(set(y)), spec.axis_codes(axis), prior) + 1e-6, features, _fit_small)
    cluster_axes: dict[str, dict[str, dict[str, int]]] = {axis: {} for axis in AXES}
    for e in examples:
        for axis in AXES:
            code = getattr(e, axis)
            if e.cluster and code:
                counts = cluster_axes[axis].setdefault(e.cluster, {})
                counts[code] = counts.get(code, 0) + 1
    return TrainedModel(
        cluster_axes=cluster_axes,
        train_axes={axis: [getattr(e, axis) or "" for e in examples] for axis in AXES},
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
