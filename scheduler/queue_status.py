"""Whether a LocalQueue and a ClusterQueue can admit, as Kueue's cache and workload controller
decide it.

A ClusterQueue is inactive (its `Active` condition False, `kueue_cluster_queue_status`
"terminating" while it is being deleted, "pending" otherwise) while it is being deleted (Kueue's
finalizer holds it until no workload holds quota in it), is stopped, names a ResourceFlavor or an
AdmissionCheck that does not exist, names an AdmissionCheck that is not active, misuses
MultiKueue checks, or has a TAS flavor whose Topology does not exist. An inactive ClusterQueue
admits nothing: the scheduler takes no head from it, preemption takes no candidate from it, and
its waiting workloads are inadmissible ("ClusterQueue X is inactive"). Its quota and usage still
count in its cohort, and what it has admitted goes on running (unless it is drained: see
`stop_policy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.model import STOP_NONE, ClusterQueue, LocalQueue, Workload

if TYPE_CHECKING:
    from scheduler.cluster import ClusterState

READY_MESSAGE = "Can admit new workloads"
STOPPED = "is stopped"
STOPPED_ONLY_MESSAGE = f"Can't admit new workloads: {STOPPED}."  # the Active message of a ClusterQueue only stopped
CANNOT_SUBMIT = "Can't submit new workloads to clusterQueue"
TERMINATING = "Terminating"
TERMINATING_MESSAGE = "Can't admit new workloads; clusterQueue is terminating"


@dataclass(frozen=True, slots=True)
class InactiveCause:
    reason: str  # Kueue's reason of the Active condition: Stopped, FlavorNotFound, ...
    message: str  # Kueue's words: "is stopped", "references missing ResourceFlavor(s): a,b"
    human: str  # the same for people: "it is stopped (stopPolicy Hold)"


def inactive_causes(state: ClusterState, cq: ClusterQueue) -> tuple[InactiveCause, ...]:
    """Why the ClusterQueue cannot admit, in Kueue's order; empty when it is active. Being
    deleted is the one cause of a terminating ClusterQueue, whatever else it lacks."""
    if cq.terminating:
        return (InactiveCause(TERMINATING, "clusterQueue is terminating",
                              "it is being deleted, and is kept only until no workload holds quota in it"),)
    causes: list[InactiveCause] = []
    if cq.stop_policy != STOP_NONE:
        causes.append(InactiveCause("Stopped", STOPPED, f"it is stopped (stopPolicy {cq.stop_policy})"))
    missing_flavors = [name for name in cq.flavor_names() if name not in state.flavors]
    if missing_flavors:
        causes.append(_referencing("FlavorNotFound", "missing ResourceFlavor(s)", missing_flavors))
    names = sorted({rule.name for rule in cq.admission_checks})
    checks = state.admission_checks
    missing_checks = [n for n in names if n not in checks]
    if missing_checks:
        causes.append(_referencing("AdmissionCheckNotFound", "missing AdmissionCheck(s)", missing_checks))
    inactive_checks = [n for n in names if n in checks and not checks[n].active]
    if inactive_checks:
        causes.append(_referencing("AdmissionCheckInactive", "inactive AdmissionCheck(s)", inactive_checks))
    causes.extend(_multikueue_causes(state, cq, names))
    multikueue = any(n in checks and checks[n].is_multikueue for n in names)
    if state.gates.TopologyAwareScheduling and not multikueue:  # with MultiKueue, TAS runs on the workers
        for name in cq.flavor_names():
            flavor = state.flavors.get(name)
            if flavor is not None and flavor.is_tas and flavor.topology_name not in state.topologies:
                text = f'there is no Topology "{flavor.topology_name}" for TAS flavor "{name}"'
                causes.append(InactiveCause("TopologyNotFound", text, text))
    return tuple(causes)


def _referencing(reason: str, what: str, names: list[str]) -> InactiveCause:
    message = f"references {what}: {','.join(names)}"
    return InactiveCause(reason, message, f"it {message}")


def _multikueue_causes(state: ClusterState, cq: ClusterQueue, names: list[str]) -> list[InactiveCause]:
    checks = state.admission_checks
    multikueue = [n for n in names if n in checks and checks[n].is_multikueue]
    provisioning = [n for n in names if n in checks and checks[n].is_provisioning_request]
    all_flavors = set(cq.flavor_names())
    per_flavor = sorted({rule.name for rule in cq.admission_checks if rule.name in multikueue
                         and rule.on_flavors and set(rule.on_flavors) != all_flavors})
    causes = []
    if len(multikueue) > 1:
        text = f"Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: {','.join(multikueue)}"
        causes.append(InactiveCause("MultipleMultiKueueAdmissionChecks", text, text))
    if per_flavor:
        text = f"Cannot specify MultiKueue AdmissionCheck per flavor, found: {','.join(per_flavor)}"
        causes.append(InactiveCause("MultiKueueAdmissionCheckAppliedPerFlavor", text, text))
    if multikueue and provisioning:
        text = ("Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: "
                f"{','.join(multikueue)}, {','.join(provisioning)}")
        causes.append(InactiveCause("MultiKueueWithProvisioningRequest", text, text))
    return causes


def active_condition(causes: tuple[InactiveCause, ...]) -> tuple[str, str, str]:
    """Kueue's `Active` condition of a ClusterQueue: (status, reason, message)."""
    if not causes:
        return "True", "Ready", READY_MESSAGE
    if causes[0].reason == TERMINATING:
        return "False", TERMINATING, TERMINATING_MESSAGE
    return "False", causes[0].reason, f"Can't admit new workloads: {', '.join(c.message for c in causes)}."


def local_queue_condition(state: ClusterState, lq: LocalQueue) -> tuple[str, str, str]:
    """Kueue's `Active` condition of a LocalQueue: (status, reason, message)."""
    if lq.stop_policy != STOP_NONE:
        return "False", "Stopped", "LocalQueue is stopped"
    if lq.cluster_queue not in state.cluster_queues:
        return "False", "ClusterQueueDoesNotExist", CANNOT_SUBMIT
    if lq.cluster_queue in state.inactive_cluster_queues:
        return "False", "ClusterQueueIsInactive", CANNOT_SUBMIT
    return "True", "Ready", "Can submit new workloads to localQueue"


def waiting_block(state: ClusterState, wl: Workload) -> tuple[str, str] | None:
    """(ClusterQueue, Kueue's message) when the workload's queues keep it from being queued at
    all, in the order of Kueue's workload controller: its LocalQueue missing or stopped, then
    its ClusterQueue missing or inactive. None when it can wait in its ClusterQueue."""
    lq = state.local_queues.get(wl.local_queue_key)
    if lq is None:
        return "", f"LocalQueue {wl.queue_name or chr(34) * 2} doesn't exist"
    if lq.stop_policy != STOP_NONE:
        return lq.cluster_queue, f"LocalQueue {lq.name} is inactive"
    if lq.cluster_queue not in state.cluster_queues:
        return lq.cluster_queue, f"ClusterQueue {lq.cluster_queue} doesn't exist"
    if lq.cluster_queue in state.inactive_cluster_queues:
        return lq.cluster_queue, f"ClusterQueue {lq.cluster_queue} is inactive"
    return None


def waiting_summary(state: ClusterState, wl: Workload) -> str:
    """`waiting_block`'s message with its cause, for people ("ClusterQueue cq is inactive: it
    references missing ResourceFlavor(s): gpu"); "" when nothing blocks the workload."""
    blocked = waiting_block(state, wl)
    if blocked is None:
        return ""
    cq_name, message = blocked
    lq = state.local_queues.get(wl.local_queue_key)
    if lq is not None and lq.stop_policy != STOP_NONE:
        return f"{message}: it is stopped (stopPolicy {lq.stop_policy})"
    causes = state.inactive_cluster_queues.get(cq_name)
    return f"{message}: {'; '.join(c.human for c in causes)}" if causes else message
