"""A time limit kept by the process that does the work.

Celery's own task time limits are kept by the wrong process:

* the solo pool (the scheduler's worker, `make run`'s worker) ignores them altogether;
* the prefork pool's parent keeps them on its event loop, which stops while the worker
  reconnects to a lost broker. A task that ended during a broker outage is still "running"
  for the parent when the loop resumes, so its soft limit is raised in the idle child (the
  child exits) and its hard limit kills whatever the child does next, possibly mid-way
  through writing a result to the parent, which then dies with "Unrecoverable error".

`deadline` arms an interval timer in the process and thread that runs the work, measured
from when the work starts: when it runs out, `DeadlineExceeded` is raised there, at the next
Python instruction, as Celery's soft limit would be. Signals reach only the main thread, so
elsewhere (a web server's request thread) no limit is kept and the work runs to its end.
Every task has one (TAS_TASK_TIME_LIMIT, tasweb.celery.LimitedTask); a scheduling pass and a
start-time estimate keep a shorter one within it (TAS_SCHEDULER_PASS_TIME_LIMIT).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType


class DeadlineExceeded(Exception):
    """The work ran past its time limit and was stopped where it was."""


def _can_arm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deadline(seconds: float, what: str, *, setting: str = "") -> Iterator[bool]:
    """Raise DeadlineExceeded inside the block once it has run `seconds` (0 or less: no limit).
    Its message names `what` ran out, and `setting`, the setting that sets the limit.

    Yields whether the limit is kept. Nested in another deadline, the sooner one fires: an
    inner one that would end later changes nothing, and one that ends sooner gives the outer
    one back on exit with the time it had left (it fires at once if that ran out meanwhile).
    """
    if seconds <= 0 or not _can_arm():
        yield False
        return
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    if 0 < outer_left <= seconds:
        yield True  # the outer deadline comes first
        return
    started = time.monotonic()

    def expired(signum: int, frame: FrameType | None) -> None:
        where = f" ({setting})" if setting else ""
        raise DeadlineExceeded(f"{what} ran past its time limit of {seconds:g} s{where}")

    previous_handler = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield True
    finally:
        # ignored first: a timer running out now no longer raises in the caller's cleanup
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.setitimer(signal.ITIMER_REAL, 0)
        # None: a handler not set from Python; the default is what was there
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous_handler is None else previous_handler)
        if outer_left > 0:
            left = outer_left - (time.monotonic() - started)
            # a timer that ran out meanwhile fires now (setitimer needs a positive delay)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6))


__all__ = ["DeadlineExceeded", "deadline"]
