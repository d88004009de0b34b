"""Fixtures for the Django/Celery side: a real Celery worker on the test settings' broker."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery.contrib.testing.worker import start_worker
from celery.worker import WorkController

from tasweb.celery import app as celery_app

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def running_worker() -> Iterator[WorkController]:
    """A real worker thread consuming from the configured broker (Redis under the test settings)."""
    with start_worker(
        celery_app, pool="solo", concurrency=1, perform_ping_check=False, shutdown_timeout=10
    ) as worker:
        yield worker


def run_python(code: str, *, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter at the project root, so settings are read anew from `env`."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def clean_env(**overrides: str) -> dict[str, str]:
    """The current environment without the variables the settings read, plus `overrides`."""
    read_by_settings = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "TAS_VAR_DIR"}
    env = {k: v for k, v in os.environ.items() if k not in read_by_settings and not k.startswith("DJANGO_")}
    env.update(overrides)
    return env
