"""Stopped queues, as Kueue's workload controller treats their workloads:

* a ClusterQueue or LocalQueue whose `spec.stopPolicy` is HoldAndDrain has its admitted
  workloads evicted (reason ClusterQueueStopped or LocalQueueStopped);
* a workload holding a quota reservation that is not an admission yet (its admission checks are
  not all Ready) loses the reservation when its LocalQueue or ClusterQueue is stopped (Hold or
  HoldAndDrain), missing or deleted: QuotaReserved=False, reason Inadmissible;
* a stopped queue admits nothing, and its waiting workloads are inadmissible ("ClusterQueue X is
  inactive"): see `queue_status.waiting_block`, which `QueueManager.place` asks."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from scheduler.cluster import ClusterState
from scheduler.eviction import is_evicted
from scheduler.model import STOP_HOLD_AND_DRAIN, STOP_NONE, Condition, Workload
from scheduler.results import INADMISSIBLE

CLUSTER_QUEUE_STOPPED = ("ClusterQueueStopped", "The ClusterQueue is stopped")
LOCAL_QUEUE_STOPPED = ("LocalQueueStopped", "The LocalQueue is stopped")


def draining(state: ClusterState) -> tuple[set[str], set[str]]:
    """The ClusterQueues and the LocalQueues (namespace/name) being drained."""
    cqs = {name for name, cq in state.cluster_queues.items() if cq.stop_policy == STOP_HOLD_AND_DRAIN}
    lqs = {key for key, lq in state.local_queues.items() if lq.stop_policy == STOP_HOLD_AND_DRAIN}
    return cqs, lqs


def drain_reason(wl: Workload, cqs: set[str], lqs: set[str]) -> tuple[str, str] | None:
    """Why the admitted workload is evicted, its LocalQueue's stop policy first (as Kueue
    reconciles it); None when neither of its queues is being drained."""
    if wl.admission is None or not wl.is_admitted or is_evicted(wl):
        return None
    if wl.local_queue_key in lqs:
        return LOCAL_QUEUE_STOPPED
    if wl.admission.cluster_queue in cqs:
        return CLUSTER_QUEUE_STOPPED
    return None


def to_drain(state: ClusterState) -> list[tuple[Workload, tuple[str, str]]]:
    """The admitted workloads of the drained queues, with the reason of each, in the state's order."""
    cqs, lqs = draining(state)
    if not cqs and not lqs:
        return []
    candidates: Iterable[Workload] = (state.holders() if lqs
                                      else (wl for name in sorted(cqs) for wl in state.holders_in(name)))
    found = {wl.key: (wl, reason) for wl in candidates if (reason := drain_reason(wl, cqs, lqs)) is not None}
    return [found[wl.key] for wl in state.in_order(found)]


def withdrawn_reservation(state: ClusterState, wl: Workload) -> str | None:
    """The message Kueue's workload controller takes back the quota reservation of `wl` with, a
    reservation not yet an admission, when its LocalQueue (looked at first) or that
    LocalQueue's ClusterQueue is missing or stopped; None while both run or when `wl` holds no
    such reservation."""
    if wl.admission is None or wl.is_admitted or not wl.has_quota_reservation:
        return None
    lq = state.local_queues.get(wl.local_queue_key)
    if lq is None:
        return f"LocalQueue {wl.queue_name} is terminating or missing"
    if lq.stop_policy != STOP_NONE:
        return f"LocalQueue {wl.queue_name} is stopped"
    cq = state.cluster_queues.get(lq.cluster_queue)
    if cq is None or cq.terminating:
        return f"ClusterQueue {lq.cluster_queue} is terminating or missing"
    if cq.stop_policy != STOP_NONE:
        return f"ClusterQueue {cq.name} is stopped"
    return None


def to_withdraw(state: ClusterState) -> list[tuple[Workload, str]]:
    """The reservations waiting for admission checks that Kueue takes back, in the state's order."""
    workloads = state.workload_map
    found = {key: message for key in state.reserved_not_admitted
             if (message := withdrawn_reservation(state, workloads[key])) is not None}
    return [(wl, found[wl.key]) for wl in state.in_order(found)]  # only those taken back are sorted


def withdraw_reservation(wl: Workload, message: str, now: datetime) -> None:
    """Kueue's UnsetQuotaReservationWithCondition: no admission, QuotaReserved=False (reason
    Inadmissible); the Admitted condition, False already, stays as it is. Kueue emits no event."""
    wl.admission = None
    wl.conditions = [c for c in wl.conditions if c.type != "QuotaReserved"]
    wl.conditions.append(Condition("QuotaReserved", "False", INADMISSIBLE, message, now))
