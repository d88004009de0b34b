"""Fixtures for every test."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def fresh_scheduler_runtime() -> Iterator[None]:
    """The scheduler process keeps its engine state between passes (tasweb.scheduling.runtime);
    in the test process each test starts without one, as its database starts anew."""
    try:
        from tasweb.scheduling.estimates import estimate_cost_forget, estimate_source_set
        from tasweb.scheduling.runtime import runtime_discard
    except Exception:  # the engine's own tests run without Django settings being usable
        yield
        return
    runtime_discard("a new test")
    estimate_source_set(None)
    with contextlib.suppress(Exception):  # some tests stop Redis on purpose
        estimate_cost_forget()  # what the last test's plays took must not plan this test's estimate
    yield
    runtime_discard("the test ended")
    estimate_source_set(None)
    gc.unfreeze()  # what a pass left out of garbage collections is the next test's garbage


@pytest.fixture(autouse=True)
def root_log_level_kept() -> Iterator[None]:
    """A test's Celery worker (`start_worker`) sets up logging with the root logger at ERROR:
    the next test's warnings would reach no handler, `caplog` included."""
    root = logging.getLogger()
    level = root.level
    yield
    root.setLevel(level)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for every browser test of the session. Playwright's sync API
    keeps an event loop on the main thread while the browser runs, so a second one cannot
    start beside it; and Django refuses database calls from a thread with a running loop:
    the tests' calls are plain synchronous ones, so they are allowed for the session."""
    from tests.dashboard.browser import chromium

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with chromium() as b:
        yield b
