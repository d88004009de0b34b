"""Writes of the core app."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.cache import cache

# The cache entry that carries the last heartbeat. Kept in the shared cache (Redis, or the
# file cache of the embedded default) so the web process sees what a worker wrote.
HEARTBEAT_CACHE_KEY = "tasweb:core:heartbeat"


def heartbeat_record(*, at: datetime | None = None) -> datetime:
    """Record that a worker ran the heartbeat task at `at` (default: now); returns the time stored."""
    moment = at or datetime.now(UTC)
    cache.set(HEARTBEAT_CACHE_KEY, moment.isoformat(), timeout=None)
    return moment
