"""A workload holding a quota reservation that is not an admission yet, and what Kueue's
workload controller does with it.

Kueue admits a workload in two steps: the scheduler reserves its quota (`QuotaReserved`),
then the workload is `Admitted` once every admission check its ClusterQueue asks for is
Ready; with a ProvisioningRequest check, its TopologyAssignment is placed only then, by the
second pass. Between the two the workload waits for what no scheduling cycle decides: the
checks' controllers, the second pass, or its queues running again. `admission_wait` says
which, in the words of the objects (the checks' states and messages) and of Kueue's
controllers; `checks_satisfied` is when the workload controller admits it, `evict_by_checks`
what it does when a check asks to retry (evict) or rejects it (deactivate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from scheduler.cluster import ClusterState, has_failed_checks
from scheduler.eviction import DUE_TO, evict_and_record, set_condition
from scheduler.model import AdmissionCheckState, Condition, Workload
from scheduler.results import Event, PassResult
from scheduler.second_pass import DELAYED, READY, delayed_requests, failure_message, place_delayed, second_pass_blocked
from scheduler.stop_policy import withdrawn_reservation

RETRY, REJECTED = "Retry", "Rejected"
EVICTED_BY_CHECK = "AdmissionCheck"  # Kueue's WorkloadEvictedByAdmissionCheck
RETRY_MESSAGE = "At least one admission check is false"


@dataclass(slots=True)
class AdmissionWait:
    cluster_queue: str
    reserved_since: datetime | None
    # what it waits for: "admission-checks", "second-pass", "reservation-taken-back" or
    # "evicted-by-check" (a check in Retry or Rejected: Kueue's workload controller acts on it)
    step: str
    summary: str
    checks: list[AdmissionCheckState] = field(default_factory=list)
    delayed_pod_sets: list[str] = field(default_factory=list)  # PodSets whose topology waits

    def to_json(self) -> dict:
        return {
            "clusterQueue": self.cluster_queue,
            "reservedSince": self.reserved_since.isoformat() if self.reserved_since else None,
            "step": self.step,
            "summary": self.summary,
            "admissionChecks": [{"name": c.name, "state": c.state, "message": c.message, "retryCount": c.retry_count,
                                 "requeueAfterSeconds": c.requeue_after_seconds} for c in self.checks],
            "delayedPodSets": self.delayed_pod_sets,
        }


def admission_wait(state: ClusterState, wl: Workload) -> AdmissionWait | None:
    """What keeps a workload holding a quota reservation from being admitted; None when it holds
    none, or is admitted, finished or evicted already."""
    if not wl.has_quota_reservation or wl.is_admitted or wl.is_finished or wl.condition_true("Evicted"):
        return None
    cq = wl.admission.cluster_queue
    reserved = wl.condition("QuotaReserved")
    since = reserved.last_transition_time if reserved is not None else None
    checks = synced_checks(state, wl)
    delayed = [psa.name for psa in wl.admission.pod_set_assignments if psa.delayed_topology_request == DELAYED]
    wait = AdmissionWait(cq, since, "", "", checks, delayed)
    held = f"quota reserved in ClusterQueue {cq}"
    taken_back = withdrawn_reservation(state, wl)
    rejected = [c for c in checks if c.state == REJECTED]
    retry = [c for c in checks if c.state == RETRY]
    waiting = [c for c in checks if c.state not in (READY, RETRY, REJECTED)]
    if taken_back is not None:
        wait.step = "reservation-taken-back"
        wait.summary = (f"{held}, but {taken_back}: the next pass takes the reservation back, as Kueue's workload "
                        "controller does, and it waits in its queue again")
    elif rejected:
        wait.step = "evicted-by-check"
        wait.summary = (f"{held}, but admission check(s) {_listed(rejected)} rejected it: the next pass deactivates "
                        "it, as Kueue's workload controller does, and it is not queued again until it is activated")
    elif retry:
        wait.step = "evicted-by-check"
        wait.summary = (f"{held}, but admission check(s) {_listed(retry)} asked to retry: the next pass evicts it, "
                        "as Kueue's workload controller does; its quota is given back once its pods are gone, and "
                        "it is queued again")
    elif waiting:
        wait.step = "admission-checks"
        topology = (f"; then its TopologyAssignment is placed for PodSet(s) {', '.join(delayed)}" if delayed else "")
        wait.summary = (f"{held}; admitted once every admission check is Ready: waiting for {_listed(waiting)}"
                        f"{topology}")
    elif delayed:
        wait.step = "second-pass"
        wait.summary = (f"{held} and its admission checks are Ready; its TopologyAssignment for PodSet(s) "
                        f"{', '.join(delayed)} is placed by the second pass (retried after a backoff of 1 s, "
                        f"doubling up to 30 s, until it fits): {second_pass_outlook(state, wl)}")
    else:
        wait.step = "admission-checks"
        wait.summary = f"{held} and its admission checks are Ready: the next pass admits it"
    return wait


def second_pass_outlook(state: ClusterState, wl: Workload) -> str:
    """What the next second pass of a delayed topology would find, on the nodes as they are."""
    blocked = second_pass_blocked(state, wl)
    if blocked is not None:
        return f"not while {blocked}"
    if not state.gates.TopologyAwareScheduling:
        return "not while TopologyAwareScheduling is off"
    by_flavor = delayed_requests(state, wl, state.cluster_queues[wl.admission.cluster_queue])
    _, failure = place_delayed(state, by_flavor)
    if failure is not None:
        return f"it does not fit on the nodes as they are: {failure_message(failure)}"
    return "it fits on the nodes as they are, so its next second pass places it unless the room is taken first"


def synced_checks(state: ClusterState, wl: Workload) -> list[AdmissionCheckState]:
    """The admission checks of a reservation as Kueue's workload controller keeps its list: those
    its ClusterQueue asks for on the assigned flavors, in their listed state or Pending when not
    listed yet (listed ones it no longer asks for are dropped), by name; with the ClusterQueue
    gone, the list as it is."""
    listed = {c.name: c for c in wl.admission_checks}
    cq = state.cluster_queues.get(wl.admission.cluster_queue) if wl.admission is not None else None
    if cq is None:
        return [listed[name] for name in sorted(listed)]
    flavors = {f for psa in wl.admission.pod_set_assignments for f in psa.flavors.values()}
    required = sorted(state.checks_for_flavors(cq, flavors))
    return [listed.get(name) or AdmissionCheckState(name, "Pending") for name in required]


def checks_out_of_sync(state: ClusterState, wl: Workload) -> bool:
    """The reservation lists other admission checks than its ClusterQueue asks for on its flavors
    (a check missing, or one no longer asked for): Kueue's workload controller syncs the list,
    adding the missing ones Pending, so that their controllers act on them."""
    if not wl.has_quota_reservation or wl.is_admitted or wl.admission is None \
            or wl.admission.cluster_queue not in state.cluster_queues:
        return False
    return {c.name for c in wl.admission_checks} != {c.name for c in synced_checks(state, wl)}


def checks_satisfied(state: ClusterState, wl: Workload) -> bool:
    """Kueue's workload controller admits a reservation (SyncAdmittedCondition) once every
    admission check its ClusterQueue asks for is Ready, and no TopologyAssignment is still
    delayed (the second pass places those)."""
    if not wl.has_quota_reservation or wl.is_admitted or wl.is_finished or wl.condition_true("Evicted"):
        return False
    if any(psa.delayed_topology_request == DELAYED for psa in wl.admission.pod_set_assignments):
        return False
    return all(c.state == READY for c in synced_checks(state, wl))


def retry_time(wl: Workload) -> datetime | None:
    """KEP-3258: the latest time a check in Retry asks the workload to wait until (its
    lastTransitionTime plus its requeueAfterSeconds); None when no such check says one."""
    times = [c.last_transition_time + timedelta(seconds=c.requeue_after_seconds) for c in wl.admission_checks
             if c.state == RETRY and c.requeue_after_seconds is not None and c.last_transition_time is not None]
    return max(times, default=None)


def delayed_requeue(wl: Workload, now: datetime) -> datetime | None:
    """Kueue's NeedsRequeueAtUpdate: the requeueAt the workload controller sets (before it acts
    on the checks) when a check in Retry asks for a later retry than the workload's
    `requeueState.requeueAt` says; None when it is past, or no later than that."""
    at = retry_time(wl)
    if at is None or at <= now or (wl.requeue_at is not None and wl.requeue_at >= at):
        return None
    return at


def evicted_by_checks(wl: Workload) -> bool:
    """Kueue's workload controller evicts a workload holding a reservation (admitted or not) when
    one of its admission checks is Retry, and deactivates it when one is Rejected."""
    return (wl.has_quota_reservation and not wl.is_finished and not wl.condition_true("Evicted")
            and has_failed_checks(wl))


def evict_by_checks(wl: Workload, now: datetime, result: PassResult) -> None:
    """Kueue's reconcileCheckBasedEviction, then the eviction it leads to: a Rejected check makes
    the workload a deactivation target (it is deactivated and evicted, and not queued again); a
    Retry check evicts it, to be queued again. The checks are reset to Pending, as on every
    eviction (Kueue's resetChecksOnEviction: a Retry one counts one more retryCount, the others
    lose theirs, and their podSetUpdates go); the workload keeps its quota until its pods are
    gone."""
    rejected = [c for c in wl.admission_checks if c.state == REJECTED]
    if rejected:
        target = f"Admission check(s): {','.join(c.name for c in rejected)}, were rejected"
        result.events.append(Event(wl.key, "Warning", "AdmissionCheckRejected",
                                   f"Deactivating workload because AdmissionCheck for {rejected[0].name} was "
                                   f"Rejected: {rejected[0].message}"))
        set_condition(wl, Condition("DeactivationTarget", "True", EVICTED_BY_CHECK, target, now))
        reason = f"Deactivated{DUE_TO}{EVICTED_BY_CHECK}"
        message = f"The workload is deactivated due to {target}"
        trigger = "admission check rejected"
        wl.active = False
    else:
        reason, message, trigger = EVICTED_BY_CHECK, RETRY_MESSAGE, "admission check retry"
    evict_and_record(wl, reason, message, now, result, trigger=trigger)
    wl.unhealthy_nodes.clear()


def eviction_wait(wl: Workload) -> str | None:
    """What an evicted workload still holding its quota waits for (its pods stopping), and what
    comes after; None unless it is such a workload."""
    evicted = wl.condition("Evicted")
    if not wl.has_quota_reservation or wl.is_finished or evicted is None or evicted.status != "True":
        return None
    if not wl.active:
        then = "it is deactivated, and not queued again until it is activated (spec.active)"
    elif wl.requeue_at is not None:
        then = f"then it waits in its queue again, tried from {wl.requeue_at.isoformat()} (its requeue backoff)"
    else:
        then = "then it waits in its queue again"
    return f"evicted ({evicted.reason}: {evicted.message}): it holds its quota until its pods are gone; {then}"


def _listed(checks: list[AdmissionCheckState]) -> str:
    return ", ".join(f"{c.name} ({c.state}{': ' + c.message if c.message else ''})" for c in checks)
