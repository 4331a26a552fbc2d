"""Property-based run of schemathesis against our own OpenAPI schema, through the WSGI app.

Every operation gets a few generated requests (bounded, derandomised, so the run
is quick and repeatable); no response may be a 5xx, have an undocumented
content type, or break its documented schema. (schemathesis's own pytest plugin
does not run under pytest 9, so the operations are driven with hypothesis here.)
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import content_type_conformance, not_a_server_error, response_schema_conformance

CHECKS = [not_a_server_error, content_type_conformance, response_schema_conformance]


@pytest.fixture
def wsgi_app():
    """The real WSGI app, kept from closing the test's database connection between requests
    (Django's own test client does the same)."""
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token(db, settings, alice, coded):
    from annotate.studies.tokens import token_create

    return token_create(user=alice, name="schemathesis")[1]


def test_the_api_honours_its_schema(token, wsgi_app):
    from hypothesis import given

    headers = {"Authorization": f"Token {token}"}
    api_schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app, headers=headers)
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 15
    statuses = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @hypothesis_settings(
            max_examples=4, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case):
            if case.path_parameters and "slug" in case.path_parameters:
                case.path_parameters["slug"] = "alpha"  # a random slug only ever meets the 404
            statuses.append(case.call_and_validate(headers=headers, checks=CHECKS).status_code)

        check()
    assert len(statuses) >= 2 * len(operations)
    assert statuses.count(200) >= len(operations) // 2, sorted(statuses)  # past auth and validation, too
