"""The scale bench runs (--quick) on PostgreSQL with real Celery workers and prints its fixed JSON keys,
so it cannot rot; its bootstrap is byte-identical with one worker process and with two."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

BENCH = Path(__file__).resolve().parent.parent / "scale_bench.py"
KEYS = ("episodes", "import_per_s", "import_peak_mb", "pages_median_ms", "pages_p95_ms", "export_rows_per_s",
        "export_mem_growth_mb", "bootstrap_1w_s", "bootstrap_2w_s", "bootstrap_identical")  # fmt: skip
PAGES = {"coding_get", "coding_post", "next", "adjudication_list", "document_search", "documents_list"}


@pytest.mark.services
def test_it_runs_quick_and_reports_every_figure(require_postgres, require_redis):
    env = {**os.environ, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=900, check=True, env=env
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["bench"] == "scale" and last["episodes"] == 20_000
    for key in KEYS:
        assert last[key] is not None, key
    assert set(last["pages_median_ms"]) == set(last["pages_p95_ms"]) == PAGES
    assert last["pages_same_queries"], (last["pages_queries"], last["pages_queries_small"])
    assert last["bootstrap_identical"] is True
    assert last["export_rows"] == 20_000
    assert last["import_per_s"] > 0 and last["export_rows_per_s"] > 0


HTTP_KEYS = ("save_cpu_ms", "save_p95_ms_4clients", "save_p50_ms_10k", "save_p50_ms_100k", "http_import_per_s")


@pytest.mark.services
def test_its_http_steps_run_quick_and_report_every_figure(require_postgres, require_redis):
    """Gunicorn, fresh connections, a Celery worker for the import upload: the --http half, so it cannot rot
    (at 1,000 and 10,000 episodes, to keep the suite short)."""
    env = {**os.environ, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    out = subprocess.run(
        [sys.executable, str(BENCH), "--http-only", "--quick", "--episodes", "10000"],
        capture_output=True, text=True, timeout=900, check=True, env=env,
    )  # fmt: skip
    last = json.loads(out.stdout.strip().splitlines()[-1])
    for key in HTTP_KEYS:
        assert last[key] and last[key] > 0, key
    assert set(last["http"]) == {"1k", "10k", "save_cpu_ms", "api_save_cpu_ms", "import"}
    assert last["http"]["import"]["n"] == 10_000
