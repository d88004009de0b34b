"""The scheduler's cache: the cluster as the engine knows it, kept current one object at a time.

`ClusterState` lives as long as the engine (Kueue's `pkg/cache/scheduler`). Objects come in
through small verbs (`upsert_node`, `delete_pod`, `upsert_workload`, ...) and the state
keeps what the scheduling cycle reads up to date:

* per TAS ResourceFlavor, a snapshot of every leaf domain's capacity, non-TAS usage and
  TAS usage (`scheduler.snapshot`); the topology tree is rebuilt only when the flavor's
  node set, its Topology or the flavor itself changes, the usage is added and removed as
  pods and workloads come and go;
* quota and usage per ClusterQueue and Cohort (`scheduler.quota`), rebuilt only when a
  ClusterQueue or Cohort changes;
* indices the controllers need: the workloads holding quota per ClusterQueue, the
  workloads assigned to each node, the pods of each workload.

What a workload holding quota adds to the quota tree and the TAS snapshots is recorded as
its `Charge` when it is added and taken back exactly when it leaves, so usage never drifts
from the objects even when an object is changed in place. `ClusterState(parsed, ...)` is
the cold start: every object applied through the same verbs.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from scheduler.admission_fair_sharing import LocalQueueUsage, UsageEntry, add_into, entry_penalty, usage_order
from scheduler.assignment import HOSTNAME_LABEL, TopologyAssignment
from scheduler.config import NO_CONFIGURATION, AdmissionFairSharing, Configuration
from scheduler.features import FeatureGates
from scheduler.model import (
    NO_EXECUTE,
    NO_SCHEDULE,
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    Namespace,
    Node,
    Pod,
    PodSet,
    PodSetAssignment,
    ResourceFlavor,
    Topology,
    Workload,
    WorkloadPriorityClass,
    selector_matches,
)
from scheduler.parse import (
    ANNOTATION_PREFERRED,
    ANNOTATION_REQUIRED,
    ANNOTATION_SLICE_TOPOLOGY,
    ANNOTATION_UNCONSTRAINED,
    USAGE_BASED_ADMISSION_FAIR_SHARING,
    ParsedObjects,
)
from scheduler.quantity import afs_amount
from scheduler.queue_status import InactiveCause, inactive_causes
from scheduler.quota import FlavorResource, QuotaTree
from scheduler.snapshot import TASFlavorSnapshot, build_flavor_snapshot, updated_flavor_snapshot
from scheduler.tree import carries_labels

_TAS_POD_ANNOTATIONS = (
    ANNOTATION_PREFERRED,
    ANNOTATION_REQUIRED,
    ANNOTATION_SLICE_TOPOLOGY,
    ANNOTATION_UNCONSTRAINED,
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
)
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
# PriorityBoost: added to a workload's priority wherever Kueue compares priorities (an int32;
# another value is refused by Kueue's webhook and, as by its scheduler, read as no boost)
PRIORITY_BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"
# ConcurrentAdmission: the flavors a workload variant may take (read while the gate is on)
ALLOWED_RESOURCE_FLAVOR_ANNOTATION = "kueue.x-k8s.io/allowed-resource-flavor"
# ConcurrentAdmission: the workload whose variants are scheduled in its place
CONCURRENT_ADMISSION_PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
_INT32_TEXT = re.compile(r"[+-]?[0-9]+")
WORKLOAD_SLICE_NAME_ANNOTATION = "kueue.x-k8s.io/workload-slice-name"
EMPTY_REQUESTS: Mapping[str, int] = MappingProxyType({})


def is_tas_pod(pod: Pod) -> bool:
    """Kueue's IsTAS: the pod carries one of the topology annotations."""
    return any(a in pod.annotations for a in _TAS_POD_ANNOTATIONS)


def selected_hostname(pod: Pod) -> str:
    """The node a pending TAS pod of a workload is pinned to by its `kubernetes.io/hostname`
    node selector, when it waits there ungated and unbound (Kueue's PodNodeSelectorHostnameKey
    index, narrowed to the pods its node controller can move to Failed); "" otherwise."""
    if pod.node_name or pod.phase != "Pending" or pod.gated_by_topology or not pod.annotations:
        return ""
    host = pod.spec.node_selector.get(HOSTNAME_LABEL, "") if pod.spec.node_selector else ""
    if not host or not pod.annotations.get(WORKLOAD_ANNOTATION) or not is_tas_pod(pod):
        return ""
    return host


def counts_as_non_tas_usage(pod: Pod) -> bool:
    """Bound, not terminal and not TAS: its requests come off the node's free capacity."""
    return bool(pod.node_name) and not pod.terminal and not is_tas_pod(pod)


def node_is_healthy(node: Node | None) -> bool:
    """Nothing the node-failure controller could act on: Ready, schedulable, no taint that
    keeps or drives pods away."""
    if node is None or node.deleted or not node.is_ready or node.unschedulable:
        return False
    return not any(t.effect in (NO_SCHEDULE, NO_EXECUTE) for t in node.taints)


def holds_quota(wl: Workload) -> bool:
    """The workload's admission is counted in quota and TAS usage."""
    return wl.has_quota_reservation and not wl.is_finished


# Kueue's nomination turns away a workload with an admission check in Retry or Rejected
FAILED_CHECKS = "The workload has failed admission checks"


FAILED_CHECK_STATES = ("Retry", "Rejected")


def has_failed_checks(wl: Workload) -> bool:
    """An admission check the workload lists is in Retry or Rejected."""
    return any(check.state in FAILED_CHECK_STATES for check in wl.admission_checks)


def has_retry_delay(wl: Workload) -> bool:
    """An admission check the workload lists is in Retry and asks for a delay before the
    workload is tried again (KEP-3258's requeueAfterSeconds)."""
    return any(c.state == "Retry" and c.requeue_after_seconds is not None for c in wl.admission_checks)


def is_pending(wl: Workload) -> bool:
    """The workload waits in a queue for a quota reservation."""
    return wl.active and not wl.has_quota_reservation and not wl.is_finished


def slice_name(wl: Workload) -> str:
    """Kueue's workloadslicing.SliceName: the first workload of an elastic slice chain names its pods."""
    return wl.annotations.get(WORKLOAD_SLICE_NAME_ANNOTATION) or wl.name


def pod_owner(pod: Pod) -> tuple[str, str] | None:
    """(namespace, workload slice name or workload name) the pod belongs to, if any."""
    annotations = pod.annotations
    if not annotations:
        return None
    owner = annotations.get(WORKLOAD_SLICE_NAME_ANNOTATION) or annotations.get(WORKLOAD_ANNOTATION)
    return (pod.namespace, owner) if owner else None


@dataclass(frozen=True, slots=True)
class TASCharge:
    """One TopologyAssignment's pods on a TAS flavor, with the per-pod requests."""

    flavor: str
    assignment: TopologyAssignment
    requests: Mapping[str, int]


@dataclass(slots=True)
class Charge:
    """What one workload (or a hold within a cycle) adds to quota and TAS usage."""

    cluster_queue: str
    quota: dict[FlavorResource, int] = field(default_factory=dict)
    tas: list[TASCharge] = field(default_factory=list)
    # every (flavor, resource) its admission names, used or not: what preemption matches on
    names: frozenset[FlavorResource] = frozenset()


@dataclass(slots=True)
class Changes:
    """What changed in the cache since the queue manager last looked: which ClusterQueues
    may now admit workloads they could not before (Kueue's requeue triggers)."""

    requeue_all: bool = False
    cluster_queues: set[str] = field(default_factory=set)  # ClusterQueues whose cohort tree is requeued
    flavors: set[str] = field(default_factory=set)  # flavors whose ClusterQueues are requeued
    tas_released: set[str] = field(default_factory=set)  # TAS flavors a workload freed capacity on
    # workloads whose queue placement must be looked at again (added, changed, deleted)
    workloads: dict[str, Workload | None] = field(default_factory=dict)
    queues_changed: bool = False  # a LocalQueue or ClusterQueue came, went or moved
    # LocalQueues whose admission fair sharing usage changed: their workloads move in the
    # ClusterQueues that order by it
    usage_changed: set[str] = field(default_factory=set)

    def any(self) -> bool:
        return bool(self.requeue_all or self.cluster_queues or self.flavors or self.tas_released or self.workloads
                    or self.queues_changed or self.usage_changed)


@dataclass(slots=True)
class NodeCensus:
    """The nodes carrying a flavor's labels, and those of them its topology tree leaves out."""

    nodes_of_flavor: int = 0
    missing_level_label: int = 0
    not_ready: int = 0
    unschedulable: int = 0


def is_concurrent_admission_parent(wl: Workload) -> bool:
    return wl.labels.get(CONCURRENT_ADMISSION_PARENT_LABEL) == "true"


def parent_workload_name(wl: Workload) -> str | None:
    """The name of the Workload that owns `wl` (a ConcurrentAdmission variant names its parent
    this way, in its namespace), or None."""
    for ref in wl.owner_references:
        if ref.kind == "Workload" and ref.api_version.startswith("kueue.x-k8s.io/"):
            return ref.name
    return None


def allowed_flavors(wl: Workload) -> tuple[str, ...] | None:
    """The flavors the workload's allowed-resource-flavor annotation lets it take (ConcurrentAdmission
    variants carry one each); None without the annotation. The value is comma-separated, spaces
    around names dropped; an empty value allows none."""
    text = wl.annotations.get(ALLOWED_RESOURCE_FLAVOR_ANNOTATION)
    if text is None:
        return None
    return tuple(part.strip() for part in text.split(",")) if text.strip() else ()


def priority_boost(wl: Workload) -> int:
    """The boost of the workload's priority-boost annotation; 0 without one or for a value
    that is not an int32 (Kueue's scheduler reads such a value as no boost)."""
    text = wl.annotations.get(PRIORITY_BOOST_ANNOTATION)
    if not text or not _INT32_TEXT.fullmatch(text):
        return 0
    boost = int(text)
    return boost if -(2**31) <= boost < 2**31 else 0


class ClusterState:
    def __init__(self, parsed: ParsedObjects | None = None, gates: FeatureGates | None = None,
                 warn: Callable[[str], None] = lambda _msg: None, *,
                 config: Configuration | None = None) -> None:
        self.gates = gates or FeatureGates()
        self._boost_priorities = self.gates.PriorityBoost  # read for every priority compared
        self.config = config or NO_CONFIGURATION
        self.warn = warn
        self.nodes: dict[str, Node] = {}
        self.nodes_generation = 0  # moves on at every node added, changed or deleted
        self._censuses: dict[str, tuple[tuple, NodeCensus]] = {}
        # each node's place among `nodes` (the order trees take a leaf's nodes in)
        self._node_position: dict[str, int] = {}
        self._next_node = 0
        self.nodes_by_hostname: dict[str, Node] = {}
        self._pods: dict[str, Pod] = {}
        self._pod_order: dict[str, int] = {}
        self._next_pod = 0
        self.topologies: dict[str, Topology] = {}
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.lq_usage: dict[str, UsageEntry] = {}  # LocalQueue -> its admission fair sharing usage
        self.usage_sampled: set[str] = set()  # LocalQueues sampled since a writer last took them
        self.cohorts: dict[str, Cohort] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        self.priority_classes: dict[str, WorkloadPriorityClass] = {}
        # v1 Namespaces read, name -> labels; empty when the input lists none (namespaceSelectors are
        # then not checked: the engine cannot know the namespaces' labels)
        self.namespaces: dict[str, Mapping[str, str]] = {}
        self._workloads: dict[str, Workload] = {}
        # insertion number of every workload: the order results are listed in
        self.order: dict[str, int] = {}
        self._next_order = 0
        # --- derived state
        self.charges: dict[str, Charge] = {}  # workload key -> what it holds
        self.holding: dict[str, dict[str, Workload]] = defaultdict(dict)  # ClusterQueue -> holders
        # ClusterQueue -> its holders as (priority, order, key), sorted: preemption policies
        # such as LowerPriority look only at the part below a priority
        self.holders_by_priority: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
        self._holder_entry: dict[str, tuple[str, tuple[int, int, str]]] = {}
        self.by_node: dict[str, set[str]] = defaultdict(set)  # hostname -> workloads assigned there
        # hostnames of assignments whose node is missing or not healthy, and holders that list
        # unhealthy nodes: where node-failure handling has something to look at
        self.unhealthy_hosts: set[str] = set()
        self.with_unhealthy: set[str] = set()
        # holders whose quota reservation is not (yet) an admission: waiting for admission checks
        self.reserved_not_admitted: set[str] = set()
        # holders listing an admission check in Retry or Rejected: Kueue's workload controller
        # evicts or deactivates them
        self.with_failed_checks: set[str] = set()
        # deactivated workloads (spec.active false, or a DeactivationTarget) not yet evicted for it:
        # Kueue's workload controller evicts them
        self.to_deactivate: set[str] = set()
        # workloads (finished ones aside) with an admission check in Retry that asks for a delay
        # (requeueAfterSeconds): Kueue's workload controller keeps them out of the queue until then
        self.with_retry_delay: set[str] = set()
        # ClusterQueues that admit nothing, with why (see scheduler.queue_status); None: not known
        self._inactive: dict[str, tuple[InactiveCause, ...]] | None = None
        self.pods_by_owner: dict[tuple[str, str], dict[str, Pod]] = defaultdict(dict)  # the ungater's index
        self.pods_by_workload: dict[str, dict[str, Pod]] = defaultdict(dict)  # by `kueue.x-k8s.io/workload`
        self.gated_owners: dict[tuple[str, str], int] = defaultdict(int)  # gated live pods per owner
        # pending TAS pods pinned to a node by their hostname selector (see selected_hostname),
        # per hostname and per workload; and those of them whose pod, workload or node changed
        # since node-failure handling last looked (scheduler.stray_pods)
        self.pinned_by_host: dict[str, dict[str, Pod]] = defaultdict(dict)
        self.pinned_by_workload: dict[str, set[str]] = defaultdict(set)
        self.pinned_to_check: set[str] = set()
        # (namespace, workload slice name) -> workloads: the owners pods name (see pod_owner)
        self.slice_members: dict[tuple[str, str], set[str]] = defaultdict(set)
        # parent workload key -> the workloads it owns (ConcurrentAdmission's variants)
        self.owned_workloads: dict[str, set[str]] = defaultdict(set)
        self.non_tas_by_node: dict[str, dict[str, Mapping[str, int]]] = defaultdict(dict)
        self._snapshots: dict[str, TASFlavorSnapshot] = {}
        self._snapshots_dirty = True
        self._dirty_flavors: set[str] = set()  # snapshots to make afresh
        # flavor -> nodes that came, went or changed since its snapshot was made: the snapshot
        # is made again from its tree with those changes (unless it is dirty)
        self._node_changes: dict[str, set[str]] = {}
        self._quota: QuotaTree | None = None
        self._tas_flavor_names: frozenset[str] | None = None
        self.changes = Changes()
        # Kueue's AllocatableResourceGeneration, in two parts: one per ClusterQueue, advanced when a
        # workload that held quota there is updated or removed (the cache deletes and adds it again),
        # and one for every ClusterQueue, advanced when a ClusterQueue or Cohort definition changes
        # (Kueue advances every ClusterQueue of the cohort tree then; definitions change seldom)
        self._released_generation: dict[str, int] = defaultdict(int)
        self._definitions_generation = 0
        if parsed is not None:
            self.load(parsed)

    # ------------------------------------------------------------ cold start

    def load(self, parsed: ParsedObjects) -> None:
        """Every object of `parsed`, applied as changes, kind by kind in the order a cold start
        takes them (on an empty state: the cold start)."""
        for t in parsed.topologies:
            self.upsert_topology(t)
        for f in parsed.flavors:
            self.upsert_flavor(f)
        for c in parsed.cohorts:
            self.upsert_cohort(c)
        for cq in parsed.cluster_queues:
            self.upsert_cluster_queue(cq)
        for lq in parsed.local_queues:
            self.upsert_local_queue(lq)
        for ac in parsed.admission_checks:
            self.upsert_admission_check(ac)
        for pc in parsed.priority_classes:
            self.upsert_priority_class(pc)
        self.namespaces.update(parsed.namespaces)
        for n in parsed.nodes:
            self.upsert_node(n)
        for p in parsed.pods:
            self.upsert_pod(p)
        for w in parsed.workloads:
            self.upsert_workload(w, order=parsed.workload_order.get(w.key))

    # ------------------------------------------------------------ collections

    @property
    def workloads(self) -> list[Workload]:
        """Every workload, in the order they were first added."""
        return list(self._workloads.values())

    def workload(self, key: str) -> Workload | None:
        return self._workloads.get(key)

    @property
    def workload_map(self) -> Mapping[str, Workload]:
        return self._workloads

    @property
    def pods(self) -> list[Pod]:
        return list(self._pods.values())

    @pods.setter
    def pods(self, pods: Iterable[Pod]) -> None:
        """Replace every pod (the pass's pods as they are afterwards)."""
        for key in list(self._pods):
            self.delete_pod(key)
        for pod in pods:
            self.upsert_pod(pod)

    def pod_map(self) -> Mapping[str, Pod]:
        return self._pods

    @property
    def node_position(self) -> Mapping[str, int]:
        """Each node's place among `nodes` (the order a tree takes a leaf's nodes in). Read-only."""
        return self._node_position

    # ------------------------------------------------------------ derived: snapshots and quota

    @property
    def tas_snapshots(self) -> dict[str, TASFlavorSnapshot]:
        """Per TAS flavor, its capacity and usage; rebuilt where nodes or definitions changed."""
        if self._snapshots_dirty or self._dirty_flavors or self._node_changes:
            self._refresh_snapshots()
        return self._snapshots

    def derive(self) -> None:
        """Compute now what is otherwise computed when first used after a change (the TAS
        snapshots, the quota tree): once for the copies of this state made by forking the
        process, instead of once in each of them."""
        self.tas_snapshots  # noqa: B018
        self.quota  # noqa: B018

    def warn_unusable_flavors(self) -> None:
        """Say again what building the state said of TAS flavors whose Topology is missing, for
        a copy of a state whose build warnings went unheard (their next refresh names them)."""
        self._dirty_flavors.update(name for name, f in self.flavors.items()
                                   if f.is_tas and self.topologies.get(f.topology_name or "") is None)
        self.tas_snapshots  # noqa: B018 -- the refresh warns

    @property
    def quota(self) -> QuotaTree:
        """Quota and usage of ClusterQueues and Cohorts, filled by workloads holding a reservation."""
        if self._quota is None:
            self._quota = QuotaTree(self.cluster_queues.values(), self.cohorts.values())
            for charge in self.charges.values():
                self._apply_quota(charge, 1)
        return self._quota

    @property
    def quota_usage(self) -> Mapping[str, Mapping[FlavorResource, int]]:
        """Usage per ClusterQueue, flavor and resource (what its admitted workloads hold)."""
        return {name: node.usage for name, node in self.quota.queues.items()}

    def _refresh_snapshots(self) -> None:
        """Make the snapshots of the dirty flavors (all of them after a definition change).
        A flavor's new snapshot carries over, from the one it replaces, the rows of the leaves
        whose nodes did not change; only the other leaves' non-TAS pods and assignment
        domains are counted (see TASFlavorSnapshot)."""
        previous = {} if self._snapshots_dirty else self._snapshots
        sharing_before = self._sharing_shape()
        node_changes = {} if self._snapshots_dirty else self._node_changes
        if self._snapshots_dirty:
            afresh = rebuild = {name for name, f in self.flavors.items() if f.is_tas}
        else:
            afresh = self._dirty_flavors
            rebuild = afresh | node_changes.keys()
        self._snapshots = dict(previous)
        self._snapshots_dirty = False
        self._dirty_flavors = set()
        self._node_changes = {}
        if not self.gates.TopologyAwareScheduling:
            self._snapshots = {}
            return
        rebuilt: list[TASFlavorSnapshot] = []
        for name in sorted(rebuild):
            old = self._snapshots.pop(name, None)
            flavor = self.flavors.get(name)
            if flavor is None or not flavor.is_tas:
                continue
            topology = self.topologies.get(flavor.topology_name or "")
            if topology is None:
                self.warn(f"ResourceFlavor/{flavor.name}: spec.topologyName: Topology "
                          f"{flavor.topology_name!r} not found; the flavor cannot be used for TAS")
                continue
            if old is not None and name not in afresh and old.flavor == flavor and old.topology == topology:
                snap = updated_flavor_snapshot(old, self.nodes, node_changes[name], self._node_position)
            else:
                snap = build_flavor_snapshot(flavor, topology, self.nodes.values(), previous=old)
            self.count_non_tas(snap)
            self._snapshots[name] = snap
            rebuilt.append(snap)
        # keep the flavors' order stable (the order flavors were defined in)
        self._snapshots = {n: self._snapshots[n] for n in self.flavors if n in self._snapshots}
        if self._sharing_shape() != sharing_before:  # another set of flavors shares usage now
            for snap in self._snapshots.values():
                if snap in rebuilt or (self.gates.TASHandleOverlappingFlavors and snap.lowest_is_node):
                    snap.tas_usage[:] = 0
                    snap.usage_changed()
                    snap.fresh_leaves = None
                    if snap not in rebuilt:
                        rebuilt.append(snap)
        if not rebuilt:
            return
        self._count_charges([s for s in rebuilt if s.fresh_leaves is None])
        for snap in rebuilt:
            if snap.fresh_leaves is not None and len(snap.fresh_leaves):
                self.count_charges_on(snap, snap.fresh_leaves.tolist())

    def _sharing_shape(self) -> dict[str, bool]:
        """What decides which snapshots share usage (snapshots_sharing_usage_of)."""
        return {name: snap.lowest_is_node for name, snap in self._snapshots.items()}

    def count_non_tas(self, snap: TASFlavorSnapshot) -> None:
        """The non-TAS pods on the nodes of the snapshot's fresh leaves (every leaf when it
        carried none over)."""
        by_node = self.non_tas_by_node
        if not by_node:
            return
        groups = snap.tree.leaf_nodes
        leaves = range(len(groups)) if snap.fresh_leaves is None else snap.fresh_leaves.tolist()
        snap.add_non_tas_usages([(node.name, requests) for leaf in leaves for node in groups[leaf]
                                 if node.name in by_node for requests in by_node[node.name].values()])

    def _count_charges(self, snapshots: list[TASFlavorSnapshot]) -> None:
        """Every holder's TAS usage on `snapshots`, made afresh."""
        if not snapshots:
            return
        targets = {id(s) for s in snapshots}
        for charge in self.charges.values():
            for tc in charge.tas:
                for snap in self.snapshots_sharing_usage_of(tc.flavor):
                    if id(snap) in targets:
                        snap.add_assignment_usage(tc.assignment, tc.requests, 1)

    def count_charges_on(self, snap: TASFlavorSnapshot, leaves: list[int],
                         counts: Callable[[str], bool] | None = None) -> None:
        """The TAS usage of the holders on `leaves` of `snap`, found through `by_node` (keyed
        by the last value of a domain, which names the leaf). `counts` says whose charges
        count, by their flavor: by default those of the flavors whose usage `snap` shares."""
        values = snap.tree.leaves.values
        only = set(leaves)
        for key in self.workloads_on_nodes(values[leaf][-1] for leaf in leaves):
            for tc in self.charges[key].tas:
                if counts(tc.flavor) if counts is not None else snap in self.snapshots_sharing_usage_of(tc.flavor):
                    snap.add_assignment_usage(tc.assignment, tc.requests, 1, only=only)

    def _mark_flavors(self, names: Iterable[str]) -> None:
        """The flavors' snapshots are to be made afresh."""
        for name in names:
            if name in self._snapshots or (name in self.flavors and self.flavors[name].is_tas):
                self._dirty_flavors.add(name)

    def _mark_node(self, flavors: Iterable[str], node: str) -> None:
        """The node came, went or changed: the snapshots of the flavors whose tree it is, or
        was, part of are to be made again with it."""
        for name in flavors:
            if name in self._snapshots:
                self._node_changes.setdefault(name, set()).add(node)
            else:
                self._mark_flavors([name])

    def flavors_of_node(self, node: Node) -> list[str]:
        """TAS flavors whose node labels the node carries (whose tree it may be part of)."""
        out = []
        for name, flavor in self.flavors.items():
            if flavor.is_tas and carries_labels(node.labels, flavor.node_labels):
                out.append(name)
        return out

    def node_census(self, flavor: ResourceFlavor, level_keys: tuple[str, ...]) -> NodeCensus:
        """How many nodes carry the flavor's labels, and why those outside its topology tree
        are: counted once per change of the nodes, not at every question about them."""
        key = (self.nodes_generation, flavor, level_keys)
        cached = self._censuses.get(flavor.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        census = NodeCensus()
        for node in self.nodes.values():
            if not carries_labels(node.labels, flavor.node_labels):
                continue
            census.nodes_of_flavor += 1
            if not all(level in node.labels for level in level_keys):
                census.missing_level_label += 1
            elif not node.is_ready or node.deleted:
                census.not_ready += 1
            elif node.unschedulable:
                census.unschedulable += 1
        self._censuses[flavor.name] = (key, census)
        return census

    # ------------------------------------------------------------ lookups

    def node_for_hostname(self, hostname: str) -> Node | None:
        return self.nodes_by_hostname.get(hostname) or self.nodes.get(hostname)

    @property
    def inactive_cluster_queues(self) -> Mapping[str, tuple[InactiveCause, ...]]:
        """The ClusterQueues that admit nothing (Kueue's Active=False), each with why."""
        if self._inactive is None:
            self._inactive = {name: causes for name, cq in self.cluster_queues.items()
                              if (causes := inactive_causes(self, cq))}
        return self._inactive

    def namespace_hold(self, namespace: str, cq: ClusterQueue) -> str:
        """Why no workload of `namespace` is admitted in `cq` whatever else changes (the namespace
        check of Kueue's nomination, which its QueueInadmissibleWorkloads applies too): the
        Namespace does not exist, or the ClusterQueue's namespaceSelector does not select it;
        "" when neither, or when the input lists no Namespaces (they are not checked then)."""
        if not self.namespaces:
            return ""
        labels = self.namespaces.get(namespace)
        if labels is None:
            return f"its Namespace {namespace} does not exist"
        if not selector_matches(cq.namespace_selector, labels):
            return f"the namespaceSelector of ClusterQueue {cq.name} does not select its Namespace {namespace}"
        return ""

    def cluster_queue_for(self, wl: Workload) -> ClusterQueue | None:
        if wl.admission is not None:
            return self.cluster_queues.get(wl.admission.cluster_queue)
        lq = self.local_queues.get(wl.local_queue_key)
        return self.cluster_queues.get(lq.cluster_queue) if lq else None

    def priority_of(self, wl: Workload) -> int:
        """Kueue's effective priority: the workload's priority, and with PriorityBoost the
        boost its annotation gives."""
        priority = wl.priority
        if priority is None:
            name = wl.priority_class_name
            priority = self.priority_classes[name].value if name and name in self.priority_classes else 0
        return priority + priority_boost(wl) if self._boost_priorities else priority

    def allowed_flavors_of(self, wl: Workload) -> tuple[str, ...] | None:
        """The flavors a ConcurrentAdmission variant may take (its annotation, read while the
        gate is on); None: any."""
        return allowed_flavors(wl) if self.gates.ConcurrentAdmission else None

    def is_tas_only(self, cq: ClusterQueue) -> bool:
        """Every flavor of the ClusterQueue is a TAS flavor (Kueue's IsTASOnly)."""
        names = cq.flavor_names()
        snapshots = self.tas_snapshots
        return bool(names) and all(n in snapshots for n in names)

    def checks_on_flavor(self, cq: ClusterQueue, flavor: str) -> list[str]:
        """Names of the ClusterQueue's admission checks that apply to workloads using `flavor`."""
        return [rule.name for rule in cq.admission_checks if not rule.on_flavors or flavor in rule.on_flavors]

    def checks_for_flavors(self, cq: ClusterQueue, flavors: Iterable[str]) -> set[str]:
        """Names of the ClusterQueue's admission checks a workload assigned `flavors` must pass, as
        Kueue's AdmissionChecksForWorkload gives them: a check without onFlavors, or whose
        onFlavors cover every flavor of the ClusterQueue, applies whatever the flavors (even
        none); one with other onFlavors when a flavor is among them."""
        flavors = set(flavors)
        every = set(cq.flavor_names())
        return {rule.name for rule in cq.admission_checks
                if not rule.on_flavors or flavors & set(rule.on_flavors) or every <= set(rule.on_flavors)}

    def delays_topology(self, cq: ClusterQueue, flavor: str) -> bool:
        """A ProvisioningRequest check (or MultiKueue) on the flavor: the nodes do not exist yet,
        so TAS is assigned in a second pass once the check is Ready."""
        for name in self.checks_on_flavor(cq, flavor):
            check = self.admission_checks.get(name)
            if check is not None and (check.is_provisioning_request or check.is_multikueue):
                return True
        return False

    def tas_flavor_of(self, psa: PodSetAssignment) -> str | None:
        snapshots = self.tas_snapshots
        tas = {f for f in psa.flavors.values() if f in snapshots}
        return next(iter(tas)) if len(tas) == 1 else None

    def holders(self) -> Iterator[Workload]:
        """Every workload holding quota, ClusterQueue by ClusterQueue."""
        for holders in self.holding.values():
            yield from holders.values()

    def holders_in(self, cq_name: str) -> Iterator[Workload]:
        """Workloads holding quota in the ClusterQueue."""
        return iter(self.holding.get(cq_name, {}).values())

    def replaced_slice(self, wl: Workload, cq_name: str) -> Workload | None:
        """The admitted workload slice `wl` replaces, holding quota in the same ClusterQueue and
        namespace (Kueue's workloadslicing.ReplacedWorkloadSlice); None without one."""
        key = wl.replacement_for
        if key is None or not self.gates.ElasticJobsViaWorkloadSlices:
            return None
        old = self.holding.get(cq_name, {}).get(key)
        return old if old is not None and old.namespace == wl.namespace and old.key != wl.key else None

    def workloads_on_nodes(self, hostnames: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for hostname in hostnames:
            out |= self.by_node.get(hostname, set())
        return out

    def in_order(self, keys: Iterable[str]) -> list[Workload]:
        """The workloads of `keys` that exist, in the state's order."""
        order = self.order
        found = [self._workloads[k] for k in keys if k in self._workloads]
        return sorted(found, key=lambda w: order[w.key])

    # ------------------------------------------------------------ charges (usage of holders)

    def tas_flavor_names(self) -> frozenset[str]:
        """TAS flavors whose Topology exists: the ones with a snapshot (without building them)."""
        if self._tas_flavor_names is None:
            names = {n for n, f in self.flavors.items() if f.is_tas and (f.topology_name or "") in self.topologies}
            self._tas_flavor_names = frozenset(names) if self.gates.TopologyAwareScheduling else frozenset()
        return self._tas_flavor_names

    def reclaimed(self, wl: Workload, pod_set: str) -> int:
        """Pods of the PodSet that completed and give their quota back (status.reclaimablePods,
        read while the ReclaimablePods gate is on)."""
        if not wl.reclaimable_pods or not self.gates.ReclaimablePods:
            return 0
        return wl.reclaimable_pods.get(pod_set, 0)

    def pods_after_reclaim(self, wl: Workload, ps: PodSet) -> int:
        """The pods a PodSet still needs: its count less its reclaimable pods (Kueue's
        podSetsCountsAfterReclaim), what a pending workload asks quota and topology for."""
        return max(ps.count - self.reclaimed(wl, ps.name), 0)

    def charge_of(self, wl: Workload) -> Charge:
        """What the workload's admission adds to quota and TAS usage, as it is now."""
        assert wl.admission is not None
        charge = Charge(wl.admission.cluster_queue)
        snapshots = self.tas_flavor_names()
        charge.names = frozenset(FlavorResource(flavor, resource) for psa in wl.admission.pod_set_assignments
                                 for resource, flavor in psa.flavors.items())
        for psa in wl.admission.pod_set_assignments:
            ps = wl.pod_set(psa.name)
            count = psa.count if psa.count is not None else (ps.count if ps else 0)
            usage: Mapping[str, int] = psa.resource_usage
            if not usage and ps is not None:
                usage = {r: v * count for r, v in self.config.quota_requests(ps.spec.requests).items()}
            # the PodSet now needs fewer pods than were admitted (scaled down, or some completed and
            # are reclaimable): as in Kueue, the admitted usage is scaled to them, per pod first
            remaining = count
            if ps is not None:
                remaining = self.pods_after_reclaim(wl, ps) if ps.count > 0 else count - self.reclaimed(wl, ps.name)
            if count > 0 and remaining < count:
                usage = {r: v // count * max(remaining, 0) for r, v in usage.items()}
            for resource, value in usage.items():
                flavor = psa.flavors.get(resource)
                if flavor is not None:
                    fr = FlavorResource(flavor, resource)
                    charge.quota[fr] = charge.quota.get(fr, 0) + value
            if remaining <= 0 < count:
                continue  # every pod completed: its topology domains are free again
            if psa.topology_assignment is not None and ps is not None:
                tas = {f for f in psa.flavors.values() if f in snapshots}
                if len(tas) == 1:
                    charge.tas.append(TASCharge(next(iter(tas)), psa.topology_assignment, ps.spec.requests))
        return charge

    def orders_by_local_queue_usage(self, cq: ClusterQueue) -> bool:
        """Kueue orders this ClusterQueue's workloads by their LocalQueues' usage (admission fair
        sharing: the gate, the Configuration's section and the ClusterQueue's admissionScope)."""
        return cq.admission_mode == USAGE_BASED_ADMISSION_FAIR_SHARING and self.admission_fair_sharing is not None

    def apply_charge(self, charge: Charge, sign: int) -> None:
        """Add (1) or take back (-1) a charge's quota and TAS usage."""
        self._apply_quota(charge, sign)
        self._apply_tas(charge, sign)

    def _apply_quota(self, charge: Charge, sign: int) -> None:
        if self._quota is None:
            return  # built later from the charges
        for fr, value in charge.quota.items():
            if value:
                self._quota.add_usage(charge.cluster_queue, fr, sign * value)

    def _apply_tas(self, charge: Charge, sign: int) -> None:
        if self._snapshots_dirty or not charge.tas:
            return  # rebuilt later from the charges
        # dirty snapshots too: the next ones carry their rows over
        for tc in charge.tas:
            for snap in self.snapshots_sharing_usage_of(tc.flavor):
                snap.add_assignment_usage(tc.assignment, tc.requests, sign)

    def release_hold(self, charge: Charge) -> None:
        """Take back TAS usage held for one pass only (the pods leaving a replaced node): the
        capacity comes free, and what waits for TAS capacity on its flavors is requeued."""
        self.apply_charge(charge, -1)
        self.changes.tas_released.update(tc.flavor for tc in charge.tas)

    def recharge(self, wl: Workload) -> None:
        """The workload changed in place (admitted, re-placed, evicted for good): bring what it
        holds in line with what it is now."""
        self._uncharge(wl.key)
        if holds_quota(wl) and wl.admission is not None:
            self._charge(wl)

    def _charge(self, wl: Workload) -> None:
        charge = self.charge_of(wl)
        # applied before it is recorded: a quota tree or snapshot built from the records
        # meanwhile must not count it twice (parts not built yet are built from the records)
        self.apply_charge(charge, 1)
        self.charges[wl.key] = charge
        self.holding[charge.cluster_queue][wl.key] = wl
        entry = (self.priority_of(wl), self.order.get(wl.key, 0), wl.key)
        bisect.insort(self.holders_by_priority[charge.cluster_queue], entry)
        self._holder_entry[wl.key] = (charge.cluster_queue, entry)
        for tc in charge.tas:
            for dom in tc.assignment.domains:
                host = dom.values[-1]
                if host not in self.by_node and not node_is_healthy(self.node_for_hostname(host)):
                    self.unhealthy_hosts.add(host)
                self.by_node[host].add(wl.key)

    def _uncharge(self, key: str) -> Charge | None:
        charge = self.charges.pop(key, None)
        if charge is None:
            return None
        self.apply_charge(charge, -1)
        holders = self.holding.get(charge.cluster_queue)
        if holders is not None:
            holders.pop(key, None)
        placed = self._holder_entry.pop(key, None)
        if placed is not None:
            ranked = self.holders_by_priority[placed[0]]
            i = bisect.bisect_left(ranked, placed[1])
            if i < len(ranked) and ranked[i] == placed[1]:
                del ranked[i]
        for tc in charge.tas:
            for dom in tc.assignment.domains:
                keys = self.by_node.get(dom.values[-1])
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self.by_node[dom.values[-1]]
        return charge

    def suspend_usage(self, wl: Workload) -> None:
        """Take a holder's usage out for a moment (preemption search); `resume_usage` puts it back."""
        charge = self.charges.get(wl.key)
        if charge is not None:
            self.apply_charge(charge, -1)

    def resume_usage(self, wl: Workload) -> None:
        charge = self.charges.get(wl.key)
        if charge is not None:
            self.apply_charge(charge, 1)

    # ------------------------------------------------------------ direct usage (what-if tools)

    def add_workload_usage(self, wl: Workload, sign: int) -> None:
        """Quota and TAS usage of a workload's admission as it is now (sign=-1 removes it),
        outside the charge records: for temporary what-if edits that are undone right after."""
        if wl.admission is None:
            return
        self.apply_charge(self.charge_of(wl), sign)

    def add_workload_tas_usage(self, wl: Workload, sign: int) -> None:
        """TAS usage of every PodSet of the workload that has a TopologyAssignment."""
        if wl.admission is None:
            return
        charge = self.charge_of(wl)
        charge.quota = {}
        self._apply_tas(charge, sign)

    def add_tas_assignment_usage(self, psa: PodSetAssignment, requests: Mapping[str, int], sign: int) -> None:
        flavor = self.tas_flavor_of(psa)
        if flavor is None or psa.topology_assignment is None:
            return
        self._apply_tas(Charge("", tas=[TASCharge(flavor, psa.topology_assignment, requests)]), sign)

    def snapshots_sharing_usage_of(self, flavor: str) -> list[TASFlavorSnapshot]:
        """The flavor's own snapshot, plus (TASHandleOverlappingFlavors) every hostname-leaf
        flavor's, since flavors whose lowest level is the hostname can select the same nodes."""
        snapshots = self._snapshots
        own = snapshots.get(flavor)
        if own is None:
            return []
        if not (self.gates.TASHandleOverlappingFlavors and own.lowest_is_node):
            return [own]
        return [s for s in snapshots.values() if s is own or s.lowest_is_node]

    # ------------------------------------------------------------ verbs: nodes and pods

    def upsert_node(self, node: Node) -> None:
        old = self.nodes.get(node.name)
        if old is not None and old == node:
            return
        if old is not None:
            self._forget_hostname(old)
        else:
            self._node_position[node.name] = self._next_node
            self._next_node += 1
        self.nodes[node.name] = node
        self.nodes_generation += 1
        self.nodes_by_hostname[node.labels.get(HOSTNAME_LABEL, node.name)] = node
        self._recheck_hosts(node, old)
        touched = set(self.flavors_of_node(node))
        if old is not None:
            touched |= set(self.flavors_of_node(old))
        self._mark_node(touched, node.name)
        self.changes.flavors |= touched

    def delete_node(self, name: str) -> None:
        old = self.nodes.pop(name, None)
        if old is None:
            return
        del self._node_position[name]
        self.nodes_generation += 1
        self._forget_hostname(old)
        self._recheck_hosts(old)
        touched = set(self.flavors_of_node(old))
        self._mark_node(touched, name)
        self.changes.flavors |= touched

    def _recheck_hosts(self, *nodes: Node | None) -> None:
        """Whether the hostnames these nodes answered to now name a node that is healthy."""
        for node in nodes:
            if node is None:
                continue
            for host in {node.labels.get(HOSTNAME_LABEL, node.name), node.name}:
                pinned = self.pinned_by_host.get(host)
                if pinned:
                    self.pinned_to_check.update(pinned)
                if node_is_healthy(self.node_for_hostname(host)):
                    self.unhealthy_hosts.discard(host)
                else:
                    self.unhealthy_hosts.add(host)

    def failure_candidates(self) -> set[str]:
        """Holders assigned to a node that is missing or not healthy, and those listing
        unhealthy nodes: the only workloads node-failure handling can act on."""
        keys = set(self.with_unhealthy)
        for host in list(self.unhealthy_hosts):
            holders = self.by_node.get(host)
            if holders:
                keys |= holders
            elif node_is_healthy(self.node_for_hostname(host)) or self.node_for_hostname(host) is None:
                self.unhealthy_hosts.discard(host)  # nothing assigned there any more
        return keys

    def _forget_hostname(self, node: Node) -> None:
        hostname = node.labels.get(HOSTNAME_LABEL, node.name)
        if self.nodes_by_hostname.get(hostname) is node:
            del self.nodes_by_hostname[hostname]

    def upsert_pod(self, pod: Pod) -> None:
        key = pod.key
        old = self._pods.get(key)
        if old is pod:
            return
        if old is not None:
            self._unindex_pod(old)
        else:
            self._pod_order[key] = self._next_pod
            self._next_pod += 1
        self._pods[key] = pod
        self._index_pod(pod)

    def delete_pod(self, key: str) -> None:
        old = self._pods.pop(key, None)
        if old is not None:
            self._pod_order.pop(key, None)
            self._unindex_pod(old)

    def _index_pod(self, pod: Pod) -> None:
        wl_name = pod.annotations.get(WORKLOAD_ANNOTATION) if pod.annotations else None
        if wl_name:
            self.pods_by_workload[f"{pod.namespace}/{wl_name}"][pod.key] = pod
        owner = pod_owner(pod)
        if owner is not None:
            self.pods_by_owner[owner][pod.key] = pod
            if pod.gated_by_topology and not pod.terminal:
                self.gated_owners[owner] += 1
        host = selected_hostname(pod)
        if host:
            self.pinned_by_host[host][pod.key] = pod
            self.pinned_by_workload[f"{pod.namespace}/{pod.annotations[WORKLOAD_ANNOTATION]}"].add(pod.key)
            self.pinned_to_check.add(pod.key)
        if counts_as_non_tas_usage(pod):
            self.non_tas_by_node[pod.node_name][pod.key] = pod.spec.requests
            self._non_tas_usage(pod, 1)

    def _unindex_pod(self, pod: Pod) -> None:
        wl_name = pod.annotations.get(WORKLOAD_ANNOTATION) if pod.annotations else None
        if wl_name:
            by_wl = self.pods_by_workload.get(f"{pod.namespace}/{wl_name}")
            if by_wl is not None:
                by_wl.pop(pod.key, None)
                if not by_wl:
                    del self.pods_by_workload[f"{pod.namespace}/{wl_name}"]
        owner = pod_owner(pod)
        if owner is not None:
            pods = self.pods_by_owner.get(owner)
            if pods is not None:
                pods.pop(pod.key, None)
                if not pods:
                    del self.pods_by_owner[owner]
            if pod.gated_by_topology and not pod.terminal:
                self.gated_owners[owner] -= 1
                if self.gated_owners[owner] <= 0:
                    del self.gated_owners[owner]
        host = selected_hostname(pod)
        if host:
            _discard(self.pinned_by_host, host, pod.key)
            _discard(self.pinned_by_workload, f"{pod.namespace}/{pod.annotations[WORKLOAD_ANNOTATION]}", pod.key)
            self.pinned_to_check.discard(pod.key)
        if counts_as_non_tas_usage(pod):
            on_node = self.non_tas_by_node.get(pod.node_name)
            if on_node is not None:
                on_node.pop(pod.key, None)
                if not on_node:
                    del self.non_tas_by_node[pod.node_name]
            self._non_tas_usage(pod, -1)

    def _non_tas_usage(self, pod: Pod, sign: int) -> None:
        node = self.nodes.get(pod.node_name)
        if node is None:
            return
        flavors = self.flavors_of_node(node)
        if sign < 0:
            self.changes.flavors.update(flavors)  # capacity freed: may admit waiting workloads
        if self._snapshots_dirty:
            return
        for name in flavors:  # dirty snapshots too: the next ones carry their rows over
            snap = self._snapshots.get(name)
            if snap is not None:
                snap.add_non_tas_usages([(pod.node_name, pod.spec.requests)], sign=sign)

    def pods_in_order(self, keys: Iterable[str]) -> list[Pod]:
        """The pods of `keys` that exist, in the order they were first added."""
        pods, order = self._pods, self._pod_order
        return [pods[k] for k in sorted(keys, key=lambda k: order.get(k, 0)) if k in pods]

    def pods_of(self, key: str) -> list[Pod]:
        """The pods of workload `key` (by their `kueue.x-k8s.io/workload` annotation)."""
        pods = self.pods_by_workload.get(key)
        if not pods:
            return []
        order = self._pod_order
        return sorted(pods.values(), key=lambda p: order.get(p.key, 0))

    # ------------------------------------------------------------ verbs: workloads

    def upsert_workload(self, wl: Workload, *, order: int | None = None) -> None:
        """Add or update a workload; `order` places a new one in the state's order (default:
        after every other)."""
        key = wl.key
        old = self._workloads.get(key)
        if key not in self.order:
            if order is None:
                order = self._next_order
            self.order[key] = order
            self._next_order = max(self._next_order, order + 1)
        if old is not None:
            self._forget_slice(old)
        self._workloads[key] = wl
        self.slice_members[(wl.namespace, slice_name(wl))].add(key)
        parent = parent_workload_name(wl)
        if parent is not None:
            self.owned_workloads[f"{wl.namespace}/{parent}"].add(key)
        released = self._uncharge(key)
        if holds_quota(wl) and wl.admission is not None:
            self._charge(wl)
            new_charge = self.charges[key]
        else:
            new_charge = None
        if new_charge is not None and wl.unhealthy_nodes:
            self.with_unhealthy.add(key)
        else:
            self.with_unhealthy.discard(key)
        if new_charge is not None and not wl.is_admitted:
            self.reserved_not_admitted.add(key)
        else:
            self.reserved_not_admitted.discard(key)
        if new_charge is not None and wl.admission_checks and has_failed_checks(wl):
            self.with_failed_checks.add(key)
        else:
            self.with_failed_checks.discard(key)
        if wl.admission_checks and not wl.is_finished and has_retry_delay(wl):
            self.with_retry_delay.add(key)
        else:
            self.with_retry_delay.discard(key)
        if not wl.active and not wl.is_finished and not wl.condition_true("Evicted"):
            self.to_deactivate.add(key)
        else:
            self.to_deactivate.discard(key)
        if released is not None:
            self._released_generation[released.cluster_queue] += 1
            if not _same_charge(released, new_charge):
                self._released(released)
        self._recheck_pinned(key)
        self.changes.workloads[key] = wl
        del old

    def delete_workload(self, key: str) -> None:
        old = self._workloads.pop(key, None)
        if old is None:
            return
        self._forget_slice(old)
        self.with_unhealthy.discard(key)
        self.reserved_not_admitted.discard(key)
        self.with_failed_checks.discard(key)
        self.with_retry_delay.discard(key)
        self.to_deactivate.discard(key)
        self.order.pop(key, None)
        released = self._uncharge(key)
        if released is not None:
            self._released_generation[released.cluster_queue] += 1
            self._released(released)
        self._recheck_pinned(key)
        self.changes.workloads[key] = None

    def _recheck_pinned(self, key: str) -> None:
        pinned = self.pinned_by_workload.get(key)
        if pinned:
            self.pinned_to_check.update(pinned)

    def _released(self, charge: Charge) -> None:
        """A workload gave back (some of) what it held: quota in its cohort, TAS capacity."""
        self.changes.cluster_queues.add(charge.cluster_queue)
        self.changes.tas_released.update(tc.flavor for tc in charge.tas)

    def _forget_slice(self, wl: Workload) -> None:
        _discard(self.slice_members, (wl.namespace, slice_name(wl)), wl.key)
        parent = parent_workload_name(wl)
        if parent is not None:
            _discard(self.owned_workloads, f"{wl.namespace}/{parent}", wl.key)

    def waits_as_parent(self, wl: Workload) -> bool:
        """The workload is a ConcurrentAdmission parent, kept off its queue while the gate is
        on: its variants are scheduled, not it."""
        return self.gates.ConcurrentAdmission and is_concurrent_admission_parent(wl)

    def variants_of(self, key: str) -> list[Workload]:
        """The workloads the workload `key` owns (a ConcurrentAdmission parent's variants), in
        the state's order."""
        owned = self.owned_workloads.get(key, ())
        return sorted((self._workloads[k] for k in owned), key=lambda w: self.order.get(w.key, 0))

    def allocatable_resource_generation(self, cq_name: str) -> int:
        """Kueue's AllocatableResourceGeneration of a ClusterQueue: it advances whenever something
        may let more workloads fit there, and a flavor scan recorded at an older generation is stale."""
        return self._definitions_generation + self._released_generation.get(cq_name, 0)

    def workload_changed(self, wl: Workload) -> None:
        """The engine changed the workload in place (admitted, evicted, re-placed)."""
        self.upsert_workload(wl)

    # ------------------------------------------------------------ verbs: definitions

    def upsert_topology(self, t: Topology) -> None:
        if self.topologies.get(t.name) == t:
            return
        self._inactive = None
        self.topologies[t.name] = t
        self._tas_flavors_changed()
        flavors = [n for n, f in self.flavors.items() if f.topology_name == t.name]
        self._mark_flavors(flavors)
        self.changes.flavors.update(flavors)

    def delete_topology(self, name: str) -> None:
        if self.topologies.pop(name, None) is None:
            return
        self._inactive = None
        self._tas_flavors_changed()
        flavors = [n for n, f in self.flavors.items() if f.topology_name == name]
        self._mark_flavors(flavors)
        self.changes.flavors.update(flavors)

    def upsert_flavor(self, f: ResourceFlavor) -> None:
        old = self.flavors.get(f.name)
        if old == f:
            return
        self._inactive = None
        self.flavors[f.name] = f
        # which flavors share usage (hostname-leaf ones) may change with it: rebuild all
        self._snapshots_dirty = True
        self._tas_flavors_changed()
        self.changes.requeue_all = True

    def delete_flavor(self, name: str) -> None:
        if self.flavors.pop(name, None) is None:
            return
        self._inactive = None
        self._snapshots_dirty = True
        self._tas_flavors_changed()
        self.changes.requeue_all = True

    def _tas_flavors_changed(self) -> None:
        """A Topology or ResourceFlavor changed: holders on a flavor that became, or stopped
        being, a TAS flavor with a Topology hold TAS usage now, or no longer (charge_of)."""
        before = self._tas_flavor_names
        self._tas_flavor_names = None
        if before is None:
            return
        changed = before ^ self.tas_flavor_names()
        if not changed:
            return
        stale = [key for key, charge in self.charges.items() if any(fr.flavor in changed for fr in charge.names)]
        for wl in self.in_order(stale):
            self.recharge(wl)

    def upsert_cluster_queue(self, cq: ClusterQueue) -> None:
        old = self.cluster_queues.get(cq.name)
        if old == cq:
            return
        self._inactive = None
        self.cluster_queues[cq.name] = cq
        self._quota = None
        self._definitions_generation += 1
        self.changes.cluster_queues.add(cq.name)
        if old is not None and old.cohort != cq.cohort and old.cohort:
            self.changes.requeue_all = True  # the old cohort's ClusterQueues may borrow what it left
        self.changes.queues_changed = True

    def delete_cluster_queue(self, name: str) -> None:
        old = self.cluster_queues.pop(name, None)
        if old is None:
            return
        self._inactive = None
        self._quota = None
        self._definitions_generation += 1
        self.changes.requeue_all = True
        self.changes.queues_changed = True

    def upsert_local_queue(self, lq: LocalQueue) -> None:
        old = self.local_queues.get(lq.key)
        if old == lq:
            return
        self.local_queues[lq.key] = lq
        self.changes.usage_changed.add(lq.key)  # its weight may have changed, or its status
        if old is None or (old.consumed, old.consumed_at) != (lq.consumed, lq.consumed_at):
            self._take_usage_status(lq)
        if old is not None and old.same_spec(lq):
            return  # only its admission fair sharing status changed: its workloads stay where they are
        self.changes.queues_changed = True

    def delete_local_queue(self, key: str) -> None:
        self.lq_usage.pop(key, None)
        if self.local_queues.pop(key, None) is not None:
            self.changes.queues_changed = True

    # ------------------------------------------------------------ admission fair sharing

    @property
    def admission_fair_sharing(self) -> AdmissionFairSharing | None:
        """The Configuration's admissionFairSharing while the gate is on (None: no LocalQueue
        usage is kept, as Kueue keeps none)."""
        afs = self.config.admission_fair_sharing
        return afs if afs is not None and self.gates.AdmissionFairSharing else None

    def _take_usage_status(self, lq: LocalQueue) -> None:
        """The usage a LocalQueue's status reports (written by Kueue, or by an earlier pass):
        the penalties of admissions not yet sampled stay on top of it."""
        entry = self.lq_usage.get(lq.key)
        if entry is None:
            entry = self.lq_usage[lq.key] = UsageEntry()
        entry.consumed = dict(lq.consumed)
        entry.sampled_at = lq.consumed_at

    def local_queue_usage(self, lq_key: str) -> float:
        """The LocalQueue's usage as admission fair sharing orders by it: consumed resources and
        pending penalties, weighed, divided by the LocalQueue's weight."""
        afs = self.admission_fair_sharing
        entry = self.lq_usage.get(lq_key)
        usage = entry.weighted(afs.resource_weights) if entry is not None and afs is not None else 0.0
        lq = self.local_queues.get(lq_key)
        return usage_order(usage, lq.fair_weight if lq is not None else 1.0)

    def local_queue_usages(self) -> list[LocalQueueUsage]:
        """Every LocalQueue's admission fair sharing usage, by namespace and name (none when
        no usage is kept: no admissionFairSharing, or its gate off)."""
        if self.admission_fair_sharing is None:
            return []
        out = []
        for key in sorted(self.local_queues):
            lq = self.local_queues[key]
            cq = self.cluster_queues.get(lq.cluster_queue)
            usage = self.local_queue_usage(key)
            entry = self.lq_usage.get(key) or UsageEntry()
            out.append(LocalQueueUsage(
                lq.namespace, lq.name, lq.cluster_queue, lq.fair_weight, usage if math.isfinite(usage) else None,
                cq is not None and self.orders_by_local_queue_usage(cq),
                UsageEntry(dict(entry.consumed), entry.sampled_at, dict(entry.penalty), entry.has_penalty)))
        return out

    def charge_penalty(self, wl: Workload, charge: Charge) -> None:
        """A workload was admitted (its quota reserved): its LocalQueue's entry penalty."""
        afs = self.admission_fair_sharing
        if afs is None:
            return
        requests: dict[str, int] = defaultdict(int)
        for fr, value in charge.quota.items():
            requests[fr.resource] += value
        key = wl.local_queue_key
        entry = self.lq_usage.get(key)
        if entry is None:
            entry = self.lq_usage[key] = UsageEntry()
        add_into(entry.penalty, entry_penalty(requests, afs))
        entry.has_penalty = True
        self.changes.usage_changed.add(key)

    def sample_usage(self, now: datetime, *, penalties_only: bool = False) -> list[str]:
        """Kueue's LocalQueue controller: every LocalQueue of an active ClusterQueue that was never
        sampled, has penalties to take in, or (unless `penalties_only`) whose sampling interval
        has passed, is sampled now. Returns the LocalQueues sampled."""
        afs = self.admission_fair_sharing
        if afs is None:
            return []
        inactive = self.inactive_cluster_queues
        interval = afs.usage_sampling_interval_seconds
        due: dict[str, UsageEntry] = {}
        for key, lq in self.local_queues.items():
            if lq.cluster_queue not in self.cluster_queues or lq.cluster_queue in inactive:
                continue
            entry = self.lq_usage.get(key)
            if entry is None:
                entry = self.lq_usage[key] = UsageEntry()
            if (entry.sampled_at is None or entry.has_penalty
                    or (not penalties_only and (now - entry.sampled_at).total_seconds() >= interval)):
                due[key] = entry
        if not due:
            return []
        admitted = self._admitted_usage(due.keys())
        for key, entry in due.items():
            entry.sample(now, admitted.get(key, {}), afs.usage_half_life_seconds)
        self.changes.usage_changed.update(due)
        self.usage_sampled.update(due)
        return list(due)

    def take_usage_sampled(self) -> dict[str, UsageEntry]:
        """The LocalQueues sampled since the last call, with their usage (for their status)."""
        keys, self.usage_sampled = self.usage_sampled, set()
        return {key: self.lq_usage[key] for key in sorted(keys) if key in self.lq_usage}

    def _admitted_usage(self, lq_keys: Iterable[str]) -> dict[str, dict[str, float]]:
        """What the admitted workloads of each LocalQueue hold, per resource."""
        wanted = set(lq_keys)
        queues = {self.local_queues[k].cluster_queue for k in wanted}
        out: dict[str, dict[str, float]] = {}
        for cq in queues:
            for key, wl in self.holding.get(cq, {}).items():
                lq_key = wl.local_queue_key
                charge = self.charges.get(key)
                if lq_key not in wanted or charge is None or not wl.is_admitted:
                    continue
                usage = out.setdefault(lq_key, {})
                for fr, value in charge.quota.items():
                    usage[fr.resource] = usage.get(fr.resource, 0.0) + afs_amount(fr.resource, value)
        return out

    def upsert_cohort(self, c: Cohort) -> None:
        if self.cohorts.get(c.name) == c:
            return
        self.cohorts[c.name] = c
        self._quota = None
        self._definitions_generation += 1
        self.changes.requeue_all = True

    def delete_cohort(self, name: str) -> None:
        if self.cohorts.pop(name, None) is None:
            return
        self._quota = None
        self._definitions_generation += 1
        self.changes.requeue_all = True

    def upsert_admission_check(self, ac: AdmissionCheck) -> None:
        if self.admission_checks.get(ac.name) == ac:
            return
        self._inactive = None
        self.admission_checks[ac.name] = ac
        self.changes.requeue_all = True

    def delete_admission_check(self, name: str) -> None:
        if self.admission_checks.pop(name, None) is not None:
            self._inactive = None
            self.changes.requeue_all = True

    def upsert_namespace(self, namespace: Namespace) -> None:
        """A Namespace's labels, for the namespaceSelectors. As Kueue's ClusterQueue controller
        (its namespace handler), a relabel requeues the ClusterQueues that select the namespace
        now and did not before; a Namespace created or deleted requeues nothing."""
        before = self.namespaces.get(namespace.name)
        labels = self.namespaces[namespace.name] = dict(namespace.labels)
        if before is None or before == labels:
            return
        self.changes.cluster_queues.update(
            name for name, cq in self.cluster_queues.items()
            if selector_matches(cq.namespace_selector, labels) and not selector_matches(cq.namespace_selector, before))

    def delete_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)

    def upsert_priority_class(self, pc: WorkloadPriorityClass) -> None:
        if self.priority_classes.get(pc.name) == pc:
            return
        self.priority_classes[pc.name] = pc
        self.changes.requeue_all = True  # queue order of workloads using it changes
        self._rank_holders()

    def delete_priority_class(self, name: str) -> None:
        if self.priority_classes.pop(name, None) is not None:
            self.changes.requeue_all = True
            self._rank_holders()

    def _rank_holders(self) -> None:
        """Priorities changed: rank every holder again."""
        self.holders_by_priority = defaultdict(list)
        self._holder_entry = {}
        for cq, holders in self.holding.items():
            ranked = sorted((self.priority_of(w), self.order.get(k, 0), k) for k, w in holders.items())
            self.holders_by_priority[cq] = ranked
            self._holder_entry.update((e[2], (cq, e)) for e in ranked)

    def take_changes(self) -> Changes:
        changes, self.changes = self.changes, Changes()
        return changes


def _discard(index: dict, key: str, member: str) -> None:
    """Take `member` out of `index[key]` (a dict or set), and the key with its last member."""
    members = index.get(key)
    if members is None:
        return
    if isinstance(members, dict):
        members.pop(member, None)
    else:
        members.discard(member)
    if not members:
        del index[key]


def _same_charge(a: Charge | None, b: Charge | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.cluster_queue == b.cluster_queue and a.quota == b.quota and a.tas == b.tas
