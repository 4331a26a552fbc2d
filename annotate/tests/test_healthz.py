from django.db import connection
from django.test import override_settings


def test_it_reports_database_and_broker_without_login(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is True


@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_it_returns_503_when_the_broker_is_down(client, db):
    response = client.get("/healthz")  # nothing listens on port 1
    assert response.status_code == 503
    assert response.json()["broker"]["ok"] is False
    assert response.json()["database"]["ok"] is True


def test_it_returns_503_when_the_database_is_down(client, db, monkeypatch):
    from annotate.views import health

    class DownConnection:
        def cursor(self):
            raise connection.Database.OperationalError("connection refused")

    monkeypatch.setattr(health, "connection", DownConnection())
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["database"]["ok"] is False
