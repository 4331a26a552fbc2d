"""Security properties that hold for the whole site."""

import pytest
from django.test import Client

from conftest import PASSWORD


def test_login_brute_force_is_locked_out(client, alice, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    response = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 429
    assert "Too many failed log-in attempts" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_good_login_resets_the_failure_count(client, alice, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    client.post("/logout/")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post("/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302


def test_security_headers_are_set(client, alice):
    client.force_login(alice)
    response = client.get("/")
    csp = response["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-eval" not in csp and "frame-ancestors 'none'" in csp
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_htmx_is_served_from_our_own_origin(client, alice):
    client.force_login(alice)
    html = client.get("/").content.decode()
    assert '<script src="/static/django_htmx/' in html or 'src="/static/' in html
    assert "<script>" not in html  # no inline scripts: the CSP would block them


def test_the_login_form_enforces_csrf(db):
    strict = Client(enforce_csrf_checks=True)
    assert strict.post("/login/", {"username": "x", "password": "y"}).status_code == 403


@pytest.mark.parametrize("path", ["/", "/codebooks/", "/studies/alpha/", "/jobs/1/", "/admin/"])
def test_pages_need_a_login(client, study, path):
    response = client.get(path)
    assert response.status_code == 302
    assert "/login/" in response.url
