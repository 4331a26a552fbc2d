"""The real-issue development set: its CSV, its repository split and its text cache (no Django, no network).

bench/real_issues/issues.csv holds URLs and codes only; the issue texts stay outside git (their licence is
unclear) in a cache directory of `<owner>__<repo>__<number>.json` files, filled by fetch.py.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSV_PATH = HERE / "issues.csv"
COLUMNS = (
    "url", "repository", "split", "language", "repo_kind", "source", "failure_type", "stage", "capability",
    "source_a", "failure_type_a", "stage_a", "capability_a", "source_b", "failure_type_b", "stage_b", "capability_b",
    "adjudicated",
)  # fmt: skip
CODES = ("source", "failure_type", "stage", "capability")
SPLITS = ("dev", "test")
TEST_SHARE = 40  # percent of repositories
_URL = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/issues/(\d+)/?$")


def split_of(repository: str) -> str:
    """The split of a repository: "test" for about 40% of repositories by a hash of the lower-cased name."""
    return "test" if int(hashlib.sha256(repository.lower().encode()).hexdigest(), 16) % 100 < TEST_SHARE else "dev"


def parse_url(url: str) -> tuple[str, int]:
    """("owner/repo", number) of an issue URL; ValueError for anything else."""
    m = _URL.match(url.strip())
    if not m:
        raise ValueError(f"not a GitHub issue URL: {url!r}")
    return f"{m.group(1)}/{m.group(2)}", int(m.group(3))


def cache_name(url: str) -> str:
    repo, number = parse_url(url)
    return f"{repo.replace('/', '__')}__{number}.json"


def default_cache() -> Path:
    env = os.environ.get("FAULTLINE_REAL_ISSUES_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "faultline" / "real-issues"


def text_path(cache: Path, url: str) -> Path:
    """Where a cached text lives: `<cache>/texts/<name>` when the cache has a texts/ folder, else `<cache>/<name>`."""
    folder = cache / "texts" if (cache / "texts").is_dir() else cache
    return folder / cache_name(url)


@dataclass(frozen=True)
class Row:
    url: str
    repository: str
    split: str
    language: str
    repo_kind: str
    codes: dict[str, str]
    adjudicated: bool = False


def read_csv(path: Path = CSV_PATH) -> list[Row]:
    """The rows of issues.csv, checked: known columns, a URL matching its repository, the split rule, four codes."""
    rows = []
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = set(COLUMNS[:9]) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing columns {sorted(missing)}")
        for n, rec in enumerate(reader, start=2):
            repo, _ = parse_url(rec["url"])
            if repo.lower() != rec["repository"].strip().lower():
                raise ValueError(f"{path}: line {n}: the URL is not in repository {rec['repository']!r}")
            if rec["split"] != split_of(rec["repository"]):
                raise ValueError(f"{path}: line {n}: split {rec['split']!r} breaks the repository hash rule")
            codes = {c: (rec.get(c) or "").strip() for c in CODES}
            if not all(codes.values()):
                raise ValueError(f"{path}: line {n}: a final code is empty")
            rows.append(
                Row(
                    url=rec["url"].strip().rstrip("/"),
                    repository=rec["repository"].strip(),
                    split=rec["split"],
                    language=(rec.get("language") or "").strip(),
                    repo_kind=(rec.get("repo_kind") or "").strip(),
                    codes=codes,
                    adjudicated=(rec.get("adjudicated") or "").strip().lower() in ("1", "true", "yes"),
                )
            )
    return rows


def read_text(cache: Path, url: str) -> dict | None:
    path = text_path(cache, url)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
