"""Node-failure handling for admitted TAS workloads: marking unhealthy nodes.

A node is unhealthy for a workload (recorded in `status.unhealthyNodes`) when it is
deleted or has no Ready condition; when it is NotReady and the workload's pods on it have
terminated or are terminating (TASReplaceNodeOnPodTermination), or has been NotReady for
30 s (TASReplaceNodeDueToNotReadyOverFixedTime, or with pod termination off); or, with
TASReplaceNodeOnNodeTaints, when it carries a taint the workload does not tolerate
(NoExecute once `tolerationSeconds` ran out; NoSchedule, including `spec.unschedulable`,
once the workload's pods stopped running there). A second failed node evicts the
workload. Every decision is recorded with its trigger.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

from scheduler.assignment import HOSTNAME_LABEL
from scheduler.clock import later
from scheduler.cluster import ClusterState
from scheduler.eviction import evict_and_record, is_evicted
from scheduler.model import (
    NO_EXECUTE,
    NO_SCHEDULE,
    Node,
    Pod,
    PodSet,
    Taint,
    Toleration,
    Workload,
)
from scheduler.results import (
    NODE_RECOVERED,
    NODE_UNHEALTHY,
    POD_TERMINATED,
    Decision,
    Event,
    PassResult,
    PodTermination,
)

NODE_FAILURE_DELAY = timedelta(seconds=30)
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
PODSET_LABEL = "kueue.x-k8s.io/podset"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)
MULTIPLE_FAILURES = "Workload eviction triggered due to multiple TAS assigned node failures, including: {}"
NODE_FAILURES = "NodeFailures"


class Health(Enum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    KEEP_MONITORING = "keep monitoring"


@dataclass(frozen=True, slots=True)
class NodeCheck:
    health: Health
    trigger: str = ""
    untolerated_taint: Taint | None = None


# ---------------------------------------------------------------- helpers


def is_admitted_by_tas(wl: Workload) -> bool:
    return wl.is_admitted and wl.admission is not None and any(
        psa.topology_assignment is not None for psa in wl.admission.pod_set_assignments)


def has_assignment_on_unhealthy_node(wl: Workload) -> bool:
    """Kueue's HasTopologyAssignmentWithUnhealthyNode: an admitted workload one of whose
    TopologyAssignment domains is, at its lowest level, a node its unhealthyNodes list."""
    if not wl.unhealthy_nodes or not wl.is_admitted or wl.admission is None:
        return False
    unhealthy = set(wl.unhealthy_nodes)
    return any(dom.values and dom.values[-1] in unhealthy
               for psa in wl.admission.pod_set_assignments if psa.topology_assignment is not None
               for dom in psa.topology_assignment.domains)


def assigned_nodes(wl: Workload) -> list[str]:
    """Hostnames in the workload's assignments (only assignments whose lowest level is the hostname)."""
    seen: dict[str, None] = {}
    for psa in wl.admission.pod_set_assignments if wl.admission else ():
        ta = psa.topology_assignment
        if ta is None or not ta.levels or ta.levels[-1] != HOSTNAME_LABEL:
            continue
        for dom in ta.domains:
            seen.setdefault(dom.values[-1])
    return list(seen)


def pod_sets_by_node(wl: Workload) -> dict[str, list[PodSet]]:
    """For each hostname in the workload's assignments, the PodSets with pods there."""
    out: dict[str, list[PodSet]] = defaultdict(list)
    for psa in wl.admission.pod_set_assignments if wl.admission else ():
        ta = psa.topology_assignment
        ps = wl.pod_set(psa.name)
        if ta is None or ps is None:
            continue
        for node in {d.values[-1] for d in ta.domains}:
            out[node].append(ps)
    return out


def tolerated_now(taint: Taint, tolerations: tuple[Toleration, ...], now: datetime) -> bool:
    """Some toleration tolerates the taint, and for NoExecute its tolerationSeconds have not run out."""
    for t in tolerations:
        if not t.tolerates(taint):
            continue
        if taint.effect != NO_EXECUTE or t.toleration_seconds is None or taint.time_added is None:
            return True
        if now < later(taint.time_added, max(t.toleration_seconds, 0)):
            return True
    return False


def scheduling_taints(node: Node) -> list[Taint]:
    taints = [t for t in node.taints if t.effect in (NO_SCHEDULE, NO_EXECUTE)]
    if node.unschedulable and not any(t.key == UNSCHEDULABLE_TAINT.key for t in taints):
        taints.append(UNSCHEDULABLE_TAINT)  # what the node lifecycle controller adds to a cordoned node
    return taints


def classify_taints(node: Node, pod_sets: list[PodSet], now: datetime) -> tuple[list[Taint], list[Taint]]:
    """(taints some PodSet on the node does not tolerate — a NoExecute toleration whose
    `tolerationSeconds` ran out no longer counts —, NoExecute taints tolerated only until
    their `tolerationSeconds` run out: the pods there are being evicted)."""
    if not pod_sets:
        return [], []
    untolerated, evicting = [], []
    for taint in scheduling_taints(node):
        if any(not tolerated_now(taint, ps.spec.tolerations, now) for ps in pod_sets):
            untolerated.append(taint)
        elif taint.effect == NO_EXECUTE and any(
                not any(t.tolerates(taint) and t.toleration_seconds is None for t in ps.spec.tolerations)
                for ps in pod_sets):
            evicting.append(taint)
    return untolerated, evicting


# ---------------------------------------------------------------- the controller


class NodeFailureController:
    def __init__(self, state: ClusterState, now: datetime, result: PassResult) -> None:
        self.state = state
        self.gates = state.gates
        self.now = now
        self.result = result
        self.evicted: dict[str, str] = {}  # workload key -> eviction message
        self.marked: list[Workload] = []  # workloads that got a newly unhealthy node
        self.changed: dict[str, Workload] = {}  # workloads this controller changed
        self._pod_sets_by_node: dict[str, dict[str, list[PodSet]]] = {}

    def pods_of(self, key: str) -> list[Pod]:
        return self.state.pods_of(key)

    def run(self, workloads: Iterable[Workload] | None = None) -> None:
        """Reconcile the assigned nodes of `workloads` (default: every workload; a caller that
        knows which nodes are not healthy passes only the workloads assigned to them, and
        those that already list unhealthy nodes)."""
        if not (self.gates.TopologyAwareScheduling and self.gates.TASFailedNodeReplacement):
            return
        for wl in self.state.workloads if workloads is None else workloads:
            if is_admitted_by_tas(wl) and not is_evicted(wl):
                for node in assigned_nodes(wl):
                    if wl.key in self.evicted:
                        break
                    self.reconcile(wl, node)

    # ------------------------------------------------------------ pods of a workload on a node

    def pods_on_node(self, wl: Workload, node_name: str) -> list[Pod]:
        node = self.state.node_for_hostname(node_name)
        levels = {}
        for psa in wl.admission.pod_set_assignments if wl.admission else ():
            if psa.topology_assignment is not None:
                levels[psa.name] = psa.topology_assignment.levels
        single = next(iter(levels.values())) if len(levels) == 1 else ()
        out = []
        bound_names = {node_name, node.name} if node is not None else {node_name}
        for pod in self.pods_of(wl.key):
            if pod.node_name:
                if pod.node_name in bound_names:
                    out.append(pod)
                continue
            # not bound yet: on the node if its selector for the lowest level names it
            lv = levels.get(pod.labels.get(PODSET_LABEL, ""), single)
            if node is None or not lv or not pod.spec.node_selector:
                continue
            key = lv[-1]
            if key in pod.spec.node_selector and node.labels.get(key) == pod.spec.node_selector[key]:
                out.append(pod)
        return out

    def all_pods_stopped(self, wl: Workload, node: str) -> bool:
        """Every pod of the workload bound to the node is terminated or terminating."""
        node_obj = self.state.node_for_hostname(node)
        names = {node, node_obj.name} if node_obj is not None else {node}
        return all(p.deleting or p.terminal for p in self.pods_of(wl.key) if p.node_name in names)

    def has_active_pods(self, wl: Workload, node: str) -> bool:
        # A gated pod counts as active so that pods about to start are not terminated.
        return any(not p.deleting and not p.terminal and (p.phase != "Pending" or p.scheduling_gates)
                   for p in self.pods_on_node(wl, node))

    # ------------------------------------------------------------ health

    def check(self, wl: Workload, node_name: str) -> NodeCheck:
        node = self.state.node_for_hostname(node_name)
        if node is None:
            return NodeCheck(Health.UNHEALTHY, "node deleted")
        if node.ready is None:
            return NodeCheck(Health.UNHEALTHY, "node has no Ready condition")
        if node.ready == "True":
            return self.check_taints(wl, node)
        since = node.ready_since
        not_ready_for = self.now - since if since is not None else timedelta.max
        over_delay = not_ready_for >= NODE_FAILURE_DELAY
        status = f"node is {'NotReady' if node.ready == 'False' else 'Ready=' + node.ready}"
        if self.gates.TASReplaceNodeOnPodTermination:
            if self.all_pods_stopped(wl, node_name):
                return NodeCheck(Health.UNHEALTHY, f"{status} and the workload's pods on it have stopped")
            if self.gates.TASReplaceNodeDueToNotReadyOverFixedTime and over_delay:
                return NodeCheck(Health.UNHEALTHY, f"{status} for {_seconds(not_ready_for)}")
            return NodeCheck(Health.KEEP_MONITORING, f"{status}, the workload's pods still run there")
        if over_delay:
            return NodeCheck(Health.UNHEALTHY, f"{status} for {_seconds(not_ready_for)}")
        return NodeCheck(Health.KEEP_MONITORING, f"{status} for {_seconds(not_ready_for)}, under 30s")

    def pod_sets_on_node(self, wl: Workload, node: str) -> list[PodSet]:
        by_node = self._pod_sets_by_node.get(wl.key)
        if by_node is None:
            by_node = self._pod_sets_by_node[wl.key] = pod_sets_by_node(wl)
        return by_node.get(node, [])

    def check_taints(self, wl: Workload, node: Node) -> NodeCheck:
        if not self.gates.TASReplaceNodeOnNodeTaints or not (node.taints or node.unschedulable):
            return NodeCheck(Health.HEALTHY)
        untolerated, evicting = classify_taints(node, self.pod_sets_on_node(wl, node.name), self.now)
        if untolerated and not self.gates.TASReplaceNodeOnPodTermination:
            return NodeCheck(Health.UNHEALTHY, f"untolerated taint {untolerated[0]}", untolerated[0])
        if not untolerated and not evicting:
            return NodeCheck(Health.HEALTHY)
        # wait for the pods to stop: they are being evicted, or the node cannot take them again
        taint = (untolerated or evicting)[0]
        what = f"untolerated taint {taint}" if untolerated else f"taint {taint} tolerated only for a while"
        if self.has_active_pods(wl, node.name):
            return NodeCheck(Health.KEEP_MONITORING, f"{what}, the workload's pods still run there", taint)
        return NodeCheck(Health.UNHEALTHY, f"{what} and the workload's pods stopped there",
                         untolerated[0] if untolerated else None)

    # ------------------------------------------------------------ actions

    def reconcile(self, wl: Workload, node: str) -> None:
        check = self.check(wl, node)
        if check.health is Health.UNHEALTHY:
            if check.untolerated_taint is not None:
                self.terminate_pending_pods(wl, node)
            if wl.unhealthy_nodes and node not in wl.unhealthy_nodes:
                nodes = ", ".join([*wl.unhealthy_nodes, node])
                self.evict(wl, MULTIPLE_FAILURES.format(nodes), node, check.trigger)
                return
            if node not in wl.unhealthy_nodes:
                wl.unhealthy_nodes.append(node)
                self.marked.append(wl)
                self.changed[wl.key] = wl
                self.result.decisions.append(Decision(
                    wl.key, NODE_UNHEALTHY, node, check.trigger,
                    f"node {node} marked unhealthy for the workload: {check.trigger}"))
            return
        # A node already in status.unhealthyNodes stays there even if it looks healthy now
        # (Kueue's scheduler replaces it on its next cycle), unless the workload's pods are
        # demonstrably running on it again: then it has recovered for this workload.
        node_obj = self.state.node_for_hostname(node)
        if (node in wl.unhealthy_nodes and check.health is Health.HEALTHY and node_obj is not None
                and node_obj.is_ready and self.has_running_pods(wl, node)):
            wl.unhealthy_nodes.remove(node)
            self.changed[wl.key] = wl
            self.result.decisions.append(Decision(
                wl.key, NODE_RECOVERED, node, "node Ready with the workload's pods running on it",
                f"node {node} is healthy again for the workload; it keeps its pods"))

    def has_running_pods(self, wl: Workload, node: str) -> bool:
        return any(p.phase == "Running" and not p.deleting for p in self.pods_on_node(wl, node))

    def terminate_pending_pods(self, wl: Workload, node: str) -> None:
        """Pending (ungated) pods bound to a node they cannot run on are moved to Failed."""
        for pod in self.pods_on_node(wl, node):
            if pod.deleting or pod.terminal or pod.phase != "Pending" or pod.scheduling_gates:
                continue
            self.state.upsert_pod(dataclasses.replace(pod, phase="Failed"))
            termination = PodTermination(pod.namespace, pod.name, node)
            self.result.terminated_pods.append(termination)
            self.result.events.append(Event(pod.key, "Normal", "PodTerminatedByKueue", termination.message))
            self.result.decisions.append(Decision(
                wl.key, POD_TERMINATED, node, "pending on an unusable node",
                f"pod {pod.key} was pending on {node} and was moved to Failed"))

    def evict(self, wl: Workload, message: str, node: str, trigger: str) -> None:
        evict_workload(wl, message, self.now, self.result, node=node, trigger=trigger)
        wl.unhealthy_nodes.clear()  # as a fail-fast eviction does: the workload starts over
        self.evicted[wl.key] = message
        self.changed[wl.key] = wl


def evict_workload(wl: Workload, message: str, now: datetime, result: PassResult, *, node: str = "",
                   trigger: str = "") -> None:
    """Set the Evicted condition (reason NodeFailures) and record why."""
    evict_and_record(wl, NODE_FAILURES, message, now, result, trigger=trigger, node=node)


def _seconds(delta: timedelta) -> str:
    if delta == timedelta.max:
        return "an unknown time"
    return f"{int(delta.total_seconds())}s"
