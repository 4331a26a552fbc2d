"""Every request body is capped before anything reads it, multipart files and anonymous clients included."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from annotate.models import Document, Job


class Endless(io.RawIOBase):
    """A request body that claims to be huge; reading more than `allowed` bytes fails the test."""

    def __init__(self, allowed: int):
        self.allowed, self.read_bytes = allowed, 0

    def readable(self):
        return True

    def readinto(self, buffer):
        n = len(buffer)
        self.read_bytes += n
        assert self.read_bytes <= self.allowed, "the server read a body it should have refused"
        buffer[:n] = b"x" * n
        return n


def _post(client: Client, path: str, size: int, content_type: str, **extra):
    """POST `size` declared bytes without building them in memory: the server must refuse from the header."""
    body = Endless(allowed=64 * 1024)
    environ = {"CONTENT_LENGTH": str(size), "CONTENT_TYPE": content_type, "wsgi.input": body, **extra}
    return client.generic("POST", path, b"", content_type, **environ), body


MULTIPART = "multipart/form-data; boundary=xyz"


@pytest.mark.parametrize("path", ["/login/", "/api/v1/incidents/", "/studies/alpha/import/", "/no/such/page/"])
def test_an_anonymous_200_mb_body_is_refused_unread(db, path):
    response, body = _post(Client(), path, 200 * 1024 * 1024, MULTIPART)
    assert response.status_code == 413
    assert body.read_bytes == 0


def test_a_signed_in_body_over_the_upload_limit_is_refused_unread(client, alice, study):
    client.force_login(alice)
    size = (django_settings.FAULTLINE_MAX_UPLOAD_MB + 2) * 1024 * 1024
    response, body = _post(client, "/studies/alpha/import/", size, MULTIPART)
    assert response.status_code == 413
    assert "MB" in response.content.decode()
    assert body.read_bytes == 0
    assert not Job.objects.exists() and not Document.objects.exists()


def test_a_token_client_over_the_limit_gets_json(alice, study):
    from annotate.studies.tokens import token_create

    key = token_create(user=alice, name="big")[1]
    size = (django_settings.FAULTLINE_MAX_REQUEST_MB + 1) * 1024 * 1024
    response, _ = _post(Client(), "/api/v1/studies/alpha/import/", size, MULTIPART, HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 413
    assert "larger than" in response.json()["detail"]


@pytest.mark.parametrize("path", ["/login/", "/api/v1/incidents/"])
def test_a_made_up_token_does_not_lift_the_anonymous_limit(db, path):
    response, body = _post(Client(), path, 10 * 1024 * 1024, MULTIPART, HTTP_AUTHORIZATION="Token not-a-real-key")
    assert response.status_code == 413
    assert body.read_bytes == 0


def test_a_bad_content_length_is_a_400(db):
    response = Client().generic("POST", "/login/", b"", "text/plain", CONTENT_LENGTH="-5")
    assert response.status_code == 400


def test_an_ordinary_login_and_a_real_upload_still_work(client, alice, study, tmp_path):
    from conftest import PASSWORD

    assert Client().post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    client.force_login(alice)
    sample = Path(django_settings.BASE_DIR) / "fixtures" / "samples"
    path = next(p for p in sorted(sample.glob("*.json")) if p.stat().st_size > 70 * 1024)
    with path.open("rb") as fh:
        response = client.post("/studies/alpha/import/", {"file": fh})
    assert response.status_code in (200, 302)
    assert Job.objects.filter(kind="import").exists()
