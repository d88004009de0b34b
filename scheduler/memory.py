"""The cyclic garbage collector, paused where the engine makes many short-lived objects."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector within (reference counting still frees what dies).

    Building or scanning big lists, or playing the queue forward, allocates hundreds of
    thousands of short-lived objects and almost no cycles; the collector's repeated passes
    over the young ones cost a sixth to a half of the run time. Collections resume afterwards
    as usual (a caller that paused it already keeps it paused)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["gc_paused"]
