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
app.autodiscover_tasks()

# Celery beat tends the jobs (annotate.jobs.jobs_tend): it re-queues jobs whose worker was lost and
# sends pending jobs whose message never reached the broker or was lost with it. A round that no
# worker took before the next one is due is dropped, so an idle queue does not fill up with them.
_every = float(os.environ.get("FAULTLINE_REQUEUE_EVERY_S") or 30.0)
app.conf.beat_schedule = {
    "tend-jobs": {
        "task": "annotate.tasks.tend_jobs",
        "schedule": _every,
        "options": {"expires": max(1.0, _every * 0.9)},
    },
}
