"""Phase-1 counters kept per request shape and patched on the leaves that changed equal
counters computed from scratch, whatever the sequence of capacity and usage changes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler import phase1
from scheduler.assignment import DomainAssignment, TopologyAssignment
from scheduler.model import Toleration
from scheduler.phase1 import Shape, compute, kept_counts, visited_leaves
from scheduler.placement import NodeMatch, match_nodes
from scheduler.snapshot import JOURNAL_KEPT, TASFlavorSnapshot

from .factories import HOSTNAME, RACK, flavor_snapshot, node, pod, taint, tas_setup

BLOCKS, RACKS, NODES = 2, 3, 4
LEAVES = BLOCKS * RACKS * NODES


def snapshot(cpus: list[int], tainted: list[bool]) -> TASFlavorSnapshot:
    objects = tas_setup()
    i = 0
    for b in range(BLOCKS):
        for r in range(RACKS):
            for n in range(NODES):
                name = f"b{b}-r{r}-n{n}"
                objects.append(node(name, block=f"b{b}", rack=f"r{r}", cpu=f"{cpus[i]}m", pods="6",
                                    extra={"example.com/gpu": "4"},
                                    taints=[taint("dedicated")] if tainted[i] else []))
                i += 1
    objects.append(pod("daemon", node="b0-r0-n0", cpu="500m"))
    return flavor_snapshot(objects)


def shapes(snap: TASFlavorSnapshot) -> list[Shape]:
    cpu = snap.request_vector({"cpu": 1000})
    gpu = snap.request_vector({"cpu": 500, "example.com/gpu": 1})
    leader = snap.request_vector({"cpu": 1500})
    return [
        Shape(cpu, None, slice_level=2, slice_size=1, slice_size_at_level={}),
        Shape(gpu, leader, slice_level=1, slice_size=2, slice_size_at_level={}),
        Shape(cpu, None, slice_level=0, slice_size=4, slice_size_at_level={1: 2, 2: 2}),
        Shape(gpu, None, slice_level=2, slice_size=1, slice_size_at_level={}, simulate_empty=True),
        # with a partial slice (TASPartialSlices): its counters are kept too
        Shape(cpu, None, slice_level=1, slice_size=4, slice_size_at_level={}, tail_size=3),
        Shape(gpu, leader, slice_level=2, slice_size=2, slice_size_at_level={}, tail_size=1),
        Shape(cpu, leader, slice_level=1, slice_size=3, slice_size_at_level={}, tail_size=2),
    ]


def leader_own_match(snap: TASFlavorSnapshot) -> NodeMatch:
    """A leader's own node constraints (TASLeaderPodSetFeasibility) unlike its workers': it
    tolerates the taint they do not, and selects one rack of each block."""
    return match_nodes(snap, (Toleration(key="dedicated", operator="Exists"),), {RACK: "r1"}, None, False)


def from_scratch(snap: TASFlavorSnapshot, shape: Shape, match, assumed: dict[int, np.ndarray],
                 leader_match: NodeMatch | None = None) -> tuple:
    remaining = snap.free.copy() if shape.simulate_empty else snap.free - snap.tas_usage
    for leaf, usage in assumed.items():
        remaining[leaf] -= usage
    leader_visited = None if leader_match is None else visited_leaves(snap, leader_match)
    fresh = compute(snap.tree, shape, match, remaining, visited_leaves(snap, match), snap.resources.names,
                    leader_match, leader_visited)
    return fresh.arrays, +fresh.resources


change = st.one_of(
    st.tuples(st.just("tas"), st.lists(st.tuples(st.integers(0, LEAVES - 1), st.integers(1, 3)), min_size=1,
                                       max_size=4), st.sampled_from([1, -1])),
    st.tuples(st.just("pod"), st.integers(0, LEAVES - 1), st.integers(100, 3000), st.sampled_from([1, -1])),
    st.tuples(st.just("in_place"), st.integers(0, LEAVES - 1), st.integers(-2000, 2000), st.booleans()),
    st.tuples(st.just("resource"), st.sampled_from(["example.com/nic", "example.com/fpga"])),
    st.tuples(st.just("burst"), st.integers(0, LEAVES - 1)),
)


def apply(snap: TASFlavorSnapshot, op: tuple) -> None:
    kind = op[0]
    if kind == "tas":
        domains = tuple(DomainAssignment((snap.tree.leaves.values[leaf][-1],), count) for leaf, count in op[1])
        snap.add_assignment_usage(TopologyAssignment((HOSTNAME,), domains), {"cpu": 700}, op[2])
    elif kind == "pod":
        snap.add_non_tas_usages([(snap.tree.leaf_nodes[op[1]][0].name, {"cpu": op[2]})], sign=op[3])
    elif kind == "in_place":
        snap.tas_usage[op[1], snap.resources.column["cpu"]] += op[2]
        snap.usage_changed([op[1]] if op[3] else None)
    elif kind == "resource":
        snap.ensure_resources([op[1]])
    else:  # more changes than the journal keeps
        for _ in range(JOURNAL_KEPT + 5):
            snap.add_tas_usage(snap.tree.leaves.values[op[1]][-1:], {"cpu": 1}, 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cpus=st.lists(st.sampled_from([0, 1000, 2500, 4000, 8000]), min_size=LEAVES, max_size=LEAVES),
    tainted=st.lists(st.booleans(), min_size=LEAVES, max_size=LEAVES),
    ops=st.lists(st.tuples(change, st.dictionaries(st.integers(0, LEAVES - 1), st.integers(1, 3000), max_size=3)),
                 max_size=12),
    listed=st.booleans(),
    few_parents=st.sampled_from([0, 16, 1000]),
    few_leaves=st.sampled_from([0, 16, 1000]),
    leader_own=st.booleans(),
)
def test_kept_counters_equal_counters_from_scratch(cpus, tainted, ops, listed, few_parents, few_leaves, leader_own):
    """After each change, with the usage of PodSets placed earlier in the same workload assumed
    on a few leaves (and taken back at the next change); ancestors rolled up by numpy or, for
    a few, in Python, or (a few leaves of a shape without a leader) the change carried up in
    Python; the leader on its workers' leaves or (`leader_own`) on those of its own constraints."""
    phase1.FEW_PARENTS = few_parents
    phase1.FEW_LEAVES = few_leaves
    snap = snapshot(cpus, tainted)
    match = match_nodes(snap, (), {}, None, False)
    own = leader_own_match(snap) if leader_own else None
    kinds = shapes(snap)

    def leader_match(shape: Shape) -> NodeMatch | None:
        return own if shape.leader_requests is not None else None

    for shape in kinds:
        counts = kept_counts(snap, shape, match, None, leader_match(shape))
        if listed:  # the lists made for phase 2 are kept in step too
            for name in shape.counters:
                counts.as_list(name)
    for op, assumed_cpu in ops:
        apply(snap, op)
        assert np.array_equal(snap.remaining(), snap.free - snap.tas_usage)
        assert np.array_equal(snap.remaining(simulate_empty=True), snap.free)
        assumed = {leaf: snap.vector({"cpu": cpu, "pods": 1}) for leaf, cpu in assumed_cpu.items()}
        for shape in kinds:
            kept = kept_counts(snap, shape, match, assumed, leader_match(shape))
            arrays, resources = from_scratch(snap, shape, match, assumed, leader_match(shape))
            assert set(kept.arrays) == set(shape.counters)
            for name in shape.counters:
                assert np.array_equal(kept.arrays[name], arrays[name]), (op, shape, name)
                if name in kept.lists:
                    assert kept.lists[name] == arrays[name].tolist(), (op, shape, name)
            assert +kept.resources == resources


@pytest.fixture(autouse=True)
def _few_parents():
    defaults = phase1.FEW_PARENTS, phase1.FEW_LEAVES
    yield
    phase1.FEW_PARENTS, phase1.FEW_LEAVES = defaults


def test_a_change_on_a_few_leaves_patches_the_kept_counters():
    snap = snapshot([4000] * LEAVES, [False] * LEAVES)
    shape = shapes(snap)[0]
    counts = kept_counts(snap, shape, None)
    generation = counts.generation
    leaf = 5
    snap.add_tas_usage(snap.tree.leaves.values[leaf][-1:], {"cpu": 4000}, 1)
    assert snap.changed_leaves(counts.version).tolist() == [leaf]
    again = kept_counts(snap, shape, None)
    assert again is counts and again.generation == generation + 1  # patched, not computed anew
    top = snap.tree.offsets[-1]
    assert again.arrays["state"][top + leaf] == 0
    # its block lost the leaf's four pods (and one to the daemon on its first node)
    assert again.arrays["state"][0] == 4 * LEAVES // BLOCKS - 1 - 4
    assert again.resources == Counter({"cpu": 1})
    assert kept_counts(snap, shape, None) is counts and counts.generation == generation + 1  # nothing new


def test_changes_of_unknown_reach_or_beyond_the_journal_are_not_patched():
    snap = snapshot([4000] * LEAVES, [False] * LEAVES)
    since = snap.version
    snap.usage_changed()
    assert snap.changed_leaves(since) is None
    since = snap.version
    for _ in range(3 * JOURNAL_KEPT):
        snap.add_tas_usage(snap.tree.leaves.values[0][-1:], {"cpu": 1}, 1)
    assert snap.changed_leaves(since) is None
    assert snap.changed_leaves(snap.version - 1).tolist() == [0]
    assert snap.changed_leaves(snap.free_version, simulate_empty=True).tolist() == []
