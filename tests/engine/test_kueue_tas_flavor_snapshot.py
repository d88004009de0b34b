"""Cases of Kueue's `pkg/cache/scheduler/tas_flavor_snapshot_test.go` not carried elsewhere.

The cases follow the newest stored version of the file (API v1beta2, `newTopologyTree`, domain
states kept apart from the domains): TestFreeCapacityPerDomain, TestIsTopologyAssignmentStale,
TestSortedDomainsWithLeader, TestSortedDomains, TestCompareDomainLevelValues,
TestTASCachingRemainingResourcesFeatureGate and TestUpdateCountsToMinimumGenericLogsLeafSummary;
and TestInitializeDomainIDCollision, of an earlier version. TestMergeTopologyAssignments,
TestHasLevel, TestCountPodsInAssignment, TestComputeAssumedUsageFromAssignment,
TestAddAssumedUsage and TestTruncateAssignment are in test_kueue_flavorassigner_more.py.

Kueue's tests call its snapshot's internals on hand-made domains. The engine's counterparts:

* free capacity and TAS usage per leaf (SerializeFreeCapacityPerDomain): the rows of the
  snapshot's `free` and `tas_usage` matrices, by leaf id, each amount written as
  `scheduler.quantity.format_value` writes it. The engine keeps no serialization of its own:
  `free_capacity_per_domain` below writes the JSON Kueue's function writes from those rows
  (the matrices have a column for every resource, so a zero amount stands for an absent one);
* a stale assignment (IsTopologyAssignmentStale): `previous_assignment_stale` (a domain naming
  no leaf of the tree) and, for the domain reported, the message of
  `find_replacement_assignment` (Kueue's is built from IsTopologyAssignmentStale's domain);
* domain ordering (sortedDomains / sortedDomainsWithLeader): `Placer.sorted_domains` /
  `Placer.sorted_domains_with_leader` over per-domain counters set by hand, as the Go tests
  set their domain states (podCount -> state, sliceCount -> slice, podCountWithLeader ->
  state_wl, sliceCountWithLeader -> slice_wl, leaderCount -> leader, affinityScore ->
  affinity), on a snapshot whose one level holds the cases' level values;
* compareDomainLevelValues: the final tie-break of that ordering, the domains' `rank` in the
  tree (its lexicographic order of full level values);
* Fits after updateTASUsage: `assignments_fit` after `TASFlavorSnapshot.add_tas_usage`;
* updateCountsToMinimumGeneric: `Placer.update_counts_to_minimum` (Kueue's nil is the engine's
  empty list);
* the domains built by `initialize`: the snapshot's `TopologyTree`.
"""

from __future__ import annotations

import json

import pytest

from scheduler.assignment import DomainAssignment, TopologyAssignment
from scheduler.placement import Placer
from scheduler.quantity import format_value
from scheduler.snapshot import TASFlavorSnapshot, assignments_fit
from scheduler.topology_assignment import find_replacement_assignment, previous_assignment_stale

from .factories import (
    HOSTNAME,
    flavor_snapshot,
    gates,
    node,
    pod_set,
    resource_flavor,
    tas_requests,
    topology,
    workload,
)

DUMMY = "dummy"
PROVIDER_BLOCK = "cloud.provider.com/topology-block"
PROVIDER_RACK = "cloud.provider.com/topology-rack"
GPU = "nvidia.com/gpu"
GI = 1024 * 1024 * 1024


def snapshot_of(levels: tuple[str, ...], nodes: list[dict], **gate_values: bool) -> TASFlavorSnapshot:
    """The snapshot of flavor "dummy" on topology "dummy" with `levels` and `nodes`."""
    objects = [topology(DUMMY, levels=levels), resource_flavor(DUMMY, topology_name=DUMMY), *nodes]
    return flavor_snapshot(objects, flavor=DUMMY, feature_gates=gates(**gate_values))


def leaf_index(snap: TASFlavorSnapshot, leaf_id: str) -> int:
    return snap.tree.leaves.index_by_id[leaf_id]


# ---------------------------------------------------------------- TestFreeCapacityPerDomain


def free_capacity_per_domain(snap: TASFlavorSnapshot) -> str:
    """Kueue's SerializeFreeCapacityPerDomain over the engine's rows: per leaf id, its free
    capacity and TAS usage, each resource as a quantity string (zero amounts left out)."""
    names = snap.resources.names
    out: dict[str, dict[str, dict[str, str]]] = {}
    leaf_ids = snap.tree.leaves.ids if snap.tree.levels else []
    for leaf, leaf_id in enumerate(leaf_ids):
        out[leaf_id] = {
            "freeCapacity": {n: format_value(n, int(v)) for n, v in zip(names, snap.free[leaf], strict=True) if v},
            "tasUsage": {n: format_value(n, int(v)) for n, v in zip(names, snap.tas_usage[leaf], strict=True) if v},
        }
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


def set_tas_usage(snap: TASFlavorSnapshot, leaf_id: str, usage: dict[str, int]) -> None:
    """The leaf's TAS usage set by hand, as the Go case sets `tasUsage`."""
    leaf = leaf_index(snap, leaf_id)
    snap.ensure_resources(usage)
    snap.tas_usage[leaf] = snap.vector(usage)
    snap.usage_changed([leaf])


def free_capacity_nodes(case: str) -> list[dict]:
    """The case's leaves as nodes whose allocatable is the leaf's free capacity (no pod slots)."""
    if case == "domains with free capacity and TAS usage":
        return [node("domain2", cpu="1", memory="2Gi", pods=None),
                node("domain1", cpu="2", memory="4Gi", pods=None, extra={GPU: "1"})]
    if case == "domain with free capacity, but without TAS usage":
        return [node("domain1", cpu="1", pods=None)]
    if case == "domain without free capacity and without TAS usage":
        return [node("domain1", cpu=None, pods=None)]
    return []


FREE_CAPACITY_CASES = {
    "domains with free capacity and TAS usage": (
        {"domain2": {"memory": 1 * GI, "cpu": 500},
         "domain1": {"cpu": 500, GPU: 1, "memory": 2 * GI}},  # Go comment: "// 1 GiB"
        '{"domain1":{"freeCapacity":{"cpu":"2","memory":"4Gi","nvidia.com/gpu":"1"},'
        '"tasUsage":{"cpu":"500m","memory":"2Gi","nvidia.com/gpu":"1"}},'
        '"domain2":{"freeCapacity":{"cpu":"1","memory":"2Gi"},"tasUsage":{"cpu":"500m","memory":"1Gi"}}}',
    ),
    # tasUsage is left nil, as there is no TAS workload admitted in the domain.
    "domain with free capacity, but without TAS usage": (
        {}, '{"domain1":{"freeCapacity":{"cpu":"1"},"tasUsage":{}}}'),
    "domain without free capacity and without TAS usage": (
        {}, '{"domain1":{"freeCapacity":{},"tasUsage":{}}}'),
    "snapshot without domains": ({}, "{}"),
}


@pytest.mark.parametrize("vectorized", [True, False], ids=["VectorizedResourceRequests=true",
                                                           "VectorizedResourceRequests=false"])
@pytest.mark.parametrize("case", list(FREE_CAPACITY_CASES), ids=[c.replace(" ", "_") for c in FREE_CAPACITY_CASES])
def test_free_capacity_per_domain(case: str, vectorized: bool):
    """Go: TestFreeCapacityPerDomain, every case, with VectorizedResourceRequests on and off.

    Leaves (hostname level) with the case's free capacity and TAS usage; the JSON per domain
    id of "freeCapacity" and "tasUsage", resources and domains in sorted order."""
    usage, expected = FREE_CAPACITY_CASES[case]
    snap = snapshot_of((HOSTNAME,), free_capacity_nodes(case), VectorizedResourceRequests=vectorized)
    for leaf_id, requests in usage.items():
        set_tas_usage(snap, leaf_id, requests)
    assert free_capacity_per_domain(snap) == expected


# ---------------------------------------------------------------- TestIsTopologyAssignmentStale


def hostname_lowest() -> TASFlavorSnapshot:
    """Levels (block, hostname); node n1 in block b1."""
    return snapshot_of((PROVIDER_BLOCK, HOSTNAME), [node("n1", labels={PROVIDER_BLOCK: "b1"})])


def rack_lowest() -> TASFlavorSnapshot:
    """Levels (block, rack); node n1 in block b1, rack r1."""
    return snapshot_of((PROVIDER_BLOCK, PROVIDER_RACK),
                       [node("n1", hostname=False, labels={PROVIDER_BLOCK: "b1", PROVIDER_RACK: "r1"})])


STALE_CASES = {
    "existing hostname leaf is not stale": (hostname_lowest, ("n1",), False, ""),
    "missing hostname leaf is stale": (hostname_lowest, ("n2",), True, "n2"),
    "deleted node is stale even when its hostname matches an existing root domain ID": (
        hostname_lowest, ("b1",), True, "b1"),
    "existing non-hostname leaf is not stale": (rack_lowest, ("b1", "r1"), False, ""),
    "missing non-hostname leaf is stale": (rack_lowest, ("b1", "r2"), True, "b1"),
}


@pytest.mark.parametrize("case", list(STALE_CASES), ids=[c.replace(" ", "_") for c in STALE_CASES])
def test_is_topology_assignment_stale(case: str):
    """Go: TestIsTopologyAssignmentStale, every case: an assignment of one domain (no levels
    given) on the case's tree; stale when the domain names no leaf, the stale domain being the
    domain's first value.

    Stale or not: `previous_assignment_stale` of a request whose previous assignment it is. The
    stale domain: the one `find_replacement_assignment` names in its refusal ("Cannot replace
    the node, because the existing topologyAssignment is invalid, as it contains the stale
    domain <d>", Kueue's message built from IsTopologyAssignmentStale), for a node failure on
    another node."""
    make, values, want_stale, want_domain = STALE_CASES[case]
    snap = make()
    ta = TopologyAssignment((), (DomainAssignment(values, 1),))
    (req,) = tas_requests(workload("wl", pod_sets=[pod_set("main", count=1)]), flavor=DUMMY)
    req.previous_assignment = ta
    assert previous_assignment_stale(snap, req, None) is want_stale
    if want_stale:
        req.previous_assignment = None
        _, _, reason = find_replacement_assignment(snap, req, ta, "unhealthy-node", gates=gates())
        assert reason == ("Cannot replace the node, because the existing topologyAssignment is invalid, "
                          f"as it contains the stale domain {want_domain}")


# ---------------------------------------------------------------- TestSortedDomains(WithLeader)


class HandSetCounts:
    """Per-domain counters of a placement run, set by hand (the Go tests' domain states)."""

    def __init__(self, size: int) -> None:
        self.state = [0] * size
        self.state_wl = [0] * size
        self.slice = [0] * size
        self.slice_wl = [0] * size
        self.leader = [0] * size
        self.affinity = [0] * size

    def phase1_arrays(self) -> None:
        return None


def hand_set_placer(level: str, values: list[str], **gate_values: bool) -> tuple[Placer, dict[str, int]]:
    """A Placer with zeroed hand-set counters on a one-level snapshot (one node per value), and
    the global index of each domain by its value."""
    nodes = [node(v) if level == HOSTNAME else node(f"node-{v}", labels={level: v}) for v in values]
    snap = snapshot_of((level,), nodes, **gate_values)
    placer = Placer(snap, gates(**gate_values))
    placer.counts = HandSetCounts(snap.tree.size)
    return placer, {placer.values(d)[-1]: d for d in snap.tree.level_domains(0)}


# (id, level value, affinityScore, leaderCount, sliceCountWithLeader, podCountWithLeader)
WITH_LEADER_CASES = {
    "affinityScore descending: higher affinity score comes first": (
        True, [("low-affinity", "a", 10, 1, 5, 10), ("high-affinity", "b", 100, 1, 5, 10)], False,
        ["high-affinity", "low-affinity"]),
    "affinityScore ignored when feature gate is disabled": (
        False, [("low-affinity", "a", 10, 1, 5, 10), ("high-affinity", "b", 100, 1, 5, 10)], False,
        ["low-affinity", "high-affinity"]),
    "leaderCount descending: domains that can host leader come first": (
        False, [("no-leader", "a", 0, 0, 10, 10), ("has-leader", "b", 0, 1, 1, 1)], False,
        ["has-leader", "no-leader"]),
    "leader capability prioritized over preferred affinity": (
        True, [("preferred-no-leader", "a", 100, 0, 0, 0), ("non-preferred-has-leader", "b", 10, 1, 5, 10)], False,
        ["non-preferred-has-leader", "preferred-no-leader"]),
    "BestFit: sliceCountWithLeader descending": (
        False, [("a", "a", 0, 1, 3, 1), ("b", "b", 0, 1, 1, 1), ("c", "c", 0, 1, 2, 1)], False, ["a", "c", "b"]),
    "LeastFreeCapacity: sliceCountWithLeader ascending": (
        False, [("a", "a", 0, 1, 3, 1), ("b", "b", 0, 1, 1, 1), ("c", "c", 0, 1, 2, 1)], True, ["b", "c", "a"]),
    "BestFit: podCountWithLeader ascending as tiebreaker": (
        False, [("large", "a", 0, 1, 5, 100), ("small", "b", 0, 1, 5, 10), ("medium", "c", 0, 1, 5, 50)], False,
        ["small", "medium", "large"]),
    "LeastFreeCapacity: podCountWithLeader ascending as tiebreaker": (
        False, [("large", "a", 0, 1, 5, 100), ("small", "b", 0, 1, 5, 10), ("medium", "c", 0, 1, 5, 50)], True,
        ["small", "medium", "large"]),
    "levelValues ascending as final tiebreaker": (
        False, [("c", "c", 0, 1, 5, 10), ("a", "a", 0, 1, 5, 10), ("b", "b", 0, 1, 5, 10)], False, ["a", "b", "c"]),
}


@pytest.mark.parametrize("case", list(WITH_LEADER_CASES), ids=[c.replace(" ", "_") for c in WITH_LEADER_CASES])
def test_sorted_domains_with_leader(case: str):
    """Go: TestSortedDomainsWithLeader, every case. "verifies the sorting criteria (in order of
    priority): 1. leaderCount - descending (always) 2. sliceCountWithLeader - descending
    (BestFit) or ascending (LeastFreeCapacity) 3. podCountWithLeader - ascending (always, as
    tiebreaker) 4. levelValues - ascending (always, as final tiebreaker)"; the affinity score
    (descending) after the leader count when TASRespectNodeAffinityPreferred is on (the case's
    gate value). Level "block"; `sortedDomainsWithLeader(domains, unconstrained)`."""
    affinity_gate, specs, unconstrained, want = WITH_LEADER_CASES[case]
    placer, index = hand_set_placer("block", sorted(v for _, v, *_ in specs),
                                    TASRespectNodeAffinityPreferred=affinity_gate)
    c = placer.counts
    names, domains = {}, []
    for name, value, affinity, leader, slice_wl, state_wl in specs:
        d = index[value]
        c.affinity[d], c.leader[d], c.slice_wl[d], c.state_wl[d] = affinity, leader, slice_wl, state_wl
        names[d] = name
        domains.append(d)
    assert [names[d] for d in placer.sorted_domains_with_leader(domains, unconstrained)] == want


# (id, level value, affinityScore, sliceCount, podCount)
SORTED_CASES = {
    "affinityScore descending: higher affinity score comes first": (
        True, [("low-affinity", "a", 10, 5, 10), ("high-affinity", "b", 100, 5, 10)], False,
        ["high-affinity", "low-affinity"]),
    "affinityScore ignored when feature gate is disabled": (
        False, [("low-affinity", "a", 10, 5, 10), ("high-affinity", "b", 100, 5, 10)], False,
        ["low-affinity", "high-affinity"]),
    "BestFit: sliceCount descending": (
        False, [("a", "a", 0, 3, 1), ("b", "b", 0, 1, 1), ("c", "c", 0, 2, 1)], False, ["a", "c", "b"]),
    "LeastFreeCapacity: sliceCount ascending": (
        False, [("a", "a", 0, 3, 1), ("b", "b", 0, 1, 1), ("c", "c", 0, 2, 1)], True, ["b", "c", "a"]),
    "BestFit: podCount ascending as tiebreaker": (
        False, [("large", "a", 0, 5, 100), ("small", "b", 0, 5, 10), ("medium", "c", 0, 5, 50)], False,
        ["small", "medium", "large"]),
    "LeastFreeCapacity: podCount ascending as tiebreaker": (
        False, [("large", "a", 0, 5, 100), ("small", "b", 0, 5, 10), ("medium", "c", 0, 5, 50)], True,
        ["small", "medium", "large"]),
    "levelValues ascending as final tiebreaker": (
        False, [("c", "c", 0, 5, 10), ("a", "a", 0, 5, 10), ("b", "b", 0, 5, 10)], False, ["a", "b", "c"]),
}


@pytest.mark.parametrize("case", list(SORTED_CASES), ids=[c.replace(" ", "_") for c in SORTED_CASES])
def test_sorted_domains(case: str):
    """Go: TestSortedDomains, every case. "verifies the sorting criteria (in order of priority):
    1. affinityScore - descending (when TASRespectNodeAffinityPreferred is enabled)
    2. sliceCount - descending (BestFit) or ascending (LeastFreeCapacity) 3. podCount -
    ascending (always, as tiebreaker) 4. levelValues - ascending (always, as final
    tiebreaker)". Level "block"; `sortedDomains(domains, unconstrained)`."""
    affinity_gate, specs, unconstrained, want = SORTED_CASES[case]
    placer, index = hand_set_placer("block", sorted(v for _, v, *_ in specs),
                                    TASRespectNodeAffinityPreferred=affinity_gate)
    c = placer.counts
    names, domains = {}, []
    for name, value, affinity, slices, state in specs:
        d = index[value]
        c.affinity[d], c.slice[d], c.state[d] = affinity, slices, state
        names[d] = name
        domains.append(d)
    assert [names[d] for d in placer.sorted_domains(domains, unconstrained)] == want


# ---------------------------------------------------------------- TestCompareDomainLevelValues

HOSTNAME_LEVELS = ("block", "rack", HOSTNAME)
NON_HOSTNAME_LEVELS = ("block", "rack")

# (levels, a's level values, b's level values, wanted sign)
COMPARE_CASES = {
    "isLowestLevelNode with same-parent sibling domains: ascending by hostname": (
        HOSTNAME_LEVELS, ("b1", "r1", "node-a"), ("b1", "r1", "node-b"), -1),
    "isLowestLevelNode with same-parent sibling domains: descending by hostname": (
        HOSTNAME_LEVELS, ("b1", "r1", "node-b"), ("b1", "r1", "node-a"), 1),
    "isLowestLevelNode with same-parent sibling domains: equal hostname": (
        HOSTNAME_LEVELS, ("b1", "r1", "node-a"), ("b1", "r1", "node-a"), 0),
    "fallback comparator: multi-level inputs with different parents sorted lexicographically across levels": (
        HOSTNAME_LEVELS, ("b1", "r1", "node-z"), ("b1", "r2", "node-a"), -1),
    "fallback comparator: non-hostname levels sorted lexicographically across levels": (
        NON_HOSTNAME_LEVELS, ("b1", "r1"), ("b1", "r2"), -1),
}


def compare_nodes(levels: tuple[str, ...], paths: list[tuple[str, ...]]) -> list[dict]:
    """A node per distinct path (named by its last value with the hostname level)."""
    out = []
    for i, path in enumerate(dict.fromkeys(paths)):
        labels = {key: value for key, value in zip(levels, path, strict=True) if key != HOSTNAME}
        if levels[-1] == HOSTNAME:
            out.append(node(path[-1], labels=labels))
        else:
            out.append(node(f"n{i}", hostname=False, labels=labels))
    return out


@pytest.mark.parametrize("case", list(COMPARE_CASES), ids=[c.replace(" ", "_") for c in COMPARE_CASES])
def test_compare_domain_level_values(case: str):
    """Go: TestCompareDomainLevelValues, every case: the sign of
    `compareDomainLevelValues(a, b)` for two leaf domains (with the hostname level lowest,
    siblings compare by hostname; otherwise their level values compare lexicographically
    across levels). In the engine: the sign of the difference of the two leaves' ranks (the
    final tie-break of `sorted_domains`), on the tree of the two domains' nodes."""
    levels, a, b, want = COMPARE_CASES[case]
    snap = snapshot_of(levels, compare_nodes(levels, [a, b]))
    placer = Placer(snap, gates())
    tree = snap.tree
    lowest = tree.depth - 1
    da = tree.domain_index(a) + tree.offsets[lowest]
    db = tree.domain_index(b) + tree.offsets[lowest]
    assert (placer.values(da), placer.values(db)) == (a, b)
    diff = placer.rank[da] - placer.rank[db]
    assert (diff > 0) - (diff < 0) == want


# ---------------------------------------------------------------- TestTASCachingRemainingResourcesFeatureGate


@pytest.mark.parametrize("caching", [True, False], ids=["enableCaching=true", "enableCaching=false"])
def test_tas_caching_remaining_resources_feature_gate(caching: bool):
    """Go: TestTASCachingRemainingResourcesFeatureGate, enableCaching=true and false
    (TASCachingRemainingResources).

    Level "hostname"; node-a (hostname node-a) of 8 CPU and 10Gi memory, Ready. The Go node has
    no pod slots in its allocatable and the Go test's requests count no pod: the engine's check
    counts one pod slot a pod, as the TAS requests of Kueue's flavor assigner do, so the node here
    has 110. The usage of 1 pod of 5 CPU on node-a: "Warm the Fits cache before
    adding TAS usage" -> fits; "Add TAS usage of 4 CPU (4000m), leaving 4 CPU (8000m - 4000m
    = 4000m) remaining" -> "Fits should now return false because 5 CPU > 4 CPU remaining";
    "Remove TAS usage" -> "Fits should now return true again after cache invalidation /
    re-evaluation"."""
    snap = snapshot_of(("hostname",), [node("node-a", hostname=False, labels={"hostname": "node-a"},
                                            cpu="8", memory="10Gi", pods="110")],
                       TASCachingRemainingResources=caching)
    flavor_usage = TopologyAssignment(("hostname",), (DomainAssignment(("node-a",), 1),))

    def fits() -> bool:
        return assignments_fit(snap, [({"cpu": 5000}, flavor_usage)])

    seen = [fits()]
    assert snap.add_tas_usage(("node-a",), {"cpu": 4000}, 1)
    seen.append(fits())
    assert snap.add_tas_usage(("node-a",), {"cpu": 4000}, 1, sign=-1)
    seen.append(fits())
    assert seen == [True, False, True]


# ---------------------------------------------------------------- TestUpdateCountsToMinimumGenericLogsLeafSummary


def test_update_counts_to_minimum_generic_with_violated_assumptions():
    """Go: TestUpdateCountsToMinimumGenericLogsLeafSummary, both subtests, their return value:
    "A single domain with room for one pod cannot accommodate the ten requested ones, which
    violates the assumptions of the algorithm": `updateCountsToMinimumGeneric([rack-1 with
    podCount 1], 10, 0, 1, false, false)` returns nil.

    The snapshot: level hostname, nodes node-a and node-b of 8 CPU. The Go domain "rack-1" is
    not in the tree; here the hand-set domain is node-a's (its counters only matter). The Go
    subtests' checks of the log entries ("code assumptions violated" with a summary of the
    leaves at error level, the leaf ids at verbosity 6) are not carried: the engine logs
    nothing."""
    placer, index = hand_set_placer(HOSTNAME, ["node-a", "node-b"])
    d = index["node-a"]
    placer.counts.state[d] = 1
    assert placer.update_counts_to_minimum([d], 10, 0, 1, False, False) == []


# ---------------------------------------------------------------- TestInitializeDomainIDCollision


def test_initialize_domain_id_collision():
    """Go: TestInitializeDomainIDCollision (an earlier version of the file).

    Levels (block, hostname); node b1 with block b1 and hostname b1: the leaf "b1" (keyed by
    its hostname) and the block domain "b1" share an id. The leaf has a parent, not itself,
    whose level values are [b1]; one domain per level; one root, the leaf's parent."""
    snap = snapshot_of((PROVIDER_BLOCK, HOSTNAME), [node("b1", labels={PROVIDER_BLOCK: "b1"})])
    tree = snap.tree
    leaf = tree.leaf_global(leaf_index(snap, "b1"))
    parent = tree.parent_of[leaf]
    assert parent != -1
    assert parent != leaf
    assert tree.values_of[parent] == ("b1",)
    assert len(tree.levels[0]) == 1
    assert len(tree.levels[1]) == 1
    assert tree.level_of[parent] == 0
