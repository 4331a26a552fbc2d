"""The Celery app. Without CELERY_BROKER_URL, tasks run eagerly in-process."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("faultline")
app.config_from_object("django.conf:settings", namespace="CELERY")
if not app.conf.broker_url:
    # Eager mode still needs a broker URL for Celery's own bookkeeping; memory:// never connects.
    app.conf.broker_url = "memory://"
app.autodiscover_tasks()

# Celery beat: re-send jobs whose enqueue was lost (broker down at the time).
app.conf.beat_schedule = {
    "requeue-pending-jobs": {
        "task": "annotate.tasks.requeue_pending_jobs",
        "schedule": float(os.environ.get("FAULTLINE_REQUEUE_EVERY_S") or 60.0),
    },
}
