"""Accounts: password-reset requests are rate-limited; a new password revokes the user's API tokens."""

from __future__ import annotations

import pytest
from django.contrib.auth.tokens import default_token_generator
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from rest_framework.test import APIClient

from annotate.models import ApiToken
from annotate.studies.tokens import token_create
from conftest import PASSWORD

RESET = "/account/password/reset/"
NEW = "a-new-long-passphrase-42"


@pytest.fixture
def mail(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.FAULTLINE_PASSWORD_RESET_RATE_EMAIL = "3/hour"
    settings.FAULTLINE_PASSWORD_RESET_RATE_IP = "10/hour"


def test_it_limits_reset_requests_for_one_address(client, bob, mail, mailoutbox):
    answers = [client.post(RESET, {"email": bob.email}).status_code for _ in range(5)]
    assert answers == [302, 302, 302, 429, 429]
    assert len(mailoutbox) == 3
    refused = client.post(RESET, {"email": bob.email.upper()})  # the same address, spelt otherwise
    assert refused.status_code == 429 and "Too many password-reset requests" in refused.content.decode()
    assert client.post(RESET, {"email": "alice@example.org"}).status_code == 302  # another address still may


def test_it_limits_reset_requests_from_one_client_address(client, db, mail, mailoutbox):
    answers = [client.post(RESET, {"email": f"nobody{n}@example.org"}).status_code for n in range(12)]
    assert answers == [302] * 10 + [429, 429]
    other = client.post(RESET, {"email": "someone@example.org"}, REMOTE_ADDR="203.0.113.9")
    assert other.status_code == 302  # another client is not held back by this one


def _api_ok(key: str) -> bool:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api.get("/api/v1/studies/").status_code == 200


def test_changing_the_password_revokes_every_token(client, bob, study):
    _, key = token_create(user=bob, name="laptop")
    assert _api_ok(key)
    client.force_login(bob)
    r = client.post(
        "/account/password/",
        {"old_password": PASSWORD, "new_password1": NEW, "new_password2": NEW},
    )
    assert r.status_code == 302
    assert not _api_ok(key)
    assert ApiToken.objects.get(user=bob).revoked_at is not None


def test_a_refused_password_change_keeps_the_tokens(client, bob, study):
    _, key = token_create(user=bob, name="laptop")
    client.force_login(bob)
    r = client.post("/account/password/", {"old_password": "wrong", "new_password1": "x", "new_password2": "y"})
    assert r.status_code == 200 and _api_ok(key)


def test_resetting_the_password_revokes_every_token(client, bob, study):
    _, key = token_create(user=bob, name="laptop")
    uid = urlsafe_base64_encode(force_bytes(bob.pk))
    token = default_token_generator.make_token(bob)
    form = client.get(f"/account/password/reset/{uid}/{token}/", follow=True)
    assert form.status_code == 200
    r = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": NEW, "new_password2": NEW},
    )
    assert r.status_code == 302
    assert not _api_ok(key)


def test_a_password_set_outside_the_account_pages_revokes_every_token_too(admin_client, bob, study):
    """The admin's password form and `manage.py changepassword` save through set_password as well."""
    from django.contrib.auth import get_user_model

    _, key = token_create(user=bob, name="laptop")
    r = admin_client.post(
        f"/admin/auth/user/{bob.pk}/password/",
        {"password1": NEW, "password2": NEW, "usable_password": "true"},
    )
    assert r.status_code == 302, r.content[:500]
    assert not _api_ok(key)
    _, key = token_create(user=bob, name="cli")
    user = get_user_model().objects.get(pk=bob.pk)
    user.set_password(NEW + "-2")
    user.save()
    assert not _api_ok(key)


def test_saving_a_user_without_a_new_password_keeps_the_tokens(bob, study):
    _, key = token_create(user=bob, name="laptop")
    bob.first_name = "Bob"
    bob.save()
    assert _api_ok(key)
