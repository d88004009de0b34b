"""Kueue's TestPreemption (pkg/scheduler/preemption, API v1beta2), part B: the cases from
"use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue
while borrowing" to "long range preemption", and the one case of
TestPreemptionWhenWorkloadModifiedConcurrently.

The Go runner calls the preemptor directly (GetTargets, then IssuePreemptions) for an incoming
workload with a fixed flavor assignment (every resource on the flavor "default", mode Preempt) and
compares the number of preemptions issued and every workload with its Evicted and Preempted
conditions. Here each case is one scheduling cycle: the case's ResourceFlavors ("default",
"alpha", "beta"), ClusterQueues and Cohorts, a Namespace "default" with one LocalQueue `lq-<cq>`
per ClusterQueue, the `admitted` workloads holding quota and admitted, and the incoming workload
pending in the LocalQueue of `targetCQ`. Every ClusterQueue of these cases has the single flavor
"default" for the resources the incoming workload asks for, so the engine can only choose the
flavor the Go assignment gives. The test checks the set of preempted workloads (Evicted=True with
reason Preempted, Preempted=True with the Go reason, both with the Go message), that every other
admitted workload is untouched and still holds its quota, and that the incoming workload is not
admitted in that cycle (when it has targets, it waits for them: "... Pending the preemption of N
workload(s)").

Adjustments to the Go test:
- The Go workloads have namespace "": they are in the namespace "default" here.
- Names the API server refuses are hyphenated: the ClusterQueues "a_standard", "b_standard",
  "a_best_effort", "b_best_effort", the Cohort "with_shared_cq" and the workloads named with an
  underscore ("a_best_effort_low" -> "a-best-effort-low", ...), and the ClusterQueue
  "preventStarvation" (unused in this part) is lowercased; preemption messages name the paths
  with the hyphenated names. No ordering the cases rely on changes with it.
- Go's ClusterQueues are not defaulted (unit tests skip the webhook): a preemption policy left
  empty is written "Never" here; no case in this part relies on an empty policy of the preemptor's
  ClusterQueue.
- The admitted workloads' quota reservations are all at the same time, as in Go (ReserveQuotaAt(now)).
- The Go runner runs every case twice (WorkloadRequestUseMergePatch false/true), which makes no
  difference to which workloads are preempted: each case runs once here. The snapshot comparison
  (the working snapshot restored after GetTargets) has no equivalent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.features import DEFAULT_GATES
from scheduler.results import PassResult

from .factories import result_of, run
from .kueue_schedule import (
    cluster_queue,
    cohort,
    flavor,
    flavor_quotas,
    holds_admission,
    local_queue,
    namespace,
    reserve_quota,
    resource_group,
    workload,
)

NS = "default"
FLAVORS = ("default", "alpha", "beta")
LOWER = "LowerPriority"
ANY = "Any"
NEVER = "Never"
IN_CQ = "InClusterQueue"
RECLAMATION = "InCohortReclamation"
RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
HUMAN_READABLE = {
    IN_CQ: "prioritization in the ClusterQueue",
    RECLAMATION: "reclamation within the cohort",
    RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


# ---------------------------------------------------------------- the Go test's cluster


def preemption(within: str, reclaim: str = NEVER, *, borrow_threshold: int | None = None) -> dict:
    """ClusterQueuePreemption; `borrow_threshold` is BorrowWithinCohort{LowerPriority,
    MaxPriorityThreshold}."""
    out: dict[str, Any] = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}
    if borrow_threshold is not None:
        out["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": borrow_threshold}
    return out


def default_cluster_queues() -> list[dict]:
    """The Go test's defaultClusterQueues (empty policies written Never, see the docstring)."""
    return [
        cluster_queue("standalone",
                      resource_group(flavor_quotas("default", cpu="6")),
                      resource_group(flavor_quotas("alpha", memory="3Gi"), flavor_quotas("beta", memory="3Gi")),
                      preemption=preemption(LOWER)),
        cluster_queue("c1", resource_group(flavor_quotas("default", cpu=("6", "6"), memory=("3Gi", "3Gi"))),
                      cohort="cohort", preemption=preemption(LOWER, LOWER)),
        cluster_queue("c2", resource_group(flavor_quotas("default", cpu=("6", "6"), memory=("3Gi", "3Gi"))),
                      cohort="cohort", preemption=preemption(NEVER, ANY)),
        cluster_queue("d1", resource_group(flavor_quotas("default", cpu="6", memory="3Gi")),
                      cohort="cohort-no-limits", preemption=preemption(LOWER, LOWER)),
        cluster_queue("d2", resource_group(flavor_quotas("default", cpu="6", memory="3Gi")),
                      cohort="cohort-no-limits", preemption=preemption(NEVER, ANY)),
        cluster_queue("l1", resource_group(flavor_quotas("default", cpu=("6", "12"), memory=("3Gi", "6Gi"))),
                      cohort="legion", preemption=preemption(LOWER, LOWER)),
        cluster_queue("preventstarvation", resource_group(flavor_quotas("default", cpu="6")),
                      preemption=preemption("LowerOrNewerEqualPriority")),
        cluster_queue("a-standard", resource_group(flavor_quotas("default", cpu=("1", "12"))),
                      cohort="with-shared-cq", preemption=preemption(NEVER, LOWER, borrow_threshold=0)),
        cluster_queue("b-standard", resource_group(flavor_quotas("default", cpu=("1", "12"))),
                      cohort="with-shared-cq", preemption=preemption(LOWER, ANY, borrow_threshold=0)),
        cluster_queue("a-best-effort", resource_group(flavor_quotas("default", cpu=("1", "12"))),
                      cohort="with-shared-cq", preemption=preemption(NEVER, LOWER, borrow_threshold=0)),
        cluster_queue("b-best-effort", resource_group(flavor_quotas("default", cpu=("0", "13"))),
                      cohort="with-shared-cq", preemption=preemption(NEVER, LOWER, borrow_threshold=0)),
        cluster_queue("shared", resource_group(flavor_quotas("default", cpu="10")),
                      cohort="with-shared-cq", preemption=preemption(NEVER)),
        cluster_queue("lend1", resource_group(flavor_quotas("default", cpu=("6", "", "4"))),
                      cohort="cohort-lend", preemption=preemption(LOWER, LOWER)),
        cluster_queue("lend2", resource_group(flavor_quotas("default", cpu=("6", "", "2"))),
                      cohort="cohort-lend", preemption=preemption(LOWER, LOWER)),
        cluster_queue("a", resource_group(flavor_quotas("default", cpu="2", memory="2")),
                      cohort="cohort-three", preemption=preemption(LOWER, ANY)),
        cluster_queue("b", resource_group(flavor_quotas("default", cpu="2", memory="2")),
                      cohort="cohort-three", preemption=preemption(NEVER)),
        cluster_queue("c", resource_group(flavor_quotas("default", cpu="2", memory="2")),
                      cohort="cohort-three", preemption=preemption(NEVER)),
    ]


def held(name: str, cq: str, *, priority: int | None = None, **requests: str) -> dict:
    """MakeWorkload(name, "").Priority(p).Request(...).ReserveQuotaAt(MakeAdmission(cq) with every
    resource on "default", now), admitted."""
    wl = workload(name, NS, priority=priority, requests=requests)
    return reserve_quota(wl, cq, {"main": ({r: "default" for r in requests}, None)}, admitted=True)


def incoming(*, priority: int | None = None, **requests: str) -> dict:
    """baseIncomingWl: MakeWorkload("in", "").UID("wl-in").Label(JobUIDLabel, "job-in")."""
    return workload("in", NS, uid="wl-in", job_uid="job-in", priority=priority, requests=requests)


def preemption_cycle(cluster_queues: Sequence[dict], admitted: Sequence[dict], incoming_wl: dict, target_cq: str,
                     *, cohorts: Sequence[dict] = (), gates: Mapping[str, bool] | None = None) -> PassResult:
    """One scheduling cycle with `incoming_wl` pending in the LocalQueue of `target_cq`."""
    pending = {**incoming_wl, "spec": {**incoming_wl["spec"], "queueName": f"lq-{target_cq}"}}
    objects = [
        namespace(NS),
        *(flavor(name) for name in FLAVORS),
        *cluster_queues,
        *cohorts,
        *(local_queue(f"lq-{cq['metadata']['name']}", NS, cq["metadata"]["name"]) for cq in cluster_queues),
        *admitted,
        pending,
    ]
    return run(objects, cycles=1, feature_gates=DEFAULT_GATES.with_overrides(**(gates or {})))


# ---------------------------------------------------------------- what the Go test compares


def message(reason: str, preemptor_path: str, preemptee_path: str) -> str:
    return (f"Preempted to accommodate a workload (UID: wl-in, JobUID: job-in) due to {HUMAN_READABLE[reason]}; "
            f"preemptor path: {preemptor_path}; preemptee path: {preemptee_path}")


def preempted(result: PassResult) -> dict[str, tuple[tuple[str, str, str] | None, tuple[str, str, str] | None]]:
    """Workload name -> (its Evicted condition, its Preempted condition), for every workload the
    cycle evicted or marked preempted."""
    out = {}
    for w in result.workloads:
        conds = {c.type: (c.status, c.reason, c.message) for c in w.conditions}
        ev, pr = conds.get("Evicted"), conds.get("Preempted")
        if (ev is not None and ev[0] == "True") or (pr is not None and pr[0] == "True"):
            out[w.workload.name] = (ev, pr)
    return out


def check(result: PassResult, admitted: Sequence[dict], want: Mapping[str, tuple[str, str]]) -> None:
    """`want`: preempted workload -> (Preempted reason, message). The others keep their quota
    untouched; the incoming workload is not admitted and, with targets, waits for them."""
    got = preempted(result)
    expected = {name: (("True", "Preempted", msg), ("True", reason, msg)) for name, (reason, msg) in want.items()}
    assert got == expected
    for wl in admitted:
        name = wl["metadata"]["name"]
        w = result_of(result, name, NS)
        assert holds_admission(w), name  # a preempted workload keeps its quota until its pods are gone
        assert w.cluster_queue == wl["status"]["admission"]["clusterQueue"], name
    incoming_result = result_of(result, "in", NS)
    assert not holds_admission(incoming_result)
    if want:
        reserved = next(c for c in incoming_result.conditions if c.type == "QuotaReserved")
        assert reserved.status == "False"
        assert reserved.message.endswith(f". Pending the preemption of {len(want)} workload(s)")


# ---------------------------------------------------------------- TestPreemption


def test_use_borrow_within_cohort_allow_preempting_a_lower_priority_workload_from_another_cq_while_borrowing():
    """use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue
    while borrowing"""
    admitted = [
        held("a-best-effort-low", "a-best-effort", priority=-1, cpu="10"),
        held("b-best-effort-low", "b-best-effort", priority=-1, cpu="1"),
    ]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(cpu="10"), "a-standard")
    check(result, admitted, {
        "a-best-effort-low": (RECLAIM_WHILE_BORROWING, message(
            RECLAIM_WHILE_BORROWING, "/with-shared-cq/a-standard", "/with-shared-cq/a-best-effort")),
    })


def test_use_borrow_within_cohort_dont_allow_preempting_above_max_priority_threshold_if_borrowing_is_required():
    """use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above
    MaxPriorityThreshold, if borrowing is required even after the preemption"""
    admitted = [held("b-standard", "b-standard", priority=1, cpu="10")]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=2, cpu="10"), "a-standard")
    check(result, admitted, {})


def test_use_borrow_within_cohort_allow_preempting_above_max_priority_threshold_if_borrowing_is_not_required():
    """use BorrowWithinCohort; allow preempting a lower-priority workload with priority above
    MaxPriorityThreshold, if borrowing is not required after the preemption"""
    admitted = [
        # this admitted workload consumes all resources so it needs to be preempted to run a new workload
        held("b-standard", "b-standard", priority=1, cpu="13"),
    ]
    # this is a small workload which can be admitted without borrowing, if the b_standard workload is preempted
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=2, cpu="1"), "a-standard")
    check(result, admitted, {
        "b-standard": (RECLAMATION, message(RECLAMATION, "/with-shared-cq/a-standard", "/with-shared-cq/b-standard")),
    })


def test_use_borrow_within_cohort_dont_allow_for_preemption_of_lower_priority_workload_from_the_same_cluster_queue():
    """use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same
    ClusterQueue"""
    admitted = [held("a-standard", "a-standard", priority=1, cpu="13")]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=2, cpu="1"), "a-standard")
    check(result, admitted, {})


def test_use_borrow_within_cohort_only_preempt_from_cq_if_no_workloads_below_threshold_and_already_above_nominal():
    """use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already
    above nominal"""
    admitted = [
        held("a-standard-1", "a-standard", priority=1, cpu="10"),
        held("a-standard-2", "a-standard", priority=1, cpu="1"),
        held("b-standard-1", "b-standard", priority=1, cpu="1"),
        held("b-standard-2", "b-standard", priority=2, cpu="1"),
    ]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=3, cpu="1"), "b-standard")
    check(result, admitted, {
        "b-standard-1": (IN_CQ, message(IN_CQ, "/with-shared-cq/b-standard", "/with-shared-cq/b-standard")),
    })


def test_use_borrow_within_cohort_preempt_from_cq_and_from_other_cqs_with_workloads_below_threshold():
    """use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold"""
    admitted = [
        held("b-standard-high", "b-standard", priority=2, cpu="10"),
        held("b-standard-mid", "b-standard", priority=1, cpu="1"),
        held("a-best-effort-low", "a-best-effort", priority=-1, cpu="1"),
        held("a-best-effort-lower", "a-best-effort", priority=-2, cpu="1"),
    ]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=2, cpu="2"), "b-standard")
    check(result, admitted, {
        "a-best-effort-lower": (RECLAIM_WHILE_BORROWING, message(
            RECLAIM_WHILE_BORROWING, "/with-shared-cq/b-standard", "/with-shared-cq/a-best-effort")),
        "b-standard-mid": (IN_CQ, message(IN_CQ, "/with-shared-cq/b-standard", "/with-shared-cq/b-standard")),
    })


def test_reclaim_quota_from_lender():
    """reclaim quota from lender"""
    admitted = [
        held("lend1-low", "lend1", priority=-1, cpu="3"),
        held("lend2-mid", "lend2", cpu="3"),
        held("lend2-high", "lend2", priority=1, cpu="4"),
    ]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=1, cpu="3"), "lend1")
    check(result, admitted, {
        "lend2-mid": (RECLAMATION, message(RECLAMATION, "/cohort-lend/lend1", "/cohort-lend/lend2")),
    })


def test_preempt_from_all_cluster_queues_in_cohort_lend():
    """preempt from all ClusterQueues in cohort-lend"""
    admitted = [
        held("lend1-low", "lend1", priority=-1, cpu="3"),
        held("lend1-mid", "lend1", cpu="2"),
        held("lend2-low", "lend2", priority=-1, cpu="3"),
        held("lend2-mid", "lend2", cpu="4"),
    ]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(cpu="4"), "lend1")
    check(result, admitted, {
        "lend1-low": (IN_CQ, message(IN_CQ, "/cohort-lend/lend1", "/cohort-lend/lend1")),
        "lend2-low": (RECLAMATION, message(RECLAMATION, "/cohort-lend/lend1", "/cohort-lend/lend2")),
    })


def test_cannot_preempt_from_other_cluster_queues_if_exceeds_requestable_quota_including_lending_limit():
    """cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit"""
    admitted = [held("lend2-low", "lend2", priority=-1, cpu="10")]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(cpu="9"), "lend1")
    check(result, admitted, {})


def cohort_three_admitted(*, memory: bool, b5: bool = False) -> list[dict]:
    """The workloads of the cohort-three cases: a1, a2 (priority -2) and a3 (-1) in "a"; b1, b2,
    b3 (0) in "b"; each 1 cpu (and 1 memory with `memory`)."""
    req = {"cpu": "1", "memory": "1"} if memory else {"cpu": "1"}
    return [
        held("a1", "a", priority=-2, **req),
        held("a2", "a", priority=-2, **req),
        held("a3", "a", priority=-1, **req),
        held("b1", "b", priority=0, **req),
        held("b2", "b", priority=0, **req),
        held("b3", "b", priority=0, **req),
    ]


# preempted in "a" for the incoming workload of "a"
A_IN_A = (IN_CQ, message(IN_CQ, "/cohort-three/a", "/cohort-three/a"))


def test_preemptions_from_cq_when_target_queue_is_exhausted_for_the_single_requested_resource():
    """preemptions from cq when target queue is exhausted for the single requested resource"""
    admitted = cohort_three_admitted(memory=False)
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=0, cpu="2"), "a")
    check(result, admitted, {"a1": A_IN_A, "a2": A_IN_A})


def test_preemptions_from_cq_when_target_queue_is_exhausted_for_two_requested_resources():
    """preemptions from cq when target queue is exhausted for two requested resources"""
    admitted = cohort_three_admitted(memory=True)
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=0, cpu="2", memory="2"), "a")
    check(result, admitted, {"a1": A_IN_A, "a2": A_IN_A})


def test_preemptions_from_cq_when_target_queue_is_exhausted_for_one_requested_resource_but_not_the_other():
    """preemptions from cq when target queue is exhausted for one requested resource, but not the
    other

    Go's assignment gives both cpu and memory in mode Preempt; memory fits in "a" (nothing uses it),
    so the engine's own assignment needs preemption for cpu only."""
    admitted = cohort_three_admitted(memory=False)
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(priority=0, cpu="2", memory="2"), "a")
    check(result, admitted, {"a1": A_IN_A, "a2": A_IN_A})


def test_allow_preemption_from_other_cluster_queues_if_target_cq_is_not_exhausted_for_the_requested_resource():
    """allow preemption from other cluster queues if target cq is not exhausted for the requested
    resource"""
    admitted = [
        held("a1", "a", priority=-1, cpu="1"),
        held("b1", "b", priority=0, cpu="1"),
        held("b2", "b", priority=0, cpu="1"),
        held("b3", "b", priority=0, cpu="1"),
        held("b4", "b", priority=0, cpu="1"),
        held("b5", "b", priority=-1, cpu="1"),
    ]
    result = preemption_cycle(default_cluster_queues(), admitted, incoming(cpu="2"), "a")
    check(result, admitted, {
        "a1": A_IN_A,
        "b5": (RECLAMATION, message(RECLAMATION, "/cohort-three/a", "/cohort-three/b")),
    })


def test_long_range_preemption():
    """long range preemption"""
    cqs = [
        # WithinClusterQueue left empty in Go (no workload of cq-left is admitted)
        cluster_queue("cq-left", resource_group(flavor_quotas("default", cpu="10")),
                      cohort="cohort-left", preemption=preemption(NEVER, ANY)),
        cluster_queue("cq-right", resource_group(flavor_quotas("default", cpu="0")),
                      cohort="cohort-right", preemption=preemption(NEVER)),
    ]
    cohorts = [cohort("cohort-left", parent="root"), cohort("cohort-right", parent="root")]
    admitted = [held("to-be-preempted", "cq-right", cpu="5")]
    result = preemption_cycle(cqs, admitted, incoming(cpu="8"), "cq-left", cohorts=cohorts)
    check(result, admitted, {
        "to-be-preempted": (RECLAMATION, message(
            RECLAMATION, "/root/cohort-left/cq-left", "/root/cohort-right/cq-right")),
    })


# ---------------------------------------------------------------- TestPreemptionWhenWorkloadModifiedConcurrently


def test_preemption_when_workload_modified_concurrently_preempt_lowest_priority():
    """TestPreemptionWhenWorkloadModifiedConcurrently: preempt lowest priority

    The Go runner's client updates every workload (a label) before the first status patch, as
    another controller would, and the preemption still goes through (the ResourceVersions it
    compares have no engine equivalent): what is checked here is the preemption itself. The
    ClusterQueue "standalone" (cpu 6 on "default", an empty second resource group, which is left
    out, withinClusterQueue LowerPriority)."""
    cqs = [cluster_queue("standalone", resource_group(flavor_quotas("default", cpu="6")),
                         preemption=preemption(LOWER))]
    admitted = [
        held("low", "standalone", priority=-1, cpu="2"),
        held("mid", "standalone", cpu="2"),
        held("high", "standalone", priority=1, cpu="2"),
    ]
    result = preemption_cycle(cqs, admitted, incoming(priority=1, cpu="2"), "standalone")
    check(result, admitted, {"low": (IN_CQ, message(IN_CQ, "/standalone", "/standalone"))})
