"""Export throughput and server memory: the JSONL export streamed through a running gunicorn.

    python bench/export_bench.py            # 100,000 coded episodes (2 coders each) + a 10,000 study
    python bench/export_bench.py --quick    # a small smoke run (the test suite runs this)
    DATABASE_URL=postgres://.../faultline_bench python bench/export_bench.py   # on PostgreSQL (the database
                                                                              # is emptied and migrated first)

A fresh database (a temporary SQLite file unless DATABASE_URL is given) is filled
with bulk_create: a study of 10,000 and one of 100,000 episodes, each episode
coded by two coders (mostly agreeing), half with a machine suggestion. gunicorn
(one sync worker) serves it on 127.0.0.1; the bench streams
`/api/v1/studies/{slug}/export/?format=jsonl` with a token, counts rows, and
samples the worker's RSS from /proc while each export runs. Parquet is written
in-process through the same export code. Targets: >= 20,000 rows/s, and the
server's peak RSS at 100,000 rows within 100 MB of its peak at 10,000 rows.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_django(db_url: str) -> None:
    os.environ["DATABASE_URL"] = db_url
    os.environ.setdefault("FAULTLINE_DEV", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.pop("CELERY_BROKER_URL", None)
    import django

    django.setup()


def prepare_database(db_url: str) -> None:
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    call_command("migrate", verbosity=0)
    call_command("load_codebook", str(ROOT / "fixtures" / "codebook-v1.json"), "--publish", verbosity=0)


def fill(slug: str, n: int, seed: int) -> None:
    """n documents, each with one episode coded by the same two coders; half with a suggestion."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from annotate.models import Coding, Document, Episode, EpisodeStatus, Suggestion
    from annotate.studies.services import study_create
    from taxonomy.models import AxisValue, Codebook, FailureType

    rng = random.Random(seed)
    User = get_user_model()
    owner, _ = User.objects.get_or_create(username="bench-owner")
    c1, _ = User.objects.get_or_create(username="bench-coder1")
    c2, _ = User.objects.get_or_create(username="bench-coder2")
    codebook = Codebook.objects.get(name="agentic-failures", version="1.0")
    study = study_create(slug=slug, name=f"Export bench {n}", codebook=codebook, owner=owner, coders=[c1, c2])
    types = list(FailureType.objects.filter(codebook=codebook))
    axes = {a: list(AxisValue.objects.filter(codebook=codebook, axis=a)) for a in ("source", "stage", "capability")}
    now = timezone.now()
    batch = 5000
    for start in range(0, n, batch):
        size = min(batch, n - start)
        docs = Document.objects.bulk_create(
            Document(
                study=study, kind="github_issue" if i % 3 else "literature", external_id=f"{slug}/{i}",
                url=f"https://github.com/bench/repo{i % 300}/issues/{i}", cluster=f"bench/repo{i % 300}",
                title=f"Agent failure number {i}: the tool call timed out after retries",
                body=("The agent called the search tool, which timed out; it retried and gave up. " * 8),
            )
            for i in range(start, start + size)
        )  # fmt: skip
        eps = Episode.objects.bulk_create(
            Episode(document=d, study=study, n_codings=2, status=EpisodeStatus.CODED, queue_key=i)
            for i, d in enumerate(docs)
        )
        codings, suggestions = [], []
        for ep in eps:
            t, s, st, cap = (
                rng.choice(types),
                rng.choice(axes["source"]),
                rng.choice(axes["stage"]),
                rng.choice(axes["capability"]),
            )
            second_stage = st if rng.random() < 0.8 else rng.choice(axes["stage"])
            codings.append(Coding(episode=ep, coder=c1, failure_type=t, source=s, stage=st, capability=cap))
            codings.append(Coding(episode=ep, coder=c2, failure_type=t, source=s, stage=second_stage, capability=cap))
            if ep.pk % 2:
                suggestions.append(
                    Suggestion(
                        episode=ep,
                        backend="local",
                        model="tfidf-logreg",
                        prompt_version="local-v1",
                        failure_type=t,
                        source=s,
                        stage=st,
                        capability=cap,
                        confidence=round(rng.random(), 3),
                        status="accepted",
                        cache_key=f"bench-{ep.pk}",
                    )
                )
        Coding.objects.bulk_create(codings, batch_size=2500)
        Suggestion.objects.bulk_create(suggestions, batch_size=2500)
    assert Episode.objects.filter(study=study).count() == n, now


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        return 0.0
    return 0.0


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        out += [int(x) for x in text]
    return out


class Sampler:
    """Peak RSS of the gunicorn workers, sampled every 20 ms while an export runs."""

    def __init__(self, master: int):
        self.master, self.peak, self.running = master, 0.0, False

    def __enter__(self):
        self.peak, self.running = 0.0, True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while self.running:
            self.peak = max([self.peak, *(rss_mb(p) for p in children(self.master))])
            time.sleep(0.02)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def stream(base: str, slug: str, key: str) -> tuple[int, float]:
    import httpx

    rows = 0
    t0 = time.perf_counter()
    with httpx.stream(
        "GET", f"{base}/api/v1/studies/{slug}/export/?format=jsonl", headers={"Authorization": f"Token {key}"},
        timeout=600,
    ) as response:  # fmt: skip
        response.raise_for_status()
        for chunk in response.iter_bytes():
            rows += chunk.count(b"\n")
    return rows, time.perf_counter() - t0


def wait_up(base: str, proc: subprocess.Popen) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit("gunicorn did not come up")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run (2,000 and 500 episodes)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--port", type=int, default=0, help="port for gunicorn (default: a free one)")
    args = parser.parse_args()
    big, small = (2000, 500) if args.quick else (args.rows, args.small)

    tmp = Path(tempfile.mkdtemp(prefix="export-bench-"))
    db_url = os.environ.get("DATABASE_URL") or f"sqlite:///{tmp / 'bench.sqlite3'}"
    setup_django(db_url)
    prepare_database(db_url)
    from django.db import transaction

    t0 = time.perf_counter()
    with transaction.atomic():  # one commit: SQLite would otherwise sync after every batch
        fill("bench-small", small, seed=1)
        fill("bench", big, seed=2)
    fill_s = time.perf_counter() - t0
    print(f"filled {small:,} + {big:,} episodes ({2 * (small + big):,} codings) in {fill_s:.1f}s", flush=True)

    from django.contrib.auth import get_user_model
    from django.db import connection

    from annotate.exports.datasets import export_write
    from annotate.models import Study
    from annotate.studies.tokens import token_create

    _, key = token_create(user=get_user_model().objects.get(username="bench-owner"), name="bench")
    Study.objects.filter(slug__startswith="bench").update(blind=False)
    vendor = connection.vendor
    connection.close()

    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DATABASE_URL": db_url, "FAULTLINE_DEV": "1", "FAULTLINE_THROTTLE_USER": "100000/min"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1", "--timeout", "600",
         "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    try:
        wait_up(base, proc)
        stream(base, "bench-small", key)  # warm imports and connections before measuring
        sampler = Sampler(proc.pid)
        with sampler:
            rows_small, secs_small = stream(base, "bench-small", key)
        rss_small = sampler.peak
        with sampler:
            rows_big, secs_big = stream(base, "bench", key)
        rss_big = sampler.peak
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert rows_small == small and rows_big == big, (rows_small, rows_big)

    study = Study.objects.select_related("codebook").get(slug="bench")
    t0 = time.perf_counter()
    manifest = export_write(study=study, fmt="parquet", out=tmp / "bench.parquet")
    parquet_s = time.perf_counter() - t0
    assert manifest["rows"] == big
    connection.close()
    shutil.rmtree(tmp, ignore_errors=True)

    rate_small, rate_big = rows_small / secs_small, rows_big / secs_big
    print(f"database: {vendor}; server: gunicorn, 1 sync worker on {base}")
    print(f"{'rows':>8} {'seconds':>8} {'rows/s':>9} {'peak RSS MB':>12}")
    print(f"{rows_small:>8,} {secs_small:>8.2f} {rate_small:>9,.0f} {rss_small:>12.1f}")
    print(f"{rows_big:>8,} {secs_big:>8.2f} {rate_big:>9,.0f} {rss_big:>12.1f}")
    print(f"RSS growth {rss_big - rss_small:+.1f} MB for {big / small:.0f}x the rows (target within 100 MB)")
    print(f"throughput {rate_big:,.0f} rows/s (target >= 20,000); Parquet of {big:,} rows in {parquet_s:.2f}s")
    result = {
        "bench": "export", "rows": rows_big, "rows_per_s": round(rate_big), "rss_mb_10k": round(rss_small, 1),
        "rss_mb_100k": round(rss_big, 1), "parquet_s": round(parquet_s, 2), "small_rows": rows_small,
        "small_rows_per_s": round(rate_small), "fill_s": round(fill_s, 1), "db": vendor,
    }  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
