"""Kueue's TestHierarchicalPreemptions (pkg/scheduler/preemption/preemption_hierarchical_test.go,
API v1beta2): preemption in Cohort hierarchies (Cohorts with a parent, resource groups on Cohorts,
borrowing and lending limits at each level).

The Go runner calls the preemptor directly: GetTargets for the incoming workload with the case's
explicit flavor `assignment` (always the one flavor `default`), then IssuePreemptions, and
compares the number of preemptions (`wantPreempted`) and every workload afterwards
(`wantWorkloads`: the Evicted/Preempted conditions of the targets, the others unchanged). Here
each case is one scheduling cycle of the engine: the case's Cohorts and ClusterQueues, the
ResourceFlavor `default`, a Namespace and one LocalQueue per ClusterQueue (named as it), the
admitted workloads holding quota and Admitted, and the incoming workload pending in the
LocalQueue of `targetCQ`. The check is the set of workloads the cycle preempted, with the reason
of their Preempted condition and the message of both conditions (as the Go case states them),
and that the incoming workload is left waiting for them ("Pending the preemption of N
workload(s)"); when the case expects no preemption, that nobody is preempted and the incoming
workload is not admitted.

Transcription choices:
- Workloads with namespace "" in Go are in the namespace "default" here (the engine requires one).
- Names the API server refuses (underscores) are hyphenated: `q_borrowing` is `q-borrowing`,
  `admitted_borrowing` is `admitted-borrowing`, also in the expected messages' paths. No ordering
  the cases depend on changes with it.
- The incoming workload has Go's UID `wl-in` and job UID label `job-in`; the others have their
  name as UID (Go gives them none; their UIDs appear in no expected message).
- Go's `MakeFlavorQuotas("default").Obj()` (a flavor with no resources) and the ClusterQueues
  without a resource group (q1..q5 of "reclaim in complex hierarchy", whose diagram gives them
  quota 0) are written as a quota of 0 for each resource the case uses, so the ClusterQueue
  covers them (the engine, as Kueue's flavor assigner, admits nothing on resources a
  ClusterQueue does not cover; Kueue's preemption reads a missing quota as 0).
- Go's `Assignment(resource, flavor, quantity)` sets the admission's resourceUsage: it is kept
  (in "preempt in cohort and own CQ", admitted_preemptible requests 1 cpu but its admission
  charges 2).
- The Go runner runs every case with WorkloadRequestUseMergePatch false and true: so does each
  test, expecting the same in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.features import DEFAULT_GATES
from scheduler.results import PassResult

from .factories import V1BETA2, result_of, run, timestamp
from .kueue_schedule import JOB_UID_LABEL, flavor, flavor_quotas, local_queue, namespace, resource_group

NS = "default"
FLAVOR = "default"
LOWER = "LowerPriority"
ANY = "Any"
NEVER = "Never"
IN_CQ = ("InClusterQueue", "prioritization in the ClusterQueue")
RECLAIM = ("InCohortReclamation", "reclamation within the cohort")
RECLAIM_WHILE_BORROWING = ("InCohortReclaimWhileBorrowing", "reclamation within the cohort while borrowing")


# ---------------------------------------------------------------- builders


def preemption(*, within: str = LOWER, reclaim: str = ANY, borrow: bool = False,
               threshold: int | None = None) -> dict:
    """kueue.ClusterQueuePreemption{WithinClusterQueue, ReclaimWithinCohort, BorrowWithinCohort:
    {Policy: LowerPriority, MaxPriorityThreshold} when `borrow`}."""
    out: dict[str, Any] = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}
    if borrow:
        bwc: dict[str, Any] = {"policy": LOWER}
        if threshold is not None:
            bwc["maxPriorityThreshold"] = threshold
        out["borrowWithinCohort"] = bwc
    return out


def quotas(**resources: str | tuple[str, ...]) -> dict:
    """A resource group of the flavor `default`: resource -> nominal or (nominal, borrowingLimit[,
    lendingLimit]), "" leaving a limit unset."""
    return resource_group(flavor_quotas(FLAVOR, **resources))


def cq(name: str, co: str, pre: dict, **resources: str | tuple[str, ...]) -> dict:
    """MakeClusterQueue(name).Cohort(co).ResourceGroup(MakeFlavorQuotas("default")...).Preemption(pre)."""
    spec = {"namespaceSelector": {}, "cohortName": co, "resourceGroups": [quotas(**resources)],
            "preemption": pre}
    return {"apiVersion": V1BETA2, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, parent: str | None = None, **resources: str) -> dict:
    """MakeCohort(name).Parent(parent).ResourceGroup(MakeFlavorQuotas("default")...) (none when no
    resources are given)."""
    spec: dict[str, Any] = {}
    if parent is not None:
        spec["parentName"] = parent
    if resources:
        spec["resourceGroups"] = [quotas(**resources)]
    return {"apiVersion": V1BETA2, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _workload(name: str, uid: str, priority: int, requests: Mapping[str, str]) -> dict:
    container = {"name": "c", "resources": {"requests": dict(requests)}}
    pod_set = {"name": "main", "count": 1,
               "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}
    return {"apiVersion": V1BETA2, "kind": "Workload",
            "metadata": {"name": name, "namespace": NS, "uid": uid},
            "spec": {"podSets": [pod_set], "priority": priority}}


def admitted(name: str, priority: int, in_cq: str, requests: Mapping[str, str],
             usage: Mapping[str, str] | None = None, extra_conditions: tuple[dict, ...] = ()) -> dict:
    """MakeWorkload(name, "").Priority(priority).Request(...).ReserveQuotaAt(MakeAdmission(in_cq)
    .PodSets(MakePodSetAssignment("main").Assignment(resource, "default", usage)...), now),
    Admitted as well. `usage` is the admission's resourceUsage (the requests unless given)."""
    wl = _workload(name, name, priority, requests)
    usage = dict(usage if usage is not None else requests)
    conditions = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": f"Quota reserved in ClusterQueue {in_cq}", "lastTransitionTime": timestamp(0)},
        {"type": "Admitted", "status": "True", "reason": "Admitted",
         "message": "The workload is admitted", "lastTransitionTime": timestamp(0)},
        *extra_conditions,
    ]
    wl["status"] = {
        "admission": {"clusterQueue": in_cq, "podSetAssignments": [
            {"name": "main", "flavors": dict.fromkeys(usage, FLAVOR), "resourceUsage": usage, "count": 1}]},
        "conditions": conditions,
    }
    return wl


def incoming(target_cq: str, priority: int, **requests: str) -> dict:
    """baseIncomingWl (MakeWorkload("in", "").UID("wl-in").Label(JobUIDLabel, "job-in")) with its
    priority and requests, pending in the LocalQueue of `target_cq`."""
    wl = _workload("in", "wl-in", priority, requests)
    wl["metadata"]["labels"] = {JOB_UID_LABEL: "job-in"}
    wl["spec"]["queueName"] = target_cq
    return wl


# ---------------------------------------------------------------- one cycle and what it gives


def cycle(cohorts: list[dict], cluster_queues: list[dict], workloads: list[dict]) -> list[PassResult]:
    """One scheduling cycle, with WorkloadRequestUseMergePatch off and on (as the Go runner)."""
    objects = [
        namespace(NS),
        flavor(FLAVOR),
        *cohorts,
        *cluster_queues,
        *(local_queue(c["metadata"]["name"], NS, c["metadata"]["name"]) for c in cluster_queues),
        *workloads,
    ]
    return [run(objects, cycles=1, feature_gates=DEFAULT_GATES.with_overrides(WorkloadRequestUseMergePatch=merge))
            for merge in (False, True)]


def message(why: str, preemptor: str, preemptee: str) -> str:
    return (f"Preempted to accommodate a workload (UID: wl-in, JobUID: job-in) due to {why}; "
            f"preemptor path: {preemptor}; preemptee path: {preemptee}")


def target(kind: tuple[str, str], preemptor: str, preemptee: str) -> tuple[str, str]:
    """(Preempted reason, message) of a preemption target."""
    reason, why = kind
    return reason, message(why, preemptor, preemptee)


def preempted(result: PassResult) -> dict[str, tuple[str, str]]:
    """Every workload the cycle preempted: name -> (its Preempted reason, message), after checking
    its Evicted condition (True, Preempted) carries the same message."""
    out: dict[str, tuple[str, str]] = {}
    for w in result.workloads:
        conds = {c.type: c for c in w.conditions}
        ev = conds.get("Evicted")
        if ev is None or ev.status != "True" or ev.reason != "Preempted":
            continue
        pre = conds.get("Preempted")
        assert pre is not None and pre.status == "True", f"{w.key}: Evicted by preemption without Preempted=True"
        assert ev.message == pre.message, f"{w.key}: Evicted and Preempted messages differ"
        out[w.workload.name] = (pre.reason, pre.message)
    return out


def check(results: list[PassResult], want: dict[str, tuple[str, str]], want_count: int | None = None) -> None:
    """The cycle preempted exactly `want` (name -> (reason, message)) and left the incoming
    workload waiting for its `want_count` targets (len(want) unless given); with no targets,
    nobody preempted and the incoming workload not admitted."""
    count = len(want) if want_count is None else want_count
    for result in results:
        assert preempted(result) == want
        got = result_of(result, "in", NS)
        assert got.status not in ("Admitted", "QuotaReserved"), f"incoming admitted: {got.status}"
        if count:
            assert got.message.endswith(f"Pending the preemption of {count} workload(s)"), got.message


def zero(*resources: str) -> dict[str, str]:
    """Go's MakeFlavorQuotas("default").Obj(): a quota of 0 for each resource (see the docstring)."""
    return dict.fromkeys(resources, "0")


CPU = {"cpu": "0"}


# ---------------------------------------------------------------- the cases


def test_preempt_with_hierarchical_advantage() -> None:
    """Go: "preempt with hierarchical advantage".

                R
          /      |
       C(2) q_borrowing(0)
      /
     q
    """
    p = preemption()
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2")],
        [cq("q", "c", p, **CPU), cq("q-borrowing", "r", p, **CPU)],
        [admitted("admitted2", 0, "q-borrowing", {"cpu": "2"}), incoming("q", 0, cpu="2")],
    )
    check(results, {"admitted2": target(RECLAIM, "/r/c/q", "/r/q-borrowing")})


def test_avoid_queues_within_nominal_quota() -> None:
    """Go: "avoid queues within nominal quota".

                 R
          /      |         \\
       C(2) q_borrowing(0)  q_nominal(2)
      /
     q
    """
    p = preemption()
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2")],
        [cq("q-nominal", "r", p, cpu="2"), cq("q", "c", p, **CPU), cq("q-borrowing", "r", p, **CPU)],
        [admitted("admitted1", -10, "q-nominal", {"cpu": "2"}),
         admitted("admitted2", 0, "q-borrowing", {"cpu": "2"}),
         incoming("q", 0, cpu="2")],
    )
    check(results, {"admitted2": target(RECLAIM, "/r/c/q", "/r/q-borrowing")})


def test_preempt_multiple_with_hierarchical_advantage() -> None:
    """Go: "preempt multiple with hierarchical advantage".

                R(0)
          /      |
       C(2) q_borrowing(0)
      /
     q(0)
    """
    p = preemption()
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2")],
        [cq("q", "c", p, **CPU), cq("q-borrowing", "r", p, **CPU)],
        [admitted("admitted1", 1, "q-borrowing", {"cpu": "1"}),
         admitted("admitted2", 2, "q-borrowing", {"cpu": "1"}),
         incoming("q", 0, cpu="2")],
    )
    check(results, {"admitted1": target(RECLAIM, "/r/c/q", "/r/q-borrowing"),
                    "admitted2": target(RECLAIM, "/r/c/q", "/r/q-borrowing")})


def test_preempt_in_cohort_and_own_cq() -> None:
    """Go: "preempt in cohort and own CQ" (admitted_preemptible requests 1 cpu, its admission
    charges 2, as in Go).

            R(0)
          /
       C(3)
      /   \\
     q(0) q_same_cohort(0)
    """
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="3")],
        [cq("q", "c", preemption(borrow=True, threshold=0), **CPU),
         cq("q-same-cohort", "c", preemption(), **CPU)],
        [admitted("admitted-not-preemptible", 1, "q-same-cohort", {"cpu": "1"}),
         admitted("admitted-preemptible", 0, "q-same-cohort", {"cpu": "1"}, usage={"cpu": "2"}),
         admitted("admitted-own-queue", -1, "q", {"cpu": "1"}),
         incoming("q", 1, cpu="2")],
    )
    check(results, {
        "admitted-own-queue": target(IN_CQ, "/r/c/q", "/r/c/q"),
        "admitted-preemptible": target(RECLAIM_WHILE_BORROWING, "/r/c/q", "/r/c/q-same-cohort"),
    })


def test_prefer_to_preempt_hierarchical_candidate() -> None:
    """Go: "prefer to preempt hierarchical candidate".

                R(0)
          /      |
       C(2) q_borrowing(0)
      /
     q(0)
    """
    p = preemption()
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2")],
        [cq("q", "c", p, **CPU), cq("q-borrowing", "r", p, **CPU)],
        [admitted("admitted-borrowing", 1, "q-borrowing", {"cpu": "1"}),
         admitted("admitted-same-queue", -2, "q", {"cpu": "1"}),
         incoming("q", 0, cpu="1")],
    )
    check(results, {"admitted-borrowing": target(RECLAIM, "/r/c/q", "/r/q-borrowing")})


def test_forced_to_preempt_priority_candidate() -> None:
    """Go: "forced to preempt priority candidate".

               R(0)
          /      |
       C(2)   q_nominal(2)
      /   \\
     q(0) q_same_cohort(0)
    """
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2")],
        [cq("q", "c", preemption(borrow=True, threshold=0), **CPU),
         cq("q-nominal", "r", preemption(), cpu="2"),
         cq("q-same-cohort", "c", preemption(), **CPU)],
        [admitted("admitted-nominal", -10, "q-nominal", {"cpu": "2"}),
         admitted("admitted-same-cohort", -1, "q-same-cohort", {"cpu": "2"}),
         incoming("q", 0, cpu="2")],
    )
    check(results, {"admitted-same-cohort": target(RECLAIM_WHILE_BORROWING, "/r/c/q", "/r/c/q-same-cohort")})


def test_incoming_workload_fits_in_cq_nominal_quota() -> None:
    """Go: "incoming workload fits in CQ nominal quota".

               R(0)
          /      |
       C(2)   q_borrowing(0)
      /    \\
     q(4)  q_same_cohort(0)
    """
    p = preemption()
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2")],
        [cq("q", "c", p, cpu="4"), cq("q-borrowing", "r", p, **CPU), cq("q-same-cohort", "c", p, **CPU)],
        [admitted("admitted-borrowing", 10, "q-borrowing", {"cpu": "3"}),
         admitted("admitted-same-cohort", 10, "q-same-cohort", {"cpu": "3"}),
         incoming("q", 0, cpu="4")],
    )
    check(results, {
        "admitted-borrowing": target(RECLAIM, "/r/c/q", "/r/q-borrowing"),
        "admitted-same-cohort": target(RECLAIM, "/r/c/q", "/r/c/q-same-cohort"),
    })


def test_preempt_hierarchical_and_priority_candidates() -> None:
    """Go: "preempt hierarchical and priority candidates".

               R(1)
          /      |
       C(4)   q_borrowing(0)
      /    \\
     q(0)  q_same_cohort(0)
    """
    results = cycle(
        [cohort("r", cpu="1"), cohort("c", "r", cpu="4")],
        [cq("q", "c", preemption(reclaim=LOWER, borrow=True, threshold=0), **CPU),
         cq("q-borrowing", "r", preemption(), **CPU),
         cq("q-same-cohort", "c", preemption(), **CPU)],
        [admitted("admitted-borrowing", -1, "q-borrowing", {"cpu": "2"}),
         admitted("admitted-same-cohort-preemptible", -1, "q-same-cohort", {"cpu": "1"}),
         admitted("admitted-borrowing-not-preemptible", 1, "q-borrowing", {"cpu": "2"}),
         incoming("q", 0, cpu="3")],
    )
    check(results, {
        "admitted-borrowing": target(RECLAIM, "/r/c/q", "/r/q-borrowing"),
        "admitted-same-cohort-preemptible": target(RECLAIM_WHILE_BORROWING, "/r/c/q", "/r/c/q-same-cohort"),
    })


def test_preempt_hierarchical_candidates_and_inside_cq() -> None:
    """Go: "preempt hierarchical candidates and inside CQ".

               R(1)
          /      |
       C(4)   q_borrowing(0)
      /    \\
     q(0)  q_same_cohort(0)
    """
    results = cycle(
        [cohort("r", cpu="1"), cohort("c", "r", cpu="4")],
        [cq("q", "c", preemption(reclaim=LOWER, borrow=True, threshold=0), **CPU),
         cq("q-borrowing", "r", preemption(), **CPU),
         cq("q-same-cohort", "c", preemption(), **CPU)],
        [admitted("admitted-borrowing", -1, "q-borrowing", {"cpu": "2"}),
         admitted("admitted-same-queue-preemptible", -1, "q", {"cpu": "1"}),
         admitted("admitted-borrowing-not-preemptible", 1, "q-borrowing", {"cpu": "2"}),
         incoming("q", 0, cpu="3")],
    )
    check(results, {
        "admitted-borrowing": target(RECLAIM, "/r/c/q", "/r/q-borrowing"),
        "admitted-same-queue-preemptible": target(IN_CQ, "/r/c/q", "/r/c/q"),
    })


def test_reclaim_nominal_quota_from_lowest_priority_workload_excluding_non_borrowing() -> None:
    """Go: "reclaim nominal quota from lowest priority workload, excluding non-borrowing".

                R(0)
          /      |          \\
       C(3) q_borrowing(0)  q_nominal(2)
      /
     q(0)
    """
    p = preemption()
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="3")],
        [cq("q", "c", p, **CPU), cq("q-borrowing", "r", p, **CPU), cq("q-nominal", "r", p, cpu="2")],
        [admitted("admitted-borrowing-prio-8", 8, "q-borrowing", {"cpu": "1"}),
         admitted("admitted-borrowing-prio-9", 9, "q-borrowing", {"cpu": "1"}),
         admitted("admitted-borrowing-prio-10", 9, "q-borrowing", {"cpu": "1"}),
         admitted("admitted-nominal", -2, "q-nominal", {"cpu": "2"}),
         incoming("q", 0, cpu="1")],
    )
    check(results, {"admitted-borrowing-prio-8": target(RECLAIM, "/r/c/q", "/r/q-borrowing")})


def test_infeasible_preemption_all_available_workloads_in_pruned_subtrees() -> None:
    """Go: "infeasible preemption all available workloads in pruned subtrees" (no targets).

                      R
                /            \\
          C(2)                   C_other(2)
         /    \\                     |
        q(0)  q_same_cohort(0)   q_other(0)
    """
    p = preemption()
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2"), cohort("c-other", "r", cpu="2")],
        [cq("q-other", "c-other", p, **CPU), cq("q", "c", p, **CPU), cq("q-same-cohort", "c", p, **CPU)],
        [admitted("admitted-other-1", -10, "q-other", {"cpu": "1"}),
         admitted("admitted-other-2", -10, "q-other", {"cpu": "1"}),
         admitted("admitted-same-cohort", 0, "q-same-cohort", {"cpu": "2"}),
         incoming("q", 0, cpu="2")],
    )
    check(results, {})


def test_hiearchical_preemption_with_multiple_resources() -> None:
    """Go: "hiearchical preemption with multiple resources".

              R(3CPU, 0Gi)
          /      |
       C(4CPU,4Gi) q_borrowing(0)
      /    \\
     q(0)   q_same_cohort(0)
    """
    p = preemption()
    zeros = zero("cpu", "memory")
    results = cycle(
        [cohort("r", cpu="3"), cohort("c", "r", cpu="4", memory="4Gi")],
        [cq("q", "c", p, **zeros), cq("q-borrowing", "r", p, **zeros), cq("q-same-cohort", "c", p, **zeros)],
        [admitted("admitted-borrowing", 0, "q-borrowing", {"cpu": "3", "memory": "1Gi"}),
         admitted("admitted-same-cohort", -2, "q-same-cohort", {"cpu": "1", "memory": "3Gi"}),
         incoming("q", -2, cpu="2", memory="1Gi")],
    )
    check(results, {"admitted-borrowing": target(RECLAIM, "/r/c/q", "/r/q-borrowing")})


def test_prefer_to_preempt_evicted_workloads() -> None:
    """Go: "prefer to preempt evicted workloads": evicted_same_cohort (Evicted=True, no reason) is
    the one target, already evicted (wantPreempted: 1, "preemption on going"): nobody gets a new
    eviction and the incoming workload waits for it.

               R(0)
          /      |
       C(2)   q_borrowing(0)
      /    \\
     q(0)  q_same_cohort(0)
    """
    evicted = {"type": "Evicted", "status": "True", "reason": "", "message": "",
               "lastTransitionTime": timestamp(0)}
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2")],
        [cq("q", "c", preemption(borrow=True, threshold=0), **CPU),
         cq("q-borrowing", "r", preemption(), **CPU),
         cq("q-same-cohort", "c", preemption(), **CPU)],
        [admitted("admitted-borrowing", -10, "q-borrowing", {"cpu": "1"}),
         admitted("evicted-same-cohort", -1, "q-same-cohort", {"cpu": "1"}, extra_conditions=(evicted,)),
         incoming("q", 0, cpu="1")],
    )
    check(results, {}, want_count=1)
    for result in results:
        got = result_of(result, "evicted-same-cohort", NS)
        conds = {c.type: (c.status, c.reason, c.message) for c in got.conditions}
        assert conds.get("Evicted") == ("True", "", "")
        assert "Preempted" not in conds


def test_respect_lending_limits() -> None:
    """Go: "respect lending limits".

               R(0)
          /      |
       C(2)   q_borrowing(0)
      /
     q(3, lending limit 2)
    """
    p = preemption()
    results = cycle(
        [cohort("r"), cohort("c", "r", cpu="2")],
        [cq("q", "c", p, cpu=("3", "", "2")), cq("q-borrowing", "r", p, **CPU)],
        [admitted("admitted-borrowing", 0, "q-borrowing", {"cpu": "4"}), incoming("q", -2, cpu="5")],
    )
    check(results, {"admitted-borrowing": target(RECLAIM, "/r/c/q", "/r/q-borrowing")})


def test_reclaim_in_complex_hierarchy() -> None:
    """Go: "reclaim in complex hierarchy" (q1..q5 have no resource group in Go: quota 0 here).

                                    r
                                 /      \\
                              c11        c12
                           /   |   \\       \\
                        c21   c22    c23    q1
                      /  |     |     |
                    c31  c32   q3    q2
                  /      |
                q5       q4
        quotas:
        4: c11, c12, c21, c22, c23, c32, c31
        0: q1, q3, q4, q5

    Go: only one of workloads from q2 will be preempted because after preempting the first one,
    the usage of cohort c23 will be back within nominal quota.
    """
    p = preemption()
    cohorts = [cohort("r")]
    for name, parent in (("c11", "r"), ("c12", "r"), ("c21", "c11"), ("c22", "c11"), ("c23", "c11"),
                         ("c31", "c21"), ("c32", "c21")):
        cohorts.append(cohort(name, parent, cpu="4"))
    results = cycle(
        cohorts,
        [cq("q1", "c12", p, **CPU), cq("q2", "c23", p, **CPU), cq("q3", "c22", p, **CPU),
         cq("q4", "c32", p, **CPU), cq("q5", "c31", p, **CPU)],
        [admitted("admitted-borrowing-1", -6, "q1", {"cpu": "4"}),
         admitted("admitted-borrowing-2", -5, "q1", {"cpu": "4"}),
         admitted("admitted-borrowing-3", -9, "q2", {"cpu": "4"}),
         admitted("admitted-borrowing-4", -10, "q2", {"cpu": "4"}),
         admitted("admitted-borrowing-5", -4, "q3", {"cpu": "4"}),
         admitted("admitted-borrowing-6", -3, "q3", {"cpu": "3"}),
         admitted("admitted-borrowing-7", 4, "q4", {"cpu": "2"}),
         admitted("admitted-borrowing-8", 2, "q4", {"cpu": "3"}),
         incoming("q5", -2, cpu="7")],
    )
    check(results, {
        "admitted-borrowing-1": target(RECLAIM, "/r/c11/c21/c31/q5", "/r/c12/q1"),
        "admitted-borrowing-4": target(RECLAIM, "/r/c11/c21/c31/q5", "/r/c11/c23/q2"),
    })


def test_exceeds_borrowing_limit_reclaim_within_queue_only() -> None:
    """Go: "exceeds borrowing limit: reclaim within queue only".

                R(0)
            /          \\
       q_exceed(2,       q_other(4)
         borrowLimit 2)

    Go: q_exceed borrows the full extra 2 (usage 4 = nominal 2 + borrowingLimit 2), borrowed
    from q_other's idle nominal. incoming(1) into q_exceed: usage(4)+1 = 5 >
    nominal(2)+borrowingLimit(2) = 4 => band == exceedsBorrowing. Borrowing more from the cohort
    can never lift the per-queue borrowing limit, so q_other's workload is useless as a
    candidate; only reclaiming q_exceed's own usage frees space. We preempt the in-queue workload
    and, once its 4 units are freed, incoming(1) fits within nominal. q_other is left untouched.
    """
    p = preemption()
    results = cycle(
        [cohort("r")],
        [cq("q-exceed", "r", p, cpu=("2", "2")), cq("q-other", "r", p, cpu="4")],
        [admitted("in-queue-low", -5, "q-exceed", {"cpu": "4"}),
         admitted("other-queue-low", -10, "q-other", {"cpu": "2"}),
         incoming("q-exceed", 0, cpu="1")],
    )
    check(results, {"in-queue-low": target(IN_CQ, "/r/q-exceed", "/r/q-exceed")})


def test_exceeds_borrowing_limit_with_full_cohort_cross_queue_reclaim_needed() -> None:
    """Go: "exceeds borrowing limit with full cohort: cross-queue reclaim needed".

                R(0)
            /          \\
         q(2,          donor(2)
      borrowLimit 2)

    Go: q usage 1, donor usage 3 (borrowing 1 of q's lent nominal), incoming(4) into q:
    usage(1)+4 = 5 > nominal(2)+borrowingLimit(2) = 4. Same-queue preemption alone is
    insufficient: after preempting q's own workload, q still needs to borrow 2 but the cohort has
    only 1 free, so donor's workload must be preempted to free cohort quota.
    """
    results = cycle(
        [cohort("r")],
        [cq("q", "r", preemption(borrow=True), cpu=("2", "2")), cq("donor", "r", preemption(), cpu="2")],
        [admitted("q-low", -5, "q", {"cpu": "1"}),
         admitted("donor-low", -10, "donor", {"cpu": "3"}),
         incoming("q", 10, cpu="4")],
    )
    check(results, {
        "donor-low": target(RECLAIM_WHILE_BORROWING, "/r/q", "/r/donor"),
        "q-low": target(IN_CQ, "/r/q", "/r/q"),
    })


def test_exceeds_borrowing_limit_but_cohort_slack_is_held_by_a_borrowing_sibling_cross_queue_reclaim_needed() -> None:
    """Go: "exceeds borrowing limit but cohort slack is held by a borrowing sibling: cross-queue
    reclaim needed".

    Go: cohort has slack but it is occupied by a borrowing sibling, so same-queue preemption alone
    cannot free it.

                  R(0)
            /       |        \\
         q(4,     donor(2)   idle(6)
      borrowLimit 4)

    q usage 1 (below nominal, not borrowing), donor usage 5 (borrowing 3), idle usage 0 -> cohort
    free = 12-6 = 6. incoming(8) into q: usage(1)+8 = 9 > nominal(4)+borrowingLimit(4) = 8. After
    preempting q's own workload, q can still only pull min(withMaxFromParent 8, parentAvailable
    7) = 7 < 8, because donor's borrowed 5 keeps parentAvailable below q's borrowing cap. Only
    reclaiming donor frees the cohort quota q needs, so the cross-queue candidate must be kept.
    The pre-fix "needed = after - nominal = 5" wrongly judged cohort free (6) >= 5 and pruned the
    donor candidate, yielding 0 preemptions; "needed = request - usage = 7" > 6 keeps it.
    """
    results = cycle(
        [cohort("r")],
        [cq("q", "r", preemption(borrow=True), cpu=("4", "4")), cq("donor", "r", preemption(), cpu="2"),
         cq("idle", "r", preemption(), cpu="6")],
        [admitted("q-low", -5, "q", {"cpu": "1"}),
         admitted("donor-low", -10, "donor", {"cpu": "5"}),
         incoming("q", 10, cpu="8")],
    )
    check(results, {
        "donor-low": target(RECLAIM_WHILE_BORROWING, "/r/q", "/r/donor"),
        "q-low": target(IN_CQ, "/r/q", "/r/q"),
    })


def test_exceeds_borrowing_limit_with_idle_cohort_same_queue_preemption_only_cross_queue_candidate_untouched() -> None:
    """Go: "exceeds borrowing limit with idle cohort: same-queue preemption only, cross-queue
    candidate untouched".

                  R(0)
            /      |       \\
         q(2,   q_other(2)  q_idle(10)
      borrowLimit 2)

    Go: q usage 4 (at cap), q_other usage 3 (over nominal -> a legal cross-queue candidate),
    q_idle usage 0 -> cohort has 7 free. incoming(1) into q: usage(4)+1 = 5 >
    nominal(2)+borrowingLimit(2) = 4, and needed = request(1) - usage(4) <= 0 <= cohort free 7 =>
    band == exceedsBorrowing, cross-queue collection is skipped. On the base revision the same
    outcome must hold: other_low may be transiently preempted first, but fillBackWorkloads adds it
    back because same-queue preemption alone suffices when the cohort supply is not the binding
    constraint.
    """
    results = cycle(
        [cohort("r")],
        [cq("q", "r", preemption(borrow=True), cpu=("2", "2")), cq("q-other", "r", preemption(), cpu="2"),
         cq("q-idle", "r", preemption(), cpu="10")],
        [admitted("q-low", -5, "q", {"cpu": "4"}),
         admitted("other-low", -10, "q-other", {"cpu": "3"}),
         incoming("q", 10, cpu="1")],
    )
    check(results, {"q-low": target(IN_CQ, "/r/q", "/r/q")})


def test_exceeds_borrowing_limit_within_cq_never_no_candidate() -> None:
    """Go: "exceeds borrowing limit, within-CQ never: no candidate".

                R(0)
            /         \\
       q_exceed(2,      q_other(2)
         borrowLimit 2,
         withinCQ Never)

    Go: Same exceedsBorrowing topology, but q_exceed forbids in-queue preemption.
    sameQueueCandidates is empty and no other-queue candidate can help, so nothing is preempted.
    """
    results = cycle(
        [cohort("r")],
        [cq("q-exceed", "r", preemption(within=NEVER), cpu=("2", "2")),
         cq("q-other", "r", preemption(), cpu="2")],
        [admitted("in-queue-low", -5, "q-exceed", {"cpu": "2"}),
         admitted("other-queue-low", -10, "q-other", {"cpu": "2"}),
         incoming("q-exceed", 0, cpu="3")],
    )
    check(results, {})


def test_borrowing_needed_borrow_within_cohort_nil_reclaim_within_queue() -> None:
    """Go: "borrowing needed, BorrowWithinCohort nil: reclaim within queue".

                R(0)
            /         \\
       q_borrow(2)      q_donor(4)

    Go: q_borrow already borrows (usage 3 > nominal 2), incoming(1) keeps it borrowing (band ==
    withinBorrowing) with no hierarchical advantage. BorrowWithinCohort is nil (not configured)
    => the special case must treat borrowing-within-cohort as forbidden without a nil-pointer
    panic, and fall back to same-queue reclamation. Regression guard for that nil dereference.

    The cohort must be genuinely full so that Preempt is the honest mode: cohort total =
    q_borrow(2) + q_donor(4) = 6, borrower_low uses 3 in q_borrow (borrowing 1) and donor_mid
    uses 3 in q_donor (within its own nominal, so it is NOT a candidate). Together they fill the
    cohort (6/6), so q_borrow.Available == 0 and incoming(1) cannot fit without preemption.
    donor_mid stays within nominal => no other-queue candidate; only same-queue reclamation of
    borrower_low frees room.
    """
    p = preemption()
    results = cycle(
        [cohort("r")],
        [cq("q-borrow", "r", p, cpu="2"), cq("q-donor", "r", p, cpu="4")],
        [admitted("borrower-low", -5, "q-borrow", {"cpu": "3"}),
         admitted("donor-mid", -10, "q-donor", {"cpu": "3"}),
         incoming("q-borrow", 0, cpu="1")],
    )
    check(results, {"borrower-low": target(IN_CQ, "/r/q-borrow", "/r/q-borrow")})


def test_mixed_resources_only_cpu_exceeds_borrowing_limit_memory_still_reclaimed_across_queues() -> None:
    """Go: "mixed resources: only cpu exceeds borrowing limit, memory still reclaimed across queues".

                 c(cpu=2, mem=2Gi)
            /                    \\
     q(cpu=2/lim0, mem=1Gi)   donor(cpu=0, mem=1Gi)

    Go: same_queue_cpu fills q's cpu (2/2); donor_mem borrows q's unused memory nominal (using
    2Gi of the cohort's 2Gi). The incoming workload needs 1 cpu + 1Gi memory: cpu exceeds q's
    borrowing limit (usage 2 + 1 > nominal 2 + limit 0), while memory only lacks cohort capacity.
    One resource exceeding the borrowing limit must not skip the hierarchy/priority pools,
    because cross-queue reclaim is still required for the other resource.
    """
    results = cycle(
        [cohort("c")],
        [cq("q", "c", preemption(borrow=True), cpu=("2", "0"), memory="1Gi"),
         cq("donor", "c", preemption(), cpu="0", memory="1Gi")],
        [admitted("same-queue-cpu", 0, "q", {"cpu": "2"}),
         admitted("donor-mem", 0, "donor", {"memory": "2Gi"}),
         incoming("q", 1, cpu="1", memory="1Gi")],
    )
    check(results, {
        "donor-mem": target(RECLAIM_WHILE_BORROWING, "/c/q", "/c/donor"),
        "same-queue-cpu": target(IN_CQ, "/c/q", "/c/q"),
    })


def test_borrowing_a_resource_not_needing_preemption_priority_candidates_kept() -> None:
    """Go: "borrowing a resource not needing preemption: priority candidates kept" (Go's
    assignment gives cpu mode Fit and memory Preempt; the cohort's cpu is over its capacity, 11
    used of 10, so a flavor assigner computing the modes finds cpu needs preemption too).

                 c(cpu=10, mem=20Gi)
            /                       \\
     q(cpu=10, mem=10Gi)          b(cpu=0, mem=10Gi)

    Go: q borrows cpu (xy_hog uses 11 of nominal 10), but cpu does NOT need preemption. b
    overuses memory (25Gi of the cohort's 20Gi), so q's Available(memory) is 0 and memory needs
    preemption even though q's own memory usage is far below nominal. Borrowing a resource that
    is not up for preemption must not cause the priority candidates to be dropped: the consumer
    still runs the no-borrowing pass, in which ReclaimWithoutBorrowing candidates like b_mem are
    valid.
    """
    results = cycle(
        [cohort("c")],
        # BorrowWithinCohort is unset, so borrowing within the cohort is forbidden.
        [cq("q", "c", preemption(), cpu="10", memory="10Gi"),
         cq("b", "c", preemption(), cpu="0", memory="10Gi")],
        [admitted("xy-hog", 0, "q", {"cpu": "11", "memory": "1Gi"}),
         admitted("b-mem", 0, "b", {"memory": "25Gi"}),
         incoming("q", 1, cpu="1", memory="1Gi")],
    )
    # Go hands GetTargets the assignment above (b-mem and xy-hog would be the targets). A cycle's
    # flavor assigner, Kueue's as the engine's, computes cpu's mode on this cluster: q holds 11 of
    # the cohort's 10 CPUs, so cpu needs preemption too ("2 more needed"). q is then over its
    # nominal quota for a resource needing preemption: only the pass that lets it borrow runs, in
    # which b-mem (reclaimable only if q does not borrow) is no candidate, and preempting xy-hog
    # alone frees no memory. Nobody is preempted and the workload waits.
    check(results, {})
    for result in results:
        assert result_of(result, "in", NS).message == (
            "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
            "2 more needed, insufficient unused quota for memory in flavor default, 7Gi more needed")
