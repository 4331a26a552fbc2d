"""Import throughput and memory: synthetic GitHub issues through the real importer.

    python bench/import_bench.py            # 10,000 issues from 300 repos (+ a 50,000 run for memory)
    python bench/import_bench.py --quick    # a small smoke run (the test suite runs this)
    DATABASE_URL=postgres://... python bench/import_bench.py   # the same on PostgreSQL

Each size runs in its own child process on a fresh database (a new SQLite file,
or a fresh PostgreSQL database next to the one DATABASE_URL names, dropped
afterwards), so the peak RSS of each run is its own. The first import and a
no-change re-import of the same file are timed side by side in the 10,000 run.
Targets: >= 4,000 issues/s first import, >= 8,000/s re-import, < 150 MB peak
growth from 10,000 to 50,000 issues. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = [
    "agent",
    "tool",
    "call",
    "timeout",
    "retry",
    "planner",
    "memory",
    "context",
    "window",
    "token",
    "limit",
    "provider",
    "error",
    "sandbox",
    "browser",
    "click",
    "selector",
    "schema",
    "json",
    "parse",
    "loop",
    "step",
    "trace",
    "log",
    "output",
    "verifier",
    "test",
    "patch",
    "repo",
    "rate",
    "limit",
    "429",
    "stream",
    "chunk",
    "embedding",
    "vector",
    "index",
    "cache",
    "stale",
    "config",
    "env",
    "variable",
]


def synthetic_issue(rng: random.Random, n: int, repo: str, number: int) -> dict:
    """An issue shaped like GET /repos/{owner}/{repo}/issues returns it, with a ~2 KB body."""
    words = " ".join(rng.choice(WORDS) for _ in range(150))
    log = "\n".join(f"2025-01-01T00:00:{i:02d}Z DEBUG step={i} tool=search status=ok" for i in range(14))
    body = f"The agent fails at step {n}.\r\n\r\n{words}\r\n\r\n```\n{log}\n```\n\nExpected: it stops."
    api = f"https://api.github.com/repos/{repo}"
    return {
        "url": f"{api}/issues/{number}",
        "repository_url": api,
        "labels_url": f"{api}/issues/{number}/labels{{/name}}",
        "comments_url": f"{api}/issues/{number}/comments",
        "events_url": f"{api}/issues/{number}/events",
        "html_url": f"https://github.com/{repo}/issues/{number}",
        "id": 3_000_000_000 + n,
        "node_id": f"I_kwDO{n:012d}",
        "number": number,
        "title": f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)} fails after {rng.randint(2, 500)} steps",
        "user": {"login": f"user{rng.randint(1, 5000)}", "id": rng.randint(1, 10**8), "type": "User"},
        "labels": [
            {"id": 5_000_000_000 + i, "name": name, "color": "ededed", "default": False, "description": None}
            for i, name in enumerate(rng.sample(["bug", "agent", "tools", "providers", "memory", "ux"], 2))
        ],
        "state": rng.choice(["open", "closed"]),
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": rng.randint(0, 12),
        "created_at": "2025-01-02T10:00:00Z",
        "updated_at": "2025-02-03T11:00:00Z",
        "closed_at": None,
        "author_association": "NONE",
        "active_lock_reason": None,
        "body": body,
        "state_reason": None,
    }


def write_issues(path: Path, n: int, repos: int = 300, seed: int = 7) -> None:
    """Stream n issues from `repos` repositories into a JSON array file (constant memory)."""
    rng = random.Random(seed)
    names = [f"org{r % 97}/agent-repo-{r}" for r in range(repos)]
    counters = dict.fromkeys(names, 0)
    with path.open("w", encoding="utf-8") as fh:
        fh.write("[\n")
        for i in range(n):
            repo = names[i % repos]
            counters[repo] += 1
            fh.write(("," if i else "") + json.dumps(synthetic_issue(rng, i, repo, counters[repo])) + "\n")
        fh.write("]\n")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child(args: argparse.Namespace) -> None:
    """Import args.file into a fresh database; print one JSON line of figures."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("FAULTLINE_DEV", "1")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    vendor = connection.vendor
    if vendor == "postgresql":
        connection.settings_dict["TEST"]["NAME"] = f"{connection.settings_dict['NAME']}_import_bench"
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    else:
        call_command("migrate", verbosity=0)
    try:
        from annotate.imports.services import import_file
        from annotate.models import Document, Episode
        from annotate.studies.services import study_create
        from taxonomy.services import codebook_load, codebook_read_file

        codebook = codebook_load(data=codebook_read_file(ROOT / "fixtures" / "codebook-v1.json"), publish=True)
        study = study_create(slug="bench", name="Import bench", codebook=codebook.codebook)
        base_mb = peak_rss_mb()
        started, cpu = time.perf_counter(), time.process_time()
        first = import_file(study=study, path=args.file)
        first_s, first_cpu = time.perf_counter() - started, time.process_time() - cpu
        assert first.created == args.n, first.summary()
        figures = {"n": args.n, "first_s": first_s, "first_cpu_s": first_cpu, "base_mb": base_mb, "db": vendor}
        if args.reimport:
            started, cpu = time.perf_counter(), time.process_time()
            again = import_file(study=study, path=args.file)
            figures["reimport_s"] = time.perf_counter() - started
            figures["reimport_cpu_s"] = time.process_time() - cpu
            assert again.unchanged == args.n and again.created == again.updated == 0, again.summary()
        assert Document.objects.filter(study=study).count() == Episode.objects.filter(study=study).count() == args.n
        figures["peak_mb"] = peak_rss_mb()
        print(json.dumps(figures))
    finally:
        if vendor == "postgresql":
            connection.creation.destroy_test_db(old_name, verbosity=0)


def run_child(file: Path, n: int, *, reimport: bool, env: dict) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--file", str(file), "--n", str(n)]
    if reimport:
        cmd.append("--reimport")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=ROOT)
    if out.returncode != 0:
        sys.stderr.write(out.stdout + out.stderr)
        raise SystemExit(f"child run for n={n} failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reimport", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=None)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    n, big = (300, 1500) if args.quick else (10_000, 50_000)
    if args.n:
        n = args.n
    work = Path(tempfile.mkdtemp(prefix="import-bench-"))
    try:
        env = dict(os.environ, FAULTLINE_DEV="1", PYTHONPATH=str(ROOT))
        small_file, big_file = work / f"issues_{n}.json", work / f"issues_{big}.json"
        write_issues(small_file, n)
        write_issues(big_file, big)
        size_kb = small_file.stat().st_size / n / 1024
        print(f"synthetic issues: {n:,} and {big:,} from 300 repos, {size_kb:.1f} KB each as JSON", file=sys.stderr)

        def db_env(tag: str) -> dict:
            if env.get("DATABASE_URL", "").startswith("postgres"):
                return env
            return dict(env, DATABASE_URL=f"sqlite:///{work / f'bench_{tag}.sqlite3'}")

        small = run_child(small_file, n, reimport=True, env=db_env("small"))
        large = run_child(big_file, big, reimport=False, env=db_env("large"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    first_per_s = n / small["first_s"]
    reimport_per_s = n / small["reimport_s"]
    growth = large["peak_mb"] - small["peak_mb"]
    print(f"database: {small['db']}", file=sys.stderr)
    print(f"first import:      {first_per_s:9,.0f} issues/s  ({small['first_s']:.2f} s; target >= 4,000/s)")
    print(f"no-change import:  {reimport_per_s:9,.0f} issues/s  ({small['reimport_s']:.2f} s; target >= 8,000/s)")
    print(f"re-import / first: {reimport_per_s / first_per_s:9.1f}x")
    # On a busy machine wall time includes waiting for a core; this process's CPU time does not
    # (with PostgreSQL the server's share of the work is not in it).
    print(f"this process's CPU: {small['first_cpu_s']:.2f} s first, {small['reimport_cpu_s']:.2f} s re-import")
    print(f"peak RSS: {small['peak_mb']:.0f} MB at {n:,}, {large['peak_mb']:.0f} MB at {big:,} "
          f"(growth {growth:.0f} MB; target < 150 MB); {large['first_s']:.1f} s for {big:,}")  # fmt: skip
    print(
        json.dumps(
            {
                "bench": "import",
                "n": n,
                "first_per_s": round(first_per_s, 1),
                "reimport_per_s": round(reimport_per_s, 1),
                "peak_mb_10k": round(small["peak_mb"], 1),
                "peak_mb_50k": round(large["peak_mb"], 1),
                "db": small["db"],
                "big_n": big,
                "big_first_per_s": round(big / large["first_s"], 1),
                "peak_growth_mb": round(growth, 1),
                "first_cpu_per_s": round(n / small["first_cpu_s"], 1),
                "reimport_cpu_per_s": round(n / small["reimport_cpu_s"], 1),
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
