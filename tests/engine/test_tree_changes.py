"""A tree made again from the tree it replaces, with only the nodes that came, went or changed
(`TopologyTree.with_changes`), equals the tree built afresh from every node; and the leaves it
says are carried over are the old tree's leaves backed by the very same Node objects."""

from __future__ import annotations

import dataclasses

import hypothesis.strategies as st
import numpy as np
from hypothesis import event, given, settings

from scheduler.model import Node
from scheduler.tree import TopologyTree, natural_path_order

BLOCK, RACK, HOST = "block", "rack", "kubernetes.io/hostname"

# small value sets, so that changes land on leaves and racks that exist, empty them or add some
values = st.sampled_from(["a", "b1", "b01", "b10"])
hostnames = st.sampled_from([f"h{i}" for i in range(12)])


@st.composite
def node_objects(draw, name: str) -> Node:
    labels = {BLOCK: draw(values), RACK: draw(values), HOST: draw(hostnames)}
    return Node(name=name, labels=labels, allocatable={"cpu": draw(st.integers(1, 4))}, ready="True")


@st.composite
def cases(draw):
    levels = draw(st.sampled_from([(BLOCK, RACK, HOST), (BLOCK, RACK), (RACK,), (BLOCK, HOST)]))
    order = draw(st.sampled_from([None, natural_path_order]))
    names = [f"n{i}" for i in range(draw(st.integers(0, 14)))]
    before = {name: draw(node_objects(name)) for name in names}
    after = dict(before)
    changed: set[str] = set()
    for _ in range(draw(st.integers(0, 6))):
        name = draw(st.sampled_from([*names, "x1", "x2", "x3"]))
        changed.add(name)
        if name in after and draw(st.booleans()):
            del after[name]
        elif name in after and draw(st.booleans()):  # the same labels, another object
            after[name] = dataclasses.replace(after[name], allocatable={"cpu": 9})
        else:
            after.pop(name, None)  # a changed node takes its place at the end, as in a dict
            after[name] = draw(node_objects(name))
    return levels, order, before, after, changed


def assert_same_tree(a: TopologyTree, b: TopologyTree) -> None:
    assert a.level_keys == b.level_keys and a.lowest_is_node == b.lowest_is_node
    assert len(a.levels) == len(b.levels)
    for la, lb in zip(a.levels, b.levels, strict=True):
        assert (la.key, la.values, la.ids, la.index_by_id) == (lb.key, lb.values, lb.ids, lb.index_by_id)
        for field in ("parent", "child_start", "rank"):
            assert np.array_equal(getattr(la, field), getattr(lb, field)), field
    for field in ("offsets", "size", "level_of", "values_of", "id_of", "rank_of", "children_of", "parent_of",
                  "node_to_leaf"):
        assert getattr(a, field) == getattr(b, field), field
    assert [[id(n) for n in group] for group in a.leaf_nodes] == [[id(n) for n in group] for group in b.leaf_nodes]


@settings(max_examples=400, deadline=None)
@given(cases())
def test_changed_tree_equals_the_tree_built_afresh(case):
    levels, order, before, after, changed = case
    in_tree = [n for n in before.values() if all(k in n.labels for k in levels)]
    old = TopologyTree(levels, in_tree, path_order=order)
    arrived = [after[name] for name in changed if name in after]
    position = {name: i for i, name in enumerate(after)}
    made = old.with_changes(changed, arrived, position)
    fresh = TopologyTree(levels, list(after.values()), path_order=order)
    if made is None:  # only where leaves sort level with one another (natural order)
        assert order is not None
        event("built afresh")
        return
    event("made from the old tree")
    tree, carry = made
    assert_same_tree(tree, fresh)
    # carried: exactly the leaves whose nodes are the old leaf's very nodes
    same = {i for i, group in enumerate(tree.leaf_nodes)
            if (j := old.leaves.index_by_id.get(tree.leaves.ids[i])) is not None
            and [id(n) for n in group] == [id(n) for n in old.leaf_nodes[j]]}
    assert set(carry.new.tolist()) == same
    assert sorted(carry.fresh) == sorted(set(range(tree.leaf_count)) - same)
    for new, was in zip(carry.new.tolist(), carry.old.tolist(), strict=True):
        assert tree.leaves.ids[new] == old.leaves.ids[was]


def test_default_order_always_derives():
    """Kueue's order tells every two leaves apart: the tree is never built afresh there."""
    nodes = [Node(name=f"n{i}", labels={BLOCK: f"b{i % 3}", RACK: f"r{i % 5}", HOST: f"h{i}"},
                  allocatable={"cpu": 1}, ready="True") for i in range(30)]
    old = TopologyTree((BLOCK, RACK, HOST), nodes)
    moved = dataclasses.replace(nodes[4], labels={BLOCK: "b9", RACK: "r0", HOST: "h4"})
    made = old.with_changes({"n4", "n7"}, [moved], {n.name: i for i, n in enumerate(nodes)})
    assert made is not None
    tree, carry = made
    assert tree.leaves.ids[-1] == "h4" and tree.levels[0].ids == ["b0", "b1", "b2", "b9"]
    assert "h7" not in tree.leaves.index_by_id
    assert carry.fresh == [tree.leaf_count - 1] and len(carry.new) == 28


def test_leaves_that_sort_level_are_left_to_the_afresh_build():
    """"b1" and "b01" are level in the natural order: the afresh build orders them by where
    their nodes come, which the old tree's leaves do not say."""
    def rack_node(name: str, rack: str) -> Node:
        return Node(name=name, labels={RACK: rack}, allocatable={}, ready="True")

    old = TopologyTree((RACK,), [rack_node("n0", "b1")], path_order=natural_path_order)
    assert old.with_changes({"n1"}, [rack_node("n1", "b01")], {"n0": 0, "n1": 1}) is None
    kueue_order = TopologyTree((RACK,), [rack_node("n0", "b1")])
    tree, _ = kueue_order.with_changes({"n1"}, [rack_node("n1", "b01")], {"n0": 0, "n1": 1})
    assert tree.leaves.ids == ["b01", "b1"]
