"""The production configuration: `check --deploy` is clean, a missing SECRET_KEY stops start-up, the database
backend and gunicorn hooks are the ones docs/deploy.md describes."""

from __future__ import annotations

import gc
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


def test_gunicorn_workers_freeze_the_loaded_app_out_of_the_garbage_collector(monkeypatch):
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    conf = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    assert conf["workers"] == 3
    try:
        conf["post_worker_init"](None)
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


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
