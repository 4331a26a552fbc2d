"""gunicorn settings, all overridable from the environment (docs/deploy.md has the memory budget they give)."""

import os

bind = os.environ.get("FAULTLINE_BIND", "127.0.0.1:8000")
# Sync workers, one request each: a request is mostly this process's CPU and the database's, so one worker per
# core keeps both busy; more only add memory (each holds ~100 MB) and contend for the same cores.
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
workers = int(os.environ.get("WEB_CONCURRENCY") or max(2, CORES))
threads = int(os.environ.get("FAULTLINE_THREADS", "1"))
timeout = int(os.environ.get("FAULTLINE_WEB_TIMEOUT", "60"))
graceful_timeout = 30
# Load the app once, in the master, and fork the workers from it: they share its modules copy-on-write (PSS), start
# in milliseconds when max_requests recycles one, and a broken deploy fails at start, not in every worker.
preload_app = os.environ.get("FAULTLINE_PRELOAD", "1") not in ("0", "false", "no")
# Recycle workers now and then so a slow leak can never take a server down.
max_requests = int(os.environ.get("FAULTLINE_MAX_REQUESTS", "5000"))
max_requests_jitter = 500
accesslog = os.environ.get("FAULTLINE_ACCESS_LOG", "-")
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")


def _settle() -> None:
    """Load the job registry (its kinds, hooks and tasks would otherwise load with the first request that starts a
    job, an incident's say) and move the long-lived objects (modules, URLconf, templates) out of the garbage
    collector's way, so the collections that requests trigger neither walk them again and again nor, in a forked
    worker, write to (and so unshare) the pages that hold them."""
    import gc

    from django.urls import get_resolver

    from annotate.jobs.registry import registrations_load

    get_resolver().url_patterns  # noqa: B018 - imports every view module now, not on the first request
    registrations_load()
    gc.collect()
    gc.freeze()


def when_ready(server):
    """With preload_app, in the master before the first fork: settle the app there, once for all workers, and
    close any database connection loading it opened, which a forked worker must never share."""
    if server.cfg.preload_app:
        from django.db import connections

        _settle()
        connections.close_all()


def post_worker_init(worker):
    if not worker.cfg.preload_app:
        _settle()
