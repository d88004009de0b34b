"""Cases of four newer test files of Kueue's TAS cache package (pkg/cache/scheduler):

* `tas_flavor_snapshot_grouped_placement_test.go`: exhaustive checks that domain selection
  (`findLevelWithFitDomains`) and the greedy distribution (`updateCountsToMinimumGeneric`) of a
  grouped request (a leader PodSet with its workers) never lose a feasible placement;
* `tas_flavor_snapshot_affinity_test.go`: domains ordered by their preferred node affinity score;
* `tas_without_leader_test.go`: a worker-only request is not swayed by leader capacities, and a
  worker-only placement after a grouped one is the same as before it;
* `tas_unreserved_usage_test.go`: not carried (see the end of this module).

Kueue's tests call the snapshot's internal helpers on domain states they set by hand. The
engine's counterparts are methods of `scheduler.placement.Placer` (`find_level_with_fit_domains`,
`update_counts_to_minimum`, `sorted_domains`) and functions of `scheduler.balanced`
(`place_slices_balanced`, `select_optimal_domain_set`), which read the per-domain counters of
`Placer.counts`. Here those counters are set by hand on the domains of a real flavor snapshot
(one topology level whose domains are the Go case's domains), as the Go tests set theirs:

    Go domain / domainState           engine counter
    state / podCount                  state
    stateWithLeader / podCountWithLeader      state_wl
    sliceState / sliceCount           slice
    sliceStateWithLeader / sliceCountWithLeader  slice_wl
    leaderState / leaderCount         leader
    affinityScore                     affinity

For a request without a leader, the engine's phase 1 gives every domain `leader` 0 and
with-leader counters equal to the plain ones (scheduler/phase1.py); a Go state that leaves its
leader fields at zero ("zero leader capacity") is set that way. Where a Go case sets leader
fields on purpose ("unrelated leader capacity"), they are set as the Go case sets them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from scheduler import balanced
from scheduler.placement import Placer, _Params
from scheduler.snapshot import TASFlavorSnapshot
from scheduler.topology_assignment import find_topology_assignment, prepare_placement

from .factories import (
    FLAVOR,
    HOSTNAME,
    flavor_snapshot,
    gates,
    node,
    pod_set,
    preferred_affinity,
    resource_flavor,
    tas_requests,
    topology,
    workload,
)

DUMMY = "dummy"
RACK_LEVEL = "rack"
PROVIDER_RACK = "cloud.provider.com/topology-rack"


# ---------------------------------------------------------------- helpers


class HandSetCounts:
    """Per-domain counters of a placement run, set by hand (the Go tests' domain states). No
    phase-1 arrays: the Placer reads these lists only."""

    def __init__(self, size: int) -> None:
        self.state = [0] * size
        self.state_wl = [0] * size
        self.slice = [0] * size
        self.slice_wl = [0] * size
        self.leader = [0] * size
        self.affinity = [0] * size

    def phase1_arrays(self) -> None:
        return None


def one_level_snapshot(level: str, values: list[str]) -> TASFlavorSnapshot:
    """A flavor snapshot of topology "dummy" with one level, one node per domain value."""
    nodes = [node(v) if level == HOSTNAME else node(f"node-{v}", labels={level: v}) for v in values]
    return flavor_snapshot([topology(DUMMY, levels=(level,)), resource_flavor(topology_name=DUMMY), *nodes])


def hand_set_placer(snap: TASFlavorSnapshot, **gate_values: bool) -> tuple[Placer, dict[str, int]]:
    """A Placer on `snap` with zeroed hand-set counters, and the global index of each level-0
    domain by its value."""
    placer = Placer(snap, gates(**gate_values))
    placer.counts = HandSetCounts(snap.tree.size)
    index = {placer.values(d)[-1]: d for d in snap.tree.level_domains(0)}
    return placer, index


@dataclass(frozen=True)
class DomainState:
    """Go's `domainState` of tas_without_leader_test.go."""

    pod_count: int = 0
    slice_count: int = 0
    pod_count_with_leader: int = 0
    slice_count_with_leader: int = 0
    leader_count: int = 0
    affinity_score: int = 0


def set_state(placer: Placer, d: int, s: DomainState) -> None:
    """The Go state on domain `d`; without leader fields, the engine's no-leader form."""
    c = placer.counts
    c.state[d], c.slice[d], c.leader[d], c.affinity[d] = s.pod_count, s.slice_count, s.leader_count, s.affinity_score
    no_leader_fields = s.leader_count == 0 and s.pod_count_with_leader == 0 and s.slice_count_with_leader == 0
    c.state_wl[d] = s.pod_count if no_leader_fields else s.pod_count_with_leader
    c.slice_wl[d] = s.slice_count if no_leader_fields else s.slice_count_with_leader


def params(*, count: int, slice_size: int, leader_count: int = 0, required: bool = False,
           unconstrained: bool = False) -> _Params:
    """Go's `topologyAssignmentParameters` at level 0 (requestedLevelIdx and sliceLevelIdx 0)."""
    return _Params(count=count, slice_size=slice_size, leader_count=leader_count, requested_level=0,
                   slice_level=0, required=required, unconstrained=unconstrained, slice_size_at_level={})


# ---------------------------------------------------------------- grouped placements (exhaustive)


@dataclass(frozen=True)
class GroupedState:
    """Go's `groupedPlacementDomainState`."""

    capacity: int
    capacity_with_leader: int = 0
    leader_fits: bool = False


def grouped_placement_domain_states(max_capacity: int) -> list[GroupedState]:
    states: list[GroupedState] = []
    for capacity in range(max_capacity + 1):
        states.append(GroupedState(capacity))
        states.extend(GroupedState(capacity, with_leader, True) for with_leader in range(capacity + 1))
    return states


def grouped_placement_fits(configuration: tuple[GroupedState, ...], total: int, required: int) -> bool:
    """A grouped placement fits when at least one leader-capable domain has a capacity penalty
    no greater than the workers' available slack."""
    return any(s.leader_fits and total - (s.capacity - s.capacity_with_leader) >= required for s in configuration)


GROUPED_DOMAINS = ["domain-0", "domain-1", "domain-2"]


@pytest.mark.parametrize("unconstrained", [False, True], ids=["unconstrained=false", "unconstrained=true"])
def test_find_level_with_fit_domains_preserves_feasible_grouped_placements(unconstrained: bool):
    """Go: TestFindLevelWithFitDomainsPreservesFeasibleGroupedPlacements, subtests
    "unconstrained=false" / "unconstrained=true" (TASProfileMixed on for the latter).

    Every configuration of three hostname domains (capacities 0..3, with or without room for
    the leader, and every capacity next to the leader), every count a grouped placement fits:
    `findLevelWithFitDomains(0)` with count, leaderCount 1, sliceSize 1 finds level 0 with no
    reason, and some selected leader-capable domain keeps the workers' capacity after placing
    the leader."""
    snap = one_level_snapshot(HOSTNAME, GROUPED_DOMAINS)
    placer, index = hand_set_placer(snap, **({"TASProfileMixed": True} if unconstrained else {}))
    ids = [index[v] for v in GROUPED_DOMAINS]
    failures: list[str] = []
    for configuration in itertools.product(grouped_placement_domain_states(3), repeat=len(ids)):
        total = sum(s.capacity for s in configuration)
        for required in range(total + 1):
            if not grouped_placement_fits(configuration, total, required):
                continue
            c = placer.counts = HandSetCounts(snap.tree.size)
            for d, s in zip(ids, configuration, strict=True):
                c.state[d] = c.slice[d] = s.capacity
                c.state_wl[d] = c.slice_wl[d] = s.capacity_with_leader
                c.leader[d] = 1 if s.leader_fits else 0
            p = params(count=required, slice_size=1, leader_count=1, unconstrained=unconstrained)
            level, result, reason = placer.find_level_with_fit_domains(0, p)
            if reason or not result or level != 0:
                failures.append(f"feasible domain selection failed: count={required}, configuration={configuration}, "
                                f"level={level}, reason={reason!r}")
                continue
            selected = sum(c.state[d] for d in result)
            if not any(c.leader[d] > 0 and selected - (c.state[d] - c.state_wl[d]) >= required for d in result):
                failures.append(f"selected domains cannot preserve worker capacity after placing leader: "
                                f"count={required}, configuration={configuration}, "
                                f"selected={[placer.values(d)[-1] for d in result]}")
    assert not failures, f"{len(failures)} failures, first: {failures[:5]}"


@pytest.mark.parametrize(("unconstrained", "slices_enabled"), list(itertools.product([False, True], repeat=2)),
                         ids=lambda v: str(v).lower())
def test_update_counts_to_minimum_generic_preserves_feasible_grouped_placements(unconstrained: bool,
                                                                              slices_enabled: bool):
    """Go: TestUpdateCountsToMinimumGenericPreservesFeasibleGroupedPlacements, subtests
    "unconstrained=<u>/slicesEnabled=<s>" (TASProfileMixed on when unconstrained).

    Every configuration of three domains (capacities 0..4 in slices, with or without room for
    the leader) and every count a grouped placement fits: `updateCountsToMinimumGeneric` over
    the domains in configuration order, with leaderCount 1 and slice size 2 when slices are
    enabled (else 1), returns each domain at most once, never assigns below zero or above a
    domain's capacity (its capacity with the leader where it takes the leader), gives the
    leader only to a domain it fits, keeps slices whole, and assigns every worker and the one
    leader."""
    slice_size = 2 if slices_enabled else 1
    snap = one_level_snapshot(HOSTNAME, GROUPED_DOMAINS)
    placer, index = hand_set_placer(snap, **({"TASProfileMixed": True} if unconstrained else {}))
    ids = [index[v] for v in GROUPED_DOMAINS]
    failures: list[str] = []
    for configuration in itertools.product(grouped_placement_domain_states(4), repeat=len(ids)):
        total = sum(s.capacity for s in configuration)
        for required in range(total + 1):
            if not grouped_placement_fits(configuration, total, required):
                continue
            c = placer.counts = HandSetCounts(snap.tree.size)
            original: dict[int, GroupedState] = {}
            for d, s in zip(ids, configuration, strict=True):
                c.state[d] = s.capacity * slice_size
                c.state_wl[d] = s.capacity_with_leader * slice_size
                c.slice[d] = s.capacity
                c.slice_wl[d] = s.capacity_with_leader
                c.leader[d] = 1 if s.leader_fits else 0
                original[d] = GroupedState(c.state[d], c.state_wl[d], s.leader_fits)
            count = required * slice_size
            where = f"count={count}, configuration={configuration}"
            result = placer.update_counts_to_minimum(ids, count, 1, slice_size, unconstrained, slices_enabled)
            if not result:
                failures.append(f"feasible placement returned nothing: {where}")
                continue
            if len(set(result)) != len(result):
                failures.append(f"domain returned more than once: {where}")
                continue
            workers = leaders = 0
            for d in result:
                cap = original.get(d)
                name = placer.values(d)[-1]
                if cap is None:
                    failures.append(f"unknown domain returned: {where}, domain={name}")
                elif c.state[d] < 0 or c.leader[d] < 0:
                    failures.append(f"negative assignment returned: {where}, domain={name}, "
                                    f"assignedWorkers={c.state[d]}, assignedLeaders={c.leader[d]}")
                elif c.state[d] > cap.capacity:
                    failures.append(f"worker assignment exceeds capacity: {where}, domain={name}, "
                                    f"assigned={c.state[d]}, capacity={cap.capacity}")
                elif c.leader[d] > 0 and c.state[d] > cap.capacity_with_leader:
                    failures.append(f"worker assignment exceeds capacity with leader: {where}, domain={name}, "
                                    f"assigned={c.state[d]}, capacityWithLeader={cap.capacity_with_leader}")
                elif c.leader[d] > 0 and not cap.leader_fits:
                    failures.append(f"leader assigned to infeasible domain: {where}, domain={name}")
                elif slices_enabled and c.state[d] % slice_size:
                    failures.append(f"worker assignment is not slice-aligned: {where}, domain={name}, "
                                    f"assigned={c.state[d]}")
                workers += c.state[d]
                leaders += c.leader[d]
            if workers != count or leaders != 1:
                failures.append(f"incomplete grouped placement: {where}, assignedWorkers={workers}, "
                                f"assignedLeaders={leaders}")
    assert not failures, f"{len(failures)} failures, first: {failures[:5]}"


# ---------------------------------------------------------------- preferred node affinity


def test_sorted_domains_with_preferred_affinity():
    """Go: TestSortedDomainsWithPreferredAffinity.

    Two hostname domains of 1 CPU each; the request prefers (weight 10) `region In [us-west]`,
    which only node-preferred carries. `fillInCounts` with that preferred affinity scores the
    domains, and `sortedDomains([node-other, node-preferred], false)` puts node-preferred first.

    The Go test sets no gate (at its commit the ordering by affinity score was not gated); in
    Kueue v0.19, as in the engine, it is behind TASRespectNodeAffinityPreferred, turned on here.
    """
    objects = [
        topology(DUMMY, levels=(HOSTNAME,)),
        resource_flavor(topology_name=DUMMY),
        node("node-preferred", labels={"region": "us-west"}, cpu="1", pods=None),
        node("node-other", labels={"region": "us-east"}, cpu="1", pods=None),
    ]
    feature_gates = gates(TASRespectNodeAffinityPreferred=True)
    snap = flavor_snapshot(objects, feature_gates=feature_gates)
    wl = workload("wl", pod_sets=[pod_set("main", count=1, cpu="1", required=HOSTNAME,
                                          affinity=preferred_affinity("region", ["us-west"], weight=10))])
    (request,) = tas_requests(wl)
    placer, _, reason = prepare_placement(snap, request, None, gates=feature_gates)
    assert reason == "" and placer is not None
    index = {placer.values(d)[-1]: d for d in snap.tree.level_domains(0)}
    got = placer.sorted_domains([index["node-other"], index["node-preferred"]], False)
    assert [placer.values(d)[-1] for d in got] == ["node-preferred", "node-other"]


# ---------------------------------------------------------------- PodSets without a leader


@dataclass(frozen=True)
class WithoutLeaderCase:
    count: int
    required: bool = False
    unconstrained: bool = False
    mixed_profile: bool = False
    affinity: bool = False
    want: tuple[str, ...] = ()
    want_reason: str = ""


WITHOUT_LEADER_CASES = {
    "required domain": WithoutLeaderCase(count=8, required=True, want=("large",)),
    "best fit": WithoutLeaderCase(count=4, required=True, want=("small",)),
    "preferred spans domains": WithoutLeaderCase(count=14, want=("large", "small")),
    "unconstrained spans domains": WithoutLeaderCase(count=14, unconstrained=True, want=("large", "small")),
    "least free capacity": WithoutLeaderCase(count=4, unconstrained=True, mixed_profile=True, want=("small",)),
    "fallback from preferred affinity": WithoutLeaderCase(count=8, required=True, affinity=True, want=("large",)),
    "insufficient capacity": WithoutLeaderCase(
        count=18, required=True, want_reason='topology "dummy" allows to fit only 5 out of 9 slice(s)'),
}
# Kueue's "WithoutLeader" tests also run each case with leader capacities left on a domain for a
# request that has no leader ("Leader-only capacities must not affect a worker-only request"):
# Kueue's helpers keep such counters between requests and must ignore them. The engine's phase 1
# sets every domain's leader counters for the request at hand (for one without a leader, leader
# 0 and the with-leader counters equal to the plain ones), so that state never reaches its
# helpers: those variants are not carried, and the end-to-end case after a grouped request
# (`test_topology_assignment_without_leader_after_grouped_request`) checks the guarantee.


@pytest.mark.parametrize("case", list(WITHOUT_LEADER_CASES), ids=[n.replace(" ", "_") for n in WITHOUT_LEADER_CASES])
def test_find_level_with_fit_domains_without_leader(case: str):
    """Go: TestFindLevelWithFitDomainsWithoutLeader, every case, with perturbLeaderCapacity false.

    Rack domains "small" (6 pods, 3 slices; affinity score 10 in the affinity case) and "large"
    (10 pods, 5 slices); `findLevelWithFitDomains(0)` with the case's count, slice size 2, no
    leader. TASProfileMixed and TASRespectNodeAffinityPreferred are set to the case's values.
    (The perturbed variant: see the note above.)"""
    tc = WITHOUT_LEADER_CASES[case]
    snap = one_level_snapshot(RACK_LEVEL, ["small", "large"])
    placer, index = hand_set_placer(snap, TASProfileMixed=tc.mixed_profile,
                                    TASRespectNodeAffinityPreferred=tc.affinity)
    small = DomainState(pod_count=6, slice_count=3, affinity_score=10 if tc.affinity else 0)
    set_state(placer, index["small"], small)
    set_state(placer, index["large"], DomainState(pod_count=10, slice_count=5))
    _, got, reason = placer.find_level_with_fit_domains(
        0, params(count=tc.count, slice_size=2, required=tc.required, unconstrained=tc.unconstrained))
    assert reason == tc.want_reason
    assert tuple(placer.values(d)[-1] for d in got) == tc.want


def test_balanced_placement_without_leader():
    """Go: TestBalancedPlacementWithoutLeader, case "zero leader capacity" ("unrelated leader
    capacity": see the note above).

    Rack domains "small" (value a; 4 pods, 2 slices) and "large" (value b; 8 pods, 4 slices).
    `placeSlicesOnDomainsBalanced(domains, 5 slices, 0 leaders, slice size 2, threshold 2)`
    returns [large, small] with 6 pods on large and 4 on small."""
    snap = one_level_snapshot(RACK_LEVEL, ["a", "b"])
    placer, index = hand_set_placer(snap)
    small, large = index["a"], index["b"]
    set_state(placer, small, DomainState(pod_count=4, slice_count=2))
    set_state(placer, large, DomainState(pod_count=8, slice_count=4))
    names = {small: "small", large: "large"}
    got, reason = balanced.place_slices_balanced(placer, [small, large], 5, 0, 2, 2)
    assert reason == ""
    assert [names[d] for d in got] == ["large", "small"]
    assert {names[d]: placer.counts.state[d] for d in got} == {"large": 6, "small": 4}


def test_select_optimal_domain_set_without_leader():
    """Go: TestSelectOptimalDomainSetWithoutLeader, case "zero leader capacity" ("unrelated
    leader capacity": see the note above).

    "Equal pod capacities make the DP retain the first domain. Slice capacity must determine
    that order even when leader capacities disagree." Rack domains "small" (value a; 8 pods,
    2 slices) and "large" (value b;
    8 pods, 4 slices). `selectOptimalDomainSetToFit(domains, 2 slices, 0 leaders, slice size 2,
    by entropy)` selects [large]."""
    snap = one_level_snapshot(RACK_LEVEL, ["a", "b"])
    placer, index = hand_set_placer(snap)
    small, large = index["a"], index["b"]
    set_state(placer, small, DomainState(pod_count=8, slice_count=2))
    set_state(placer, large, DomainState(pod_count=8, slice_count=4))
    names = {small: "small", large: "large"}
    got = balanced.select_optimal_domain_set(placer, [small, large], 2, 0, 2, True)
    assert [names[d] for d in got or []] == ["large"]


@pytest.mark.parametrize("balanced_placement", [False, True], ids=["hostname_best_fit", "hostname_balanced"])
def test_topology_assignment_without_leader_after_grouped_request(balanced_placement: bool):
    """Go: TestTopologyAssignmentWithoutLeaderAfterGroupedRequest, cases "hostname best fit"
    and "hostname balanced" (TASBalancedPlacement off / on).

    Nodes n1 (rack r1) and n2 (rack r2), 4 CPU and 20 pods each; levels rack, hostname. Workers:
    6 pods of 1 CPU preferring the rack; leader: 1 pod of 1 CPU. The workers alone are placed,
    then twice: the grouped request places 6 workers and 1 leader, and the workers alone are
    placed again exactly as the first time, with no leader capacity left in the domain states.

    The Go test also turns TASNodeFeasibilityForAllLevels on, which the engine does not know; it
    only changes topologies that do not declare the hostname level, so these two cases do not
    depend on it. In the engine a worker-only request's counters are phase 1's for that shape,
    kept by the snapshot: "no leader capacity" is `leader` 0 and the with-leader counters equal
    to the plain ones everywhere."""
    feature_gates = gates(TASBalancedPlacement=balanced_placement)
    nodes = [node(n, labels={PROVIDER_RACK: r}, cpu="4", pods="20") for n, r in (("n1", "r1"), ("n2", "r2"))]
    snap = flavor_snapshot([topology(DUMMY, levels=(PROVIDER_RACK, HOSTNAME)), resource_flavor(topology_name=DUMMY),
                            *nodes], feature_gates=feature_gates)
    wl = workload("wl", pod_sets=[pod_set("workers", count=6, cpu="1", preferred=PROVIDER_RACK),
                                  pod_set("leader", count=1, cpu="1")])
    workers, leader = tas_requests(wl, flavor=FLAVOR)
    want, reason = find_topology_assignment(snap, workers, None, gates=feature_gates)
    assert reason == "", f"unexpected worker placement failure: {reason}"
    for _ in range(2):
        grouped, reason = find_topology_assignment(snap, workers, leader, gates=feature_gates)
        assert reason == "", f"unexpected grouped placement failure: {reason}"
        assert {name: grouped[name].pod_count for name in ("workers", "leader")} == {"workers": 6, "leader": 1}
        got, reason = find_topology_assignment(snap, workers, None, gates=feature_gates)
        assert reason == "", f"unexpected worker placement failure after grouped request: {reason}"
        assert got == want
        placer, _, reason = prepare_placement(snap, workers, None, gates=feature_gates)
        assert reason == "" and placer is not None
        c = placer.counts
        for d in range(snap.tree.size):
            assert (c.leader[d], c.state_wl[d], c.slice_wl[d]) == (0, c.state[d], c.slice[d]), \
                f"domain {placer.domain_id(d)} retains leader capacity after worker-only placement"


# ---------------------------------------------------------------- not carried
#
# TestTopologyAssignmentWithoutLeaderAfterGroupedRequest, cases "rack best fit" and "rack
# balanced": a topology without the hostname level, which TASNodeFeasibilityForAllLevels (on in
# the Go test, unknown to the engine) extends with a virtual hostname level.
#
# tas_unreserved_usage_test.go (TestObserveTASWorkloadIntent,
# TestDeleteClusterQueueReleasesTASReservation, TestUnreservedTASPodUsage,
# TestUnreservedTASUsageAggregatesPodsAcrossNodesAndWorkloads, TestTASPodUsageChangeFreesNode,
# TestReleasedTASWorkloadIntent, TestDeletedTASIntentDetachesOnPodAttributionChange,
# TestUnreservedTASUsageForMixedPodGroupOwners, TestUnreservedTASUsageForReplacementOwner,
# TestUnreservedTASUsageForPodGroupReplacement, TestUnreservedTASUsageForSliceReplacement,
# TestUnreservedTASUsageForConcurrentAdmissionVariant, and two benchmarks): they exercise
# Kueue's pod-event cache (`nonTasUsageCache.updateTAS` / `deleteTAS` / `observeWorkload` /
# `deleteWorkload` / `unreservedTASUsage`, `Cache.ObserveTASWorkloadIntent`,
# `Cache.DeleteClusterQueue`), newer than Kueue v0.19, which charges the bound pods of a TAS
# workload holding no quota reservation to their nodes. The engine has no such cache: a TAS
# workload's usage is its admission's TopologyAssignment while it holds quota, and a pod with a
# topology annotation never counts as node usage.
