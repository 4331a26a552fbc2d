"""Faultline settings: the one settings file, driven by environment variables.

Every variable is listed in `.env.example`. The defaults run offline straight
after a clone: SQLite, eager Celery, and the local suggester.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def envint(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def envfloat(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    return float(value) if value.strip() else default


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = envbool("DEBUG", False)
# FAULTLINE_DEV marks a local, non-production run (`make run`, the tests): it
# allows the built-in dev key and plain-HTTP cookies. Production sets neither
# DEBUG nor FAULTLINE_DEV and must provide SECRET_KEY; we refuse to start without it.
DEV = DEBUG or envbool("FAULTLINE_DEV", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEV:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set in production (set FAULTLINE_DEV=1 for a local development run)."
        )
    SECRET_KEY = "dev-only-insecure-key-" + "x" * 40

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "config.devserver",  # runserver without the 40 ms Nagle stall (before WhiteNoise's, which it extends)
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI from our own static files, not a CDN
    "simple_history",
    "axes",
    "taxonomy",
    "annotate",
    "api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.middleware.RequestLimitsMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",
    "config.middleware.SecurityHeadersMiddleware",
    "config.middleware.LoginRequiredMiddleware",
    "axes.middleware.AxesMiddleware",
    "config.middleware.BrokerUnavailableMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'faultline.sqlite3'}"),
        conn_max_age=envint("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL and a busy timeout let the web process and an eager/embedded worker
    # write to the same file without "database is locked" errors.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # Tests get a file too, not Django's shared-cache in-memory database: there, two threads writing at once
    # (the live server's request threads in browser tests) fail at once with "database table is locked"
    # instead of waiting out the busy timeout. In the temporary directory, named by process (TMPDIR moves it).
    _test_db = Path(tempfile.gettempdir()) / f"faultline-test-{os.getpid()}.sqlite3"
    DATABASES["default"]["TEST"] = {"NAME": str(_test_db)}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # PostgreSQL with a health check that skips connections which answered in the last second.
    DATABASES["default"]["ENGINE"] = "config.pgbackend"
    # Server-side parameter binding: psycopg sends parameters apart from the SQL instead of quoting
    # them into it in Python, and prepares statements a connection repeats. Turn it off behind a
    # transaction-mode pooler (PgBouncer), which cannot keep prepared statements.
    DATABASES["default"].setdefault("OPTIONS", {})["server_side_binding"] = envbool("DB_SERVER_SIDE_BINDING", True)
DB_HEALTH_CHECK_INTERVAL_S = envfloat("DB_HEALTH_CHECK_INTERVAL_S", 1.0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    {"NAME": "config.auth.TokensRevokedOnPasswordChange"},
]
AUTHENTICATION_BACKENDS = [
    "config.auth.AxesBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "study_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if not DEV
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
MEDIA_ROOT = BASE_DIR / "media"
# In development whitenoise serves straight from the app and static folders.
WHITENOISE_USE_FINDERS = DEV
WHITENOISE_AUTOREFRESH = DEV

# Uploads: Django refuses bodies over DATA_UPLOAD_MAX_MEMORY_SIZE for
# non-file fields; file size is checked against FAULTLINE_MAX_UPLOAD_MB.
FAULTLINE_MAX_UPLOAD_MB = envint("FAULTLINE_MAX_UPLOAD_MB", 50)
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# Django's handlers, reading 1 MB at a time (config/uploads.py says why).
FILE_UPLOAD_HANDLERS = ["config.uploads.MemoryUpload", "config.uploads.TemporaryUpload"]
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("FAULTLINE_MAX_BODY_MB", 10) * 1024 * 1024
# Every request body, files included (config.middleware.RequestLimitsMiddleware): a client that is not
# signed in may send FAULTLINE_MAX_ANON_BODY_KB, anyone else the largest upload plus 1 MB for the form
# around it. Set the proxy's limit (nginx client_max_body_size) to FAULTLINE_MAX_REQUEST_MB too.
FAULTLINE_MAX_ANON_BODY_KB = envint("FAULTLINE_MAX_ANON_BODY_KB", 64)
FAULTLINE_MAX_REQUEST_MB = max(FAULTLINE_MAX_UPLOAD_MB, envint("FAULTLINE_MAX_BODY_MB", 10)) + 1
# Connections an import job writes its batches with at once, on PostgreSQL (SQLite always uses one).
FAULTLINE_IMPORT_WRITERS = envint("FAULTLINE_IMPORT_WRITERS", 2)

# Security. Production-grade values apply whenever DEBUG is off.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
if not DEV:
    SESSION_COOKIE_SECURE = envbool("FAULTLINE_SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = envbool("FAULTLINE_SECURE_COOKIES", True)
    SECURE_SSL_REDIRECT = envbool("FAULTLINE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = envint("FAULTLINE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# Trusted reverse proxies in front of the web processes (nginx, a load balancer: usually 1). The client's
# address is then read from X-Forwarded-For (config.proxies.client_ip) by the API throttles and django-axes.
# 0 ignores the header, which a client can forge.
FAULTLINE_NUM_PROXIES = envint("FAULTLINE_NUM_PROXIES", 0)

# Login brute force (django-axes): lock a username+IP pair after repeated failures.
AXES_CLIENT_IP_CALLABLE = "config.proxies.client_ip"
AXES_FAILURE_LIMIT = envint("FAULTLINE_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = envfloat("FAULTLINE_LOGIN_COOLOFF_HOURS", 0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ENABLED = envbool("FAULTLINE_AXES", True)
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Password spraying (one try at many usernames): failed log-ins from one address, any usernames, per cool-off.
FAULTLINE_LOGIN_IP_FAILURE_LIMIT = envint("FAULTLINE_LOGIN_IP_FAILURE_LIMIT", 20)

# Celery: eager in-process when no broker is configured.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = False
# Results are stored only by tasks that ask (the bootstrap chunks a job gathers);
# with a Redis broker the same Redis keeps them unless CELERY_RESULT_BACKEND says otherwise.
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", "") or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else None
)
CELERY_RESULT_EXPIRES = 3600
# A failing chunk calls the chord's error callback (the behaviour Celery will make the default).
CELERY_TASK_ALLOW_ERROR_CB_ON_CHORD_HEADER = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Pool processes per worker, from the cores (docs/deploy.md, "Memory"): on a small machine the web workers take
# one core each, and a job (an import, a bootstrap) is mostly CPU, so a second pool process there only adds
# ~100 MB and competes for the same cores. Bigger machines get one per two cores; CELERY_CONCURRENCY overrides.
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
CELERY_WORKER_CONCURRENCY = envint("CELERY_CONCURRENCY", max(1, _CORES // 2))
# The pool: prefork, unless FAULTLINE_WORKER_POOL names another. deploy/supervise.py (make serve) starts its worker
# with --pool solo where one task runs at a time (CELERY_WORKER_CONCURRENCY == 1): the task runs in the worker
# process itself, saving the ~100 MB of a forked pool process. Not set here from the core count, because the
# setting wins over a worker's own --pool/--concurrency on the command line (a worker started with
# --concurrency 2 would run one task at a time).
if os.environ.get("FAULTLINE_WORKER_POOL"):
    CELERY_WORKER_POOL = os.environ["FAULTLINE_WORKER_POOL"]
# A prefork pool process that grew past this (KiB) after a task, say by loading scikit-learn for suggestions or
# matplotlib for figures, is replaced by a fresh one: the memory a rare job needs is not held while the worker idles.
CELERY_WORKER_MAX_MEMORY_PER_CHILD = envint("FAULTLINE_WORKER_MAX_MEMORY_MB", 300) * 1024
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "socket_connect_timeout": 2}
# A web request that starts a job must never hang on a dead broker: give up
# publishing quickly; the Job stays pending and beat re-sends it (annotate/jobs/runner.py).
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
# Workers reconnect to the broker for as long as it takes, and keep running their jobs meanwhile
# (a job's work is in the database; its lease, not the broker connection, says who owns it).
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# Job leases (annotate/jobs/runner.py): a worker's heartbeat renews its job's lease every quarter of
# FAULTLINE_JOB_LEASE_S; a job whose lease expires is re-queued by beat ("worker lost"), at most
# until it has been claimed FAULTLINE_JOB_MAX_ATTEMPTS times.
FAULTLINE_JOB_LEASE_S = envfloat("FAULTLINE_JOB_LEASE_S", 60.0)
FAULTLINE_JOB_MAX_ATTEMPTS = envint("FAULTLINE_JOB_MAX_ATTEMPTS", 5)
# Beat tends the jobs every FAULTLINE_REQUEUE_EVERY_S; a pending job whose message the broker
# lost (or never got) is sent again once it is FAULTLINE_REQUEUE_AFTER_S old.
FAULTLINE_REQUEUE_EVERY_S = envfloat("FAULTLINE_REQUEUE_EVERY_S", 30.0)
CELERY_BEAT_SCHEDULER = "config.beat:TendingScheduler"
FAULTLINE_REQUEUE_AFTER_S = envfloat("FAULTLINE_REQUEUE_AFTER_S", 30.0)
# Beat also looks every FAULTLINE_SEARCH_SWEEP_S for studies with documents no search_index job will make
# searchable (its job failed, or was lost) and starts one (annotate.documents.services.search_index_sweep).
FAULTLINE_SEARCH_SWEEP_S = envfloat("FAULTLINE_SEARCH_SWEEP_S", 60.0)
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("FAULTLINE_CELERY_QUEUE", "celery")
# The queue of the bootstrap chunks. Empty: the default queue. Set it (e.g. "analysis") to run
# the analysis on workers of its own (`celery -A config worker -Q analysis`), on other machines.
FAULTLINE_ANALYSIS_QUEUE = os.environ.get("FAULTLINE_ANALYSIS_QUEUE", "")

# The LLM suggester (annotate/suggestions/llm.py). Without a key, the local scikit-learn one is used.
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "") or None
FAULTLINE_LLM_MODEL = os.environ.get("FAULTLINE_LLM_MODEL", "gpt-4o-mini")
FAULTLINE_LLM_TIMEOUT = envfloat("FAULTLINE_LLM_TIMEOUT", 60.0)
FAULTLINE_LLM_MAX_RETRIES = envint("FAULTLINE_LLM_MAX_RETRIES", 4)
# First retry waits up to this long; each further retry doubles it (full jitter, capped at 20 s).
FAULTLINE_LLM_BACKOFF_BASE_S = envfloat("FAULTLINE_LLM_BACKOFF_BASE_S", 0.5)
FAULTLINE_LLM_CONCURRENCY = envint("FAULTLINE_LLM_CONCURRENCY", 4)
FAULTLINE_LLM_PRICE_INPUT_PER_M = envfloat("FAULTLINE_LLM_PRICE_INPUT_PER_M", 0.0)
FAULTLINE_LLM_PRICE_OUTPUT_PER_M = envfloat("FAULTLINE_LLM_PRICE_OUTPUT_PER_M", 0.0)
# Estimated input tokens per LLM request; few-shot examples are dropped, farthest first, to fit.
FAULTLINE_LLM_TOKEN_BUDGET = envint("FAULTLINE_LLM_TOKEN_BUDGET", 24_000)
FAULTLINE_LOCAL_MIN_LABELS = envint("FAULTLINE_LOCAL_MIN_LABELS", 30)
# A batch retrains the local model automatically at most this often (Retrain on the Suggestions page any time).
FAULTLINE_LOCAL_RETRAIN_EVERY_S = envint("FAULTLINE_LOCAL_RETRAIN_EVERY_S", 300)

# The live GitHub importer (annotate/imports/github.py).
GITHUB_TOKEN = os.environ.get("GITHUB_TOKEN", "")
GITHUB_API_URL = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
FAULTLINE_GITHUB_MAX_WAIT_S = envfloat("FAULTLINE_GITHUB_MAX_WAIT_S", 60.0)

# Coding workspace.
FAULTLINE_LEASE_MINUTES = envint("FAULTLINE_LEASE_MINUTES", 30)

# Teams: who may create studies in the browser ("staff" or "any" logged-in user), and how long an
# invitation link stays valid.
FAULTLINE_STUDY_CREATORS = os.environ.get("FAULTLINE_STUDY_CREATORS", "staff")
if FAULTLINE_STUDY_CREATORS not in {"staff", "any"}:
    raise ImproperlyConfigured("FAULTLINE_STUDY_CREATORS must be 'staff' or 'any'.")
FAULTLINE_INVITE_DAYS = envint("FAULTLINE_INVITE_DAYS", 7)

# Outgoing mail (invitations, password resets). Nothing is sent unless EMAIL_HOST (SMTP) or
# EMAIL_BACKEND is set; without it owners copy invitation links and an administrator resets passwords.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", 587)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", True)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "faultline@localhost")
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND") or (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.dummy.EmailBackend"
)
# Password-reset requests: per address (one inbox is not flooded) and per client address (no spraying).
FAULTLINE_PASSWORD_RESET_RATE_EMAIL = os.environ.get("FAULTLINE_PASSWORD_RESET_RATE_EMAIL", "5/hour")
FAULTLINE_PASSWORD_RESET_RATE_IP = os.environ.get("FAULTLINE_PASSWORD_RESET_RATE_IP", "20/hour")
FAULTLINE_BOOTSTRAP_JOB_THRESHOLD = envint("FAULTLINE_BOOTSTRAP_JOB_THRESHOLD", 20000)
# Studies with more episodes than this are never analysed inside a request: their analysis, agreement and
# coverage pages show the stored result (marked stale when the data changed) and compute as a job. Smaller
# studies without a current stored result are computed for the request and not stored (annotate.analysis.results).
FAULTLINE_ANALYSIS_INLINE_EPISODES = envint("FAULTLINE_ANALYSIS_INLINE_EPISODES", 5000)

# Exports and incident webhooks. Parquet exports above this many rows are built by a job.
FAULTLINE_EXPORT_PARQUET_SYNC_ROWS = envint("FAULTLINE_EXPORT_PARQUET_SYNC_ROWS", 20000)
# GET /api/v1/studies/{slug}/report/ builds the report inline only for studies up to this many episodes (and B
# up to FAULTLINE_BOOTSTRAP_JOB_THRESHOLD); larger ones are built by a job (POST) and served from it.
FAULTLINE_REPORT_SYNC_EPISODES = envint("FAULTLINE_REPORT_SYNC_EPISODES", 5000)
FAULTLINE_WEBHOOK_MAX_ATTEMPTS = envint("FAULTLINE_WEBHOOK_MAX_ATTEMPTS", 6)
FAULTLINE_WEBHOOK_BACKOFF_S = envfloat("FAULTLINE_WEBHOOK_BACKOFF_S", 30.0)  # doubles after each failed attempt
FAULTLINE_WEBHOOK_TIMEOUT_S = envfloat("FAULTLINE_WEBHOOK_TIMEOUT_S", 10.0)
# Webhooks go to public addresses only; 1 allows loopback and private ones (a receiver on the same network, tests).
FAULTLINE_WEBHOOK_ALLOW_PRIVATE = envbool("FAULTLINE_WEBHOOK_ALLOW_PRIVATE", False)
# A local run (`make run`, FAULTLINE_DEV) may send to a receiver on this machine (127.0.0.0/8, ::1);
# private ranges still need FAULTLINE_WEBHOOK_ALLOW_PRIVATE. Production leaves it off.
FAULTLINE_WEBHOOK_ALLOW_LOOPBACK = envbool("FAULTLINE_WEBHOOK_ALLOW_LOOPBACK", DEV)

REST_FRAMEWORK = {
    # Token first: DRF answers an unauthenticated request with the first class's
    # WWW-Authenticate header, which turns "not logged in" into 401 instead of 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "api.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.IdCursorPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PARSER_CLASSES": [
        "api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Anonymous clients are counted at authentication (api.authentication), before DRF would answer 401.
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.TokenRateThrottle"],
    "NUM_PROXIES": FAULTLINE_NUM_PROXIES,
    "DEFAULT_THROTTLE_RATES": {
        "anon": os.environ.get("FAULTLINE_THROTTLE_ANON", "60/min"),
        "user": os.environ.get("FAULTLINE_THROTTLE_USER", "6000/min"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Faultline API",
    "DESCRIPTION": "Code failures of LLM-agent workflows against a failure taxonomy.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "ArtifactKindEnum": "annotate.models.Artifact.Kind",
        "DocumentKindEnum": "annotate.models.DocumentKind",
        "TriageStatusEnum": "annotate.models.TriageStatus",
        "JobStatusEnum": "annotate.models.JobStatus",
        "CellIntervalEnum": "api.serializers.analysis.CELL_INTERVAL_CHOICES",
    },
}

# The cache holds throttle counters and LLM request slots. On Redis it fails over to process
# memory while Redis is unreachable (config/cache.py), so a Redis outage never fails a request.
CACHES = {
    "default": (
        {
            "BACKEND": "config.cache.FailoverRedisCache",
            "LOCATION": os.environ["REDIS_CACHE_URL"],
            "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0},
        }
        if os.environ.get("REDIS_CACHE_URL")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
# With a shared cache, a request reads its session from the cache instead of the database (written through
# to both). Not with the per-process cache: another gunicorn worker would still hold a session logged out here.
if os.environ.get("REDIS_CACHE_URL"):
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"expected_refusals": {"()": "config.logfilters.ExpectedRefusals"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    # A refusal (4xx) is one line with its reason; a server error (5xx) keeps its traceback.
    "loggers": {"django.request": {"filters": ["expected_refusals"]}},
}
