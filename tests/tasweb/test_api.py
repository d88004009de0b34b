"""HTTP endpoints served by the project skeleton."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client

from tasweb.celery import app as celery_app
from tasweb.core.services import HEARTBEAT_CACHE_KEY, heartbeat_record
from tasweb.scheduling.models import SchedulingPass

pytestmark = [pytest.mark.services, pytest.mark.django_db]


@pytest.fixture
def staff_client(db) -> Client:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="ops", password="ops-password", is_staff=True)
    staff = Client()
    staff.force_login(user)
    return staff


@pytest.fixture
def recent_heartbeat() -> None:
    heartbeat_record()


def test_healthz_reports_database_and_broker_ok(staff_client: Client, recent_heartbeat):
    response = staff_client.get("/healthz")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == {"ok": True, "detail": connection.vendor}
    assert body["broker"] == {"ok": True, "detail": "redis"}
    assert body["work"]["ok"] is True
    assert body["last_heartbeat"] is not None


def test_healthz_is_503_when_the_broker_is_unreachable(staff_client: Client, recent_heartbeat):
    # A real connection to a port nothing listens on, not a stub: the probe must say which part failed.
    original = celery_app.conf.broker_url
    celery_app.conf.broker_url = "redis://127.0.0.1:1/0"
    try:
        response = staff_client.get("/healthz")
    finally:
        celery_app.conf.broker_url = original

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is False
    assert "127.0.0.1:1" in body["broker"]["detail"]


def test_anonymous_healthz_shows_the_status_alone(client: Client, recent_heartbeat):
    original = celery_app.conf.broker_url
    celery_app.conf.broker_url = "redis://127.0.0.1:1/0"
    try:
        response = client.get("/healthz")
    finally:
        celery_app.conf.broker_url = original

    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}
    assert b"127.0.0.1" not in response.content
    assert client.get("/healthz").json() == {"status": "ok"}


def test_healthz_is_503_without_a_recent_heartbeat_or_pass(staff_client: Client, settings):
    cache.delete(HEARTBEAT_CACHE_KEY)
    never = staff_client.get("/healthz")
    assert never.status_code == 503
    assert never.json()["work"]["ok"] is False and never.json()["last_heartbeat"] is None

    settings.TAS_HEALTH_MAX_AGE_SECONDS = 60
    heartbeat_record(at=datetime.now(UTC) - timedelta(seconds=61))
    stale = staff_client.get("/healthz")
    assert stale.status_code == 503
    assert "no heartbeat or scheduling pass for 61 s" in stale.json()["work"]["detail"]

    now = datetime.now(UTC)
    SchedulingPass.objects.create(started_at=now, finished_at=now)
    assert staff_client.get("/healthz").status_code == 200  # a finished pass counts too
    # the liveness probe asks only for the database and the broker
    SchedulingPass.objects.all().delete()
    assert staff_client.get("/healthz").status_code == 503
    assert staff_client.get("/healthz/live").status_code == 200


def test_healthz_is_503_when_the_database_is_unreachable(client: Client, recent_heartbeat, monkeypatch):
    from tasweb.core import selectors

    monkeypatch.setattr(selectors, "connections", {"default": _UnreachableConnection()})
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable"}


class _UnreachableConnection:
    vendor = "postgresql"

    def cursor(self):
        from django.db import OperationalError

        raise OperationalError('connection to server at "10.0.0.9", port 5432 failed: Connection refused')


def test_api_schema_is_an_openapi_document(client: Client):
    response = client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "TAS service API"
    assert "/healthz" in schema["paths"]


@pytest.mark.parametrize("version", ["\n", "\r\nX-Injected: 1", "<script>", "v9"])
def test_api_schema_ignores_a_version_parameter(client: Client, settings, version: str):
    response = client.get("/api/schema/", {"format": "json", "version": version})

    assert response.status_code == 200
    assert response.json()["info"]["version"] == settings.SPECTACULAR_SETTINGS["VERSION"]
    assert "X-Injected" not in response
    assert version not in response["Content-Disposition"]


def test_api_schema_defaults_to_yaml(client: Client):
    response = client.get("/api/schema/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi")
    assert b"openapi: 3." in response.content


@pytest.mark.parametrize("url", ["/api/schema/", "/api/docs/", "/api/redoc/"])
def test_schema_and_docs_follow_the_anonymous_read_setting(client: Client, staff_client: Client, settings, url):
    settings.TAS_API_ANONYMOUS_READ = False
    refused = client.get(url)
    assert refused.status_code in {401, 403}
    assert b"openapi" not in refused.content
    assert staff_client.get(url).status_code == 200  # any signed-in user reads them

    settings.TAS_API_ANONYMOUS_READ = True
    assert client.get(url).status_code == 200
