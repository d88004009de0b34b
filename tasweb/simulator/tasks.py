"""Celery tasks of the simulator. Thin: each calls services and returns."""

from __future__ import annotations

from celery import shared_task

from tasweb.scheduling.services import request_pass
from tasweb.simulator.services import simulator_tick


@shared_task(ignore_result=True)
def tick() -> None:
    """One step of the simulated cluster. Like any cluster source after a change, it asks
    the scheduler for a pass (run by the leader shortly after, one for a burst of changes);
    a tick that wrote nothing asks for none (time alone is the beat's passes' to follow).

    A redelivered tick only advances the simulation once more; ticks never interleave
    (each locks the simulator's state row).
    """
    if simulator_tick().writes:
        request_pass()
