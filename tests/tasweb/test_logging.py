"""What the worker's and beat's logs show: what the service did, not Celery's bookkeeping for
every task."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest
from celery.app.trace import LOG_FAILURE, LOG_RECEIVED, LOG_RETRY, LOG_SUCCESS

from tasweb.celery import app as celery_app

from .conftest import PROJECT_ROOT, clean_env, run_python

TASK = {"name": "tasweb.simulator.tasks.tick", "id": "0f3c", "runtime": 0.01, "return_value": None,
        "description": "raised unexpected", "exc": "OperationalError('database is locked')"}


@pytest.fixture
def worker_logging(caplog):
    """Logging as `celery worker --loglevel INFO` leaves it: Django's LOGGING, then Celery's own setup."""
    already_setup = celery_app.log.already_setup
    celery_app.log.already_setup = False
    celery_app.log.setup(loglevel="INFO")
    caplog.set_level(logging.INFO)
    yield caplog
    celery_app.log.already_setup = already_setup


def test_per_task_lines_are_below_info_and_errors_and_retries_are_not(worker_logging):
    strategy, trace = logging.getLogger("celery.worker.strategy"), logging.getLogger("celery.app.trace")

    strategy.info(LOG_RECEIVED, TASK)
    trace.info(LOG_SUCCESS, TASK)
    logging.getLogger("celery.beat").info("Scheduler: Sending due task %s (%s)", "simulator-tick", TASK["name"])
    assert worker_logging.records == []

    trace.info(LOG_RETRY, TASK)
    trace.error(LOG_FAILURE, TASK)
    assert [(r.levelname, r.getMessage()) for r in worker_logging.records] == [
        ("INFO", "Task tasweb.simulator.tasks.tick[0f3c] retry: OperationalError('database is locked')"),
        ("ERROR", "Task tasweb.simulator.tasks.tick[0f3c] raised unexpected: OperationalError('database is locked')"),
    ]


def test_per_task_lines_show_at_debug(worker_logging):
    worker_logging.set_level(logging.DEBUG)
    logging.getLogger("celery.app.trace").info(LOG_SUCCESS, TASK)
    assert [r.levelname for r in worker_logging.records] == ["DEBUG"]


SEND_PING = """
import django
django.setup()
from tasweb.core.tasks import ping
print(ping.delay().get(timeout=60))
"""


@pytest.mark.parametrize("log_levels", ["", "celery.app.trace=DEBUG"])
def test_the_embedded_worker_logs_no_task_chatter_and_no_hostname_warning(tmp_path, log_levels):
    """The worker of `make run` (embedded default: filesystem broker) answering one task, and
    the process that sends it (as the web server does). TAS_LOG_LEVELS brings back the lines
    of the one logger it names (the stack benchmark reads the "succeeded in" ones)."""
    env = clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings", TAS_VAR_DIR=str(tmp_path / "var"),
                    TAS_LOG_LEVELS=log_levels)
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tasweb", "worker", "--pool", "solo", "--loglevel", "INFO",
         "--without-mingle", "--without-gossip", "--hostname", "logs@%h"],
        cwd=PROJECT_ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        sender = run_python(SEND_PING, env=env)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    out = log.read_text()

    assert sender.returncode == 0, sender.stderr[-3000:]
    assert sender.stdout.strip() == "pong"
    assert "tasweb.core.tasks.ping" in out  # the task list of the banner: the log was read
    assert "] received" not in out
    assert ("tasweb.core.tasks.ping[" in out and "] succeeded in " in out) == bool(log_levels), out[-3000:]
    for output in (out, sender.stdout + sender.stderr):
        assert "No hostname was supplied" not in output


def test_the_broker_url_of_the_embedded_default_names_a_host(tmp_path):
    proc = run_python(
        "import django; django.setup(); from kombu import Connection; from django.conf import settings;"
        " print(Connection(settings.CELERY_BROKER_URL).hostname)",
        env=clean_env(DJANGO_SETTINGS_MODULE="tasweb.settings", TAS_VAR_DIR=str(tmp_path / "var")),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "localhost"
    assert os.path.isdir(tmp_path / "var" / "broker" / "queue")
