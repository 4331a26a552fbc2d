"""The labelled evaluation set for the suggesters, in the shape of a study export (JSONL).

    python bench/suggest_eval_set.py OUT.jsonl [--samples DIR] [--gold PATH]

It reads the shipped samples (fixtures/samples: GitHub issues and literature
records) through the real importers, and their intended codes from
gold_labels.json (by default /work/shared/samples/gold_labels.json when it
exists, else fixtures/samples/gold_labels.json), and writes one row per labelled
sample with the columns of `manage.py export --format jsonl` that the quality
bench reads (title, excerpt, cluster, document_kind, label_*).

Each row also carries `eval_fold`: "dev" or "holdout". The hold-out fold (about
a fifth of the rows, chosen by a hash of the sample id, so it never depends on
what the model does) is for one final look only: the quality bench leaves it out
unless it is given `--holdout`, and nothing in the model was tuned on it.
"""

from __future__ import annotations

import argparse
import hashlib
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

from annotate.imports.parsed import Record, Skip  # noqa: E402
from annotate.imports.parsers import github_record, iter_csv  # noqa: E402

SAMPLES = ROOT / "fixtures" / "samples"
SHARED_GOLD = Path("/work/shared/samples/gold_labels.json")
HOLDOUT_SHARE = 0.2


def eval_fold(sample_id: str) -> str:
    """A fixed fold from the sample's id alone: the same row is always dev or always hold-out."""
    h = int(hashlib.sha256(f"faultline-eval:{sample_id}".encode()).hexdigest()[:8], 16)
    return "holdout" if h / 0xFFFFFFFF < HOLDOUT_SHARE else "dev"


def _records(samples: Path) -> list[Record]:
    out: list[Record] = []
    items = json.loads((samples / "github_issues.json").read_text(encoding="utf-8"))
    for n, item in enumerate(items, start=1):
        record = github_record(item, n)
        if not isinstance(record, Skip):
            out.append(record)
    with (samples / "literature.csv").open(encoding="utf-8", newline="") as fh:
        out.extend(iter_csv(fh))
    return out


def _sample_id(record: Record) -> str:
    return record.url if record.kind == "github_issue" else record.external_id


def eval_rows(samples: Path = SAMPLES, gold: Path | None = None) -> list[dict]:
    """Export-shaped rows for every sample with a gold label, in file order."""
    gold = gold or (SHARED_GOLD if SHARED_GOLD.exists() else samples / "gold_labels.json")
    labels = {g["id"]: g for g in json.loads(gold.read_text(encoding="utf-8"))}
    rows = []
    for record in _records(samples):
        label = labels.get(_sample_id(record))
        if label is None:
            continue
        naf = bool(label.get("not_a_failure"))
        rows.append(
            {
                "study": "eval",
                "document_kind": record.kind,
                "external_id": record.external_id,
                "url": record.url,
                "cluster": record.cluster,
                "title": record.title,
                "excerpt": record.body,
                "whole_document": True,
                "label_status": "adjudicated",
                "label_failure_type": None if naf else label["failure_type"],
                "label_source": None if naf else label["source"],
                "label_stage": None if naf else label["stage"],
                "label_capability": None if naf else label["capability"],
                "label_not_a_failure": naf,
                "label_needs_new_type": False,
                "eval_fold": eval_fold(_sample_id(record)),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--samples", type=Path, default=SAMPLES)
    parser.add_argument("--gold", type=Path, default=None)
    args = parser.parse_args()
    rows = eval_rows(args.samples, args.gold)
    with args.out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    folds = {f: sum(r["eval_fold"] == f for r in rows) for f in ("dev", "holdout")}
    print(f"wrote {len(rows)} labelled rows to {args.out} ({folds['dev']} dev, {folds['holdout']} hold-out)")


if __name__ == "__main__":
    main()
