"""The fault tests' own count of how many times each job's work ran, kept apart from the app's bookkeeping.

Celery workers started by the fault tests load this module (`celery worker --include tests.faults.run_counter`).
When the test sets FAULTLINE_TEST_RUN_COUNTER_URL to a Redis database of its own, every `job_started` signal,
which `job_run` sends as a job's work starts, adds one to `faultline-test:job-runs:<job id>` there. The test
reads the counts with `runs()`: a job whose work ran twice shows 2 whatever the Job row says.
"""

from __future__ import annotations

import os

import redis

from annotate.jobs.runner import job_started

ENV = "FAULTLINE_TEST_RUN_COUNTER_URL"
PREFIX = "faultline-test:job-runs:"

_clients: dict[tuple[int, str], redis.Redis] = {}


def _client(url: str) -> redis.Redis:
    # One client per process: prefork children must not share the parent's sockets.
    key = (os.getpid(), url)
    if key not in _clients:
        _clients[key] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return _clients[key]


def count_run(sender, *, job, **kwargs) -> None:
    url = os.environ.get(ENV)
    if url:
        _client(url).incr(f"{PREFIX}{job.pk}")


job_started.connect(count_run, dispatch_uid="faultline-test-run-counter")


def runs(url: str) -> dict[int, int]:
    """How many times each job's work started, by job id, as counted in the Redis at `url`."""
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{PREFIX}*"))
    if not keys:
        return {}
    return {int(key.decode().removeprefix(PREFIX)): int(n) for key, n in zip(keys, client.mget(keys), strict=True)}
