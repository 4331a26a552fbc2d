#!/usr/bin/env bash
# Run the web server, a Celery worker and Celery beat in the foreground; stop all
# three when any one of them exits or on Ctrl-C. Configured by the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
: "${DATABASE_URL:?set DATABASE_URL (PostgreSQL in production)}"
: "${CELERY_BROKER_URL:?set CELERY_BROKER_URL (Redis in production)}"

"$PY" manage.py migrate --noinput
"$PY" manage.py collectstatic --noinput -v0

pids=()
"$PY" -m gunicorn config.wsgi -c deploy/gunicorn.conf.py & pids+=($!)
"$PY" -m celery -A config worker -l "${CELERY_LOG_LEVEL:-INFO}" --concurrency "${CELERY_CONCURRENCY:-2}" & pids+=($!)
"$PY" -m celery -A config beat -l "${CELERY_LOG_LEVEL:-INFO}" --schedule "${CELERY_BEAT_SCHEDULE:-/tmp/faultline-celerybeat}" & pids+=($!)

trap 'kill "${pids[@]}" 2>/dev/null; wait' INT TERM EXIT
wait -n "${pids[@]}"
