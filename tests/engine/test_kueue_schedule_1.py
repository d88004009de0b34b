"""Kueue's TestSchedule (pkg/scheduler, API v1beta2), part 1: its first cases, from "use second
flavor when the first has no preemption candidates" to "two workloads can borrow the same
resources from the same flavor in the same cycle if fits in the cohort quota".

Each test runs one scheduling cycle over the shared TestSchedule cluster (`kueue_schedule`) plus
the case's own objects, and checks what the Go case checks: every admission held after the cycle
(`wantAssignments`, those made before it included), the workloads left in the queues
(`wantLeft`) or parked as inadmissible (`wantInadmissibleLeft`), the conditions the case's
`wantWorkloads` give (QuotaReserved/Admitted of the workloads the cycle admits or leaves
waiting, Evicted/Preempted of the preempted ones) and, where the case lists them, the events by
key, reason and type (the Go cases compare them without messages).

The Go runner sets ElasticJobsViaWorkloadSlices to the case's `enableElasticJobsViaWorkloadSlice`
(false in every case here), so each test passes it off. Its expectations for workloads left
waiting show QuotaReserved=False with reason "Pending" and no Admitted condition: the runner ran
with UnadmittedWorkloadsObservability off, so the cases that show it pass that gate off too.

Workloads holding quota before the cycle are given as admitted: the Go unit test runs no
workload controller, which admits a reservation whose checks are all Ready and takes back one
whose LocalQueue is missing (the Go cases give such reservations no queue name); the engine's
pass plays that controller before its cycles, so an admitted workload is what holds its quota
in the Go test's cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.results import PassResult

from .kueue_schedule import (
    admission,
    assert_admitted_now,
    assert_preempted,
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
    preemption_message,
    reserve_quota,
    resource_group,
    schedule,
    workload,
)

# The runner: features.SetFeatureGateDuringTest(t, features.ElasticJobsViaWorkloadSlices,
# tc.enableElasticJobsViaWorkloadSlice), false in every case of this part
BASE = {"ElasticJobsViaWorkloadSlices": False}
# Go's expectations of the workloads left waiting carry no Admitted=False condition
NO_OBSERVABILITY = {**BASE, "UnadmittedWorkloadsObservability": False}

CPU = "cpu"
GPU = "example.com/gpu"
ANY_LOWER = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


# ---------------------------------------------------------------- helpers


def with_checks(wl: dict, checks: Sequence[tuple[str, str]], generation: int | None = None) -> dict:
    """AdmissionCheck(kueue.AdmissionCheckState{Name, State}) and Generation(n)."""
    out = {**wl, "metadata": dict(wl["metadata"])}
    if generation is not None:
        out["metadata"]["generation"] = generation
    status = dict(out.get("status", {}))
    status["admissionChecks"] = [{"name": name, "state": state} for name, state in checks]
    out["status"] = status
    return out


def assert_untouched(result: PassResult, name: str, ns: str) -> None:
    """Go's wantWorkloads lists it as it was given: no condition added."""
    for cond_type in ("QuotaReserved", "Admitted", "Evicted", "Preempted"):
        assert condition(result, name, ns, cond_type) is None


def assert_marked_inadmissible(result: PassResult, name: str, ns: str, cq: str, message: str) -> None:
    """A workload whose LocalQueue or ClusterQueue is missing or inactive. Kueue's unit test runs
    the scheduler alone: it leaves the workload as it was, out of the queue dumps (its queue is
    missing) or in its ClusterQueue's heap (inactive, never popped). In a cluster Kueue's
    workload controller marks it QuotaReserved=False, reason Inadmissible, and the engine, which
    plays that controller too, reports it so, parked (not tried until its queue changes)."""
    assert assignments(result) == {}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {cq: [f"{ns}/{name}"]}
    assert condition(result, name, ns, "QuotaReserved") == ("False", "Inadmissible", message)
    assert condition(result, name, ns, "Admitted") == ("False", "NoReservation", "The workload has no reservation")


def assert_not_evicted(result: PassResult, name: str, ns: str) -> None:
    assert condition(result, name, ns, "Evicted") is None
    assert condition(result, name, ns, "Preempted") is None


def one(count: int, requests: Mapping[str, str], *, name: str = "one", min_count: int | None = None) -> dict:
    return pod_set(name, count, requests=requests, min_count=min_count)


# ---------------------------------------------------------------- cases


def test_use_second_flavor_when_the_first_has_no_preemption_candidates_may_stop_search():
    """Go: "use second flavor when the first has no preemption candidates; WhenCanPreempt:
    MayStopSearch"."""
    other_alpha = cluster_queue(
        "other-alpha",
        resource_group(flavor_quotas("on-demand", cpu=("50", "50")), flavor_quotas("spot", cpu=("100", "0"))),
        preemption={"withinClusterQueue": "LowerPriority"}, fungibility={"whenCanPreempt": "MayStopSearch"})
    admitted = reserve_quota(workload("admitted", "eng-alpha", queue="other", requests={CPU: "50"}),
                             "other-alpha", {"main": ({CPU: "on-demand"}, None)})
    new = workload("new", "eng-alpha", queue="other", requests={CPU: "20"})
    result = schedule([admitted, new], additional_cluster_queues=[other_alpha],
                      additional_local_queues=[local_queue("other", "eng-alpha", "other-alpha")], gates=BASE)
    assert assignments(result) == {
        "eng-alpha/admitted": admission("other-alpha", main=({CPU: "on-demand"}, 1)),
        "eng-alpha/new": admission("other-alpha", main=({CPU: "spot"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "eng-alpha", "other-alpha")
    assert_not_evicted(result, "admitted", "eng-alpha")


def test_workload_fits_in_single_cluster_queue_with_check_state_ready():
    """Go: "workload fits in single clusterQueue, with check state ready"."""
    foo = with_checks(workload("foo", "sales", queue="main", pod_sets=[one(10, {CPU: "1"})]),
                      [("check", "Ready")], generation=1)
    result = schedule([foo], gates=BASE)
    assert assignments(result) == {"sales/foo": admission("sales", one=({CPU: "default"}, 10))}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "foo", "sales", "sales")
    assert event_reasons(result) == [("sales/foo", "Admitted", "Normal"), ("sales/foo", "QuotaReserved", "Normal")]


def test_skip_workload_with_missing_or_deleted_cluster_queue_no_fit():
    """Go: "skip workload with missing or deleted ClusterQueue (NoFit)".

    Its LocalQueue does not exist. Expect no panics and workload skipped."""
    wl = workload("missing-cq-workload", "sales", queue="non-existent-queue", pod_sets=[one(1, {CPU: "1"}, name="set")])
    wl["metadata"]["generation"] = 1
    result = schedule([wl], gates=BASE)
    assert_marked_inadmissible(result, "missing-cq-workload", "sales", "",
                               "LocalQueue non-existent-queue doesn't exist")


def test_workload_fits_in_single_cluster_queue_with_check_state_pending():
    """Go: "workload fits in single clusterQueue, with check state pending".

    Quota is reserved; the pending check keeps it from being admitted (Go's expectation has no
    Admitted condition)."""
    foo = with_checks(workload("foo", "sales", queue="main", pod_sets=[one(10, {CPU: "1"})]), [("check", "Pending")])
    result = schedule([foo], gates=NO_OBSERVABILITY)
    assert assignments(result) == {"sales/foo": admission("sales", one=({CPU: "default"}, 10))}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert condition(result, "foo", "sales", "QuotaReserved") == (
        "True", "QuotaReserved", "Quota reserved in ClusterQueue sales")
    assert condition(result, "foo", "sales", "Admitted") is None
    assert event_reasons(result) == [("sales/foo", "QuotaReserved", "Normal")]


def test_single_cluster_queue_full():
    """Go: "single clusterQueue full"."""
    new = workload("new", "sales", queue="main", pod_sets=[one(11, {CPU: "1"})])
    assigned = reserve_quota(workload("assigned", "sales", pod_sets=[one(40, {CPU: "1"})]),
                             "sales", {"one": ({CPU: "default"}, 40)})
    result = schedule([new, assigned], gates=NO_OBSERVABILITY)
    assert assignments(result) == {"sales/assigned": admission("sales", one=({CPU: "default"}, 40))}
    assert left(result, "Pending") == {"sales": ["sales/new"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "new", "sales", "couldn't assign flavors to pod set one: insufficient unused quota for "
                   "cpu in flavor default, 1 more needed")


def test_failed_to_match_cluster_queue_selector():
    """Go: "failed to match clusterQueue selector"."""
    new = workload("new", "sales", queue="blocked", pod_sets=[one(1, {CPU: "1"})])
    result = schedule([new], gates=NO_OBSERVABILITY)
    assert assignments(result) == {}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {"eng-alpha": ["sales/new"]}
    # Kueue v0.19 writes the message in lower case (this older Go case capitalises it)
    assert_waiting(result, "new", "sales", "workload namespace doesn't match ClusterQueue selector")


def test_admit_in_different_cohorts():
    """Go: "admit in different cohorts"."""
    sales_new = workload("new", "sales", queue="main", pod_sets=[one(1, {CPU: "1"})])
    alpha_new = workload("new", "eng-alpha", queue="main", pod_sets=[one(51, {CPU: "1"})])  # Will borrow
    result = schedule([sales_new, alpha_new], gates=BASE)
    assert assignments(result) == {
        "sales/new": admission("sales", one=({CPU: "default"}, 1)),
        "eng-alpha/new": admission("eng-alpha", one=({CPU: "on-demand"}, 51)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "sales", "sales")
    assert_admitted_now(result, "new", "eng-alpha", "eng-alpha")


def test_admit_in_same_cohort_with_no_borrowing():
    """Go: "admit in same cohort with no borrowing"."""
    alpha_new = workload("new", "eng-alpha", queue="main", pod_sets=[one(40, {CPU: "1"})])
    beta_new = workload("new", "eng-beta", queue="main", pod_sets=[one(40, {CPU: "1"})])
    result = schedule([alpha_new, beta_new], gates=BASE)
    assert assignments(result) == {
        "eng-alpha/new": admission("eng-alpha", one=({CPU: "on-demand"}, 40)),
        "eng-beta/new": admission("eng-beta", one=({CPU: "on-demand"}, 40)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "eng-alpha", "eng-alpha")
    assert_admitted_now(result, "new", "eng-beta", "eng-beta")


def test_assign_multiple_resources_and_flavors():
    """Go: "assign multiple resources and flavors"."""
    new = workload("new", "eng-beta", queue="main",
                   pod_sets=[one(10, {CPU: "6", GPU: "1"}), one(40, {CPU: "1"}, name="two")])
    result = schedule([new], gates=BASE)
    assert assignments(result) == {
        "eng-beta/new": admission("eng-beta", one=({CPU: "on-demand", GPU: "model-a"}, 10),
                                  two=({CPU: "spot"}, 40)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "eng-beta", "eng-beta")


def test_cannot_borrow_if_cohort_was_assigned_and_would_result_in_overadmission():
    """Go: "cannot borrow if cohort was assigned and would result in overadmission"."""
    alpha_new = workload("new", "eng-alpha", queue="main", pod_sets=[one(45, {CPU: "1"})])
    beta_new = workload("new", "eng-beta", queue="main", pod_sets=[one(56, {CPU: "1"})])
    result = schedule([alpha_new, beta_new], gates=NO_OBSERVABILITY)
    assert assignments(result) == {"eng-alpha/new": admission("eng-alpha", one=({CPU: "on-demand"}, 45))}
    assert left(result, "Pending") == {"eng-beta": ["eng-beta/new"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "eng-alpha", "eng-alpha")
    assert_waiting(result, "new", "eng-beta", "Workload no longer fits after processing another workload")


def test_can_borrow_if_cohort_was_assigned_and_will_not_result_in_overadmission():
    """Go: "can borrow if cohort was assigned and will not result in overadmission"."""
    alpha_new = workload("new", "eng-alpha", queue="main", pod_sets=[one(45, {CPU: "1"})])
    beta_new = workload("new", "eng-beta", queue="main", pod_sets=[one(55, {CPU: "1"})])
    result = schedule([alpha_new, beta_new], gates=BASE)
    assert assignments(result) == {
        "eng-alpha/new": admission("eng-alpha", one=({CPU: "on-demand"}, 45)),
        "eng-beta/new": admission("eng-beta", one=({CPU: "on-demand"}, 55)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "eng-alpha", "eng-alpha")
    assert_admitted_now(result, "new", "eng-beta", "eng-beta")


def test_can_borrow_if_needs_reclaim_from_cohort_in_different_flavor():
    """Go: "can borrow if needs reclaim from cohort in different flavor"."""
    can_reclaim = workload("can-reclaim", "eng-alpha", queue="main", requests={CPU: "100"})
    needs_to_borrow = workload("needs-to-borrow", "eng-beta", queue="main", requests={CPU: "1"})
    user_on_demand = reserve_quota(workload("user-on-demand", "eng-beta", requests={CPU: "50"}),
                                   "eng-beta", {"main": ({CPU: "on-demand"}, None)})
    user_spot = reserve_quota(workload("user-spot", "eng-beta", requests={CPU: "1"}),
                              "eng-beta", {"main": ({CPU: "spot"}, None)})
    result = schedule([can_reclaim, needs_to_borrow, user_on_demand, user_spot], gates=NO_OBSERVABILITY)
    assert assignments(result) == {
        "eng-beta/user-spot": admission("eng-beta", main=({CPU: "spot"}, 1)),
        "eng-beta/user-on-demand": admission("eng-beta", main=({CPU: "on-demand"}, 1)),
        "eng-beta/needs-to-borrow": admission("eng-beta", main=({CPU: "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {"eng-alpha": ["eng-alpha/can-reclaim"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "can-reclaim", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
                   "50 more needed, insufficient unused quota for cpu in flavor spot, 1 more needed")
    assert_admitted_now(result, "needs-to-borrow", "eng-beta", "eng-beta")
    assert_not_evicted(result, "user-on-demand", "eng-beta")
    assert_not_evicted(result, "user-spot", "eng-beta")


def test_workload_exceeds_lending_limit_when_borrow_in_cohort():
    """Go: "workload exceeds lending limit when borrow in cohort"."""
    a = reserve_quota(workload("a", "lend", requests={CPU: "2"}), "lend-b", {"main": ({CPU: "default"}, None)},
                      )
    b = workload("b", "lend", queue="lend-b-queue", requests={CPU: "3"})
    result = schedule([a, b], gates=NO_OBSERVABILITY)
    assert assignments(result) == {"lend/a": admission("lend-b", main=({CPU: "default"}, 1))}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {"lend-b": ["lend/b"]}
    assert_waiting(result, "b", "lend", "couldn't assign flavors to pod set main: insufficient unused quota for cpu "
                   "in flavor default, 1 more needed")


def hierarchical_lending(lending_limit: str) -> dict:
    """The cohorts, ClusterQueues and LocalQueues of the two "hierarchical cohort" cases:

           ROOT
            |
          CHILD
         /     \\
    lender    borrower

    lender(10): lendingLimit given; borrower(5): borrowingLimit=10."""
    eng = "eng"
    return {
        "cohorts": [cohort("root"), cohort("child", parent="root")],
        "additional_cluster_queues": [
            cluster_queue("cq-lender", resource_group(flavor_quotas("on-demand", cpu=("10", "", lending_limit))),
                          cohort="child", namespace_dep=eng),
            cluster_queue("cq-borrower", resource_group(flavor_quotas("on-demand", cpu=("5", "10"))),
                          cohort="child", namespace_dep=eng),
        ],
        "additional_local_queues": [
            local_queue("lq-lender", "eng-alpha", "cq-lender"),
            local_queue("lq-borrower", "eng-alpha", "cq-borrower"),
        ],
    }


def existing_in_borrower() -> dict:
    return reserve_quota(workload("wl-existing", "eng-alpha", pod_sets=[pod_set("main", 1, requests={CPU: "5"})]),
                         "cq-borrower", {"main": ({CPU: "on-demand"}, None)})


def test_hierarchical_cohort_respects_lending_limit_when_borrowing():
    """Go: "hierarchical cohort respects lending limit when borrowing".

    lender(10): lendingLimit=3; borrower(5): borrowingLimit=10, usage=5.
    lender reserves 10-3=7 CPU and lends at most 3 to the cohort. borrower has used all 5 of its
    nominal quota, so it must borrow to admit more. wl-pending requests 4 CPU, but only 3 are
    lendable. We expect it to be inadmissible."""
    pending = workload("wl-pending", "eng-alpha", queue="lq-borrower",
                       pod_sets=[pod_set("main", 1, requests={CPU: "4"})])
    result = schedule([existing_in_borrower(), pending], **hierarchical_lending("3"), gates=NO_OBSERVABILITY)
    assert assignments(result) == {"eng-alpha/wl-existing": admission("cq-borrower", main=({CPU: "on-demand"}, 1))}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {"cq-borrower": ["eng-alpha/wl-pending"]}
    assert_waiting(result, "wl-pending", "eng-alpha", "couldn't assign flavors to pod set main: insufficient unused "
                   "quota for cpu in flavor on-demand, 1 more needed")


def test_hierarchical_cohort_allows_borrowing_up_to_lending_limit():
    """Go: "hierarchical cohort allows borrowing up to lending limit".

    lender(10): lendingLimit=5; borrower(5): borrowingLimit=10, usage=5.
    lender reserves 10-5=5 CPU and lends at most 5 to the cohort. borrower has used all 5 of its
    nominal quota, so it must borrow to admit more. wl-borrowing requests 5 CPU, which exactly
    matches the lendable amount. We expect it to be admitted."""
    borrowing = workload("wl-borrowing", "eng-alpha", queue="lq-borrower",
                         pod_sets=[pod_set("main", 1, requests={CPU: "5"})])
    result = schedule([existing_in_borrower(), borrowing], **hierarchical_lending("5"), gates=BASE)
    assert assignments(result) == {
        "eng-alpha/wl-existing": admission("cq-borrower", main=({CPU: "on-demand"}, 1)),
        "eng-alpha/wl-borrowing": admission("cq-borrower", main=({CPU: "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "wl-borrowing", "eng-alpha", "cq-borrower")


def test_preempt_workloads_in_cluster_queue_and_cohort():
    """Go: "preempt workloads in ClusterQueue and cohort".

    Preemptor is not admitted in this cycle. Removal from cache for the preempted workloads is
    deferred until we receive Workload updates."""
    preemptor = workload("preemptor", "eng-beta", queue="main", requests={CPU: "20"}, uid="wl-preemptor",
                         job_uid="job-preemptor")
    use_all_spot = reserve_quota(workload("use-all-spot", "eng-alpha", requests={CPU: "100"}),
                                 "eng-alpha", {"main": ({CPU: "spot"}, None)})
    low_1 = reserve_quota(workload("low-1", "eng-beta", priority=-1, requests={CPU: "30"}),
                          "eng-beta", {"main": ({CPU: "on-demand"}, None)})
    low_2 = reserve_quota(workload("low-2", "eng-beta", priority=-2, requests={CPU: "10"}),
                          "eng-beta", {"main": ({CPU: "on-demand"}, None)})
    borrower = reserve_quota(workload("borrower", "eng-alpha", requests={CPU: "60"}),
                             "eng-alpha", {"main": ({CPU: "on-demand"}, None)})
    result = schedule([preemptor, use_all_spot, low_1, low_2, borrower], gates=NO_OBSERVABILITY)
    assert assignments(result) == {
        "eng-alpha/use-all-spot": admission("eng-alpha", main=({CPU: "spot"}, 1)),
        "eng-beta/low-1": admission("eng-beta", main=({CPU: "on-demand"}, 1)),
        "eng-beta/low-2": admission("eng-beta", main=({CPU: "on-demand"}, 1)),
        "eng-alpha/borrower": admission("eng-alpha", main=({CPU: "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {"eng-beta": ["eng-beta/preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_preempted(result, "borrower", "eng-alpha", "InCohortReclamation", preemption_message(
        "wl-preemptor", "job-preemptor", "reclamation within the cohort", "/eng/eng-beta", "/eng/eng-alpha"))
    assert_preempted(result, "low-2", "eng-beta", "InClusterQueue", preemption_message(
        "wl-preemptor", "job-preemptor", "prioritization in the ClusterQueue", "/eng/eng-beta", "/eng/eng-beta"))
    assert_not_evicted(result, "use-all-spot", "eng-alpha")
    assert_not_evicted(result, "low-1", "eng-beta")
    assert_waiting(result, "preemptor", "eng-beta",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
                   "20 more needed, insufficient unused quota for cpu in flavor spot, 20 more needed. "
                   "Pending the preemption of 2 workload(s)")


def test_multiple_cqs_need_preemption():
    """Go: "multiple CQs need preemption".

    Preemptor is not admitted in this cycle. Removal from cache for the preempted workloads is
    deferred until we receive Workload updates."""
    other_alpha = cluster_queue("other-alpha", resource_group(flavor_quotas("on-demand", cpu=("50", "50"))),
                                cohort="other")
    other_beta = cluster_queue("other-beta", resource_group(flavor_quotas("on-demand", cpu=("50", "10"))),
                               cohort="other", preemption=ANY_LOWER)
    preemptor = workload("preemptor", "eng-beta", queue="other", priority=-1, requests={CPU: "1"},
                         uid="wl-preemptor", job_uid="job-preemptor")
    pending = workload("pending", "eng-alpha", queue="other", priority=1, requests={CPU: "1"})
    use_all = reserve_quota(workload("use-all", "eng-alpha", requests={CPU: "100"}),
                            "other-alpha", {"main": ({CPU: "on-demand"}, None)})
    result = schedule([preemptor, pending, use_all], additional_cluster_queues=[other_alpha, other_beta],
                      additional_local_queues=[local_queue("other", "eng-alpha", "other-alpha"),
                                               local_queue("other", "eng-beta", "other-beta")],
                      gates=NO_OBSERVABILITY)
    assert assignments(result) == {"eng-alpha/use-all": admission("other-alpha", main=({CPU: "on-demand"}, 1))}
    assert left(result, "Pending") == {"other-beta": ["eng-beta/preemptor"]}
    assert left(result, "Inadmissible") == {"other-alpha": ["eng-alpha/pending"]}
    assert_waiting(result, "pending", "eng-alpha", "couldn't assign flavors to pod set main: insufficient unused "
                   "quota for cpu in flavor on-demand, 1 more needed")
    assert_preempted(result, "use-all", "eng-alpha", "InCohortReclamation", preemption_message(
        "wl-preemptor", "job-preemptor", "reclamation within the cohort", "/other/other-beta", "/other/other-alpha"))
    assert_waiting(result, "preemptor", "eng-beta", "couldn't assign flavors to pod set main: insufficient unused "
                   "quota for cpu in flavor on-demand, 1 more needed. Pending the preemption of 1 workload(s)")


def test_cannot_borrow_resource_not_listed_in_cluster_queue():
    """Go: "cannot borrow resource not listed in clusterQueue"."""
    new = workload("new", "eng-alpha", queue="main", requests={GPU: "1"})
    result = schedule([new], gates=NO_OBSERVABILITY)
    assert assignments(result) == {}
    assert left(result, "Pending") == {"eng-alpha": ["eng-alpha/new"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "new", "eng-alpha",
                   "couldn't assign flavors to pod set main: resource example.com/gpu unavailable in ClusterQueue")


def test_not_enough_resources_to_borrow_fallback_to_next_flavor_try_next_flavor():
    """Go: "not enough resources to borrow, fallback to next flavor; WhenCanPreempt: TryNextFlavor"."""
    new = workload("new", "eng-alpha", queue="main", pod_sets=[one(60, {CPU: "1"})])
    existing = reserve_quota(workload("existing", "eng-beta", pod_sets=[one(45, {CPU: "1"})]),
                             "eng-beta", {"one": ({CPU: "on-demand"}, 45)})
    result = schedule([new, existing], gates=BASE)
    assert assignments(result) == {
        "eng-alpha/new": admission("eng-alpha", one=({CPU: "spot"}, 60)),
        "eng-beta/existing": admission("eng-beta", one=({CPU: "on-demand"}, 45)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "eng-alpha", "eng-alpha")
    assert_not_evicted(result, "existing", "eng-beta")


def test_workload_should_not_fit_in_nonexistent_cluster_queue():
    """Go: "workload should not fit in nonexistent clusterQueue"."""
    foo = workload("foo", "sales", queue="cq-nonexistent-queue", requests={CPU: "1"})
    result = schedule([foo], gates=BASE)
    assert_marked_inadmissible(result, "foo", "sales", "nonexistent-cq", "ClusterQueue nonexistent-cq doesn't exist")


def test_workload_should_not_fit_in_cluster_queue_with_nonexistent_flavor():
    """Go: "workload should not fit in clusterQueue with nonexistent flavor"."""
    foo = workload("foo", "sales", queue="flavor-nonexistent-queue", requests={CPU: "1"})
    result = schedule([foo], gates=BASE)
    assert_marked_inadmissible(result, "foo", "sales", "flavor-nonexistent-cq",
                               "ClusterQueue flavor-nonexistent-cq is inactive")


def test_no_overadmission_while_borrowing():
    """Go: "no overadmission while borrowing".

    (Its wantSkippedPreemptions metric, 0 for eng-alpha, eng-beta and eng-gamma, has no engine
    equivalent.)"""
    eng_gamma = cluster_queue(
        "eng-gamma",
        resource_group(flavor_quotas("on-demand", cpu=("50", "10")), flavor_quotas("spot", cpu=("0", "100"))),
        cohort="eng", preemption=ANY_LOWER)
    new = workload("new", "eng-beta", queue="main", created=-2, pod_sets=[one(50, {CPU: "1"})])
    new_alpha = workload("new-alpha", "eng-alpha", queue="main", created=-1, pod_sets=[one(1, {CPU: "1"})])
    new_gamma = workload("new-gamma", "eng-gamma", queue="main", created=0, pod_sets=[one(50, {CPU: "1"})])
    existing = reserve_quota(
        workload("existing", "eng-gamma", pod_sets=[one(51, {CPU: "1"}, name="borrow-on-demand"),
                                                    one(100, {CPU: "1"}, name="use-all-spot")]),
        "eng-gamma", {"borrow-on-demand": ({CPU: "on-demand"}, 51), "use-all-spot": ({CPU: "spot"}, 100)},
        )
    result = schedule([new, new_alpha, new_gamma, existing], additional_cluster_queues=[eng_gamma],
                      additional_local_queues=[local_queue("main", "eng-gamma", "eng-gamma")],
                      gates=NO_OBSERVABILITY)
    assert assignments(result) == {
        "eng-gamma/existing": admission("eng-gamma", **{"borrow-on-demand": ({CPU: "on-demand"}, 51),
                                                        "use-all-spot": ({CPU: "spot"}, 100)}),
        "eng-beta/new": admission("eng-beta", one=({CPU: "on-demand"}, 50)),
        "eng-alpha/new-alpha": admission("eng-alpha", one=({CPU: "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {"eng-gamma": ["eng-gamma/new-gamma"]}
    assert_admitted_now(result, "new-alpha", "eng-alpha", "eng-alpha")
    assert_admitted_now(result, "new", "eng-beta", "eng-beta")
    assert_not_evicted(result, "existing", "eng-gamma")
    assert_waiting(result, "new-gamma", "eng-gamma",
                   "couldn't assign flavors to pod set one: insufficient unused quota for cpu in flavor on-demand, "
                   "41 more needed, insufficient unused quota for cpu in flavor spot, 50 more needed")


def test_partial_admission_single_variable_pod_set():
    """Go: "partial admission single variable pod set"."""
    new = workload("new", "sales", queue="main", pod_sets=[one(50, {CPU: "2"}, min_count=20)])
    result = schedule([new], gates=BASE)
    assert assignments(result) == {"sales/new": admission("sales", one=({CPU: "default"}, 25))}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "sales", "sales")


def partial_preemption_case(count: int) -> PassResult:
    new = workload("new", "eng-beta", queue="main", priority=4, uid="wl-new", job_uid="job-new",
                   pod_sets=[one(count, {GPU: "1"}, min_count=10)])
    old = reserve_quota(workload("old", "eng-beta", priority=-4, pod_sets=[one(10, {GPU: "1"})]),
                        "eng-beta", {"one": ({GPU: "model-a"}, 10)})
    return schedule([new, old], gates=NO_OBSERVABILITY)


def assert_partial_preemption(result: PassResult) -> None:
    assert assignments(result) == {"eng-beta/old": admission("eng-beta", one=({GPU: "model-a"}, 10))}
    assert left(result, "Pending") == {"eng-beta": ["eng-beta/new"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "new", "eng-beta", "couldn't assign flavors to pod set one: insufficient unused quota for "
                   "example.com/gpu in flavor model-a, 10 more needed. Pending the preemption of 1 workload(s)")
    assert_preempted(result, "old", "eng-beta", "InClusterQueue", preemption_message(
        "wl-new", "job-new", "prioritization in the ClusterQueue", "/eng/eng-beta", "/eng/eng-beta"))


def test_partial_admission_single_variable_pod_set_preempt_first():
    """Go: "partial admission single variable pod set, preempt first"."""
    assert_partial_preemption(partial_preemption_case(20))


def test_partial_admission_single_variable_pod_set_preempt_with_partial_admission():
    """Go: "partial admission single variable pod set, preempt with partial admission"."""
    assert_partial_preemption(partial_preemption_case(30))


def borrowing_cqs() -> dict:
    """cq1, cq2, cq3 in cohort co, each with r1 and r2 of 10 (borrowing limit 10) on default,
    and their LocalQueues lq1..lq3 in sales."""
    cqs = [cluster_queue(name, resource_group(flavor_quotas("default", r1=("10", "10"), r2=("10", "10"))),
                         cohort="co", preemption=ANY_LOWER) for name in ("cq1", "cq2", "cq3")]
    return {"additional_cluster_queues": cqs,
            "additional_local_queues": [local_queue(f"lq{i}", "sales", f"cq{i}") for i in (1, 2, 3)]}


def test_two_workloads_can_borrow_different_resources_from_the_same_flavor_in_the_same_cycle():
    """Go: "two workloads can borrow different resources from the same flavor in the same cycle"."""
    wl1 = workload("wl1", "sales", queue="lq1", priority=-1, pod_sets=[pod_set("main", 1, requests={"r1": "16"})])
    wl2 = workload("wl2", "sales", queue="lq2", priority=-2, pod_sets=[pod_set("main", 1, requests={"r2": "16"})])
    result = schedule([wl1, wl2], **borrowing_cqs(), gates=BASE)
    assert assignments(result) == {
        "sales/wl1": admission("cq1", main=({"r1": "default"}, 1)),
        "sales/wl2": admission("cq2", main=({"r2": "default"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "wl1", "sales", "cq1")
    assert_admitted_now(result, "wl2", "sales", "cq2")


def test_two_workloads_can_borrow_the_same_resources_from_the_same_flavor_if_fits_in_the_cohort_quota():
    """Go: "two workloads can borrow the same resources from the same flavor in the same cycle if
    fits in the cohort quota"."""
    wl1 = workload("wl1", "sales", queue="lq1", priority=-1, pod_sets=[pod_set("main", 1, requests={"r1": "16"})])
    wl2 = workload("wl2", "sales", queue="lq2", priority=-2, pod_sets=[pod_set("main", 1, requests={"r1": "14"})])
    result = schedule([wl1, wl2], **borrowing_cqs(), gates=BASE)
    assert assignments(result) == {
        "sales/wl1": admission("cq1", main=({"r1": "default"}, 1)),
        "sales/wl2": admission("cq2", main=({"r1": "default"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "wl1", "sales", "cq1")
    assert_admitted_now(result, "wl2", "sales", "cq2")
