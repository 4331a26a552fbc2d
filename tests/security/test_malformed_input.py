"""Malformed input is a 400 with a message and stores nothing; never a 500."""

from __future__ import annotations

import base64
import json
import threading
from urllib.parse import urlencode

import pytest
from rest_framework.test import APIClient

from annotate.models import Document, Episode

PAGES = [
    "/studies/alpha/documents/?q=%00",
    "/studies/alpha/documents/?cluster=%00",
    "/studies/alpha/documents/?label=a%00b",
    "/studies/alpha/incidents/?service=%00",
    "/studies/alpha/adjudicate/?type=%00",
    "/codebooks/1/?q=%00",
    "/studies/alpha/documents/?%00=x",
]
API = [
    "/api/v1/studies/alpha/documents/?cluster=%00",
    "/api/v1/studies/alpha/episodes/?failure_type=%00",
    "/api/v1/incidents/?service=%00",
    "/api/v1/studies/alpha/export/?format=csv&cluster=%00",
]


@pytest.mark.parametrize("url", PAGES)
def test_a_nul_in_a_page_query_is_a_400_with_a_message(client, alice, study, url):
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 400
    assert "NUL" in response.content.decode()


@pytest.mark.parametrize("url", API)
def test_a_nul_in_an_api_query_is_a_400_with_a_message(alice, study, url):
    api = APIClient()
    api.force_authenticate(alice)
    response = api.get(url)
    assert response.status_code == 400
    assert "NUL" in response.json()["detail"]


def _cursor(**tokens) -> str:
    return base64.b64encode(urlencode(tokens).encode()).decode()


@pytest.mark.parametrize(
    "cursor", [_cursor(p="abc"), _cursor(p="1e9999"), _cursor(o="x", p="1"), _cursor(p=""), _cursor(p="9" * 30)]
)
def test_a_cursor_with_a_bad_position_is_a_400(alice, study, make_episode, cursor):
    make_episode(study)
    api = APIClient()
    api.force_authenticate(alice)
    for endpoint in ("documents", "episodes"):
        response = api.get(f"/api/v1/studies/alpha/{endpoint}/", {"cursor": cursor})
        assert response.status_code == 400, endpoint
        assert "cursor" in json.dumps(response.json()).lower()


@pytest.mark.parametrize("against", ["abc", "1.5", "-1", "%00", "99999999999999999999999"])
def test_a_codebook_diff_against_a_non_number_is_a_400(client, alice, codebook, against):
    client.force_login(alice)
    response = client.get(f"/codebooks/{codebook.pk}/diff/", {"against": against})
    assert response.status_code in (400, 404)
    if not against.lstrip("-").isdigit() or against.startswith("-"):
        assert response.status_code == 400
        assert "against" in response.content.decode()


@pytest.mark.parametrize("path", ["/api/v1/incidents/", "/api/v1/studies/alpha/codings/"])
def test_json_nested_50000_deep_is_a_400(incidents_open, bob, study, path):
    from annotate.studies.tokens import token_create

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=bob, name='deep')[1]}")
    body = '{"study": "alpha", "trace": ' + "[" * 50_000 + "]" * 50_000 + "}"
    response = api.post(path, body, content_type="application/json")
    assert response.status_code == 400
    assert "nested" in response.json()["detail"]
    assert not Document.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_posts_of_one_incident_make_one(incidents_open, require_postgres, study, bob):
    """Eight senders retrying one incident at once: one 201, the others 200 (or 409), never 500, one document."""
    from annotate.studies.tokens import token_create

    _, key = token_create(user=bob, name="race")
    payload = {"study": "alpha", "service": "checkout", "title": "t", "description": "d", "external_id": "inc-42"}
    barrier = threading.Barrier(8)
    codes: list[int] = []

    def send():
        from django.db import connection

        client = APIClient()
        client.raise_request_exception = False  # a 500 is an answer to count, not an exception
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        barrier.wait()
        try:
            codes.append(client.post("/api/v1/incidents/", payload, format="json").status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes).count(201) == 1, codes
    assert all(code in (200, 201, 409) for code in codes), codes
    assert Document.objects.filter(external_id="inc-42").count() == 1
    assert Episode.objects.filter(document__external_id="inc-42").count() == 1
