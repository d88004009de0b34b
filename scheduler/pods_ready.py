"""Kueue's waitForPodsReady, as far as it decides admission and requeueing.

* **Blocked admission** (`blockAdmission: true`): while any workload holding quota lacks
  `PodsReady=True`, a head that would be admitted is not: it gets `QuotaReserved=False`,
  reason `Waiting`, and no workload is admitted until the pods are ready (Kueue's scheduler
  waits at that point; a pass stops admitting there and the head is first again next pass).
* **Timeout**: an admitted workload whose pods are not ready `timeout` after its admission
  (or `recoveryTimeout` after its pods stopped being ready) is evicted, reason
  `PodsReadyTimeout`, and may queue again only after a backoff of
  `backoffBaseSeconds * 2^(n-1)` (at most `backoffMaxSeconds`), n being its requeue count;
  past `backoffLimitCount` requeues it is deactivated instead.
* **Queue order**: a workload evicted for the timeout queues by the time of its eviction
  (`requeuingStrategy.timestamp: Eviction`, the default) or by its creation (`Creation`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from scheduler.clock import later
from scheduler.config import CREATION, WaitForPodsReady
from scheduler.eviction import EVICTED, evict_and_record, is_evicted, set_condition
from scheduler.model import Condition, Workload
from scheduler.results import PassResult

PODS_READY = "PodsReady"
PODS_READY_TIMEOUT = "PodsReadyTimeout"
WAIT_FOR_RECOVERY = "WaitForRecovery"
WAITING_REASON = "Waiting"
WAITING_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
DEACTIVATED_BY_LIMIT = "DeactivatedDueToRequeuingLimitExceeded"
DEACTIVATION_TARGET_MESSAGE = "exceeding the maximum number of re-queuing retries"
DEACTIVATED_MESSAGE = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"


def pods_ready(wl: Workload) -> bool:
    return wl.condition_true(PODS_READY)


def not_ready(wl: Workload) -> bool:
    """A workload holding quota whose pods have not all been ready (Kueue's WorkloadsNotReady)."""
    return not wl.is_finished and not pods_ready(wl)


def any_not_ready(holders: Iterable[Workload]) -> bool:
    return any(not_ready(wl) for wl in holders)


def timeout_deadline(wl: Workload, config: WaitForPodsReady) -> datetime | None:
    """When an admitted workload whose pods are not ready is evicted; None when it is not
    counting towards a timeout (not admitted, ready, evicted, inactive)."""
    if not wl.is_admitted or not wl.active or wl.is_finished or is_evicted(wl) or pods_ready(wl):
        return None
    ready = wl.condition(PODS_READY)
    if ready is not None and ready.reason == WAIT_FOR_RECOVERY:
        recovery = config.recovery_timeout_seconds
        if recovery is None:
            recovery = config.timeout_seconds
        if recovery <= 0 or ready.last_transition_time is None:
            return None
        return later(ready.last_transition_time, recovery)
    admitted = wl.condition("Admitted")
    since = admitted.last_transition_time if admitted is not None else None
    if since is None:
        return None
    return later(since, config.timeout_seconds)


def backoff(count: int, config: WaitForPodsReady) -> timedelta:
    """The wait before the `count`-th requeue: base * 2^(count-1), at most the maximum."""
    strategy = config.requeuing_strategy
    seconds = strategy.backoff_base_seconds * 2 ** min(max(count - 1, 0), 62)
    return timedelta(seconds=min(seconds, strategy.backoff_max_seconds))


def time_out(wl: Workload, config: WaitForPodsReady, now: datetime, result: PassResult) -> None:
    """Evict `wl` for its PodsReady timeout, with its requeue backoff; or deactivate it when it
    used up its requeues (Kueue's workload controller)."""
    message = f"Exceeded the PodsReady timeout {wl.key}"
    limit = config.requeuing_strategy.backoff_limit_count
    if limit is not None and wl.requeue_count + 1 > limit:
        set_condition(wl, Condition("DeactivationTarget", "True", REQUEUING_LIMIT_EXCEEDED,
                                    DEACTIVATION_TARGET_MESSAGE, now))
        evict_and_record(wl, DEACTIVATED_BY_LIMIT, DEACTIVATED_MESSAGE, now, result,
                         trigger=REQUEUING_LIMIT_EXCEEDED)
        wl.active = False
        wl.requeue_count, wl.requeue_at = 0, None
        return
    wl.requeue_count += 1
    # Kueue's SetRequeueState: requeueAt is shared with the admission checks' delays (KEP-3258),
    # so a later one already set is kept
    at = later(now, backoff(wl.requeue_count, config))
    wl.requeue_at = at if wl.requeue_at is None or wl.requeue_at < at else wl.requeue_at
    evict_and_record(wl, PODS_READY_TIMEOUT, message, now, result)
    set_condition(wl, Condition("Requeued", "False", PODS_READY_TIMEOUT, message, now))


def deactivate(wl: Workload, now: datetime, result: PassResult) -> None:
    """Kueue's workload controller on a deactivated workload (spec.active false): Evicted, reason
    Deactivated (DeactivatedDueTo<its DeactivationTarget's reason>, which it replaces), its
    requeue state cleared; a workload holding quota keeps it until its pods are gone, and the
    eviction is recorded."""
    target = wl.condition("DeactivationTarget")
    if target is not None and target.status == "True":
        reason, message = f"DeactivatedDueTo{target.reason}", f"The workload is deactivated due to {target.message}"
        wl.conditions = [c for c in wl.conditions if c.type != "DeactivationTarget"]
    else:
        reason, message = "Deactivated", "The workload is deactivated"
    wl.requeue_count, wl.requeue_at = 0, None
    if not wl.has_quota_reservation:
        set_condition(wl, Condition(EVICTED, "True", reason, message, now))
    else:
        evict_and_record(wl, reason, message, now, result)


def queue_order_time(wl: Workload, config: WaitForPodsReady | None) -> datetime | None:
    """Kueue's queue-order timestamp when it is not the creation time: the eviction for a
    PodsReady timeout (unless the strategy says Creation) or by an admission check."""
    evicted = wl.condition(EVICTED)
    if evicted is None or evicted.status != "True" or evicted.last_transition_time is None:
        return None
    if evicted.reason == PODS_READY_TIMEOUT:
        if config is not None and config.requeuing_strategy.timestamp == CREATION:
            return None
        return evicted.last_transition_time
    if evicted.reason == "AdmissionCheck":
        return evicted.last_transition_time
    return None
