"""Readers that page through a study by index run with serial plans on PostgreSQL (lib/db/plans.py): the
analysis labels' queries have no Gather even when parallel plans cost nothing, and the setting does not outlive
the reader, in a transaction or outside one."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from annotate.analysis.arrays import _label_part, codebook_axes, label_id_ranges, label_part
from conftest import force_parallel_plans
from lib.db.plans import serial_plans

pytestmark = pytest.mark.django_db(transaction=True)


def _setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_parallel_workers_per_gather")
        return cursor.fetchone()[0]


def _plans_of_selects(run) -> list[str]:
    """The plan PostgreSQL would use for each SELECT that `run()` sends, explained on the spot (through the
    driver's own cursor, so under the settings of that moment)."""
    plans = []

    def explain(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("SELECT"):
            with connection.connection.cursor() as raw:
                raw.execute("EXPLAIN " + sql, params)
                plans.append("\n".join(row[0] for row in raw.fetchall()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explain):
        run()
    return plans


def _force_parallel() -> None:
    with connection.cursor() as cursor:
        force_parallel_plans(cursor)


def test_the_label_reader_never_plans_a_parallel_query(pg_demo):
    default = _setting()
    axes = codebook_axes(pg_demo)
    (ids,) = label_id_ranges(pg_demo, 1)
    _force_parallel()
    try:
        without = _plans_of_selects(lambda: _label_part(pg_demo, axes, ids))  # the reader without serial_plans()
        plans = _plans_of_selects(lambda: label_part(pg_demo, axes, ids=ids))
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ALL")
    assert len(plans) == len(without) >= 5
    assert all("Gather" in plan for plan in without)  # the test sees a parallel plan where there is one
    assert not any("Gather" in plan for plan in plans)
    assert _setting() == default


def test_serial_plans_are_undone_after_the_block_and_after_the_transaction(pg_demo):
    default = _setting()
    assert default != "0"
    with serial_plans():
        assert _setting() == "0"
    assert _setting() == default
    with pytest.raises(ZeroDivisionError), serial_plans():
        assert _setting() == "0"
        1 / 0  # noqa: B018
    assert _setting() == default
    with transaction.atomic():
        with serial_plans():
            assert _setting() == "0"
        assert _setting() == "0"  # SET LOCAL: until the transaction ends
    assert _setting() == default
