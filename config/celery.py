"""The Celery app. Without CELERY_BROKER_URL, tasks run eagerly in-process."""

from __future__ import annotations

import os

from celery import Celery

from config.broker_fixes import patch_kombu_redis_detached_channel

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

patch_kombu_redis_detached_channel()

app = Celery("faultline")
app.config_from_object("django.conf:settings", namespace="CELERY")
if not app.conf.broker_url:
    # Eager mode still needs a broker URL for Celery's own bookkeeping; memory:// never connects.
    app.conf.broker_url = "memory://"
# Each package with Celery tasks; AnnotateConfig.ready() imports the same modules in every Django process.
app.autodiscover_tasks(["annotate.jobs", "annotate.incidents.selectors", "annotate.analysis"])

# Celery beat tends the jobs and sweeps for unindexed documents in its own process (config/beat.py,
# CELERY_BEAT_SCHEDULER), so neither waits for a free worker; it has no periodic tasks of its own.
app.conf.beat_schedule = {}
