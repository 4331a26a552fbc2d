"""The export reads its next page ahead on a connection of its own (PostgreSQL, outside a transaction): the rows
are exactly those read page by page, a consumer that stops early stops the reader and its connection, a database
error in the reader reaches the consumer, and no page runs as a parallel query."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from annotate.exports import rows as exports
from annotate.models import Episode
from conftest import force_parallel_plans

pytestmark = pytest.mark.django_db(transaction=True)


def _readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "export-read-ahead"]


def _backends() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


def test_rows_read_ahead_are_the_rows_read_page_by_page(pg_demo):
    with transaction.atomic():  # inside a transaction the pages are read here, in turn
        in_turn = list(exports.export_rows(pg_demo, chunk=7))
    assert not _readers()
    ahead = exports.export_rows(pg_demo, chunk=7)
    first = next(ahead)
    assert len(_readers()) == 1  # the reader runs while the first rows are used
    rows = [first, *ahead]
    assert len(rows) == pg_demo.episodes.count() == 82
    assert rows == in_turn
    assert not _readers()
    # A subset (what the API's filters pass) is read ahead as well.
    some = Episode.objects.filter(study=pg_demo, id__in=[r.pk for r in pg_demo.episodes.order_by("id")[5:40:3]])
    assert [r["external_id"] for r in exports.export_rows(pg_demo, some, chunk=4)] == [
        e.document.external_id for e in some.select_related("document").order_by("id")
    ]


def test_a_consumer_that_stops_early_stops_the_reader_and_closes_its_connection(pg_demo):
    before = _backends()
    rows = exports.export_rows(pg_demo, chunk=5)
    for _ in range(12):
        next(rows)
    assert len(_readers()) == 1
    assert _backends() == before + 1  # the reader's own connection
    rows.close()  # what Django does when the client of a streamed response hangs up
    assert not _readers()
    assert _backends() == before


def test_a_database_error_in_the_reader_reaches_the_consumer(pg_demo):
    from django.db import DataError

    broken = Episode.objects.filter(study=pg_demo).extra(where=["1 / (annotate_episode.id - annotate_episode.id) = 1"])
    with pytest.raises(DataError, match="division by zero"):
        list(exports.export_rows(pg_demo, broken, chunk=5))
    assert not _readers()


def test_no_page_is_planned_as_a_parallel_query(pg_demo):
    """The page's plan with the export's setting, on a server that would otherwise plan it in parallel."""
    page = exports._timestamps_as_text(
        Episode.objects.filter(study=pg_demo).order_by("id"), exports.EPISODE_FIELDS, ("created_at",)
    )[:2000]
    sql, params = page.query.sql_with_params()
    cheap = "SET LOCAL parallel_setup_cost = 0; SET LOCAL parallel_tuple_cost = 0; SET LOCAL min_parallel_index_scan_size = 0; SET LOCAL min_parallel_table_scan_size = 0"  # noqa: E501
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(cheap)
        cursor.execute("SET LOCAL max_parallel_workers_per_gather = 2")
        # Forced: a test that ANALYZEd the tables in a committed transaction (an import's statistics_refresh)
        # left them saying "tiny", and then even free parallelism planned serially.
        force_parallel_plans(cursor, local=True)
        cursor.execute("EXPLAIN " + sql, params)
        assert "Gather" in "\n".join(r[0] for r in cursor.fetchall())  # the test would see a parallel plan
        list(exports.export_rows(pg_demo, chunk=10))  # in a transaction: SET LOCAL for the rest of it
        cursor.execute("EXPLAIN " + sql, params)
        assert "Gather" not in "\n".join(r[0] for r in cursor.fetchall())
    with connection.cursor() as cursor:  # and nothing of it outlives the transaction
        cursor.execute("SHOW max_parallel_workers_per_gather")
        assert cursor.fetchone()[0] != "0"
