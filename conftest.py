"""Shared test personas and service probes.

Personas, as in healthchecks: Alice owns the study, Bob codes on her team,
Vera can only view it, and Charlie has no access at all.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
from django.conf import settings

CODEBOOK = Path(settings.BASE_DIR) / "fixtures" / "codebook-v1.json"
PASSWORD = "correct horse battery staple"


# Under pytest-xdist (make test), the long tests go first and one at a time to whichever process is free: the fault
# tests (minutes each, mostly waiting on the processes they start) and the bench smoke runs then overlap the
# thousand short tests instead of queuing at the end of one process and stretching the run.
LONG_FIRST = (
    "tests/faults/test_no_consumer.py",
    "tests/faults/test_redis_blip.py",
    "bench/tests/test_load_bench.py",
    "bench/tests/test_scale_bench.py",
    "tests/faults/",
    "bench/tests/",
)


def _long_rank(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(LONG_FIRST) if nodeid.startswith(prefix)), len(LONG_FIRST))


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: _long_rank(item.nodeid))  # stable: file order within each rank


def services_required() -> bool:
    return os.environ.get("FAULTLINE_REQUIRE_SERVICES", "") in {"1", "true", "yes"}


def need(available: bool, reason: str) -> None:
    """Skip when a service is missing, or fail when FAULTLINE_REQUIRE_SERVICES=1."""
    if available:
        return
    if services_required():
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)


def is_postgres() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


def redis_reachable(url: str | None = None) -> bool:
    url = url or settings.CELERY_BROKER_URL
    if not url.startswith("redis://"):
        return False
    host_port = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    host, _, port = host_port.partition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port or 6379)), timeout=1):
            return True
    except OSError:
        return False


def chromium_path() -> str | None:
    path = os.environ.get("FAULTLINE_CHROMIUM", "/usr/bin/chromium")
    return path if Path(path).exists() else shutil.which("chromium")


def force_parallel_plans(cursor, *, local: bool = False) -> None:
    """PostgreSQL: plan a Gather over every query that may run in parallel, whatever it costs and whatever the
    tables' statistics say (PostgreSQL 16 renamed the setting). The planner considers none while
    max_parallel_workers_per_gather is 0. `local`: for the rest of the transaction only."""
    cursor.execute("SELECT name FROM pg_settings WHERE name IN ('debug_parallel_query', 'force_parallel_mode')")
    cursor.execute(f"SET {'LOCAL ' if local else ''}{cursor.fetchone()[0]} = on")


@pytest.fixture
def require_postgres():
    need(is_postgres(), "needs PostgreSQL (set DATABASE_URL=postgres://...)")


@pytest.fixture
def pg_demo(require_postgres):
    """The demo study (`manage.py demo`) on PostgreSQL, for tests that need its rows committed."""
    import io

    from django.core.management import call_command

    from annotate.models import Study

    call_command("load_codebook", "fixtures/codebook-v1.json", "--publish", stdout=io.StringIO())
    call_command("demo", stdout=io.StringIO())
    return Study.objects.select_related("codebook").get(slug="demo")


@pytest.fixture
def require_redis():
    need(redis_reachable(), "needs Redis as the Celery broker (set CELERY_BROKER_URL=redis://...)")


@pytest.fixture
def celery_worker(require_postgres, require_redis):
    """Start real Celery worker subprocesses on the test database and the configured broker.

    `celery_worker(queue, pool="solo", concurrency=1, env={...})` returns the process;
    every worker is stopped when the test ends. Tests send work with `.apply_async(queue=queue)`
    (or set app.conf.task_default_queue) so no other worker can take it.
    """
    import subprocess
    import sys

    from django.db import connection

    procs = []

    def start(queue: str, *, pool: str = "solo", concurrency: int = 1, env: dict | None = None, logfile=None):
        db = connection.settings_dict
        full_env = {
            **os.environ,
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "FAULTLINE_CELERY_QUEUE": queue,
            "FAULTLINE_DEV": "1",
            **(env or {}),
        }
        argv = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queue, "--pool", pool,
                "--without-gossip", "--without-mingle"]  # fmt: skip
        # A log file (at INFO) lets a test see which tasks the worker received, and how often.
        argv += ["-l", "INFO", "--logfile", str(logfile)] if logfile else ["-l", "WARNING"]
        if pool != "solo":
            argv += ["--concurrency", str(concurrency)]
        proc = subprocess.Popen(
            argv, cwd=settings.BASE_DIR, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(autouse=True, scope="session")
def _registrations():
    """Job kinds, hooks and tasks registered before any test swaps one (a process loads them on first use;
    tests/test_layout.py checks that path in a process of its own)."""
    from annotate.jobs.registry import registrations_load

    registrations_load()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Hashing the personas' passwords with PBKDF2 dominates test set-up; tests don't need its cost.
    (tests/faults overrides this: its gunicorn processes verify passwords with the real hashers.)"""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _production_webhook_rules(settings):
    """Tests run with FAULTLINE_DEV=1, which lets webhooks reach the loopback; they check the production
    rule unless they opt in (settings.FAULTLINE_WEBHOOK_ALLOW_LOOPBACK = True)."""
    settings.FAULTLINE_WEBHOOK_ALLOW_LOOPBACK = False


@pytest.fixture(autouse=True)
def _fresh_cache():
    """API throttle counters live in the cache: each test starts with an empty one, so the suite's
    many anonymous 401 checks never add up to a 429 in an unrelated test."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def codebook(db):
    from taxonomy.services import codebook_load, codebook_read_file

    return codebook_load(data=codebook_read_file(CODEBOOK), publish=True).codebook


def _user(django_user_model, username):
    return django_user_model.objects.create_user(username=username, password=PASSWORD, email=f"{username}@example.org")


@pytest.fixture
def alice(db, django_user_model):
    return _user(django_user_model, "alice")


@pytest.fixture
def bob(db, django_user_model):
    return _user(django_user_model, "bob")


@pytest.fixture
def vera(db, django_user_model):
    return _user(django_user_model, "vera")


@pytest.fixture
def charlie(db, django_user_model):
    return _user(django_user_model, "charlie")


@pytest.fixture
def study(codebook, alice, bob, vera, charlie):
    """Alice's study: Bob codes, Vera views, Charlie is not a member."""
    from annotate.studies.services import study_create

    return study_create(slug="alpha", name="Alpha study", codebook=codebook, owner=alice, coders=[bob], viewers=[vera])


@pytest.fixture
def incidents_open(study):
    """Alpha as an incident study: it accepts incidents posted through the API (research studies refuse them)."""
    study.accepts_incidents = True
    study.save(update_fields=["accepts_incidents"])
    return study


@pytest.fixture
def other_study(codebook, charlie):
    """Charlie's own study, which Alice, Bob and Vera must never see."""
    from annotate.studies.services import study_create

    return study_create(slug="charlies", name="Charlie's study", codebook=codebook, owner=charlie)


@pytest.fixture
def make_episode():
    """Create a document with one episode in a study."""
    from annotate.models import Document, Episode
    from annotate.studies.services import queue_key_for

    counter = {"n": 0}

    def make(
        study, *, kind="github_issue", cluster="acme/agent", title=None, body="The agent failed.", split="primary"
    ):
        counter["n"] += 1
        n = counter["n"]
        doc = Document.objects.create(
            study=study,
            kind=kind,
            external_id=f"{cluster}#{n}",
            url=f"https://github.com/{cluster}/issues/{n}",
            cluster=cluster,
            title=title or f"Issue {n}",
            body=body,
        )
        ep = Episode.objects.create(document=doc, study=study, split=split)
        ep.queue_key = queue_key_for(study, ep.pk)
        ep.save(update_fields=["queue_key"])
        return ep

    return make


@pytest.fixture
def codes(codebook):
    """Look up codebook entries by code: codes.type('TUS-03'), codes.source('llm')."""
    from taxonomy.models import AxisValue, FailureType

    class Codes:
        def type(self, code):
            return FailureType.objects.get(codebook=codebook, code=code)

        def source(self, code):
            return AxisValue.objects.get(codebook=codebook, axis="source", code=code)

        def stage(self, code):
            return AxisValue.objects.get(codebook=codebook, axis="stage", code=code)

        def capability(self, code):
            return AxisValue.objects.get(codebook=codebook, axis="capability", code=code)

    return Codes()


@pytest.fixture
def eager_jobs(monkeypatch, settings):
    """Run jobs in-process, as without a broker (make run), even when CI configures Redis."""
    from config.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    settings.CELERY_TASK_ALWAYS_EAGER = True
