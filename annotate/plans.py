"""Query plans without parallel workers, for the readers that page through a large study by index.

PostgreSQL plans a page of a few thousand rows, read by a range of ids, as a parallel query when the
study is large: it starts two worker processes for every page. On a 2-core server that made an export
page twice as slow as the plain index scan, and two analysis workers reading their label parts at
once (each query with its two helpers) gained less over one worker than they should (a B=10,000
bootstrap of a 500,000-episode study: 1.28-1.55x faster with two workers, 1.62-1.76x with serial
plans). The work is spread over Celery workers instead; their queries need no helpers of their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

SERIAL_PLANS = "max_parallel_workers_per_gather = 0"


@contextmanager
def serial_plans(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Queries inside run with serial plans on PostgreSQL (nothing changes elsewhere).

    In a transaction the setting is SET LOCAL, undone when the transaction ends; outside one it is
    set for the connection and reset on the way out."""
    conn = connections[using]
    if conn.vendor != "postgresql":
        yield
        return
    local = conn.in_atomic_block
    with conn.cursor() as cursor:
        cursor.execute(f"SET {'LOCAL ' if local else ''}{SERIAL_PLANS}")
    try:
        yield
    finally:
        if not local:
            try:
                with conn.cursor() as cursor:
                    cursor.execute("RESET max_parallel_workers_per_gather")
            except DatabaseError:  # the connection is gone; a new one starts with the default
                pass
