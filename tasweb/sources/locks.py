"""Locks held in the shared cache (Redis when REDIS_URL is set), each with an expiry.

A worker that dies without releasing its lock blocks the others for at most `ttl`
seconds; a live holder renews it well before then. Keys name the database the mirror
writes to, so deployments (or test runs) sharing one Redis do not block each other.
"""

from __future__ import annotations

import uuid

from django.core.cache import cache
from django.db import connection

KEY_PREFIX = "tasweb:sources:lock:"


def lock_key(name: str) -> str:
    db = connection.settings_dict
    where = f"{db.get('HOST') or ''}:{db.get('PORT') or ''}/{db.get('NAME')}"
    return f"{KEY_PREFIX}{where}:{name}"


class CacheLock:
    def __init__(self, name: str, *, ttl: float) -> None:
        self.name = name
        self.key = lock_key(name)
        self.ttl = max(1, round(ttl))
        self.token = uuid.uuid4().hex

    def acquire(self) -> bool:
        """Take the lock if nobody holds it (an atomic add)."""
        return bool(cache.add(self.key, self.token, timeout=self.ttl))

    def held(self) -> bool:
        return cache.get(self.key) == self.token

    def renew(self) -> bool:
        """Extend the expiry; False when the lock was lost (it expired and someone else took it)."""
        if not self.held():
            return False
        return bool(cache.touch(self.key, timeout=self.ttl))

    def release(self) -> None:
        if self.held():
            cache.delete(self.key)


def lock_holder(name: str) -> str | None:
    """The token of whoever holds the lock `name`, None when it is free."""
    return cache.get(lock_key(name))
