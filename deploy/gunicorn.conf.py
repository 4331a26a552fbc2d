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
