"""Cross-language agreement of the local suggester: the same report in English and in other languages.

    python bench/suggest_multilingual_bench.py [--holdout | --fold five] [--quick] [--codebook PATH]

Reads report groups from fixtures/multilingual/dev.json (or holdout.json with
--holdout: look at it once; or five.json with --fold five: five reports, each in
English, Spanish, German, Portuguese, Chinese and Japanese). Each group is one
agent-failure report written in English and translated, with the failure type its
author intended. For the cold-start local model it prints:

- agreement: the share of (English, translation) pairs whose top-1 types are the same;
- en_top1: the share of English reports whose top-1 is the intended type;
- other_top1: the same for the translations;
- declined: translations the model declined as a language it does not read;
- unsure: translations answered below the confidence floor (no default Accept);
- confident_wrong: translations whose top-1 differs from the English one at or above
  the floor (the failure that must not happen), and per language the same figures.

The last line is JSON: {"bench": "suggest_multilingual", "fold", "groups", "pairs",
"agreement", "en_top1", "other_top1", "declined", "unsure", "confident_wrong",
"by_language": {...}, "disagreements": [...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("FAULTLINE_DEV", "1")

import django  # noqa: E402

django.setup()

from annotate.suggestions.base import codebook_spec_from_data  # noqa: E402
from annotate.suggestions.local import LocalSuggester  # noqa: E402

CODEBOOK = ROOT / "fixtures" / "codebook-v1.json"
PAIRS = ROOT / "fixtures" / "multilingual"
FLOOR = 0.3  # a study's default suggestion_min_confidence: below it, no default Accept


def load_groups(fold: str = "dev") -> list[dict]:
    """The report groups of a fold ("dev", "holdout" or "five"): id, intended type, and reports by language."""
    return json.loads((PAIRS / f"{fold}.json").read_text(encoding="utf-8"))["pairs"]


def measure(suggester: LocalSuggester, groups: list[dict]) -> dict:
    """Top-1 agreement between each English report and its translations, and top-1 accuracy against the intent."""
    texts, titles, where = [], [], []
    for g in groups:
        for lang, report in g["reports"].items():
            texts.append(report["body"])
            titles.append(report["title"])
            where.append((g["id"], lang))
    answers = suggester.suggest_texts(texts, None, titles)
    top = {key: (a.top.failure_type if a.top else None) for key, a in zip(where, answers, strict=True)}
    conf = {key: (a.top.confidence if a.top else 0.0) for key, a in zip(where, answers, strict=True)}
    pairs = agree = en_right = other_right = declined = unsure = confident_wrong = 0
    disagreements = []
    by_language: dict[str, dict[str, int]] = {}
    for g in groups:
        en = top[(g["id"], "en")]
        en_right += en == g["type"]
        for lang in g["reports"]:
            if lang == "en":
                continue
            other = top[(g["id"], lang)]
            pairs += 1
            agree += other == en
            other_right += other == g["type"]
            declined += other is None
            low = other is not None and conf[(g["id"], lang)] < FLOOR
            unsure += low
            wrong = other is not None and other != en and not low
            confident_wrong += wrong
            row = by_language.setdefault(
                lang, {"pairs": 0, "agree": 0, "declined": 0, "unsure": 0, "confident_wrong": 0}
            )
            row["pairs"] += 1
            row["agree"] += other == en
            row["declined"] += other is None
            row["unsure"] += low
            row["confident_wrong"] += wrong
            if other != en:
                disagreements.append(
                    {"id": g["id"], "lang": lang, "intended": g["type"], "en": en, "other": other,
                     "confidence": conf[(g["id"], lang)]}
                )  # fmt: skip
    return {
        "groups": len(groups),
        "pairs": pairs,
        "agreement": round(agree / max(pairs, 1), 4),
        "en_top1": round(en_right / max(len(groups), 1), 4),
        "other_top1": round(other_right / max(pairs, 1), 4),
        "declined": declined,
        "unsure": unsure,
        "confident_wrong": confident_wrong,
        "by_language": by_language,
        "disagreements": disagreements,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description="Cross-language top-1 agreement of the local suggester.")
    parser.add_argument("--codebook", type=Path, default=CODEBOOK)
    parser.add_argument("--holdout", action="store_true", help="the held-out groups (look once)")
    parser.add_argument("--fold", choices=["dev", "holdout", "five"], default="dev")
    parser.add_argument("--quick", action="store_true", help="a smoke run: the first 4 groups")
    args = parser.parse_args(argv)
    fold = "holdout" if args.holdout else args.fold
    groups = load_groups(fold)[: 4 if args.quick else None]
    spec = codebook_spec_from_data(json.loads(args.codebook.read_text(encoding="utf-8")))
    result = {"bench": "suggest_multilingual", "fold": fold} | measure(LocalSuggester(spec), groups)
    for d in result["disagreements"]:
        print(
            f"  {d['id']:<36} {d['lang']}: en {d['en']}, {d['lang']} {d['other']} at {d['confidence']:.2f} "
            f"(intended {d['intended']})"
        )
    print(
        f"{fold}: {result['groups']} reports, {result['pairs']} translations; agreement {result['agreement']}, "
        f"English top-1 {result['en_top1']}, translations top-1 {result['other_top1']}; declined {result['declined']}, "
        f"unsure {result['unsure']}, confident and wrong {result['confident_wrong']}"
    )
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
