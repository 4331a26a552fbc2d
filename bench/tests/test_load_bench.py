"""The load bench runs (--quick) against gunicorn, PostgreSQL and a Celery worker, loses nothing, and
prints its fixed JSON keys, so it cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

BENCH = Path(__file__).resolve().parent.parent / "load_bench.py"


@pytest.mark.services
def test_it_runs_quick_with_no_errors_and_no_lost_or_duplicated_codings(require_postgres, require_redis):
    env = {**os.environ, "CELERY_BROKER_URL": settings.CELERY_BROKER_URL}
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick"], capture_output=True, text=True, timeout=300, check=True, env=env
    )
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert last["bench"] == "load" and last["coders"] == 4
    for key in ("seconds", "rps", "errors", "lost", "duplicated", "p95_ms", "saves", "over_k"):
        assert key in last
    assert set(last["p95_ms"]) == {"save", "page", "export", "incident"}
    assert last["errors"] == 0 and last["lost"] == 0 and last["duplicated"] == 0 and last["over_k"] == 0, out.stdout
    assert last["saves"] > 0 and last["rps"] > 0
    # The Celery worker was up: every posted incident got its suggestion, no job failed.
    assert last["incidents"] > 0 and last["incidents_suggested"] == last["incidents"] and last["jobs_failed"] == 0
