#!/usr/bin/env python
"""Load: 20 coders for 60 s against gunicorn (4 workers), PostgreSQL and a Celery worker.

Each coder logs in through the real form (CSRF and session) and loops
next episode → coding page → save. Two API clients stream JSONL exports and one
posts incidents. All traffic goes to 127.0.0.1 and every loop is bounded in
count and time. At the end every save that a client saw succeed is looked up
in the database: it must be there exactly once, with the values it was sent;
and the Celery worker must have made the suggestion of every posted incident.

    python bench/load_bench.py                # 20 coders, 60 s
    python bench/load_bench.py --quick        # 4 coders, 8 s (the test suite runs this)
    python bench/load_bench.py --redis-blip   # and Redis stops for 30 s in the middle of the run

Needs PostgreSQL (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres;
the bench creates and drops its own database) and Redis (CELERY_BROKER_URL). With
--redis-blip it starts a redis-server of its own on a free port instead, as the broker
and the cache (as docs/deploy.md recommends), runs Celery beat too, and kills that
Redis for 30 s in the middle of the run: every request must still succeed, and every
incident's suggestion job must be made once Redis is back.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode, urlparse

import httpx

ROOT = Path(__file__).resolve().parent.parent
SLUG = "loadbench"
PASSWORD = "load-bench-" + secrets.token_hex(8)
CSRF_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
VERSION_RE = re.compile(r'name="version" value="(\d*)"')
EPISODE_RE = re.compile(r"/episodes/(\d+)/code/")
EXPORT_PAUSE_S = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.saves: list[tuple[int, str, str]] = []  # (episode id, username, memo) the client saw succeed
        self.requests = 0

    def time(self, endpoint: str, started: float) -> None:
        with self.lock:
            self.latency[endpoint].append((time.perf_counter() - started) * 1000)
            self.requests += 1

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def setup_database(admin_url: str, db_name: str, episodes: int, coders: int) -> dict:
    """Create a fresh database, migrate, load the codebook and a study; return credentials."""
    parsed = urlparse(admin_url)
    base = ["-h", parsed.hostname or "127.0.0.1", "-p", str(parsed.port or 5432), "-U", parsed.username or "postgres"]
    subprocess.run(["dropdb", *base, "--if-exists", db_name], check=True)
    subprocess.run(["createdb", *base, db_name], check=True)
    os.environ["DATABASE_URL"] = f"{parsed.scheme}://{parsed.netloc}/{db_name}"
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    subprocess.run([sys.executable, "manage.py", "load_codebook", "fixtures/codebook-v1.json", "--publish"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, check=True)

    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.contrib.auth import get_user_model

    from annotate.models import Document, Episode, Study
    from annotate.studies.services import membership_set, queue_key_for, study_create
    from annotate.studies.tokens import token_create
    from taxonomy.models import Codebook

    User = get_user_model()
    owner = User.objects.create_user("load-owner", password=PASSWORD)
    coder_users = [User.objects.create_user(f"load-coder{i:02d}", password=PASSWORD) for i in range(coders)]
    api_user = User.objects.create_user("load-api", password=PASSWORD)
    study = study_create(
        slug=SLUG, name="Load bench", codebook=Codebook.objects.get(), owner=owner, coders=[*coder_users, api_user]
    )
    # The bench posts incidents into the study its coders code: it must accept them.
    Study.objects.filter(pk=study.pk).update(accepts_incidents=True)
    docs = [
        Document(
            study=study,
            kind="github_issue",
            external_id=f"org{i % 97}/repo#{i}",
            cluster=f"org{i % 97}/repo",
            url=f"https://github.com/org{i % 97}/repo/issues/{i}",
            title=f"Agent run {i} fails when the tool times out",
            body=("The agent called the search tool, which timed out after 30 s; the run aborted. " * 12),
        )
        for i in range(episodes)
    ]
    Document.objects.bulk_create(docs, batch_size=2000)
    eps = [Episode(document=d, study=study) for d in Document.objects.filter(study=study).order_by("id")]
    Episode.objects.bulk_create(eps, batch_size=2000)
    eps = list(Episode.objects.filter(study=study))
    for e in eps:
        e.queue_key = queue_key_for(study, e.pk)
    Episode.objects.bulk_update(eps, ["queue_key"], batch_size=2000)
    # Exports of a blind study hold every coder's codes, so the API clients use an owner's token.
    membership_set(study=study, user=api_user, role="owner")
    _, key = token_create(user=api_user, name="load bench")
    from django.db import connections

    connections.close_all()
    return {"coders": [u.username for u in coder_users], "token": key}


class PrivateRedis:
    """A redis-server of the bench's own on a free port, which --redis-blip stops and starts."""

    def __init__(self) -> None:
        import tempfile

        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="faultline-loadbench-redis-")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def blip(redis: PrivateRedis, at: float, seconds: float, marks: dict) -> None:
    """Kill Redis at `at` (monotonic) and start it again `seconds` later."""
    time.sleep(max(0.0, at - time.monotonic()))
    redis.stop()
    marks["down"] = time.monotonic()
    time.sleep(seconds)
    redis.start()
    marks["up"] = time.monotonic()


def start_processes(port: int, queue: str, env: dict, beat: bool = False) -> list[subprocess.Popen]:
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "deploy/gunicorn.conf.py"],
        cwd=ROOT, env={**env, "FAULTLINE_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "4"},
        stdout=subprocess.DEVNULL, stderr=open(ROOT / "bench" / "load_web.log", "w"),  # noqa: SIM115
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "--concurrency", "1",
         "--without-gossip", "--without-mingle", "-l", "WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(ROOT / "bench" / "load_worker.log", "w"),  # noqa: SIM115
    )  # fmt: skip
    procs = [web, worker]
    if beat:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "WARNING",
             "--schedule", str(ROOT / "bench" / "load_beat.schedule")],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(ROOT / "bench" / "load_beat.log", "w"),  # noqa: SIM115
        ))  # fmt: skip
    deadline = time.monotonic() + 180  # four workers importing the app on a busy two-core machine
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return procs
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    for proc in procs:  # never leave them running
        proc.kill()
        proc.wait(timeout=10)
    raise RuntimeError("gunicorn did not come up; see bench/load_web.log")


class Browser:
    """A coder's browser: cookies (session, CSRF) and one connection per request, as gunicorn's sync
    workers close each one. Plain http.client, because 20 of these share two cores with the server
    and httpx costs several times its CPU per request."""

    def __init__(self, base: str) -> None:
        parsed = urlparse(base)
        self.host, self.port = parsed.hostname, parsed.port
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, data: dict | None = None) -> tuple[int, str, str]:
        """(status, Location header, body) of one request; redirects are not followed."""
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if data is not None:
            body = urlencode(data)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read().decode()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    if morsel["max-age"] == "0" or not morsel.value:
                        self.cookies.pop(name, None)
                    else:
                        self.cookies[name] = morsel.value
            return response.status, response.headers.get("Location", ""), payload
        finally:
            conn.close()


def login(browser: Browser, username: str) -> None:
    _, _, page = browser.request("GET", "/login/")
    token = CSRF_RE.search(page).group(1)
    status, _, _ = browser.request("POST", "/login/", {"username": username, "password": PASSWORD,
                                                       "csrfmiddlewaretoken": token})  # fmt: skip
    if status != 302:
        raise RuntimeError(f"login of {username} failed with {status}")


def coder_session(base: str, username: str, rec: Recorder) -> tuple[Browser, str] | None:
    """Log in and read the study page's CSRF token: done before the timed window opens, so a slow log-in
    (password hashing on a busy machine) never eats the run."""
    browser = Browser(base)
    try:
        login(browser, username)
    except Exception as exc:
        rec.error(f"login {username}: {exc}")
        return None
    try:
        _, _, page = browser.request("GET", f"/studies/{SLUG}/")
        return browser, CSRF_RE.search(page).group(1)
    except Exception as exc:
        rec.error(f"study page {username}: {exc}")
        return None


def coder_loop(
    session: tuple[Browser, str], username: str, deadline: float, max_loops: int, rec: Recorder, codes: dict
) -> None:
    browser, csrf = session
    for i in range(max_loops):
        if time.monotonic() > deadline:
            return
        try:
            t = time.perf_counter()
            # "next" claims a place, so it is a POST (a GET changes nothing).
            status, location, _ = browser.request("POST", f"/studies/{SLUG}/next/", {"csrfmiddlewaretoken": csrf})
            rec.time("next", t)
            match = EPISODE_RE.search(location)
            if status != 302 or not match:
                if status == 200:
                    return  # the queue is empty for this coder
                rec.error(f"next {status}")
                continue
            episode_id = int(match.group(1))
            t = time.perf_counter()
            status, _, page = browser.request("GET", f"/studies/{SLUG}/episodes/{episode_id}/code/")
            rec.time("page", t)
            if status != 200:
                rec.error(f"page {status}")
                continue
            csrf = CSRF_RE.search(page).group(1)
            version = VERSION_RE.search(page)
            memo = f"{username}:{i}:{uuid.uuid4().hex[:8]}"
            data = {**codes, "csrfmiddlewaretoken": csrf, "memo": memo, "confidence": "medium",
                    "version": version.group(1) if version else "", "action": "save"}  # fmt: skip
            t = time.perf_counter()
            status, _, body = browser.request("POST", f"/studies/{SLUG}/episodes/{episode_id}/code/", data)
            rec.time("save", t)
            if status == 302:
                with rec.lock:
                    rec.saves.append((episode_id, username, memo))
            else:
                rec.error(f"save {status}: {body[:200]}")
        except (OSError, http.client.HTTPException) as exc:
            rec.error(f"{username}: {type(exc).__name__} {exc}")


def export_loop(base: str, token: str, deadline: float, max_loops: int, rec: Recorder) -> None:
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        for _ in range(max_loops):
            if time.monotonic() > deadline:
                return
            t = time.perf_counter()
            try:
                # Count rows in the raw bytes: splitting megabytes into str lines would make this
                # client, on the same two cores, the heaviest process of the run.
                with client.stream("GET", f"/api/v1/studies/{SLUG}/export/?format=jsonl") as response:
                    rows = sum(chunk.count(b"\n") for chunk in response.iter_raw(1 << 16))
                rec.time("export", t)
                if response.status_code != 200 or rows == 0:
                    rec.error(f"export {response.status_code} rows={rows}")
            except httpx.HTTPError as exc:
                rec.error(f"export: {type(exc).__name__} {exc}")
            # A client that pulls the dataset again and again, but not in a hot loop.
            time.sleep(EXPORT_PAUSE_S)


def incident_loop(base: str, token: str, deadline: float, max_loops: int, rec: Recorder) -> None:
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=base, timeout=30, headers=headers) as client:
        for i in range(max_loops):
            if time.monotonic() > deadline:
                return
            payload = {
                "study": SLUG, "service": f"checkout-agent-{i % 5}", "severity": "high",
                "title": f"Agent retried a payment tool call {i}",
                "description": "The agent called refund() twice after a timeout; the tool had already succeeded.",
                "artifacts": [{"kind": "log", "name": "agent.log", "content": "refund() timeout\nrefund() ok"}],
            }  # fmt: skip
            t = time.perf_counter()
            try:
                response = client.post("/api/v1/incidents/", json=payload)
                rec.time("incident", t)
                if response.status_code != 201:
                    rec.error(f"incident {response.status_code}: {response.text[:200]}")
            except httpx.HTTPError as exc:
                rec.error(f"incident: {type(exc).__name__} {exc}")
            time.sleep(0.5)


def wait_for_jobs(timeout: float) -> dict:
    """Let the Celery worker finish the incidents' suggestion jobs; their statuses, counted."""
    from collections import Counter

    from annotate.models import Job, JobStatus

    jobs = Job.objects.filter(study__slug=SLUG)
    deadline = time.monotonic() + timeout
    while jobs.filter(status__in=(JobStatus.PENDING, JobStatus.RUNNING)).exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    return dict(Counter(jobs.values_list("status", flat=True)))


def verify(rec: Recorder, k: int) -> dict:
    from django.db.models import Count

    from annotate.models import Coding, Episode

    seen = {(e, u): memo for e, u, memo in rec.saves}
    stored = {
        (c["episode_id"], c["coder__username"]): c["memo"]
        for c in Coding.objects.filter(episode__study__slug=SLUG).values("episode_id", "coder__username", "memo")
    }
    lost = sum(1 for key, memo in seen.items() if stored.get(key) != memo)
    memos = Coding.objects.filter(episode__study__slug=SLUG).values("memo").annotate(n=Count("id")).filter(n__gt=1)
    duplicated = memos.count() + (len(rec.saves) - len(seen))
    over_k = Episode.objects.filter(study__slug=SLUG, n_codings__gt=k).count()
    return {"lost": lost, "duplicated": duplicated, "over_k": over_k, "stored": len(stored)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run (4 coders, 8 s)")
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--coders", type=int)
    parser.add_argument(
        "--redis-blip", action="store_true", help="stop the bench's own Redis (broker and cache) for 30 s mid-run"
    )
    args = parser.parse_args()
    seconds = args.seconds or (8 if args.quick else 60)
    blip_s = 30.0 if args.redis_blip else 0.0
    if blip_s:
        seconds = max(seconds, blip_s + 20)  # room before and after the outage
    coders = args.coders or (4 if args.quick else 20)
    episodes = 600 if args.quick else 6000

    admin_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    if not admin_url.startswith("postgres"):
        sys.exit("load_bench needs PostgreSQL: set DATABASE_URL=postgres://...")
    broker = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    redis = None
    if blip_s:
        redis = PrivateRedis()
        redis.start()
        broker = f"redis://127.0.0.1:{redis.port}/0"
    queue = f"loadbench-{uuid.uuid4().hex[:6]}"
    db_name = f"faultline_loadbench_{os.getpid()}"
    env = {
        **os.environ, "SECRET_KEY": secrets.token_urlsafe(50), "FAULTLINE_DEV": "", "DEBUG": "",
        "FAULTLINE_SSL_REDIRECT": "0", "FAULTLINE_SECURE_COOKIES": "0", "ALLOWED_HOSTS": "127.0.0.1",
        "CELERY_BROKER_URL": broker, "FAULTLINE_CELERY_QUEUE": queue, "FAULTLINE_ACCESS_LOG": "/dev/null",
        "FAULTLINE_THROTTLE_USER": "100000/min", "LOG_LEVEL": "ERROR",
    }  # fmt: skip
    if redis is not None:
        env.update(REDIS_CACHE_URL=f"redis://127.0.0.1:{redis.port}/1", FAULTLINE_REQUEUE_EVERY_S="5",
                   FAULTLINE_REQUEUE_AFTER_S="5")  # fmt: skip
    os.environ.update(env)
    creds = setup_database(admin_url, db_name, episodes, coders)
    env["DATABASE_URL"] = os.environ["DATABASE_URL"]
    port = free_port()
    try:
        procs = start_processes(port, queue, env, beat=redis is not None)
    except RuntimeError:
        if redis is not None:
            redis.stop()
        raise
    base = f"http://127.0.0.1:{port}"
    codes = {"failure_type": "TUS-03", "source": "agent_design", "stage": "iterative_execution",
             "capability": "actuation"}  # fmt: skip
    rec = Recorder()
    try:
        sessions: dict[str, tuple[Browser, str] | None] = {}
        logins = [
            threading.Thread(target=lambda u=u: sessions.__setitem__(u, coder_session(base, u, rec)))
            for u in creds["coders"]
        ]
        for t in logins:
            t.start()
        for t in logins:
            t.join(timeout=120)
        started = time.monotonic()
        deadline = started + seconds
        threads = [
            threading.Thread(target=coder_loop, args=(sessions[u], u, deadline, 10_000, rec, codes))
            for u in creds["coders"]
            if sessions.get(u)
        ]
        threads += [threading.Thread(target=export_loop, args=(base, creds["token"], deadline, 1000, rec))
                    for _ in range(2)]  # fmt: skip
        threads.append(threading.Thread(target=incident_loop, args=(base, creds["token"], deadline, 1000, rec)))
        marks: dict[str, float] = {}
        if redis is not None:
            at = started + (seconds - blip_s) / 2
            threads.append(threading.Thread(target=blip, args=(redis, at, blip_s, marks)))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=seconds + 120)
        elapsed = time.monotonic() - started
        jobs = wait_for_jobs(timeout=180 if redis is not None else 60)
        worker_alive = procs[1].poll() is None
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        if redis is not None:
            redis.stop()
            shutil.rmtree(redis.dir, ignore_errors=True)

    result = verify(rec, k=2)
    rps = rec.requests / elapsed
    print(f"{coders} coders + 2 exporters + 1 incident poster for {elapsed:.1f} s against gunicorn (4 workers)")
    print(f"{'endpoint':10} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for name in ("next", "page", "save", "export", "incident"):
        lat = rec.latency.get(name, [])
        print(
            f"{name:10} {len(lat):6d} {percentile(lat, 50):8.1f} {percentile(lat, 95):8.1f} {percentile(lat, 99):8.1f}"
        )
    print(f"requests/s {rps:.1f}; errors {len(rec.errors)}; saves seen {len(rec.saves)}; stored {result['stored']}; "
          f"lost {result['lost']}; duplicated {result['duplicated']}; episodes over k {result['over_k']}")  # fmt: skip
    from annotate.models import Episode, Suggestion

    incident_episodes = Episode.objects.filter(study__slug=SLUG, document__kind="incident")
    incidents = incident_episodes.count()
    suggested = Suggestion.objects.filter(episode__in=incident_episodes).values("episode").distinct().count()
    print(f"incident suggestions by the Celery worker: {suggested} of {incidents} incidents; "
          f"jobs {jobs}")  # fmt: skip
    if redis is not None:
        print(f"Redis (broker and cache) down from {marks['down'] - started:.1f} s to {marks['up'] - started:.1f} s; "
              f"the Celery worker {'kept running' if worker_alive else 'EXITED'}")  # fmt: skip
    for err in rec.errors[:10]:
        print("  error:", err)

    from django.db import connections

    connections.close_all()
    parsed = urlparse(admin_url)
    subprocess.run(["dropdb", "-h", parsed.hostname or "127.0.0.1", "-p", str(parsed.port or 5432), "-U",
                    parsed.username or "postgres", "--if-exists", db_name], check=False)  # fmt: skip
    summary = {
        "bench": "load", "seconds": round(elapsed, 1), "coders": coders, "rps": round(rps, 1),
        "errors": len(rec.errors), "lost": result["lost"], "duplicated": result["duplicated"],
        "p95_ms": {name: round(percentile(rec.latency.get(name, []), 95), 1)
                   for name in ("save", "page", "export", "incident")},
        "saves": len(rec.saves), "over_k": result["over_k"],
        "incidents": incidents, "incidents_suggested": suggested, "jobs_failed": jobs.get("failed", 0),
        "jobs_unfinished": jobs.get("pending", 0) + jobs.get("running", 0),
    }  # fmt: skip
    if redis is not None:
        summary.update(redis_blip_s=round(marks["up"] - marks["down"], 1), worker_alive=worker_alive)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
