"""Fixtures for every test."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def fresh_scheduler_runtime() -> Iterator[None]:
    """The scheduler process keeps its engine state between passes (tasweb.scheduling.runtime);
    in the test process each test starts without one, as its database starts anew."""
    try:
        from tasweb.scheduling.runtime import runtime_discard
    except Exception:  # the engine's own tests run without Django settings being usable
        yield
        return
    runtime_discard("a new test")
    yield
    runtime_discard("the test ended")
    gc.unfreeze()  # what a pass left out of garbage collections is the next test's garbage
