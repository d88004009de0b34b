"""The workloads in each domain of a flavor's tree, kept across versions of the view
(`DomainOccupants`): after nodes change, moved onto the engine's new tree by placing again
only the workloads on leaves that came, went or moved, they equal occupants made afresh."""

from __future__ import annotations

from scheduler.tree import moved_leaves
from tasweb.api.selectors import DomainOccupants
from tests.engine.factories import BLOCK, FLAVOR, RACK, node, tas_setup
from tests.engine.test_snapshot_carry import Cluster, hosts_cluster, placed


def occupants_afresh(state) -> dict:
    snap = state.tas_snapshots[FLAVOR]
    fresh = DomainOccupants(snap.tree, FLAVOR, state.tas_flavor_names())
    fresh.follow(state)
    return fresh.occupants


def kept_occupants(c: Cluster) -> DomainOccupants:
    state = c.state
    kept = DomainOccupants(state.tas_snapshots[FLAVOR].tree, FLAVOR, state.tas_flavor_names())
    kept.follow(state)
    return kept


def bring_up_to_date(kept: DomainOccupants, state) -> list:
    tree = state.tas_snapshots[FLAVOR].tree
    if kept.tree is not tree:
        kept.move_to(tree, state)
    return kept.follow(state)


def test_occupants_follow_nodes_that_go_come_and_move():
    c = hosts_cluster()
    kept = kept_occupants(c)
    assert kept.occupants[("b1", "r1", "b1-r1-n1")] == {"default/w1"}
    steps = [
        lambda: c.put(node("b1-r1-n1", block="b1", rack="r1", cpu="8", ready="False")),  # w1's node leaves
        lambda: c.put(node("b1-r1-n1", block="b1", rack="r1", cpu="8")),  # and comes back
        lambda: c.put(node("b2-r1-n2", block="b3", rack="r9", cpu="8")),  # w3's node moves
        lambda: c.remove("Node", "b1-r2-n1"),  # w2's node is deleted
        lambda: c.put(node("b1-r2-n1", block="b1", rack="r2", cpu="8")),  # and added again
        lambda: c.put(node("b1-r1-n2", block="b1", rack="r1", cpu="2")),  # resized: nobody moves
    ]
    for step in steps:
        step()
        bring_up_to_date(kept, c.state)
        assert kept.occupants == occupants_afresh(c.state)
    assert kept.occupants[("b3", "r9", "b2-r1-n2")] == {"default/w3"}
    assert ("b1", "r1", "b1-r1-n2") in kept.occupants


def test_a_workload_that_changed_meanwhile_is_still_reported_by_follow():
    """Moving onto the new tree leaves the charges as last seen: the display's usage, which
    follows the pairs `follow` returns, still learns of every workload that changed."""
    c = hosts_cluster()
    kept = kept_occupants(c)
    c.put(node("b1-r1-n1", block="b1", rack="r1", cpu="8", ready="False"))
    c.remove("Workload", "w1")
    c.put(placed("w4", [("b1-r1-n1", 1), ("b2-r2-n2", 1)]))
    pairs = bring_up_to_date(kept, c.state)
    assert {(old is not None, new is not None) for old, new in pairs} == {(True, False), (False, True)}
    assert kept.occupants == occupants_afresh(c.state)


def test_rack_leaves_move_with_their_nodes():
    from tests.engine.factories import admitted, domains_json, grid, workload

    doms = domains_json([BLOCK, RACK], [(["b1", "r1"], 2), (["b2", "r2"], 1)])
    c = Cluster([*tas_setup(levels=[BLOCK, RACK]), *grid(cpu="8", hostname=False),
                 admitted(workload("w1", count=3, cpu="1", required=RACK), assignments={"main": doms})])
    kept = kept_occupants(c)
    c.remove("Node", "b2-r2-n1")
    c.remove("Node", "b2-r2-n2")  # rack b2/r2 is gone with its last node
    bring_up_to_date(kept, c.state)
    assert kept.occupants == occupants_afresh(c.state)
    assert ("b2", "r2") not in kept.occupants and kept.occupants[("b1", "r1")] == {"default/w1"}


def test_moved_leaves_are_those_that_came_went_or_moved():
    c = hosts_cluster()
    old = c.state.tas_snapshots[FLAVOR].tree
    c.put(node("b1-r1-n1", block="b1", rack="r1", cpu="8", ready="False"))
    c.put(node("b2-r1-n2", block="b1", rack="r1", cpu="8"))
    c.put(node("b1-r1-n2", block="b1", rack="r1", cpu="4"))  # resized in place
    c.put(node("b3-r1-n1", block="b3", rack="r1", cpu="8"))
    assert moved_leaves(old, c.state.tas_snapshots[FLAVOR].tree) == {"b1-r1-n1", "b2-r1-n2", "b3-r1-n1"}
