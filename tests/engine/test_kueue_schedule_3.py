"""Kueue's TestSchedule (pkg/scheduler, API v1beta2), part 3: the cases from "multiple preemptions
skip preemption when shared limited resource" to "prefer flavor with most local capacity (FS=false)".

Each test runs one scheduling cycle over the shared cluster of TestSchedule (`kueue_schedule`)
plus the case's own ClusterQueues, LocalQueues and Cohorts, and checks what the Go case checks:
the admissions held after the cycle (`wantAssignments`), the workloads left in the queue heaps
(`wantLeft`: Pending) or parked (`wantInadmissibleLeft`: Inadmissible), the conditions the Go
case's `wantWorkloads` gives (QuotaReserved of workloads not admitted, Evicted/Preempted of the
preempted ones, no new condition on the others) and, where it lists them, the events.

The Go runner sets ElasticJobsViaWorkloadSlices to the case's `enableElasticJobsViaWorkloadSlice`
(false unless the case sets it) and runs every case with WorkloadRequestUseMergePatch off and on
(an API patching detail the engine does not read). Its workloads not admitted carry only
QuotaReserved=False/Pending (no Admitted=False/NoReservation): those cases run with
UnadmittedWorkloadsObservability off. The Go cases' `wantSkippedPreemptions` are metrics with no
engine equivalent; they are kept in the docstrings.

Names: the engine, as Kueue's API server, takes only lowercase RFC 1123 names, while the Go test's
fake client takes any: CQ1, CQ2, CQ3 are written cq1, cq2, cq3, ClusterQueueA and ClusterQueueB
cluster-queue-a and cluster-queue-b, WL1, WL2 and Admitted-Workload-N in lowercase (UIDs and
JobUIDs, which may hold capitals, are kept). No ordering the cases depend on changes with it.

Preemption policies the Go cases leave unset: MakeClusterQueue sets no Preemption (Kueue's cache
then takes Never for both policies), but a `Preemption(kueue.ClusterQueuePreemption{...})` that
names only some policies leaves the others as "" (the Go unit test runs no API defaulting). Kueue
reads a "" policy as "not Never and not Any": it looks for candidates, of lower priority only, and
(for reclaimWithinCohort) its flavor assigner counts it as a policy that may preempt while borrowing
under fair sharing. That is LowerPriority, which is what those cases pass here (the engine, as
Kueue's API server, defaults an unset policy to Never, and refuses borrowWithinCohort without
reclaimWithinCohort).
"""

from __future__ import annotations

from scheduler.results import PassResult

from .factories import result_of
from .kueue_schedule import (
    admission,
    assert_admitted_now,
    assert_waiting,
    assignments,
    cluster_queue,
    cohort,
    condition,
    event_reasons,
    flavor_quotas,
    left,
    local_queue,
    pod_set,
    reserve_quota,
    resource_group,
    schedule,
    workload,
)

# the runner's ElasticJobsViaWorkloadSlices (tc.enableElasticJobsViaWorkloadSlice, false here)
BASE = {"ElasticJobsViaWorkloadSlices": False}
# ... and the workloads not admitted show no Admitted=False/NoReservation condition
NO_OBS = {**BASE, "UnadmittedWorkloadsObservability": False}

LOWER = "LowerPriority"
ANY = "Any"
IN_CQ = "prioritization in the ClusterQueue"
RECLAIM = "reclamation within the cohort"
NO_LONGER_FITS = "Workload no longer fits after processing another workload"
SLICE_ANNOTATION = "kueue.x-k8s.io/workload-slice-replacement-for"


def preemption_message(why: str, preemptor: str, preemptee: str, uid: str = "wl-preemptor",
                       job_uid: str = "job-preemptor") -> str:
    return (f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {why}; "
            f"preemptor path: {preemptor}; preemptee path: {preemptee}")


def assert_preempted(result: PassResult, name: str, ns: str, reason: str, message: str) -> None:
    """Preempted in the cycle: Evicted (Preempted) and Preempted (`reason`) with the message, its
    quota reservation kept."""
    assert condition(result, name, ns, "Evicted") == ("True", "Preempted", message)
    assert condition(result, name, ns, "Preempted") == ("True", reason, message)
    reserved = condition(result, name, ns, "QuotaReserved")
    assert reserved is not None and reserved[0] == "True"


def assert_untouched(result: PassResult, name: str, ns: str) -> None:
    """Held its reservation before the cycle, neither evicted nor preempted by it."""
    reserved = condition(result, name, ns, "QuotaReserved")
    assert reserved is not None and reserved[0] == "True"
    assert condition(result, name, ns, "Evicted") is None
    assert condition(result, name, ns, "Preempted") is None


def simple_reserve(wl: dict, cq: str, flavor: str) -> dict:
    """SimpleReserveQuota(cq, flavor, now): every resource of the first PodSet on `flavor`, quota
    reserved only (no Admitted condition)."""
    ps = wl["spec"]["podSets"][0]
    resources = ps["template"]["spec"]["containers"][0]["resources"]["requests"]
    return reserve_quota(wl, cq, {ps["name"]: ({r: flavor for r in resources}, None)}, admitted=False)


def other_queues(*namespaces: str, cq_prefix: str = "other") -> list[dict]:
    """MakeLocalQueue("other", ns).ClusterQueue("other-<suffix>") for eng-alpha/-beta/-gamma."""
    return [local_queue("other", ns, f"{cq_prefix}-{ns.removeprefix('eng-')}") for ns in namespaces]


# ---------------------------------------------------------------- multiple preemptions


def test_multiple_preemptions_skip_preemption_when_shared_limited_resource() -> None:
    """multiple preemptions skip preemption when shared limited resource

    The two preempting workloads, each requesting 3 CPU, require capacity in the Cohort in
    addition to preemption. We make sure that we don't do a wasteful preemption, as only one of
    the workloads can fit even after two preemptions.

    Evicted workloads: request 4; Preempting workloads: request 6; Cohort has capacity 5.
    (wantSkippedPreemptions: other-alpha 0, other-beta 1.)"""
    # reclaimWithinCohort: unset ("") in the Go case, read as LowerPriority (module docstring)
    preemption = {"withinClusterQueue": LOWER, "reclaimWithinCohort": LOWER, "borrowWithinCohort": {"policy": LOWER}}
    cqs = [
        cluster_queue("other-alpha", resource_group(flavor_quotas("default", cpu="2")), cohort="other",
                      preemption=preemption),
        cluster_queue("other-beta", resource_group(flavor_quotas("default", cpu="2")), cohort="other",
                      preemption=preemption),
        cluster_queue("resource-bank", resource_group(flavor_quotas("default", cpu="1")), cohort="other"),
    ]
    workloads = [
        reserve_quota(workload("a1", "eng-alpha", queue="other", priority=0, requests={"cpu": "2"}),
                      "other-alpha", {"main": ({"cpu": "default"}, None)}, admitted=False),
        reserve_quota(workload("b1", "eng-beta", queue="other", priority=0, requests={"cpu": "2"}),
                      "other-beta", {"main": ({"cpu": "default"}, None)}, admitted=False),
        workload("preemptor", "eng-alpha", queue="other", priority=100, requests={"cpu": "3"},
                 uid="wl-preemptor", job_uid="job-preemptor"),
        workload("pretending-preemptor", "eng-beta", queue="other", priority=99, requests={"cpu": "3"}),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs,
                      additional_local_queues=other_queues("eng-alpha", "eng-beta"), gates=NO_OBS)

    assert assignments(result) == {
        "eng-alpha/a1": admission("other-alpha", main=({"cpu": "default"}, 1)),
        "eng-beta/b1": admission("other-beta", main=({"cpu": "default"}, 1)),
    }
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/preemptor"],
                                       "other-beta": ["eng-beta/pretending-preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_preempted(result, "a1", "eng-alpha", "InClusterQueue",
                     preemption_message(IN_CQ, "/other/other-alpha", "/other/other-alpha"))
    assert_untouched(result, "b1", "eng-beta")
    assert_waiting(result, "preemptor", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
                   "2 more needed. Pending the preemption of 1 workload(s)")
    assert_waiting(result, "pretending-preemptor", "eng-beta", NO_LONGER_FITS)


NOT_ENOUGH = ("couldn't assign flavors to pod set one: insufficient quota for cpu in flavor default, previously "
              "considered podsets requests (0) + current podset request (100) > maximum capacity (50)")


def test_not_enough_resources() -> None:
    """not enough resources"""
    wl = workload("new", "sales", queue="main", pod_sets=[pod_set("one", 1, requests={"cpu": "100"})])
    result = schedule([wl], gates=NO_OBS)

    assert assignments(result) == {}
    assert left(result, "Pending") == {"sales": ["sales/new"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "new", "sales", NOT_ENOUGH)


def test_container_resource_requests_exceed_limits() -> None:
    """container resource requests exceed limits"""
    ps = pod_set("one", 1, requests={"cpu": "200m"})
    ps["template"]["spec"]["containers"][0]["resources"]["limits"] = {"cpu": "100m"}
    wl = workload("new", "sales", queue="main", pod_sets=[ps])
    result = schedule([wl], gates=NO_OBS)

    message = ('resources validation failed: spec.podSets[0].template.spec.containers[0]: Invalid value: '
               '["cpu"]: requests must not exceed its limits')
    assert assignments(result) == {}
    assert left(result, "Pending") == {"sales": ["sales/new"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "new", "sales", message)
    # the events are compared with their messages
    assert [(e.key, e.reason, e.type, e.message) for e in result.events] == [
        ("sales/new", "Pending", "Warning", message)]


# ---------------------------------------------------------------- choosing the flavor to preempt in


def gpu_cq(name: str, on_demand: str, spot: str, *, preemption: dict | None = None) -> dict:
    """A ClusterQueue of cohort `other` with gpu quotas on on-demand, then spot."""
    return cluster_queue(name, resource_group(flavor_quotas("on-demand", gpu=on_demand),
                                              flavor_quotas("spot", gpu=spot)),
                         cohort="other", preemption=preemption)


GPU_PREEMPTION = {"withinClusterQueue": LOWER, "reclaimWithinCohort": LOWER}


def test_prefer_reclamation_over_cq_priority_based_preemption() -> None:
    """prefer reclamation over cq priority based preemption

    Flavor 1, on-demand, requires preemption of workload in CQ. Flavor 2, spot, requires
    preemption of workload in Cohort which is borrowing from CQ. Flavor 2 is a better assignment,
    so we preempt in it."""
    cqs = [gpu_cq("other-alpha", "10", "10", preemption=GPU_PREEMPTION),
           gpu_cq("other-beta", "0", "0", preemption=GPU_PREEMPTION)]
    workloads = [
        simple_reserve(workload("a1", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}),
                       "other-alpha", "on-demand"),
        simple_reserve(workload("b1", "eng-beta", queue="other", priority=50, requests={"gpu": "5"}),
                       "other-beta", "spot"),
        workload("preemptor", "eng-alpha", queue="other", priority=100, requests={"gpu": "6"},
                 uid="wl-preemptor", job_uid="job-preemptor"),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs,
                      additional_local_queues=other_queues("eng-alpha", "eng-beta"), gates=NO_OBS)

    assert assignments(result) == {
        "eng-alpha/a1": admission("other-alpha", main=({"gpu": "on-demand"}, 1)),
        "eng-beta/b1": admission("other-beta", main=({"gpu": "spot"}, 1)),
    }
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_untouched(result, "a1", "eng-alpha")
    assert_preempted(result, "b1", "eng-beta", "InCohortReclamation",
                     preemption_message(RECLAIM, "/other/other-alpha", "/other/other-beta"))
    assert_waiting(result, "preemptor", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, "
                   "1 more needed, insufficient unused quota for gpu in flavor spot, 1 more needed. Pending the "
                   "preemption of 1 workload(s)")


def test_prefer_first_preemption_flavor_when_second_flavor_requires_both_reclaim_and_cq_priority_preemption(
) -> None:
    """prefer first preemption flavor when second flavor requires both reclaim and cq priority preemption

    Flavor 1, on-demand, requires preemption of workload in CQ. Flavor 2, spot, requires
    preemption of workload in Cohort and CQ. Since Flavor 2 doesn't improve the assignment, we
    prefer Flavor 1."""
    cqs = [gpu_cq("other-alpha", "10", "10", preemption=GPU_PREEMPTION), gpu_cq("other-beta", "0", "0")]
    workloads = [
        simple_reserve(workload("a1", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}),
                       "other-alpha", "on-demand"),
        simple_reserve(workload("a2", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}),
                       "other-alpha", "spot"),
        simple_reserve(workload("b1", "eng-beta", queue="other", priority=50, requests={"gpu": "5"}),
                       "other-beta", "spot"),
        workload("preemptor", "eng-alpha", queue="other", priority=100, requests={"gpu": "6"},
                 uid="wl-preemptor", job_uid="job-preemptor"),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs,
                      additional_local_queues=other_queues("eng-alpha", "eng-beta"), gates=NO_OBS)

    assert assignments(result) == {
        "eng-alpha/a1": admission("other-alpha", main=({"gpu": "on-demand"}, 1)),
        "eng-alpha/a2": admission("other-alpha", main=({"gpu": "spot"}, 1)),
        "eng-beta/b1": admission("other-beta", main=({"gpu": "spot"}, 1)),
    }
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_preempted(result, "a1", "eng-alpha", "InClusterQueue",
                     preemption_message(IN_CQ, "/other/other-alpha", "/other/other-alpha"))
    assert_untouched(result, "a2", "eng-alpha")
    assert_untouched(result, "b1", "eng-beta")
    assert_waiting(result, "preemptor", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, "
                   "1 more needed, insufficient unused quota for gpu in flavor spot, 6 more needed. Pending the "
                   "preemption of 1 workload(s)")


def test_prefer_first_preemption_flavor_when_second_flavor_also_requires_cq_preemption() -> None:
    """prefer first preemption flavor when second flavor also requires cq preemption

    Flavor 1, on-demand, requires preemption of workload in CQ. Flavor 2, spot, also requires
    preemption of workload in CQ, since the borrowing workload in Cohort is too high priority.
    Therefore, we choose Flavor 1."""
    cqs = [gpu_cq("other-alpha", "10", "10", preemption=GPU_PREEMPTION), gpu_cq("other-beta", "0", "0")]
    workloads = [
        simple_reserve(workload("a1", "eng-alpha", queue="other", priority=50, requests={"gpu": "6"}),
                       "other-alpha", "on-demand"),
        simple_reserve(workload("a2", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}),
                       "other-alpha", "spot"),
        # b1 is too high priority for preemptor.
        simple_reserve(workload("b1", "eng-beta", queue="other", priority=9001, requests={"gpu": "5"}),
                       "other-beta", "spot"),
        workload("preemptor", "eng-alpha", queue="other", priority=100, requests={"gpu": "5"},
                 uid="wl-preemptor", job_uid="job-preemptor"),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs,
                      additional_local_queues=other_queues("eng-alpha", "eng-beta"), gates=NO_OBS)

    assert assignments(result) == {
        "eng-alpha/a1": admission("other-alpha", main=({"gpu": "on-demand"}, 1)),
        "eng-alpha/a2": admission("other-alpha", main=({"gpu": "spot"}, 1)),
        "eng-beta/b1": admission("other-beta", main=({"gpu": "spot"}, 1)),
    }
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_preempted(result, "a1", "eng-alpha", "InClusterQueue",
                     preemption_message(IN_CQ, "/other/other-alpha", "/other/other-alpha"))
    assert_untouched(result, "a2", "eng-alpha")
    assert_untouched(result, "b1", "eng-beta")
    assert_waiting(result, "preemptor", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, "
                   "1 more needed, insufficient unused quota for gpu in flavor spot, 5 more needed. Pending the "
                   "preemption of 1 workload(s)")


def test_workload_requiring_reclaimation_prioritized_over_wl_in_another_full_cq() -> None:
    """workload requiring reclaimation prioritized over wl in another full cq

    Also see #3405.

    CQ2 is lending out capacity to its Cohort. It has a pending workload, WL2, that fits within
    nominal capacity, and a reclaim policy set to any. CQ1 is using half of its capacity, and is
    also lending out remaining capacity. CQ3 has no capacity of its own, and is borrowing 10
    nominal capacity.

    With a pending workloads WL1 and WL2 queued in CQ1 and CQ2 respectively, we want to make sure
    that the WL2 is processed first, so that its preemption calculations are not invalidated by
    CQ1's WL1, which won't fit into its nominal capacity given the admitted Admitted-Workload-1.

    As WL1 has an earlier creation timestamp than WL2, there was a bug where it would process
    first, reserving capacity which invalidated WL2's preemption calculations, blocking it
    indefinitely from reclaiming its nominal capacity."""
    cqs = [
        cluster_queue("cq1", resource_group(flavor_quotas("on-demand", gpu="10")), cohort="other"),
        cluster_queue("cq2", resource_group(flavor_quotas("on-demand", gpu="10")), cohort="other",
                      # withinClusterQueue: unset ("") in the Go case, read as LowerPriority
                      preemption={"reclaimWithinCohort": ANY, "withinClusterQueue": LOWER}),
        cluster_queue("cq3", resource_group(flavor_quotas("on-demand", gpu="0")), cohort="other"),
    ]
    lqs = [local_queue("lq", "eng-alpha", "cq1"), local_queue("lq", "eng-beta", "cq2"),
           local_queue("lq", "eng-gamma", "cq3")]
    workloads = [
        simple_reserve(workload("admitted-workload-1", "eng-alpha", queue="lq", requests={"gpu": "5"}),
                       "cq1", "on-demand"),
        workload("wl1", "eng-alpha", queue="lq", requests={"gpu": "10"}, created=0),
        workload("wl2", "eng-beta", queue="lq", requests={"gpu": "10"}, created=1, uid="wl-WL2",
                 job_uid="job-WL2"),
        simple_reserve(workload("admitted-workload-2", "eng-gamma", queue="lq", priority=0, requests={"gpu": "5"}),
                       "cq3", "on-demand"),
        simple_reserve(workload("admitted-workload-3", "eng-gamma", queue="lq", priority=1, requests={"gpu": "5"}),
                       "cq3", "on-demand"),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs, gates=NO_OBS)

    assert assignments(result) == {
        "eng-alpha/admitted-workload-1": admission("cq1", main=({"gpu": "on-demand"}, 1)),
        "eng-gamma/admitted-workload-2": admission("cq3", main=({"gpu": "on-demand"}, 1)),
        "eng-gamma/admitted-workload-3": admission("cq3", main=({"gpu": "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {"cq2": ["eng-beta/wl2"]}
    assert left(result, "Inadmissible") == {"cq1": ["eng-alpha/wl1"]}
    assert_untouched(result, "admitted-workload-1", "eng-alpha")
    assert_preempted(result, "admitted-workload-2", "eng-gamma", "InCohortReclamation",
                     preemption_message(RECLAIM, "/other/cq2", "/other/cq3", uid="wl-WL2", job_uid="job-WL2"))
    assert_untouched(result, "admitted-workload-3", "eng-gamma")
    assert_waiting(result, "wl1", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, "
                   "5 more needed")
    assert_waiting(result, "wl2", "eng-beta",
                   "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, "
                   "5 more needed. Pending the preemption of 1 workload(s)")


# ---------------------------------------------------------------- lending a ClusterQueue's unused quota


def lending_case(reclaim: str) -> PassResult:
    """ClusterQueueA has 2 capacity, 1 admitted workload (req=1), and 1 pending workload (req=2);
    ClusterQueueB has 0 capacity, and 1 pending workload (req=1)."""
    cqs = [
        cluster_queue("cluster-queue-a", resource_group(flavor_quotas("on-demand", gpu="2")), cohort="root",
                      # withinClusterQueue: unset ("") in the Go case, read as LowerPriority
                      preemption={"reclaimWithinCohort": reclaim, "withinClusterQueue": LOWER}),
        cluster_queue("cluster-queue-b", resource_group(flavor_quotas("on-demand", gpu="0")), cohort="root"),
    ]
    lqs = [local_queue("lq", "eng-alpha", "cluster-queue-a"), local_queue("lq", "eng-beta", "cluster-queue-b")]
    workloads = [
        simple_reserve(workload("a1-admitted", "eng-alpha", queue="lq", requests={"gpu": "1"}),
                       "cluster-queue-a", "on-demand"),
        workload("a2-pending", "eng-alpha", queue="lq", requests={"gpu": "2"}),
        workload("b1-pending", "eng-beta", queue="lq", requests={"gpu": "1"}, created=0),
    ]
    return schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs, gates=NO_OBS)


A2_PENDING = ("couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, "
              "1 more needed")


def test_capacity_not_blocked_when_lending_clusterqueue_can_reclaim_reclaim_within_cohort_any() -> None:
    """capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)

    Since ClusterQueueA knows it can reclaim capacity, it lets ClusterQueueB borrow."""
    result = lending_case(ANY)

    assert assignments(result) == {
        "eng-alpha/a1-admitted": admission("cluster-queue-a", main=({"gpu": "on-demand"}, 1)),
        "eng-beta/b1-pending": admission("cluster-queue-b", main=({"gpu": "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {"cluster-queue-a": ["eng-alpha/a2-pending"]}
    assert_untouched(result, "a1-admitted", "eng-alpha")
    assert_waiting(result, "a2-pending", "eng-alpha", A2_PENDING)
    assert_admitted_now(result, "b1-pending", "eng-beta", "cluster-queue-b")


def test_capacity_blocked_when_lending_clusterqueue_not_guaranteed_to_reclaim_reclaim_within_cohort_lower_priority(
) -> None:
    """capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=LowerPriority)

    Since ClusterQueueA is not sure that it can reclaim this capacity, it doesn't let
    ClusterQueueB borrow."""
    result = lending_case(LOWER)

    assert assignments(result) == {
        "eng-alpha/a1-admitted": admission("cluster-queue-a", main=({"gpu": "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {"cluster-queue-b": ["eng-beta/b1-pending"]}
    assert left(result, "Inadmissible") == {"cluster-queue-a": ["eng-alpha/a2-pending"]}
    assert_untouched(result, "a1-admitted", "eng-alpha")
    assert_waiting(result, "a2-pending", "eng-alpha", A2_PENDING)
    assert_waiting(result, "b1-pending", "eng-beta", NO_LONGER_FITS)


def test_capacity_blocked_when_lending_clusterqueue_not_guaranteed_to_reclaim_reclaim_within_cohort_never() -> None:
    """capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=Never)

    Since ClusterQueueA is not sure that it can reclaim this capacity, it doesn't let
    ClusterQueueB borrow."""
    result = lending_case("Never")

    assert assignments(result) == {
        "eng-alpha/a1-admitted": admission("cluster-queue-a", main=({"gpu": "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {"cluster-queue-b": ["eng-beta/b1-pending"]}
    assert left(result, "Inadmissible") == {"cluster-queue-a": ["eng-alpha/a2-pending"]}
    assert_untouched(result, "a1-admitted", "eng-alpha")
    assert_waiting(result, "a2-pending", "eng-alpha", A2_PENDING)
    assert_waiting(result, "b1-pending", "eng-beta", NO_LONGER_FITS)


# ---------------------------------------------------------------- hierarchical cohorts, flavor choice


def test_in_a_hierarchical_cohort_workload_borrowing_less_is_scheduled_first() -> None:
    """in a hierarchical cohort, workload borrowing less is scheduled first

    Denote Cohorts in UPPERCASE, and ClusterQueues in lowercase. quota is at GUARANTEED cohort

                 ROOT
              /        \\
        GUARANTEED      best-effort
       /
     guaranteed
    """
    cohorts = [cohort("root"),
               cohort("guaranteed", resource_group(flavor_quotas("default", cpu="4")), parent="root")]
    cqs = [
        cluster_queue("guaranteed", resource_group(flavor_quotas("default", cpu="0")), cohort="guaranteed"),
        cluster_queue("best-effort", resource_group(flavor_quotas("default", cpu="0")), cohort="root"),
    ]
    lqs = [local_queue("lq-guaranteed", "eng-alpha", "guaranteed"),
           local_queue("lq-best-effort", "eng-alpha", "best-effort")]
    workloads = [
        workload("guaranteed", "eng-alpha", queue="lq-guaranteed", priority=0,
                 pod_sets=[pod_set("one", 1, requests={"cpu": "4"})]),
        workload("best-effort", "eng-alpha", queue="lq-best-effort", priority=3,
                 pod_sets=[pod_set("one", 1, requests={"cpu": "4"})]),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs, cohorts=cohorts,
                      gates=NO_OBS)

    assert assignments(result) == {
        "eng-alpha/guaranteed": admission("guaranteed", one=({"cpu": "default"}, 1)),
    }
    assert left(result, "Pending") == {"best-effort": ["eng-alpha/best-effort"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "guaranteed", "eng-alpha", "guaranteed")
    assert_waiting(result, "best-effort", "eng-alpha", NO_LONGER_FITS)


def test_dont_assign_flavor_if_there_are_no_candidates_for_preemption() -> None:
    """don't assign flavor if there are no candidates for preemption

    In this test, the workload `new` cannot be assigned the first flavor `on-demand` because the
    other workload `admitted` is using only the nominal quota hence cannot be preempted. The
    flavorassigner detects this and assigns the other flavor `spot` to the workload `new`."""
    cqs = [
        cluster_queue("cq1", resource_group(flavor_quotas("on-demand", cpu=("0", "1")),
                                            flavor_quotas("spot", cpu=("0", "1"))),
                      cohort="cohort",
                      preemption={"withinClusterQueue": LOWER, "reclaimWithinCohort": ANY,
                                  "borrowWithinCohort": {"policy": LOWER}},
                      fungibility={"whenCanPreempt": "MayStopSearch", "whenCanBorrow": "MayStopSearch"}),
        cluster_queue("cq2", resource_group(flavor_quotas("on-demand", cpu="1"), flavor_quotas("spot", cpu="1")),
                      cohort="cohort"),
    ]
    lqs = [local_queue("lq1", "eng-alpha", "cq1"), local_queue("lq2", "eng-alpha", "cq2")]
    workloads = [
        reserve_quota(workload("admitted", "eng-alpha", queue="lq2", priority=0, requests={"cpu": "1"}),
                      "cq2", {"main": ({"cpu": "on-demand"}, None)}),
        workload("new", "eng-alpha", queue="lq1", priority=100, requests={"cpu": "1"}),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs, gates=BASE)

    assert assignments(result) == {
        "eng-alpha/new": admission("cq1", main=({"cpu": "spot"}, 1)),
        "eng-alpha/admitted": admission("cq2", main=({"cpu": "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_untouched(result, "admitted", "eng-alpha")
    assert_admitted_now(result, "new", "eng-alpha", "cq1")


def test_workload_slice_fits_in_single_cluster_queue() -> None:
    """workload-slice fits in single clusterQueue

    Workload-slice scheduling test case (enableElasticJobsViaWorkloadSlice). The Go cache still
    holds the replaced slice foo-1's admission after the cycle (wantAssignments lists it), while
    foo-1 is Finished (WorkloadSliceReplaced)."""
    # neither workload has a UID or a JobUID in the Go case
    foo1 = reserve_quota(workload("foo-1", "sales", queue="main",
                                  pod_sets=[pod_set("one", 10, requests={"cpu": "1"})]),
                         "sales", {"one": ({"cpu": "default"}, 10)})
    foo2 = workload("foo-2", "sales", queue="main", pod_sets=[pod_set("one", 15, requests={"cpu": "1"})],
                    annotations={SLICE_ANNOTATION: "sales/foo-1"})
    for wl in (foo1, foo2):
        wl["metadata"]["uid"] = ""
    result = schedule([foo1, foo2], gates={"ElasticJobsViaWorkloadSlices": True})

    assert assignments(result) == {
        "sales/foo-2": admission("sales", one=({"cpu": "default"}, 15)),
    }
    # foo-1's admission, still held in Go's cache
    got_foo1 = result_of(result, "foo-1", "sales")
    assert (got_foo1.cluster_queue, [(ps.name, dict(ps.flavors), ps.count) for ps in got_foo1.pod_sets]) == (
        "sales", [("one", {"cpu": "default"}, 10)])
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert condition(result, "foo-1", "sales", "QuotaReserved") == ("True", "QuotaReserved",
                                                                    "Quota reserved in ClusterQueue sales")
    assert condition(result, "foo-1", "sales", "Admitted") == ("True", "Admitted", "The workload is admitted")
    assert condition(result, "foo-1", "sales", "Finished") == (
        "True", "WorkloadSliceReplaced",
        "Replaced to accommodate a workload (UID: , JobUID: ) due to workload slice aggregation")
    assert_admitted_now(result, "foo-2", "sales", "sales")
    assert event_reasons(result) == sorted([
        ("sales/foo-1", "WorkloadSliceReplaced", "Normal"),
        ("sales/foo-2", "QuotaReserved", "Normal"),
        ("sales/foo-2", "Admitted", "Normal"),
    ])
