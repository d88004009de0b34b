"""Every Celery task's time limit (TAS_TASK_TIME_LIMIT), kept by the process that runs it."""

from __future__ import annotations

import signal
import time
from types import SimpleNamespace

import pytest

from tasweb.core.deadline import DeadlineExceeded, deadline
from tasweb.simulator import tasks as simulator_tasks
from tasweb.sources.tasks import MAX_WINDOW_SECONDS, mirror_window


def timer_left() -> float:
    return signal.getitimer(signal.ITIMER_REAL)[0]


@pytest.fixture
def tick_runs(monkeypatch: pytest.MonkeyPatch):
    """The simulator's tick task with its work replaced by `tick_runs[0]` (a callable)."""
    work: list = [lambda: None]
    monkeypatch.setattr(simulator_tasks, "simulator_tick", lambda: work[0]() or SimpleNamespace(writes=0))
    monkeypatch.setattr(simulator_tasks, "request_pass", lambda: None)
    return work


def test_a_task_past_its_limit_is_stopped_where_it_is_and_leaves_no_timer(settings, tick_runs):
    settings.TAS_TASK_TIME_LIMIT = 1
    tick_runs[0] = lambda: time.sleep(10)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as stopped:
        simulator_tasks.tick()
    assert time.monotonic() - started < 3
    assert str(stopped.value) \
        == "the task tasweb.simulator.tasks.tick ran past its time limit of 1 s (TAS_TASK_TIME_LIMIT)"
    assert timer_left() == 0
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)


def test_a_task_runs_under_its_limit_and_without_one_at_zero(settings, tick_runs):
    seen: list[float] = []
    tick_runs[0] = lambda: seen.append(timer_left())
    settings.TAS_TASK_TIME_LIMIT = 100
    simulator_tasks.tick()
    settings.TAS_TASK_TIME_LIMIT = 0
    simulator_tasks.tick()
    assert 99 < seen[0] <= 100
    assert seen[1] == 0
    assert timer_left() == 0


def test_a_shorter_limit_within_a_task_fires_first_and_the_task_keeps_its_own(settings, tick_runs):
    settings.TAS_TASK_TIME_LIMIT = 100
    seen: list[float] = []

    def work() -> None:
        with pytest.raises(DeadlineExceeded, match="the pass"), deadline(0.2, "the pass"):
            time.sleep(5)
        seen.append(timer_left())
    tick_runs[0] = work
    simulator_tasks.tick()
    assert 98 < seen[0] < 100


@pytest.mark.parametrize(("requested", "limit", "window"), [
    (300, 1500, 300),  # the default
    (None, 1500, 300),  # TAS_MIRROR_WINDOW_SECONDS
    (5000, 1500, MAX_WINDOW_SECONDS),
    (5000, 0, MAX_WINDOW_SECONDS),  # no task limit
    (300, 200, 140),  # a minute before the limit
    (300, 60, 30),  # half a short limit
])
def test_a_mirror_run_ends_before_the_task_limit(settings, requested, limit, window):
    settings.TAS_MIRROR_WINDOW_SECONDS = 300
    settings.TAS_TASK_TIME_LIMIT = limit
    assert mirror_window(requested) == window
