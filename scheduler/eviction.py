"""What every eviction writes, whichever path evicts: preemption, node failure, a PodsReady
timeout, deactivation, a stopped queue, an admission check (Kueue's workload.Evict).

An evicted workload keeps its quota until its pods are gone; what frees it is the workload
leaving the cache, not the eviction.
"""

from __future__ import annotations

from datetime import datetime

from scheduler.model import AdmissionCheckState, Condition, Workload
from scheduler.results import WORKLOAD_EVICTED, Decision, Event, PassResult

EVICTED = "Evicted"
DUE_TO = "DueTo"


def is_evicted(wl: Workload) -> bool:
    return wl.condition_true(EVICTED)


def set_condition(wl: Workload, condition: Condition) -> None:
    """Put `condition` in place of the workload's condition of the same type, last."""
    wl.conditions = [c for c in wl.conditions if c.type != condition.type] + [condition]


def evict(wl: Workload, reason: str, message: str, now: datetime) -> None:
    """The Evicted condition, and each admission check not Pending reset to Pending
    (resetChecksOnEviction; one in Retry counts one more retry), so that its controller checks
    the workload again before it is admitted again."""
    set_condition(wl, Condition(EVICTED, "True", reason, message, now))
    wl.admission_checks = [c if c.state == "Pending" else AdmissionCheckState(
        c.name, "Pending", f"Reset to Pending after eviction. Previously: {c.state}", (),
        (c.retry_count or 0) + 1 if c.state == "Retry" else None, c.requeue_after_seconds, now)
        for c in wl.admission_checks]


def evict_and_record(wl: Workload, reason: str, message: str, now: datetime, result: PassResult, *,
                     trigger: str | None = None, node: str = "") -> None:
    """`evict`, with Kueue's event (EvictedDueTo<reason>) and the pass's decision, whose trigger
    is the reason unless given."""
    evict(wl, reason, message, now)
    result.events.append(Event(wl.key, "Normal", f"Evicted{DUE_TO}{reason}", message))
    result.decisions.append(Decision(wl.key, WORKLOAD_EVICTED, node, reason if trigger is None else trigger, message))
