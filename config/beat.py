"""Celery beat's scheduler, which also tends the jobs itself (annotate.jobs.runner.jobs_tend) and sweeps for
documents left unsearchable (annotate.documents.services.search_index_sweep).

Tending runs in the beat process rather than as a task so that it never
waits for a free worker slot: when every worker is busy with long jobs, or
none is running, or the broker was just down, beat still re-queues jobs whose
worker was lost and sends pending jobs whose message is missing. Use it with
`celery -A config beat` (CELERY_BEAT_SCHEDULER in the settings names it).
"""

from __future__ import annotations

import logging
import time

from celery.beat import PersistentScheduler

log = logging.getLogger(__name__)


class TendingScheduler(PersistentScheduler):
    def setup_schedule(self):
        import django

        django.setup()
        self._next_tend = 0.0
        self._next_sweep = 0.0
        super().setup_schedule()

    def _tend(self) -> None:
        from django.conf import settings
        from django.db import close_old_connections

        from annotate.jobs.runner import jobs_tend

        self._next_tend = time.monotonic() + settings.FAULTLINE_REQUEUE_EVERY_S
        close_old_connections()
        try:
            done = jobs_tend()
        except Exception:  # the database or the broker is down: the next round tries again
            log.warning("tending the jobs failed; trying again in %.0f s", settings.FAULTLINE_REQUEUE_EVERY_S,
                        exc_info=True)  # fmt: skip
        else:
            if any(done.values()):
                log.warning("jobs tended: %s", done)
        finally:
            close_old_connections()

    def _sweep(self) -> None:
        """Start a search_index job for each study whose documents no job will index. Here rather than as a
        periodic task for the same reason as tending: it only starts jobs, and must not wait for a free worker."""
        from django.conf import settings
        from django.db import close_old_connections

        from annotate.documents.services import search_index_sweep

        self._next_sweep = time.monotonic() + settings.FAULTLINE_SEARCH_SWEEP_S
        close_old_connections()
        try:
            started = search_index_sweep()
        except Exception:  # the database is down: the next round tries again
            log.warning("the search index sweep failed; trying again in %.0f s", settings.FAULTLINE_SEARCH_SWEEP_S,
                        exc_info=True)  # fmt: skip
        else:
            if started:
                log.warning("documents left unsearchable: search_index jobs %s started", [job.pk for job in started])
        finally:
            close_old_connections()

    def tick(self, *args, **kwargs):
        if time.monotonic() >= self._next_tend:
            self._tend()
        if time.monotonic() >= self._next_sweep:
            self._sweep()
        wait = super().tick(*args, **kwargs)
        return min(wait, max(0.2, min(self._next_tend, self._next_sweep) - time.monotonic()))
