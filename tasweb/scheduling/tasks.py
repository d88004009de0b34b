"""Celery tasks of the scheduling app. Thin: each calls one service and returns.

Neither sets Celery time limits: a prefork pool's parent keeps them on an event loop that
stops while the broker is away, and then signals children for tasks they finished long ago
(tasweb.core.deadline); the solo pool ignores them. The work keeps its own limit instead.

`run_pass` is acknowledged late and rejected back to the queue when its worker dies, so a
pass killed mid-way runs again; it is safe to run any number of times (a pass over an
unchanged mirror decides nothing new, and only the lock holder runs one at all).
"""

from __future__ import annotations

import kombu.exceptions
import redis.exceptions
from celery import shared_task
from django import db

from tasweb.scheduling.estimates import estimate_after_pass
from tasweb.scheduling.leader import LeadershipLost
from tasweb.scheduling.models import SchedulingPass
from tasweb.scheduling.services import leader_pass_run

# Errors that pass by themselves: the database or Redis restarting or unreachable for a
# moment, the lock lost to another leader. Anything else is a bug and is not retried.
TRANSIENT_ERRORS = (
    db.OperationalError,
    db.InterfaceError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    kombu.exceptions.OperationalError,
    LeadershipLost,
)


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=1,
    # under the broker's visibility timeout: a retry's countdown is held unacknowledged
    retry_backoff_max=20,
    retry_jitter=True,
    max_retries=10,
    # no pool time limits: the pass keeps its own (services.pass_deadline, tasweb.core.deadline)
)
def run_pass(trigger: str = SchedulingPass.Trigger.CHANGE) -> dict[str, object]:
    """One scheduling pass (node failures, admission cycle, second pass, ungating) if this
    worker is, or becomes, the scheduler's leader."""
    result = leader_pass_run(trigger=trigger)
    record = result.scheduling_pass
    return {"outcome": result.outcome, "trigger": trigger, "pass": record.id if record else None}


@shared_task(
    ignore_result=True,
    # never redelivered: the next pass queues a fresh one
    acks_late=False,
)
def estimate_start_times() -> str:
    """Predicted start times of the waiting workloads, on the engine state the last pass of
    this worker committed (tasweb.scheduling.estimates); queued after each pass."""
    return estimate_after_pass()
