"""Suggestion quality on any labelled export: the local backend, cold and trained, against the most-common value.

    python bench/suggest_quality_bench.py PATH.jsonl [--codebook PATH] [--folds K] [--holdout] [--quick]

PATH is `manage.py export --format jsonl` output (or bench/suggest_eval_set.py output).
Rows whose label is usable (adjudicated, agreed or single-coder; not "none") are the
known answers. It prints, cold (codebook only) and trained (k-fold: each fold scored by
a model trained on the other folds):

- per-axis top-1 and top-3 accuracy with 95% Wilson intervals;
- the most-common-value baseline (learnt on the training folds) and whether the model
  beats it at the 95% level (one-sided exact McNemar test);
- the expected calibration error of the top-1 type confidence;
- the learning curve at 30, 60 and 120 training labels where there are enough
  (3 random draws each, scored on the rest);
- the `uncertain` queue order against random order: labels needed to reach a
  local accuracy (see annotate.suggestions._active).

Rows with `eval_fold: holdout` (the evaluation set's held-out fold) are left out unless
`--holdout` is given, which scores only them (train on the rest): look at it once.

The last line is JSON: {"bench": "suggest_quality", "n", "cold": {...}, "trained": {...}}, each of
cold and trained with type_top1, type_top3, source, stage, capability, ece and baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("FAULTLINE_DEV", "1")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402

from annotate.suggestions._active import labels_to_accuracy  # noqa: E402
from annotate.suggestions._eval import NAF, LabelledText, Measurement, cold, cross_validate, score  # noqa: E402
from annotate.suggestions.base import codebook_spec_from_data  # noqa: E402
from annotate.suggestions.local import local_fit_predict, local_predict  # noqa: E402

CODEBOOK = ROOT / "fixtures" / "codebook-v1.json"
USABLE = {"adjudicated", "agreed", "single_coder"}
CURVE = (30, 60, 120)


def load_items(path: Path, *, holdout: bool | None = False) -> list[LabelledText]:
    """Labelled rows of an export as items. holdout: False drops hold-out rows, True keeps only them, None keeps all."""
    items = []
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise SystemExit(f"{path}: line {n} is not JSON ({exc})") from None
            if row.get("label_status") not in USABLE or row.get("label_needs_new_type"):
                continue
            fold = row.get("eval_fold", "dev")
            if holdout is not None and (fold == "holdout") != holdout:
                continue
            naf = bool(row.get("label_not_a_failure"))
            ftype = NAF if naf else row.get("label_failure_type")
            if not ftype:
                continue
            items.append(
                LabelledText(
                    key=n,
                    title=row.get("title") or "",
                    text=row.get("excerpt") or "",
                    cluster=row.get("cluster") or "",
                    kind=row.get("document_kind") or "",
                    failure_type=ftype,
                    source=None if naf else row.get("label_source"),
                    stage=None if naf else row.get("label_stage"),
                    capability=None if naf else row.get("label_capability"),
                )
            )
    return items


def summary(m: Measurement) -> dict:
    a = m.axes
    out = {
        "type_top1": a["failure_type"].top1,
        "type_top3": a["failure_type"].top3,
        "source": a["source"].top1,
        "stage": a["stage"].top1,
        "capability": a["capability"].top1,
        "ece": m.ece,
        "baseline": {
            "type_top1": a["failure_type"].baseline,
            "type_top3": a["failure_type"].baseline,
            "source": a["source"].baseline,
            "stage": a["stage"].baseline,
            "capability": a["capability"].baseline,
        },
        "beats_baseline_95": {f: a[f].beats_baseline for f in a},
    }
    return out


def _pct(x: float | None) -> str:
    return "  —  " if x is None else f"{100 * x:5.1f}%"


def print_measurement(title: str, m: Measurement) -> None:
    print(f"\n{title} (n={m.n}, {m.folds} folds, ECE {m.ece}, abstained {m.abstained})")
    print(f"  {'axis':<13}{'n':>4}  {'top-1 [95% CI]':<26}{'top-3':>7}  {'baseline':>9}  {'beats (p)':>12}")
    for f, s in m.axes.items():
        ci = f"{_pct(s.top1)} [{_pct(s.top1_low)}, {_pct(s.top1_high)}]"
        beat = f"{'yes' if s.beats_baseline else 'no'} ({s.better_p if s.better_p is not None else '—'})"
        print(f"  {f:<13}{s.n:>4}  {ci:<26}{_pct(s.top3):>7}  {_pct(s.baseline):>9}  {beat:>12}")


def learning_curve(spec, items: list[LabelledText], sizes=CURVE, draws: int = 3) -> dict[str, dict]:
    out = {}
    for size in sizes:
        if len(items) - size < 10:
            continue
        rows = []
        for d in range(draws):
            order = np.random.default_rng(1000 + d).permutation(len(items))
            train = [items[i] for i in order[:size]]
            test = [items[i] for i in order[size:]]
            answers = local_fit_predict(spec, train, test)
            m = score(test, answers, [{}] * len(test), folds=1)
            rows.append({f: m.axes[f].top1 or 0.0 for f in m.axes} | {"type_top3": m.axes["failure_type"].top3})
        out[str(size)] = {k: round(float(np.mean([r[k] for r in rows])), 4) for k in rows[0]}
        out[str(size)]["test_n"] = len(items) - size
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="Suggestion quality on a labelled JSONL export.")
    parser.add_argument("path", type=Path)
    parser.add_argument("--codebook", type=Path, default=CODEBOOK)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--holdout", action="store_true", help="score the held-out fold only (look once)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 folds, no curve or active learning")
    args = parser.parse_args(argv)
    if not args.path.exists():
        raise SystemExit(f"{args.path}: no such file")
    spec = codebook_spec_from_data(json.loads(args.codebook.read_text(encoding="utf-8")))
    started = time.perf_counter()
    if args.holdout:
        train = load_items(args.path, holdout=False)
        items = load_items(args.path, holdout=True)
        base = {}
        from annotate.suggestions._eval import FIELDS, _majority

        base = {f: _majority(train, f) for f in FIELDS}
        cold_m = score(items, local_predict(spec, items), [base] * len(items), folds=1)
        trained_m = score(items, local_fit_predict(spec, train, items), [base] * len(items), folds=1)
    else:
        items = load_items(args.path, holdout=False)
        if len(items) < 10:
            raise SystemExit(f"{args.path}: {len(items)} usable labelled rows; at least 10 are needed")
        k = 3 if args.quick else args.folds
        cold_m = cold(items, lambda test: local_predict(spec, test), k=k)
        trained_m = cross_validate(items, lambda train, test: local_fit_predict(spec, train, test), k=k)
    print(f"{args.path}: {len(items)} labelled rows{' (hold-out fold)' if args.holdout else ''}")
    print_measurement("Cold start (codebook only)", cold_m)
    print_measurement("Trained (k-fold)", trained_m)
    result = {"bench": "suggest_quality", "n": len(items), "cold": summary(cold_m), "trained": summary(trained_m)}
    if not args.quick and not args.holdout:
        curve = learning_curve(spec, items)
        print("\nLearning curve (mean of 3 draws; top-1 per axis, type top-3):")
        for size, row in curve.items():
            print(f"  {size:>4} labels (test {row['test_n']}): " + ", ".join(f"{k} {v}" for k, v in row.items()))
        result["learning_curve"] = curve
        active = labels_to_accuracy(spec, items)
        print(f"\nQueue order 'uncertain' vs 'random': {json.dumps(active)}")
        result["active_learning"] = active
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
