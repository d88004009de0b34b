"""Celery's prefork pool, with one fault fixed: a task result half read when the broker
connection drops.

The worker's parent reads each result its pool children write to their pipes with a
coroutine: a 4-byte size, then the pickled body. When a result arrives in more than one
piece, the coroutine that has read the first piece is registered with the event loop until
the rest comes. Celery 5.7.0 resets the event loop when the broker connection is lost
(`asynloop` calls `hub.reset()`), which drops that coroutine with the bytes it read; after
the reconnect, reading starts again in the middle of the message. The bytes read as a size are
wrong, the body does not unpickle ("invalid load key"), and the worker exits with
"Unrecoverable error". It happens whenever a child finishes a task as the connection drops,
e.g. a task that fails on the outage itself.

Here a read in progress is kept per pipe, outside the event loop: the next time the pipe is
readable, the read that was interrupted goes on instead of a new one starting.

Installed by `tasweb.celery` (every worker imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from celery.concurrency import asynpool

# Celery's own reader, as it was before `install`
CELERY_READER = asynpool.ResultHandler._make_process_result


def _make_process_result(self: asynpool.ResultHandler, hub: Any) -> Callable[[int], None]:
    """`ResultHandler._make_process_result`, keeping the reads in progress across loop resets."""
    fileno_to_outq = self.fileno_to_outq
    add_reader, remove_reader = hub.add_reader, hub.remove_reader
    # pipe -> (the child's queue it belongs to, the read in progress); kept on the handler,
    # which outlives the event loop's resets
    reading: dict[int, tuple[object, Generator]] = self.__dict__.setdefault("_reads_in_progress", {})

    def on_result_readable(fileno: int) -> None:
        try:
            queue = fileno_to_outq[fileno]
        except KeyError:  # process gone
            reading.pop(fileno, None)
            return remove_reader(fileno)
        kept = reading.pop(fileno, None)
        if kept is not None and kept[0] is queue and kept[1].gi_frame is not None:
            it = kept[1]  # the read a reset of the loop interrupted goes on
        else:
            it = self._recv_message(add_reader, fileno, self.on_state_change)
        try:
            next(it)
        except StopIteration:
            pass  # the message was read whole (and handed on)
        except (OSError, EOFError):
            remove_reader(fileno)
        else:
            # the loop drives it from here; kept here too, so that a reset does not lose it
            reading[fileno] = (queue, it)
            add_reader(fileno, it)

    return on_result_readable


def install() -> None:
    """Use the fixed result reader in every prefork pool of this process."""
    asynpool.ResultHandler._make_process_result = _make_process_result


__all__ = ["CELERY_READER", "install"]
