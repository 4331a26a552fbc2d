"""The Celery app. Without CELERY_BROKER_URL, tasks run eagerly in-process."""

from __future__ import annotations

import os

from celery import Celery

from config.broker_fixes import patch_kombu_redis_detached_channel

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Celery's Django fixup runs Django's system checks in every worker and beat as they start, and the checks import
# the URLconf and so every view, DRF, drf-spectacular, the templates and numpy: 37 MB and 650 modules in each of
# the two processes, none of which beat ever uses, and which the worker loads on first use if a job needs them.
# The checks run where they mean something: manage.py migrate before every start (deploy/serve.sh) and `check`.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

patch_kombu_redis_detached_channel()

app = Celery("faultline")
app.config_from_object("django.conf:settings", namespace="CELERY")
if not app.conf.broker_url:
    # Eager mode still needs a broker URL for Celery's own bookkeeping; memory:// never connects.
    app.conf.broker_url = "memory://localhost/"
# Each package with Celery tasks; AnnotateConfig.ready() imports the same modules in every Django process.
app.autodiscover_tasks(["annotate.jobs", "annotate.incidents", "annotate.analysis"])

# Celery beat tends the jobs and sweeps for unindexed documents in its own process (config/beat.py,
# CELERY_BEAT_SCHEDULER), so neither waits for a free worker; it has no periodic tasks of its own.
app.conf.beat_schedule = {}
