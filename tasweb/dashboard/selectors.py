"""Reads behind the dashboard's pages.

The topology heatmap needs every node of a TAS flavor, Ready or not: the engine's own
snapshot (`ClusterState.tas_snapshots`) leaves NotReady and cordoned nodes out because
nothing can be placed there, but an operator wants to see them, marked. So the dashboard
builds a *display snapshot* with the engine's own classes (`TopologyTree`,
`TASFlavorSnapshot`, `level_totals`) over all the flavor's nodes, from the same cached
engine view of the mirror the API answers from, once per mirror version.

Everything else (workloads, assignments decoded and encoded, why-pending, quota, queue
order, history) comes from `tasweb.api.selectors` and the API's history filter.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.core.paginator import Paginator
from django.db.models import CharField, Count, Max, Min, QuerySet, Value
from django.db.models.functions import Concat
from django.http import QueryDict
from rest_framework.exceptions import ValidationError

from scheduler.admission_fair_sharing import display_text
from scheduler.capacity import level_totals
from scheduler.cluster import ClusterState, counts_as_non_tas_usage
from scheduler.model import STOP_NONE, Node, Pod, ResourceFlavor, Topology, selector_text
from scheduler.quantity import CPU, MEMORY, PODS, parse_quantity, resource_value
from scheduler.queue_status import STOPPED_ONLY_MESSAGE
from scheduler.results import message_shape
from scheduler.snapshot import TASFlavorSnapshot
from scheduler.tree import TopologyTree, carries_labels, natural_path_order, node_matches_flavor
from tasweb.api import selectors as api
from tasweb.api.filters import ComparisonFilter, EventFilter
from tasweb.api.kubeauth import UNRESTRICTED, AccessScope
from tasweb.api.pagination import meant_hint
from tasweb.api.state import EngineView, mirror_version, remembered
from tasweb.cluster import models as cluster
from tasweb.cluster.services import stop_policy_of
from tasweb.scheduling.models import EventKind, PredictionRun, WorkloadEvent, WorkloadPrediction
from tasweb.scheduling.selectors import prediction_run

# node conditions marked on the heatmap (bits of `FlavorCapacity.leaf_flags`)
NOT_READY, CORDONED, TAINTED = 1, 2, 4
FLAG_NAMES = {NOT_READY: "NotReady", CORDONED: "cordoned (unschedulable)", TAINTED: "tainted"}
METRICS = {"used": "used (% of capacity)", "free": "free (% of capacity)", "free_units": "free (amount)"}
DEFAULT_METRIC = "used"


class DashboardError(Exception):
    """Bad input from the address bar: shown as a page with this status and message."""

    status = 400
    title = "Bad request"

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class NotFound(DashboardError):
    status = 404
    title = "Not found"


class BadInput(DashboardError):
    status = 400
    title = "Bad request"


class Forbidden(DashboardError):
    status = 403
    title = "Forbidden"


# ---------------------------------------------------------------- units


@dataclass(frozen=True)
class Unit:
    resource: str
    label: str  # what a number of it is called on a page: "cores", "GiB", "nvidia.com/gpu"
    scale: float  # stored integer value / scale = the number shown

    def show(self, value: float) -> str:
        amount = value / self.scale
        text = f"{amount:,.0f}" if abs(amount - round(amount)) < 1e-9 else f"{amount:,.1f}"
        return f"{text} {self.label}"


def unit_of(resource: str) -> Unit:
    """How a resource's stored integers (milli-CPU, bytes, units) are shown."""
    if resource == CPU:
        return Unit(resource, "cores", 1000)
    if resource == MEMORY or resource.endswith("storage") or resource.startswith("hugepages-"):
        return Unit(resource, "GiB", 2**30)
    if resource == PODS:
        return Unit(resource, "pods", 1)
    return Unit(resource, resource, 1)


def stored_value(resource: str, text: str | None) -> int | None:
    """A quantity string of the API (`format_value`'s) back as the engine's integer."""
    if text in (None, ""):
        return None
    return resource_value(resource, str(text))


def resource_order(name: str) -> tuple[int, str]:
    """Extended resources (GPUs...) first: on a TAS cluster they are what is scarce."""
    if "/" in name:
        return (0, name)
    return ({CPU: 1, MEMORY: 2, PODS: 3}.get(name, 4), name)


# ---------------------------------------------------------------- the display snapshot


@dataclass(eq=False)
class FlavorCapacity:
    """Every node of one TAS flavor in topology order, with capacity, usage, conditions and
    the workloads in every domain. Per level, matrices (domains x resources) in the order of
    `tree.levels[level].values`; the lowest level is the leaves (nodes, for a hostname level)."""

    flavor: str
    topology: str
    levels: tuple[str, ...]
    resources: tuple[str, ...]  # in resource_order
    tree: TopologyTree
    allocatable: list[np.ndarray]
    tas_usage: list[np.ndarray]
    other_usage: list[np.ndarray]
    flag_counts: list[np.ndarray]  # per level: domains x 3 (NotReady, cordoned, tainted nodes)
    leaf_flags: np.ndarray  # per leaf: NOT_READY | CORDONED | TAINTED bits
    leaf_taints: list[str]
    workloads: dict[tuple[str, ...], list[str]]  # domain path -> workload keys, sorted
    nodes_without_levels: int  # nodes of the flavor missing a level label (not in the tree)

    @property
    def depth(self) -> int:
        return len(self.levels)

    @property
    def leaf_count(self) -> int:
        return self.tree.leaf_count

    def column(self, resource: str) -> int:
        return self.resources.index(resource)

    def domain_index(self, path: tuple[str, ...]) -> int | None:
        """Index within its level of the domain named by a path of values from the root."""
        return self.tree.domain_index(path)

    def nodes_of_leaf(self, leaf: int) -> list[str]:
        return [n.name for n in self.tree.leaf_nodes[leaf]]


def _leaf_conditions(tree: TopologyTree, current: Mapping[str, Node], only: Iterable[int] | None = None,
                     ) -> tuple[np.ndarray, list[str]]:
    """Per leaf (of `only`, the others left clear), the conditions of its nodes as they are
    now (`current`, by name: a tree kept across node changes holds the nodes as they were
    when it was made)."""
    flags = np.zeros(tree.leaf_count, dtype=np.int64)
    taints: list[str] = [""] * tree.leaf_count
    for leaf in range(tree.leaf_count) if only is None else only:
        group = [current.get(n.name, n) for n in tree.leaf_nodes[leaf]]
        bits = 0
        for node in group:
            if not node.is_ready or node.deleted:
                bits |= NOT_READY
            if node.unschedulable:
                bits |= CORDONED
            if node.taints:
                bits |= TAINTED
        flags[leaf] = bits
        taints[leaf] = ", ".join(str(t) for node in group for t in node.taints)
    return flags, taints


def _flag_counts(tree: TopologyTree, leaf_flags: np.ndarray) -> list[np.ndarray]:
    """Per level and domain, how many of its nodes are NotReady, cordoned, tainted."""
    per_leaf = np.stack([(leaf_flags & bit) > 0 for bit in (NOT_READY, CORDONED, TAINTED)], axis=1).astype(np.int64)
    counts: list[np.ndarray] = [per_leaf]
    for lvl in range(tree.depth - 2, -1, -1):
        above = np.zeros((len(tree.levels[lvl]), 3), dtype=np.int64)
        np.add.at(above, tree.levels[lvl + 1].parent, counts[0])
        counts.insert(0, above)
    return counts


@dataclass(frozen=True, eq=False)
class DisplayFrame:
    """What a flavor's display takes from its nodes and definitions alone: the tree of every
    node of the flavor (Ready or not, cordoned or not), numbers in names in numeric order,
    and the nodes' conditions. It is kept across versions of the view while `basis`, the
    engine's own snapshot of the flavor, is the same object: the engine makes a new one
    whenever a node of the flavor, the flavor or its Topology changes."""

    basis: TASFlavorSnapshot | None  # None: the engine has none (TAS off), nothing is kept
    flavor: ResourceFlavor
    topology: Topology
    tree: TopologyTree
    leaf_flags: np.ndarray
    leaf_taints: list[str]
    flag_counts: list[np.ndarray]
    nodes_without_levels: int
    # every node of the state when the frame was made, by name: the next version's nodes are
    # compared with them by identity (the engine makes a new Node whenever one changes), and
    # only those that changed are looked at. A node that only goes NotReady, is cordoned or
    # tainted leaves the tree as it is (`_tree_part`): the next frame keeps it, and the usage
    # counted on it, and reads the flags of that node's leaf again. One that comes, goes,
    # moves or is resized has the next tree made from this one, and the usage moved onto it.
    seen: Mapping[str, Node] = field(default_factory=dict)
    members: Mapping[str, Node] = field(default_factory=dict)  # the tree's nodes as they are now


def _display_frame(view: EngineView, flavor: str) -> DisplayFrame | None:
    state = view.state
    rf = state.flavors.get(flavor)
    topology = state.topologies.get(rf.topology_name or "") if rf is not None and rf.is_tas else None
    if rf is None or topology is None:
        return None
    basis = state.tas_snapshots.get(flavor)
    kept = view.kept.get(("display-frame", flavor))
    if kept is not None and (kept.flavor is not rf or kept.topology is not topology):
        kept = None
    if kept is not None and basis is not None and kept.basis is basis:
        return kept
    frame = _frame_patched(kept, state, basis) if kept is not None else None
    if frame is None:
        frame = _frame_made(state, rf, topology, basis)
    if basis is not None:
        view.kept[("display-frame", flavor)] = frame
    return frame


def _tree_part(node: Node | None, rf: ResourceFlavor, levels: tuple[str, ...]) -> tuple | None:
    """What a node brings to a flavor's display tree: its level values and allocatable; None
    for no node or one not of the flavor, () for one of the flavor without every level."""
    if node is None or not carries_labels(node.labels, rf.node_labels):
        return None
    if not all(level in node.labels for level in levels):
        return ()
    return tuple(node.labels[level] for level in levels), tuple(sorted(node.allocatable.items()))


def _frame_made(state: ClusterState, rf: ResourceFlavor, topology: Topology,
                basis: TASFlavorSnapshot | None) -> DisplayFrame:
    of_flavor = [n for n in state.nodes.values() if carries_labels(n.labels, rf.node_labels)]
    nodes = [n for n in of_flavor if node_matches_flavor(n.labels, rf.node_labels, topology.levels)]
    # numbers in names compared as numbers (b2 before b10): for people, not for placement
    tree = TopologyTree(topology.levels, nodes, path_order=natural_path_order)
    members = {n.name: n for n in nodes}
    leaf_flags, leaf_taints = _leaf_conditions(tree, members)
    return DisplayFrame(basis=basis, flavor=rf, topology=topology, tree=tree, leaf_flags=leaf_flags,
                        leaf_taints=leaf_taints, flag_counts=_flag_counts(tree, leaf_flags) if tree.depth else [],
                        nodes_without_levels=len(of_flavor) - len(nodes), seen=dict(state.nodes), members=members)


def _frame_patched(kept: DisplayFrame, state: ClusterState, basis: TASFlavorSnapshot | None) -> DisplayFrame | None:
    """The kept frame brought up to date with the nodes that changed since it was made (by
    identity). A node of the flavor added, gone, moved or resized changes the tree: it is made
    from the kept one (`TopologyTree.with_changes`), the other leaves' conditions kept. None
    when the tree must be made afresh."""
    seen, current = kept.seen, state.nodes
    changed = [name for name, node in current.items() if seen.get(name) is not node]
    added = sum(1 for name in changed if name not in seen)
    gone = [name for name in seen if name not in current] if len(current) - added != len(seen) else []
    levels = tuple(kept.topology.levels)
    members, without_levels = dict(kept.members), kept.nodes_without_levels
    reshaped: list[str] = []  # nodes whose part in the tree changed
    looked_at: list[str] = []  # nodes of the tree whose conditions are read again
    for name in [*changed, *gone]:
        before, after = _tree_part(seen.get(name), kept.flavor, levels), _tree_part(current.get(name), kept.flavor,
                                                                                       levels)
        without_levels += (after == ()) - (before == ())
        if before != after and (before or after):
            reshaped.append(name)
        if after:
            members[name] = current[name]
            looked_at.append(name)
        else:
            members.pop(name, None)
    tree, flags, taints, counts = kept.tree, kept.leaf_flags, kept.leaf_taints, kept.flag_counts
    leaves: set[int] = set()
    if reshaped:
        made = tree.with_changes(reshaped, [current[name] for name in reshaped if name in members],
                                 state.node_position)
        if made is None:
            return None
        tree, carry = made
        flags = np.zeros(tree.leaf_count, dtype=np.int64)
        flags[carry.new] = kept.leaf_flags[carry.old]
        taints = [""] * tree.leaf_count
        for new, old in zip(carry.new.tolist(), carry.old.tolist(), strict=True):
            taints[new] = kept.leaf_taints[old]
        leaves.update(carry.fresh)
    leaves.update(tree.node_to_leaf[name] for name in looked_at)
    if leaves or reshaped:
        fresh, fresh_taints = _leaf_conditions(tree, members, sorted(leaves))
        if reshaped or any(fresh[leaf] != flags[leaf] or fresh_taints[leaf] != taints[leaf] for leaf in leaves):
            if not reshaped:  # the kept frame's arrays are shared: changed in copies
                flags, taints = flags.copy(), list(taints)
            for leaf in leaves:
                flags[leaf], taints[leaf] = fresh[leaf], fresh_taints[leaf]
            counts = _flag_counts(tree, flags) if tree.depth else []
    return dataclasses.replace(kept, basis=basis, tree=tree, leaf_flags=flags, leaf_taints=taints,
                               flag_counts=counts, nodes_without_levels=without_levels,
                               seen=dict(current) if changed or gone else seen, members=members)


@dataclass(eq=False)
class DisplayUsage:
    """The display snapshot of a frame with its usage, and the workloads in each domain, kept
    across versions of the view: brought up to date from what changed in the engine since.

    The engine makes a new `Charge` whenever a workload holding quota changes (and drops it
    when the workload stops holding any), and a new `Pod` whenever a pod changes: comparing
    its charges and pods by identity with those seen last finds every change, and only those
    are taken back and added again (at 50,000 nodes, counting every admitted workload and pod
    afresh took a second at every version)."""

    snap: TASFlavorSnapshot  # on the display frame's tree (moved onto the next one, `move_to`)
    occupants: api.DomainOccupants  # on the same tree; follows the charges
    pods: dict[str, Pod] = field(default_factory=dict)  # as last seen

    def follow(self, state: ClusterState) -> None:
        flavor = self.snap.name
        for old, new in self.occupants.follow(state):
            for charge, sign in ((old, -1), (new, 1)):
                for tc in charge.tas if charge is not None else ():
                    if tc.flavor == flavor:
                        self.snap.add_assignment_usage(tc.assignment, tc.requests, sign)
        pods = state.pod_map()
        moved = [key for key, pod in pods.items() if self.pods.get(key) is not pod]
        moved += [key for key in self.pods if key not in pods]
        for sign, seen in ((-1, self.pods), (1, pods)):
            self.snap.add_non_tas_usages(((p.node_name, p.spec.requests) for p in (seen.get(k) for k in moved)
                                          if p is not None and counts_as_non_tas_usage(p)), sign=sign)
        self.pods = dict(pods)

    def move_to(self, frame: DisplayFrame, state: ClusterState) -> bool:
        """Onto the frame's tree, made from this usage's tree after nodes changed, once this
        usage follows `state`: the rows of the leaves whose nodes are the same are carried,
        the other leaves counted from the state (the charges and non-TAS pods on their nodes).
        False when every leaf would be counted afresh: a new usage is made instead."""
        flavor = self.snap.name
        snap = TASFlavorSnapshot(frame.flavor, frame.topology, frame.tree, previous=self.snap)
        if snap.fresh_leaves is None:
            return False
        state.count_non_tas(snap)
        # the display counts its own flavor's charges only
        state.count_charges_on(snap, snap.fresh_leaves.tolist(), counts=lambda name: name == flavor)
        self.snap = snap
        self.occupants.move_to(frame.tree, state)
        return True


def _display_usage(view: EngineView, frame: DisplayFrame) -> DisplayUsage:
    """The flavor's capacity and usage on every node of its display tree: what bound pods
    outside Kueue use, and what admitted workloads hold as the engine counts it (its
    charges), on NotReady and cordoned nodes too; kept with the frame (see DisplayUsage)."""
    state = view.state
    tas_flavors = state.tas_flavor_names()
    key = ("display-usage", frame.flavor.name)
    usage = view.kept.get(key)
    if usage is not None and usage.snap.tree is not frame.tree and usage.occupants.tas_flavors == tas_flavors:
        usage.follow(state)
        if not usage.move_to(frame, state):
            usage = None
    if usage is None or usage.occupants.tas_flavors != tas_flavors:
        snap = TASFlavorSnapshot(frame.flavor, frame.topology, frame.tree)
        usage = DisplayUsage(snap=snap, occupants=api.DomainOccupants(frame.tree, frame.flavor.name, tas_flavors))
    usage.follow(state)
    if frame.basis is not None:
        view.kept[key] = usage
    return usage


def _flavor_capacity(view: EngineView, flavor: str) -> FlavorCapacity | None:
    frame = _display_frame(view, flavor)
    if frame is None:
        return None
    usage = _display_usage(view, frame)
    snap = usage.snap
    tree = snap.tree
    names = list(snap.resources.names)
    resources = tuple(sorted(names, key=resource_order))
    columns = [names.index(r) for r in resources]
    totals = level_totals(snap)

    def matrices(attribute: str) -> list[np.ndarray]:
        return [getattr(t, attribute)[:, columns].astype(np.float64) for t in totals]

    return FlavorCapacity(
        flavor=flavor, topology=snap.topology_name, levels=tuple(snap.level_keys), resources=resources, tree=tree,
        allocatable=matrices("allocatable"), tas_usage=matrices("tas_usage"), other_usage=matrices("non_tas_usage"),
        flag_counts=frame.flag_counts, leaf_flags=frame.leaf_flags, leaf_taints=frame.leaf_taints,
        workloads={path: sorted(keys) for path, keys in usage.occupants.occupants.items()},
        nodes_without_levels=frame.nodes_without_levels,
    )


def display_warm(view: EngineView) -> None:
    """Make the display of every TAS flavor for the view's version (the web process's view
    keeper calls it): the topology page's first visitor then finds it made, and later
    versions bring the kept frame and usage up to date instead of counting them afresh."""
    for flavor in _tas_flavor_names(view):
        view.remember(("dashboard-capacity", flavor), lambda flavor=flavor: _flavor_capacity(view, flavor))


def flavor_capacity(*, flavor: str) -> FlavorCapacity | None:
    """The display snapshot of a TAS flavor, None when it is not one the engine can read."""
    return remembered(("dashboard-capacity", flavor), lambda view: _flavor_capacity(view, flavor))


def tas_flavors() -> list[str]:
    """TAS flavors whose Topology the engine reads (with or without nodes)."""
    return remembered(("dashboard-tas-flavors",), _tas_flavor_names)


def _tas_flavor_names(view: EngineView) -> list[str]:
    state = view.state
    return sorted(name for name, rf in state.flavors.items()
                  if rf.is_tas and (rf.topology_name or "") in state.topologies)


def node_count() -> int:
    return cluster.Node.objects.count()


# ---------------------------------------------------------------- the topology page's input


@dataclass(frozen=True)
class TopologyQuery:
    flavor: str
    resource: str
    metric: str
    domain: tuple[str, ...]  # the scope: a path of level values from the root; () is the whole flavor
    capacity: FlavorCapacity

    @property
    def unit(self) -> Unit:
        return unit_of(self.resource)

    def as_params(self, **changes: Any) -> dict[str, str]:
        params = {"flavor": self.flavor, "resource": self.resource, "metric": self.metric,
                  "domain": "/".join(self.domain)}
        params.update({k: ("/".join(v) if isinstance(v, tuple) else v) for k, v in changes.items()})
        return {k: v for k, v in params.items() if v}


def default_resource(capacity: FlavorCapacity) -> str:
    """The first resource (in resource_order) that some node offers; pods as a last resort."""
    if capacity.allocatable and len(capacity.allocatable[0]):
        totals = capacity.allocatable[0].sum(axis=0)
        for i, name in enumerate(capacity.resources):
            if totals[i] > 0:
                return name
    return PODS


def parse_domain(raw: str) -> tuple[str, ...]:
    text = raw.strip().strip("/")
    if not text:
        return ()
    parts = tuple(text.split("/"))
    if any(not p for p in parts):
        raise BadInput(f"domain {raw!r}: expected level values from the root separated by '/', like b1/r3")
    return parts


def topology_query(params: Mapping[str, str], *, flavor: str | None = None) -> TopologyQuery | None:
    """Validate the topology page's parameters; None when there is no TAS flavor to show."""
    names = tas_flavors()
    name = flavor or params.get("flavor") or (names[0] if names else "")
    if not name:
        return None
    if name not in names:
        known = ", ".join(names) or "none"
        raise NotFound(f"ResourceFlavor {name!r} is not a TAS flavor the engine can read (TAS flavors: {known})",
                       hint="A TAS flavor names a Topology in spec.topologyName; see /api/v1/flavors/.")
    capacity = flavor_capacity(flavor=name)
    if capacity is None:
        raise NotFound(f"ResourceFlavor {name!r} has no Topology the engine can read")
    resource = params.get("resource") or default_resource(capacity)
    if resource not in capacity.resources:
        known = ", ".join(capacity.resources)
        raise BadInput(f"resource {resource!r}{meant_hint(resource, capacity.resources)}: no node of flavor {name} "
                       f"offers it (resources: {known})")
    metric = params.get("metric") or DEFAULT_METRIC
    if metric not in METRICS:
        raise BadInput(f"metric {metric!r}{meant_hint(metric, METRICS)}: expected one of {', '.join(METRICS)}")
    domain = parse_domain(params.get("domain") or "")
    if domain:
        if len(domain) > capacity.depth:
            raise BadInput(f"domain {'/'.join(domain)!r}: the Topology {capacity.topology} has only "
                           f"{capacity.depth} levels")
        if capacity.domain_index(domain) is None:
            raise NotFound(f"domain {'/'.join(domain)!r} is not in the topology of flavor {name}",
                           hint="Domains are named by their level values from the root, like b1/r3.")
        # drill-down stops at the level above the leaves: a node is shown in its rack
        domain = domain[: max(capacity.depth - 1, 0)]
    return TopologyQuery(flavor=name, resource=resource, metric=metric, domain=domain, capacity=capacity)


# ---------------------------------------------------------------- versions (for polling)


def live_version(*extra: Any) -> str:
    """A short token that changes whenever the mirror, a pass, the history or the predicted
    start times change."""
    latest_event = WorkloadEvent.objects.aggregate(latest=Max("id"))["latest"]
    predicted = PredictionRun.objects.aggregate(latest=Max("predicted_at"))["latest"]
    text = repr((mirror_version(), latest_event, predicted, extra))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- workloads


@dataclass
class WorkloadPlacement:
    row: cluster.Workload
    summary: dict[str, Any]
    pod_sets: list[dict[str, Any]]  # PodSets with their topology requests
    assignments: list[dict[str, Any]]  # per PodSet: flavor, count, encoded, decoded domains
    encoded_text: dict[str, str]  # PodSet -> the encoded TopologyAssignment as indented JSON
    flavor: str | None  # the TAS flavor the heatmap shows
    pods_per_path: dict[tuple[str, ...], int] = field(default_factory=dict)  # on that flavor


def workload_or_404(namespace: str, name: str, scope: AccessScope = UNRESTRICTED) -> cluster.Workload:
    """The workload; not found too when the reader may not read its namespace (the same page)."""
    row = api.workload_get(namespace=namespace, name=name)
    if row is None or not scope.allows_namespace(namespace):
        raise NotFound(f"Workload {namespace}/{name} not found",
                       hint="It may have finished and been deleted; its history stays on the History page.")
    return row


def workload_placement(*, workload: cluster.Workload) -> WorkloadPlacement:
    assignments = api.assignments_decoded(workload=workload)
    encoded_text = {a["name"]: json.dumps(a["encoded"], indent=2) for a in assignments if a["encoded"] is not None}
    flavors = [a["flavor"] for a in assignments if a["flavor"] and a["decoded"]]
    flavor = flavors[0] if flavors else None
    pods: dict[tuple[str, ...], int] = {}
    for a in assignments:
        if a["flavor"] != flavor or not a["decoded"]:
            continue
        for dom in a["decoded"]["domains"]:
            path = tuple(dom["values"])
            pods[path] = pods.get(path, 0) + dom["count"]
    return WorkloadPlacement(row=workload, summary=api.workload_summary(workload), pod_sets=api.pod_sets_of(
        workload.raw or {}), assignments=assignments, encoded_text=encoded_text, flavor=flavor, pods_per_path=pods)


def placement_scope(capacity: FlavorCapacity, paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The smallest domain holding every path, no deeper than the heatmap's panel level, so the
    workload is seen among its neighbours."""
    if not paths:
        return ()
    common = list(paths[0])
    for path in paths[1:]:
        n = 0
        while n < min(len(common), len(path)) and common[n] == path[n]:
            n += 1
        common = common[:n]
    return tuple(common[: max(capacity.depth - 2, 0)])


# the status filter's value for every waiting workload: Pending (looked at again as its queue
# moves) and Inadmissible (parked until an event could change the answer), where nearly all are
WAITING = "waiting"


def workload_list(params: QueryDict, scope: AccessScope = UNRESTRICTED) -> tuple[QuerySet, dict[str, str]]:
    """Workloads for the list page (of the namespaces the reader may read): filtered by
    status, namespace, ClusterQueue or name."""
    rows = api.workload_list().filter(scope.workloads_q()).order_by("namespace", "name")
    chosen = {}
    status = params.get("status") or ""
    if status:
        if status == WAITING:
            rows = rows.filter(status__in=cluster.WAITING_STATUSES)
        elif status in cluster.WorkloadStatus.values:
            rows = rows.filter(status=status)
        else:
            known = ", ".join(cluster.WorkloadStatus.values)
            meant = meant_hint(status, [WAITING, *cluster.WorkloadStatus.values])
            raise BadInput(f"status {status!r}{meant}: expected {WAITING} (Pending or Inadmissible) or one of {known}")
        chosen["status"] = status
    if params.get("namespace"):
        rows = rows.filter(namespace=params["namespace"])
        chosen["namespace"] = params["namespace"]
    if params.get("cluster_queue"):
        rows = rows.filter(api.cluster_queue_workloads_q(params["cluster_queue"]))
        chosen["cluster_queue"] = params["cluster_queue"]
    if params.get("search"):
        rows = rows.filter(name__icontains=params["search"])
        chosen["search"] = params["search"]
    return rows, chosen


def page_of(rows: QuerySet, number: str | None, per_page: int = 50):
    paginator = Paginator(rows, per_page)
    return paginator.get_page(number)


# ---------------------------------------------------------------- history


HISTORY_FIGURE_EVENTS = 2000  # newest events drawn on a timeline
HISTORY_FILTERS = ("kind", "node", "domain", "cluster_queue", "queue", "namespace", "workload", "since", "until")


def _filtered(filterset_class, keys: tuple[str, ...], params: QueryDict, queryset: QuerySet) -> QuerySet:
    """`queryset` through the API's filter set with the page's parameters `keys` (blank ones
    left out), so that the page and the API agree; bad values are BadInput."""
    data = QueryDict(mutable=True)
    for key in keys:
        for value in params.getlist(key):
            if value.strip():
                data.appendlist(key, value.strip())
    filterset = filterset_class(data=data, queryset=queryset)
    try:
        if not filterset.is_valid():
            raise BadInput(_errors_text(filterset.errors))
        return filterset.qs
    except ValidationError as exc:
        raise BadInput(_errors_text(exc.detail)) from None


def history_events(params: QueryDict, scope: AccessScope = UNRESTRICTED) -> QuerySet:
    """Events matching the page's filters (the API's history filter, so both agree), newest
    first; only of the namespaces the reader may read."""
    return _filtered(EventFilter, HISTORY_FILTERS, params,
                     api.event_list().filter(scope.events_q()).order_by("-at", "-id"))


COMPARISON_FILTERS = ("category", "cluster_queue", "namespace", "workload", "since", "until")


def comparisons(params: QueryDict) -> QuerySet:
    """Comparisons with Kueue matching the page's filters (the API's filter), newest first."""
    return _filtered(ComparisonFilter, COMPARISON_FILTERS, params,
                     api.comparison_list().order_by("-admitted_at", "-id"))


def summary_bucket(rows: QuerySet) -> str:
    """The bucket that makes a readable figure of the time the comparisons span."""
    span = rows.aggregate(first=Min("admitted_at"), last=Max("admitted_at"))
    if span["first"] is None:
        return "hour"
    seconds = (span["last"] - span["first"]).total_seconds()
    return "minute" if seconds <= 3 * 3600 else "hour" if seconds <= 7 * 86400 else "day"


# Events grouped on the history page: the newest this many that match the filters (older ones
# are reached by narrowing the time range), so a page costs the same however long the history.
HISTORY_GROUPED_EVENTS = 20_000
EVENT_FIELDS = ("id", "kind", "at", "workload_key", "cluster_queue", "node", "domain", "message", "trigger")
# what went wrong, shown before everything else on the history page
PROBLEM_KINDS = (EventKind.EVICTED, EventKind.PREEMPTED, EventKind.NODE_UNHEALTHY, EventKind.REPLACEMENT_FAILED)


@dataclass
class EventGroups:
    groups: list[dict[str, Any]]  # newest first, each with count, first_at and last_at
    events: int  # events grouped
    more: bool  # older events matched but were not grouped (beyond HISTORY_GROUPED_EVENTS)


def event_groups(rows: QuerySet, *, limit: int = HISTORY_GROUPED_EVENTS) -> EventGroups:
    """Events (newest first) with each workload's consecutive repeats made one row: the same
    kind, node and domain, and the same reason but for its numbers ("Pending x37, from ... to ...").
    A run is broken only by another event of the same workload."""
    groups: list[dict[str, Any]] = []
    latest: dict[str, dict[str, Any]] = {}  # workload -> its oldest group so far
    count = 0
    more = False
    for row in rows.values(*EVENT_FIELDS)[: limit + 1].iterator(chunk_size=2000):
        if count == limit:
            more = True
            break
        count += 1
        key = (row["kind"], message_shape(row["message"] or ""), row["node"], row["domain"])
        group = latest.get(row["workload_key"])
        if group is not None and group["key"] == key:
            group["count"] += 1
            group["first_at"] = row["at"]
            continue
        group = {**row, "key": key, "count": 1, "first_at": row["at"], "last_at": row["at"]}
        groups.append(group)
        latest[row["workload_key"]] = group
    return EventGroups(groups=groups, events=count, more=more)


def history_problems(rows: QuerySet, *, latest: int = 8) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Evictions, preemptions and node failures among the events: how many of each kind, and
    the newest few."""
    problems = rows.filter(kind__in=PROBLEM_KINDS)
    found = dict(problems.order_by().values_list("kind").annotate(n=Count("id")))
    counts = {kind: found.get(kind, 0) for kind in PROBLEM_KINDS}
    newest = list(problems.values(*EVENT_FIELDS)[:latest]) if any(counts.values()) else []
    return counts, newest


def _errors_text(errors: Mapping) -> str:
    parts = []
    for name, messages in errors.items():
        items = messages if isinstance(messages, list | tuple) else [messages]
        parts.append(f"{name}: {' '.join(str(m) for m in items)}")
    return "; ".join(parts)


def event_kinds() -> list[str]:
    return list(EventKind.values)


def cluster_queue_names() -> list[str]:
    return list(cluster.ClusterQueue.objects.order_by("name").values_list("name", flat=True))


def local_queue_names() -> list[str]:
    return sorted(set(cluster.LocalQueue.objects.values_list("name", flat=True)))


# ---------------------------------------------------------------- queues


PENDING_SHOWN = 50  # pending workloads listed per ClusterQueue


@dataclass
class QueueCard:
    name: str
    cohort: str
    invalid_reason: str
    counts: api.QueueCounts
    waiting_by_status: dict[str, int]  # Pending, Inadmissible (cluster.WAITING_STATUSES) -> workloads

    @property
    def waiting(self) -> int:
        return sum(self.waiting_by_status.values())
    quota: list[dict[str, Any]] | None  # the API's resource groups with usage
    pending: list[dict[str, Any]]  # in queue order: position, workload summary
    predicted: list[dict[str, Any]] = field(default_factory=list)  # predicted admissions, soonest first
    stop_policy: str = STOP_NONE  # spec.stopPolicy: Hold and HoldAndDrain admit nothing
    active: dict[str, str] | None = None  # Kueue's Active condition (status, reason, message)
    # its stopped LocalQueues (of the namespaces the reader may read): namespace, name and their
    # Active condition (a LocalQueue of an inactive ClusterQueue is said by the card's own line)
    inactive_local_queues: list[dict[str, str]] = field(default_factory=list)
    # admission fair sharing: its LocalQueues (those the reader may read) with their weight and
    # usage, lowest usage first; None when the ClusterQueue does not order by it
    local_queue_usage: list[dict[str, Any]] | None = None
    # its Cohort's parent chain when it runs into a cycle of Cohorts (Kueue admits nothing here)
    cohort_cycle: tuple[str, ...] | None = None
    # spec.namespaceSelector ({} selects every namespace, None none), and whether the mirror
    # holds Namespaces to match it against
    namespace_selector: dict[str, Any] | None = field(default_factory=dict)
    namespaces_known: bool = False

    @property
    def namespace_selector_text(self) -> str:
        return selector_text(self.namespace_selector)

    @property
    def restricts_namespaces(self) -> bool:
        """Whether its namespaceSelector leaves any namespace out (a nil one selects none)."""
        return self.namespace_selector != {}

    @property
    def cohort_cycle_text(self) -> str:
        return " -> ".join(self.cohort_cycle or ())

    @property
    def inactive_message(self) -> str:
        """Why the ClusterQueue admits nothing beyond its stop policy (the page says that one
        on its own line); "" when nothing else holds it."""
        if self.active is None or self.active["status"] == "True":
            return ""
        return "" if self.active["message"] == STOPPED_ONLY_MESSAGE else self.active["message"]


def queue_cards(*, cluster_queue: str | None = None, scope: AccessScope = UNRESTRICTED) -> list[QueueCard]:
    """ClusterQueues with quota, counts and their first pending workloads (of the namespaces
    the reader may read, at their positions in the whole queue)."""
    rows = cluster.ClusterQueue.objects.order_by("name")
    if cluster_queue:
        rows = rows.filter(name=cluster_queue)
        if not rows.exists():
            raise NotFound(f"ClusterQueue {cluster_queue!r} not found")
    counts = api.cluster_queue_counts()
    waiting = waiting_counts()
    activity = api.cluster_queue_activity()
    inactive_lqs: dict[str, list[dict[str, str]]] = {}
    targets = api.local_queue_targets()
    for (namespace, name), active in sorted(api.local_queue_activity().items()):
        target = targets.get((namespace, name))
        # one whose ClusterQueue is inactive says no more than the ClusterQueue's own line
        if (active["status"] != "True" and active["reason"] != "ClusterQueueIsInactive" and target is not None
                and scope.allows_namespace(namespace)):
            inactive_lqs.setdefault(target, []).append({"namespace": namespace, "name": name, **active})
    usage_by_cq = local_queue_usage_by_cluster_queue(targets, scope)
    cycles = api.cohort_chains()
    namespaces_known = cluster.Namespace.objects.exists()
    cards = []
    for row in rows.only("name", "cohort", "invalid_reason", "raw"):
        pending = api.pending_in_cluster_queue(name=row.name, offset=0, limit=PENDING_SHOWN,
                                               namespaces=scope.namespaces)
        stored = {(w.namespace, w.name): w for w in cluster.Workload.objects.filter(
            name__in=[p.name for p in pending]).only(*api.WORKLOAD_LIST_FIELDS)}
        predictions = api.predictions_of(f"{p.namespace}/{p.name}" for p in pending)
        listed = []
        for p in pending:
            w = stored.get((p.namespace, p.name))
            if w is not None:
                listed.append({"position": p.position_in_cluster_queue + 1, "localQueue": p.local_queue,
                               **api.workload_summary(w, predictions)})
        cards.append(QueueCard(name=row.name, cohort=row.cohort, invalid_reason=row.invalid_reason,
                               counts=counts.get(row.name, api.QueueCounts()),
                               waiting_by_status={status: waiting.get(row.name, {}).get(status, 0)
                                                  for status in cluster.WAITING_STATUSES},
                               quota=api.cluster_queue_quota(name=row.name), pending=listed,
                               predicted=predicted_admissions(cluster_queue=row.name, scope=scope),
                               stop_policy=stop_policy_of(row.raw), active=activity.get(row.name),
                               inactive_local_queues=inactive_lqs.get(row.name, []),
                               local_queue_usage=usage_by_cq.get(row.name),
                               cohort_cycle=cycles.get(row.cohort) if row.cohort else None,
                               namespace_selector=((row.raw or {}).get("spec") or {}).get("namespaceSelector"),
                               namespaces_known=namespaces_known))
    return cards


def local_queue_usage_by_cluster_queue(targets: dict[tuple[str, str], str], scope: AccessScope
                                       ) -> dict[str, list[dict[str, Any]]]:
    """ClusterQueue ordering by LocalQueue usage -> its LocalQueues the reader may read, with
    weight, usage (None: past any number) and consumed resources, in the order they go first."""
    out: dict[str, list[dict[str, Any]]] = {}
    for (namespace, name), fs in api.local_queue_fair_sharing().items():
        target = targets.get((namespace, name))
        if not fs["ordersByUsage"] or target is None or not scope.allows_namespace(namespace):
            continue
        status = fs["admissionFairSharingStatus"] or {}
        out.setdefault(target, []).append({
            "namespace": namespace, "name": name, "weight": fs["weight"], "usage": fs["usage"],
            "consumed": ", ".join(f"{r} {display_text(float(parse_quantity(q)))}"
                                  for r, q in (status.get("consumedResources") or {}).items()),
            "lastUpdate": status.get("lastUpdate")})
    for queues in out.values():
        queues.sort(key=lambda q: (math.inf if q["usage"] is None else q["usage"], q["namespace"], q["name"]))
    return out


def waiting_counts() -> dict[str, dict[str, int]]:
    """ClusterQueue -> status -> its workloads waiting (Pending or Inadmissible) in its LocalQueues."""
    targets = api.local_queue_targets()
    out: dict[str, dict[str, int]] = {}
    rows = (cluster.Workload.objects.filter(status__in=cluster.WAITING_STATUSES)
            .values_list("namespace", "queue_name", "status").annotate(n=Count("id")).order_by())
    for namespace, queue, status, n in rows:
        cq = targets.get((namespace, queue))
        if cq is not None:
            by_status = out.setdefault(cq, {})
            by_status[status] = by_status.get(status, 0) + n
    return out


def why_pending(*, workload: cluster.Workload) -> dict[str, Any]:
    return api.why_pending(workload=workload)


PREDICTED_SHOWN = 60  # predicted admissions drawn on a ClusterQueue's timeline


def predicted_admissions(*, cluster_queue: str, scope: AccessScope = UNRESTRICTED,
                         limit: int = PREDICTED_SHOWN) -> list[dict[str, Any]]:
    """The stored predictions of the workloads still queued in `cluster_queue` that have a
    start, soonest first, of the namespaces the reader may read."""
    queued = cluster.Workload.objects.filter(cluster_queue=cluster_queue, status__in=api.QUEUED_STATUSES).annotate(
        key=Concat("namespace", Value("/"), "name", output_field=CharField())).values("key")
    rows = (WorkloadPrediction.objects.filter(scope.workloads_q(), cluster_queue=cluster_queue, start__isnull=False,
                                              workload_key__in=queued).order_by("start", "workload_key")[:limit])
    run = prediction_run()  # stored with the predictions, in one transaction
    if run is None:
        return []
    return [{"key": r.workload_key, "local_queue": r.local_queue, "start": r.start, "end": r.end or r.start,
             "earliest": r.earliest, "latest": r.latest, "source": r.source, "estimated_at": run.estimated_at}
            for r in rows]
