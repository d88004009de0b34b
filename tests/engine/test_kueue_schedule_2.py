"""Kueue's TestSchedule (pkg/scheduler, API v1beta2), part 2 of 4: the cases from "only one
workload can borrow one resources ..." to "multiple preemptions preemption possible after
earlier workload fits".

Each test runs one scheduling cycle over the shared TestSchedule cluster (`kueue_schedule`) plus
the case's own ClusterQueues, LocalQueues and Cohorts, and checks what the Go case checks: the
admissions held after the cycle (`wantAssignments`), the workloads left in the queues
(`wantLeft`, Pending) or parked (`wantInadmissibleLeft`, Inadmissible), and the conditions of
`wantWorkloads`: admitted in the cycle, preempted (Evicted and Preempted conditions), or not
admitted (QuotaReserved=False with its message).

Version skew: the Go expectations for not-admitted workloads carry QuotaReserved=False/Pending and
no Admitted=False/NoReservation condition, so the Go runner ran with UnadmittedWorkloadsObservability
off; the cases pass that gate off. The Go cases' `wantSkippedPreemptions` is a metric the engine
does not expose; it is kept as a comment.

Names: the engine, as Kueue's API server, takes only lowercase RFC 1123 names, while the Go test's
fake client takes any: the Go names with an underscore (cq_a, lq_a, admitted_a, all_nominal,
older_new, all_spot, ...) are written with a hyphen, and the Cohorts "A", "B", "C" as "cohort-a",
"cohort-b", "cohort-c". No ordering the cases depend on changes with it.
"""

from __future__ import annotations

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

# the Go runner's wantWorkloads show no Admitted=False/NoReservation for pending workloads
OBSERVABILITY_OFF = {"UnadmittedWorkloadsObservability": False}
NO_LONGER_FITS = "Workload no longer fits after processing another workload"
ANY_LOWER = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
WITHIN_LOWER = {"withinClusterQueue": "LowerPriority"}


# ---------------------------------------------------------------- helpers


def assert_untouched(result: PassResult, name: str, ns: str) -> None:
    """Holding quota before the cycle, neither evicted nor preempted by it."""
    assert condition(result, name, ns, "Evicted") is None
    assert condition(result, name, ns, "Preempted") is None


def co_queues() -> list[dict]:
    """cq1, cq2, cq3 in Cohort co, each with r1 and r2 (nominal 10, borrowing limit 10) on default."""
    rg = resource_group(flavor_quotas("default", r1=("10", "10"), r2=("10", "10")))
    return [cluster_queue(name, rg, cohort="co", preemption=ANY_LOWER) for name in ("cq1", "cq2", "cq3")]


def co_local_queues() -> list[dict]:
    return [local_queue(f"lq{i}", "sales", f"cq{i}") for i in (1, 2, 3)]


def cohort_ref(name: str | None) -> str | None:
    """The Go cases' Cohorts "A", "B", "C" as "cohort-a", ...: the engine, as Kueue's API server,
    takes only lowercase RFC 1123 names (the Go test's fake client does not validate them)."""
    return None if name is None else f"cohort-{name.lower()}"


def on_demand_cq(name: str, cpu: str, *, cohort_name: str | None = None, fair_weight: str | None = None,
                 preemption: dict | None = None) -> dict:
    return cluster_queue(name, resource_group(flavor_quotas("on-demand", cpu=cpu)), cohort=cohort_ref(cohort_name),
                         fair_weight=fair_weight, preemption=preemption)


def on_demand_cohort(name: str, cpu: str | None = None, *, parent: str | None = None) -> dict:
    if cpu is None:
        return cohort(cohort_ref(name), parent=cohort_ref(parent))
    return cohort(cohort_ref(name), resource_group(flavor_quotas("on-demand", cpu=cpu)), parent=cohort_ref(parent))


def one(cpu: str, count: int = 1) -> list[dict]:
    """PodSets(MakePodSet("one", count).Request(cpu, ...))."""
    return [pod_set("one", count, requests={"cpu": cpu})]


def held(cq: str, flavor: str, count: int = 1, ps: str = "main", resource: str = "cpu") -> dict:
    return admission(cq, **{ps: ({resource: flavor}, count)})


# ---------------------------------------------------------------- cases


def test_only_one_workload_can_borrow_one_resources_from_the_same_flavor_in_the_same_cycle_if_cohort_quota_cannot_fit():
    """only one workload can borrow one resources from the same flavor in the same cycle if cohort
    quota cannot fit"""
    wl1 = workload("wl1", "sales", queue="lq1", priority=-1, requests={"r1": "16"})
    wl2 = workload("wl2", "sales", queue="lq2", priority=-2, requests={"r1": "16"})
    result = schedule([wl1, wl2], additional_cluster_queues=co_queues(),
                      additional_local_queues=co_local_queues(), gates=OBSERVABILITY_OFF)

    assert assignments(result) == {"sales/wl1": held("cq1", "default", resource="r1")}
    assert left(result, "Pending") == {"cq2": ["sales/wl2"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "wl2", "sales", NO_LONGER_FITS)
    assert_admitted_now(result, "wl1", "sales", "cq1")


def test_preemption_while_borrowing_waiting_for_preemption_should_not_block_a_borrowing_workload_in_another_cq():
    """preemption while borrowing, workload waiting for preemption should not block a borrowing
    workload in another CQ"""
    borrow_preemption = {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}}
    cqs = [
        cluster_queue("cq-shared", resource_group(flavor_quotas("default", cpu=("4", "0"))),
                      cohort="preemption-while-borrowing"),
        cluster_queue("cq-a", resource_group(flavor_quotas("default", cpu=("0", "3"))),
                      cohort="preemption-while-borrowing", preemption=borrow_preemption),
        cluster_queue("cq-b", resource_group(flavor_quotas("default", cpu="0")),
                      cohort="preemption-while-borrowing", preemption=borrow_preemption),
    ]
    lqs = [local_queue("lq-a", "eng-alpha", "cq-a"), local_queue("lq-b", "eng-beta", "cq-b")]
    workloads = [
        workload("a", "eng-alpha", queue="lq-a", created=1, requests={"cpu": "3"}),
        workload("b", "eng-beta", queue="lq-b", created=2, requests={"cpu": "1"}),
        reserve_quota(workload("admitted-a", "eng-alpha", queue="lq-a", requests={"cpu": "2"}),
                      "cq-a", {"main": ({"cpu": "default"}, None)}, admitted=False),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs,
                      gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/admitted-a": held("cq-a", "default"),
        "eng-beta/b": held("cq-b", "default"),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {"cq-a": ["eng-alpha/a"]}
    assert_untouched(result, "admitted-a", "eng-alpha")
    assert_waiting(result, "a", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                   "default, 2 more needed")
    assert_admitted_now(result, "b", "eng-beta", "cq-b")


def _other_queues(*names_and_quota: tuple[str, str, dict | None], flavor: str = "on-demand") -> list[dict]:
    return [cluster_queue(name, resource_group(flavor_quotas(flavor, cpu=cpu)), cohort="other", preemption=preemption)
            for name, cpu, preemption in names_and_quota]


def _other_local_queues(*namespaces: str) -> list[dict]:
    cq_of = {"eng-alpha": "other-alpha", "eng-beta": "other-beta", "eng-gamma": "other-gamma"}
    return [local_queue("other", ns, cq_of[ns]) for ns in namespaces]


def _reserved(name: str, ns: str, cq: str, cpu: str, priority: int, flavor: str = "on-demand") -> dict:
    return reserve_quota(workload(name, ns, queue="other", priority=priority, requests={"cpu": cpu}),
                         cq, {"main": ({"cpu": flavor}, None)}, admitted=False)


def test_minimal_preemptions_when_target_queue_is_exhausted():
    """minimal preemptions when target queue is exhausted"""
    cqs = _other_queues(("other-alpha", "2", ANY_LOWER), ("other-beta", "2", None), ("other-gamma", "2", None))
    lqs = _other_local_queues("eng-alpha", "eng-beta", "eng-gamma")
    workloads = [
        _reserved("a1", "eng-alpha", "other-alpha", "1", -2),
        _reserved("a2", "eng-alpha", "other-alpha", "1", -2),
        _reserved("a3", "eng-alpha", "other-alpha", "1", -1),
        _reserved("b1", "eng-beta", "other-beta", "1", 0),
        _reserved("b2", "eng-beta", "other-beta", "1", 0),
        _reserved("b3", "eng-beta", "other-beta", "1", 0),
        workload("incoming", "eng-alpha", uid="wl-incoming", job_uid="job-incoming", priority=0, queue="other",
                 requests={"cpu": "2"}),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        **{f"eng-alpha/a{i}": held("other-alpha", "on-demand") for i in (1, 2, 3)},
        **{f"eng-beta/b{i}": held("other-beta", "on-demand") for i in (1, 2, 3)},
    }
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/incoming"]}
    assert left(result, "Inadmissible") == {}
    message = preemption_message("wl-incoming", "job-incoming", "prioritization in the ClusterQueue",
                                 "/other/other-alpha", "/other/other-alpha")
    assert_preempted(result, "a1", "eng-alpha", "InClusterQueue", message)
    assert_preempted(result, "a2", "eng-alpha", "InClusterQueue", message)
    assert_untouched(result, "a3", "eng-alpha")
    for i in (1, 2, 3):
        assert_untouched(result, f"b{i}", "eng-beta")
    assert_waiting(result, "incoming", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                   "on-demand, 2 more needed. Pending the preemption of 2 workload(s)")


def test_a_workload_is_only_eligible_to_do_preemptions_if_it_fits_fully_within_nominal_quota():
    """A workload is only eligible to do preemptions if it fits fully within nominal quota"""
    cqs = _other_queues(("other-alpha", "2", ANY_LOWER), ("other-beta", "2", None))
    lqs = _other_local_queues("eng-alpha", "eng-beta")
    workloads = [
        _reserved("a1", "eng-alpha", "other-alpha", "1", -1),
        _reserved("b1", "eng-beta", "other-beta", "1", -1),
        workload("incoming", "eng-alpha", priority=1, queue="other", requests={"cpu": "3"}),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/a1": held("other-alpha", "on-demand"),
        "eng-beta/b1": held("other-beta", "on-demand"),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {"other-alpha": ["eng-alpha/incoming"]}
    assert_untouched(result, "a1", "eng-alpha")
    assert_untouched(result, "b1", "eng-beta")
    assert_waiting(result, "incoming", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                   "on-demand, 1 more needed")


def test_multiple_preemptions_without_borrowing():
    """multiple preemptions without borrowing

    While requiring the same shared FlavorResource (Default, cpu), multiple workloads are able to
    issue preemptions on workloads within their own CQs in a single scheduling cycle.

    (wantSkippedPreemptions: other-alpha 0, other-beta 0: a metric, not checked.)
    """
    cqs = _other_queues(("other-alpha", "2", WITHIN_LOWER), ("other-beta", "2", WITHIN_LOWER), flavor="default")
    lqs = _other_local_queues("eng-alpha", "eng-beta")
    workloads = [
        _reserved("a1", "eng-alpha", "other-alpha", "2", 0, flavor="default"),
        _reserved("b1", "eng-beta", "other-beta", "2", 0, flavor="default"),
        workload("preemptor", "eng-alpha", uid="wl-preemptor", job_uid="job-preemptor", priority=100,
                 queue="other", requests={"cpu": "2"}),
        workload("preemptor", "eng-beta", uid="wl-preemptor", job_uid="job-preemptor", priority=100,
                 queue="other", requests={"cpu": "2"}),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/a1": held("other-alpha", "default"),
        "eng-beta/b1": held("other-beta", "default"),
    }
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/preemptor"], "other-beta": ["eng-beta/preemptor"]}
    assert left(result, "Inadmissible") == {}
    for name, ns, cq in (("a1", "eng-alpha", "other-alpha"), ("b1", "eng-beta", "other-beta")):
        assert_preempted(result, name, ns, "InClusterQueue",
                         preemption_message("wl-preemptor", "job-preemptor", "prioritization in the ClusterQueue",
                                            f"/other/{cq}", f"/other/{cq}"))
        assert_waiting(result, "preemptor", ns,
                       "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                       "default, 2 more needed. Pending the preemption of 1 workload(s)")


def test_multiple_preemptions_preemption_possible_after_earlier_workload_fits():
    """multiple preemptions preemption possible after earlier workload fits

    When one workload is assigned Fit, and another Preempt, the Fit workload doesn't block the
    preempting workload in the same cycle.

    (wantSkippedPreemptions: other-alpha 0, other-beta 0: a metric, not checked.)
    """
    cqs = _other_queues(("other-alpha", "1", WITHIN_LOWER), ("other-beta", "2", WITHIN_LOWER), flavor="default")
    lqs = _other_local_queues("eng-alpha", "eng-beta")
    workloads = [
        _reserved("b1", "eng-beta", "other-beta", "2", 0, flavor="default"),
        workload("fit", "eng-alpha", priority=100, queue="other", requests={"cpu": "1"}),
        workload("preemptor", "eng-beta", uid="wl-preemptor", job_uid="job-preemptor", priority=99,
                 queue="other", requests={"cpu": "2"}),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=lqs, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/fit": held("other-alpha", "default"),
        "eng-beta/b1": held("other-beta", "default"),
    }
    assert left(result, "Pending") == {"other-beta": ["eng-beta/preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_preempted(result, "b1", "eng-beta", "InClusterQueue",
                     preemption_message("wl-preemptor", "job-preemptor", "prioritization in the ClusterQueue",
                                        "/other/other-beta", "/other/other-beta"))
    assert_waiting(result, "preemptor", "eng-beta",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                   "default, 1 more needed. Pending the preemption of 1 workload(s)")
    assert_admitted_now(result, "fit", "eng-alpha", "other-alpha")
