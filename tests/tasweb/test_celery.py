"""Celery: a real worker executes the project's tasks through a real broker."""

from __future__ import annotations

import json
import time

import pytest
from celery.worker import WorkController
from django.conf import settings

from tasweb.celery import app as celery_app
from tasweb.core.selectors import heartbeat_last
from tasweb.core.tasks import heartbeat, ping

from .conftest import clean_env, run_python

pytestmark = pytest.mark.services


def test_test_settings_use_redis_for_broker_and_results():
    assert celery_app.conf.broker_url == settings.REDIS_URL
    assert celery_app.conf.result_backend == settings.REDIS_URL
    assert settings.REDIS_URL.startswith("redis://")


def test_reliability_options_are_applied():
    conf = celery_app.conf
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.task_serializer == "json"
    assert conf.accept_content == ["json"]


def test_worker_executes_ping(running_worker: WorkController):
    result = ping.delay()

    assert result.get(timeout=20) == "pong"
    assert result.successful()


def test_worker_records_the_heartbeat(running_worker: WorkController):
    before = heartbeat_last()
    heartbeat.delay()

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        last = heartbeat_last()
        if last is not None and last != before:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the worker did not record a heartbeat within 20 s")


def test_beat_schedule_names_registered_tasks():
    from tasweb.settings import base

    for name, entry in base.CELERY_BEAT_SCHEDULE.items():
        assert entry["task"] in celery_app.tasks, f"beat entry {name!r} names an unknown task"


EMBEDDED_WORKER = r"""
import json, os
import django
django.setup()
from django.conf import settings
from celery.contrib.testing.worker import start_worker
from tasweb.celery import app
from tasweb.core.tasks import ping

with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
    answer = ping.delay().get(timeout=30)
print(json.dumps({
    "answer": answer,
    "broker": app.conf.broker_url,
    "backend": app.conf.result_backend,
    "database": settings.DATABASES["default"]["ENGINE"],
    "database_name": str(settings.DATABASES["default"]["NAME"]),
    "queue_dir": os.path.isdir(os.path.join(os.environ["TAS_VAR_DIR"], "broker", "queue")),
}))
"""


def test_embedded_default_runs_a_worker_without_any_service(tmp_path):
    """No DATABASE_URL, no REDIS_URL: SQLite, the filesystem broker and file results still work."""
    env = clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings", TAS_VAR_DIR=str(tmp_path / "var"))
    proc = run_python(EMBEDDED_WORKER, env=env)

    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["answer"] == "pong"
    assert report["broker"] == "filesystem://localhost/"
    assert report["backend"].startswith("file://")
    assert report["database"] == "django.db.backends.sqlite3"
    assert report["database_name"] == str(tmp_path / "var" / "db.sqlite3")
    assert report["queue_dir"] is True


def test_every_task_keeps_its_time_limit_itself_and_none_is_left_to_celery():
    # Celery's limits are kept by the prefork parent's event loop, which fires them late
    # after a broker outage (tasweb.core.deadline): none may be set, for the app or a task
    from tasweb.celery import LimitedTask

    celery_app.loader.import_default_modules()
    ours = {name: task for name, task in celery_app.tasks.items() if name.startswith("tasweb.")}
    assert {"tasweb.scheduling.tasks.run_pass", "tasweb.sources.tasks.mirror_kubernetes"} <= set(ours)
    for name, task in ours.items():
        assert isinstance(task, LimitedTask), name
        assert task.time_limit is None and task.soft_time_limit is None, name
    assert celery_app.conf.task_time_limit is None and celery_app.conf.task_soft_time_limit is None
    assert settings.TAS_TASK_TIME_LIMIT == 25 * 60
