"""Kueue's unit tests of the Dominant Resource Share (pkg/cache/scheduler/fair_sharing_test.go:
TestDominantResourceShare, TestIsBorrowingOn, TestZeroWeightBorrows,
TestPreciseWeightedShareSerialized) and of the order in which fair-sharing preemption visits
ClusterQueues (pkg/scheduler/preemption/fairsharing/ordering_test.go:
TestMakeClusterQueueOrdering), against `scheduler.fair_sharing` and `scheduler.fair_preemption`.

The Go tests add each usage entry as a workload holding a quota reservation whose admission
names the flavor and the resource usage (MakeAdmission("cq").PodSets(MakePodSetAssignment(
"main").Assignment(resource, flavor, quantity))); here the same workloads go through the parser
into a ClusterState, whose quota tree gives the nodes whose shares are computed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pytest

from scheduler.cluster import ClusterState
from scheduler.fair_preemption import FairSearch, _TargetOrdering
from scheduler.fair_sharing import DRS, MAX_INT64, FairShares
from scheduler.features import DEFAULT_GATES
from scheduler.preemption import Preemptor, Variant, _Candidate
from scheduler.quota import FlavorResource

from .factories import cluster_state, parse
from .kueue_schedule import cluster_queue, cohort, flavor, flavor_quotas, pod_set, resource_group, workload

GPU = "example.com/gpu"
CPU_DEFAULT = FlavorResource("default", "cpu")
GPU_DEFAULT = FlavorResource("default", GPU)
FLAVORS = [flavor("default"), flavor("on-demand"), flavor("spot")]


def quota(nominal: str, *, lending_limit: str | None = None, borrowing_limit: str | None = None) -> tuple[str, ...]:
    """ResourceQuotaWrapper(r).NominalQuota(n)[.BorrowingLimit(b)][.LendingLimit(l)]."""
    return (nominal, borrowing_limit or "", lending_limit or "")


def usage_workload(i: int, fr: FlavorResource, quantity: str, *, cq: str = "cq", prefix: str = "workload") -> dict:
    """MakeWorkload(prefix-i, "default-namespace").ReserveQuotaAt(MakeAdmission(cq).PodSets(
    MakePodSetAssignment("main").Assignment(resource, flavor, quantity)))."""
    wl = workload(f"{prefix}-{i}", "default-namespace")
    psa = {"name": "main", "flavors": {fr.resource: fr.flavor}, "resourceUsage": {fr.resource: quantity},
           "count": 1}
    return {**wl, "status": {"admission": {"clusterQueue": cq, "podSetAssignments": [psa]},
                             "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                             "message": f"Quota reserved in ClusterQueue {cq}"}]}}


# ---------------------------------------------------------------- TestDominantResourceShare

# (name, is cohort, rounded weighted share, dominant resource, borrowing): fairSharingResult
Result = tuple[str, bool, int, str, bool]


def cq_row(name: str, value: int = 0, resource: str = "", borrowing: bool = False) -> Result:
    return (name, False, value, resource, borrowing)


def cohort_row(name: str, value: int = 0, resource: str = "", borrowing: bool = False) -> Result:
    return (name, True, value, resource, borrowing)


def drs_results(objects: Sequence[dict], usage: Mapping[FlavorResource, str],
                requests: Mapping[FlavorResource, int] | None) -> set[Result]:
    """dominantResourceShare(node, flvResQ).roundedWeightedShare() and IsBorrowing() of every
    ClusterQueue and Cohort, after the usage is added."""
    workloads = [usage_workload(i, fr, q) for i, (fr, q) in enumerate(usage.items())]
    tree = cluster_state([*FLAVORS, *objects, *workloads]).quota
    shares = FairShares()
    out: set[Result] = set()
    for nodes, is_cohort in ((tree.queues, False), (tree.cohorts, True)):
        for name, node in nodes.items():
            drs = shares.of(node, requests)
            out.add((name, is_cohort, drs.weighted_share, drs.dominant_resource, drs.borrowing))
    return out


QuotaSpec = Mapping[str, tuple[str, ...] | str]


def cq_and_lender(cq_resources: QuotaSpec, lender_resources: QuotaSpec, *, cq_weight: str = "1",
                  lender_weight: str = "1") -> list[dict]:
    """ClusterQueues "cq" and "lending-cq" in Cohort "test-cohort", flavor "default" each."""
    return [
        cluster_queue("cq", resource_group(flavor_quotas("default", **cq_resources)), cohort="test-cohort",
                      fair_weight=cq_weight),
        cluster_queue("lending-cq", resource_group(flavor_quotas("default", **lender_resources)),
                      cohort="test-cohort", fair_weight=lender_weight),
    ]


def idle_lender_and_cohort(cq: Result) -> set[Result]:
    return {cq, cq_row("lending-cq"), cohort_row("test-cohort")}


DRS_CASES = {
    "no_cohort": dict(
        usage={CPU_DEFAULT: "1", GPU_DEFAULT: "2"},
        objects=[cluster_queue("cq", resource_group(flavor_quotas("default", cpu="2000", **{GPU: "5"})))],
        requests=None,
        want={cq_row("cq")},
    ),
    "usage_below_nominal": dict(
        usage={CPU_DEFAULT: "1", GPU_DEFAULT: "2"},
        objects=cq_and_lender({"cpu": "2", GPU: "5"}, {"cpu": "8", GPU: "5"}),
        requests=None,
        want=idle_lender_and_cohort(cq_row("cq")),
    ),
    "usage_above_nominal": dict(
        usage={CPU_DEFAULT: "3", GPU_DEFAULT: "7"},
        objects=cq_and_lender({"cpu": "2", GPU: "5"}, {"cpu": "8", GPU: "5"}),
        requests=None,
        want=idle_lender_and_cohort(cq_row("cq", 200, GPU, True)),  # (7-5)*1000/10
    ),
    "usage_slightly_above_nominal_in_a_cohort_with_large_quotas": dict(
        usage={GPU_DEFAULT: "501"},
        objects=cq_and_lender({GPU: "500"}, {GPU: "1000"}, lender_weight="300"),
        requests=None,
        want=idle_lender_and_cohort(cq_row("cq", 1, GPU, True)),
    ),
    "usage_way_above_nominal_in_a_cohort_with_large_quotas_and_weights": dict(
        usage={GPU_DEFAULT: "800"},
        objects=cq_and_lender({GPU: "500"}, {GPU: "1000"}, cq_weight="300", lender_weight="300"),
        requests=None,
        want=idle_lender_and_cohort(cq_row("cq", 1, GPU, True)),
    ),
    "one_resource_above_nominal": dict(
        usage={CPU_DEFAULT: "3", GPU_DEFAULT: "3"},
        objects=cq_and_lender({"cpu": "2", GPU: "5"}, {"cpu": "8", GPU: "5"}),
        requests=None,
        want=idle_lender_and_cohort(cq_row("cq", 100, "cpu", True)),  # (3-2)*1000/10
    ),
    "usage_with_workload_above_nominal": dict(
        usage={CPU_DEFAULT: "1", GPU_DEFAULT: "2"},
        objects=cq_and_lender({"cpu": "2", GPU: "5"}, {"cpu": "8", GPU: "5"}),
        requests={CPU_DEFAULT: 4_000, GPU_DEFAULT: 4},
        want=idle_lender_and_cohort(cq_row("cq", 300, "cpu", True)),  # (1+4-2)*1000/10
    ),
    "a_resource_with_zero_lendable": dict(
        usage={CPU_DEFAULT: "1", GPU_DEFAULT: "1"},
        objects=cq_and_lender({"cpu": "2", GPU: quota("2", lending_limit="0")},
                              {"cpu": "8", GPU: quota("64", lending_limit="0")}),
        requests={CPU_DEFAULT: 4_000, GPU_DEFAULT: 4},
        want=idle_lender_and_cohort(cq_row("cq", 300, "cpu", True)),  # (1+4-2)*1000/10
    ),
    "a_zero_weight_cluster_queue_borrowing_only_what_nobody_lends": dict(
        usage={GPU_DEFAULT: "3"},
        objects=cq_and_lender({GPU: quota("2", lending_limit="0")}, {GPU: quota("64", lending_limit="0")},
                              cq_weight="0"),
        requests={},
        want=idle_lender_and_cohort(cq_row("cq", MAX_INT64, "", True)),
    ),
    "multiple_flavors": dict(
        usage={FlavorResource("on-demand", "cpu"): "15", FlavorResource("spot", "cpu"): "5"},
        objects=[
            cluster_queue("cq", resource_group(flavor_quotas("on-demand", cpu="20"), flavor_quotas("spot", cpu="80")),
                          cohort="test-cohort", fair_weight="1"),
            cluster_queue("lending-cq", resource_group(flavor_quotas("default", cpu="100")), cohort="test-cohort",
                          fair_weight="1"),
        ],
        requests={FlavorResource("on-demand", "cpu"): 10_000},
        want=idle_lender_and_cohort(cq_row("cq", 25, "cpu", True)),  # ((15+10-20)+0)*1000/200
    ),
    "above_nominal_with_integer_weight": dict(
        usage={GPU_DEFAULT: "7"},
        objects=cq_and_lender({GPU: "5"}, {GPU: "5"}, cq_weight="2"),
        requests=None,
        want=idle_lender_and_cohort(cq_row("cq", 100, GPU, True)),  # ((7-5)*1000/10)/2
    ),
    "above_nominal_with_decimal_weight": dict(
        usage={GPU_DEFAULT: "7"},
        objects=cq_and_lender({GPU: "5"}, {GPU: "5"}, cq_weight="0.5"),
        requests=None,
        want=idle_lender_and_cohort(cq_row("cq", 400, GPU, True)),  # ((7-5)*1000/10)/(1/2)
    ),
    "above_nominal_with_zero_weight": dict(
        usage={GPU_DEFAULT: "7"},
        objects=cq_and_lender({GPU: "5"}, {GPU: "10"}, cq_weight="0"),
        requests=None,
        want=idle_lender_and_cohort(cq_row("cq", MAX_INT64, GPU, True)),  # math.MaxInt
    ),
    "cohort_has_resource_share": dict(
        usage={GPU_DEFAULT: "10"},
        objects=[
            cluster_queue("cq", resource_group(flavor_quotas("default", **{GPU: "5"})), cohort="child-cohort",
                          fair_weight="1"),
            cohort("child-cohort", parent="root", fair_weight="2"),
            cohort("root", resource_group(flavor_quotas("default", **{GPU: "45"}))),
        ],
        requests=None,
        want={cq_row("cq", 100, GPU, True),  # (5 / 50) * 1000
              cohort_row("child-cohort", 50, GPU, True),  # (5 / 50) * 1000 / 2
              cohort_row("root")},
    ),
    "resource_share_defined_for_resources_only_available_at_the_root_cohort": dict(
        usage={GPU_DEFAULT: "10"},
        objects=[
            cluster_queue("cq", resource_group(flavor_quotas("default", **{GPU: "0"})), cohort="child-cohort",
                          fair_weight="1"),
            cohort("child-cohort", parent="root", fair_weight="2"),
            cohort("root", resource_group(flavor_quotas("default", **{GPU: "50"}))),
        ],
        requests=None,
        want={cq_row("cq", 200, GPU, True),  # (10 / 50) * 1000
              cohort_row("child-cohort", 100, GPU, True),  # (10 / 50) * 1000 / 2
              cohort_row("root")},
    ),
    "resource_share_affected_by_borrowing_limit": dict(
        usage={GPU_DEFAULT: "10"},
        objects=[
            cluster_queue("cq", resource_group(flavor_quotas("default", **{GPU: "0"})), cohort="child-cohort"),
            cohort("child-cohort", resource_group(flavor_quotas("default", **{GPU: quota("0", borrowing_limit="10")})),
                   parent="root"),
            cohort("root", resource_group(flavor_quotas("default", **{GPU: "50"}))),
        ],
        requests=None,
        want={cq_row("cq", 1000, GPU, True),  # (10 / 10) * 1000
              cohort_row("child-cohort", 200, GPU, True),  # (10 / 50) * 1000
              cohort_row("root")},
    ),
    # "borrowing against unlimited lendable capacity (exabyte-scale quota)" is not carried: Kueue
    # takes a nominal quota of "1E" CPUs as unlimited; the engine refuses quantities beyond 2^62
    # milli-units with an error naming the field (scheduler/quantity.py), as sums of such values
    # would overflow Kueue's int64 arithmetic
}

DRS_GO_NAMES = {
    "no_cohort": "no cohort",
    "usage_below_nominal": "usage below nominal",
    "usage_above_nominal": "usage above nominal",
    "usage_slightly_above_nominal_in_a_cohort_with_large_quotas":
        "usage slightly above nominal in a cohort with large quotas",
    "usage_way_above_nominal_in_a_cohort_with_large_quotas_and_weights":
        "usage way above nominal in a cohort with large quotas and weights",
    "one_resource_above_nominal": "one resource above nominal",
    "usage_with_workload_above_nominal": "usage with workload above nominal",
    "a_resource_with_zero_lendable": "A resource with zero lendable",
    "a_zero_weight_cluster_queue_borrowing_only_what_nobody_lends":
        "a zero-weight ClusterQueue borrowing only what nobody lends",
    "multiple_flavors": "multiple flavors",
    "above_nominal_with_integer_weight": "above nominal with integer weight",
    "above_nominal_with_decimal_weight": "above nominal with decimal weight",
    "above_nominal_with_zero_weight": "above nominal with zero weight",
    "cohort_has_resource_share": "cohort has resource share",
    "resource_share_defined_for_resources_only_available_at_the_root_cohort":
        "resource share defined for resources only available at the root cohort",
    "resource_share_affected_by_borrowing_limit": "resource share affected by borrowing limit",
}


@pytest.mark.parametrize("case", list(DRS_CASES))
def test_dominant_resource_share(case: str):
    """Go: TestDominantResourceShare, every case (named in DRS_GO_NAMES): the rounded weighted
    share, dominant resource and borrowing flag of every ClusterQueue and Cohort."""
    tc = DRS_CASES[case]
    assert case in DRS_GO_NAMES
    assert drs_results(tc["objects"], tc["usage"], tc["requests"]) == tc["want"]


# ---------------------------------------------------------------- TestIsBorrowingOn


def is_borrowing_on(usage: Mapping[FlavorResource, str], requested: Mapping[FlavorResource, int] | None
                    ) -> tuple[bool, bool]:
    """(IsBorrowing(), IsBorrowingOn(requestedFRs)) of dominantResourceShare(cq, nil): "cq" (cpu 2,
    gpu 5, weight 1) and "lending-cq" (cpu 8, gpu 5) in Cohort "cohort"."""
    objects = [
        flavor("default"),
        cluster_queue("cq", resource_group(flavor_quotas("default", cpu="2", **{GPU: "5"})), cohort="cohort",
                      fair_weight="1"),
        cluster_queue("lending-cq", resource_group(flavor_quotas("default", cpu="8", **{GPU: "5"})), cohort="cohort"),
        *[usage_workload(i, fr, q, prefix="wl") for i, (fr, q) in enumerate(usage.items())],
    ]
    drs = FairShares().of(cluster_state(objects).quota.queues["cq"])
    return drs.borrowing, drs.borrowing_on(requested or {})


def test_is_borrowing_on_borrows_on_requested_flavor():
    """Go: TestIsBorrowingOn / "borrows on requested flavor"."""
    assert is_borrowing_on({CPU_DEFAULT: "3"}, {CPU_DEFAULT: 1_000}) == (True, True)


def test_is_borrowing_on_borrows_on_unrequested_flavor_only():
    """Go: TestIsBorrowingOn / "borrows on unrequested flavor only"."""
    assert is_borrowing_on({CPU_DEFAULT: "1", GPU_DEFAULT: "7"}, {CPU_DEFAULT: 1_000}) == (True, False)


def test_is_borrowing_on_borrows_on_both_requests_one():
    """Go: TestIsBorrowingOn / "borrows on both, requests one"."""
    assert is_borrowing_on({CPU_DEFAULT: "3", GPU_DEFAULT: "7"}, {GPU_DEFAULT: 1}) == (True, True)


def test_is_borrowing_on_no_borrowing():
    """Go: TestIsBorrowingOn / "no borrowing"."""
    assert is_borrowing_on({CPU_DEFAULT: "1", GPU_DEFAULT: "2"}, {CPU_DEFAULT: 1_000}) == (False, False)


def test_is_borrowing_on_nil_requested_frs():
    """Go: TestIsBorrowingOn / "nil requestedFRs"."""
    assert is_borrowing_on({CPU_DEFAULT: "3"}, None) == (True, False)


# ---------------------------------------------------------------- TestZeroWeightBorrows


def test_zero_weight_borrows_zero_weight_and_borrowing_returns_true():
    """Go: TestZeroWeightBorrows / "zero weight and borrowing returns true"."""
    assert DRS(weight=0.0, ratio=100.0, borrowing=True).zero_weight_borrows is True


def test_zero_weight_borrows_zero_weight_and_not_borrowing_returns_false():
    """Go: TestZeroWeightBorrows / "zero weight and not borrowing returns false"."""
    assert DRS(weight=0.0, ratio=0.0).zero_weight_borrows is False


def test_zero_weight_borrows_non_zero_weight_and_borrowing_returns_false():
    """Go: TestZeroWeightBorrows / "non-zero weight and borrowing returns false"."""
    assert DRS(weight=1.0, ratio=100.0, borrowing=True).zero_weight_borrows is False


def test_zero_weight_borrows_zero_weight_borrowing_what_nobody_lends_returns_true():
    """Go: TestZeroWeightBorrows / "zero weight borrowing what nobody lends returns true"."""
    assert DRS(weight=0.0, ratio=0.0, borrowing=True).zero_weight_borrows is True


# ---------------------------------------------------------------- TestPreciseWeightedShareSerialized
# The engine has no string form of a share; the value it serializes is PreciseWeightedShare.


def test_precise_weighted_share_serialized_zero_weight_returning_inf():
    """Go: TestPreciseWeightedShareSerialized / "zero weight returning Inf": DRS{fairWeight: 0,
    unweightedRatio: 100} (borrowing unset) gives "+Inf"."""
    assert DRS(weight=0.0, ratio=100.0).precise == math.inf


def test_precise_weighted_share_serialized_zero_unweighted_ratio_returns_0():
    """Go: TestPreciseWeightedShareSerialized / "zero unweighted ratio returns 0"."""
    assert DRS(weight=1.0, ratio=0.0).precise == 0


def test_precise_weighted_share_serialized_regular_integer_division():
    """Go: TestPreciseWeightedShareSerialized / "regular integer division"."""
    assert DRS(weight=2.0, ratio=400.0).precise == 200


def test_precise_weighted_share_serialized_decimal_division():
    """Go: TestPreciseWeightedShareSerialized / "decimal division"."""
    assert DRS(weight=4.0, ratio=10.0).precise == 2.5


# ---------------------------------------------------------------- TestMakeClusterQueueOrdering


def cpu_queue(name: str, nominal: str, cohort_name: str | None) -> dict:
    return cluster_queue(name, resource_group(flavor_quotas("default", cpu=nominal)), cohort=cohort_name)


def admitted_cpu(name: str, cq: str, cpu: str) -> dict:
    """MakeWorkload(name, "ns").Request(cpu, ...).SimpleReserveQuota(cq, "default", now)."""
    wl = workload(name, "ns", pod_sets=[pod_set(requests={"cpu": cpu})])
    psa = {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": cpu}, "count": 1}
    return {**wl, "status": {"admission": {"clusterQueue": cq, "podSetAssignments": [psa]},
                             "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                             "message": f"Quota reserved in ClusterQueue {cq}"}]}}


def visit_order(objects: Sequence[dict], admitted: Sequence[dict], preemptor_cq: str, candidate_cqs: set[str],
                actions: Sequence[str] = ()) -> list[str]:
    """MakeClusterQueueOrdering(preemptorCQ, candidates).Iter(): the ClusterQueue of every target
    yielded, with DropQueue where `actions` says "drop" and PopWorkload otherwise."""
    preemptor_wl = workload("preemptor-wl", "ns", queue="lq", requests={"cpu": "1"})
    state = ClusterState(parse([flavor("default"), *objects, *admitted, preemptor_wl]), DEFAULT_GATES)
    wl = state.workload("ns/preemptor-wl")
    assert wl is not None
    search = FairSearch(Preemptor(state), wl, state.cluster_queues[preemptor_cq], {}, set(), None,
                        strategies=())
    candidates = []
    for obj in admitted:
        cq = obj["status"]["admission"]["clusterQueue"]
        if cq in candidate_cqs:
            cand = state.workload(f"ns/{obj['metadata']['name']}")
            assert cand is not None
            candidates.append(_Candidate(cand, cq, None, Variant.RECLAIM_WITHOUT_BORROWING))
    ordering = _TargetOrdering(search, candidates)
    got: list[str] = []
    for i, target in enumerate(ordering):
        got.append(target.name)
        if i < len(actions) and actions[i] == "drop":
            ordering.drop(target)
        else:
            ordering.pop(target)
        assert len(got) <= 50, "exceeded 50 iterations, likely an infinite loop"
    return got


def high_and_low() -> list[dict]:
    return [cpu_queue("preemptor", "4", "all"), cpu_queue("high", "2", "all"), cpu_queue("low", "2", "all")]


def test_make_cluster_queue_ordering_no_cohort_preemptor_cq_yielded_for_in_cq_preemption():
    """Go: TestMakeClusterQueueOrdering / "no cohort: preemptor CQ yielded for in-CQ preemption"."""
    got = visit_order([cpu_queue("preemptor", "4", None)], [admitted_cpu("wl1", "preemptor", "1")],
                      "preemptor", {"preemptor"})
    assert got == ["preemptor"]


def test_make_cluster_queue_ordering_non_borrowing_cq_is_pruned_even_with_candidates():
    """Go: TestMakeClusterQueueOrdering / "non-borrowing CQ is pruned even with candidates"."""
    got = visit_order([cpu_queue("preemptor", "4", "all"), cpu_queue("target", "5", "all")],
                      [admitted_cpu("t1", "target", "2")], "preemptor", {"target"})
    assert got == []


def test_make_cluster_queue_ordering_higher_drs_cq_returned_before_lower_drs_cq():
    """Go: TestMakeClusterQueueOrdering / "higher DRS CQ returned before lower DRS CQ"."""
    got = visit_order(high_and_low(), [admitted_cpu("h1", "high", "5"), admitted_cpu("l1", "low", "3")],
                      "preemptor", {"high", "low"})
    assert got == ["high", "low"]


def test_make_cluster_queue_ordering_cq_with_highest_drs_returned_again_while_it_still_has_candidates():
    """Go: TestMakeClusterQueueOrdering / "CQ with highest DRS returned again while it still has
    candidates"."""
    admitted = [admitted_cpu("h1", "high", "3"), admitted_cpu("h2", "high", "2"), admitted_cpu("l1", "low", "3")]
    assert visit_order(high_and_low(), admitted, "preemptor", {"high", "low"}) == ["high", "high", "low"]


def test_make_cluster_queue_ordering_drop_queue_prevents_cq_from_being_returned_again():
    """Go: TestMakeClusterQueueOrdering / "drop queue prevents CQ from being returned again"."""
    admitted = [admitted_cpu("h1", "high", "3"), admitted_cpu("h2", "high", "2"), admitted_cpu("l1", "low", "3")]
    got = visit_order(high_and_low(), admitted, "preemptor", {"high", "low"}, actions=["drop", "pop"])
    assert got == ["high", "low"]


def test_make_cluster_queue_ordering_hierarchical_cohorts_higher_drs_subtree_visited_first():
    """Go: TestMakeClusterQueueOrdering / "hierarchical cohorts: higher-DRS subtree visited first"."""
    objects = [cpu_queue("preemptor-cq", "4", "root"), cpu_queue("left-cq", "2", "left-cohort"),
               cpu_queue("right-cq", "2", "right-cohort"),
               cohort("root"), cohort("left-cohort", parent="root"), cohort("right-cohort", parent="root")]
    admitted = [admitted_cpu("lc1", "left-cq", "5"), admitted_cpu("rc1", "right-cq", "3")]
    assert visit_order(objects, admitted, "preemptor-cq", {"left-cq", "right-cq"}) == ["left-cq", "right-cq"]
