"""The test settings talk to the machine's real PostgreSQL and Redis."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime

import pytest
import redis
from django.conf import settings
from django.core.cache import cache
from django.db import connection

from tasweb.core.selectors import broker_check, database_check, heartbeat_last
from tasweb.core.services import heartbeat_record

pytestmark = pytest.mark.services


@pytest.mark.django_db
def test_database_is_postgresql():
    url = os.environ.get("DATABASE_URL", "")
    if os.environ.get("CI") or url.startswith(("postgres://", "postgresql://")):
        assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 + 1")
        assert cursor.fetchone() == (2,)


def test_redis_round_trip_through_redis_url():
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = f"tasweb:test:{uuid.uuid4()}"
    try:
        assert client.set(key, "value", ex=60)
        assert client.get(key) == b"value"
    finally:
        client.delete(key)
    assert client.get(key) is None


def test_cache_uses_redis():
    assert settings.CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    key = f"tasweb:test:{uuid.uuid4()}"
    cache.set(key, {"answer": 42}, timeout=60)
    try:
        assert cache.get(key) == {"answer": 42}
    finally:
        cache.delete(key)


@pytest.mark.django_db
def test_database_check_names_the_vendor():
    result = database_check()
    assert result.ok, result.detail
    assert result.detail == connection.vendor


def test_broker_check_reaches_redis():
    result = broker_check()
    assert result.ok, result.detail
    assert result.detail == "redis"


def test_heartbeat_is_read_back_as_written():
    moment = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert heartbeat_record(at=moment) == moment
    assert heartbeat_last() == moment
