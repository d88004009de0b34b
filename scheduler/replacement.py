"""Replacing the unhealthy node of an admitted TAS workload (hot swap).

For a workload with one unhealthy node, the pods that ran there get a new node inside the
domain their request constrains; the rest of the assignment stays. When no replacement
fits, the workload is evicted at once with TASFailedNodeReplacementFailFast (unless one would
fit once the workloads being evicted are gone), otherwise it is retried after the
second-pass backoff. A workload owned by a single Pod keeps its assignment
(SkipReassignmentForPodOwnedWorkloads): its pod cannot move, and a new one arrives as a
new workload.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from scheduler.assignment import TopologyAssignment
from scheduler.cluster import Charge, ClusterState, TASCharge
from scheduler.eviction import is_evicted
from scheduler.flavorassigner import FlavorAssigner
from scheduler.model import ClusterQueue, PodSetAssignment, Workload
from scheduler.node_failure import MULTIPLE_FAILURES, evict_workload, is_admitted_by_tas
from scheduler.placement import TASPodSetRequest, pod_set_updates_for
from scheduler.results import ASSIGNMENT_KEPT, NODE_REPLACED, REPLACEMENT_FAILED, Decision, Event, PassResult
from scheduler.second_pass import second_pass_blocked
from scheduler.topology_assignment import add_assumed_usage, find_replacement_assignment

NO_REPLACEMENT = "Workload was evicted as there was no replacement for unhealthy node(s): {}"
IS_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"


def owned_by_single_pod(wl: Workload) -> bool:
    """A bare pod's workload: exactly one owner, a v1 Pod, and not a pod group."""
    if wl.annotations.get(IS_GROUP_WORKLOAD) == "true" or len(wl.owner_references) != 1:
        return False
    owner = wl.owner_references[0]
    return owner.kind == "Pod" and owner.api_version == "v1"


class NodeReplacer:
    def __init__(self, state: ClusterState, now: datetime, result: PassResult,
                 told: dict[str, str] | None = None) -> None:
        self.state = state
        self.gates = state.gates
        self.now = now
        self.result = result
        self.evicted: set[str] = set()
        self.replaced: set[str] = set()
        self.failures: dict[str, tuple[str, str]] = {}  # workload key -> (PodSet, reason)
        self.retry: set[str] = set()  # no replacement yet, tried again after the second-pass backoff
        # per workload, the message of its last failed replacement: a retry failing the same way
        # is no new decision (its history would gain a line every backoff)
        self.told: dict[str, str] = told if told is not None else {}
        self.changed: dict[str, Workload] = {}
        # the failed nodes' share of replaced assignments: their pods hold it until they are
        # gone, so it stays counted for the rest of the pass (the caller releases it)
        self.holds: list[Charge] = []
        # the workloads being evicted when the replacements start, found when first needed
        self._leaving: list[Workload] | None = None

    def run(self, workloads: Iterable[Workload] | None = None) -> None:
        """Replace the unhealthy node of each of `workloads` (default: every workload)."""
        if not (self.gates.TopologyAwareScheduling and self.gates.TASFailedNodeReplacement):
            return
        for wl in self.state.workloads if workloads is None else workloads:
            if wl.unhealthy_nodes and is_admitted_by_tas(wl) and not is_evicted(wl):
                self.replace(wl)

    def replace(self, wl: Workload) -> None:
        blocked = second_pass_blocked(self.state, wl)
        if blocked is not None:
            self.turned_away(wl, blocked)
            return
        if len(wl.unhealthy_nodes) > 1:
            self.evict(wl, MULTIPLE_FAILURES.format(", ".join(wl.unhealthy_nodes)), "multiple unhealthy nodes")
            return
        node = wl.unhealthy_nodes[0]
        affected = [psa for psa in wl.admission.pod_set_assignments
                    if psa.topology_assignment is not None
                    and any(d.values[-1] == node for d in psa.topology_assignment.domains)]
        if self.gates.SkipReassignmentForPodOwnedWorkloads and owned_by_single_pod(wl):
            wl.unhealthy_nodes.clear()  # the assignment stays where the pod runs
            self.changed[wl.key] = wl
            self.result.decisions.append(Decision(
                wl.key, ASSIGNMENT_KEPT, node, "workload owned by a single Pod",
                f"node {node} not replaced: the workload's only pod cannot move; its assignment is kept"))
            self.replaced.add(wl.key)
            return
        cq = self.state.cluster_queues.get(wl.admission.cluster_queue)
        new_assignments, failure = self.find_replacements(wl, cq, affected, node)
        if failure:
            self.fail(wl, node, *failure, affected)
            return
        self.apply(wl, node, new_assignments)

    def tas_request(self, wl: Workload, cq: ClusterQueue | None, psa: PodSetAssignment) -> TASPodSetRequest | None:
        ps = wl.pod_set(psa.name)
        flavor = self.state.tas_flavor_of(psa)
        if ps is None or flavor is None:
            return None
        implied = cq is not None and FlavorAssigner(self.state, wl, cq).tas_implied(ps)
        count = psa.count if psa.count is not None else ps.count
        return TASPodSetRequest(pod_set=ps, count=count, single_pod_requests=ps.spec.requests, flavor=flavor,
                                implied=implied, **pod_set_updates_for(wl, ps))

    def find_replacements(self, wl: Workload, cq: ClusterQueue | None, affected: list[PodSetAssignment],
                          node: str) -> tuple[dict, tuple[str, str] | None]:
        """New assignments per PodSet, or (PodSet, reason) for the first that cannot be repaired.

        The workload's pods that keep running still hold their nodes, so its own usage stays
        on the snapshot while the replacement is searched, as in Kueue's scheduling cycle."""
        results: dict[str, tuple] = {}
        assumed: dict[str, dict[str, int]] = {}
        for psa in affected:
            req = self.tas_request(wl, cq, psa)
            if req is None:
                return {}, (psa.name, f"no TAS flavor found for pod set {psa.name}")
            snap = self.state.tas_snapshots[req.flavor]
            new, part, reason = find_replacement_assignment(
                snap, req, psa.topology_assignment, node, gates=self.gates, assumed_usage=assumed)
            if reason:
                return {}, (psa.name, reason)
            results[psa.name] = (new, part)
            # the next PodSet's search sees the pods this one moves (a leader and its workers
            # leaving one node must not both take the last room of another)
            add_assumed_usage(assumed, part, req.single_pod_requests, snap)
        return results, None

    def apply(self, wl: Workload, node: str, new_assignments: dict) -> None:
        hold = Charge(wl.admission.cluster_queue)
        for psa in wl.admission.pod_set_assignments:
            if psa.name not in new_assignments:
                continue
            old = psa.topology_assignment
            new, _ = new_assignments[psa.name]
            psa.topology_assignment = new
            # The pods leaving `node` hold it until they are gone, as the old assignment does
            # in Kueue's cycle snapshot, so no other workload is placed there in this pass.
            ps = wl.pod_set(psa.name)
            flavor = self.state.tas_flavor_of(psa)
            if ps is not None and flavor is not None and old is not None:
                leaving = TopologyAssignment(old.levels, tuple(d for d in old.domains if d.values[-1] == node))
                if leaving.domains:
                    hold.tas.append(TASCharge(flavor, leaving, ps.spec.requests))
        wl.unhealthy_nodes.clear()
        self.state.workload_changed(wl)  # charged with its new assignment
        if hold.tas:
            self.state.apply_charge(hold, 1)
            self.holds.append(hold)
        self.changed[wl.key] = wl
        for name, (_, part) in new_assignments.items():
            targets = [d.values[-1] for d in part.domains]
            self.result.decisions.append(Decision(
                wl.key, NODE_REPLACED, node, "unhealthy node",
                f"pod set {name}: pods on {node} moved to {', '.join(targets)}", targets, name))
        self.replaced.add(wl.key)

    def fail(self, wl: Workload, node: str, pod_set: str, reason: str,
             affected: list[PodSetAssignment]) -> None:
        self.failures[wl.key] = (pod_set, reason)
        message = f"couldn't assign flavors to pod set {pod_set}: {reason}"
        told = message
        if self.gates.TASFailedNodeReplacementFailFast:
            freeing = self.evictions_freeing_room(wl, affected, node)
            if not freeing:
                self.decide_failure(Decision(wl.key, REPLACEMENT_FAILED, node, "unhealthy node", message,
                                             pod_set=pod_set))
                self.evict(wl, NO_REPLACEMENT.format(node), "no replacement (fail fast)")
                return
            names = ", ".join(freeing[:3]) + (f" and {len(freeing) - 3} more" if len(freeing) > 3 else "")
            told += f"; not evicted: a replacement fits once the evictions in progress ({names}) free their nodes"
        self.decide_failure(Decision(wl.key, REPLACEMENT_FAILED, node, "unhealthy node", told, pod_set=pod_set))
        self.result.events.append(Event(wl.key, "Warning", "SecondPassFailed", message))
        self.retry.add(wl.key)

    def evictions_freeing_room(self, wl: Workload, affected: list[PodSetAssignment], node: str) -> list[str]:
        """The workloads being evicted (marked Evicted, still holding what they held until their
        pods are gone) on the nodes the replacement would take once they are gone; empty if it
        does not fit even then.

        Fail-fast eviction waits for them, as Kueue's scheduler does (kueue#14187): tearing the
        workload down would be for nothing when the room it needs is about to come free. They are
        those marked Evicted when the replacements start (Kueue's cycle snapshot), and their
        usage is taken out only for this search."""
        if self._leaving is None:
            self._leaving = [w for w in self.state.holders() if is_evicted(w)]
        leaving = [w for w in self._leaving if w.key != wl.key]
        if not leaving:
            return []
        for w in leaving:
            self.state.suspend_usage(w)
        try:
            cq = self.state.cluster_queues.get(wl.admission.cluster_queue)
            found, failure = self.find_replacements(wl, cq, affected, node)
        finally:
            for w in leaving:
                self.state.resume_usage(w)
        if failure:
            return []
        # the ones on the nodes the replacement would take
        targets = {d.values[-1] for _, part in found.values() for d in part.domains}
        on_targets = self.state.workloads_on_nodes(targets)
        return sorted(w.key for w in leaving if w.key in on_targets)

    def decide_failure(self, decision: Decision) -> None:
        """A failed replacement's decision, unless the workload's last try failed the same way."""
        if self.told.get(decision.key) != decision.message:
            self.result.decisions.append(decision)
        self.told[decision.key] = decision.message

    def turned_away(self, wl: Workload, message: str) -> None:
        """Kueue's nomination turned the workload away before any replacement was looked for (its
        ClusterQueue inactive or gone, say): it stays on its nodes, unhealthy one included, and is
        tried again after the second-pass backoff; fail-fast eviction does not apply."""
        nodes = ", ".join(wl.unhealthy_nodes)
        self.decide_failure(Decision(wl.key, REPLACEMENT_FAILED, nodes, "unhealthy node",
                                     f"node {nodes} not replaced: {message}"))
        self.result.events.append(Event(wl.key, "Warning", "SecondPassFailed", message))
        self.retry.add(wl.key)

    def evict(self, wl: Workload, message: str, trigger: str) -> None:
        evict_workload(wl, message, self.now, self.result, node=", ".join(wl.unhealthy_nodes), trigger=trigger)
        wl.unhealthy_nodes.clear()
        self.evicted.add(wl.key)
        self.changed[wl.key] = wl


def annotate_failures(results: list, failures: dict[str, tuple[str, str]]) -> None:
    """Put each failed replacement's reason on its PodSet in the pass result."""
    for wr in results:
        failure = failures.get(wr.key)
        if failure is None:
            continue
        for ps in wr.pod_sets:
            if ps.name == failure[0]:
                ps.failure_reason = failure[1]
