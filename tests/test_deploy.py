"""The production configuration: `check --deploy` is clean, a missing SECRET_KEY stops start-up, the database
backend and gunicorn hooks are the ones docs/deploy.md describes."""

from __future__ import annotations

import gc
import json
import os
import runpy
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def production_env(**extra: str) -> dict:
    # Without the development switches, and without what the browser tests set in this process.
    dropped = ("FAULTLINE_DEV", "DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    return {**env, "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "faultline.example.org", **extra}


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True)


def test_check_deploy_is_clean_under_production_settings():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key():
    env = production_env()
    del env["SECRET_KEY"]
    result = manage("check", env=env)
    assert result.returncode != 0 and "SECRET_KEY" in result.stderr


def db_settings(env: dict) -> list[str]:
    code = (
        "import django; django.setup(); from django.conf import settings; db = settings.DATABASES['default']; "
        "print(db['ENGINE'], db['OPTIONS'].get('server_side_binding'), db['CONN_HEALTH_CHECKS'])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_postgres_urls_get_the_health_checked_backend_with_server_side_binding():
    env = production_env(
        DATABASE_URL="postgres://u@db.example.org:5432/faultline", DJANGO_SETTINGS_MODULE="config.settings"
    )
    assert db_settings(env) == ["config.pgbackend", "True", "True"]
    env["DB_SERVER_SIDE_BINDING"] = "0"  # behind PgBouncer in transaction mode
    assert db_settings(env) == ["config.pgbackend", "False", "True"]


class _Cfg:
    def __init__(self, preload_app: bool) -> None:
        self.preload_app = preload_app


class _Server:
    def __init__(self, preload_app: bool) -> None:
        self.cfg = _Cfg(preload_app)


def test_gunicorn_workers_freeze_the_loaded_app_out_of_the_garbage_collector(monkeypatch):
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    monkeypatch.setenv("FAULTLINE_PRELOAD", "0")
    conf = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    assert conf["workers"] == 3 and conf["preload_app"] is False
    try:
        conf["when_ready"](_Server(False))  # without preload the master loads nothing
        assert gc.get_freeze_count() == 0
        conf["post_worker_init"](_Server(False))
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_gunicorn_preloads_the_app_in_the_master_and_sizes_its_workers_from_the_cores(monkeypatch):
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    monkeypatch.delenv("FAULTLINE_PRELOAD", raising=False)
    conf = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    assert conf["preload_app"] is True
    assert conf["workers"] == max(2, len(os.sched_getaffinity(0)))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7})
    assert runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))["workers"] == 8
    try:
        conf["post_worker_init"](_Server(True))  # a forked worker has nothing left to do
        assert gc.get_freeze_count() == 0
        conf["when_ready"](_Server(True))  # the master settles the app once, before the first fork
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_the_worker_pool_is_sized_from_the_cores_and_recycles_grown_processes():
    """The settings every launcher reads (supervise.py, the Procfile, the systemd unit pass no --concurrency)."""
    code = (
        "import os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'\n"
        "import os; os.sched_getaffinity = lambda pid: set(range(int(os.environ['CORES'])))\n"
        "from django.conf import settings as s\n"
        "import deploy.supervise as sup\n"
        "pool = getattr(s, 'CELERY_WORKER_POOL', 'solo' if '--pool' in sup.programs()[1].argv else 'prefork')\n"
        "print(s.CELERY_WORKER_CONCURRENCY, pool, s.CELERY_WORKER_MAX_MEMORY_PER_CHILD)"
    )
    env = {**os.environ, "FAULTLINE_DEV": "1"}
    env.pop("CELERY_CONCURRENCY", None)
    env.pop("FAULTLINE_WORKER_POOL", None)

    def read(cores: int, **extra) -> list[str]:
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**env, "CORES": str(cores), **extra},
                             capture_output=True, text=True, check=True)  # fmt: skip
        return out.stdout.split()

    # A 2-core machine: the web workers take the cores, and one task at a time runs in the worker itself.
    assert read(2) == ["1", "solo", str(300 * 1024)]
    assert read(8) == ["4", "prefork", str(300 * 1024)]
    assert read(2, CELERY_CONCURRENCY="3", FAULTLINE_WORKER_MAX_MEMORY_MB="500") == ["3", "prefork", str(500 * 1024)]
    assert "--concurrency" not in (ROOT / "deploy" / "systemd" / "faultline-worker@.service").read_text()


def test_systemd_units_restart_on_failure_and_never_hit_the_start_limit():
    import configparser

    units = ROOT / "deploy" / "systemd"
    for name, restart in (("faultline-web.service", "on-failure"), ("faultline-worker@.service", "always"),
                          ("faultline-beat.service", "always")):  # fmt: skip
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.optionxform = str
        unit.read(units / name)
        assert unit["Service"]["Restart"] == restart, name
        assert unit["Unit"]["StartLimitIntervalSec"] == "0", name


def test_make_serve_runs_the_supervisor():
    assert "deploy/serve.sh" in (ROOT / "Makefile").read_text()
    assert 'exec "$PY" deploy/supervise.py' in (ROOT / "deploy" / "serve.sh").read_text()


# Loaded only by the work that needs them (figures, suggestions, Parquet exports, statistics' special functions):
# each is tens of MB in every process that imports it, and the web workers and the worker's master never do.
HEAVY = ("sklearn", "scipy", "matplotlib", "pyarrow", "pandas", "PIL")


def test_the_web_and_worker_processes_start_without_the_heavy_libraries():
    """What a preloaded gunicorn master holds before it forks its workers (the app, every view module through
    the URLconf, the job registry), and what a Celery worker's master holds: none of HEAVY."""
    code = """
import json, runpy, sys
from config.wsgi import application
conf = runpy.run_path("deploy/gunicorn.conf.py")
conf["_settle"]()
web = sorted(m for m in HEAVY if m in sys.modules)
import gc; gc.unfreeze()
from config.celery import app
app.loader.import_default_modules()
worker = sorted(m for m in HEAVY if m in sys.modules)
print(json.dumps({"web": web, "worker": worker, "views": "annotate.views.analysis" in sys.modules}))
""".replace("HEAVY", repr(HEAVY))
    env = {**os.environ, "FAULTLINE_DEV": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"web": [], "worker": [], "views": True}


def test_the_worker_loads_the_job_registry_as_it_starts_not_with_its_first_job():
    """A Celery worker's start (worker_init) imports the registering modules, so the first job, a large import
    say, does not pay for them; still none of HEAVY. The worker is built, not started: no broker needed."""
    code = """
import json, sys
from config.celery import app
before = "annotate.imports.handlers" in sys.modules
app.WorkController(pool_cls="solo", concurrency=1, without_gossip=True, without_mingle=True, without_heartbeat=True,
                   hostname="settle-test@localhost")
from annotate.jobs.registry import HANDLERS
print(json.dumps({"before": before, "after": "annotate.imports.handlers" in sys.modules, "import": "import" in HANDLERS,
                  "heavy": sorted(m for m in HEAVY if m in sys.modules)}))
""".replace("HEAVY", repr(HEAVY))
    env = {**os.environ, "FAULTLINE_DEV": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("CELERY_BROKER_URL", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"before": False, "after": True, "import": True, "heavy": []}


def test_the_heavy_libraries_load_when_the_work_needs_them():
    """The lazy imports still happen: a kappa loads scikit-learn, a heatmap colour matplotlib, a Wilson interval
    scipy (so the check above is not passing because the code stopped using them)."""
    code = """
import json, sys
import django; django.setup()
from annotate.suggestions.quality import _kappa
from annotate.analysis.figures import cell_style
from lib.stats import wilson
names = ("sklearn", "matplotlib", "scipy")
before = sorted(m for m in names if m in sys.modules)
_kappa(["a", "b", "a"], ["a", "b", "b"]); cell_style(0.5, 1.0); wilson(3, 10)
print(json.dumps({"before": before, "after": sorted(m for m in names if m in sys.modules)}))
"""
    env = {**os.environ, "FAULTLINE_DEV": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"before": [], "after": ["matplotlib", "scipy", "sklearn"]}


def test_celery_processes_start_without_the_views_and_register_every_task():
    """A Celery worker or beat loads its task modules (the webhook delivery's too) and skips Django's system checks,
    which would import the URLconf with every view, DRF and numpy (37 MB each); `migrate` runs them before start."""
    code = """
import json, sys
from config.celery import app
import django; django.setup()
app.loader.import_default_modules()
app.finalize(auto=True)
views = ("numpy", "rest_framework.serializers", "annotate.views.analysis", "api.urls")
print(json.dumps({"loaded": sorted(m for m in views if m in sys.modules),
                  "tasks": sorted(t for t in app.tasks if t.startswith("annotate."))}))
"""
    env = {k: v for k, v in os.environ.items() if k != "CELERY_SKIP_CHECKS"}
    env.update(FAULTLINE_DEV="1", DJANGO_SETTINGS_MODULE="config.settings")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded"] == []
    assert {
        "annotate.tasks.run_job",
        "annotate.tasks.deliver_webhook",
        "annotate.analysis_tasks.bootstrap_chunk",
    } <= set(got["tasks"])
