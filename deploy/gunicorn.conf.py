"""gunicorn settings, all overridable from the environment."""

import os

bind = os.environ.get("FAULTLINE_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "4"))
threads = int(os.environ.get("FAULTLINE_THREADS", "1"))
timeout = int(os.environ.get("FAULTLINE_WEB_TIMEOUT", "60"))
graceful_timeout = 30
# Recycle workers now and then so a slow leak can never take a server down.
max_requests = int(os.environ.get("FAULTLINE_MAX_REQUESTS", "5000"))
max_requests_jitter = 500
accesslog = os.environ.get("FAULTLINE_ACCESS_LOG", "-")
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")


def post_worker_init(worker):
    """Once the app is loaded, load the job registry (its kinds, hooks and tasks would otherwise load with the
    first request that starts a job, an incident's say) and move the long-lived objects (modules, URLconf,
    templates) out of the garbage collector's way, so the collections that requests trigger do not walk them
    again and again."""
    import gc

    from annotate.jobs.registry import registrations_load

    registrations_load()
    gc.collect()
    gc.freeze()
