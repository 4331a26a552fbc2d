#!/usr/bin/env python
"""Scale: a study of 1,000,000 episodes on PostgreSQL, with analysis spread over Celery workers.

    python bench/scale_bench.py             # 1,000,000 episodes over 150,000 clusters; 200,000 coded twice
    python bench/scale_bench.py --quick     # 20,000 episodes, the same steps (the test suite runs this)
    python bench/scale_bench.py --http      # also: saves, pages and an import through gunicorn
    python bench/scale_bench.py --body-bytes 700   # every issue body 700 bytes (default: real sizes, mean 2 KB)

Needs PostgreSQL (DATABASE_URL; the bench creates its own database next to the
one named, and drops it) and, for the bootstrap step, Redis (CELERY_BROKER_URL).

Steps, each printed as it finishes:
1. import: the N issues, written as a JSON Lines file, imported in a child
   process as an import job (the code behind an upload and the import API:
   parsed once into a spool, then committed, resumable batches written by
   FAULTLINE_IMPORT_WRITERS connections) (issues/s, peak RSS);
   a 10,000-issue study (1/10 in --quick) is imported beside it for comparison; CPU per issue split into
   worker (the importing process) and database (PostgreSQL's backends); bodies of real sizes
   (bench/import_http.py) unless --body-bytes fixes them;
2. coding: 20% of the episodes coded by two coders (bulk), 5% of those disagreeing;
3. pages: the coding-page GET, the coding POST, next-episode, the adjudication
   list, document search and the documents list, in-process through Django's
   full stack, on both studies (median, p95, queries; the counts must match);
4. export: the JSONL export of both studies streamed through gunicorn (rows/s,
   the server's RSS at N against at the small study);
5. bootstrap: a B = 10,000 analysis (2,000 in --quick) of the labelled
   episodes as a chunked job, with one worker process, then with two; the
   replicates' sha256 must be the same;
6. with --http: through gunicorn (4 workers, configured as in production:
   DEBUG off, sessions and throttles in Redis) and fresh connections per request,
   a coder's GET and save, sequentially and with 4 concurrent clients, in
   studies of 10,000 and 100,000 episodes (2,000 and 20,000 in --quick): server
   CPU per save (the coding page's and the API's), p50 and p95; and an import
   of 100,000 issues (20,000) through `POST /api/v1/studies/{slug}/import/`.

`--only analysis` measures the analysis of the big study instead: a fresh job and views of its stored
result (bench/analysis_scale.py, issue 31).

Targets (full size): import >= 10,000 issues/s with peak RSS < 500 MB; pages
median <= 30 ms, p95 <= 80 ms, same queries as the small study; export >=
30,000 rows/s, memory within 100 MB of the small export; 2 workers >= 1.6x
faster than 1, byte-identical; --http: <= 12 ms server CPU per save, p95 <= 60 ms
with 4 clients, p50 at 100,000 within 20% of 10,000, import >= 8,000 issues/s.
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import fcntl
import http.client
import json
import os
import random
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.export_bench import Sampler, free_port, stream, wait_up  # noqa: E402
from bench.pages_bench import Endpoints, measure, percentile  # noqa: E402

PASSWORD = "scale-bench-" + secrets.token_hex(8)
CSRF_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
VERSION_RE = re.compile(r'name="version" value="(\d*)"')
_WORD_TEXT = (
    "agent tool call timeout retry planner memory context window token limit provider error sandbox "
    "browser click selector schema json parse loop step trace log output verifier test patch repo"
)
WORDS = _WORD_TEXT.split()
# Saves whose server CPU is summed: the kernel counts CPU in 10 ms ticks per worker, so a few dozen saves
# would carry an error of a tenth of a save's cost; 200 carry under 0.2 ms.
SAVES_COUNTED = 200
CODES = {"failure_type": "TUS-03", "source": "llm", "stage": "iterative_execution", "capability": "actuation"}


def log(message: str) -> None:
    print(message, flush=True)


def stop(proc: subprocess.Popen) -> None:
    """Stop a process this bench started: politely, then for good."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


# ---------------------------------------------------------------- data


BODY_BYTES: int | None = None  # --body-bytes; None: real sizes (bench/import_http.py)


def write_issues(path: Path, n: int, clusters: int, seed: int) -> None:
    """n GitHub REST issue objects as JSON Lines, spread over `clusters` repositories, with bodies of BODY_BYTES
    bytes or of real sizes."""
    from bench.import_http import body_size, synthetic_body

    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            repo = f"org{i % clusters % 997}/agent-{i % clusters}"
            fh.write(json.dumps({
                "url": f"https://api.github.com/repos/{repo}/issues/{i}",
                "repository_url": f"https://api.github.com/repos/{repo}",
                "html_url": f"https://github.com/{repo}/issues/{i}",
                "number": i, "state": "open", "user": {"login": f"user{i % 5000}"},
                "title": f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)} fails after {i % 500} steps",
                "body": synthetic_body(rng, i, body_size(rng, BODY_BYTES)),
                "labels": [{"name": rng.choice(("bug", "agent", "tools", "memory"))}],
                "created_at": "2025-01-02T10:00:00Z", "updated_at": "2025-02-03T11:00:00Z",
            }) + "\n")  # fmt: skip


def fresh_database(url: str) -> tuple[str, callable]:
    import psycopg

    parts = urlsplit(url)
    # Its own name per run: two benches at once (the test suite runs two) must not drop each other's database.
    name = f"{parts.path.lstrip('/') or 'faultline'}_scale_bench_{os.getpid()}"
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


def child_import(slug: str, path: str) -> None:
    """In a child process: import the file into the study as an import job does (the upload path of the
    pages and of POST /api/v1/studies/{slug}/import/: parsed once into a spool, then written in committed,
    resumable batches by FAULTLINE_IMPORT_WRITERS connections); print the figures as JSON."""
    import resource

    import django

    django.setup()
    from django.conf import settings

    from annotate.imports.uploads import UPLOAD_DIR
    from annotate.jobs.runner import job_run
    from annotate.models import Job, JobStatus, Study

    study = Study.objects.get(slug=slug)
    study.suggest_on_import = False  # suggestions are their own job, not part of the import
    study.save(update_fields=["suggest_on_import"])
    uploads = Path(settings.MEDIA_ROOT) / UPLOAD_DIR
    uploads.mkdir(parents=True, exist_ok=True)
    stored = uploads / f"scale-bench-{uuid.uuid4().hex}.jsonl"
    shutil.move(path, stored)  # where an upload is stored, before the clock starts
    params = {"path": f"{UPLOAD_DIR}/{stored.name}", "filename": stored.name, "include_prs": False}
    job = Job.objects.create(kind="import", study=study, params=params)
    from django.db import connection

    from bench.import_http import PgBackendCpu

    db = connection.settings_dict
    pg = PgBackendCpu(f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/postgres", db["NAME"]).start()
    t0, c0 = time.perf_counter(), time.process_time()
    job = job_run(job_id=job.pk)
    seconds, worker = time.perf_counter() - t0, time.process_time() - c0
    db_cpu = pg.total()
    pg.stop()
    assert job.status == JobStatus.SUCCESS, (job.status, job.error)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n = job.result["created"]
    cpu = {"worker": round(worker * 1000 / n, 4), "db": round(db_cpu * 1000 / n, 4)}
    print(json.dumps({"created": n, "seconds": seconds, "peak_mb": peak,
                      "cpu_ms_per_issue": {"total": round(sum(cpu.values()), 4), "web": 0.0, **cpu}}))  # fmt: skip


def run_import(slug: str, path: Path) -> dict:
    cmd = [sys.executable, __file__, "--child-import", slug, str(path)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=os.environ.copy(), check=False)
    if out.returncode:
        sys.stderr.write(out.stdout + out.stderr)
        raise SystemExit("the import failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def code_episodes(study, coders, coded: int, disagreeing: int, seed: int) -> None:
    """Two codings each for `coded` episodes spread over the study; `disagreeing` of them differ on the type."""
    from django.db import connection

    from annotate.models import Coding, Episode, EpisodeStatus
    from taxonomy.models import AxisValue, FailureType

    rng = random.Random(seed)
    types = list(FailureType.objects.filter(codebook=study.codebook).order_by("code"))
    axes = {a: list(AxisValue.objects.filter(codebook=study.codebook, axis=a).order_by("order"))
            for a in ("source", "stage", "capability")}  # fmt: skip
    ids = list(Episode.objects.filter(study=study).order_by("id").values_list("id", flat=True))
    step = max(1, len(ids) // coded)
    chosen = ids[::step][:coded]
    differ = set(rng.sample(range(len(chosen)), disagreeing))
    batch: list[Coding] = []
    for n, episode_id in enumerate(chosen):
        t = rng.choice(types)
        stage, cap, source = rng.choice(axes["stage"]), rng.choice(axes["capability"]), rng.choice(axes["source"])
        for c, coder in enumerate(coders):
            ft = rng.choice([x for x in types if x != t]) if c == 1 and n in differ else t
            batch.append(Coding(episode_id=episode_id, coder=coder, failure_type=ft, source=source, stage=stage,
                                capability=cap, memo="scale bench"))  # fmt: skip
        if len(batch) >= 10_000:
            Coding.objects.bulk_create(batch)
            batch = []
    Coding.objects.bulk_create(batch)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE annotate_episode SET n_codings = 2, status = %s WHERE id = ANY(%s)",
            [EpisodeStatus.CODED, chosen],
        )
        _disagreement_backfill(cursor, study.pk)
        cursor.execute("ANALYZE")


def _disagreement_backfill(cursor, study_id: int) -> None:
    """Bulk-created codings bypass the coding service: store the disagreement state as it would."""
    from annotate.coding.disagreement import disagreement_refresh

    disagreement_refresh(study_id=study_id)


# ---------------------------------------------------------------- pages


class ScaleEndpoints(Endpoints):
    """The pages bench's four requests, plus document search and the documents list."""

    def document_search(self, i: int):
        term = WORDS[i % len(WORDS)]
        response = self.owner_client.get(f"/studies/{self.study.slug}/documents/", {"q": f"{term} fails"})
        assert response.status_code == 200, response.status_code
        return response, None

    def documents_list(self, i: int):
        query = [{}, {"kind": "github_issue"}, {"coded": "coded"}, {"after": str(self.targets[i % 50])}][i % 4]
        response = self.owner_client.get(f"/studies/{self.study.slug}/documents/", query)
        assert response.status_code == 200, response.status_code
        return response, None


PAGES = ("coding_get", "coding_post", "next", "adjudication_list", "document_search", "documents_list")


def measure_pages(studies: dict, users: dict, requests: int) -> dict:
    from annotate.coding.selectors import codebook_picker
    from annotate.coding.services import CodingValues
    from annotate.models import Lease

    results = {}
    for label, study in studies.items():
        picker = codebook_picker(study.codebook)
        values = CodingValues(**{a: picker.value_by_code[a][CODES[a]] for a in ("source", "stage", "capability")},
                              failure_type=picker.type_by_code[CODES["failure_type"]])  # fmt: skip
        endpoints = ScaleEndpoints(study, users["bench"], users["owner"], [t.code for t in picker.types], values,
                                   requests)  # fmt: skip
        endpoints.get_target = endpoints.get_targets.pop()  # as the pages bench warms up
        endpoints.coding_get(requests)
        endpoints.adjudication_list(0)
        endpoints.document_search(0)
        Lease.objects.filter(coder=users["bench"]).delete()
        results[label] = {name: measure(endpoints, name, requests) for name in PAGES}
    return results


# ---------------------------------------------------------------- export


def measure_export(studies: dict, token: str, env: dict) -> dict:
    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "deploy/gunicorn.conf.py"],
        cwd=ROOT, env={**env, "FAULTLINE_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    out = {}
    try:
        wait_up(base, web)
        for label, study in studies.items():
            with Sampler(web.pid) as sampler:
                rows, seconds = stream(base, study.slug, token)
            out[label] = {"rows": rows, "seconds": seconds, "peak_mb": sampler.peak}
    finally:
        stop(web)
    return out


# ---------------------------------------------------------------- bootstrap


def measure_bootstrap(study, B: int, env: dict, chunks: int = 16) -> dict:
    from annotate.jobs.tasks import run_job
    from annotate.models import Job

    out = {}
    for workers in (1, 2):
        queue = f"scale-{uuid.uuid4().hex[:8]}"
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "--pool", "prefork",
             "--concurrency", str(workers), "--without-gossip", "--without-mingle", "-l", "WARNING"],
            cwd=ROOT, env={**env, "FAULTLINE_CELERY_QUEUE": queue, "FAULTLINE_ANALYSIS_QUEUE": queue},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_worker(queue)
            params = {"bootstrap": B, "seed": 7, "chunks": chunks}
            job = Job.objects.create(kind="bootstrap", study=study, params=params)
            cpu0 = worker_cpu_s(worker.pid)
            t0 = time.perf_counter()
            run_job.apply_async(args=[job.pk], queue=queue)
            while True:
                job.refresh_from_db()
                if job.finished:
                    break
                time.sleep(0.2)
            seconds = time.perf_counter() - t0
            cpu = worker_cpu_s(worker.pid) - cpu0
            if job.error:
                raise SystemExit(f"bootstrap with {workers} worker(s) failed: {job.error}")
            split = cpu_split(job.result["run"].get("timings", {}))
            out[workers] = {"seconds": seconds, "sha256": job.result["run"]["replicates_sha256"],
                            "labelled": job.result["data"]["labelled_primary"], "worker_cpu_s": cpu,
                            **split}  # fmt: skip
            log(f"bootstrap B={B:,} with {workers} worker process(es): {seconds:.1f} s, workers' CPU {cpu:.1f} s "
                f"({out[workers]['labelled']:,} labelled episodes)")  # fmt: skip
            if split:
                log(f"  serial CPU {split['serial_cpu_s']:.2f} s {split['serial_steps']}; parallel CPU "
                    f"{split['parallel_cpu_s']:.2f} s (labels {split['labels_cpu_s']:.2f}, {split['chunks']} chunks "
                    f"{split['chunks_cpu_s']:.2f}: draw {split['chunks_draw_cpu_s']:.2f}, inputs "
                    f"{split['chunks_inputs_cpu_s']:.2f}, pack {split['chunks_pack_cpu_s']:.2f}); serial "
                    f"fraction {split['serial_fraction']:.2f}, ideal 2-worker speed-up "
                    f"{split['ideal_speedup_2w']:.2f}x")  # fmt: skip
        finally:
            stop(worker)
    return out


def worker_cpu_s(master: int) -> float:
    """utime + stime of a Celery worker and its pool processes, in seconds."""
    return _proc_cpu_s(master) + sum(_proc_cpu_s(pid) for pid in _children(master))


def _proc_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_split(timings: dict) -> dict:
    """The job's own CPU accounting: serial steps (the job, joining the labels, combining) against the
    parallel ones (label parts, chunks), and the speed-up two worker processes could reach with them
    at best (Amdahl)."""
    if not timings.get("chunks"):
        return {}
    serial_steps = {name: timings[name] for name in ("job", "scatter", "combine") if name in timings}
    serial = sum(step["total"]["cpu"] for step in serial_steps.values())
    labels = sum(part["total"]["cpu"] for part in timings.get("labels", []))
    chunks = timings["chunks"]
    parallel = labels + sum(c["total"]["cpu"] for c in chunks)
    return {
        "serial_cpu_s": round(serial, 3),
        "serial_steps": {name: {k: v["cpu"] for k, v in step.items()} for name, step in serial_steps.items()},
        "labels_cpu_s": round(labels, 3),
        "chunks": len(chunks),
        "chunks_cpu_s": round(parallel - labels, 3),
        "chunks_draw_cpu_s": round(sum(c["draw"]["cpu"] for c in chunks), 3),
        "chunks_inputs_cpu_s": round(sum(c["inputs"]["cpu"] for c in chunks), 3),
        "chunks_pack_cpu_s": round(sum(c["pack"]["cpu"] for c in chunks), 3),
        "parallel_cpu_s": round(parallel, 3),
        "serial_fraction": round(serial / (serial + parallel), 3) if serial + parallel else None,
        "ideal_speedup_2w": round((serial + parallel) / (serial + parallel / 2), 2) if parallel else 1.0,
    }


def _wait_worker(queue: str) -> None:
    from config.celery import app

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        replies = app.control.inspect(timeout=1.0).active_queues() or {}
        if any(q["name"] == queue for qs in replies.values() for q in qs):
            return
    raise SystemExit("the Celery worker did not come up")


# ---------------------------------------------------------------- --http


class Browser:
    """Cookies, and a fresh connection for every request (as a browser meets a sync gunicorn worker)."""

    def __init__(self, port: int) -> None:
        self.port, self.cookies = port, {}

    def request(self, method: str, path: str, data: dict | None = None) -> tuple[int, str]:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if data is not None:
            body = urlencode(data)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read().decode()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return response.status, payload
        finally:
            conn.close()

    def login(self, username: str) -> None:
        _, page = self.request("GET", "/login/")
        status, _ = self.request("POST", "/login/", {"username": username, "password": PASSWORD,
                                                     "csrfmiddlewaretoken": CSRF_RE.search(page).group(1)})  # fmt: skip
        assert status == 302, f"login of {username}: {status}"


def cpu_s(master: int) -> float:
    """utime + stime of gunicorn's workers, in seconds."""
    total = 0.0
    for pid in _children(master):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _children(pid: int) -> list[int]:
    return [int(x) for task in Path(f"/proc/{pid}/task").iterdir() for x in (task / "children").read_text().split()]


def coder_saves(port: int, slug: str, username: str, episodes: list[int], times: dict) -> None:
    """GET each episode's coding page and save it; record both latencies."""
    browser = Browser(port)
    browser.login(username)
    for episode_id in episodes:
        url = f"/studies/{slug}/episodes/{episode_id}/code/"
        t0 = time.perf_counter()
        status, page = browser.request("GET", url)
        times["get"].append((time.perf_counter() - t0) * 1000)
        assert status == 200, (status, page[:300])
        data = {**CODES, "confidence": "medium", "memo": "http", "csrfmiddlewaretoken": CSRF_RE.search(page).group(1),
                "version": (VERSION_RE.search(page) or [None, ""])[1], "action": "save"}  # fmt: skip
        t0 = time.perf_counter()
        status, body = browser.request("POST", url, data)
        times["save"].append((time.perf_counter() - t0) * 1000)
        assert status in (200, 302), (status, body[:300])


def production_env(env: dict) -> dict:
    """The web process as docs/deploy.md deploys it: DEBUG and FAULTLINE_DEV off (manifest static files, no
    per-request static lookups), sessions and throttle counters in Redis (next to the broker, one database
    number up); only TLS is left to the proxy that is not there."""
    out = {**env, "SECRET_KEY": secrets.token_urlsafe(50), "FAULTLINE_DEV": "", "DEBUG": "",
           "FAULTLINE_SSL_REDIRECT": "0", "FAULTLINE_SECURE_COOKIES": "0", "ALLOWED_HOSTS": "127.0.0.1",
           "LOG_LEVEL": "ERROR"}  # fmt: skip
    broker = urlsplit(env.get("CELERY_BROKER_URL", ""))
    if broker.scheme in ("redis", "rediss"):
        db = int(broker.path.strip("/") or 0)
        out["REDIS_CACHE_URL"] = urlunsplit(broker._replace(path=f"/{(db + 1) % 16}"))
    # The hashed, compressed files the manifest storage serves; one writer at a time (the fault tests collect too).
    with open(Path(tempfile.gettempdir()) / "faultline-collectstatic.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=out,
                       check=True)  # fmt: skip
    return out


def measure_http(
    studies: dict, coders: list[str], http_import: tuple, env: dict, per_client: int, worker_pid: int | None = None
) -> dict:
    from annotate.models import Episode

    port = free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "deploy/gunicorn.conf.py"],
        cwd=ROOT, env={**production_env(env), "FAULTLINE_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "4"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    out: dict = {}
    try:
        wait_up(f"http://127.0.0.1:{port}", web)
        for label, study in studies.items():
            free = list(Episode.objects.filter(study=study, n_codings=0).order_by("?").values_list("id", flat=True)[
                : per_client * (1 + len(coders))])  # fmt: skip
            seq = {"get": [], "save": []}
            coder_saves(port, study.slug, coders[0], free[:5], {"get": [], "save": []})  # warm-up
            c0 = cpu_s(web.pid)
            coder_saves(port, study.slug, coders[0], free[5:per_client], seq)
            cpu_per = (cpu_s(web.pid) - c0) / max(1, len(seq["save"]))  # GET and save together
            con = {"get": [], "save": []}
            threads = [
                threading.Thread(target=coder_saves, args=(port, study.slug, coders[1 + k],
                                 free[per_client * (1 + k): per_client * (2 + k)], con))
                for k in range(4)
            ]  # fmt: skip
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            out[label] = {
                "episodes": Episode.objects.filter(study=study).count(),
                "cpu_ms_get_and_save": round(cpu_per * 1000, 2),
                "save_p50_ms": round(statistics.median(seq["save"]), 1),
                "save_p95_ms": round(percentile(seq["save"], 0.95), 1),
                "get_p50_ms": round(statistics.median(seq["get"]), 1),
                "save_p95_ms_4clients": round(percentile(con["save"], 0.95), 1),
                "get_p95_ms_4clients": round(percentile(con["get"], 0.95), 1),
            }
            log(f"http {label}: {out[label]}")
        out["save_cpu_ms"] = _save_cpu_ms(port, web.pid, studies, coders)
        out["api_save_cpu_ms"] = _api_save_cpu_ms(port, web.pid, studies, coders)
        log(f"server CPU per save: coding page {out['save_cpu_ms']} ms, API {out['api_save_cpu_ms']} ms")
        out["import"] = _http_import(port, *http_import, web_pid=web.pid, worker_pid=worker_pid)
    finally:
        stop(web)
    return out


def _save_cpu_ms(port: int, master: int, studies: dict, coders: list[str]) -> float:
    """Server CPU of the save alone: the GETs are made first, then only the saves are counted."""
    from annotate.models import Episode

    study = list(studies.values())[-1]
    uncoded = Episode.objects.filter(study=study, n_codings=0).order_by("?").values_list("id", flat=True)
    episodes = list(uncoded[:SAVES_COUNTED])
    browser = Browser(port)
    browser.login(coders[-1])
    forms = []
    for episode_id in episodes:
        url = f"/studies/{study.slug}/episodes/{episode_id}/code/"
        _, page = browser.request("GET", url)
        forms.append((url, {**CODES, "confidence": "medium", "csrfmiddlewaretoken": CSRF_RE.search(page).group(1),
                            "version": "", "action": "save"}))  # fmt: skip
    c0 = cpu_s(master)
    for url, data in forms:
        # In use, the page after each save shows its "Saved" message and so clears the messages cookie. The
        # GETs came first here, so drop the cookie as that page would have: else every save re-signs a cookie
        # of all earlier messages, and past 2 KB writes them to the session (a query more), a cost no coder has.
        browser.cookies.pop("messages", None)
        status, _ = browser.request("POST", url, data)
        assert status in (200, 302), status
    return round((cpu_s(master) - c0) * 1000 / len(forms), 2)


def _api_save_cpu_ms(port: int, master: int, studies: dict, coders: list[str]) -> float:
    """Server CPU of a save through `POST /api/v1/studies/{slug}/codings/` (token, fresh connections)."""
    from django.contrib.auth import get_user_model

    from annotate.models import Episode
    from annotate.studies.tokens import token_create

    study = list(studies.values())[-1]
    uncoded = Episode.objects.filter(study=study, n_codings=0).order_by("?").values_list("id", flat=True)
    episodes = list(uncoded[: SAVES_COUNTED + 10])
    _, key = token_create(user=get_user_model().objects.get(username=coders[0]), name="scale bench api saves")
    headers = {"Authorization": f"Token {key}", "Content-Type": "application/json"}

    def save(episode_id: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        try:
            body = json.dumps({"episode": episode_id, **CODES, "confidence": "medium"})
            conn.request("POST", f"/api/v1/studies/{study.slug}/codings/", body=body, headers=headers)
            response = conn.getresponse()
            assert response.status == 201, (response.status, response.read()[:300])
            response.read()
        finally:
            conn.close()

    for episode_id in episodes[:10]:  # warm-up: every worker has run the path once
        save(episode_id)
    c0 = cpu_s(master)
    for episode_id in episodes[10:]:
        save(episode_id)
    return round((cpu_s(master) - c0) * 1000 / len(episodes[10:]), 2)


def _http_import(port: int, slug: str, path: Path, n: int, token: str, *, web_pid: int, worker_pid: int | None) -> dict:
    """The import API end to end (bench/import_http.py): until every document is codable, then searchable,
    with the CPU per issue of web, worker and database."""
    from django.db import connection

    from bench.import_http import PgBackendCpu, upload_import

    db = connection.settings_dict
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        own = cursor.fetchone()[0]
    pg = PgBackendCpu(f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/postgres", db["NAME"], {own}).start()
    try:
        got = upload_import(port=port, slug=slug, path=path, n=n, token=token, web_pid=web_pid, worker_pid=worker_pid,
                            pg=pg)  # fmt: skip
    finally:
        pg.stop()
    log(f"http import: {n:,} issues codable in {got['codable_s']:.1f} s ({got['first_per_s']:,.0f}/s), searchable in "
        f"{got['searchable_s']:.1f} s; CPU per issue {got['cpu_ms_per_issue']} ms, then {got['index_cpu_ms_per_issue']}"
        " ms for the search index")  # fmt: skip
    return {**got, "seconds": got["codable_s"], "per_s": round(got["first_per_s"])}


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 episodes (the test suite runs this)")
    parser.add_argument("--http", action="store_true", help="also measure through gunicorn with fresh connections")
    parser.add_argument("--episodes", type=int, help="episodes in the big study")
    parser.add_argument("--http-only", action="store_true", help="only the --http measurements (steps 6)")
    parser.add_argument("--only", choices=["bootstrap", "analysis", "agreement"],
                        help="bootstrap: only step 5, on the n/5 episodes it codes; analysis: the stored and fresh "
                             "analysis of the big study (bench/analysis_scale.py); agreement: its agreement "
                             "job, page and stored document only")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="run the bootstrap step this many times (with --only)")
    parser.add_argument("--chunks", type=int, default=16, help="chunks per bootstrap job (default 16)")
    parser.add_argument("--body-bytes", type=int, help="every issue body this many bytes (default: real sizes)")
    parser.add_argument("--child-import", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global BODY_BYTES
    BODY_BYTES = args.body_bytes
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("FAULTLINE_DEV", "1")
    if args.child_import:
        child_import(*args.child_import)
        return
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        raise SystemExit("scale_bench needs PostgreSQL: set DATABASE_URL=postgres://...")
    url, drop = fresh_database(url)
    work = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    os.environ.update(DATABASE_URL=url, FAULTLINE_MAX_UPLOAD_MB="2000",
                      FAULTLINE_THROTTLE_USER="1000000/min")  # fmt: skip
    try:
        run(args, work)
    finally:
        drop()
        shutil.rmtree(work, ignore_errors=True)


def run(args, work: Path) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    from annotate.studies.services import study_create
    from annotate.studies.tokens import token_create
    from taxonomy.services import codebook_load, codebook_read_file

    n = args.episodes or (20_000 if args.quick else 1_000_000)
    if args.quick:
        os.environ["BENCH_SETTLE_S"] = "0"  # import_http.settle: a smoke run does not wait for a quiet machine
    small_n = max(1_000, n // 100) if args.quick else 10_000
    B = 2_000 if args.quick else 10_000
    env = {**os.environ, "FAULTLINE_DEV": "1"}
    broker = os.environ.get("CELERY_BROKER_URL", "")

    codebook = codebook_load(data=codebook_read_file(ROOT / "fixtures" / "codebook-v1.json"), publish=True).codebook
    users_model = get_user_model().objects
    users = {u: users_model.create_user(username=u, password=PASSWORD)
             for u in ("owner", "c1", "c2", "bench", "h0", "h1", "h2", "h3", "h4")}  # fmt: skip
    coders = [users[u] for u in ("c1", "c2", "bench", "h0", "h1", "h2", "h3", "h4")]
    big = study_create(slug="big", name="Big", codebook=codebook, owner=users["owner"], coders=coders)
    small = study_create(slug="small", name="Small", codebook=codebook, owner=users["owner"], coders=coders)
    _, token = token_create(user=users["owner"], name="scale bench")

    summary: dict = {"bench": "scale", "episodes": n, "quick": args.quick}
    targets: dict[str, bool] = {}
    if args.only == "bootstrap":
        summary, targets = bootstrap_only(args, work, n, B, big, users, env, broker)
    elif args.only == "analysis":
        from bench.analysis_scale import analysis_steps

        summary, targets = analysis_steps(args, work, n, big, users, log, write_issues, run_import, code_episodes)
    elif args.only == "agreement":
        from bench.analysis_scale import agreement_steps

        summary, targets = agreement_steps(args, work, n, big, users, log, write_issues, run_import, code_episodes)
    elif not args.http_only:
        summary, targets = scale_steps(args, work, n, small_n, B, big, small, users, token, env, broker)
    if args.http or args.http_only:
        http_steps(args, work, codebook, users, coders, token, env, broker, summary, targets)
    for name, ok in targets.items():
        log(f"  {'met' if ok else 'MISSED'}: {name}")
    summary["targets_missed"] = [name for name, ok in targets.items() if not ok]
    print(json.dumps(summary))


def scale_steps(args, work: Path, n: int, small_n: int, B: int, big, small, users, token, env, broker):
    """Steps 1-5 on the big study and the small one; returns the summary and the targets met."""
    clusters, coded, disagreeing = n * 3 // 20, n // 5, n // 100
    # 1. import
    for label, study, size in (("small", small, small_n), ("big", big, n)):
        path = work / f"{label}.jsonl"
        write_issues(path, size, max(1, size * 3 // 20), seed=len(label))
        figures = run_import(study.slug, path)  # the job deletes the file
        assert figures["created"] == size, figures
        if label == "big":
            imported = figures
    import_per_s = n / imported["seconds"]
    log(f"import: {n:,} issues in {imported['seconds']:.1f} s ({import_per_s:,.0f}/s), "
        f"peak RSS {imported['peak_mb']:.0f} MB; CPU per issue {imported['cpu_ms_per_issue']} ms")  # fmt: skip

    # 2. coding
    t0 = time.perf_counter()
    code_episodes(big, (users["c1"], users["c2"]), coded, disagreeing, seed=1)
    code_episodes(small, (users["c1"], users["c2"]), small_n // 5, max(1, small_n // 100), seed=2)
    log(f"coded {coded:,} episodes twice ({disagreeing:,} disagreeing) in {time.perf_counter() - t0:.1f} s")

    # 3. pages
    requests = 20 if args.quick else 50
    pages = measure_pages({"big": big, "small": small}, users, requests)
    log(f"{'request':<20} {'median ms':>10} {'p95 ms':>8} {'queries':>8}   small: {'median':>7} {'queries':>8}")
    same_queries = True
    for name in PAGES:
        b, s = pages["big"][name], pages["small"][name]
        same_queries &= b["queries"] == s["queries"]
        log(f"{name:<20} {b['median_ms']:>10.1f} {b['p95_ms']:>8.1f} {b['queries']:>8}   "
            f"{s['median_ms']:>13.1f} {s['queries']:>8}")  # fmt: skip

    # 4. export
    exports = measure_export({"small": small, "big": big}, token, env)
    export_rows_per_s = exports["big"]["rows"] / exports["big"]["seconds"]
    growth = exports["big"]["peak_mb"] - exports["small"]["peak_mb"]
    log(f"export: {exports['big']['rows']:,} rows in {exports['big']['seconds']:.1f} s ({export_rows_per_s:,.0f}/s); "
        f"server peak {exports['big']['peak_mb']:.0f} MB vs {exports['small']['peak_mb']:.0f} MB "
        f"at {exports['small']['rows']:,} rows")  # fmt: skip

    # 5. bootstrap
    boot = measure_bootstrap(big, B, env, args.chunks) if broker else {}
    if not broker:
        log("bootstrap: skipped (no CELERY_BROKER_URL)")

    summary = {
        "bench": "scale",
        "episodes": n,
        "clusters": clusters,
        "coded": coded,
        "disagreements": disagreeing,
        "import_per_s": round(import_per_s),
        "import_peak_mb": round(imported["peak_mb"], 1),
        "import_cpu_ms_per_issue": imported["cpu_ms_per_issue"],
        "body_bytes": BODY_BYTES or "lognormal",
        "pages_median_ms": {k: pages["big"][k]["median_ms"] for k in PAGES},
        "pages_p95_ms": {k: pages["big"][k]["p95_ms"] for k in PAGES},
        "pages_queries": {k: pages["big"][k]["queries"] for k in PAGES},
        "pages_queries_small": {k: pages["small"][k]["queries"] for k in PAGES},
        "pages_same_queries": same_queries,
        "export_rows": exports["big"]["rows"],
        "export_rows_per_s": round(export_rows_per_s),
        "export_mem_growth_mb": round(growth, 1),
        "bootstrap_B": B,
        "bootstrap_1w_s": round(boot[1]["seconds"], 2) if boot else None,
        "bootstrap_2w_s": round(boot[2]["seconds"], 2) if boot else None,
        "bootstrap_speedup": round(boot[1]["seconds"] / boot[2]["seconds"], 2) if boot else None,
        "bootstrap_identical": boot[1]["sha256"] == boot[2]["sha256"] if boot else None,
        "quick": args.quick,
    }

    targets = {
        "import >= 10,000/s": summary["import_per_s"] >= 10_000,
        "import peak < 500 MB": summary["import_peak_mb"] < 500,
        "pages median <= 30 ms": max(summary["pages_median_ms"].values()) <= 30,
        "pages p95 <= 80 ms": max(summary["pages_p95_ms"].values()) <= 80,
        "same queries as the small study": same_queries,
        "export >= 30,000 rows/s": summary["export_rows_per_s"] >= 30_000,
        "export memory within 100 MB": summary["export_mem_growth_mb"] <= 100,
    }
    if boot:
        targets["bootstrap 2 workers >= 1.6x"] = summary["bootstrap_speedup"] >= 1.6
        targets["bootstrap byte-identical"] = bool(summary["bootstrap_identical"])
    return summary, targets


def bootstrap_only(args, work: Path, n: int, B: int, big, users, env, broker):
    """Steps 2 and 5 on the big study's coded episodes alone, the bootstrap `--repeat` times.

    Only the n/5 episodes the full bench codes are imported, over the clusters they fall in there
    (every 5th of n * 3/20), so the bootstrap sees the same design without an import of n issues;
    the uncoded episodes it leaves out are only counted by the database.
    """
    if not broker:
        raise SystemExit("--only bootstrap needs CELERY_BROKER_URL")
    coded, disagreeing = n // 5, n // 100
    path = work / "big.jsonl"
    write_issues(path, coded, max(1, n * 3 // 20 // 5), seed=len("big"))
    figures = run_import(big.slug, path)  # the job deletes the file
    assert figures["created"] == coded, figures
    code_episodes(big, (users["c1"], users["c2"]), coded, disagreeing, seed=1)
    log(f"imported and coded {coded:,} episodes twice ({disagreeing:,} disagreeing)")
    runs = [measure_bootstrap(big, B, env, args.chunks) for _ in range(args.repeat)]
    speedups = [r[1]["seconds"] / r[2]["seconds"] for r in runs]
    keys = ("seconds", "worker_cpu_s", "serial_cpu_s", "parallel_cpu_s", "ideal_speedup_2w")
    summary = {
        "bench": "scale", "only": "bootstrap", "episodes": n, "coded": coded, "bootstrap_B": B,
        "bootstrap_chunks": args.chunks,
        "bootstrap_1w_s": round(min(r[1]["seconds"] for r in runs), 2),
        "bootstrap_2w_s": round(min(r[2]["seconds"] for r in runs), 2),
        "bootstrap_speedups": [round(x, 2) for x in speedups],
        "bootstrap_speedup": round(statistics.median(speedups), 2),
        "bootstrap_identical": all(r[1]["sha256"] == r[2]["sha256"] == runs[0][1]["sha256"] for r in runs),
        "bootstrap_runs": [{w: {k: round(r[w][k], 3) for k in keys if k in r[w]} for w in (1, 2)} for r in runs],
    }  # fmt: skip
    targets = {
        "bootstrap 2 workers >= 1.6x": summary["bootstrap_speedup"] >= 1.6,
        "bootstrap byte-identical": summary["bootstrap_identical"],
    }
    return summary, targets


def http_steps(args, work: Path, codebook, users, coders, token, env, broker, summary: dict, targets: dict) -> None:
    """Step 6: saves, pages and an import through gunicorn; adds its figures to the summary."""
    from annotate.studies.services import study_create

    # The bigger study has --episodes (the smaller a tenth of it), else 20,000 with --quick, else 100,000.
    big_n = args.episodes or (20_000 if args.quick else 100_000)
    sizes = (big_n // 10, big_n)
    studies = {}
    for size in sizes:
        study = study_create(slug=f"http{size}", name=f"HTTP {size}", codebook=codebook, owner=users["owner"],
                             coders=coders)  # fmt: skip
        path = work / f"http{size}.jsonl"
        write_issues(path, size, max(1, size * 3 // 20), seed=size)
        run_import(study.slug, path)  # the job deletes the file
        code_episodes(study, (users["c1"], users["c2"]), size // 5, max(1, size // 100), seed=3)
        studies[f"{size // 1000}k"] = study
    target = study_create(slug="httpimport", name="HTTP import", codebook=codebook, owner=users["owner"])
    # Suggestions are a job of their own that the import only queues: without this the worker would suggest for
    # every imported episode after the clock stopped, and the bench would wait for it to stop.
    target.suggest_on_import = False
    target.save(update_fields=["suggest_on_import"])
    path = work / "upload.jsonl"
    write_issues(path, sizes[1], sizes[1] * 3 // 20, seed=9)
    if not broker:
        log("http import: no CELERY_BROKER_URL, so the import job runs inside the request")
    worker = None
    queue = f"scale-http-{uuid.uuid4().hex[:8]}"  # its own: another bench may share the broker
    if broker:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--without-gossip",
             "--without-mingle", "-l", "WARNING", "-Q", queue],
            cwd=ROOT, env={**env, "FAULTLINE_CELERY_QUEUE": queue},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_worker(queue)
    try:
        web_env = {**env, "FAULTLINE_CELERY_QUEUE": queue}
        per_client = 40 if args.quick else 200
        got = measure_http(studies, ["bench", "h0", "h1", "h2", "h3"], (target.slug, path, sizes[1], token),
                           web_env, per_client, worker.pid if worker else None)  # fmt: skip
    finally:
        if worker:
            stop(worker)
    small_label, big_label = (f"{s // 1000}k" for s in sizes)
    summary.update(
        save_cpu_ms=got["save_cpu_ms"],
        api_save_cpu_ms=got["api_save_cpu_ms"],
        save_p95_ms_4clients=got[big_label]["save_p95_ms_4clients"],
        save_p50_ms_10k=got[small_label]["save_p50_ms"],
        save_p50_ms_100k=got[big_label]["save_p50_ms"],
        http_import_per_s=got["import"]["per_s"],
        http_import_cpu_ms_per_issue=got["import"]["cpu_ms_per_issue"],
        http_import_searchable_s=got["import"]["searchable_s"],
        http=got,
    )
    targets["save CPU <= 12 ms"] = summary["save_cpu_ms"] <= 12
    targets["API save CPU <= 12 ms"] = summary["api_save_cpu_ms"] <= 12
    targets["save p95 (4 clients) <= 60 ms"] = summary["save_p95_ms_4clients"] <= 60
    targets["save p50 at 100k within 20% of 10k"] = summary["save_p50_ms_100k"] <= 1.2 * summary["save_p50_ms_10k"]
    targets["http import >= 8,000/s"] = summary["http_import_per_s"] >= 8_000


if __name__ == "__main__":
    main()
