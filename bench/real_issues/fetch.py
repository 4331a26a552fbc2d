"""Fetch the title and body of every issue in issues.csv into the text cache, through the project's GitHub client.

    python bench/real_issues/fetch.py [--csv PATH] [--cache DIR]

The texts are not in git (the licence of GitHub user content is unclear); this rebuilds them. Files already in
the cache are skipped, so a run stopped by a rate limit is resumed by running it again. GITHUB_TOKEN (optional,
for the higher rate limit) and GITHUB_API_URL are read from the environment like everywhere else. The cache
defaults to $FAULTLINE_REAL_ISSUES_CACHE, else ~/.cache/faultline/real-issues.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("FAULTLINE_DEV", "1")

import django  # noqa: E402

django.setup()

from annotate.imports.github import GitHubClient, GitHubError, RateLimited  # noqa: E402
from bench.real_issues.dataset import CSV_PATH, Row, default_cache, parse_url, read_csv, text_path  # noqa: E402


def cached_text(issue: dict, row: Row) -> dict:
    """The cache's JSON for one issue as the REST API gives it (the format of DATASET.md)."""
    repo, number = parse_url(row.url)
    return {
        "url": row.url,
        "repository": repo,
        "number": number,
        "title": issue.get("title") or "",
        "body": issue.get("body") or "",
        "labels": [lbl.get("name", "") for lbl in issue.get("labels") or [] if isinstance(lbl, dict)],
        "state": issue.get("state") or "",
        "created_at": str(issue.get("created_at") or "")[:10],
        "author_role": "description",
        "language": row.language,
        "repo_kind": row.repo_kind,
        "fetched_from": "github-rest-api",
    }


def fetch_all(rows: list[Row], cache: Path, client: GitHubClient) -> dict[str, int]:
    """Fetch every row's issue not yet cached; count fetched, skipped (present) and failed ones."""
    counts = {"fetched": 0, "skipped": 0, "failed": 0}
    for row in rows:
        path = text_path(cache, row.url)
        if path.is_file():
            counts["skipped"] += 1
            continue
        repo, number = parse_url(row.url)
        try:
            issue = client.issue(repo, number)
        except RateLimited:
            raise
        except GitHubError as exc:
            print(f"{row.url}: {exc}", file=sys.stderr)
            counts["failed"] += 1
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        tmp.write_text(json.dumps(cached_text(issue, row), ensure_ascii=False, indent=1), encoding="utf-8")
        tmp.replace(path)  # a stopped run never leaves a half-written file that the next run would skip
        counts["fetched"] += 1
    return counts


def main(argv: list[str] | None = None) -> dict[str, int]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=CSV_PATH)
    parser.add_argument("--cache", type=Path, default=None, help="default: $FAULTLINE_REAL_ISSUES_CACHE")
    args = parser.parse_args(argv)
    cache = args.cache or default_cache()
    rows = read_csv(args.csv)
    try:
        with GitHubClient() as client:
            counts = fetch_all(rows, cache, client)
    except RateLimited as exc:
        raise SystemExit(f"{exc}\nWhat was fetched is kept in {cache}; run again to go on.") from None
    print(f"{len(rows)} issues: {counts['fetched']} fetched, {counts['skipped']} already cached, "
          f"{counts['failed']} failed, in {cache}")  # fmt: skip
    print(json.dumps({"bench": "real_issues_fetch", "cache": str(cache), **counts}))
    return counts


if __name__ == "__main__":
    main()
