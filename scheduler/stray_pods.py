"""The node-failure controller's pod side: pending pods pinned to a node their workload has
no assignment on are moved to Failed.

Kueue's TAS node controller lists, for a node, the TAS pods whose `kubernetes.io/hostname`
node selector names it (its PodNodeSelectorHostnameKey index), groups them by their
`kueue.x-k8s.io/workload` annotation, and for every such workload that exists and is
neither finished nor evicted but whose admission has no topology assignment on the node
(`HasTASAssignmentOnNode`: no admission at all, or the node gone from every hostname-level
assignment), patches the pods that are unbound, Pending and not gated by the topology gate
to phase Failed with a `TerminatedByKueue` condition. These are stray pods (a workload
without admission) and late pods (created or ungated with a node the assignment has since
moved away from, e.g. after a node replacement): the job controller then creates their
replacements, which the ungater pins to the current assignment.

The node is looked at only when it exists and has a Ready condition, and while it is not
Ready only once `NodeFailureDelay` ran out or with TASReplaceNodeOnPodTermination, as Kueue's
reconciler returns early otherwise. Pods on a workload's assigned nodes are left to the
node-failure controller (`scheduler.node_failure`).

The pass looks only at the pinned pods whose pod, workload or node changed since it last
looked (`ClusterState.pinned_to_check`), and keeps those it could not decide for a reason
that time alone can change (a NotReady node under the delay).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from scheduler.assignment import HOSTNAME_LABEL
from scheduler.cluster import WORKLOAD_ANNOTATION, ClusterState, selected_hostname
from scheduler.eviction import is_evicted
from scheduler.model import Admission, Node, Pod, Workload
from scheduler.node_failure import NODE_FAILURE_DELAY
from scheduler.results import POD_TERMINATED, Decision, Event, PassResult, PodTermination

NO_ADMISSION = "the workload has no admission"
OFF_ASSIGNMENT = "node not in the workload's topology assignment"


@dataclass(frozen=True, slots=True)
class StrayPod:
    pod: Pod
    workload: Workload
    node: str
    trigger: str


def has_tas_assignment_on_node(admission: Admission | None, node: str) -> bool:
    """Kueue's HasTASAssignmentOnNode: some hostname-level TopologyAssignment puts pods on `node`."""
    if admission is None:
        return False
    for psa in admission.pod_set_assignments:
        ta = psa.topology_assignment
        if ta is None or not ta.levels or ta.levels[-1] != HOSTNAME_LABEL:
            continue
        if any(d.count > 0 and d.values and d.values[-1] == node for d in ta.domains):
            return True
    return False


def node_is_reconciled(node: Node | None, now: datetime, replace_on_pod_termination: bool) -> bool | None:
    """Whether Kueue's node reconciler gets as far as the node's pods: True or False, or None
    while the answer changes with time alone (NotReady under the delay)."""
    if node is None or node.ready is None:
        return False  # deleted, or no Ready condition: only the node's assigned workloads are handled
    if node.ready == "True" or replace_on_pod_termination:
        return True
    if node.ready_since is not None and now - node.ready_since < NODE_FAILURE_DELAY:
        return None
    return True


class StrayPodController:
    def __init__(self, state: ClusterState, now: datetime, result: PassResult) -> None:
        self.state = state
        self.now = now
        self.result = result

    def run(self) -> list[StrayPod]:
        """Fail the stray and late pods among the pinned pods to check; return them."""
        state = self.state
        gates = state.gates
        if not (gates.TopologyAwareScheduling and gates.TASFailedNodeReplacement):
            return []
        keys, state.pinned_to_check = state.pinned_to_check, set()
        stray: list[StrayPod] = []
        for pod in state.pods_in_order(keys):
            found = self.check(pod)
            if found is None:
                state.pinned_to_check.add(pod.key)  # a NotReady node under the delay: look again later
            elif found:
                stray.append(found)
        for s in stray:
            self.terminate(s)
        return stray

    def check(self, pod: Pod) -> StrayPod | bool | None:
        """The pod as a stray pod, False when it is not one, None while only time can tell."""
        host = selected_hostname(pod)
        if not host:
            return False
        wl = self.state.workload(f"{pod.namespace}/{pod.annotations[WORKLOAD_ANNOTATION]}")
        if wl is None or wl.is_finished or is_evicted(wl):
            return False
        if has_tas_assignment_on_node(wl.admission, host):
            return False
        reconciled = node_is_reconciled(self.state.node_for_hostname(host), self.now,
                                        self.state.gates.TASReplaceNodeOnPodTermination)
        if not reconciled:
            return reconciled
        return StrayPod(pod, wl, host, NO_ADMISSION if wl.admission is None else OFF_ASSIGNMENT)

    def terminate(self, s: StrayPod) -> None:
        pod = s.pod
        self.state.upsert_pod(dataclasses.replace(pod, phase="Failed"))
        termination = PodTermination(pod.namespace, pod.name, s.node)
        self.result.terminated_pods.append(termination)
        self.result.events.append(Event(pod.key, "Normal", "PodTerminatedByKueue", termination.message))
        where = "while the workload has no admission" if s.trigger == NO_ADMISSION \
            else "outside the workload's topology assignment"
        self.result.decisions.append(Decision(
            s.workload.key, POD_TERMINATED, s.node, s.trigger,
            f"pod {pod.key} was pending on {s.node} {where} and was moved to Failed"))
