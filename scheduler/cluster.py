"""The cluster as one pass sees it: objects indexed by name, TAS flavor snapshots, usage.

`ClusterState` is built once per pass from parsed objects. It owns the per-flavor TAS
snapshots (capacity minus non-TAS usage minus admitted TAS usage) and ClusterQueue quota
usage, and updates both as the pass admits or evicts workloads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scheduler.assignment import HOSTNAME_LABEL
from scheduler.features import FeatureGates
from scheduler.model import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    Node,
    Pod,
    PodSetAssignment,
    ResourceFlavor,
    Topology,
    Workload,
    WorkloadPriorityClass,
)
from scheduler.parse import (
    ANNOTATION_PREFERRED,
    ANNOTATION_REQUIRED,
    ANNOTATION_SLICE_TOPOLOGY,
    ANNOTATION_UNCONSTRAINED,
    ParsedObjects,
)
from scheduler.quota import FlavorResource, QuotaTree
from scheduler.snapshot import TASFlavorSnapshot, build_flavor_snapshot

_TAS_POD_ANNOTATIONS = (
    ANNOTATION_PREFERRED,
    ANNOTATION_REQUIRED,
    ANNOTATION_SLICE_TOPOLOGY,
    ANNOTATION_UNCONSTRAINED,
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
)


def is_tas_pod(pod: Pod) -> bool:
    """Kueue's IsTAS: the pod carries one of the topology annotations."""
    return any(a in pod.annotations for a in _TAS_POD_ANNOTATIONS)


def counts_as_non_tas_usage(pod: Pod) -> bool:
    """Bound, not terminal and not TAS: its requests come off the node's free capacity."""
    return bool(pod.node_name) and not pod.terminal and not is_tas_pod(pod)


class ClusterState:
    def __init__(self, parsed: ParsedObjects, gates: FeatureGates, warn: Callable[[str], None]) -> None:
        self.gates = gates
        self.warn = warn
        self.nodes: dict[str, Node] = {n.name: n for n in parsed.nodes}
        # assignments name nodes by their hostname label, which usually but not always is the node name
        self.nodes_by_hostname: dict[str, Node] = {
            n.labels.get(HOSTNAME_LABEL, n.name): n for n in parsed.nodes}
        self.pods: list[Pod] = parsed.pods
        self.topologies: dict[str, Topology] = {t.name: t for t in parsed.topologies}
        self.flavors: dict[str, ResourceFlavor] = {f.name: f for f in parsed.flavors}
        self.cluster_queues: dict[str, ClusterQueue] = {c.name: c for c in parsed.cluster_queues}
        self.local_queues: dict[str, LocalQueue] = {q.key: q for q in parsed.local_queues}
        self.cohorts: dict[str, Cohort] = {c.name: c for c in parsed.cohorts}
        self.admission_checks: dict[str, AdmissionCheck] = {a.name: a for a in parsed.admission_checks}
        self.priority_classes: dict[str, WorkloadPriorityClass] = {p.name: p for p in parsed.priority_classes}
        self.workloads: list[Workload] = parsed.workloads
        self.tas_snapshots: dict[str, TASFlavorSnapshot] = self._build_tas_snapshots()
        # quota and usage of ClusterQueues and Cohorts, filled by workloads holding a reservation
        self.quota = QuotaTree(self.cluster_queues.values(), self.cohorts.values())
        for wl in self.workloads:
            if wl.has_quota_reservation and not wl.is_finished:
                self.add_workload_usage(wl, sign=1)

    # ------------------------------------------------------------ construction

    def _build_tas_snapshots(self) -> dict[str, TASFlavorSnapshot]:
        if not self.gates.TopologyAwareScheduling:
            return {}
        snapshots: dict[str, TASFlavorSnapshot] = {}
        nodes = list(self.nodes.values())
        for flavor in self.flavors.values():
            if not flavor.is_tas:
                continue
            topology = self.topologies.get(flavor.topology_name or "")
            if topology is None:
                self.warn(f"ResourceFlavor/{flavor.name}: spec.topologyName: Topology "
                          f"{flavor.topology_name!r} not found; the flavor cannot be used for TAS")
                continue
            snapshots[flavor.name] = build_flavor_snapshot(flavor, topology, nodes)
        usage = [(pod.node_name, pod.spec.requests) for pod in self.pods if counts_as_non_tas_usage(pod)]
        for snap in snapshots.values():
            snap.add_non_tas_usages(usage)
        return snapshots

    @property
    def quota_usage(self) -> Mapping[str, Mapping[FlavorResource, int]]:
        """Usage per ClusterQueue, flavor and resource (what its admitted workloads hold)."""
        return {name: node.usage for name, node in self.quota.queues.items()}

    # ------------------------------------------------------------ lookups

    def node_for_hostname(self, hostname: str) -> Node | None:
        return self.nodes_by_hostname.get(hostname) or self.nodes.get(hostname)

    def cluster_queue_for(self, wl: Workload) -> ClusterQueue | None:
        if wl.admission is not None:
            return self.cluster_queues.get(wl.admission.cluster_queue)
        lq = self.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        return self.cluster_queues.get(lq.cluster_queue) if lq else None

    def priority_of(self, wl: Workload) -> int:
        if wl.priority is not None:
            return wl.priority
        if wl.priority_class_name and wl.priority_class_name in self.priority_classes:
            return self.priority_classes[wl.priority_class_name].value
        return 0

    def is_tas_only(self, cq: ClusterQueue) -> bool:
        """Every flavor of the ClusterQueue is a TAS flavor (Kueue's IsTASOnly)."""
        names = cq.flavor_names()
        return bool(names) and all(n in self.tas_snapshots for n in names)

    def checks_on_flavor(self, cq: ClusterQueue, flavor: str) -> list[str]:
        """Names of the ClusterQueue's admission checks that apply to workloads using `flavor`."""
        return [rule.name for rule in cq.admission_checks if not rule.on_flavors or flavor in rule.on_flavors]

    def delays_topology(self, cq: ClusterQueue, flavor: str) -> bool:
        """A ProvisioningRequest check (or MultiKueue) on the flavor: the nodes do not exist yet,
        so TAS is assigned in a second pass once the check is Ready."""
        for name in self.checks_on_flavor(cq, flavor):
            check = self.admission_checks.get(name)
            if check is not None and (check.is_provisioning_request or check.is_multikueue):
                return True
        return False

    def tas_flavor_of(self, psa: PodSetAssignment) -> str | None:
        tas = {f for f in psa.flavors.values() if f in self.tas_snapshots}
        return next(iter(tas)) if len(tas) == 1 else None

    # ------------------------------------------------------------ usage

    def add_workload_usage(self, wl: Workload, sign: int) -> None:
        """Quota and TAS usage of a workload holding a reservation (sign=-1 removes it)."""
        if wl.admission is None:
            return
        cq_name = wl.admission.cluster_queue
        for psa in wl.admission.pod_set_assignments:
            ps = wl.pod_set(psa.name)
            count = psa.count if psa.count is not None else (ps.count if ps else 0)
            usage: Mapping[str, int] = psa.resource_usage
            if not usage and ps is not None:
                usage = {r: v * count for r, v in ps.spec.requests.items()}
            elif ps is not None and 0 < ps.count < count:
                # the PodSet now asks for fewer pods than were admitted (scaled down): as in
                # Kueue, the admitted usage is scaled to the pods that remain, per pod first
                usage = {r: v // count * ps.count for r, v in usage.items()}
            for resource, value in usage.items():
                flavor = psa.flavors.get(resource)
                if flavor is not None:
                    self.quota.add_usage(cq_name, FlavorResource(flavor, resource), sign * value)
        self.add_workload_tas_usage(wl, sign)

    def add_workload_tas_usage(self, wl: Workload, sign: int) -> None:
        """TAS usage of every PodSet of the workload that has a TopologyAssignment."""
        for psa in wl.admission.pod_set_assignments if wl.admission else ():
            ps = wl.pod_set(psa.name)
            if psa.topology_assignment is not None and ps is not None:
                self.add_tas_assignment_usage(psa, ps.spec.requests, sign)

    def add_tas_assignment_usage(self, psa: PodSetAssignment, requests: Mapping[str, int], sign: int) -> None:
        flavor = self.tas_flavor_of(psa)
        if flavor is None or psa.topology_assignment is None:
            return
        for snap in self.snapshots_sharing_usage_of(flavor):
            snap.add_assignment_usage(psa.topology_assignment, requests, sign)

    def snapshots_sharing_usage_of(self, flavor: str) -> list[TASFlavorSnapshot]:
        """The flavor's own snapshot, plus (TASHandleOverlappingFlavors) every hostname-leaf
        flavor's, since flavors whose lowest level is the hostname can select the same nodes."""
        own = self.tas_snapshots.get(flavor)
        if own is None:
            return []
        if not (self.gates.TASHandleOverlappingFlavors and own.lowest_is_node):
            return [own]
        return [s for s in self.tas_snapshots.values() if s is own or s.lowest_is_node]
