"""Kueue's flavor assigner unit tests (pkg/scheduler/flavorassigner/flavorassigner_test.go, API
v1beta2), second part: the TestAssignFlavors cases from "preempt before try next flavor" to
"multi-podset, one fits and another fails, ...", and TestReclaimBeforePriorityPreemption.

The Go tests call the flavor assigner on a hand-made ClusterQueue snapshot, with the usage of the
case added to it and a fake preemption oracle. Here each case is a cluster: the ResourceFlavors it
uses, its ClusterQueue(s) and Cohort, a LocalQueue per ClusterQueue, admitted workloads holding
exactly the case's usage, and the case's workload pending; one scheduling cycle runs, and what it
shows is compared with the Go expectation:

* Fit: the workload is admitted with the Go assignment's flavor for every resource;
* Preempt: where the Go oracle says preemption is possible the usage is preemptible (lower
  priority than the incoming workload, in a ClusterQueue whose policies let Kueue take it), so the
  workload waits for its targets: "couldn't assign flavors to pod set main: <reasons>. Pending the
  preemption of N workload(s)";
* NoFit: the workload is inadmissible, with Kueue's message built from the PodSet's Status
  reasons (sorted, joined by ", ").

The Go oracle answers Preempt for any flavor/resource the case does not name, so where a case
relies on that default the usage it may hit is made preemptible too.

Not transcribed:

* "when borrowing while preemption is needed for flavor one; WhenCanBorrow=MayStopSearch",
  "...; WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch", "..., no borrowingLimit;
  WhenCanBorrow=MayStopSearch", "..., no borrowingLimit; WhenCanBorrow=MayStopSearch,
  WhenCanPreempt=MayStopSearch", "..., fair sharing enabled, reclaimWithinCohort=Any" and its
  "using deprecated ..." twin: the fake oracle says preemption is possible on flavor one, but the
  10 CPUs in use there are held by the secondary ClusterQueue within its nominal quota (12): it
  borrows nothing, and Kueue's preemption never takes from a ClusterQueue of the cohort that is
  not borrowing (classical and fair sharing alike), so no cycle gives the oracle's answer.
* "multiple TAS flavors assigned to different resources in the same PodSet leads to NoFit": in
  test_flavor_assignment_kueue.py already.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.features import DEFAULT_GATES
from scheduler.model import WORKLOAD_SLICE_REPLACEMENT_FOR
from scheduler.results import PassResult, WorkloadResult

from .factories import result_of, run
from .kueue_schedule import (
    cluster_queue,
    cohort,
    flavor,
    flavor_quotas,
    local_queue,
    namespace,
    pod_set,
    reserve_quota,
    resource_group,
    workload,
)
from .test_fair_sharing import FAIR

NS = "default"
CQ = "test-clusterqueue"
SECONDARY = "test-secondary-clusterqueue"
COHORT = "test-cohort"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"

# the incoming workload's priority; usage the Go oracle lets it preempt has a lower one, usage it
# says cannot be preempted a higher one
INCOMING, LOW, HIGH = 100, 0, 1000

# TestAssignFlavors' ResourceFlavors this part uses
FLAVORS = {"one": flavor("one", node_labels={"type": "one"}), "two": flavor("two", node_labels={"type": "two"})}

# Kueue's fungibility settings as the cases write them
MAY_STOP = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
TRY_NEXT = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
BORROW_TRY_NEXT = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"}
# Preemption(ReclaimWithinCohort: LowerPriority, BorrowWithinCohort: LowerPriority)
RECLAIM_AND_BORROW = {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}}
# the Go ClusterQueue sets no policy (the fake oracle decides); Kueue takes usage of the
# ClusterQueue itself from a lower priority with withinClusterQueue: LowerPriority
WITHIN_LOWER = {"withinClusterQueue": "LowerPriority"}


def holder(name: str, cq: str, requests: Mapping[str, str], flavors: Mapping[str, str], *,
           priority: int = LOW) -> dict:
    """An admitted workload of one pod holding `requests` in `cq` on `flavors` (resource ->
    flavor; `pods` too where the ClusterQueue covers it, as Kueue's admission would have it)."""
    wl = workload(name, NS, queue=f"lq-{cq}", requests=requests, priority=priority)
    return reserve_quota(wl, cq, {"main": (flavors, None)}, admitted=True)


def cycle(cqs: Sequence[dict], pending: dict, *, held: Sequence[dict] = (), flavors: Sequence[dict] | None = None,
          fair: bool = False, gates: Mapping[str, bool] | None = None) -> PassResult:
    """One cycle over the case's flavors, ClusterQueues (a LocalQueue `lq-<cq>` each, the
    pending workload's queue being lq-test-clusterqueue), their Cohort, the usage holders and the
    pending workload."""
    cohorts = sorted({cq["spec"]["cohortName"] for cq in cqs if "cohortName" in cq["spec"]})
    objects = [
        namespace(NS),
        *(flavors if flavors is not None else FLAVORS.values()),
        *cqs,
        *(cohort(name) for name in cohorts),
        *(local_queue(f"lq-{cq['metadata']['name']}", NS, cq["metadata"]["name"]) for cq in cqs),
        *held,
        pending,
    ]
    return run(objects, cycles=1, feature_gates=DEFAULT_GATES.with_overrides(**(gates or {})),
               config=FAIR if fair else None)


def incoming(requests: Mapping[str, str] | None = None, *, pod_sets: Sequence[dict] | None = None,
             annotations: Mapping[str, str] | None = None) -> dict:
    return workload("wl", NS, queue=f"lq-{CQ}", requests=requests, pod_sets=pod_sets, priority=INCOMING,
                    annotations=annotations)


def got(result: PassResult) -> WorkloadResult:
    return result_of(result, "wl", NS)


def flavors_of(w: WorkloadResult) -> dict[str, dict[str, str]]:
    return {ps.name: dict(ps.flavors) for ps in w.pod_sets}


def assert_fit(result: PassResult, want: Mapping[str, Mapping[str, str]]) -> None:
    """wantRepMode Fit: admitted in this cycle with these flavors per PodSet."""
    w = got(result)
    assert w.status == "Admitted", w.message
    assert flavors_of(w) == {k: dict(v) for k, v in want.items()}


def assert_preempting(result: PassResult, reasons: Sequence[str], targets: int, *,
                      want: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """wantRepMode Preempt with preemption possible: left waiting for `targets` preempted workloads."""
    w = got(result)
    msg = f"couldn't assign flavors to pod set main: {', '.join(sorted(reasons))}"
    assert (w.status, w.message) == ("Pending", f"{msg}. Pending the preemption of {targets} workload(s)")
    if want is not None:
        assert flavors_of(w) == {k: dict(v) for k, v in want.items()}


def assert_no_fit(result: PassResult, message: str, *, status: str = "Inadmissible") -> None:
    """wantRepMode NoFit: not admitted, with Kueue's message; inadmissible, or back in the active
    queue (`status` "Pending") when its flavor scan stopped before some resource group's last
    flavor (Kueue requeues a workload with PendingFlavors at once)."""
    w = got(result)
    assert (w.status, w.message) == (status, message)


def insufficient_unused(resource: str, flavor_name: str, more: str) -> str:
    return f"insufficient unused quota for {resource} in flavor {flavor_name}, {more} more needed"


def over_max(resource: str, flavor_name: str, before: str, request: str, maximum: str) -> str:
    return (f"insufficient quota for {resource} in flavor {flavor_name}, previously considered podsets requests "
            f"({before}) + current podset request ({request}) > maximum capacity ({maximum})")


# ---------------------------------------------------------------- TestAssignFlavors


def two_flavor_queue(*, fungibility: Mapping[str, str] | None = None) -> dict:
    """test-clusterqueue, no cohort: flavors one and two with 10 pods and 10 CPUs each."""
    return cluster_queue(CQ, resource_group(flavor_quotas("one", pods="10", cpu="10"),
                                            flavor_quotas("two", pods="10", cpu="10")),
                         fungibility=fungibility, preemption=WITHIN_LOWER)


def preempt_before_try_next_flavor() -> None:
    # clusterQueueUsage: one/cpu 2; the oracle's default answer (Preempt) for one/cpu
    used = holder("used", CQ, {"cpu": "2"}, {"cpu": "one", "pods": "one"})
    result = cycle([two_flavor_queue(fungibility=MAY_STOP)], incoming({"cpu": "9"}), held=[used])
    assert_preempting(result, [insufficient_unused("cpu", "one", "1")], 1,
                      want={"main": {"cpu": "one", "pods": "one"}})


def test_preempt_before_try_next_flavor():
    """TestAssignFlavors "preempt before try next flavor": WhenCanPreempt=MayStopSearch stops at
    flavor one, where preemption is possible (Preempt)."""
    preempt_before_try_next_flavor()


def test_preempt_before_try_next_flavor_using_when_can_borrow_may_stop_search_when_can_preempt_may_stop_search():
    """TestAssignFlavors "preempt before try next flavor; using
    WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch" (the same ClusterQueue as the case
    above)."""
    preempt_before_try_next_flavor()


def test_preempt_try_next_flavor():
    """TestAssignFlavors "preempt try next flavor": with the default fungibility
    (WhenCanPreempt=TryNextFlavor) flavor two, which fits, beats preempting in one (Fit)."""
    used = holder("used", CQ, {"cpu": "2"}, {"cpu": "one", "pods": "one"})
    result = cycle([two_flavor_queue()], incoming({"cpu": "9"}), held=[used])
    assert_fit(result, {"main": {"cpu": "two", "pods": "two"}})


def borrowing_queues(two_cpu: str, *, fungibility: Mapping[str, str] | None, lending: bool = False) -> list[dict]:
    """test-clusterqueue in test-cohort: one with 10 pods and 10 CPUs (borrowing limit 1, or
    lending limit 1 when `lending`), two with 10 pods and `two_cpu` CPUs (lending limit 0 when
    `lending`); test-secondary-clusterqueue with 1 CPU of one."""
    one_cpu = ("10", "", "1") if lending else ("10", "1")
    two = (two_cpu, "", "0") if lending else two_cpu
    return [
        cluster_queue(CQ, resource_group(flavor_quotas("one", pods="10", cpu=one_cpu),
                                         flavor_quotas("two", pods="10", cpu=two)),
                      cohort=COHORT, fungibility=fungibility),
        cluster_queue(SECONDARY, resource_group(flavor_quotas("one", cpu="1")), cohort=COHORT),
    ]


def used_one_cpu() -> dict:
    """clusterQueueUsage: one/cpu 2 (no preemption is involved)."""
    return holder("used", CQ, {"cpu": "2"}, {"cpu": "one", "pods": "one"})


def test_borrow_try_next_flavor_found_the_first_flavor():
    """TestAssignFlavors "borrow try next flavor, found the first flavor": one fits by borrowing
    1 CPU from the cohort; two (1 CPU) cannot hold 9: one (Fit, borrowing)."""
    result = cycle(borrowing_queues("1", fungibility=TRY_NEXT), incoming({"cpu": "9"}), held=[used_one_cpu()])
    assert_fit(result, {"main": {"cpu": "one", "pods": "one"}})


def test_borrow_try_next_flavor_found_the_second_flavor():
    """TestAssignFlavors "borrow try next flavor, found the second flavor": with
    WhenCanBorrow=TryNextFlavor, two fits without borrowing and beats one (Fit)."""
    result = cycle(borrowing_queues("10", fungibility=TRY_NEXT), incoming({"cpu": "9"}), held=[used_one_cpu()])
    assert_fit(result, {"main": {"cpu": "two", "pods": "two"}})


def test_borrow_before_try_next_flavor():
    """TestAssignFlavors "borrow before try next flavor": with the default fungibility
    (WhenCanBorrow=MayStopSearch) the search stops at one, which fits by borrowing (Fit)."""
    result = cycle(borrowing_queues("10", fungibility=None), incoming({"cpu": "9"}), held=[used_one_cpu()])
    assert_fit(result, {"main": {"cpu": "one", "pods": "one"}})


def borrow_or_next_queues(secondary_one: str, *, fungibility: Mapping[str, str] | None,
                          with_two: bool = True) -> list[dict]:
    """test-clusterqueue in test-cohort (reclaimWithinCohort and borrowWithinCohort
    LowerPriority): one with no nominal CPU and a borrowing limit of 12, two with 12 CPUs;
    test-secondary-clusterqueue with `secondary_one` CPUs of one."""
    flavors = [flavor_quotas("one", cpu=("0", "12"))]
    if with_two:
        flavors.append(flavor_quotas("two", cpu="12"))
    return [
        cluster_queue(CQ, resource_group(*flavors), cohort=COHORT, fungibility=fungibility,
                      preemption=RECLAIM_AND_BORROW),
        cluster_queue(SECONDARY, resource_group(flavor_quotas("one", cpu=secondary_one)), cohort=COHORT),
    ]


def test_when_borrowing_while_preemption_is_needed_for_flavor_one_when_can_borrow_try_next_flavor():
    """TestAssignFlavors "when borrowing while preemption is needed for flavor one;
    WhenCanBorrow=TryNextFlavor": nothing is in use; one fits by borrowing, two without (Fit)."""
    result = cycle(borrow_or_next_queues("12", fungibility=BORROW_TRY_NEXT), incoming({"cpu": "12"}))
    assert_fit(result, {"main": {"cpu": "two"}})


def test_when_borrowing_while_preemption_is_needed_for_flavor_one_when_can_borrow_try_next_flavor_when_can_preempt_may_stop_search():  # noqa: E501
    """TestAssignFlavors "when borrowing while preemption is needed for flavor one;
    WhenCanBorrow=TryNextFlavor,WhenCanPreempt=MayStopSearch" (the same ClusterQueue as the case
    above)."""
    result = cycle(borrow_or_next_queues("12", fungibility=BORROW_TRY_NEXT), incoming({"cpu": "12"}))
    assert_fit(result, {"main": {"cpu": "two"}})


def test_when_borrowing_while_preemption_is_needed_but_borrowing_limit_exceeds_the_quota_available_in_the_cohort():
    """TestAssignFlavors "when borrowing while preemption is needed, but borrowingLimit exceeds
    the quota available in the cohort": one's borrowing limit (12) is more than the cohort has
    (11), so 12 CPUs exceed its maximum capacity (NoFit, ExceedsMaxQuota). The secondary
    ClusterQueue's 10 CPUs in use (secondaryClusterQueueUsage) change nothing."""
    used = holder("used", SECONDARY, {"cpu": "10"}, {"cpu": "one"}, priority=HIGH)
    result = cycle(borrow_or_next_queues("11", fungibility=None, with_two=False), incoming({"cpu": "12"}),
                   held=[used])
    assert_no_fit(result, "couldn't assign flavors to pod set main: " + over_max("cpu", "one", "0", "12", "11"))


def test_lend_try_next_flavor_found_the_second_flavor():
    """TestAssignFlavors "lend try next flavor, found the second flavor": one (lending limit 1)
    fits 9 CPUs by borrowing; two (lending limit 0, 10 CPUs) fits without: two (Fit)."""
    result = cycle(borrowing_queues("10", fungibility=TRY_NEXT, lending=True), incoming({"cpu": "9"}),
                   held=[used_one_cpu()])
    assert_fit(result, {"main": {"cpu": "two", "pods": "two"}})


def test_lend_try_next_flavor_found_the_first_flavor():
    """TestAssignFlavors "lend try next flavor, found the first flavor": two has 1 CPU only
    (lending limit 0): one, borrowing (Fit)."""
    result = cycle(borrowing_queues("1", fungibility=TRY_NEXT, lending=True), incoming({"cpu": "9"}),
                   held=[used_one_cpu()])
    assert_fit(result, {"main": {"cpu": "one", "pods": "one"}})


def cannot_preempt_in_cohort() -> None:
    queues = [
        cluster_queue(CQ, resource_group(flavor_quotas("one", cpu=("0", "2")), flavor_quotas("two", cpu=("0", "2"))),
                      cohort=COHORT, fungibility=MAY_STOP, preemption=RECLAIM_AND_BORROW),
        cluster_queue(SECONDARY, resource_group(flavor_quotas("one", cpu="2"), flavor_quotas("two", cpu="2")),
                      cohort=COHORT),
    ]
    # secondaryClusterQueueUsage: one/cpu 2; the oracle finds no candidates there (NoCandidates):
    # the holder has a higher priority (and its ClusterQueue borrows nothing)
    used = holder("used", SECONDARY, {"cpu": "2"}, {"cpu": "one"}, priority=HIGH)
    result = cycle(queues, incoming({"cpu": "2"}), held=[used])
    assert_fit(result, {"main": {"cpu": "two"}})


def test_cannot_preempt_in_cohort_oracle_returns_none_for_the_first_flavor_tries_the_second_flavor_which_fits():
    """TestAssignFlavors "cannot preempt in cohort (oracle returns None) for the first flavor,
    tries the second flavor (which fits)": one would need preemption but has no candidates, so
    the search goes on to two, which fits by borrowing (Fit)."""
    cannot_preempt_in_cohort()


def test_cannot_preempt_in_cohort_oracle_returns_none_using_deprecated_when_can_borrow_may_stop_search_when_can_preempt_may_stop_search():  # noqa: E501
    """TestAssignFlavors "cannot preempt in cohort (oracle returns None) for the first flavor,
    tries the second flavor (which fits); using deprecated
    WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch" (the same ClusterQueues)."""
    cannot_preempt_in_cohort()


def test_quota_exhausted_but_can_preempt_in_cohort_and_cluster_queue():
    """TestAssignFlavors "quota exhausted, but can preempt in cohort and ClusterQueue": 9 CPUs
    within one's nominal 10 (lending limit 0), 2 in use in the ClusterQueue itself, which the
    oracle lets it preempt (Preempt; the oracle's borrowing of 1 is not seen in a cycle)."""
    queues = [
        cluster_queue(CQ, resource_group(flavor_quotas("one", pods="10", cpu=("10", "", "0"))), cohort=COHORT,
                      preemption=WITHIN_LOWER),
        cluster_queue(SECONDARY, resource_group(flavor_quotas("one", pods="0", cpu="0")), cohort=COHORT),
    ]
    used = holder("used", CQ, {"cpu": "2"}, {"cpu": "one", "pods": "one"})
    result = cycle(queues, incoming({"cpu": "9"}), held=[used])
    assert_preempting(result, [insufficient_unused("cpu", "one", "1")], 1,
                      want={"main": {"cpu": "one", "pods": "one"}})


def fair_sharing_reclaim_never() -> None:
    queues = [
        cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="0"), flavor_quotas("two", cpu="12")),
                      cohort=COHORT, fungibility=MAY_STOP, preemption={"reclaimWithinCohort": "Never"}),
        cluster_queue(SECONDARY, resource_group(flavor_quotas("one", cpu="12")), cohort=COHORT),
    ]
    # secondaryClusterQueueUsage: one/cpu 10 (oracle: NoCandidates)
    used = holder("used", SECONDARY, {"cpu": "10"}, {"cpu": "one"}, priority=HIGH)
    result = cycle(queues, incoming({"cpu": "12"}), held=[used], fair=True)
    assert_fit(result, {"main": {"cpu": "two"}})


def test_when_borrowing_while_preemption_is_needed_for_flavor_one_fair_sharing_enabled_reclaim_within_cohort_never():
    """TestAssignFlavors "when borrowing while preemption is needed for flavor one, fair sharing
    enabled, reclaimWithinCohort=Never": one would have to borrow beyond what is free and may not
    preempt to do so (NoFit, WaitingForQuota); two fits (Fit)."""
    fair_sharing_reclaim_never()


def test_when_borrowing_while_preemption_is_needed_for_flavor_one_fair_sharing_enabled_reclaim_within_cohort_never_using_deprecated_when_can_borrow_may_stop_search_when_can_preempt_may_stop_search():  # noqa: E501
    """TestAssignFlavors "when borrowing while preemption is needed for flavor one, fair sharing
    enabled, reclaimWithinCohort=Never; using deprecated
    WhenCanBorrow=MayStopSearch,WhenCanPreempt=MayStopSearch" (the same ClusterQueues)."""
    fair_sharing_reclaim_never()


def slice_queue(one_cpu: str) -> dict:
    """test-clusterqueue, no cohort: one with `one_cpu` CPUs and 1Gi, two with 4 CPUs and 2Gi."""
    return cluster_queue(CQ, resource_group(flavor_quotas("one", cpu=one_cpu, memory="1Gi"),
                                            flavor_quotas("two", cpu="4", memory="2Gi")))


def slice_result(one_cpu: str, original_flavor: str) -> PassResult:
    """The Go case's preemptWorkloadSlice is the admitted slice `old` (2 CPUs, 10Mi on
    `original_flavor`), which the pending elastic slice `wl` (3 CPUs, 10Mi) replaces."""
    old = workload("old", NS, queue=f"lq-{CQ}", requests={"cpu": "2", "memory": "10Mi"}, priority=INCOMING,
                   annotations={ELASTIC_JOB: "true"})
    old = reserve_quota(old, CQ, {"main": ({"cpu": original_flavor, "memory": original_flavor}, None)})
    new = incoming({"cpu": "3", "memory": "10Mi"},
                   annotations={ELASTIC_JOB: "true", WORKLOAD_SLICE_REPLACEMENT_FOR: f"{NS}/old"})
    return cycle([slice_queue(one_cpu)], new, held=[old], gates={"ElasticJobsViaWorkloadSlices": True})


def test_workload_slice_preemption_fits_in_the_original_workload_resource_flavor():
    """TestAssignFlavors "workload slice preemption fits in the original workload resource
    flavor" (ElasticJobsViaWorkloadSlices): a new slice keeps its original slice's flavor: one
    ("could not assign one flavor since the original workload is assigned: two") is passed over
    although 3 CPUs would fit it; two (Fit)."""
    assert_fit(slice_result("3", "two"), {"main": {"cpu": "two", "memory": "two"}})


def test_workload_slice_preemption_does_not_fit_in_the_original_workload_resource_flavor():
    """TestAssignFlavors "workload slice preemption does not fit in the original workload
    resource flavor" (ElasticJobsViaWorkloadSlices): the 1 CPU the new slice adds exceeds one's
    500m; two is not the original slice's flavor (NoFit, ExceedsMaxQuota)."""
    assert_no_fit(slice_result("500m", "one"), "couldn't assign flavors to pod set main: " + ", ".join(sorted([
        over_max("cpu", "one", "0", "1", "500m"),
        "could not assign two flavor since the original workload is assigned: one",
    ])))


def test_multi_podset_one_fits_and_another_fails_fitting_podset_attempts_skipped_in_resolve_no_fit_reason():
    """TestAssignFlavors "multi-podset, one fits and another fails, fitting podset attempts
    skipped in resolveNoFitReason": fitting-podset (1 CPU, type=one) takes one; blocking-podset
    (5 CPUs) exceeds both flavors' 2 CPUs (NoFit, ExceedsMaxQuota); only its reasons make the
    message. fitting-podset's scan stopped at one (TriedFlavorIdx 0), so the workload has flavors
    left to try and goes back to the active queue."""
    queue = cluster_queue(CQ, resource_group(flavor_quotas("one", cpu="2"), flavor_quotas("two", cpu="2")))
    wl = incoming(pod_sets=[pod_set("fitting-podset", 1, requests={"cpu": "1"}, node_selector={"type": "one"}),
                            pod_set("blocking-podset", 1, requests={"cpu": "5"})])
    assert_no_fit(cycle([queue], wl), "couldn't assign flavors to pod set blocking-podset: " + ", ".join([
        over_max("cpu", "one", "1", "5", "2"), over_max("cpu", "two", "0", "5", "2")]), status="Pending")


# ---------------------------------------------------------------- TestReclaimBeforePriorityPreemption

# Flavors uno, due and tre, each with 10 compute and 10 gpu in test-clusterqueue, made available
# to its Cohort; other-clusterqueue has none of its own. The Go resources "gpu" and "compute",
# which the API server refuses in a container's requests, are example.com/gpu and
# example.com/compute here.
GPU, COMPUTE = "example.com/gpu", "example.com/compute"
OTHER = "other-clusterqueue"


def reclaim_result(requests: Mapping[str, str], test_usage: Sequence[tuple[str, Mapping[str, str]]],
                   other_usage: Sequence[tuple[str, Mapping[str, str]]],
                   fungibility: Mapping[str, str] | None = None) -> PassResult:
    """The Go test's cluster, its usage held by admitted workloads of a lower priority than the
    incoming one (each usage entry: flavor, requests), and the incoming workload.

    Both ClusterQueues preempt lower priorities within the ClusterQueue and reclaim in the
    cohort; test-clusterqueue's fungibility is WhenCanPreempt=TryNextFlavor unless the case sets
    its own (WhenCanBorrow left unset: nothing here borrows). The Go oracle answers Preempt where
    the case gives no answer; what a cycle finds is Preempt for usage of test-clusterqueue and
    Reclaim for usage of other-clusterqueue (which borrows all it uses): the cases whose oracle
    answers differ from that for a flavor reach the same choice either way."""
    three = ("uno", "due", "tre")
    queues = [
        cluster_queue(CQ, resource_group(*(flavor_quotas(f, **{COMPUTE: "10", GPU: "10"}) for f in three)),
                      cohort="cohort", fungibility=fungibility or {"whenCanPreempt": "TryNextFlavor"},
                      preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}),
        cluster_queue(OTHER, resource_group(*(flavor_quotas(f, **{COMPUTE: "0", GPU: "0"}) for f in three)),
                      cohort="cohort"),
    ]
    held = [holder(f"test-{i}", CQ, req, {r: f for r in req}) for i, (f, req) in enumerate(test_usage)]
    held += [holder(f"other-{i}", OTHER, req, {r: f for r in req}) for i, (f, req) in enumerate(other_usage)]
    return cycle(queues, incoming(requests), held=held, flavors=[flavor(f) for f in three])


def assert_reclaim_mode(result: PassResult, mode: str, want: Mapping[str, str]) -> None:
    """The Go test's representative mode and flavors of the PodSet (Preempt: waiting for the
    targets the cycle found)."""
    w = got(result)
    if mode == "Fit":
        assert w.status == "Admitted", w.message
    else:
        assert w.status == "Pending", w.message
        assert w.message.startswith("couldn't assign flavors to pod set main: ")
        assert w.message.endswith(". Pending the preemption of 1 workload(s)")
    assert flavors_of(w) == {"main": dict(want)}


def test_select_first_flavor_which_fits():
    """TestReclaimBeforePriorityPreemption "Select first flavor which fits"."""
    result = reclaim_result({GPU: "10"}, [("uno", {GPU: "1"})], [("due", {GPU: "1"})])
    assert_reclaim_mode(result, "Fit", {GPU: "tre"})


def test_select_first_flavor_where_gpu_reclamation_is_possible():
    """TestReclaimBeforePriorityPreemption "Select first flavor where gpu reclamation is
    possible": oracle uno Preempt, due Reclaim (tre: the default Preempt; a cycle finds Reclaim
    there too, after due)."""
    result = reclaim_result({GPU: "10"}, [("uno", {GPU: "1"})], [("due", {GPU: "1"}), ("tre", {GPU: "1"})])
    assert_reclaim_mode(result, "Preempt", {GPU: "due"})


def test_select_first_flavor_when_flavor_fungibility_is_disabled():
    """TestReclaimBeforePriorityPreemption "Select first flavor when flavor fungibility is
    disabled": WhenCanPreempt=MayStopSearch stops at uno."""
    result = reclaim_result({GPU: "10"}, [("uno", {GPU: "1"})], [("due", {GPU: "1"}), ("tre", {GPU: "1"})],
                            fungibility={"whenCanPreempt": "MayStopSearch"})
    assert_reclaim_mode(result, "Preempt", {GPU: "uno"})


def test_select_first_flavor_when_flavor_fungibility_is_disabled_using_deprecated_when_can_preempt_may_stop_search():
    """TestReclaimBeforePriorityPreemption "Select first flavor when flavor fungibility is
    disabled; using deprecated WhenCanPreempt=MayStopSearch" (the same case)."""
    result = reclaim_result({GPU: "10"}, [("uno", {GPU: "1"})], [("due", {GPU: "1"}), ("tre", {GPU: "1"})],
                            fungibility={"whenCanPreempt": "MayStopSearch"})
    assert_reclaim_mode(result, "Preempt", {GPU: "uno"})


def test_select_first_flavor_where_priority_based_preemption_is_possible():
    """TestReclaimBeforePriorityPreemption "Select first flavor where priority based preemption
    is possible": every flavor needs preemption in the ClusterQueue itself: the first, uno."""
    result = reclaim_result({GPU: "10"}, [("uno", {GPU: "1"}), ("due", {GPU: "1"}), ("tre", {GPU: "1"})], [])
    assert_reclaim_mode(result, "Preempt", {GPU: "uno"})


def test_select_second_flavor_where_gpu_reclamation_is_possible_as_compute_fits():
    """TestReclaimBeforePriorityPreemption "Select second flavor where gpu reclamation is
    possible, as compute Fits": uno needs preemption for both resources, due reclaims gpu but
    preempts for compute, tre reclaims gpu and fits compute: tre."""
    result = reclaim_result({GPU: "10", COMPUTE: "10"},
                            [("uno", {GPU: "1", COMPUTE: "1"}), ("due", {COMPUTE: "1"})],
                            [("due", {GPU: "1"}), ("tre", {GPU: "1"})])
    assert_reclaim_mode(result, "Preempt", {GPU: "tre", COMPUTE: "tre"})
