"""The PostgreSQL backend checks a reused connection's health at most once per interval."""

from __future__ import annotations

import time

import pytest
from django.db import connection, connections

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _checks_at_request_start(monkeypatch, *, answered_ago: float) -> int:
    """How many health checks a request makes on a connection that last answered `answered_ago` s ago."""
    calls = []
    wrapper = connections["default"]
    original = type(wrapper).is_usable
    monkeypatch.setattr(wrapper, "is_usable", lambda: calls.append(1) or original(wrapper), raising=False)
    connection.ensure_connection()
    connection.health_check_enabled = True
    connection.answered_at = time.monotonic() - answered_ago
    connection.health_check_done = False  # what Django does when a request starts
    connection.close_if_health_check_failed()
    assert connection.health_check_done and connection.connection is not None
    return len(calls)


def test_a_connection_that_just_answered_skips_the_check_and_an_idle_one_is_checked(
    require_postgres, settings, monkeypatch
):
    settings.DB_HEALTH_CHECK_INTERVAL_S = 1.0
    assert _checks_at_request_start(monkeypatch, answered_ago=0.2) == 0
    assert _checks_at_request_start(monkeypatch, answered_ago=5.0) == 1
    settings.DB_HEALTH_CHECK_INTERVAL_S = 0  # every request, as plain Django does
    assert _checks_at_request_start(monkeypatch, answered_ago=0.0) == 1


def test_each_query_marks_the_connection_as_answering(require_postgres):
    connection.ensure_connection()
    connection.answered_at = float("-inf")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 2")
    assert time.monotonic() - connection.answered_at < 1.0


def test_a_dead_connection_inside_the_window_fails_one_request_and_is_replaced(require_postgres, settings):
    from django.db import OperationalError, close_old_connections

    settings.DB_HEALTH_CHECK_INTERVAL_S = 60.0
    connection.ensure_connection()
    with connection.cursor() as cursor:  # kill this connection's server process, as a restart would
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    other = connections.create_connection("default")
    with other.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    other.close()
    connection.health_check_done = False
    with pytest.raises(OperationalError), connection.cursor() as cursor:
        cursor.execute("SELECT 3")
    close_old_connections()  # the end of that request: Django drops the broken connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT 4")
        assert cursor.fetchone()[0] == 4
