"""API manners: JSON errors for every /api/ URL, docs that send a browser to log in, a 403 page with a way
back, one log line (no traceback) for an expected refusal, scoped tokens with an expiry."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from annotate.models import ApiToken
from annotate.studies.tokens import token_create


def _token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.mark.parametrize(
    "path", ["/api/v1/nope/", "/api/nope", "/api/v1/studies/alpha/nope/", "/api/v2/studies/", "/api/v1/jobs/x/"]
)
def test_an_unknown_api_url_is_a_json_404(path, as_user, bob, study):
    for client in (APIClient(), as_user(bob)):
        for method in ("get", "post", "delete"):
            r = getattr(client, method)(path)
            assert r.status_code == 404, (path, method, r.status_code)
            assert r["Content-Type"].startswith("application/json")
            assert "detail" in r.json()


def test_a_missing_slash_says_where_the_endpoint_is(as_user, bob, study):
    r = as_user(bob).get("/api/v1/studies")
    assert r.status_code == 404 and "/api/v1/studies/" in r.json()["detail"]


def test_the_docs_send_an_anonymous_browser_to_log_in(client, bob):
    r = client.get("/api/docs/")
    assert r.status_code == 302 and r["Location"] == "/login/?next=/api/docs/"
    client.force_login(bob)
    assert client.get("/api/docs/").status_code == 200
    assert APIClient().get("/api/schema/").status_code == 401  # the machine-readable schema: 401 as any endpoint


def test_the_403_page_offers_a_way_back(client, vera, study):
    client.force_login(vera)
    came_from = "http://testserver/studies/alpha/"
    r = client.get("/studies/alpha/members/", HTTP_REFERER=came_from)
    html = r.content.decode()
    assert r.status_code == 403
    assert 'href="/studies/alpha/"' in html and "Go back" in html
    assert 'href="/"' in html and "Your studies" in html
    elsewhere = client.get("/studies/alpha/members/", HTTP_REFERER="https://evil.example/").content.decode()
    assert "evil.example" not in elsewhere and 'href="/"' in elsewhere


def test_an_expected_refusal_logs_one_line_without_a_traceback(client, vera, study, caplog):
    client.force_login(vera)
    with caplog.at_level(logging.INFO):
        assert client.get("/studies/alpha/members/").status_code == 403
    refusals = [r for r in caplog.records if r.name == "django.request"]
    assert len(refusals) == 1
    assert refusals[0].exc_info is None and refusals[0].exc_text is None
    assert "/studies/alpha/members/" in refusals[0].getMessage()
    assert "Traceback" not in caplog.text


def test_an_api_403_is_json(as_user, vera, study):
    r = as_user(vera).post("/api/v1/studies/alpha/suggest/", {})
    assert r.status_code == 403 and r["Content-Type"].startswith("application/json")


def test_the_profile_page_makes_a_read_token_that_expires(client, bob, study):
    client.force_login(bob)
    page = client.post("/profile/tokens/", {"name": "dashboard", "scope": "read", "expires_in": "30"})
    assert page.status_code == 201
    token = ApiToken.objects.get(user=bob)
    assert token.scope == "read"
    assert abs((token.expires_at - timezone.now()) - timedelta(days=30)) < timedelta(minutes=1)
    listing = client.get("/profile/tokens/").content.decode()
    assert "read only" in listing and f"{token.expires_at:%Y-%m-%d}" in listing
    bad = client.post("/profile/tokens/", {"name": "x", "scope": "admin", "expires_in": "30"})
    assert bad.status_code == 400 and ApiToken.objects.count() == 1
    bad = client.post("/profile/tokens/", {"name": "x", "scope": "read", "expires_in": "-1"})
    assert bad.status_code == 400 and ApiToken.objects.count() == 1


def test_a_read_token_reads_and_may_not_write(bob, alice, study):
    _, key = token_create(user=alice, name="reader", scope="read")
    client = _token_client(key)
    assert client.get("/api/v1/studies/").status_code == 200
    for method, path in [("post", "/api/v1/incidents/"), ("post", "/api/v1/studies/alpha/suggest/"),
                         ("delete", "/api/v1/studies/alpha/"), ("patch", "/api/v1/incidents/1/")]:  # fmt: skip
        r = getattr(client, method)(path, {}, format="json")
        assert r.status_code == 403, (method, path, r.status_code)
        assert "read-only token" in r.json()["detail"]
    _, write_key = token_create(user=alice, name="writer", scope="write")
    assert _token_client(write_key).post("/api/v1/studies/alpha/suggest/", {}, format="json").status_code != 403


def test_an_expired_token_is_a_401(bob, study):
    token, key = token_create(user=bob, name="old", expires_at=timezone.now() + timedelta(days=1))
    assert _token_client(key).get("/api/v1/studies/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    r = _token_client(key).get("/api/v1/studies/")
    assert r.status_code == 401 and "expired" in r.json()["detail"]
