"""API tokens: created on the profile page (key shown once, only its hash stored), revoked there, throttled."""

from __future__ import annotations

import hashlib

from rest_framework.test import APIClient
from rest_framework.throttling import AnonRateThrottle

from annotate.models import ApiToken
from api.throttling import TokenRateThrottle


def test_the_profile_page_creates_a_token_and_shows_its_key_once(client, bob, study):
    client.force_login(bob)
    page = client.post("/profile/tokens/", {"name": "ci runner"})
    assert page.status_code == 201
    assert page["Cache-Control"] == "no-store"
    key = page.context["key"]
    assert key.startswith("flt_") and key in page.content.decode()
    token = ApiToken.objects.get(user=bob)
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key not in str(ApiToken.objects.values().get())  # only the hash is stored
    assert key not in client.get("/profile/tokens/").content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/studies/").json()["results"][0]["slug"] == "alpha"


def test_a_nameless_token_is_refused(client, bob):
    client.force_login(bob)
    page = client.post("/profile/tokens/", {"name": "  "})
    assert page.status_code == 400 and "Give the token a name" in page.content.decode()
    assert not ApiToken.objects.exists()


def test_revoking_stops_the_token_at_once(client, bob, as_user, study):
    from annotate.studies.tokens import token_create

    token, key = token_create(user=bob, name="old")
    client.force_login(bob)
    fragment = client.post(f"/profile/tokens/{token.pk}/revoke/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and "revoked" in fragment.content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/studies/").status_code == 401


def test_nobody_revokes_another_users_token(client, bob, charlie):
    from annotate.studies.tokens import token_create

    token, _ = token_create(user=bob, name="mine")
    client.force_login(charlie)
    assert client.post(f"/profile/tokens/{token.pk}/revoke/").status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_the_token_page_needs_a_login(client):
    assert client.get("/profile/tokens/").status_code == 302


def test_anonymous_clients_and_token_guessers_are_throttled(api, monkeypatch, bob, as_user):
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "3/min", "user": "1000/min"})
    codes = [api.get("/api/v1/studies/").status_code for _ in range(2)]
    api.credentials(HTTP_AUTHORIZATION="Token flt_guess")
    codes += [api.get("/api/v1/studies/").status_code for _ in range(3)]
    assert codes == [401, 401, 401, 429, 429]
    assert api.get("/api/schema/").status_code == 429
    assert as_user(bob).get("/api/v1/studies/").status_code == 200  # a valid token is not an anonymous client


def test_each_token_has_its_own_budget(as_user, bob, study, monkeypatch):
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"anon": "1000/min", "user": "2/min"})
    first, second = as_user(bob), as_user(bob)
    assert [first.get("/api/v1/studies/").status_code for _ in range(3)] == [200, 200, 429]
    assert "Retry-After" in first.get("/api/v1/studies/")
    assert second.get("/api/v1/studies/").status_code == 200  # another token of the same user is unaffected
