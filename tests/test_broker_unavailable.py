"""A request whose answer needs the broker while it is down gets 503 with Retry-After, never a 500."""

from __future__ import annotations

from django.test import RequestFactory
from kombu.exceptions import OperationalError

from config.middleware import BrokerUnavailableMiddleware


def test_a_broker_error_becomes_503_with_retry_after():
    middleware = BrokerUnavailableMiddleware(lambda request: None)
    for path in ("/api/v1/jobs/1/", "/studies/alpha/"):
        response = middleware.process_exception(RequestFactory().get(path), OperationalError("Connection refused"))
        assert response.status_code == 503 and response["Retry-After"] == "30"
    assert b"detail" in middleware.process_exception(RequestFactory().get("/api/v1/x/"), OperationalError()).content


def test_other_errors_are_left_alone():
    middleware = BrokerUnavailableMiddleware(lambda request: None)
    assert middleware.process_exception(RequestFactory().get("/"), ValueError("bug")) is None
