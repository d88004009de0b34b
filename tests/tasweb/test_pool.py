"""The prefork pool's result reader keeps a result it has half read when the event loop is
reset (as Celery resets it on a lost broker connection), instead of reading on from the
middle of the message (tasweb/pool.py)."""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
from collections.abc import Iterator

from celery.concurrency import asynpool

import tasweb.celery  # noqa: F401  (installs the fix, as every worker does)


class Hub:
    """The two calls of kombu's hub the reader makes, and what they registered."""

    def __init__(self) -> None:
        self.readers: dict[int, object] = {}

    def add_reader(self, fd, callback, *args):
        self.readers[fd] = (callback, args)

    def remove_reader(self, fd):
        self.readers.pop(fd, None)

    def fire(self, fd) -> None:
        callback, args = self.readers[fd]
        if hasattr(callback, "__next__"):
            with contextlib.suppress(StopIteration):
                next(callback)
        else:
            callback(*args)


def handler(fd: int, received: list) -> asynpool.ResultHandler:
    h = asynpool.ResultHandler.__new__(asynpool.ResultHandler)
    h.fileno_to_outq = {fd: object()}
    h.on_state_change = received.append
    return h


def framed(obj: object) -> bytes:
    """A result as a child writes it to its pipe: its length, then its pickle."""
    body = pickle.dumps(obj)
    return struct.pack(">i", len(body)) + body


@contextlib.contextmanager
def result_pipe() -> Iterator[tuple[int, int, list, asynpool.ResultHandler]]:
    """A child's result pipe (read end non-blocking, as the pool has it), and a reader of it
    with the results it received."""
    read_end, write_end = os.pipe()
    try:
        os.set_blocking(read_end, False)
        received: list = []
        yield read_end, write_end, received, handler(read_end, received)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_result_half_read_before_a_reset_is_read_whole_after_it():
    with result_pipe() as (read_end, write_end, received, result):
        message = framed(("done", "x" * 1000))
        hub = Hub()
        result.register_with_event_loop(hub)
        os.write(write_end, message[:300])  # the child's write arrives in two pieces
        result.handle_event(read_end)
        assert received == []

        hub.readers.clear()  # the loop is reset: what it had registered is gone; the pool registers again
        result.register_with_event_loop(hub)
        os.write(write_end, message[300:])
        result.handle_event(read_end)
        assert received == [("done", "x" * 1000)]

        # the next result starts a read of its own
        os.write(write_end, message)
        hub.fire(read_end)
        assert received == [("done", "x" * 1000)] * 2


def test_without_the_fix_the_reset_loses_the_half_read_result():
    with result_pipe() as (read_end, write_end, received, result):
        message = framed("done")
        hub = Hub()
        result.handle_event = pool_original(result, hub)
        os.write(write_end, message[:6])
        result.handle_event(read_end)
        hub.readers.clear()
        result.handle_event = pool_original(result, hub)
        os.write(write_end, message[6:])
        try:
            result.handle_event(read_end)
        except Exception as exc:  # what Celery's own reader meets: the middle of a message
            failed = exc
        else:
            failed = None
        assert failed is not None or received != ["done"]


def pool_original(result, hub):
    from tasweb import pool

    return pool.CELERY_READER(result, hub)
