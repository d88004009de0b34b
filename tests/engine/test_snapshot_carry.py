"""A flavor's snapshot made again after a node change carries the rows of the leaves whose
nodes did not change over from the snapshot it replaces, and counts usage on the others only.

Every case checks two things: the snapshot equals one made from scratch from the same objects
(capacity, non-TAS and TAS usage on every leaf), and the leaves counted afresh are exactly
those the change touched (so that a change to one node does not recount the whole cluster).
"""

from __future__ import annotations

import numpy as np

from scheduler.cluster import ClusterState
from scheduler.snapshot import AMOUNT_CAP

from .factories import (
    BLOCK,
    FLAVOR,
    HOSTNAME,
    RACK,
    admitted,
    cluster_state,
    domains_json,
    grid,
    node,
    parse_one,
    pod,
    resource_flavor,
    tas_setup,
    topology,
    workload,
)

HOST_LEVELS = [BLOCK, RACK, HOSTNAME]


def placed(name: str, hosts: list[tuple[str, int]], *, cpu: str = "1", flavor: str = FLAVOR) -> dict:
    """A workload admitted with `count` pods on each of `hosts` (grid names: b{i}-r{j}-n{k})."""
    total = sum(count for _, count in hosts)
    doms = [([host[:2], host[3:5], host], count) for host, count in hosts]
    return admitted(workload(name, count=total, cpu=cpu, required=RACK),
                    assignments={"main": domains_json(HOST_LEVELS, doms)}, flavor=flavor)


def view(state: ClusterState) -> dict:
    """Per flavor: the leaves, and per resource offered or used, the capacity and usage columns."""
    out = {}
    for name, snap in state.tas_snapshots.items():
        columns = {}
        for res, col in snap.resources.column.items():
            values = (snap.free[:, col].tolist(), snap.tas_usage[:, col].tolist(),
                      snap.non_tas_usage[:, col].tolist())
            if any(any(v) for v in values):
                columns[res] = values
        out[name] = (list(snap.tree.leaves.ids), columns)
    return out


class Cluster:
    """Objects by kind and name, applied one at a time to a long-lived state."""

    def __init__(self, objects: list[dict], **kwargs) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.kwargs = kwargs
        self.state = cluster_state(objects, **kwargs)
        self.state.tas_snapshots  # noqa: B018 -- made now, so that what follows replaces them

    def put(self, obj: dict) -> None:
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        engine_obj = parse_one(obj)
        if obj["kind"] == "Node":
            self.state.upsert_node(engine_obj)
        elif obj["kind"] == "Pod":
            self.state.upsert_pod(engine_obj)
        else:
            self.state.upsert_workload(engine_obj)

    def remove(self, kind: str, name: str) -> None:
        del self.objects[(kind, name)]
        if kind == "Node":
            self.state.delete_node(name)
        elif kind == "Pod":
            self.state.delete_pod(f"default/{name}")
        else:
            self.state.delete_workload(f"default/{name}")

    def fresh_hosts(self, flavor: str = FLAVOR) -> list[str] | None:
        """The leaves the flavor's snapshot counted afresh, by name (None: all of them)."""
        snap = self.state.tas_snapshots[flavor]
        if snap.fresh_leaves is None:
            return None
        return [snap.tree.leaves.ids[leaf] for leaf in snap.fresh_leaves.tolist()]

    def assert_equals_rebuild(self) -> None:
        assert view(self.state) == view(cluster_state(list(self.objects.values()), **self.kwargs))


def hosts_cluster() -> Cluster:
    return Cluster([
        *tas_setup(),
        *grid(cpu="8"),
        placed("w1", [("b1-r1-n1", 2), ("b1-r1-n2", 1)]),
        placed("w2", [("b1-r2-n1", 3)]),
        placed("w3", [("b2-r1-n1", 1), ("b2-r1-n2", 1)], cpu="2"),
        pod("daemon-1", node="b1-r1-n1", cpu="1"),
        pod("daemon-2", node="b2-r2-n2", cpu="1"),
    ])


def test_a_node_going_not_ready_and_back_recounts_only_its_own_leaf():
    c = hosts_cluster()
    c.put(node("b1-r1-n1", block="b1", rack="r1", cpu="8", ready="False"))
    assert c.fresh_hosts() == []  # its leaf is gone; every other leaf is carried
    c.assert_equals_rebuild()
    c.put(node("b1-r1-n1", block="b1", rack="r1", cpu="8"))
    assert c.fresh_hosts() == ["b1-r1-n1"]
    snap = c.state.tas_snapshots[FLAVOR]
    leaf, cpu = snap.tree.leaves.index_by_id["b1-r1-n1"], snap.resources.column["cpu"]
    assert int(snap.tas_usage[leaf, cpu]) == 2000  # w1's two pods there, counted again
    assert int(snap.non_tas_usage[leaf, cpu]) == 1000  # and the daemon
    c.assert_equals_rebuild()


def test_usage_that_changes_while_the_snapshot_waits_to_be_made_again_is_carried():
    c = hosts_cluster()
    c.put(node("b2-r2-n1", block="b2", rack="r2", cpu="16"))  # the flavor's snapshot is now stale
    c.put(placed("w4", [("b1-r1-n2", 2), ("b2-r2-n1", 1)]))  # a carried leaf and the fresh one
    c.remove("Workload", "w2")
    c.put(pod("daemon-3", node="b1-r2-n2", cpu="2"))
    c.remove("Pod", "daemon-1")
    assert c.fresh_hosts() == ["b2-r2-n1"]
    c.assert_equals_rebuild()


def test_a_node_moved_to_another_rack_is_counted_afresh_under_its_hostname():
    c = hosts_cluster()
    c.put(node("b1-r1-n2", block="b2", rack="r2", cpu="8"))
    assert c.fresh_hosts() == ["b1-r1-n2"]
    snap = c.state.tas_snapshots[FLAVOR]
    leaf = snap.tree.leaves.index_by_id["b1-r1-n2"]
    assert int(snap.tas_usage[leaf, snap.resources.column["cpu"]]) == 1000  # w1's pod, named by hostname
    c.assert_equals_rebuild()


def test_rack_leaves_are_counted_afresh_when_a_node_joins_or_leaves_them():
    rack_doms = domains_json([BLOCK, RACK], [(["b1", "r1"], 3), (["b2", "r2"], 1)])
    c = Cluster([
        *tas_setup(levels=[BLOCK, RACK]),
        *grid(cpu="8", hostname=False),
        admitted(workload("w1", count=4, cpu="1", required=RACK), assignments={"main": rack_doms}),
        pod("daemon", node="b1-r1-n2", cpu="1"),
    ])
    c.put(node("b1-r1-n3", block="b1", rack="r1", hostname=False, cpu="4"))
    assert c.fresh_hosts() == ["b1,r1"]
    snap = c.state.tas_snapshots[FLAVOR]
    leaf, cpu = snap.tree.leaves.index_by_id["b1,r1"], snap.resources.column["cpu"]
    assert int(snap.tas_usage[leaf, cpu]) == 3000
    assert int(snap.free[leaf, cpu]) == 19000  # 8 + 8 + 4 cores, less the daemon's
    c.assert_equals_rebuild()
    c.remove("Node", "b2-r2-n1")
    assert c.fresh_hosts() == ["b2,r2"]
    c.assert_equals_rebuild()


def test_a_node_offering_a_new_resource_makes_every_leaf_afresh():
    c = hosts_cluster()
    c.put(node("b2-r2-n2", block="b2", rack="r2", cpu="8", extra={"example.com/gpu": "4"}))
    assert c.fresh_hosts() is None
    c.assert_equals_rebuild()


def test_a_column_added_for_a_request_is_not_carried():
    c = hosts_cluster()
    c.state.tas_snapshots[FLAVOR].ensure_resources(["example.com/gpu"])
    c.put(node("b2-r2-n2", block="b2", rack="r2", cpu="4"))
    snap = c.state.tas_snapshots[FLAVOR]
    assert "example.com/gpu" not in snap.resources.column
    assert c.fresh_hosts() == ["b2-r2-n2"]
    c.assert_equals_rebuild()


def test_overlapping_hostname_flavors_carry_each_others_usage():
    pool = {"example.com/pool": "a"}
    objects = [
        *tas_setup(),
        resource_flavor("pool-a", node_labels=pool),
        *grid(cpu="8", labels=pool),
        placed("w1", [("b1-r1-n1", 2)]),
        placed("w2", [("b1-r1-n1", 1), ("b2-r2-n2", 1)], flavor="pool-a"),
    ]
    c = Cluster(objects)
    c.put(node("b2-r2-n1", block="b2", rack="r2", cpu="8", labels=pool, ready="False"))
    c.put(placed("w3", [("b1-r2-n2", 1)], flavor="pool-a"))
    for flavor in (FLAVOR, "pool-a"):
        assert c.fresh_hosts(flavor) == []
        snap = c.state.tas_snapshots[flavor]
        leaf = snap.tree.leaves.index_by_id["b1-r1-n1"]
        assert int(snap.tas_usage[leaf, snap.resources.column["cpu"]]) == 3000  # both flavors' pods
    c.assert_equals_rebuild()


def test_a_large_assignment_adds_exactly_and_rows_beyond_the_cap_are_held_there():
    c = hosts_cluster()
    hosts = [("b1-r1-n1", 2), ("b1-r1-n2", 2)]
    c.put(placed("big", hosts))
    snap = c.state.tas_snapshots[FLAVOR]
    snap.ensure_resources(["memory"])
    mem = snap.resources.column["memory"]
    leaves = [snap.tree.leaves.index_by_id[h] for h, _ in hosts]
    assignment = c.state.workload("default/big").admission.pod_set_assignments[0].topology_assignment
    snap.add_assignment_usage(assignment, {"memory": 3 * 2**40})  # 3 TiB a pod: added as it is
    assert snap.tas_usage[leaves, mem].tolist() == [6 * 2**40, 6 * 2**40]
    quarter = {"memory": AMOUNT_CAP // 4}  # 4 pods of it: as much as the cap, one add at a time
    for _ in range(3):
        snap.add_assignment_usage(assignment, quarter)
    assert snap.tas_usage[leaves, mem].tolist() == [AMOUNT_CAP, AMOUNT_CAP]
    snap.add_assignment_usage(assignment, {"memory": AMOUNT_CAP})  # beyond any sum: pod by pod
    assert snap.tas_usage[leaves, mem].tolist() == [AMOUNT_CAP, AMOUNT_CAP]
    snap.add_assignment_usage(assignment, quarter, -1)
    assert np.all(snap.tas_usage[leaves, mem] == AMOUNT_CAP - 2 * (AMOUNT_CAP // 4))


def test_a_topology_made_later_counts_the_holders_of_its_flavor_on_every_sharing_flavor():
    pool = {"example.com/pool": "a"}
    objects = [
        *tas_setup(),
        resource_flavor("pool-a", node_labels=pool, topology_name="pools"),
        *grid(cpu="8", labels=pool),
        placed("w1", [("b1-r1-n1", 2)]),
        placed("w2", [("b1-r1-n1", 1), ("b2-r2-n2", 1)], flavor="pool-a"),
    ]
    c = Cluster(objects)
    assert set(c.state.tas_snapshots) == {FLAVOR}  # pool-a's Topology is missing
    c.put(node("b2-r2-n1", block="b2", rack="r2", cpu="8", labels=pool, ready="False"))
    pools = topology("pools", levels=HOST_LEVELS)
    c.objects[("Topology", "pools")] = pools
    c.state.upsert_topology(parse_one(pools))
    snap = c.state.tas_snapshots[FLAVOR]
    assert int(snap.tas_usage[snap.tree.leaves.index_by_id["b1-r1-n1"], snap.resources.column["cpu"]]) == 3000
    c.assert_equals_rebuild()
    del c.objects[("Topology", "pools")]
    c.state.delete_topology("pools")
    assert set(c.state.tas_snapshots) == {FLAVOR}
    snap = c.state.tas_snapshots[FLAVOR]
    assert int(snap.tas_usage[snap.tree.leaves.index_by_id["b1-r1-n1"], snap.resources.column["cpu"]]) == 2000
    c.assert_equals_rebuild()
    assert {tc.flavor for charge in c.state.charges.values() for tc in charge.tas} == {FLAVOR}


def test_node_changes_make_the_tree_from_the_old_one(monkeypatch):
    """After a node change the flavor's tree is made from the tree it replaces, not from every
    node again (TopologyTree.with_changes), and equals the one made afresh."""
    from scheduler import tree as tree_module

    c = hosts_cluster()
    built = []
    original = tree_module.TopologyTree.__init__

    def counting(self, *args, **kwargs):
        built.append(args)
        original(self, *args, **kwargs)

    monkeypatch.setattr(tree_module.TopologyTree, "__init__", counting)
    c.put(node("b1-r2-n2", block="b1", rack="r2", cpu="8", ready="False"))
    c.put(node("b3-r1-n1", block="b3", rack="r1", cpu="8"))  # a new block
    c.remove("Node", "b2-r1-n2")
    c.put(node("b1-r1-n2", block="b1", rack="r1", cpu="4"))  # resized, in place
    assert c.fresh_hosts() == ["b1-r1-n2", "b3-r1-n1"]
    assert built == []
    c.assert_equals_rebuild()
    snap = c.state.tas_snapshots[FLAVOR]
    assert snap.tree.levels[0].ids == ["b1", "b2", "b3"]
    assert "b1-r2-n2" not in snap.tree.leaves.index_by_id
