"""The Celery app. Without CELERY_BROKER_URL, tasks run eagerly in-process."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init

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


@worker_init.connect
def worker_settle(**kwargs) -> None:
    """Load the job registry as the worker starts, as gunicorn's master does (deploy/gunicorn.conf.py, _settle):
    a worker exists to run jobs, so it needs the registering modules anyway, and otherwise its first job pays
    for them (0.12-0.14 s of CPU and 6 MB, no heavy library: 0.012-0.015 ms of the CPU per issue of a first
    10,000-issue import). worker_init runs in the worker's main process, after Django is set up and before a
    prefork pool forks, whose children then share the loaded modules."""
    from annotate.jobs.registry import registrations_load

    registrations_load()
