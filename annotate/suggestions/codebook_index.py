"""The codebook as a search index: each type's definition, indicators and example as TF-IDF vectors, the
readings of a text against it, and the codebook prior over types and axes. Also what incidents use to find
similar past incidents (text_vectors)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

from annotate.suggestions._text import (
    clean_report,
    code_lines,
    english_rendering,
    gloss,
    language_cap,
    language_covered,
    reads_as_english,
)
from annotate.suggestions.base import (
    AXES,
    CodebookSpec,
    codebook_spec,
    reading,
)
from annotate.suggestions.cold_prior import ColdPrior, cold_prior, kind_factors, repo_kind, type_probabilities

NAF = "__not_a_failure__"
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
N_FOLDS = 3
SEED = 20240611

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


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
    # Highest top-1 confidence per text: 1 in English, under the floor when read through a word list.
    caps: np.ndarray | None = None
    english: tuple[str, ...] = ()  # what the word space reads: the text as written, or its English rendering
    in_english: tuple[bool, ...] = ()  # the text reads as English (not rendered through the glossary)


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
        caps=np.array(
            [
                1.0 if en else language_cap(f"{ti}\n{t[:MAX_TEXT_CHARS]}")
                for ti, t, en in zip(titles, texts, english, strict=True)
            ]
        ),
        english=tuple(word_combined),
        in_english=tuple(english),
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


def match_mass(sims: np.ndarray) -> np.ndarray:
    """Per text, the share of probability the codebook reading gives to any type rather than "matches nothing"."""
    z = np.hstack([sims, np.full((sims.shape[0], 1), NO_MATCH_SIMILARITY)]) / PRIOR_TEMPERATURE
    return 1.0 - _softmax_rows(z)[:, -1]


def prior_type_probabilities(index: CodebookIndex, r: Readings) -> np.ndarray:
    """P(type | text) before a study has labels (n_texts x n_types).

    The codebook's reading (similarity to each type), and where the fitted prior applies
    (annotate.suggestions.cold_prior) the type frequencies and word model learnt on the real-issue development
    split beside it. Rows sum to less than 1: the rest is the "matches nothing in the codebook" mass, so a text
    with no codebook term (a bare template, "Thanks, closing this.") stays unconfident.
    """
    sims = type_similarities(index, r)
    prior = cold_prior(index.spec)
    if prior is None:
        z = np.hstack([sims, np.full((sims.shape[0], 1), NO_MATCH_SIMILARITY)]) / PRIOR_TEMPERATURE
        return _softmax_rows(z)[:, :-1]
    # The word model was fitted on English reports: a glossary rendering of another language reads too few of its
    # words, so those texts get the codebook reading and the type frequencies alone.
    p = type_probabilities(prior, sims, list(r.english), words=np.array(r.in_english, dtype=bool))
    return p * match_mass(sims)[:, None]


_SHIPPED = object()  # the fitted prior of cold_prior.json (fit_prior.py passes a fold's prior instead)


def _prior(index: CodebookIndex, prior) -> ColdPrior | None:
    return cold_prior(index.spec) if prior is _SHIPPED else prior


def axis_table(index: CodebookIndex, axis: str, *, prior=_SHIPPED) -> np.ndarray:
    """P(axis value | type), n_types x n_values: learnt on the development split where the prior applies (smoothed
    towards the codebook's typical values), else the codebook's typical values alone."""
    prior = _prior(index, prior)
    return index.axis_priors[axis] if prior is None else prior.axis_given_type[axis]


def candidate_axis_prior(
    index: CodebookIndex, axis: str, p_type: np.ndarray, top: np.ndarray, clusters: list[str] | None, *, prior=_SHIPPED
) -> np.ndarray:
    """P(axis value) for each candidate type (n x k x values): the candidate's own values, and where the fitted prior
    applies, half those and half the values of every type weighted by P(type) (what the text says beyond its top
    type; chosen by grouped cross-validation on the development split), reweighed by the repository's kind."""
    prior = _prior(index, prior)
    table = axis_table(index, axis, prior=prior)
    q = table[top]
    if prior is not None:
        p = p_type / np.maximum(p_type.sum(axis=1, keepdims=True), 1e-12)
        q = 0.5 * q + 0.5 * (p @ table)[:, None, :]
        q = q * context_factors(index, axis, clusters, top.shape[0], prior=prior)[:, None, :]
    return q / np.maximum(q.sum(axis=2, keepdims=True), 1e-12)


def context_factors(
    index: CodebookIndex, axis: str, clusters: list[str] | None, n: int, *, prior=_SHIPPED
) -> np.ndarray:
    """Per text, how the kind of its repository reweighs the axis values (n x n_values; ones when unknown)."""
    prior = _prior(index, prior)
    values = len(index.spec.axis_codes(axis))
    if prior is None or not clusters:
        return np.ones((n, values))
    return kind_factors(prior, axis, [repo_kind(c, prior, index.spec) for c in clusters], values)


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
