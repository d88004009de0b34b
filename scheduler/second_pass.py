"""The second pass: TAS for workloads whose topology waited for a ProvisioningRequest.

A workload admitted into a flavor with a ProvisioningRequest check reserves quota first,
with `delayedTopologyRequest: Pending` and no TopologyAssignment (the nodes it asked for do
not exist yet). Once its admission checks are Ready the nodes are there: its TAS PodSets
are placed, marked `Ready`, and the workload becomes Admitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from scheduler.cluster import FAILED_CHECKS, ClusterState, has_failed_checks
from scheduler.cycle import nomination_problem, preempt_target, seconds_since
from scheduler.flavorassigner import FlavorAssigner
from scheduler.model import WORKLOAD_ADMITTED, ClusterQueue, Condition, Workload
from scheduler.placement import PodSetPlacement, TASPodSetRequest, pod_set_updates_for
from scheduler.preemption import Preemptor
from scheduler.quota import FlavorResource
from scheduler.results import Event, PassResult, WorkloadResult
from scheduler.topology_assignment import find_topology_assignments_for_flavor

DELAYED, READY = "Pending", "Ready"


def awaiting_second_pass(wl: Workload) -> bool:
    """Kueue's needsSecondPassForDelayedAssignment: quota reserved, not admitted yet, a PodSet's
    topology delayed, and admission checks listed, all of them Ready."""
    if not wl.has_quota_reservation or wl.is_finished or wl.condition_true("Evicted") or wl.admission is None \
            or wl.is_admitted or not wl.admission_checks:
        return False
    if not any(psa.delayed_topology_request == DELAYED and psa.topology_assignment is None
               for psa in wl.admission.pod_set_assignments):
        return False
    return all(check.state == "Ready" for check in wl.admission_checks)


def second_pass_blocked(state: ClusterState, wl: Workload) -> str | None:
    """Why Kueue's nomination turns a workload needing a second pass (a delayed topology, an
    unhealthy node to replace) away before any placement is tried, in Kueue's order: an
    admission check in Retry or Rejected, its ClusterQueue inactive (stopped, missing what it
    names, or under a cycle of Cohorts) or gone, its namespace or resources no longer
    admissible. Such a workload keeps what it holds and waits for its next second pass; None
    when it may be placed."""
    if has_failed_checks(wl):
        return FAILED_CHECKS
    name = wl.admission.cluster_queue if wl.admission is not None else ""
    if name in state.inactive_cluster_queues:
        return f"ClusterQueue {name} is inactive"
    cq = state.cluster_queues.get(name)
    if cq is None:
        return f"ClusterQueue {name} not found"
    problem = nomination_problem(state, wl, cq)  # a cycle of Cohorts, the namespace, the resources
    return problem.message if problem is not None else None


def admit_reservation(wl: Workload, now: datetime) -> Event:
    """The Admitted condition and event Kueue writes when a reservation becomes an admission (its
    checks all Ready, its delayed topology placed)."""
    reserved = wl.condition("QuotaReserved")
    waited = seconds_since(reserved.last_transition_time if reserved else None, now)
    message = f"Admitted by ClusterQueue {wl.admission.cluster_queue}, wait time since reservation was {waited}"
    wl.conditions = [c for c in wl.conditions if c.type != "Admitted"]
    wl.conditions.append(Condition("Admitted", "True", "Admitted", WORKLOAD_ADMITTED, now))
    return Event(wl.key, "Normal", "Admitted", message)


def delayed_requests(state: ClusterState, wl: Workload, cq: ClusterQueue) -> dict[str, list[TASPodSetRequest]]:
    """The TAS requests of the workload's PodSets whose topology waits for the second pass, by
    flavor, with what its Ready checks add to them (podSetUpdates)."""
    assigner = FlavorAssigner(state, wl, cq)
    by_flavor: dict[str, list[TASPodSetRequest]] = {}
    for psa in wl.admission.pod_set_assignments:
        ps = wl.pod_set(psa.name)
        flavor = state.tas_flavor_of(psa)
        if psa.delayed_topology_request != DELAYED or ps is None or flavor is None:
            continue
        count = psa.count if psa.count is not None else ps.count
        by_flavor.setdefault(flavor, []).append(TASPodSetRequest(
            pod_set=ps, count=count, single_pod_requests=ps.spec.requests, flavor=flavor,
            implied=assigner.tas_implied(ps), **pod_set_updates_for(wl, ps)))
    return by_flavor


def place_delayed(state: ClusterState, by_flavor: dict[str, list[TASPodSetRequest]]
                  ) -> tuple[dict[str, PodSetPlacement], tuple[str, str] | None]:
    """The placements of the delayed PodSets on the nodes as they are, flavor by flavor; or
    (PodSet, reason) for the first that does not fit. Nothing is charged."""
    placed: dict[str, PodSetPlacement] = {}
    for flavor, requests in sorted(by_flavor.items()):
        results = find_topology_assignments_for_flavor(state.tas_snapshots[flavor], requests, gates=state.gates)
        failed = next((name for name, p in results.items() if p.failure), None)
        if failed is not None:
            return {}, (failed, results[failed].failure)
        placed.update(results)
    return placed, None


def failure_message(failure: tuple[str, str]) -> str:
    return f"couldn't assign flavors to pod set {failure[0]}: {failure[1]}"


class SecondPass:
    def __init__(self, state: ClusterState, now: datetime, result: PassResult) -> None:
        self.state = state
        self.now = now
        self.result = result
        self.admitted: set[str] = set()
        self.retry: set[str] = set()  # not placed yet, tried again after the second-pass backoff
        self.decided: dict[str, WorkloadResult] = {}  # the workloads preempted for a delayed topology

    def run(self, workloads: Iterable[Workload] | None = None) -> None:
        """Place the delayed TopologyAssignments of `workloads` (default: every workload)."""
        if not self.state.gates.TopologyAwareScheduling:
            return
        for wl in self.state.workloads if workloads is None else workloads:
            if awaiting_second_pass(wl):
                self.place(wl)

    def place(self, wl: Workload) -> None:
        blocked = second_pass_blocked(self.state, wl)
        if blocked is not None:
            self.fail(wl, blocked)
            return
        cq = self.state.cluster_queues[wl.admission.cluster_queue]
        by_flavor = delayed_requests(self.state, wl, cq)
        placed, failure = place_delayed(self.state, by_flavor)
        if failure is not None:
            self.preempt_for(wl, cq, by_flavor)
            self.fail(wl, failure_message(failure))
            return
        for psa in wl.admission.pod_set_assignments:
            if psa.name in placed:
                psa.topology_assignment = placed[psa.name].assignment
                psa.delayed_topology_request = READY
        if not wl.is_admitted:
            self.result.events.append(admit_reservation(wl, self.now))
        self.state.workload_changed(wl)  # charged with its placed TopologyAssignments
        self.admitted.add(wl.key)

    def fail(self, wl: Workload, message: str) -> None:
        """Kueue's requeue of a second-pass entry that was not placed: a SecondPassFailed event, and
        another try after the second-pass backoff."""
        self.result.events.append(Event(wl.key, "Warning", "SecondPassFailed", message))
        self.retry.add(wl.key)

    def preempt_for(self, wl: Workload, cq: ClusterQueue, by_flavor: dict[str, list[TASPodSetRequest]]) -> None:
        """As Kueue's cycle does for a second-pass entry whose topology does not fit: evict what the
        ClusterQueue's preemption policies allow, so that it fits once they are gone. Its quota is
        reserved already, so only its topology is at stake (it asks for no more quota)."""
        needed = {FlavorResource(flavor, resource) for psa in wl.admission.pod_set_assignments
                  if psa.delayed_topology_request == DELAYED for resource, flavor in psa.flavors.items()}
        preemptor = Preemptor(self.state, self.now, excluded={wl.key})
        targets = preemptor.get_targets(wl, cq, {}, needed,
                                        tas_fits=lambda: place_delayed(self.state, by_flavor)[1] is None)
        path = preemptor.cluster_queue_path(cq.name)
        for target in targets:
            if not target.workload.condition_true("Evicted"):
                self.decided[target.workload.key] = preempt_target(self.state, self.result, preemptor, self.now,
                                                                   wl, target, path)

