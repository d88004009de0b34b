"""HTTP endpoints served by the project skeleton."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client

from tasweb.celery import app as celery_app

pytestmark = [pytest.mark.services, pytest.mark.django_db]


def test_healthz_reports_database_and_broker_ok(client: Client):
    response = client.get("/healthz")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == {"ok": True, "detail": connection.vendor}
    assert body["broker"] == {"ok": True, "detail": "redis"}
    assert "last_heartbeat" in body


def test_healthz_is_503_when_the_broker_is_unreachable(client: Client):
    # A real connection to a port nothing listens on, not a stub: the probe must say which part failed.
    original = celery_app.conf.broker_url
    celery_app.conf.broker_url = "redis://127.0.0.1:1/0"
    try:
        response = client.get("/healthz")
    finally:
        celery_app.conf.broker_url = original

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is False
    assert "127.0.0.1:1" in body["broker"]["detail"]


def test_api_schema_is_an_openapi_document(client: Client):
    response = client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "TAS service API"
    assert "/healthz" in schema["paths"]


def test_api_schema_defaults_to_yaml(client: Client):
    response = client.get("/api/schema/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi")
    assert b"openapi: 3." in response.content
