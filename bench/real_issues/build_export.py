"""Turn issues.csv and the text cache into a labelled JSONL export, the file the quality bench reads.

    python bench/real_issues/build_export.py OUT.jsonl [--split test|dev|all] [--csv PATH] [--cache DIR]

Each row is shaped like `manage.py export --format jsonl` output for an imported GitHub issue (document kind
github_issue, cluster = repository, excerpt = the body, label_status "adjudicated" when the two passes were
adjudicated, else "agreed"), so `bench/suggest_quality_bench.py OUT.jsonl` measures exactly what the outside
check measures on its own export. Rows whose text is not cached are left out and counted (run fetch.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.real_issues.dataset import CSV_PATH, Row, default_cache, read_csv, read_text  # noqa: E402


def export_row(row: Row, text: dict) -> dict:
    return {
        "study": "real-issues",
        "document_kind": "github_issue",
        "external_id": row.url,
        "url": row.url,
        "cluster": row.repository,
        "title": text.get("title") or "",
        "split": row.split,
        "excerpt": text.get("body") or "",
        "whole_document": True,
        "label_status": "adjudicated" if row.adjudicated else "agreed",
        "label_failure_type": row.codes["failure_type"],
        "label_source": row.codes["source"],
        "label_stage": row.codes["stage"],
        "label_capability": row.codes["capability"],
        "label_not_a_failure": False,
        "label_needs_new_type": False,
    }


def build(rows: list[Row], cache: Path, split: str) -> tuple[list[dict], list[str]]:
    """Export rows of the split, in CSV order, and the URLs left out for want of a cached text."""
    out, missing = [], []
    for row in rows:
        if split != "all" and row.split != split:
            continue
        text = read_text(cache, row.url)
        if text is None:
            missing.append(row.url)
            continue
        out.append(export_row(row, text))
    return out, missing


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--split", choices=("test", "dev", "all"), default="test")
    parser.add_argument("--csv", type=Path, default=CSV_PATH)
    parser.add_argument("--cache", type=Path, default=None, help="default: $FAULTLINE_REAL_ISSUES_CACHE")
    args = parser.parse_args(argv)
    rows, missing = build(read_csv(args.csv), args.cache or default_cache(), args.split)
    with args.out.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    repos = len({r["cluster"] for r in rows})
    print(f"wrote {len(rows)} rows ({repos} repositories, split {args.split}) to {args.out}; "
          f"{len(missing)} without a cached text (run fetch.py)")  # fmt: skip
    summary = {"bench": "real_issues_export", "split": args.split, "rows": len(rows), "missing": len(missing)}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
