"""/healthz tells an anonymous prober up or down per component, and nothing about why."""

from __future__ import annotations

import json

from django.db import connection
from django.test import override_settings

SECRETISH = ("hunter2", "refused", "Error", "127.0.0.1", "redis", "password", "connection")


def _database_down(monkeypatch):
    from annotate.views import health

    class DownConnection:
        vendor = "postgresql"

        def cursor(self):
            raise connection.Database.OperationalError(
                'connection to server at "db.internal" (10.0.0.7), port 5432 failed: password authentication failed'
            )

    monkeypatch.setattr(health, "connection", DownConnection())


@override_settings(CELERY_BROKER_URL="redis://:hunter2@127.0.0.1:1/0")
def test_an_anonymous_probe_gets_statuses_only(client, db, monkeypatch):
    _database_down(monkeypatch)
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body == {"status": "unavailable", "database": {"ok": False}, "broker": {"ok": False}, "jobs": {"ok": False}}
    text = json.dumps(body)
    assert not [word for word in SECRETISH if word in text]


def test_a_healthy_anonymous_probe(client, db):
    assert client.get("/healthz").json() == {
        "status": "ok", "database": {"ok": True}, "broker": {"ok": True}, "jobs": {"ok": True},
    }  # fmt: skip


@override_settings(CELERY_BROKER_URL="redis://:hunter2@127.0.0.1:1/0")
def test_staff_see_why_without_credentials(client, db, django_user_model, monkeypatch):
    admin = django_user_model.objects.create_user(username="ops", password="x", is_staff=True)
    client.force_login(admin)
    body = client.get("/healthz").json()
    assert body["broker"]["ok"] is False and body["broker"]["detail"]
    assert "hunter2" not in json.dumps(body)


def test_a_member_who_is_not_staff_gets_statuses_only(client, alice, db, monkeypatch):
    _database_down(monkeypatch)
    client.force_login(alice)
    assert "detail" not in json.dumps(client.get("/healthz").json())
