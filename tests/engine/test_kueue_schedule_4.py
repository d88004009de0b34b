"""Kueue's pkg/scheduler scheduler_test.go (API v1beta2), part 4: the last cases of TestSchedule,
then the scheduling-cycle tests that follow it in the file (TestLastSchedulingContext,
TestSchedulerWhenWorkloadModifiedConcurrently).

TestSchedule cases run one scheduling cycle over the shared cluster of `kueue_schedule` (its
ClusterQueues, LocalQueues, flavors and namespaces match the Go test's) and check what the Go
runner compares: every admission in the cache after the cycle (`wantAssignments`), the
workloads left in the queues (`wantLeft`, `wantInadmissibleLeft`), the conditions of the
workloads in `wantWorkloads`, and the events (`wantEvents`, with their messages where the Go
case compares them).

TestLastSchedulingContext runs two scheduling cycles over its own cluster, deleting the case's
`deleteWorkloads` in between (as a finished preempted workload leaves); it checks the workloads
after the first cycle and the admissions after the second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.engine import Engine
from scheduler.features import DEFAULT_GATES
from scheduler.results import PassResult
from scheduler.simulate import engine_pass

from .factories import NOW, parse, timestamp
from .kueue_schedule import (
    admission,
    assignments,
    cluster_queue,
    condition,
    flavor,
    flavor_quotas,
    left,
    local_queue,
    namespace,
    pod_set,
    reserve_quota,
    resource_group,
    schedule,
    workload,
)

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
NORMAL = "Normal"
WARNING = "Warning"
# Go's wait since a zero creation time, saturated at the largest time.Duration
WAIT_SINCE_ZERO = "9223372037s"
NO_OBSERVABILITY = {"UnadmittedWorkloadsObservability": False}


def reserved(cq: str) -> tuple[str, str, str]:
    return ("True", QUOTA_RESERVED, f"Quota reserved in ClusterQueue {cq}")


def status_reason(result: PassResult, name: str, ns: str, cond_type: str) -> tuple[str, str] | None:
    """(status, reason) of a condition. The engine writes the wait time into the QuotaReserved and
    Admitted messages of a workload it admits (Kueue writes it in the events only), so for the
    workloads a cycle admits the conditions are compared without their messages."""
    got = condition(result, name, ns, cond_type)
    return None if got is None else got[:2]


IS_RESERVED = ("True", QUOTA_RESERVED)
IS_ADMITTED = ("True", ADMITTED)


def events(result: PassResult) -> list[tuple[str, str, str]]:
    """(workload key, reason, type) of the events, in the order they were recorded."""
    return [(e.key, e.reason, e.type) for e in result.events]


def event_messages(result: PassResult) -> list[tuple[str, str, str, str]]:
    return [(e.key, e.reason, e.type, e.message) for e in result.events]


def preemption_message(uid: str, job_uid: str, why: str, preemptor: str, preemptee: str) -> str:
    return (f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {why}; "
            f"preemptor path: {preemptor}; preemptee path: {preemptee}")


def with_check(wl: dict, name: str, state: str) -> dict:
    """AdmissionCheck(kueue.AdmissionCheckState{Name, State}) on the workload's status."""
    status = dict(wl.get("status") or {})
    status["admissionChecks"] = [*status.get("admissionChecks", []),
                                 {"name": name, "state": state, "message": "",
                                  "lastTransitionTime": timestamp(0)}]
    return {**wl, "status": status}


# ================================================================ TestSchedule


def test_pending_admission_check_with_nofit_and_fit_flavors() -> None:
    """Go: "pending admission check with nofit and fit flavors".

    eng-beta's on-demand (50 nominal, borrowing limit 10) cannot hold 80 cpu; spot (0 nominal,
    borrowing up to 100 from eng-alpha) can. The workload's admission check is Pending, so it
    gets its quota reservation but is not Admitted. The Go case's workload has no Admitted
    condition at all (no Admitted=False/UnsatisfiedAdmissionChecks): the runner had
    UnadmittedWorkloadsObservability off, as its preemption case below shows too."""
    wl = with_check(workload("pending-check", "eng-beta", queue="main", requests={"cpu": "80"}), "check", "Pending")
    result = schedule([wl], gates=NO_OBSERVABILITY)

    assert assignments(result) == {
        "eng-beta/pending-check": admission("eng-beta", main=({"cpu": "spot"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert status_reason(result, "pending-check", "eng-beta", QUOTA_RESERVED) == IS_RESERVED
    assert condition(result, "pending-check", "eng-beta", ADMITTED) is None
    # the Go case compares the event with its message
    assert event_messages(result) == [
        ("eng-beta/pending-check", "QuotaReserved", NORMAL,
         f"Quota reserved in ClusterQueue eng-beta, wait time since queued was {WAIT_SINCE_ZERO}; "
         "Flavors considered: main: on-demand(NoFit;insufficient quota for cpu in flavor on-demand, "
         "previously considered podsets requests (0) + current podset request (80) > maximum capacity (60)), "
         "spot(Fit;borrow=1)"),
    ]


def test_admit_to_second_flavor_when_first_needs_preemption_when_can_preempt_try_next_flavor() -> None:
    """Go: "admit to second flavor when first needs preemption; WhenCanPreempt: TryNextFlavor"."""
    cq = cluster_queue("preempt-attempts-cq",
                       resource_group(flavor_quotas("on-demand", cpu="1"), flavor_quotas("spot", cpu="1")),
                       preemption={"withinClusterQueue": "LowerPriority"},
                       fungibility={"whenCanPreempt": "TryNextFlavor"})
    lq = local_queue("preempt-attempts-lq", "eng-alpha", "preempt-attempts-cq")
    blocker = reserve_quota(
        workload("blocker", "eng-alpha", queue="preempt-attempts-lq", requests={"cpu": "1"}, priority=50),
        "preempt-attempts-cq", {"main": ({"cpu": "on-demand"}, None)})
    test_wl = workload("test-wl", "eng-alpha", queue="preempt-attempts-lq", requests={"cpu": "1"}, priority=100)
    result = schedule([blocker, test_wl], additional_cluster_queues=[cq], additional_local_queues=[lq])

    assert assignments(result) == {
        "eng-alpha/test-wl": admission("preempt-attempts-cq", main=({"cpu": "spot"}, 1)),
        "eng-alpha/blocker": admission("preempt-attempts-cq", main=({"cpu": "on-demand"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert status_reason(result, "test-wl", "eng-alpha", QUOTA_RESERVED) == IS_RESERVED
    assert status_reason(result, "test-wl", "eng-alpha", ADMITTED) == IS_ADMITTED
    assert condition(result, "blocker", "eng-alpha", "Evicted") is None
    assert condition(result, "blocker", "eng-alpha", "Preempted") is None
    # the Go case compares the events with their messages
    assert event_messages(result) == [
        ("eng-alpha/test-wl", "QuotaReserved", NORMAL,
         f"Quota reserved in ClusterQueue preempt-attempts-cq, wait time since queued was {WAIT_SINCE_ZERO}; "
         "Flavors considered: main: on-demand(preemptionMode=Preempt;insufficient unused quota for cpu in "
         "flavor on-demand, 1 more needed)"),
        ("eng-alpha/test-wl", "Admitted", NORMAL,
         "Admitted by ClusterQueue preempt-attempts-cq, wait time since reservation was 0s"),
    ]


def test_admit_workload_with_zero_quantity_request_for_resource_not_in_cluster_queue() -> None:
    """Go: "admit workload with zero-quantity request for resource not in ClusterQueue"."""
    wl = workload("zero-resource-wl", "sales", queue="main", requests={"cpu": "1", "example.com/gpu": "0"})
    result = schedule([wl])

    assert assignments(result) == {
        "sales/zero-resource-wl": admission("sales", main=({"cpu": "default"}, 1)),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert status_reason(result, "zero-resource-wl", "sales", QUOTA_RESERVED) == IS_RESERVED
    assert status_reason(result, "zero-resource-wl", "sales", ADMITTED) == IS_ADMITTED
    assert events(result) == [
        ("sales/zero-resource-wl", "QuotaReserved", NORMAL),
        ("sales/zero-resource-wl", "Admitted", NORMAL),
    ]


def test_preempt_when_workload_requests_zero_of_a_resource_not_defined_in_cluster_queue() -> None:
    """Go: "preempt when workload requests zero of a resource not defined in ClusterQueue".

    The preemptor's status in the Go case is QuotaReserved=False/Pending with no Admitted
    condition: the runner had UnadmittedWorkloadsObservability off."""
    cq = cluster_queue("preempt-zero-gpu-cq", resource_group(flavor_quotas("default", cpu="4")),
                       preemption={"withinClusterQueue": "LowerPriority"})
    lq = local_queue("preempt-zero-gpu-lq", "sales", "preempt-zero-gpu-cq")
    preemptor = workload("preemptor", "sales", queue="preempt-zero-gpu-lq", uid="wl-preemptor",
                         job_uid="job-preemptor", requests={"cpu": "2", "example.com/gpu": "0"})
    low = reserve_quota(
        workload("low-priority", "sales", queue="preempt-zero-gpu-lq", priority=-1, requests={"cpu": "4"}),
        # admitted: the Go unit test runs no workload controller, which would admit a reservation
        # with no checks before the cycle (as the engine's pass does, with an Admitted event)
        "preempt-zero-gpu-cq", {"main": ({"cpu": "default"}, None)})
    result = schedule([preemptor, low], additional_cluster_queues=[cq], additional_local_queues=[lq],
                      gates=NO_OBSERVABILITY)

    message = preemption_message("wl-preemptor", "job-preemptor", "prioritization in the ClusterQueue",
                                 "/preempt-zero-gpu-cq", "/preempt-zero-gpu-cq")
    assert assignments(result) == {
        "sales/low-priority": admission("preempt-zero-gpu-cq", main=({"cpu": "default"}, 1)),
    }
    assert left(result, "Pending") == {"preempt-zero-gpu-cq": ["sales/preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert condition(result, "low-priority", "sales", QUOTA_RESERVED) == reserved("preempt-zero-gpu-cq")
    assert condition(result, "low-priority", "sales", "Evicted") == ("True", "Preempted", message)
    assert condition(result, "low-priority", "sales", "Preempted") == ("True", "InClusterQueue", message)
    assert condition(result, "preemptor", "sales", QUOTA_RESERVED) == (
        "False", "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
        "2 more needed. Pending the preemption of 1 workload(s)")
    assert condition(result, "preemptor", "sales", ADMITTED) is None
    # Kueue's v0.19 preemptor also records PreemptedWorkload (the TAS suites expect it; this
    # older Go case predates it)
    assert events(result) == [
        ("sales/low-priority", "EvictedDueToPreempted", NORMAL),
        ("sales/low-priority", "Preempted", NORMAL),
        ("sales/preemptor", "PreemptedWorkload", NORMAL),
        ("sales/preemptor", "Pending", WARNING),
    ]


# ================================================================ TestLastSchedulingContext


LSC_FLAVORS = ("on-demand", "spot")


def lsc_local_queues() -> list[dict]:
    return [
        local_queue("main", "default", "eng-alpha"),
        local_queue("main-alpha", "default", "eng-cohort-alpha"),
        local_queue("main-beta", "default", "eng-cohort-beta"),
        local_queue("main-theta", "default", "eng-cohort-theta"),
    ]


def lsc_cohort_queue(name: str, *, fungibility: str) -> dict:
    """One of the Go test's clusterQueueCohort: cohort `cohort`, StrictFIFO, reclaiming lower
    priorities, on-demand 50 (borrowing limit 50) and spot 100 (borrowing limit 0)."""
    return cluster_queue(name,
                         resource_group(flavor_quotas("on-demand", cpu=("50", "50")),
                                        flavor_quotas("spot", cpu=("100", "0"))),
                         cohort="cohort", strategy="StrictFIFO",
                         preemption={"withinClusterQueue": "Never", "reclaimWithinCohort": "LowerPriority"},
                         fungibility={"whenCanPreempt": fungibility, "whenCanBorrow": fungibility})


def cluster_queue_cohort() -> list[dict]:
    return [lsc_cohort_queue("eng-cohort-alpha", fungibility="MayStopSearch"),
            lsc_cohort_queue("eng-cohort-beta", fungibility="MayStopSearch"),
            lsc_cohort_queue("eng-cohort-theta", fungibility="TryNextFlavor")]


def held_in(wl: dict, cq: str, flavor_name: str, *, at: float = 0) -> dict:
    """ReserveQuotaAt(MakeAdmission(cq) on `flavor_name` for cpu, now + at).AdmittedAt(true, now)
    (SimpleReserveQuota too)."""
    out = reserve_quota(wl, cq, {"main": ({"cpu": flavor_name}, None)})
    conditions = [dict(c) for c in out["status"]["conditions"]]
    for c in conditions:
        c["lastTransitionTime"] = timestamp(at if c["type"] == QUOTA_RESERVED else 0)
    return {**out, "status": {**out["status"], "conditions": conditions}}


class TwoCycles:
    """The Go runner: one scheduling cycle, the case's workloads deleted, another cycle."""

    def __init__(self, cqs: Sequence[dict], workloads: Sequence[dict], *,
                 gates: Mapping[str, bool] | None = None) -> None:
        objects = [namespace("default"), *(flavor(f) for f in LSC_FLAVORS), *cqs, *lsc_local_queues(), *workloads]
        self.engine = Engine.from_parsed(parse(objects), DEFAULT_GATES.with_overrides(**(gates or {})))

    def cycle(self) -> PassResult:
        return engine_pass(self.engine, NOW, cycles=1)

    def delete(self, *keys: str) -> None:
        for key in keys:
            self.engine.delete("Workload", key)


def assert_untouched(result: PassResult, name: str, cq: str) -> None:
    """Admitted before the cycle, neither evicted nor preempted by it."""
    assert condition(result, name, "default", QUOTA_RESERVED) == reserved(cq)
    assert condition(result, name, "default", "Evicted") is None
    assert condition(result, name, "default", "Preempted") is None


def assert_admitted_now(result: PassResult, name: str) -> None:
    assert status_reason(result, name, "default", QUOTA_RESERVED) == IS_RESERVED
    assert status_reason(result, name, "default", ADMITTED) == IS_ADMITTED


def assert_pending(result: PassResult, name: str, message: str) -> None:
    assert condition(result, name, "default", QUOTA_RESERVED) == ("False", "Pending", message)
    assert condition(result, name, "default", ADMITTED) is None


def test_last_scheduling_context_first_flavor_unblocked_after_some_workloads_were_deleted() -> None:
    """Go (TestLastSchedulingContext): "scheduling on the first flavor is unblocked after some
    workloads were deleted".

    In this scenario we wait for the first flavor to be unblocked by removal of workloads. The
    second flavor cannot be used because it is noFit. (The preemptor's status in the Go case
    has no Admitted condition: UnadmittedWorkloadsObservability off.)"""
    eng_alpha = cluster_queue("eng-alpha",
                              resource_group(flavor_quotas("on-demand", cpu=("50", "50")),
                                             flavor_quotas("spot", cpu=("10", "0"))),
                              strategy="BestEffortFIFO", preemption={"withinClusterQueue": "LowerPriority"},
                              fungibility={"whenCanPreempt": "MayStopSearch"})
    low = held_in(workload("low-1", "default", queue="main", requests={"cpu": "50"}), "eng-alpha", "on-demand")
    preemptor = workload("preemptor", "default", queue="main", requests={"cpu": "20"})
    run = TwoCycles([eng_alpha], [low, preemptor], gates=NO_OBSERVABILITY)

    first = run.cycle()
    assert_untouched(first, "low-1", "eng-alpha")
    assert_pending(first, "preemptor",
                   "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor spot, "
                   "previously considered podsets requests (0) + current podset request (20) > maximum "
                   "capacity (10), insufficient unused quota for cpu in flavor on-demand, 20 more needed")

    run.delete("default/low-1")
    second = run.cycle()
    assert assignments(second) == {
        "default/preemptor": admission("eng-alpha", main=({"cpu": "on-demand"}, 1)),
    }


def test_last_scheduling_context_borrow_before_next_flavor() -> None:
    """Go (TestLastSchedulingContext): "borrow before next flavor"."""
    placeholder = held_in(workload("placeholder", "default", requests={"cpu": "50"}), "eng-cohort-alpha", "on-demand")
    borrower = workload("borrower", "default", queue="main-alpha", requests={"cpu": "20"})
    workload1 = workload("workload1", "default", queue="main-beta", requests={"cpu": "20"})
    run = TwoCycles(cluster_queue_cohort(), [placeholder, borrower, workload1])

    first = run.cycle()
    assert_untouched(first, "placeholder", "eng-cohort-alpha")
    assert_admitted_now(first, "borrower")
    assert_admitted_now(first, "workload1")
    assert assignments(first) == {
        "default/placeholder": admission("eng-cohort-alpha", main=({"cpu": "on-demand"}, 1)),
        "default/borrower": admission("eng-cohort-alpha", main=({"cpu": "on-demand"}, 1)),
        "default/workload1": admission("eng-cohort-beta", main=({"cpu": "on-demand"}, 1)),
    }

    second = run.cycle()
    assert assignments(second) == {
        "default/placeholder": admission("eng-cohort-alpha", main=({"cpu": "on-demand"}, 1)),
        "default/workload1": admission("eng-cohort-beta", main=({"cpu": "on-demand"}, 1)),
        "default/borrower": admission("eng-cohort-alpha", main=({"cpu": "on-demand"}, 1)),
    }


def test_last_scheduling_context_borrow_after_all_flavors() -> None:
    """Go (TestLastSchedulingContext): "borrow after all flavors"."""
    placeholder = held_in(workload("placeholder", "default", requests={"cpu": "50"}), "eng-cohort-alpha", "on-demand")
    placeholder1 = held_in(workload("placeholder1", "default", requests={"cpu": "50"}), "eng-cohort-theta",
                           "on-demand")
    new = workload("workload", "default", queue="main-theta", requests={"cpu": "20"})
    run = TwoCycles(cluster_queue_cohort(), [placeholder, placeholder1, new])

    first = run.cycle()
    assert_untouched(first, "placeholder", "eng-cohort-alpha")
    assert_untouched(first, "placeholder1", "eng-cohort-theta")
    assert_admitted_now(first, "workload")
    assert assignments(first)["default/workload"] == admission("eng-cohort-theta", main=({"cpu": "spot"}, 1))

    second = run.cycle()
    assert assignments(second) == {
        "default/placeholder": admission("eng-cohort-alpha", main=({"cpu": "on-demand"}, 1)),
        "default/placeholder1": admission("eng-cohort-theta", main=({"cpu": "on-demand"}, 1)),
        "default/workload": admission("eng-cohort-theta", main=({"cpu": "spot"}, 1)),
    }


def test_last_scheduling_context_when_the_next_flavor_is_full_but_can_borrow_on_first() -> None:
    """Go (TestLastSchedulingContext): "when the next flavor is full, but can borrow on first"."""
    placeholder = held_in(workload("placeholder", "default", requests={"cpu": "40"}), "eng-cohort-alpha", "on-demand")
    placeholder1 = held_in(workload("placeholder1", "default", requests={"cpu": "40"}), "eng-cohort-theta",
                           "on-demand")
    placeholder2 = held_in(workload("placeholder2", "default", requests={"cpu": "100"}), "eng-cohort-theta", "spot")
    new = workload("workload", "default", queue="main-theta", requests={"cpu": "20"})
    run = TwoCycles(cluster_queue_cohort(), [placeholder, placeholder1, placeholder2, new])

    first = run.cycle()
    assert_untouched(first, "placeholder", "eng-cohort-alpha")
    assert_untouched(first, "placeholder1", "eng-cohort-theta")
    assert_untouched(first, "placeholder2", "eng-cohort-theta")
    assert_admitted_now(first, "workload")
    assert assignments(first)["default/workload"] == admission("eng-cohort-theta", main=({"cpu": "on-demand"}, 1))

    second = run.cycle()
    assert assignments(second) == {
        "default/placeholder": admission("eng-cohort-alpha", main=({"cpu": "on-demand"}, 1)),
        "default/placeholder1": admission("eng-cohort-theta", main=({"cpu": "on-demand"}, 1)),
        "default/placeholder2": admission("eng-cohort-theta", main=({"cpu": "spot"}, 1)),
        "default/workload": admission("eng-cohort-theta", main=({"cpu": "on-demand"}, 1)),
    }


def test_last_scheduling_context_when_the_next_flavor_is_full_but_can_preempt_on_first() -> None:
    """Go (TestLastSchedulingContext): "when the next flavor is full, but can preempt on first".

    The preemptor's status in the Go case has no Admitted condition:
    UnadmittedWorkloadsObservability off."""
    placeholder_alpha = held_in(workload("placeholder-alpha", "default", priority=-1, requests={"cpu": "150"}),
                                "eng-cohort-alpha", "on-demand")
    placeholder_theta_spot = held_in(workload("placeholder-theta-spot", "default", requests={"cpu": "100"}),
                                     "eng-cohort-theta", "spot")
    new = workload("new", "default", queue="main-theta", uid="wl-new", job_uid="job-new", requests={"cpu": "20"})
    run = TwoCycles(cluster_queue_cohort(), [placeholder_alpha, placeholder_theta_spot, new], gates=NO_OBSERVABILITY)

    first = run.cycle()
    message = preemption_message("wl-new", "job-new", "reclamation within the cohort",
                                 "/cohort/eng-cohort-theta", "/cohort/eng-cohort-alpha")
    assert_pending(first, "new",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
                   "20 more needed, insufficient unused quota for cpu in flavor spot, 20 more needed. "
                   "Pending the preemption of 1 workload(s)")
    assert condition(first, "placeholder-alpha", "default", QUOTA_RESERVED) == reserved("eng-cohort-alpha")
    assert condition(first, "placeholder-alpha", "default", "Evicted") == ("True", "Preempted", message)
    assert condition(first, "placeholder-alpha", "default", "Preempted") == ("True", "InCohortReclamation", message)
    assert_untouched(first, "placeholder-theta-spot", "eng-cohort-theta")

    run.delete("default/placeholder-alpha")
    second = run.cycle()
    assert assignments(second) == {
        "default/placeholder-theta-spot": admission("eng-cohort-theta", main=({"cpu": "spot"}, 1)),
        "default/new": admission("eng-cohort-theta", main=({"cpu": "on-demand"}, 1)),
    }


def test_last_scheduling_context_try_next_flavor_but_second_flavor_is_full_and_can_preempt_on_first() -> None:
    """Go (TestLastSchedulingContext): "TryNextFlavor, but second flavor is full and can preempt on
    first".

    The preemptor's status in the Go case has no Admitted condition:
    UnadmittedWorkloadsObservability off."""
    fungibility = {"whenCanPreempt": "TryNextFlavor", "whenCanBorrow": "TryNextFlavor"}
    policy = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    cqs = [
        cluster_queue("eng-cohort-alpha",
                      resource_group(flavor_quotas("on-demand", cpu=("0", "60")),
                                     flavor_quotas("spot", cpu=("30", "30"))),
                      cohort="cohort", preemption=policy, fungibility=fungibility),
        cluster_queue("eng-cohort-beta",
                      resource_group(flavor_quotas("on-demand", cpu=("30", "30")),
                                     flavor_quotas("spot", cpu=("30", "30"))),
                      cohort="cohort", preemption=policy, fungibility=fungibility),
        cluster_queue("eng-cohort-shared", resource_group(flavor_quotas("on-demand", cpu="30")), cohort="cohort"),
    ]
    alpha1 = held_in(workload("alpha1", "default", requests={"cpu": "22"}), "eng-cohort-alpha", "on-demand", at=-1)
    alpha2 = held_in(workload("alpha2", "default", requests={"cpu": "22"}), "eng-cohort-alpha", "on-demand")
    alpha3 = held_in(workload("alpha3", "default", requests={"cpu": "22"}), "eng-cohort-alpha", "spot")
    beta1 = held_in(workload("beta1", "default", requests={"cpu": "22"}), "eng-cohort-beta", "spot")
    new = workload("new", "default", queue="main-beta", uid="wl-new", job_uid="job-new", requests={"cpu": "22"})
    run = TwoCycles(cqs, [alpha1, alpha2, alpha3, beta1, new], gates=NO_OBSERVABILITY)

    first = run.cycle()
    message = preemption_message("wl-new", "job-new", "reclamation within the cohort",
                                 "/cohort/eng-cohort-beta", "/cohort/eng-cohort-alpha")
    assert_untouched(first, "alpha1", "eng-cohort-alpha")
    assert condition(first, "alpha2", "default", QUOTA_RESERVED) == reserved("eng-cohort-alpha")
    assert condition(first, "alpha2", "default", "Evicted") == ("True", "Preempted", message)
    assert condition(first, "alpha2", "default", "Preempted") == ("True", "InCohortReclamation", message)
    assert_untouched(first, "alpha3", "eng-cohort-alpha")
    assert_untouched(first, "beta1", "eng-cohort-beta")
    assert_pending(first, "new",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
                   "6 more needed, insufficient unused quota for cpu in flavor spot, 6 more needed. "
                   "Pending the preemption of 1 workload(s)")

    run.delete("default/alpha2")
    second = run.cycle()
    assert assignments(second) == {
        "default/alpha1": admission("eng-cohort-alpha", main=({"cpu": "on-demand"}, 1)),
        "default/alpha3": admission("eng-cohort-alpha", main=({"cpu": "spot"}, 1)),
        "default/beta1": admission("eng-cohort-beta", main=({"cpu": "spot"}, 1)),
        "default/new": admission("eng-cohort-beta", main=({"cpu": "on-demand"}, 1)),
    }


# ================================================================ TestSchedulerWhenWorkloadModifiedConcurrently
# The Go test changes the Workload (a label) behind the scheduler's back at its first status
# patch, to check that the scheduler patches instead of updating; the engine has no API writes,
# so what is left is the cycle's outcome: the admission or the pending status, and the events.


def concurrent_cluster(count: int) -> list[dict]:
    return [namespace("default"), flavor("rf"),
            cluster_queue("cq", resource_group(flavor_quotas("rf", cpu="1"))),
            local_queue("lq", "default", "cq"),
            workload("wl", "default", queue="lq", pod_sets=[pod_set("main", count, requests={"cpu": "1"})])]


def concurrent_schedule(count: int, gates: Mapping[str, bool] | None = None) -> PassResult:
    engine = Engine.from_parsed(parse(concurrent_cluster(count)), DEFAULT_GATES.with_overrides(**(gates or {})))
    return engine_pass(engine, NOW, cycles=1)


def test_workload_modified_concurrently_use_patch_in_admit() -> None:
    """Go (TestSchedulerWhenWorkloadModifiedConcurrently): "use patch in admit"."""
    result = concurrent_schedule(1)
    assert assignments(result) == {"default/wl": admission("cq", main=({"cpu": "rf"}, 1))}
    assert status_reason(result, "wl", "default", QUOTA_RESERVED) == IS_RESERVED
    assert status_reason(result, "wl", "default", ADMITTED) == IS_ADMITTED
    assert events(result) == [("default/wl", "QuotaReserved", NORMAL), ("default/wl", "Admitted", NORMAL)]


def test_workload_modified_concurrently_use_patch_in_requeue_and_update() -> None:
    """Go (TestSchedulerWhenWorkloadModifiedConcurrently): "use patch in requeueAndUpdate".

    The workload's status in the Go case has no Admitted condition:
    UnadmittedWorkloadsObservability off."""
    result = concurrent_schedule(2, NO_OBSERVABILITY)
    assert assignments(result) == {}
    assert condition(result, "wl", "default", QUOTA_RESERVED) == (
        "False", "Pending",
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor rf, previously "
        "considered podsets requests (0) + current podset request (2) > maximum capacity (1)")
    assert condition(result, "wl", "default", ADMITTED) is None
    assert events(result) == [("default/wl", "Pending", WARNING)]
