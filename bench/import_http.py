"""Shared by the import and scale benches: real-sized issue bodies, and an import through the production
web server and Celery worker timed to "every document codable" and to "every document searchable", with
the CPU it cost split into web, worker and database.

Body sizes. Without --body-bytes, body lengths are drawn from a lognormal distribution:
  - its mean is 2,054 bytes, the mean body of the real-sized issues of issue 34's comparison with
    Label Studio (bodies of 1-3 KB, measured on the development set of real agent-failure issues);
  - its shape, sigma = 0.36, is the standard deviation of the log body length of the 58 issues shipped
    in fixtures/samples/github_issues.json (341-2,297 bytes, modelled on real reports); with it,
    90% of bodies fall between 1.1 and 3.6 KB, as in the issue's 1-3 KB.
The development set of real issues itself is not in this repository, so the two numbers are what it
gives us; `--body-bytes N` fixes every body at N bytes instead.

CPU. Each process's CPU is read from /proc/<pid>/stat (utime + stime), which a busy machine does not
inflate the way it inflates wall time: web = the gunicorn master and workers, worker = the Celery worker
and its pool, db = PostgreSQL's client backends connected to the bench's database (sampled every 20 ms,
since the import's writer connections come and go). On SQLite the database is inside the process that
writes, so its CPU is in `web` (no broker: the import runs inside the request) or `worker`.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BODY_MEAN_BYTES = 2054
BODY_SIGMA = 0.36
BODY_MU = math.log(BODY_MEAN_BYTES) - BODY_SIGMA**2 / 2  # a lognormal's mean is exp(mu + sigma^2 / 2)
BODY_MIN, BODY_MAX = 120, 65_536
TCK = os.sysconf("SC_CLK_TCK")

_PROSE = (
    "the agent called the search tool with a malformed query and the planner retried until the step limit; "
    "after the context window filled up the model dropped the earlier tool output and hallucinated a result; "
    "the verifier accepted a patch that broke two tests because it only checked that the code compiled; "
    "rate limits from the provider returned 429 and the retry loop never backed off; "
    "the browser agent clicked a stale selector after the page re-rendered and reported success anyway; "
    "memory retrieval returned embeddings from another project and the agent followed the wrong instructions; "
)
_PROSE_WORDS = _PROSE.split()


def body_size(rng: random.Random, body_bytes: int | None) -> int:
    """One body's length in bytes: `body_bytes`, or a draw from the lognormal above."""
    if body_bytes:
        return body_bytes
    return int(min(BODY_MAX, max(BODY_MIN, rng.lognormvariate(BODY_MU, BODY_SIGMA))))


def synthetic_body(rng: random.Random, n: int, size: int) -> str:
    """An issue body of exactly `size` bytes (ASCII): a report in prose, then a fenced log, as agent-failure
    issues are written; the words vary, so the search index sees a realistic vocabulary."""
    head = f"The agent fails at step {n}.\r\n\r\n"
    prose_len = max(0, size // 2 - len(head))
    words, length = [], 0
    while length < prose_len:
        word = rng.choice(_PROSE_WORDS)
        words.append(word)
        length += len(word) + 1
    lines, length, i = [], 0, 0
    while length < size - prose_len:
        line = f"2025-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z DEBUG step={i} tool=search_{i % 7} status={rng.choice(('ok', 'error', 'retry'))} latency_ms={rng.randint(5, 9000)}"  # noqa: E501
        lines.append(line)
        length += len(line) + 1
        i += 1
    body = f"{head}{' '.join(words)}\r\n\r\n```\n" + "\n".join(lines)
    return (body[: size - 4] + "\n```")[:size] if size > 8 else body[:size]


def proc_tree_cpu_s(pid: int) -> float:
    """utime + stime of a process and every descendant still running, in seconds."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += _cpu_s(p)
        todo += _children(p)
    return total


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TCK


def _children(pid: int) -> list[int]:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return []
    out = []
    for task in tasks:
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except FileNotFoundError:
            continue
    return out


class PgBackendCpu:
    """CPU of PostgreSQL's client backends connected to one database, sampled every 20 ms from /proc
    (the server runs on this machine). `total()` is the CPU they spent since `start()`: backends that
    came and went meanwhile count up to their last sample (at most 20 ms of CPU lost per connection)."""

    def __init__(self, url: str, dbname: str, exclude: set[int] = frozenset()):
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.dbname, self.exclude = dbname, set(exclude)
        self.exclude.add(self.conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.lock = threading.Lock()
        self.running = False

    def _sample(self) -> None:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'", [self.dbname]
        ).fetchall()
        with self.lock:
            for (pid,) in rows:
                if pid in self.exclude:
                    continue
                cpu = _cpu_s(pid)
                if pid not in self.last and pid not in self.base:
                    self.base[pid] = 0.0 if self.running else cpu
                self.last[pid] = max(cpu, self.last.get(pid, 0.0))

    def start(self) -> PgBackendCpu:
        self._sample()
        self.base = dict(self.last)
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while self.running:
            self._sample()
            time.sleep(0.02)

    def total(self) -> float:
        self._sample()
        with self.lock:
            return sum(cpu - self.base.get(pid, 0.0) for pid, cpu in self.last.items())

    def stop(self) -> None:
        self.running = False
        self.thread.join()
        self.conn.close()


def celery_worker(env: dict, queue: str) -> subprocess.Popen:
    """A Celery worker as production runs it (deploy/supervise.py: at one task at a time, the solo pool, which
    runs the task in the worker itself; else prefork with a pool process per task), on its own queue so that
    no other worker on the broker takes the bench's jobs."""
    concurrency = env.get("CELERY_CONCURRENCY", "1")
    pool = ["--pool", "solo"] if concurrency == "1" and not env.get("FAULTLINE_WORKER_POOL") else []
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", concurrency, *pool,
         "--without-gossip", "--without-mingle", "-l", "WARNING", "-Q", queue],
        cwd=ROOT, env={**env, "FAULTLINE_CELERY_QUEUE": queue}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _cpu_times() -> tuple[int, int]:
    """(idle, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as fh:
        values = [int(x) for x in fh.readline().split()[1:]]
    return values[3] + values[4], sum(values)  # idle + iowait


def settle(min_idle: float = 0.85, window: float = 0.5, timeout: float | None = None) -> float:
    """Wait until the machine is quiet (at least `min_idle` of its CPU idle over `window` seconds), at most
    `timeout` seconds ($BENCH_SETTLE_S, default 60; the benches' --quick runs set 0); the idle share last seen.
    On a 2-core machine a process still busy from the run before (autovacuum of the last import's tables, a
    peer's own after-import work) takes a core that the next run counts on, and inflates the CPU time its
    processes use for the same work."""
    if timeout is None:
        timeout = float(os.environ.get("BENCH_SETTLE_S", "60"))
    deadline = time.monotonic() + timeout
    while True:
        idle0, total0 = _cpu_times()
        time.sleep(window)
        idle1, total1 = _cpu_times()
        share = (idle1 - idle0) / max(1, total1 - total0)
        if share >= min_idle or time.monotonic() > deadline:
            return share


def wait_for(condition, timeout: float = 1800, every: float = 0.05) -> float:
    """Poll `condition()` until it is true; the time at which it was first seen true."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the import")
        time.sleep(every)
    return time.perf_counter()


def upload_import(*, port: int, slug: str, path: Path, n: int, token: str, web_pid: int, worker_pid: int | None,
                  pg: PgBackendCpu | None) -> dict:  # fmt: skip
    """POST the file to the import API and wait until every document is codable (the import job succeeded),
    then until every one is searchable (no search vector pending); the times from the start of the upload
    and the CPU per issue each stage cost."""
    import httpx

    from annotate.documents.search import search_pending
    from annotate.models import Job, Study

    study = Study.objects.get(slug=slug)

    def cpu() -> dict:
        return {"web": proc_tree_cpu_s(web_pid), "worker": proc_tree_cpu_s(worker_pid) if worker_pid else 0.0,
                "db": pg.total() if pg else 0.0}  # fmt: skip

    idle = settle()
    c0, t0 = cpu(), time.perf_counter()
    with path.open("rb") as fh:
        response = httpx.post(f"http://127.0.0.1:{port}/api/v1/studies/{slug}/import/",
                              headers={"Authorization": f"Token {token}"}, files={"file": (path.name, fh)},
                              timeout=1800)  # fmt: skip
    assert response.status_code in (200, 201, 202), (response.status_code, response.text[:300])
    uploaded = time.perf_counter()
    job_id = response.json()["id"]

    def finished() -> bool:
        return Job.objects.filter(pk=job_id, status__in=("success", "failed")).exists()

    codable = wait_for(finished)
    c1 = cpu()
    job = Job.objects.get(pk=job_id)
    # Where the time to codable went: the upload, the job's wait for a worker, the job itself.
    queued_s = (job.started_at - job.created_at).total_seconds() if job.started_at else None
    job_s = (job.finished_at - job.started_at).total_seconds() if job.started_at and job.finished_at else None
    assert job.status == "success" and job.result["created"] == n, (job.status, job.error, job.result)

    def indexed() -> bool:
        busy = Job.objects.filter(study=study, kind="search_index").exclude(status__in=("success", "failed"))
        return not busy.exists() and search_pending(study.pk) == 0

    searchable = wait_for(indexed)
    c2 = cpu()
    parts = {k: round((c1[k] - c0[k]) * 1000 / n, 4) for k in c0}
    index = {k: round((c2[k] - c1[k]) * 1000 / n, 4) for k in c0}
    return {
        "n": n,
        "idle_before": round(idle, 2),  # the machine's idle share as the run began (settle)
        "upload_s": round(uploaded - t0, 3),
        "codable_s": round(codable - t0, 3),
        "queued_s": None if queued_s is None else round(queued_s, 3),
        "job_s": None if job_s is None else round(job_s, 3),
        "searchable_s": round(searchable - t0, 3),
        "first_per_s": round(n / (codable - t0), 1),
        "searchable_per_s": round(n / (searchable - t0), 1),
        "cpu_ms_per_issue": {"total": round(sum(parts.values()), 4), **parts},
        "index_cpu_ms_per_issue": {"total": round(sum(index.values()), 4), **index},
    }
