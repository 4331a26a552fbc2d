"""Server time of the coding workspace's busiest requests at 100,000 episodes.

    python bench/pages_bench.py            # 100,000 episodes, 10,000 of them coded; 200 requests per endpoint
    python bench/pages_bench.py --quick    # 2,000 episodes and 20 requests (the test suite runs this)
    DATABASE_URL=postgres://... python bench/pages_bench.py   # a fresh database next to the one named

The database (a new SQLite file, or a fresh PostgreSQL database created next to
the one DATABASE_URL names and dropped afterwards) holds two studies: the big
one, and a small one with 1% of its episodes. The same requests run against
both, side by side, through Django's full stack (middleware, sessions, CSRF,
templates) with the test client: a constant number of queries and a time ratio
near 1 show that nothing grows with the number of episodes.

Endpoints: "next" (claim the next episode; the served episode is then coded,
untimed, as a coder would), the coding page GET, the coding POST (save and go
next) and the adjudication list (owner; cycling through its filters and pages).
Targets on SQLite: median <= 30 ms and p95 <= 80 ms. Besides wall-clock times the bench
reports each request's CPU time (`cpu_median_ms`): on a machine shared with other work
the wall clock also counts waiting for a core, the CPU time does not. The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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
]


def _fresh_postgres(url: str) -> tuple[str, callable]:
    """Create an empty database next to the one `url` names; return its URL and a function that drops it."""
    import psycopg

    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/') or 'faultline'}_pages_bench"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return urlunsplit(parts._replace(path=f"/{name}")), drop


def _body(rng: random.Random, n: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(110))
    log = "\n".join(f"step={i} tool=search status={'error' if i == 7 else 'ok'}" for i in range(8))
    return f"The agent fails at step {n}: **{rng.choice(WORDS)}** went wrong.\n\n{words}\n\n```\n{log}\n```\n"


def fill(study, n: int, coded: int, coders: tuple, *, first_id: int, seed: int = 11) -> None:
    """n documents with one episode each; `coded` episodes coded: half by both coders (30% disagreeing), half once."""
    from annotate.models import Coding, Document, Episode, EpisodeStatus
    from annotate.studies.services import queue_key_for
    from taxonomy.models import AxisValue, FailureType

    rng = random.Random(seed)
    codebook = study.codebook
    types = list(FailureType.objects.filter(codebook=codebook))
    axes = {a: list(AxisValue.objects.filter(codebook=codebook, axis=a)) for a in ("source", "stage", "capability")}
    k = study.coders_per_episode
    batch = 5000
    for start in range(0, n, batch):
        ids = range(first_id + start, first_id + min(start + batch, n))
        Document.objects.bulk_create(
            Document(
                id=i, study=study, kind="github_issue", external_id=f"{study.slug}#{i}", cluster=f"org/repo{i % 300}",
                url=f"https://github.com/org/repo{i % 300}/issues/{i}", title=f"Agent fails at step {i}",
                body=_body(rng, i),
            )
            for i in ids
        )  # fmt: skip
        episodes, codings = [], []
        for i in ids:
            index = i - first_id
            n_codings = 2 if index < coded // 2 else (1 if index < coded else 0)
            status = EpisodeStatus.CODED if n_codings >= k else EpisodeStatus.OPEN
            episodes.append(Episode(id=i, document_id=i, study=study, queue_key=queue_key_for(study, i),
                                    n_codings=n_codings, status=status))  # fmt: skip
            t = rng.choice(types)
            for c in range(n_codings):
                other = rng.choice(types) if c == 1 and rng.random() < 0.3 else t
                codings.append(Coding(episode_id=i, coder=coders[c], failure_type=other,
                                      source=rng.choice(axes["source"]), stage=axes["stage"][3],
                                      capability=axes["capability"][3], memo="bench"))  # fmt: skip
        Episode.objects.bulk_create(episodes)
        Coding.objects.bulk_create(codings, batch_size=2000)
    # Bulk-created codings bypass the coding service: store the disagreement state as it would.
    from annotate.coding.disagreement import disagreement_refresh

    disagreement_refresh(study_id=study.pk)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Endpoints:
    """The four measured requests for one study, each a callable returning (response, untimed follow-up)."""

    def __init__(self, study, coder, owner, picker_codes, values, requests: int):
        from django.test import Client

        from annotate.models import Episode

        self.study, self.coder = study, coder
        self.coder_client, self.owner_client = Client(), Client()
        self.coder_client.force_login(coder)
        self.owner_client.force_login(owner)
        self.codes, self.values = picker_codes, values
        # Episodes to open and to code, spread evenly over the whole study (the same ones on every run):
        # uncoded ones, which "next" (serving started episodes first) does not reach during the run.
        uncoded = list(Episode.objects.filter(study=study, n_codings=0).order_by("pk").values_list("pk", flat=True))
        self.targets = uncoded[:: max(1, len(uncoded) // (3 * requests))][: 3 * requests]
        self.get_targets = list(self.targets)
        self.filters = ["", "?axis=failure_type", "?axis=source", f"?type={picker_codes[0]}", "?state=adjudicated"]

    def coding_post_data(self) -> dict:
        return {"failure_type": self.codes[0], "source": "llm", "stage": "iterative_execution",
                "capability": "actuation", "confidence": "medium", "memo": "bench", "action": "save"}  # fmt: skip

    def next(self, i: int):
        from annotate.coding.services import coding_save
        from annotate.models import Episode

        response = self.coder_client.post(f"/studies/{self.study.slug}/next/")
        assert response.status_code == 302, response.status_code

        def code_it():
            episode = Episode.objects.select_related("study").get(pk=int(response.url.rstrip("/").split("/")[-2]))
            coding_save(episode=episode, coder=self.coder, values=self.values, version=None)

        return response, code_it

    def prepare_coding_get(self, i: int) -> None:
        """Untimed: the next target nobody has coded or holds (a page with others' codings costs more)."""
        from annotate.models import Coding, Lease

        self.get_target = self.get_targets.pop(0)
        while (
            Coding.objects.filter(episode_id=self.get_target).exists()
            or Lease.objects.filter(episode_id=self.get_target).exclude(coder=self.coder).exists()
        ):
            self.get_target = self.get_targets.pop(0)

    def coding_get(self, i: int):
        response = self.coder_client.get(f"/studies/{self.study.slug}/episodes/{self.get_target}/code/")
        assert response.status_code == 200, response.status_code
        return response, None

    def prepare_coding_post(self, i: int) -> None:
        """Untimed: the next target this coder has not coded yet ("next" may have served some)."""
        from annotate.models import Coding

        self.post_target = self.targets.pop()
        while Coding.objects.filter(episode_id=self.post_target, coder=self.coder).exists():
            self.post_target = self.targets.pop()

    def coding_post(self, i: int):
        url = f"/studies/{self.study.slug}/episodes/{self.post_target}/code/"
        response = self.coder_client.post(url, self.coding_post_data())
        assert response.status_code == 302, (response.status_code, response.content.decode()[-2000:])
        return response, None

    def adjudication_list(self, i: int):
        query = self.filters[i % len(self.filters)]
        response = self.owner_client.get(f"/studies/{self.study.slug}/adjudicate/{query}")
        assert response.status_code == 200, response.status_code
        return response, None


def measure(endpoints: Endpoints, name: str, requests: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    fn = getattr(endpoints, name)
    prepare = getattr(endpoints, f"prepare_{name}", None)
    times, cpu = [], []
    # Queries are counted on one fixed, representative request made first and not timed (capturing
    # adds a little time). Sampling every 10th request made the count depend on which episodes the
    # sample happened to hit, and the comparison between sizes flaky.
    if prepare:
        prepare(0)
    with CaptureQueriesContext(connection) as ctx:
        _, follow = fn(0)
    queries = {len(ctx)}
    if follow:
        follow()
    for i in range(1, requests + 1):
        if prepare:
            prepare(i)
        t0, c0 = time.perf_counter(), time.process_time()
        _, follow = fn(i)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        if follow:
            follow()
    return {
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(percentile(times, 0.95), 2),
        "queries": max(queries),
        "cpu_median_ms": round(statistics.median(cpu), 2),
        "queries_seen": sorted(queries),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 episodes and 20 requests per endpoint")
    parser.add_argument("--episodes", type=int, help="episodes in the big study (default 100,000)")
    parser.add_argument("--requests", type=int, help="requests per endpoint (default 200)")
    args = parser.parse_args()
    n = args.episodes or (2_000 if args.quick else 100_000)
    requests = args.requests or (20 if args.quick else 200)
    coded = n // 10

    work = Path(tempfile.mkdtemp(prefix="pages-bench-"))
    drop = None
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        url, drop = _fresh_postgres(url)
    else:
        url = f"sqlite:///{work / 'pages.sqlite3'}"
    os.environ.update(DATABASE_URL=url, FAULTLINE_DEV="1", DJANGO_SETTINGS_MODULE="config.settings")
    os.environ.pop("CELERY_BROKER_URL", None)  # nothing here enqueues; keep the bench self-contained
    try:
        run(n, coded, requests, args.quick)
    finally:
        if drop:
            drop()
        shutil.rmtree(work, ignore_errors=True)


def run(n: int, coded: int, requests: int, quick: bool) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    from annotate.coding.selectors import codebook_picker
    from annotate.coding.services import CodingValues
    from annotate.models import Lease
    from annotate.studies.services import study_create
    from taxonomy.services import codebook_load, codebook_read_file

    codebook = codebook_load(data=codebook_read_file(ROOT / "fixtures" / "codebook-v1.json"), publish=True).codebook
    users = get_user_model().objects
    owner, c1, c2, coder = (users.create_user(username=u) for u in ("owner", "c1", "c2", "bench"))
    big = study_create(slug="big", name="Big", codebook=codebook, owner=owner, coders=[c1, c2, coder])
    small = study_create(slug="small", name="Small", codebook=codebook, owner=owner, coders=[c1, c2, coder])
    m = max(n // 100, 10 * requests)
    t0 = time.perf_counter()
    fill(big, n, coded, (c1, c2), first_id=1)
    fill(small, m, m // 10, (c1, c2), first_id=n + 1)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(f"filled {n:,} + {m:,} episodes ({coded:,} + {m // 10:,} coded) on {connection.vendor} "
          f"in {time.perf_counter() - t0:.1f} s", file=sys.stderr)  # fmt: skip

    picker = codebook_picker(codebook)
    codes = [t.code for t in picker.types]
    values = CodingValues(
        failure_type=picker.type_by_code[codes[0]],
        source=picker.value_by_code["source"]["llm"],
        stage=picker.value_by_code["stage"]["iterative_execution"],
        capability=picker.value_by_code["capability"]["actuation"],
    )
    results: dict[str, dict[str, dict]] = {}
    names = ("next", "coding_get", "coding_post", "adjudication_list")
    for label, study in (("big", big), ("small", small)):
        endpoints = Endpoints(study, coder, owner, codes, values, requests)
        # Warm-up (caches, templates, connections) on an episode no timed request uses; then give it back,
        # or "next" would resume it.
        endpoints.get_target = endpoints.get_targets.pop()
        endpoints.coding_get(requests)
        endpoints.adjudication_list(0)
        Lease.objects.filter(coder=coder).delete()
        results[label] = {name: measure(endpoints, name, requests) for name in names}

    print(f"{'endpoint':<18} {'median ms':>10} {'p95 ms':>8} {'cpu ms':>7} {'queries':>8}   "
          f"{'small: median':>13} {'cpu ms':>7} {'queries':>8}   big/small")  # fmt: skip
    ok = True
    for name in names:
        b, s = results["big"][name], results["small"][name]
        ratio = b["median_ms"] / s["median_ms"] if s["median_ms"] else float("nan")
        within = b["median_ms"] <= 30 and b["p95_ms"] <= 80
        # An empty page skips its follow-up queries, so compare the most any request made.
        same = b["queries"] == s["queries"]
        ok &= within and same
        if not same:
            print(f"  {name}: queries per request {b['queries_seen']} at {n:,}, {s['queries_seen']} at {m:,}")
        print(f"{name:<18} {b['median_ms']:>10.1f} {b['p95_ms']:>8.1f} {b['cpu_median_ms']:>7.1f} {b['queries']:>8}   "
              f"{s['median_ms']:>13.1f} {s['cpu_median_ms']:>7.1f} {s['queries']:>8}   "
              f"{ratio:8.2f}x{'' if within else '  (over target)'}")  # fmt: skip
    print(f"targets (median <= 30 ms, p95 <= 80 ms, same queries at {n:,} and {m:,} episodes): "
          f"{'met' if ok else 'NOT met'}")  # fmt: skip
    summary = {
        "bench": "pages",
        "episodes": n,
        "endpoints": {
            name: {k: results["big"][name][k] for k in ("median_ms", "p95_ms", "queries", "cpu_median_ms")}
            for name in names
        },
        "small_episodes": m,
        "small_endpoints": {
            name: {k: results["small"][name][k] for k in ("median_ms", "p95_ms", "queries")} for name in names
        },
        "requests": requests,
        "db": connection.vendor,
        "quick": quick,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
