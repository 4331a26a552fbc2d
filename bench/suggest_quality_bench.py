"""Suggestion quality on any labelled export: the local backend, cold and trained, against the most-common value.

    python bench/suggest_quality_bench.py PATH.jsonl [--codebook PATH] [--folds K] [--split S] [--holdout] [--quick]
        [--no-curve] [--record]

PATH is `manage.py export --format jsonl` output (or bench/suggest_eval_set.py output).
Rows whose label is usable (adjudicated, agreed or single-coder; not "none") are the
known answers. It prints, cold (codebook only) and trained (k-fold: each fold scored by
a model trained on the other folds):

- per-axis top-1 and top-3 accuracy with 95% Wilson intervals;
- the most-common-value baseline (learnt on the training folds) and whether the model
  beats it at the 95% level (one-sided exact McNemar test); the top-3 floor is the three
  most common values, against the model's top 3;
- the expected calibration error of the top-1 type confidence, with a bootstrap interval;
- the share of top-1 evidence quotes that are template scaffolding (headings, form labels,
  checkboxes) or cut inside a word, by the bench's own check (bench/template_quotes.py);
- the learning curve at 30, 60 and 120 training labels where there are enough
  (3 random draws each, scored on the rest);
- the `uncertain` queue order against random order: labels needed to reach a
  local accuracy (see annotate.suggestions._active).

Rows with `eval_fold: holdout` (the evaluation set's held-out fold) are left out unless
`--holdout` is given, which scores only them (train on the rest): look at it once.
`--split test` keeps only rows whose `split` is "test" (bench/real_issues/build_export.py --split all
writes both splits of the real-issue set into one file). `--record` saves the figures to
annotate/suggestions/real_issues.json, which README.md and the Suggestions page show: record the real-issue
test split only.

The last line is JSON: {"bench": "suggest_quality", "n", "cold": {...}, "trained": {...},
"quotes_template_share"}, each of cold and trained with type_top1, type_top3, source, stage, capability,
ece, baseline (type_top3 there is the top-3 floor), intervals, p_values and quotes_template_share.
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
from annotate.suggestions._eval import NAF, LabelledText, Measurement, cross_validate, floors, score  # noqa: E402
from annotate.suggestions.base import Answer, codebook_spec_from_data  # noqa: E402
from annotate.suggestions.local import local_fit_predict, local_predict  # noqa: E402
from bench.template_quotes import template_share  # noqa: E402
from lib.stats.intervals import wilson  # noqa: E402

CODEBOOK = ROOT / "fixtures" / "codebook-v1.json"
USABLE = {"adjudicated", "agreed", "single_coder"}
CURVE = (30, 60, 120)
RECORD = ROOT / "annotate" / "suggestions" / "real_issues.json"


def load_items(path: Path, *, holdout: bool | None = False, split: str | None = None) -> list[LabelledText]:
    """Labelled rows of an export as items. holdout: False drops hold-out rows, True keeps only them, None keeps all.
    split: only rows whose `split` column has this value."""
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
            if split is not None and row.get("split") != split:
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


def summary(m: Measurement, quotes: dict | None = None) -> dict:
    a = m.axes
    keys = {"type_top1": ("failure_type", "top1"), "type_top3": ("failure_type", "top3"), "source": ("source", "top1"),
            "stage": ("stage", "top1"), "capability": ("capability", "top1")}  # fmt: skip
    floor = {k: (a[f].baseline3 if top == "top3" else a[f].baseline) for k, (f, top) in keys.items()}
    out = {
        **{k: getattr(a[f], top) for k, (f, top) in keys.items()},
        "ece": m.ece,
        "baseline": floor,
        "beats_baseline_95": {f: a[f].beats_baseline for f in a},
        "intervals": {k: [getattr(a[f], f"{top}_low"), getattr(a[f], f"{top}_high")] for k, (f, top) in keys.items()}
        | {"ece": [m.ece_low, m.ece_high]},
        "baseline_intervals": {
            k: [a[f].baseline3_low, a[f].baseline3_high] if top == "top3" else [a[f].baseline_low, a[f].baseline_high]
            for k, (f, top) in keys.items()
        },
        "p_values": {k: a[f].better3_p if top == "top3" else a[f].better_p for k, (f, top) in keys.items()},
        "n_per_axis": {k: a[f].n for k, (f, _) in keys.items()},
        "abstained": m.abstained,
    }
    out["beats_floor_95"] = {k: p is not None and p < 0.05 for k, p in out["p_values"].items()}
    if quotes is not None:
        out["quotes_template_share"] = quotes["share"]
        out["quotes"] = quotes
    return out


def quote_check(items: list[LabelledText], answers: dict[int, Answer]) -> dict:
    """The top-1 evidence quotes of the answers, by the bench's own template check, with a Wilson interval."""
    pairs = []
    for item in items:
        answer = answers.get(item.key)
        if answer is not None and answer.candidates:
            pairs.append((answer.candidates[0].evidence or "", item.text))
    bad, n, reasons = template_share(pairs)
    w = wilson(bad, n)
    return {"share": None if not n else round(bad / n, 4), "template": bad, "quotes": n,
            "interval": [None if w.low is None else round(w.low, 4), None if w.high is None else round(w.high, 4)],
            "reasons": reasons}  # fmt: skip


def _pct(x: float | None) -> str:
    return "  —  " if x is None else f"{100 * x:5.1f}%"


def print_measurement(title: str, m: Measurement, quotes: dict | None = None) -> None:
    ece_ci = f" [{m.ece_low}, {m.ece_high}]" if m.ece_low is not None else ""
    print(f"\n{title} (n={m.n}, {m.folds} folds, ECE {m.ece}{ece_ci}, abstained {m.abstained})")
    print(f"  {'axis':<13}{'n':>4}  {'top-1 [95% CI]':<26}{'floor':>7}  {'beats (p)':>12}   "
          f"{'top-3 [95% CI]':<26}{'floor-3':>8}  {'beats (p)':>12}")  # fmt: skip
    for f, s in m.axes.items():
        ci = f"{_pct(s.top1)} [{_pct(s.top1_low)}, {_pct(s.top1_high)}]"
        ci3 = f"{_pct(s.top3)} [{_pct(s.top3_low)}, {_pct(s.top3_high)}]"
        beat = f"{'yes' if s.beats_baseline else 'no'} ({s.better_p if s.better_p is not None else '—'})"
        beat3 = "yes" if s.better3_p is not None and s.better3_p < 0.05 else "no"
        beat3 = f"{beat3} ({s.better3_p if s.better3_p is not None else '—'})"
        print(f"  {f:<13}{s.n:>4}  {ci:<26}{_pct(s.baseline):>7}  {beat:>12}   {ci3:<26}{_pct(s.baseline3):>8}  "
              f"{beat3:>12}")  # fmt: skip
    if quotes is not None and quotes["quotes"]:
        lo, hi = quotes["interval"]
        print(f"  top-1 quotes that are template or cut words: {quotes['template']}/{quotes['quotes']} "
              f"({_pct(quotes['share'])} [{_pct(lo)}, {_pct(hi)}]) {quotes['reasons']}")  # fmt: skip


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


def _capturing(fit_predict, into: dict[int, Answer]):
    """fit_predict that also keeps each test item's answer by item key (for the quote check)."""

    def run(train, test):
        answers = fit_predict(train, test)
        into.update({item.key: a for item, a in zip(test, answers, strict=True)})
        return answers

    return run


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="Suggestion quality on a labelled JSONL export.")
    parser.add_argument("path", type=Path)
    parser.add_argument("--codebook", type=Path, default=CODEBOOK)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--split", default=None, help="only rows whose `split` column has this value (e.g. test)")
    parser.add_argument("--holdout", action="store_true", help="score the held-out fold only (look once)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 folds, no curve or active learning")
    parser.add_argument("--no-curve", action="store_true", help="skip the learning curve and the queue-order check")
    parser.add_argument("--record", action="store_true", help=f"save the figures to {RECORD.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    if not args.path.exists():
        raise SystemExit(f"{args.path}: no such file")
    spec = codebook_spec_from_data(json.loads(args.codebook.read_text(encoding="utf-8")))
    started = time.perf_counter()
    cold_answers: dict[int, Answer] = {}
    trained_answers: dict[int, Answer] = {}
    if args.holdout:
        train = load_items(args.path, holdout=False, split=args.split)
        items = load_items(args.path, holdout=True, split=args.split)
        base = floors(train)
        cold_list = local_predict(spec, items)
        trained_list = local_fit_predict(spec, train, items)
        cold_answers.update({i.key: a for i, a in zip(items, cold_list, strict=True)})
        trained_answers.update({i.key: a for i, a in zip(items, trained_list, strict=True)})
        cold_m = score(items, cold_list, [base] * len(items), folds=1)
        trained_m = score(items, trained_list, [base] * len(items), folds=1)
    else:
        items = load_items(args.path, holdout=False, split=args.split)
        if len(items) < 10:
            raise SystemExit(f"{args.path}: {len(items)} usable labelled rows; at least 10 are needed")
        k = 3 if args.quick else args.folds
        cold_m = cross_validate(items, _capturing(lambda train, test: local_predict(spec, test), cold_answers), k=k)
        trained_m = cross_validate(
            items, _capturing(lambda train, test: local_fit_predict(spec, train, test), trained_answers), k=k
        )
    cold_q, trained_q = quote_check(items, cold_answers), quote_check(items, trained_answers)
    split = f", split {args.split}" if args.split else ""
    print(f"{args.path}: {len(items)} labelled rows{' (hold-out fold)' if args.holdout else ''}{split}")
    print_measurement("Cold start (codebook only)", cold_m, cold_q)
    print_measurement("Trained (k-fold)", trained_m, trained_q)
    shares = [q["share"] for q in (cold_q, trained_q) if q["share"] is not None]
    result = {
        "bench": "suggest_quality",
        "n": len(items),
        "split": args.split,
        "cold": summary(cold_m, cold_q),
        "trained": summary(trained_m, trained_q),
        # The worse of the two: the same quote chooser serves both.
        "quotes_template_share": max(shares) if shares else None,
    }
    if not args.quick and not args.holdout and not args.no_curve:
        curve = learning_curve(spec, items)
        print("\nLearning curve (mean of 3 draws; top-1 per axis, type top-3):")
        for size, row in curve.items():
            print(f"  {size:>4} labels (test {row['test_n']}): " + ", ".join(f"{k} {v}" for k, v in row.items()))
        result["learning_curve"] = curve
        active = labels_to_accuracy(spec, items)
        print(f"\nQueue order 'uncertain' vs 'random': {json.dumps(active)}")
        result["active_learning"] = active
    result["seconds"] = round(time.perf_counter() - started, 1)
    if args.record:
        record_write(result, source=args.path.name)
    print(json.dumps(result))
    return result


def record_write(result: dict, *, source: str) -> None:
    """Keep the figures for README.md and the Suggestions page (annotate.suggestions.real_issues reads them)."""
    keep = {k: result[k] for k in ("n", "split", "cold", "trained", "quotes_template_share")}
    keep["export"] = source
    RECORD.write_text(json.dumps(keep, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    from annotate.suggestions import real_issues

    real_issues.record.cache_clear()
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    start, end = "<!-- real-issues:start -->\n", "<!-- real-issues:end -->"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        readme.write_text(f"{head}{start}{real_issues.readme_block()}\n{end}{rest.split(end, 1)[1]}", encoding="utf-8")
    print(f"recorded to {RECORD.relative_to(ROOT)} and README.md's real-issue block")


if __name__ == "__main__":
    main()
