"""Fit the local suggester's cold-start prior on the development split of the real-issue set, never its test split.

    python bench/real_issues/fit_prior.py [--csv PATH] [--cache DIR] [--codebook PATH] [--write] [--folds K]

It reads issues.csv and the text cache (fetch.py), keeps the dev split only, and chooses the prior's few settings
(temperature, how much the learnt type frequencies and the word model count, smoothing of the axis tables, the
strength of the repository-kind factors) by cross-validation grouped by repository within the dev split, so that
each setting is judged on repositories it was not fitted on, as the test split's are. It prints that grouped
cross-validation (top-1/top-3 type, source, stage, capability of the top candidate, ECE), and with --write fits the
chosen settings on the whole dev split and writes annotate/suggestions/cold_prior.json (numbers only, no text).
Refit it when the dev split or the codebook changes; measure the result on the test split with
bench/suggest_quality_bench.py.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import itertools
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("FAULTLINE_DEV", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from annotate.suggestions import cold_prior as cp  # noqa: E402
from annotate.suggestions._eval import calibration_error  # noqa: E402
from annotate.suggestions.base import AXES, codebook_spec_from_data  # noqa: E402
from annotate.suggestions.codebook_index import (  # noqa: E402
    candidate_axis_prior,
    codebook_index,
    match_mass,
    readings,
    type_similarities,
)
from bench.real_issues.dataset import CSV_PATH, default_cache, read_csv, read_text  # noqa: E402

CODEBOOK = ROOT / "fixtures" / "codebook-v1.json"
TOP_TERMS = 40  # word-model weights kept per type: the JSON stays small and no phrase of one issue survives
MIN_DF = 2  # a term must occur in at least two development issues
# Chosen in two steps: the type settings first (with the axis settings at their middle), then the axis settings.
TYPE_GRID = {
    "temperature": (0.02, 0.03, 0.05),
    "alpha": (0.5, 2.0),  # pseudo-count of every type in the learnt frequencies
    "word_weight": (0.0, 0.3, 0.5),
    "word_c": (4.0, 16.0),
}
AXIS_GRID = {
    "beta": (1.0, 4.0, 16.0),  # pseudo-count of the codebook's typical values in the per-type axis tables
    "gamma": (0.0, 1.0, 2.0),  # strength of the repository-kind factors
}
_WORDS: dict[tuple, dict] = {}


def dev_items(csv_path: Path, cache: Path) -> list[dict]:
    """The dev split's rows with their cached text (rows without one are left out and counted)."""
    rows, missing = [], 0
    for row in read_csv(csv_path):
        if row.split != "dev":
            continue
        text = read_text(cache, row.url)
        if text is None:
            missing += 1
            continue
        rows.append({"row": row, "title": text.get("title") or "", "body": text.get("body") or ""})
    if missing:
        print(f"{missing} dev rows have no cached text (run fetch.py)", file=sys.stderr)
    return rows


def fit(spec, items: list[dict], sims: np.ndarray, docs: list[str], params: dict) -> dict:
    """The prior's JSON from labelled items (their codes, repository kinds), their codebook similarities and texts."""
    codes = list(spec.type_codes)
    index = codebook_index(spec)
    y = [it["row"].codes["failure_type"] for it in items]
    counts = Counter(y)
    total = len(y) + params["alpha"] * len(codes)
    log_prior = {c: float(np.log((counts[c] + params["alpha"]) / total)) for c in codes if counts[c]}
    data = {
        "format": 1,
        "type_codes": codes,
        "temperature": params["temperature"],
        "log_prior": log_prior,
        "unseen_log_prior": float(np.log(params["alpha"] / total)),
        "params": params,
        "calibration": params.get("calibration", 1.0),
    }
    data["words"] = {}
    if params["word_weight"] > 0:
        key = (tuple(docs), tuple(y), params["word_c"])
        if key not in _WORDS:
            _WORDS[key] = _fit_words(docs, y, params)
        data["words"] = {**_WORDS[key], "weight": params["word_weight"]}
    kinds = [it["row"].repo_kind for it in items]
    data["axis_given_type"], data["kind_factor"] = {}, {}
    for axis in AXES:
        values = spec.axis_codes(axis)
        cb = index.axis_priors[axis]
        table = {}
        for j, c in enumerate(codes):
            got = Counter(it["row"].codes[axis] for it in items if it["row"].codes["failure_type"] == c)
            n = sum(got.values())
            if n:
                row = [(got[v] + params["beta"] * cb[j, k]) / (n + params["beta"]) for k, v in enumerate(values)]
                table[c] = {v: round(float(p), 5) for v, p in zip(values, row, strict=True) if p > 1e-5}
        data["axis_given_type"][axis] = table
        overall = Counter(it["row"].codes[axis] for it in items)
        marg = {v: (overall[v] + 1) / (len(items) + len(values)) for v in values}
        factors = {}
        for k in cp.KINDS:
            got = Counter(it["row"].codes[axis] for it, kk in zip(items, kinds, strict=True) if kk == k)
            n = sum(got.values())
            if n:
                factors[k] = {
                    v: round(float(((got[v] + 5 * marg[v]) / (n + 5) / marg[v]) ** params["gamma"]), 5) for v in values
                }
        data["kind_factor"][axis] = factors
    repos = {it["row"].repository.lower(): it["row"].repo_kind for it in items if it["row"].repo_kind}
    data["repositories"] = dict(sorted(repos.items()))
    owners: dict[str, set] = {}
    for name, kind in repos.items():
        owners.setdefault(name.split("/")[0], set()).add(kind)
    data["owners"] = {o: next(iter(k)) for o, k in sorted(owners.items()) if len(k) == 1}
    return data


def _fit_words(docs: list[str], y: list[str], params: dict) -> dict:
    full = TfidfVectorizer(stop_words="english", ngram_range=(1, 2), min_df=MIN_DF, sublinear_tf=True).fit(docs)
    model = LogisticRegression(C=params["word_c"], max_iter=400).fit(full.transform(docs), y)
    terms = full.get_feature_names_out()
    keep: set[int] = set()
    for row in model.coef_:
        keep.update(int(k) for k in np.argsort(-np.abs(row))[:TOP_TERMS])
    vocab = [str(terms[k]) for k in sorted(keep)]
    idf = [float(full.idf_[k]) for k in sorted(keep)]
    words = {"vocabulary": vocab, "idf": idf, "coef": {}, "intercept": {}}
    # Refit on the kept terms, computed exactly as annotate.suggestions.cold_prior computes them at run time.
    shim = cp.ColdPrior(
        type_codes=(), temperature=1.0, log_prior=np.zeros(0), word_weight=0.0, calibration=1.0,
        vectorizer=cp.CountVectorizer(lowercase=True, stop_words="english", ngram_range=(1, 2), vocabulary=vocab),
        idf=np.array(idf), coef=np.zeros(0), intercept=np.zeros(0), word_seen=np.zeros(0, dtype=bool),
        axis_given_type={}, kind_factor={}, repositories={}, owners={},
    )  # fmt: skip
    refit = LogisticRegression(C=params["word_c"], max_iter=400).fit(cp.word_features(shim, docs), y)
    coef = refit.coef_ if len(refit.classes_) > 2 else np.vstack([-refit.coef_[0], refit.coef_[0]])
    icpt = refit.intercept_ if len(refit.classes_) > 2 else np.array([-refit.intercept_[0], refit.intercept_[0]])
    for c, row, b in zip(refit.classes_, coef, icpt, strict=True):
        top = np.argsort(-np.abs(row))[:TOP_TERMS]
        words["coef"][str(c)] = {str(int(k)): round(float(row[k]), 4) for k in sorted(top) if abs(row[k]) > 1e-4}
        words["intercept"][str(c)] = round(float(b), 4)
    return words


def evaluate(spec, items, sims, docs, clusters, data) -> dict:
    """Cold answers of the fitted prior on held-out items: top-1/top-3 type, the axes of the top candidate, ECE."""
    prior = cp._build(spec, data)
    index = codebook_index(spec)
    codes = list(spec.type_codes)
    p = cp.type_probabilities(prior, sims, docs) * match_mass(sims)[:, None]  # as prior_type_probabilities
    top = np.argsort(-p, axis=1)[:, :3]
    y = np.array([codes.index(it["row"].codes["failure_type"]) for it in items])
    out = {"type_top1": float(np.mean(top[:, 0] == y)), "type_top3": float(np.mean((top == y[:, None]).any(1)))}
    for axis in AXES:
        values = spec.axis_codes(axis)
        pick = np.argmax(candidate_axis_prior(index, axis, p, top[:, :1], clusters, prior=prior)[:, 0, :], axis=1)
        out[axis] = float(np.mean([values[v] == it["row"].codes[axis] for v, it in zip(pick, items, strict=True)]))
    out["ece"] = calibration_error(p[np.arange(len(y)), top[:, 0]], top[:, 0] == y)
    return out


def grouped_cv(spec, items, sims, docs, params, k: int, calibrations=None) -> dict:
    repos = sorted({it["row"].repository.lower() for it in items})
    order = np.random.default_rng(7).permutation(len(repos))
    fold_of = {r: int(order[i]) % k for i, r in enumerate(repos)}
    folds = np.array([fold_of[it["row"].repository.lower()] for it in items])
    sums: Counter = Counter()
    for f in range(k):
        tr, te = np.flatnonzero(folds != f), np.flatnonzero(folds == f)
        data = fit(spec, [items[i] for i in tr], sims[tr], [docs[i] for i in tr], params)
        data["repositories"], data["owners"] = {}, {}  # held-out repositories are unseen, as the test split's are
        if calibrations is not None:
            for c in calibrations:
                data["calibration"] = c
                got = evaluate(spec, [items[i] for i in te], sims[te], [docs[i] for i in te],
                               [items[i]["row"].repository for i in te], data)  # fmt: skip
                calibrations[c].append((got["ece"] or 0.0) * len(te))
            continue
        got = evaluate(spec, [items[i] for i in te], sims[te], [docs[i] for i in te],
                       [items[i]["row"].repository for i in te], data)  # fmt: skip
        for key, v in got.items():
            sums[key] += (v or 0.0) * len(te)
    return {key: round(v / len(items), 4) for key, v in sums.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=CSV_PATH)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--codebook", type=Path, default=CODEBOOK)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help=f"write {cp.PATH.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    spec = codebook_spec_from_data(json.loads(args.codebook.read_text(encoding="utf-8")))
    items = dev_items(args.csv, args.cache or default_cache())
    if len(items) < 30:
        raise SystemExit(f"{len(items)} dev issues with a text; at least 30 are needed")
    index = codebook_index(spec)
    r = readings(index, [it["body"] for it in items], [it["title"] for it in items])
    sims = type_similarities(index, r)
    docs = list(r.english)  # what annotate.suggestions.codebook_index.prior_type_probabilities gives the word model
    results = []

    def run(params: dict) -> None:
        got = grouped_cv(spec, items, sims, docs, params, args.folds)
        # One number to choose by: type top-3 first, the axes and type top-1 after.
        got["objective"] = round(got["type_top3"] + 0.5 * got["type_top1"] + 0.25 * sum(got[a] for a in AXES), 4)
        results.append((got, params))

    middle = {"beta": 4.0, "gamma": 1.0}
    for combo in itertools.product(*TYPE_GRID.values()):
        params = dict(zip(TYPE_GRID, combo, strict=True)) | middle
        if not (params["word_weight"] == 0 and params["word_c"] != TYPE_GRID["word_c"][0]):
            run(params)
    best_type = max(results, key=lambda gp: gp[0]["objective"])[1]
    for combo in itertools.product(*AXIS_GRID.values()):
        params = best_type | dict(zip(AXIS_GRID, combo, strict=True))
        if params != best_type:
            run(params)
    results.sort(key=lambda gp: -gp[0]["objective"])
    best, params = results[0]
    # A temperature for the confidence (ranks unchanged), chosen by the grouped cross-validation's ECE. The sum of
    # per-fold ECEs weighted by fold size approximates the pooled ECE well enough to choose by.
    calibrations = {c: [] for c in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5)}
    grouped_cv(spec, items, sims, docs, params, args.folds, calibrations)
    calibration = min(calibrations, key=lambda c: sum(calibrations[c]))
    best["ece_calibrated"] = round(sum(calibrations[calibration]) / len(items), 4)
    params = params | {"calibration": calibration}
    print(f"{len(items)} dev issues, {len({it['row'].repository for it in items})} repositories; "
          f"{len(results)} settings by {args.folds}-fold cross-validation grouped by repository")  # fmt: skip
    for got, p in results[:5]:
        print(f"  {json.dumps(p)} -> {json.dumps(got)}")
    summary = {"bench": "real_issues_fit_prior", "dev_issues": len(items), "params": params, "grouped_cv": best}
    if args.write:
        data = fit(spec, items, sims, docs, params)
        data["fitted_on"] = {
            "split": "dev",
            "issues": len(items),
            "repositories": len({it["row"].repository for it in items}),
            "csv_sha256": hashlib.sha256(args.csv.read_bytes()).hexdigest(),
            "grouped_cv": best,
        }
        data["fitted_at"] = datetime.date.today().isoformat()
        cp.PATH.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {cp.PATH.relative_to(ROOT)} ({cp.PATH.stat().st_size // 1024} KB)")
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
