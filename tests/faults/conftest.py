"""Real processes for fault tests: a private Redis, gunicorn, Celery worker and beat,
all pointed at the test database, so faults can be injected without touching anything
else on the machine."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection, connections

from conftest import PASSWORD, need
from tests.faults import run_counter

ROOT = Path(settings.BASE_DIR)
CSRF_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, grandchildren...), read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_whole(proc: subprocess.Popen) -> None:
    """SIGKILL a process and everything it started, as an out-of-memory kill or a lost machine would."""
    family = [proc.pid, *descendants(proc.pid)]
    for pid in family:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=10)


class PrivateRedis:
    """A redis-server of our own on a free port, which a test may stop and start."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="faultline-redis-")
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(self.reachable, 10, "redis to start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        wait_for(lambda: not self.reachable(), 10, "redis to stop")

    def reachable(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False


class RunCounter:
    """How many times each job's work ran, as the workers count it in a database of the private Redis
    (run_counter.py): the tests' own count, apart from the Job rows."""

    def __init__(self, redis: PrivateRedis) -> None:
        self.url = f"redis://127.0.0.1:{redis.port}/3"

    @property
    def env(self) -> dict[str, str]:
        """What a worker's environment needs for it to count."""
        return {run_counter.ENV: self.url}

    def runs(self) -> dict[int, int]:
        return run_counter.runs(self.url)


@pytest.fixture
def fast_password_hashing():
    """Keep the real password hashers: gunicorn, in another process, checks these passwords."""


@pytest.fixture
def private_redis():
    need(shutil.which("redis-server") is not None, "needs redis-server on PATH")
    redis = PrivateRedis()
    redis.start()
    yield redis
    redis.stop()
    shutil.rmtree(redis.dir, ignore_errors=True)


@pytest.fixture
def runs_counted(private_redis) -> RunCounter:
    return RunCounter(private_redis)


def postgres_bin() -> Path | None:
    """The directory of the newest installed PostgreSQL server binaries (initdb, pg_ctl), if any."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3].split(".")[0]))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivatePostgres:
    """A PostgreSQL server of our own, in a temporary directory on a free port, which a test may restart
    without touching the machine's cluster or anyone else's database. As root it runs as `postgres`
    (the server refuses to run as root)."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="faultline-pg-"))
        self.data = self.dir / "data"
        self.as_owner: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self.as_owner = ["runuser", "-u", "postgres", "--"]

    def _run(self, *argv: str) -> None:
        # Output to a file, not a pipe: a server that pg_ctl starts keeps its descriptors open.
        with open(self.dir / "pg_ctl.log", "a") as log:
            done = subprocess.run([*self.as_owner, *argv], stdout=log, stderr=subprocess.STDOUT, cwd=self.dir,
                                  timeout=120)  # fmt: skip
        if done.returncode:
            output = (self.dir / "pg_ctl.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}:\n{output}")

    def _pg_ctl(self, *argv: str) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w", *argv)

    def start(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--locale=C.UTF-8", "--no-sync")  # fmt: skip
        self._pg_ctl("-o", f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir}", "-t", "60", "start")

    def restart(self) -> None:
        """A fast restart, as an operator's `pg_ctl restart` or a package upgrade does: every session is cut."""
        self._pg_ctl("-m", "fast", "-t", "60", "restart")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.SubprocessError):  # already stopped, or never started
            self._pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:  # fmt: skip
            conn.execute(f'CREATE DATABASE "{name}"')


@pytest.fixture
def private_postgres(require_postgres):
    """A private PostgreSQL server holding a migrated database, which this test's own connections and every
    process started with app_env() use until the test ends. Request it before any fixture that writes rows."""
    bin_dir = postgres_bin()
    need(bin_dir is not None and (bin_dir / "pg_ctl").exists(), "needs PostgreSQL's initdb and pg_ctl "
         "(/usr/lib/postgresql/*/bin or on PATH) to run a private server")  # fmt: skip
    if os.geteuid() == 0:
        need(shutil.which("runuser") is not None, "needs runuser to run PostgreSQL as the postgres user")
    server = PrivatePostgres(bin_dir)
    db = connection.settings_dict
    saved = {key: db[key] for key in ("NAME", "HOST", "PORT", "USER", "PASSWORD")}
    try:
        server.start()
        server.create_database("faultline")
        connections.close_all()
        db.update(NAME="faultline", HOST="127.0.0.1", PORT=str(server.port), USER="postgres", PASSWORD="")
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=app_env(),
                       check=True)  # fmt: skip
        yield server
    finally:
        connections.close_all()
        db.update(saved)
        server.stop()


def app_env(**extra: str) -> dict[str, str]:
    """The environment of a production-like process using the test database."""
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "SECRET_KEY": secrets.token_urlsafe(50), "FAULTLINE_DEV": "", "DEBUG": "",
        "FAULTLINE_SSL_REDIRECT": "0", "FAULTLINE_SECURE_COOKIES": "0", "ALLOWED_HOSTS": "127.0.0.1",
        "FAULTLINE_ACCESS_LOG": "/dev/null", "LOG_LEVEL": "ERROR", "DB_CONN_MAX_AGE": "60",
    }  # fmt: skip
    env.update(extra)
    return env


_static_collected = False


def collect_static(env: dict) -> None:
    """Collect the static files gunicorn serves, once per test session: they do not change within one.
    A lock keeps parallel sessions (pytest-xdist) from writing the manifest at the same time."""
    global _static_collected
    if _static_collected:
        return
    with open(Path(tempfile.gettempdir()) / "faultline-collectstatic.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env,
                       check=True)  # fmt: skip
    _static_collected = True


class Processes:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []

    def _spawn(self, name: str, argv: list[str], env: dict) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def web(self, env: dict, workers: int = 2) -> str:
        port = free_port()
        collect_static(env)
        self._spawn(
            "web",
            [sys.executable, "-m", "gunicorn", "config.wsgi", "-c", "deploy/gunicorn.conf.py"],
            {**env, "FAULTLINE_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": str(workers)},
        )
        base = f"http://127.0.0.1:{port}"

        def up():
            try:
                return httpx.get(f"{base}/healthz", timeout=2).status_code in (200, 503)
            except httpx.HTTPError:
                return False

        wait_for(up, 60, "gunicorn to answer")
        return base

    def worker(self, env: dict, queue: str, name: str = "worker", concurrency: int = 1) -> subprocess.Popen:
        # Every worker loads the run counter; it counts when the environment names its Redis (RunCounter.env).
        return self._spawn(
            name,
            # The pool named, as the settings pick solo where one task runs at a time (a 2-core machine).
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "--concurrency", str(concurrency),
             "--pool", "prefork" if concurrency > 1 else "solo",
             "-n", f"{name}-{queue}@%h", "--without-gossip", "--without-mingle", "-l", "INFO",
             "--include", run_counter.__name__],
            env,
        )  # fmt: skip

    def beat(self, env: dict) -> subprocess.Popen:
        return self._spawn(
            "beat",
            [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO",
             "--schedule", str(self.tmp / "celerybeat-schedule")],
            env,
        )  # fmt: skip

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        """Ask every process to stop, then kill what is still there a few seconds later, with its children:
        the test is over, and an idle Celery worker's warm shutdown alone takes 5 s or more."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 3
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_whole(proc)


@pytest.fixture
def processes(tmp_path):
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()


def many_episodes(study, bodies: list[str]) -> list:
    """One GitHub-issue document and episode per body, as the make_episode fixture makes them, in four queries
    instead of three per episode: tests that need hundreds of episodes start sooner."""
    from annotate.models import Document, Episode
    from annotate.studies.services import queue_key_for

    batch = uuid.uuid4().hex[:8]
    docs = Document.objects.bulk_create(
        Document(study=study, kind="github_issue", external_id=f"bulk-{batch}/agent#{i}", cluster=f"bulk-{batch}/agent",
                 url=f"https://github.com/bulk-{batch}/agent/issues/{i}", title=f"Issue {i}", body=body)
        for i, body in enumerate(bodies)
    )  # fmt: skip
    episodes = Episode.objects.bulk_create(Episode(document=doc, study=study, split="primary") for doc in docs)
    for ep in episodes:
        ep.queue_key = queue_key_for(study, ep.pk)
    Episode.objects.bulk_update(episodes, ["queue_key"], batch_size=1000)
    return episodes


def logged_in(base: str, username: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=20, follow_redirects=False)
    page = client.get("/login/")
    token = CSRF_RE.search(page.text).group(1)
    response = client.post("/login/", data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token})
    assert response.status_code == 302, response.text[:500]
    return client


def csrf_of(client: httpx.Client, path: str) -> str:
    return CSRF_RE.search(client.get(path).text).group(1)
