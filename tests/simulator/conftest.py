"""Fixtures of the simulator tests: a controllable clock and ticks driven like the worker drives them."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from tasweb.scheduling.services import scheduling_pass_run
from tasweb.simulator.config import SimulatorSettings
from tasweb.simulator.services import TickReport, simulator_tick

START = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = START

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def quiet(**overrides: object) -> SimulatorSettings:
    """Default shape, nothing happening unless a test asks for it."""
    values = dict(initial_workloads=0, arrivals_per_minute=0, node_failures_per_minute=0, drains_per_minute=0)
    values.update(overrides)
    return SimulatorSettings().with_overrides(**values)


TickRunner = Callable[..., list[TickReport]]


@pytest.fixture
def run_ticks(clock: Clock) -> TickRunner:
    """Run ticks `tick_seconds` apart, each (by default) followed by a scheduling pass, as the
    worker does; random numbers come from Random(f"{seed}:{i}") for the i-th call's ticks."""
    calls = {"n": 0}

    def run(count: int, *, config: SimulatorSettings, scheduler: bool = True, seed: int = 7,
            until: Callable[[], bool] | None = None) -> list[TickReport]:
        reports = []
        for _ in range(count):
            clock.advance(config.tick_seconds)
            rng = random.Random(f"{seed}:{calls['n']}")
            calls["n"] += 1
            reports.append(simulator_tick(now=clock.now, rng=rng, config=config))
            if scheduler:
                scheduling_pass_run(now=clock.now)
            if until is not None and until():
                break
        return reports

    return run
