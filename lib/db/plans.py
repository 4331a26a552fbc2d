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
from contextlib import contextmanager, nullcontext

from django.db import DEFAULT_DB_ALIAS, connections, transaction

SERIAL_PLANS = "max_parallel_workers_per_gather = 0"


@contextmanager
def serial_plans(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Queries inside run with serial plans on PostgreSQL (nothing changes elsewhere).

    The setting is always SET LOCAL, so the transaction's end undoes it: the caller's transaction, or
    one opened here for the block. Never a setting of the session, which a connection pooler could
    hand to another client, and which an error between SET and RESET would leave behind."""
    conn = connections[using]
    if conn.vendor != "postgresql":
        yield
        return
    with transaction.atomic(using=using) if not conn.in_atomic_block else nullcontext():
        with conn.cursor() as cursor:
            cursor.execute(f"SET LOCAL {SERIAL_PLANS}")
        yield
