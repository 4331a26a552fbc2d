# Faultline: `make run` serves the demo on http://127.0.0.1:8000, `make test` runs the tests.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# Local runs and tests use the development key and plain-HTTP cookies;
# production sets SECRET_KEY and leaves FAULTLINE_DEV unset.
export FAULTLINE_DEV ?= 1

.PHONY: run test lint serve setup backup mutation system-deps

# pip byte-compiles what it installs one file at a time (about 45 s of a fresh set-up); compileall does it on
# every core. Skipping it is no option: with PYTHONDONTWRITEBYTECODE set, as on some machines, every process would
# compile Django, numpy and the rest again at each start. (Like pip, it passes over files that do not compile.)
COMPILE = $(PY) -m compileall -qq -j 0 $(VENV)/lib || true
$(VENV)/.runtime: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --no-compile -r requirements.txt
	$(COMPILE)
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(PY) -m pip install --quiet --no-compile -r requirements-dev.txt
	$(COMPILE)
	touch $@

# Debian libraries outside pip: Pango for WeasyPrint (report.pdf). Needs root; a no-op when they are there.
system-deps:
	@ldconfig -p 2>/dev/null | grep -q 'libpangoft2-1.0.so.0' || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libpango-1.0-0 libpangoft2-1.0-0; \
	  else echo "report.pdf needs Pango: sudo apt-get install libpango-1.0-0 libpangoft2-1.0-0" >&2; fi; }

setup: $(VENV)/.runtime system-deps
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_codebook fixtures/codebook-v1.json --publish
	$(PY) manage.py demo
	$(PY) manage.py suggest --study demo

run: setup
	@echo "Serving Faultline on http://127.0.0.1:8000/ (log in with a demo login above)"
	$(PY) manage.py runserver 127.0.0.1:8000

# Tests run in TEST_JOBS processes (pytest-xdist; `auto` = one per core), each on its own test database;
# the long fault and bench tests, which mostly wait, are handed out first, one test at a time (conftest.py).
# TEST_JOBS=0 runs them in this one process.
TEST_JOBS ?= auto
test: $(VENV)/.dev system-deps
	$(PY) -m pytest -n $(TEST_JOBS) --dist load --maxschedchunk 1 $(PYTEST_ARGS)

# Style, the import contracts of [tool.importlinter] (pyproject.toml; docs/adr/0001-layout.md says why), and
# no model change without its migration.
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) manage.py makemigrations --check --dry-run

# Production: gunicorn, a Celery worker and Celery beat against PostgreSQL and Redis,
# configured by the environment (SECRET_KEY, DATABASE_URL, CELERY_BROKER_URL, ...).
serve: $(VENV)/.runtime
	FAULTLINE_DEV= PY=$(PY) deploy/serve.sh

# A verifiable backup: dumpdata, pg_dump on PostgreSQL, and a manifest (see docs/deploy.md).
backup: $(VENV)/.runtime
	$(PY) manage.py backup $(if $(OUT),--out $(OUT),)

# Mutation testing of lib/stats/ against its own database-free tests (config: [tool.mutmut] in
# pyproject.toml). CPU-heavy: MUTATION_JOBS (default 2) parallel children. Prints the score over the mutants
# not judged equivalent (the list, with reasons, is in lib/tests/test_stats.py).
MUTATION_JOBS ?= 2
mutation: $(VENV)/.dev
	rm -rf mutants
	-$(VENV)/bin/mutmut run --max-children $(MUTATION_JOBS)
	$(PY) lib/tests/mutation_score.py
