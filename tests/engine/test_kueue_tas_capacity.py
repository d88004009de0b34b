"""Cases of Kueue's TAS cache tests (pkg/cache/scheduler) on how node capacity is built:

* `TestNonTasUsageCacheIncrementalUpdates` (tas_non_tas_pod_cache_test.go): pods not managed
  by TAS are added, changed (moved, resized, finished) and deleted one at a time, and the
  usage per node follows;
* `TestNodesCache` and `TestNodesCacheFind` (tas_nodes_cache_test.go): which nodes Kueue's
  nodes cache keeps (Ready and schedulable) and which of them a flavor's topology takes (its
  nodeLabels and a label for every level);
* `TestTASCacheUpdate*PreservesUsage` (tas_cache_update_test.go): the TAS usage of admitted
  workloads survives a change of the flavor (tolerations, nodeLabels) or of its Topology's
  levels.

Kueue's tests read its cache's internals (the non-TAS usage per node name, the nodes map, the
flavor cache's usage per domain). The engine keeps the same things in its long-lived
`ClusterState`, and they show in the flavor's TAS snapshot: a leaf's non-TAS usage and free
capacity (allocatable less non-TAS usage), which nodes are the tree's leaves, and the TAS
usage per leaf. Each case builds the state, has the snapshot made, then applies the Go case's
changes one object at a time through the state's verbs (`upsert_pod`, `delete_pod`,
`upsert_node`, `delete_node`, `upsert_flavor`, `upsert_topology`), as a running engine
receives them, and checks the snapshot made afterwards. Kueue's `verifyNodeUsageConsistency`
(the usage summed per pod anew equals the usage kept incrementally) becomes: the snapshot
equals the one a state built from scratch from the final objects makes.

Kueue's non-TAS cache keys usage by node name alone, with no Node object in its test; the
engine only counts usage on nodes of a flavor's tree, so the cases give the nodes (8 CPU,
110 pods each) and run twice: with the nodes there before the pods, and with the nodes
arriving only after every pod change (pods bound to nodes the engine does not know yet).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scheduler.cluster import ClusterState
from scheduler.model import Topology
from scheduler.quantity import PODS
from scheduler.snapshot import TASFlavorSnapshot, in_flavor_tree

from .factories import (
    BLOCK,
    FLAVOR,
    HOSTNAME,
    RACK,
    admitted,
    cluster_state,
    domains_json,
    node,
    parse,
    parse_one,
    resource_flavor,
    tas_setup,
    toleration,
    topology,
    workload,
)

NODE_CPU = 8000  # milli-CPU of every node of the non-TAS cases
NODE_PODS = 110


# ---------------------------------------------------------------- helpers


def make_pod(name: str, namespace: str, node_name: str, cpu: str, *, phase: str | None = None) -> dict:
    """Kueue's `makePod`: a pod bound to `node_name` with one container requesting `cpu`, no
    annotations (not a TAS pod) and no phase unless given."""
    out = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
           "spec": {"nodeName": node_name,
                    "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}}
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


def leaf_rows(snap: TASFlavorSnapshot, matrix) -> dict[str, dict[str, int]]:
    """Per leaf (by id), the cpu and pods columns of one of the snapshot's matrices."""
    cols = snap.resources.column
    return {leaf_id: {"cpu": int(matrix[i, cols["cpu"]]), PODS: int(matrix[i, cols[PODS]])}
            for i, leaf_id in enumerate(snap.tree.leaves.ids)}


def snapshot_view(state: ClusterState) -> dict:
    """Per TAS flavor: its leaves, levels and every column of capacity, non-TAS and TAS usage."""
    out = {}
    for name, snap in state.tas_snapshots.items():
        columns = {}
        for res, col in snap.resources.column.items():
            values = (snap.free[:, col].tolist(), snap.non_tas_usage[:, col].tolist(), snap.tas_usage[:, col].tolist())
            if any(any(v) for v in values):
                columns[res] = values
        out[name] = (snap.tree.level_keys, list(snap.tree.leaves.ids), columns)
    return out


class Cluster:
    """The objects by kind and key, applied one at a time to a long-lived state whose
    snapshots are made before every change (so that each change is handled incrementally)."""

    def __init__(self, objects: Sequence[dict]) -> None:
        self.objects: dict[tuple[str, str], dict] = {}
        for obj in objects:
            self.objects[self._key(obj)] = obj
        self.state = cluster_state(list(objects))
        self.state.tas_snapshots  # noqa: B018 -- made now, so that what follows changes them

    @staticmethod
    def _key(obj: dict) -> tuple[str, str]:
        meta = obj["metadata"]
        name = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
        return obj["kind"], name

    def put(self, obj: dict) -> None:
        """Add or update (a new object, as the API delivers it: never the old one changed in place)."""
        self.objects[self._key(obj)] = obj
        engine_obj = parse_one(obj)
        kind = obj["kind"]
        if kind == "Node":
            self.state.upsert_node(engine_obj)
        elif kind == "Pod":
            self.state.upsert_pod(engine_obj)
        elif kind == "ResourceFlavor":
            self.state.upsert_flavor(engine_obj)
        elif kind == "Topology":
            self.state.upsert_topology(engine_obj)
        else:
            self.state.upsert_workload(engine_obj)
        self.state.tas_snapshots  # noqa: B018

    def remove(self, kind: str, key: str) -> None:
        self.objects.pop((kind, key), None)
        if kind == "Node":
            self.state.delete_node(key)
        elif kind == "Pod":
            self.state.delete_pod(key)
        else:
            raise AssertionError(kind)
        self.state.tas_snapshots  # noqa: B018

    @property
    def snap(self) -> TASFlavorSnapshot:
        return self.state.tas_snapshots[FLAVOR]

    def assert_equals_rebuild(self) -> None:
        """Kueue's verifyNodeUsageConsistency: what was kept change by change equals what the
        final objects give when counted from scratch."""
        assert snapshot_view(self.state) == snapshot_view(cluster_state(list(self.objects.values())))


# ---------------------------------------------------------------- TestNonTasUsageCacheIncrementalUpdates

NON_TAS_NODES = ("node-a", "node-b")


def non_tas_case(initial_pods: Sequence[dict], pods_update: Sequence[dict] = (), pods_delete: Sequence[str] = (),
                 want_node_usage: dict[str, dict[str, int]] | None = None, *, nodes_first: bool) -> None:
    """The Go case's steps: add `initial_pods`; re-apply every pod as `pods_update` has them
    (the Go case mutates the pods then re-applies all of them); delete `pods_delete`. Then
    the non-TAS usage per node (cpu in milli-CPU, pods) is `want_node_usage`, and nothing
    else: each node's free capacity is its allocatable less that usage."""
    nodes = [node(name, cpu="8", pods=str(NODE_PODS)) for name in NON_TAS_NODES]
    cluster = Cluster([*tas_setup(levels=[HOSTNAME]), *(nodes if nodes_first else [])])
    for p in initial_pods:
        cluster.put(p)
    for p in pods_update:
        cluster.put(p)
    for key in pods_delete:
        cluster.remove("Pod", key)
    if not nodes_first:
        for n in nodes:
            cluster.put(n)

    want = want_node_usage or {}
    snap = cluster.snap
    assert list(snap.tree.leaves.ids) == list(NON_TAS_NODES)
    zero = {"cpu": 0, PODS: 0}
    assert leaf_rows(snap, snap.non_tas_usage) == {n: want.get(n, zero) for n in NON_TAS_NODES}
    assert leaf_rows(snap, snap.free) == {
        n: {"cpu": NODE_CPU - want.get(n, zero)["cpu"], PODS: NODE_PODS - want.get(n, zero)[PODS]}
        for n in NON_TAS_NODES}
    # Kueue checks that no zeroed entry is left behind for a node without non-TAS pods
    assert sorted(cluster.state.non_tas_by_node) == sorted(want)
    cluster.assert_equals_rebuild()


NODES_FIRST = pytest.mark.parametrize("nodes_first", [True, False], ids=["nodes-first", "nodes-after"])


@NODES_FIRST
def test_add_then_delete_same_pod(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "add then delete same pod"."""
    non_tas_case([make_pod("pod1", "ns", "node-a", "2")], pods_delete=["ns/pod1"], nodes_first=nodes_first)


@NODES_FIRST
def test_multiple_pods_on_same_node(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "multiple pods on same node"."""
    non_tas_case([make_pod("pod1", "ns", "node-a", "1"), make_pod("pod2", "ns", "node-a", "2")],
                 want_node_usage={"node-a": {"cpu": 3000, PODS: 2}}, nodes_first=nodes_first)


@NODES_FIRST
def test_pod_moves_between_nodes_cleans_up_source_node(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "pod moves between nodes cleans up source node"."""
    non_tas_case([make_pod("pod1", "ns", "node-a", "4")], pods_update=[make_pod("pod1", "ns", "node-b", "4")],
                 want_node_usage={"node-b": {"cpu": 4000, PODS: 1}}, nodes_first=nodes_first)


@NODES_FIRST
def test_pod_resize_on_same_node_updates_usage_to_new_requests(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "pod resize on same node updates usage to new requests"."""
    non_tas_case([make_pod("pod1", "ns", "node-a", "1")], pods_update=[make_pod("pod1", "ns", "node-a", "4")],
                 want_node_usage={"node-a": {"cpu": 4000, PODS: 1}}, nodes_first=nodes_first)


@NODES_FIRST
def test_resize_one_of_two_pods_on_same_node_updates_only_that_pods_contribution(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "resize one of two pods on same node updates only
    that pod's contribution"."""
    non_tas_case([make_pod("pod1", "ns", "node-a", "1"), make_pod("pod2", "ns", "node-a", "2")],
                 pods_update=[make_pod("pod1", "ns", "node-a", "3"), make_pod("pod2", "ns", "node-a", "2")],
                 want_node_usage={"node-a": {"cpu": 5000, PODS: 2}}, nodes_first=nodes_first)


@NODES_FIRST
def test_terminated_pod_removes_usage(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "terminated pod removes usage"."""
    non_tas_case([make_pod("pod1", "ns", "node-a", "2")],
                 pods_update=[make_pod("pod1", "ns", "node-a", "2", phase="Succeeded")], nodes_first=nodes_first)


@NODES_FIRST
def test_delete_non_existent_key_is_no_op(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "delete non-existent key is no-op"."""
    non_tas_case([], pods_delete=["ns/ghost"], nodes_first=nodes_first)


@NODES_FIRST
def test_removing_one_of_two_pods_leaves_node_entry(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "removing one of two pods leaves node entry"."""
    non_tas_case([make_pod("pod1", "ns", "node-a", "1"), make_pod("pod2", "ns", "node-a", "1")],
                 pods_delete=["ns/pod1"], want_node_usage={"node-a": {"cpu": 1000, PODS: 1}}, nodes_first=nodes_first)


@NODES_FIRST
def test_removing_last_pod_cleans_up_node_entry(nodes_first):
    """TestNonTasUsageCacheIncrementalUpdates / "removing last pod cleans up node entry"."""
    non_tas_case([make_pod("pod1", "ns", "node-a", "1"), make_pod("pod2", "ns", "node-a", "1")],
                 pods_delete=["ns/pod1", "ns/pod2"], nodes_first=nodes_first)


# ---------------------------------------------------------------- TestNodesCache

# Kueue's node wrapper `MakeNode("test")`: no conditions (not Ready) unless `.Ready()`; the
# engine's topology of these cases has the hostname as its only level, so the node carries
# its hostname label.


def make_test_node(*, ready: bool = False, unschedulable: bool = False) -> dict:
    return node("test", cpu="8", pods=str(NODE_PODS), ready="True" if ready else None, unschedulable=unschedulable)


def nodes_cache_case(nodes: Sequence[dict], op, want_nodes: Sequence[str]) -> None:
    """The state holds `nodes` (its snapshot made), then `op` changes it; the flavor's tree
    then has exactly the nodes `want_nodes`, each a leaf with its allocatable free."""
    cluster = Cluster([*tas_setup(levels=[HOSTNAME]), *nodes])
    op(cluster)
    snap = cluster.snap
    assert sorted(snap.tree.node_to_leaf) == sorted(want_nodes)
    assert leaf_rows(snap, snap.free) == {name: {"cpu": NODE_CPU, PODS: NODE_PODS} for name in want_nodes}
    cluster.assert_equals_rebuild()


def test_sync_not_ready():
    """TestNodesCache / "sync not ready"."""
    nodes_cache_case([], lambda c: c.put(make_test_node()), [])


def test_sync_unschedulable_and_not_ready():
    """TestNodesCache / "sync unschedulable and not ready"."""
    nodes_cache_case([], lambda c: c.put(make_test_node(unschedulable=True)), [])


def test_sync_ready_and_unschedulable():
    """TestNodesCache / "sync ready and unschedulable"."""
    nodes_cache_case([], lambda c: c.put(make_test_node(ready=True, unschedulable=True)), [])


def test_sync_ready():
    """TestNodesCache / "sync ready"."""
    nodes_cache_case([], lambda c: c.put(make_test_node(ready=True)), ["test"])


def test_sync_ready_to_not_ready():
    """TestNodesCache / "sync ready to not ready"."""
    nodes_cache_case([make_test_node(ready=True)], lambda c: c.put(make_test_node()), [])


def test_sync_ready_to_unschedulable():
    """TestNodesCache / "sync ready to unschedulable" (the Go case's new node is unschedulable
    and, having no Ready condition, not Ready either)."""
    nodes_cache_case([make_test_node(ready=True)], lambda c: c.put(make_test_node(unschedulable=True)), [])


def test_delete():
    """TestNodesCache / "delete"."""
    nodes_cache_case([make_test_node(ready=True)], lambda c: c.remove("Node", "test"), [])


# ---------------------------------------------------------------- TestNodesCacheFind

ZONE = "cloud.provider.com/zone"
FIND_BLOCK = "cloud.provider.com/topology-block"


def find_nodes() -> list[dict]:
    """test1 (no labels); test2 zone us-east-1a; test3 zone us-east-1a and block b1; test4 zone
    us-east-1. The Go test puts them in the nodes cache directly; the cache only ever holds
    Ready, schedulable nodes, so they are Ready here (and carry no hostname label, as there)."""
    return [
        node("test1", hostname=False, cpu="1"),
        node("test2", hostname=False, cpu="1", labels={ZONE: "us-east-1a"}),
        node("test3", hostname=False, cpu="1", labels={ZONE: "us-east-1a", FIND_BLOCK: "b1"}),
        node("test4", hostname=False, cpu="1", labels={ZONE: "us-east-1"}),
    ]


@pytest.mark.parametrize(("node_labels", "levels", "want_nodes"), [
    pytest.param(None, (), ["test1", "test2", "test3", "test4"], id="no nodeLabels and levels"),
    pytest.param({ZONE: "us-east-1a"}, (), ["test2", "test3"], id="match labels"),
    pytest.param(None, (FIND_BLOCK,), ["test3"], id="match levels"),
    pytest.param({ZONE: "us-east-1a"}, (FIND_BLOCK,), ["test3"], id="match labels and levels"),
])
def test_nodes_cache_find(node_labels, levels, want_nodes):
    """TestNodesCacheFind / "no nodeLabels and levels", "match labels", "match levels", "match
    labels and levels": the nodes carrying the flavor's nodeLabels and every level's label.

    The engine's counterpart of `find` is `in_flavor_tree` (the filter `build_flavor_snapshot`
    applies); a Topology without levels exists only for this filter (Kueue's API requires one)."""
    parsed = parse([*find_nodes(), resource_flavor(node_labels=node_labels)])
    (flavor,) = parsed.flavors
    topo = Topology("default", tuple(levels))
    assert sorted(n.name for n in parsed.nodes if in_flavor_tree(n, flavor, topo)) == want_nodes
    if levels:  # a real Topology: the flavor's snapshot takes those nodes
        state = cluster_state([topology(levels=list(levels)), resource_flavor(node_labels=node_labels),
                               *find_nodes()])
        assert sorted(state.tas_snapshots[FLAVOR].tree.node_to_leaf) == want_nodes


# ---------------------------------------------------------------- TestTASCacheUpdate*PreservesUsage

NODE_GROUP = "node-group"
WL_KEY = "default/wl"


def wl_on_x1() -> dict:
    """Kueue's `addUsage` of workload default/wl: one pod of 1 milli-CPU on domain x1 (the
    engine: the workload admitted with that TopologyAssignment)."""
    return admitted(workload("wl", count=1, cpu="1m", required=HOSTNAME),
                    assignments={"main": domains_json([HOSTNAME], [("x1", 1)])})


def x1_usage(snap: TASFlavorSnapshot) -> dict[str, int]:
    """The TAS usage on leaf x1, every column that holds any."""
    leaf = snap.tree.leaves.index_by_id["x1"]
    return {name: int(snap.tas_usage[leaf, col]) for name, col in snap.resources.column.items()
            if snap.tas_usage[leaf, col]}


WANT_USAGE = {"cpu": 1, PODS: 1}


def assert_wl_holds_usage(cluster: Cluster) -> None:
    """Kueue's `wlUsage[wlKey]` is still there: the usage is the workload's, on the flavor."""
    charge = cluster.state.charges.get(WL_KEY)
    assert charge is not None
    assert [tc.flavor for tc in charge.tas] == [FLAVOR]


def test_tas_cache_update_flavor_tolerations_preserves_usage():
    """TestTASCacheUpdateFlavorTolerationsPreservesUsage: adding, then removing, a toleration
    on the flavor keeps the workload's usage on x1 (cpu 1, pods 1).

    (Kueue also checks that its flavor cache object is not replaced: internal, not carried.)"""
    tas = {NODE_GROUP: "tas"}
    cluster = Cluster([*tas_setup(levels=[HOSTNAME], flavor_kwargs={"node_labels": tas}),
                       node("x1", labels=tas), wl_on_x1()])
    assert x1_usage(cluster.snap) == WANT_USAGE

    tol = toleration("example.com/dedicated", "tas", operator="Equal", effect="NoSchedule")
    cluster.put(resource_flavor(node_labels=tas, tolerations=[tol]))
    (want_tolerations,) = parse([resource_flavor(node_labels=tas, tolerations=[tol])]).flavors
    assert cluster.snap.tolerations == want_tolerations.tolerations
    assert len(cluster.snap.tolerations) == 1
    assert x1_usage(cluster.snap) == WANT_USAGE
    assert_wl_holds_usage(cluster)

    cluster.put(resource_flavor(node_labels=tas))
    assert cluster.snap.tolerations == ()
    assert x1_usage(cluster.snap) == WANT_USAGE
    assert_wl_holds_usage(cluster)
    cluster.assert_equals_rebuild()


def test_tas_cache_update_flavor_node_labels_preserves_usage():
    """TestTASCacheUpdateFlavorNodeLabelsPreservesUsage: the flavor's nodeLabels change from
    node-group=tas to node-group=other; the workload's usage on x1 (cpu 1, pods 1) is kept and
    the topology tree is made again (not reused).

    Kueue's test has no nodes; the engine shows usage only on a leaf of the tree, so node x1
    carries node-group=other: the tree is empty before the change and holds x1 after it.
    (Kueue also checks that its flavor cache object is not replaced: internal, not carried.)"""
    cluster = Cluster([*tas_setup(levels=[HOSTNAME], flavor_kwargs={"node_labels": {NODE_GROUP: "tas"}}),
                       node("x1", labels={NODE_GROUP: "other"}), wl_on_x1()])
    original_tree = cluster.snap.tree
    assert original_tree.leaf_count == 0

    cluster.put(resource_flavor(node_labels={NODE_GROUP: "other"}))
    snap = cluster.snap
    assert snap.tree is not original_tree  # "Topology tree was reused after updating nodeLabels"
    assert dict(snap.flavor.node_labels) == {NODE_GROUP: "other"}
    assert list(snap.tree.leaves.ids) == ["x1"]
    assert x1_usage(snap) == WANT_USAGE
    assert_wl_holds_usage(cluster)
    cluster.assert_equals_rebuild()


def test_tas_cache_update_topology_levels_preserves_usage():
    """TestTASCacheUpdateTopologyLevelsPreservesUsage: the Topology's levels change from
    (rack, hostname) to (block, hostname); the flavor's levels and tree follow, the workload's
    usage on x1 (cpu 1, pods 1) is kept, and re-applying the unchanged Topology does not make
    the tree again.

    (Kueue also checks that its flavor cache object is not replaced: internal, not carried.)"""
    tas = {NODE_GROUP: "tas"}
    cluster = Cluster([*tas_setup(levels=[RACK, HOSTNAME], flavor_kwargs={"node_labels": tas}),
                       node("x1", block="b1", rack="r1", labels=tas), wl_on_x1()])
    original_tree = cluster.snap.tree
    assert x1_usage(cluster.snap) == WANT_USAGE

    updated = topology(levels=[BLOCK, HOSTNAME])
    cluster.put(updated)
    snap = cluster.snap
    updated_tree = snap.tree
    assert updated_tree is not original_tree  # "Topology tree was reused after updating topology levels"
    assert snap.level_keys == (BLOCK, HOSTNAME)
    assert updated_tree.level_keys == (BLOCK, HOSTNAME)
    assert x1_usage(snap) == WANT_USAGE
    assert_wl_holds_usage(cluster)
    cluster.assert_equals_rebuild()

    cluster.put(topology(levels=[BLOCK, HOSTNAME]))
    assert cluster.snap.tree is updated_tree  # "Topology tree was rebuilt after re-applying unchanged levels"
