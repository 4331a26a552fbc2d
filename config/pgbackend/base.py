"""PostgreSQL, with the connection health check at most once a second per connection.

Django's CONN_HEALTH_CHECKS sends `SELECT 1` before the first query of every
request that reuses a connection: a round trip per request, about a tenth of
the round trips of a coding save. Here a connection that completed a query
less than DB_HEALTH_CHECK_INTERVAL_S ago is taken as alive. If the server went
away inside that window, the request fails cleanly (500, its transaction rolled
back) and Django drops the connection at the end of it, so the next request
connects again; tests/faults/test_postgres_restart.py holds it to that.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.answered_at = float("-inf")
        self.execute_wrappers.append(self._note_answer)

    def _note_answer(self, execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        self.answered_at = time.monotonic()
        return result

    def close_if_health_check_failed(self) -> None:
        interval = settings.DB_HEALTH_CHECK_INTERVAL_S
        fresh = interval > 0 and time.monotonic() - self.answered_at < interval
        if self.connection is not None and not self.health_check_done and fresh:
            self.health_check_done = True
            return
        super().close_if_health_check_failed()
