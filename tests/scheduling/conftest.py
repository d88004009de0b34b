"""Fixtures of the scheduler's tests: a clean scheduler state in Redis, and real Celery
worker processes that are always stopped before the test database is flushed."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from tasweb.celery import app as celery_app
from tasweb.scheduling.leader import scheduler_key

from .support import WorkerProcess, redis_ensure_up


@pytest.fixture
def scheduler_state(transactional_db) -> Iterator[None]:
    """A clean slate in Redis for the scheduler: no lock, no pending change, no queued task.

    The test's rows are committed (transactional_db), so worker processes see them."""

    def clear() -> None:
        redis.Redis.from_url(settings.REDIS_URL).delete(scheduler_key("leader"))  # redis-py's own key
        suffixes = ("changed", "done", "scheduled", "eta-scheduled", "eta-done")
        cache.delete_many([scheduler_key(suffix) for suffix in suffixes])
        celery_app.control.purge()

    redis_ensure_up()
    clear()
    yield
    redis_ensure_up()
    clear()


@pytest.fixture
def workers(scheduler_state, tmp_path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker processes with `workers(name, ...)`; all are stopped after the test,
    before the test database is flushed."""
    started: list[WorkerProcess] = []

    def start(name: str, **kwargs) -> WorkerProcess:
        worker = WorkerProcess(name, tmp_path=tmp_path, **kwargs).start()
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.request_stop()
    for worker in started:
        worker.stop()
