"""Moving a study's codings to a revised codebook version, and reverting the move: time, queries and memory.

    python bench/codebook_migration_bench.py            # 20,000 episodes coded by two coders (40,000 codings)
    python bench/codebook_migration_bench.py --quick    # a small smoke run (the test suite runs this)
    DATABASE_URL=postgres://.../faultline_bench python bench/codebook_migration_bench.py   # on PostgreSQL (the
                                                                                          # database is emptied)

A fresh database (a temporary SQLite file unless DATABASE_URL is given) gets the codebook, its revision
1.1 (a rename, a merge, a split and a retired type: annotate/tests/factories/codebook_revision.py) and a
study whose codings use every type. The bench then runs the move (annotate.coding.codebook_moves) inline,
as the page and the command do, counts its queries, samples this process's peak RSS, and reverts it.
It decides whether the move can stay inline (the page waits for it) or needs a job. The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.export_bench import prepare_database, rss_mb, setup_django  # noqa: E402


def fill(n: int, seed: int):
    """A study of n episodes, each coded by two coders on random types (10% disagreeing), 2% adjudicated."""
    from django.contrib.auth import get_user_model

    from annotate.models import Adjudication, Coding, Document, Episode, EpisodeStatus
    from annotate.studies.services import study_create
    from taxonomy.models import AxisValue, Codebook, FailureType

    rng = random.Random(seed)
    User = get_user_model()
    owner = User.objects.create(username="bench-owner")
    c1, c2 = User.objects.create(username="bench-coder1"), User.objects.create(username="bench-coder2")
    codebook = Codebook.objects.get(name="agentic-failures", version="1.0")
    study = study_create(slug="moves", name="Codebook move bench", codebook=codebook, owner=owner, coders=[c1, c2])
    types = list(FailureType.objects.filter(codebook=codebook))
    axes = {a: list(AxisValue.objects.filter(codebook=codebook, axis=a)) for a in ("source", "stage", "capability")}
    for start in range(0, n, 5000):
        size = min(5000, n - start)
        docs = Document.objects.bulk_create(
            Document(study=study, kind="github_issue", external_id=f"m/{i}", cluster=f"bench/repo{i % 300}",
                     title=f"Failure {i}", body="The agent called the tool, which failed.")
            for i in range(start, start + size)
        )  # fmt: skip
        adjudicated = {d.pk for d in docs if rng.random() < 0.02}
        eps = Episode.objects.bulk_create(
            Episode(document=d, study=study, n_codings=2, queue_key=i,
                    status=EpisodeStatus.ADJUDICATED if d.pk in adjudicated else EpisodeStatus.CODED)
            for i, d in enumerate(docs)
        )  # fmt: skip
        codings, adjudications = [], []
        for ep in eps:
            t, s, st, cap = (rng.choice(types), *(rng.choice(axes[a]) for a in ("source", "stage", "capability")))
            other = t if rng.random() < 0.9 else rng.choice(types)
            codings.append(Coding(episode=ep, coder=c1, failure_type=t, source=s, stage=st, capability=cap))
            codings.append(Coding(episode=ep, coder=c2, failure_type=other, source=s, stage=st, capability=cap))
            if ep.status == EpisodeStatus.ADJUDICATED:
                adjudications.append(
                    Adjudication(episode=ep, adjudicator=owner, failure_type=t, source=s, stage=st, capability=cap,
                                 rationale="bench")
                )  # fmt: skip
        Coding.objects.bulk_create(codings, batch_size=2500)
        Adjudication.objects.bulk_create(adjudications, batch_size=2500)
    return study, owner


class Peak:
    """This process's peak RSS while a block runs, sampled every 20 ms."""

    def __enter__(self):
        self.peak, self.running = rss_mb(os.getpid()), True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while self.running:
            self.peak = max(self.peak, rss_mb(os.getpid()))
            time.sleep(0.02)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--episodes", type=int)
    args = parser.parse_args()
    n = args.episodes or (300 if args.quick else 20_000)
    tmp = tempfile.mkdtemp(prefix="faultline-move-bench-")
    db_url = os.environ.get("DATABASE_URL") or f"sqlite:///{tmp}/bench.sqlite3"
    setup_django(db_url)
    prepare_database(db_url)

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotate.coding.codebook_maps import codebook_map_validate
    from annotate.coding.codebook_moves import codebook_migration_revert, codings_migrate
    from annotate.models import Coding
    from annotate.tests.factories.codebook_revision import MAP, revised_codebook
    from taxonomy.models import Codebook

    t0 = time.perf_counter()
    study, owner = fill(n, seed=1)
    target = revised_codebook(Codebook.objects.get(name="agentic-failures", version="1.0"))
    fill_s = time.perf_counter() - t0
    codings = Coding.objects.filter(episode__study=study).count()
    moves = codebook_map_validate(study=study, to_codebook=target, raw=MAP)
    with CaptureQueriesContext(connection) as queries, Peak() as peak:
        t0 = time.perf_counter()
        migration = codings_migrate(study=study, to_codebook=target, moves=moves, user=owner)
        migrate_s = time.perf_counter() - t0
    migrate_queries, migrate_peak = len(queries), peak.peak
    with CaptureQueriesContext(connection) as queries:
        t0 = time.perf_counter()
        result = codebook_migration_revert(migration=migration, user=owner)
        revert_s = time.perf_counter() - t0
    print(f"database {connection.vendor}; {n:,} episodes, {codings:,} codings (filled in {fill_s:.1f} s)")
    print(f"move: {migrate_s:.2f} s, {codings / migrate_s:,.0f} codings/s, {migrate_queries} queries, "
          f"peak RSS {migrate_peak:.0f} MB; counts {migration.counts}")  # fmt: skip
    print(f"revert: {revert_s:.2f} s, {len(queries)} queries, restored {result['restored']:,}")
    summary = {
        "bench": "codebook_migration", "db": connection.vendor, "episodes": n, "codings": codings,
        "migrate_s": round(migrate_s, 3), "codings_per_s": round(codings / migrate_s),
        "migrate_queries": migrate_queries, "migrate_peak_mb": round(migrate_peak, 1),
        "revert_s": round(revert_s, 3), "revert_queries": len(queries), "requeued": migration.counts.get("requeued", 0),
    }  # fmt: skip
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
