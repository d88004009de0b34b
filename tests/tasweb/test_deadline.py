"""tasweb.core.deadline: a time limit kept by the process that does the work."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from tasweb.core.deadline import DeadlineExceeded, deadline


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.fixture(autouse=True)
def no_timer_left():
    yield
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)


def test_work_past_the_limit_is_stopped_where_it_is():
    reached = []
    started = time.monotonic()
    with (pytest.raises(DeadlineExceeded, match=r"the test work ran past its time limit of 0\.2 s"),
          deadline(0.2, "the test work") as kept):
        assert kept
        spin(5)
        reached.append("end")  # never: the limit stops the loop
    assert reached == []
    assert 0.2 <= time.monotonic() - started < 1.5


def test_a_blocking_sleep_is_interrupted_too():
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded), deadline(0.2, "sleep"):
        time.sleep(5)
    assert time.monotonic() - started < 1.5


def test_work_within_the_limit_ends_normally_and_leaves_no_timer():
    with deadline(5, "quick work") as kept:
        spin(0.05)
    assert kept
    time.sleep(0.1)  # nothing fires later


def test_no_limit_for_zero_or_less():
    for seconds in (0, -1):
        with deadline(seconds, "unlimited") as kept:
            spin(0.01)
        assert not kept


def test_outside_the_main_thread_no_limit_is_kept():
    outcome: list[object] = []

    def work() -> None:
        try:
            with deadline(0.05, "threaded") as kept:
                time.sleep(0.2)
            outcome.append(kept)
        except BaseException as exc:  # recorded for the assertion below
            outcome.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert outcome == [False]


def test_an_inner_deadline_gives_the_outer_one_back_with_what_it_had_left():
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="outer"), deadline(0.5, "outer"):
        with deadline(5, "inner"):
            spin(0.2)
        assert 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 0.31
        spin(5)
    assert 0.5 <= time.monotonic() - started < 1.5


def test_an_inner_deadline_never_outlasts_the_outer_one():
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="outer"), deadline(0.2, "outer"):
        with deadline(5, "inner") as kept:
            assert kept
            spin(5)
        pytest.fail("the inner block outlived the outer deadline")
    assert time.monotonic() - started < 1.5


def test_a_handler_set_before_is_put_back():
    calls = []

    def previous(signum, frame):
        calls.append(signum)

    signal.signal(signal.SIGALRM, previous)
    try:
        with deadline(5, "work"):
            pass
        assert signal.getsignal(signal.SIGALRM) is previous
        signal.raise_signal(signal.SIGALRM)
        assert calls == [signal.SIGALRM]
    finally:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
