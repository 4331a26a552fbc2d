#!/usr/bin/env bash
# Run the web server, a Celery worker and Celery beat in the foreground, each supervised on its own
# (deploy/supervise.py): a process that exits is restarted and the others keep running. Ctrl-C or
# SIGTERM stops all three. Configured by the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
: "${DATABASE_URL:?set DATABASE_URL (PostgreSQL in production)}"
: "${CELERY_BROKER_URL:?set CELERY_BROKER_URL (Redis in production)}"

"$PY" manage.py migrate --noinput
"$PY" manage.py collectstatic --noinput -v0

exec "$PY" deploy/supervise.py
