"""Kueue's flavor assigner unit tests (pkg/scheduler/flavorassigner/flavorassigner_test.go, API
v1beta2), the test functions after TestAssignFlavors: TestHierarchical, TestIsPreferred,
TestWorkloadsTopologyRequests_ElasticJobsValidation (its case not yet transcribed),
TestAssignFlavorsWithAllowedFlavors and TestIsNoFitDueToCapacityAndLimits (its cases without
TAS; the TAS ones are in test_kueue_flavorassigner_more.py).

The Go tests call the flavor assigner on a ClusterQueue snapshot with usage added by hand and a
fake preemption oracle. Here each case builds the same ClusterQueues, Cohorts and
ResourceFlavors as objects, holds the case's usage with admitted workloads, runs one scheduling
cycle and checks what the cycle shows of the Go expectation: a Fit workload is admitted on the
expected flavors; a NoFit one is not admitted, its QuotaReserved condition carrying the Go
NoFitReason (UnadmittedWorkloadsObservability, on in the engine as in
TestIsNoFitDueToCapacityAndLimits); a Preempt one, where the Go oracle says preemption is
possible, waits for the preemption of workloads made preemptible for it.

TestIsPreferred checks Kueue's comparator of two flavor modes directly; here each of its cases
is a cluster in which the flavor assigner meets those two modes, in that order, on two flavors
of one resource group with WhenCanBorrow and WhenCanPreempt TryNextFlavor, so that the flavor
the workload gets is the one isPreferred prefers.

Not transcribed (no cycle shows them): TestDeletedFlavors (a flavor deleted between the
snapshot and the assignment: a ClusterQueue naming a missing flavor is inactive, in Kueue and
the engine), TestLastAssignmentOutdated, TestAssignment_TotalRequestsFor,
TestAssignment_ComputeTASNetUsage and TestAssignment_RequiresBorrowing (internals and usage
numbers), and TestIsNoFitDueToCapacityAndLimits "flavor spanning multiple resource groups" (a
ClusterQueue listing a flavor in two resource groups, which Kueue's webhook and the engine
refuse). TestWorkloadsTopologyRequests_ErrorBranches and _ZeroCountPodSetSkipped, and the other
cases of _ElasticJobsValidation, are in test_kueue_flavorassigner_more.py (the "more than one TAS
flavor assigned" branch in test_flavor_assignment_kueue.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.cluster import ALLOWED_RESOURCE_FLAVOR_ANNOTATION
from scheduler.features import DEFAULT_GATES
from scheduler.model import WORKLOAD_SLICE_REPLACEMENT_FOR
from scheduler.results import PassResult, WorkloadResult

from . import factories
from .factories import result_of, run
from .kueue_schedule import (
    cluster_queue,
    cohort,
    condition,
    flavor,
    flavor_quotas,
    local_queue,
    namespace,
    pod_set,
    reserve_quota,
    resource_group,
    workload,
)
from .test_kueue_flavorassigner_more import ELASTIC_JOB, elastic_result, elastic_workload, previous_slice

NS = "ns"
LOW, HIGH = 0, 100
TRY_NEXT = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}


# ---------------------------------------------------------------- helpers


def tainted_flavor(name: str, key: str, value: str, *, node_labels: Mapping[str, str] | None = None) -> dict:
    """MakeResourceFlavor(name).Taint({key, value, NoSchedule})."""
    rf = flavor(name, node_labels=node_labels)
    rf["spec"]["nodeTaints"] = [{"key": key, "value": value, "effect": "NoSchedule"}]
    return rf


def main_pod_set(requests: Mapping[str, str], *, node_selector: Mapping[str, str] | None = None,
                 tolerations: Sequence[Mapping[str, str]] = ()) -> dict:
    """MakePodSet("main", 1).Request(...) with its node selector and tolerations."""
    ps = pod_set("main", 1, requests=requests, node_selector=node_selector)
    if tolerations:
        ps["template"]["spec"]["tolerations"] = [dict(t) for t in tolerations]
    return ps


def pending(name: str, cq: str, requests: Mapping[str, str] | None = None, *, priority: int | None = None,
            pod_sets: Sequence[dict] | None = None, annotations: Mapping[str, str] | None = None) -> dict:
    """The workload under test, queued to ClusterQueue `cq` (through LocalQueue lq-<cq>)."""
    return workload(name, NS, queue=f"lq-{cq}", pod_sets=pod_sets, requests=requests, priority=priority,
                    annotations=annotations, created=0)


def holding(name: str, cq: str, flavors: Mapping[str, str], requests: Mapping[str, str], *,
            priority: int = LOW, annotations: Mapping[str, str] | None = None) -> dict:
    """An admitted workload of one pod holding `requests` on `flavors` in `cq` (the usage the Go
    case adds to the ClusterQueue snapshot)."""
    wl = workload(name, NS, queue=f"lq-{cq}", requests=requests, priority=priority, annotations=annotations,
                  created=-100)
    return reserve_quota(wl, cq, {"main": (flavors, None)}, admitted=True)


def cycle(*objects: dict, cqs: Sequence[dict], gates: Mapping[str, bool] | None = None) -> PassResult:
    """One scheduling cycle over namespace ns, a LocalQueue lq-<name> per ClusterQueue, and `objects`."""
    cluster = [namespace(NS), *cqs, *(local_queue(f"lq-{cq['metadata']['name']}", NS, cq["metadata"]["name"])
                                      for cq in cqs), *objects]
    return run(cluster, cycles=1, feature_gates=DEFAULT_GATES.with_overrides(**(gates or {})))


def flavors_of(w: WorkloadResult) -> dict[str, dict[str, str]]:
    return {ps.name: dict(ps.flavors) for ps in w.pod_sets}


def assert_fit(result: PassResult, name: str, flavors: Mapping[str, str]) -> None:
    """RepresentativeMode Fit: admitted by the cycle with the Go assignment's flavors."""
    w = result_of(result, name, NS)
    assert w.status == "Admitted"
    assert flavors_of(w) == {"main": dict(flavors)}
    assert condition(result, name, NS, "QuotaReserved")[0] == "True"


def assert_no_fit(result: PassResult, name: str, reason: str) -> WorkloadResult:
    """RepresentativeMode NoFit with the Go NoFitReason: left inadmissible, QuotaReserved=False
    with that reason."""
    w = result_of(result, name, NS)
    assert w.status == "Inadmissible"
    assert condition(result, name, NS, "QuotaReserved")[:2] == ("False", reason)
    return w


def assert_preempting(result: PassResult, name: str, message: str, n: int = 1) -> None:
    """RepresentativeMode Preempt with targets found: waiting for the preemption of `n` workloads."""
    w = result_of(result, name, NS)
    assert w.status == "Pending"
    assert w.message == f"{message}. Pending the preemption of {n} workload(s)"


def evicted(result: PassResult, name: str) -> bool:
    c = condition(result, name, NS, "Evicted")
    return c is not None and c[0] == "True"


# ---------------------------------------------------------------- TestHierarchical
# We have 3 flavors: one, two, three and a 3-level cohort hierarchy where each cohort get 4
# units of CPU in a different flavor.


def hierarchical(*usage: dict) -> PassResult:
    """Cohorts three (root, 4 CPUs of flavor three) <- two (4 of two) <- one (4 of one);
    test-clusterqueue in cohort one and other-clusterqueue in cohort two, both 0 of every
    flavor; test-clusterqueue preempts LowerPriority within itself and in its cohort and tries
    the next flavor when it could preempt. The pending workload requests 4 CPUs."""
    zero = (flavor_quotas("one", cpu="0"), flavor_quotas("two", cpu="0"), flavor_quotas("three", cpu="0"))
    test_cq = cluster_queue("test-clusterqueue", resource_group(*zero), cohort="one",
                            preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
                            fungibility={"whenCanPreempt": "TryNextFlavor"})
    other_cq = cluster_queue("other-clusterqueue", resource_group(*zero), cohort="two")
    cohorts = [cohort("three", resource_group(flavor_quotas("three", cpu="4"))),
               cohort("two", resource_group(flavor_quotas("two", cpu="4")), parent="three"),
               cohort("one", resource_group(flavor_quotas("one", cpu="4")), parent="two")]
    return cycle(flavor("one"), flavor("two"), flavor("three"), *cohorts, *usage,
                 pending("wl", "test-clusterqueue", {"cpu": "4"}), cqs=[test_cq, other_cq])


def test_hierarchical_select_the_top_flavor():
    """TestHierarchical "Select the top flavor": flavor one is used up by test-clusterqueue and
    flavor two by other-clusterqueue (at the Go test's priority, so nothing to preempt): Fit on
    flavor three, borrowed from the root."""
    result = hierarchical(holding("test-usage", "test-clusterqueue", {"cpu": "one"}, {"cpu": "4"}),
                          holding("other-usage", "other-clusterqueue", {"cpu": "two"}, {"cpu": "4"}))
    assert_fit(result, "wl", {"cpu": "three"})


def test_hierarchical_select_the_first_flavor_which_fits():
    """TestHierarchical "Select the first flavor which fits": flavor one used up: Fit on flavor
    two (borrowing stops the search: WhenCanBorrow is not TryNextFlavor)."""
    result = hierarchical(holding("test-usage", "test-clusterqueue", {"cpu": "one"}, {"cpu": "4"}))
    assert_fit(result, "wl", {"cpu": "two"})


# ---------------------------------------------------------------- TestIsPreferred


def preference_cluster(preference: str | None, *, fit_level: int) -> PassResult:
    """Two flavors of one resource group in ClusterQueue cq (cohort c1, under root c2), tried in
    this order, for a workload of 3 CPUs at priority 100:

    * y: cq has none, cohort c1 (`fit_level` 1) or c2 (`fit_level` 2) has 3: Fit borrowing at
      that level;
    * x: cq has 2, all held by its own workload low (priority 0), c1 has 1 more: Preempt (low
      is a target within cq, borrowWithinCohort lets cq preempt while borrowing), borrowing 1
      after it.

    WhenCanBorrow and WhenCanPreempt are TryNextFlavor, so both are tried and the workload gets
    the one isPreferred(x's mode, y's mode) decides."""
    fungibility = dict(TRY_NEXT)
    if preference is not None:
        fungibility["preference"] = preference
    cq = cluster_queue("cq", resource_group(flavor_quotas("y", cpu="0"), flavor_quotas("x", cpu="2")), cohort="c1",
                       preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority",
                                   "borrowWithinCohort": {"policy": "LowerPriority"}},
                       fungibility=fungibility)
    c1_quotas = [flavor_quotas("x", cpu="1")] + ([flavor_quotas("y", cpu="3")] if fit_level == 1 else [])
    c2_quotas = [flavor_quotas("y", cpu="3")] if fit_level == 2 else [flavor_quotas("y", cpu="0")]
    cohorts = [cohort("c2", resource_group(*c2_quotas)), cohort("c1", resource_group(*c1_quotas), parent="c2")]
    return cycle(flavor("x"), flavor("y"), *cohorts, holding("low", "cq", {"cpu": "x"}, {"cpu": "2"}),
                 pending("wl", "cq", {"cpu": "3"}, priority=HIGH), cqs=[cq])


def test_is_preferred_feature_gate_disabled_prioritises_preemption():
    """TestIsPreferred "feature gate disabled prioritises preemption": a={fit, borrowing 0} is
    preferred to b={preempt, borrowing 0} (TryNextFlavor for both, no preference).

    ClusterQueue cq (no cohort) with flavors x then y of 2 CPUs each; x is held by low
    (priority 0), which cq may preempt: x is Preempt, y Fit without borrowing. The workload of
    1 CPU (priority 100) is admitted on y."""
    cq = cluster_queue("cq", resource_group(flavor_quotas("x", cpu="2"), flavor_quotas("y", cpu="2")),
                       preemption={"withinClusterQueue": "LowerPriority"}, fungibility=TRY_NEXT)
    result = cycle(flavor("x"), flavor("y"), holding("low", "cq", {"cpu": "x"}, {"cpu": "2"}),
                   pending("wl", "cq", {"cpu": "1"}, priority=HIGH), cqs=[cq])
    assert_fit(result, "wl", {"cpu": "y"})
    assert not evicted(result, "low")


def test_is_preferred_explicit_borrowing_over_preemption_prioritises_borrowing_distance():
    """TestIsPreferred "explicit BorrowingOverPreemption prioritises borrowing distance":
    a={preempt, borrowing 1} is not preferred to b={fit, borrowing 2}: the workload is admitted
    on y, borrowing from the root, and low stays."""
    result = preference_cluster("BorrowingOverPreemption", fit_level=2)
    assert_fit(result, "wl", {"cpu": "y"})
    assert not evicted(result, "low")


def test_is_preferred_explicit_preemption_over_borrowing_prioritises_lower_preemption():
    """TestIsPreferred "explicit PreemptionOverBorrowing prioritises lower preemption":
    a={preempt, borrowing 1} is preferred to b={fit, borrowing 2}: the workload takes x and
    waits for the preemption of low."""
    result = preference_cluster("PreemptionOverBorrowing", fit_level=2)
    assert_preempting(result, "wl", "couldn't assign flavors to pod set main: "
                                    "insufficient unused quota for cpu in flavor x, 2 more needed")
    assert evicted(result, "low")


def test_is_preferred_explicit_preemption_over_borrowing_breaks_borrowing_ties_with_preemption():
    """TestIsPreferred "explicit PreemptionOverBorrowing breaks borrowing ties with preemption":
    a={preempt, borrowing 1} is not preferred to b={fit, borrowing 1}: y's 3 CPUs are in c1
    here, so both borrow at level 1, and the workload is admitted on y."""
    result = preference_cluster("PreemptionOverBorrowing", fit_level=1)
    assert_fit(result, "wl", {"cpu": "y"})
    assert not evicted(result, "low")


# ---------------------------------------------------------------- TestWorkloadsTopologyRequests_ElasticJobsValidation


def test_elastic_validation_unconstrained_topology_is_accepted_with_elastic_jobs_via_workload_slices():
    """TestWorkloadsTopologyRequests_ElasticJobsValidation "unconstrained topology is accepted
    with ElasticJobsViaWorkloadSlices" (both elastic gates on): the new slice (2 pods) of an
    elastic workload, replacing a slice with a TopologyAssignment, asks for an unconstrained
    topology: no error, Fit."""
    old = previous_slice(factories.pod_set(count=1, unconstrained=True))
    got = elastic_result(old, elastic_workload("new", factories.pod_set(count=2, unconstrained=True), replaces="old"))
    assert got.status == "Admitted"
    assert got.pod_sets[0].assignment is not None
    assert got.pod_sets[0].assignment.pod_count == 2


# ---------------------------------------------------------------- TestAssignFlavorsWithAllowedFlavors


def allowed_flavors_result(allowed: Sequence[str] | None) -> PassResult:
    """ClusterQueue cq: f1 and f2 of 10 CPUs, occupied of 1 (ConcurrentAdmission on); a workload
    of 2 CPUs with the allowed-resource-flavor annotation naming `allowed` (none when None)."""
    cq = cluster_queue("cq", resource_group(flavor_quotas("f1", cpu="10"), flavor_quotas("f2", cpu="10"),
                                            flavor_quotas("occupied", cpu="1")))
    annotations = {ALLOWED_RESOURCE_FLAVOR_ANNOTATION: ",".join(allowed)} if allowed is not None else None
    return cycle(flavor("f1"), flavor("f2"), flavor("occupied"),
                 pending("wl", "cq", {"cpu": "2"}, annotations=annotations), cqs=[cq],
                 gates={"ConcurrentAdmission": True})


def test_allowed_flavors_allow_only_f2():
    """TestAssignFlavorsWithAllowedFlavors "allow only f2"."""
    assert_fit(allowed_flavors_result(["f2"]), "wl", {"cpu": "f2"})


def test_allowed_flavors_allow_only_f1():
    """TestAssignFlavorsWithAllowedFlavors "allow only f1"."""
    assert_fit(allowed_flavors_result(["f1"]), "wl", {"cpu": "f1"})


def test_allowed_flavors_allow_only_the_occupied_flavor():
    """TestAssignFlavorsWithAllowedFlavors "allow only the occupied flavor": 2 CPUs exceed its 1
    (NoFit)."""
    w = result_of(allowed_flavors_result(["occupied"]), "wl", NS)
    assert w.status == "Inadmissible"


def test_allowed_flavors_allow_f1_and_f2():
    """TestAssignFlavorsWithAllowedFlavors "allow f1 and f2": the first that fits."""
    assert_fit(allowed_flavors_result(["f1", "f2"]), "wl", {"cpu": "f1"})


def test_allowed_flavors_no_constraints():
    """TestAssignFlavorsWithAllowedFlavors "no constraints"."""
    assert_fit(allowed_flavors_result(None), "wl", {"cpu": "f1"})


def test_allowed_flavors_allow_non_existent():
    """TestAssignFlavorsWithAllowedFlavors "allow non-existent" (NoFit)."""
    w = result_of(allowed_flavors_result(["non-existent"]), "wl", NS)
    assert w.status == "Inadmissible"


# ---------------------------------------------------------------- TestIsNoFitDueToCapacityAndLimits (without TAS)

KEY_VAL = {"key": "key", "operator": "Equal", "value": "val", "effect": "NoSchedule"}


def no_fit_flavors() -> list[dict]:
    """flavor-a (type=a) and flavor-b (tainted key=val:NoSchedule)."""
    return [flavor("flavor-a", node_labels={"type": "a"}), tainted_flavor("flavor-b", "key", "val")]


def default_cq(preemption: Mapping[str, str] | None = None) -> dict:
    """The Go test's `cq`: flavor-a and flavor-b of 2 CPUs (their borrowing limit of 4 dropped: no
    cohort)."""
    return cluster_queue("cq", resource_group(flavor_quotas("flavor-a", cpu=("2", "4")),
                                              flavor_quotas("flavor-b", cpu=("2", "4"))), preemption=preemption)


def cohort_cqs(cq_quota: Sequence[str], sibling_quota: Sequence[str]) -> list[dict]:
    """cq and sibling in cohort `cohort`, each with flavor-a and flavor-b of (nominal,
    borrowingLimit) CPUs."""
    return [cluster_queue(name, resource_group(flavor_quotas("flavor-a", cpu=tuple(quota)),
                                               flavor_quotas("flavor-b", cpu=tuple(quota))), cohort="cohort")
            for name, quota in (("cq", cq_quota), ("sibling", sibling_quota))]


def no_fit_case(ps: dict, *objects: dict, cqs: Sequence[dict] | None = None,
                flavors: Sequence[dict] | None = None, gates: Mapping[str, bool] | None = None,
                annotations: Mapping[str, str] | None = None) -> PassResult:
    return cycle(*(flavors if flavors is not None else no_fit_flavors()), *objects,
                 pending("wl", "cq", pod_sets=[ps], priority=HIGH, annotations=annotations),
                 cqs=cqs if cqs is not None else [default_cq()], gates=gates)


def test_is_no_fit_succeeds_to_schedule_on_flavor_a():
    """TestIsNoFitDueToCapacityAndLimits "succeeds to schedule on flavor-a" (no NoFitReason)."""
    assert_fit(no_fit_case(main_pod_set({"cpu": "1"})), "wl", {"cpu": "flavor-a"})


def test_is_no_fit_insufficient_quota():
    """TestIsNoFitDueToCapacityAndLimits "insufficient quota": 3 CPUs (ExceedsMaxQuota)."""
    assert_no_fit(no_fit_case(main_pod_set({"cpu": "3"})), "wl", "ExceedsMaxQuota")


def test_is_no_fit_exceeds_max_capacity_limits():
    """TestIsNoFitDueToCapacityAndLimits "exceeds max capacity limits": 5 CPUs
    (ExceedsMaxQuota)."""
    assert_no_fit(no_fit_case(main_pod_set({"cpu": "5"})), "wl", "ExceedsMaxQuota")


def test_is_no_fit_taints_mismatch():
    """TestIsNoFitDueToCapacityAndLimits "taints mismatch": type=wrong matches flavor-a's label
    not, flavor-b's taint is not tolerated (NoMatchingFlavor)."""
    ps = main_pod_set({"cpu": "1"}, node_selector={"type": "wrong"})
    assert_no_fit(no_fit_case(ps), "wl", "NoMatchingFlavor")


def test_is_no_fit_succeeds_to_schedule_on_flavor_b_with_a_tolerated_taint():
    """TestIsNoFitDueToCapacityAndLimits "succeeds to schedule on flavor-b with a tolerated
    taint": flavor-b has no label keys so the workload's "type" selector is irrelevant to it; it
    matches and the workload is admitted there."""
    ps = main_pod_set({"cpu": "1"}, node_selector={"type": "non-existent"}, tolerations=[KEY_VAL])
    assert_fit(no_fit_case(ps), "wl", {"cpu": "flavor-b"})


def test_is_no_fit_node_affinity_mismatch_when_both_flavors_declare_same_key():
    """TestIsNoFitDueToCapacityAndLimits "node affinity mismatch when both flavors declare same
    key": flavors type=a and type=b, selector type=non-existent (NoMatchingFlavor)."""
    ps = main_pod_set({"cpu": "1"}, node_selector={"type": "non-existent"})
    flavors = [flavor("flavor-a", node_labels={"type": "a"}), flavor("flavor-b", node_labels={"type": "b"})]
    assert_no_fit(no_fit_case(ps, flavors=flavors), "wl", "NoMatchingFlavor")


def test_is_no_fit_flavor_mismatch_for_workload_slices():
    """TestIsNoFitDueToCapacityAndLimits "flavor mismatch for workload slices"
    (ElasticJobsViaWorkloadSlices): the slice wl-old (1 CPU) holds flavor-b; its replacement (2
    CPUs, type=a) may not take flavor-a, which is not the original's flavor ("could not assign
    flavor-a flavor since the original workload is assigned: flavor-b"), nor flavor-b, whose
    taint it does not tolerate (NoMatchingFlavor).

    The Go test hands the assigner wl-old as the slice replaced; here wl-old is an admitted
    elastic workload in cq and wl names it in its workload-slice-replacement-for annotation."""
    old = holding("wl-old", "cq", {"cpu": "flavor-b"}, {"cpu": "1"}, annotations={ELASTIC_JOB: "true"})
    ps = main_pod_set({"cpu": "2"}, node_selector={"type": "a"})
    annotations = {ELASTIC_JOB: "true", WORKLOAD_SLICE_REPLACEMENT_FOR: f"{NS}/wl-old"}
    result = no_fit_case(ps, old, annotations=annotations, gates={"ElasticJobsViaWorkloadSlices": True})
    assert_no_fit(result, "wl", "NoMatchingFlavor")


def test_is_no_fit_prioritization_of_structural_mismatch_over_capacity_mismatch():
    """TestIsNoFitDueToCapacityAndLimits "prioritization of structural mismatch over capacity
    mismatch": 3 CPUs and 20Gi of memory (which cq does not cover), type=wrong
    (NoMatchingFlavor)."""
    ps = main_pod_set({"cpu": "3", "memory": "20Gi"}, node_selector={"type": "wrong"})
    assert_no_fit(no_fit_case(ps), "wl", "NoMatchingFlavor")


def test_is_no_fit_flavor_not_allowed_by_annotations():
    """TestIsNoFitDueToCapacityAndLimits "flavor not allowed by annotations" (ConcurrentAdmission):
    only flavor-a is allowed, and its 2 CPUs are over-used (4 CPUs in the Go case's usage); the
    Go oracle says preemption is possible: Preempt, no NoFitReason.

    Here the 4 CPUs are held by one workload of priority 0 in cq, which lets a higher priority
    preempt within it ("" in the Go ClusterQueue, relied on as not Never): the workload (priority
    100) waits for that preemption instead of taking the free flavor-b."""
    user = holding("user", "cq", {"cpu": "flavor-a"}, {"cpu": "4"})
    ps = main_pod_set({"cpu": "1"})
    result = no_fit_case(ps, user, cqs=[default_cq({"withinClusterQueue": "LowerPriority"})],
                         annotations={ALLOWED_RESOURCE_FLAVOR_ANNOTATION: "flavor-a"},
                         gates={"ConcurrentAdmission": True})
    w = result_of(result, "wl", NS)
    assert w.status == "Pending"
    assert w.message.endswith(". Pending the preemption of 1 workload(s)")
    assert "insufficient unused quota for cpu in flavor flavor-a, 3 more needed" in w.message
    assert evicted(result, "user")


def test_is_no_fit_insufficient_capacity_cohort_has_available_capacity_waiting_for_quota():
    """TestIsNoFitDueToCapacityAndLimits "insufficient capacity, cohort has available capacity
    (waiting for quota)": cq and sibling have 2 CPUs of each flavor (borrowing limit 2), sibling
    uses its 2 of each; 3 CPUs would borrow 1 that cq may not preempt for (WaitingForQuota;
    flavor-b's taint is NoMatchingFlavor)."""
    usage = [holding("sibling-a", "sibling", {"cpu": "flavor-a"}, {"cpu": "2"}),
             holding("sibling-b", "sibling", {"cpu": "flavor-b"}, {"cpu": "2"})]
    result = no_fit_case(main_pod_set({"cpu": "3"}), *usage, cqs=cohort_cqs(("2", "2"), ("2", "2")))
    assert_no_fit(result, "wl", "WaitingForQuota")


def test_is_no_fit_exceeds_cohort_max_capacity_limits():
    """TestIsNoFitDueToCapacityAndLimits "exceeds cohort max capacity limits": 5 CPUs over cq's
    2 + 2 borrowable (ExceedsMaxQuota)."""
    result = no_fit_case(main_pod_set({"cpu": "5"}), cqs=cohort_cqs(("2", "2"), ("2", "2")))
    assert_no_fit(result, "wl", "ExceedsMaxQuota")


def test_is_no_fit_exceeds_borrowing_limit_but_cohort_has_capacity():
    """TestIsNoFitDueToCapacityAndLimits "exceeds borrowing limit but cohort has capacity": 4
    CPUs over cq's 2 + 1 borrowable, sibling's 5 free (ExceedsMaxQuota)."""
    result = no_fit_case(main_pod_set({"cpu": "4"}), cqs=cohort_cqs(("2", "1"), ("5", "5")))
    assert_no_fit(result, "wl", "ExceedsMaxQuota")
