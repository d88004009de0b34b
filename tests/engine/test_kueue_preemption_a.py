"""Kueue's TestPreemption (pkg/scheduler/preemption, API v1beta2), part A: the cases from
"preempt lowest priority" to "preempt newer workloads with the same priority".

The Go test puts its ResourceFlavors (default, alpha, beta) and the case's ClusterQueues (all of
them `defaultClusterQueues`) in a cache, asks the preemptor for the targets of the incoming
workload under an explicit flavor `assignment` (`GetTargets`), issues them
(`IssuePreemptions`) and compares the number preempted (`wantPreempted`) and every workload
after it (`wantWorkloads`: the targets with Evicted=True/Preempted and Preempted=True with
their reason and message, the others unchanged). The Go runner runs every case twice
(WorkloadRequestUseMergePatch false/true), which makes no difference to the scheduler: each case
is run once here.

Here each case is one scheduling cycle of the engine: the same flavors and ClusterQueues, a
LocalQueue `lq-<ClusterQueue>` per ClusterQueue, the admitted workloads holding quota and
admitted (QuotaReserved=True at the Go case's time, Admitted=True), and the incoming workload
pending in the LocalQueue of `targetCQ`. The engine computes the incoming workload's flavors
itself; where the case expects targets the test checks that it reached the flavors of the Go
`assignment` (the flavors of the pending workload's PodSets), that exactly the expected
workloads were preempted (with Kueue's reasons and messages) and that the incoming workload waits
for them ("... Pending the preemption of N workload(s)"). Where the case expects no targets the
test checks that nobody is preempted (the incoming workload may be admitted by the cycle when it
fits: Go's explicit Preempt-mode assignment does not let it be, see the cases' docstrings).

Translations:
- Workloads with namespace "" in Go are in namespace "default" (the engine requires one).
- ClusterQueue and Cohort names the API server would refuse are lowercased and hyphenated, in the
  same relative order: preventStarvation -> prevent-starvation, a_standard -> a-standard,
  b_standard -> b-standard, a_best_effort -> a-best-effort, b_best_effort -> b-best-effort,
  with_shared_cq -> with-shared-cq; Kueue's messages name the preemptor's and preemptee's
  paths with those names.
- Preemption policies Go leaves empty (unit tests skip defaulting) are "Never": no case here
  relies on them (standalone and prevent-starvation have no cohort; shared, b and c never
  preempt in these cases).
- Admitted workloads have no UID in Go; here each has its name as UID (only used to break ties
  Go's cases do not rely on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.features import DEFAULT_GATES
from scheduler.results import PassResult

from .factories import result_of, run, timestamp
from .kueue_schedule import (
    cluster_queue,
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

NS = "default"
LOWER = "LowerPriority"
ANY = "Any"
NEVER = "Never"
IN_CQ = "InClusterQueue"
RECLAIM = "InCohortReclamation"
PRIORITIZATION = "prioritization in the ClusterQueue"
RECLAMATION = "reclamation within the cohort"


# ---------------------------------------------------------------- the cluster of every case


def flavors() -> list[dict]:
    return [flavor("default"), flavor("alpha"), flavor("beta")]


def default_cluster_queues() -> list[dict]:
    """The Go test's defaultClusterQueues (empty policies as "Never", see the module docstring)."""
    bwc = {"policy": LOWER, "maxPriorityThreshold": 0}

    def policy(within: str, reclaim: str, borrow: dict | None = None) -> dict:
        out: dict = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}
        if borrow is not None:
            out["borrowWithinCohort"] = dict(borrow)
        return out

    return [
        cluster_queue("standalone",
                      resource_group(flavor_quotas("default", cpu="6")),
                      resource_group(flavor_quotas("alpha", memory="3Gi"), flavor_quotas("beta", memory="3Gi")),
                      preemption=policy(LOWER, NEVER)),
        cluster_queue("c1", resource_group(flavor_quotas("default", cpu=("6", "6"), memory=("3Gi", "3Gi"))),
                      cohort="cohort", preemption=policy(LOWER, LOWER)),
        cluster_queue("c2", resource_group(flavor_quotas("default", cpu=("6", "6"), memory=("3Gi", "3Gi"))),
                      cohort="cohort", preemption=policy(NEVER, ANY)),
        cluster_queue("d1", resource_group(flavor_quotas("default", cpu="6", memory="3Gi")),
                      cohort="cohort-no-limits", preemption=policy(LOWER, LOWER)),
        cluster_queue("d2", resource_group(flavor_quotas("default", cpu="6", memory="3Gi")),
                      cohort="cohort-no-limits", preemption=policy(NEVER, ANY)),
        cluster_queue("l1", resource_group(flavor_quotas("default", cpu=("6", "12"), memory=("3Gi", "6Gi"))),
                      cohort="legion", preemption=policy(LOWER, LOWER)),
        cluster_queue("prevent-starvation", resource_group(flavor_quotas("default", cpu="6")),
                      preemption=policy("LowerOrNewerEqualPriority", NEVER)),
        cluster_queue("a-standard", resource_group(flavor_quotas("default", cpu=("1", "12"))),
                      cohort="with-shared-cq", preemption=policy(NEVER, LOWER, bwc)),
        cluster_queue("b-standard", resource_group(flavor_quotas("default", cpu=("1", "12"))),
                      cohort="with-shared-cq", preemption=policy(LOWER, ANY, bwc)),
        cluster_queue("a-best-effort", resource_group(flavor_quotas("default", cpu=("1", "12"))),
                      cohort="with-shared-cq", preemption=policy(NEVER, LOWER, bwc)),
        cluster_queue("b-best-effort", resource_group(flavor_quotas("default", cpu=("0", "13"))),
                      cohort="with-shared-cq", preemption=policy(NEVER, LOWER, bwc)),
        cluster_queue("shared", resource_group(flavor_quotas("default", cpu="10")),
                      cohort="with-shared-cq", preemption=policy(NEVER, NEVER)),
        cluster_queue("lend1", resource_group(flavor_quotas("default", cpu=("6", "", "4"))),
                      cohort="cohort-lend", preemption=policy(LOWER, LOWER)),
        cluster_queue("lend2", resource_group(flavor_quotas("default", cpu=("6", "", "2"))),
                      cohort="cohort-lend", preemption=policy(LOWER, LOWER)),
        cluster_queue("a", resource_group(flavor_quotas("default", cpu="2", memory="2")),
                      cohort="cohort-three", preemption=policy(LOWER, ANY)),
        cluster_queue("b", resource_group(flavor_quotas("default", cpu="2", memory="2")),
                      cohort="cohort-three", preemption=policy(NEVER, NEVER)),
        cluster_queue("c", resource_group(flavor_quotas("default", cpu="2", memory="2")),
                      cohort="cohort-three", preemption=policy(NEVER, NEVER)),
    ]


def lq(cq: str) -> str:
    return f"lq-{cq}"


# ---------------------------------------------------------------- workloads


def admitted(name: str, cq: str, requests: Mapping[str, str], flavor_of: Mapping[str, str] | str = "default", *,
             priority: int | None = None, created: float | None = None, reserved_at: float = 0) -> dict:
    """MakeWorkload(name, "").Priority(p).Request(...).ReserveQuotaAt(MakeAdmission(cq).PodSets(
    MakePodSetAssignment("main").Assignment(resource, flavor, ...)), now + reserved_at s) (or
    SimpleReserveQuota), admitted as well; QuotaReserved transitions at the reservation time."""
    fl = {r: flavor_of for r in requests} if isinstance(flavor_of, str) else dict(flavor_of)
    wl = reserve_quota(workload(name, NS, requests=requests, priority=priority, created=created),
                       cq, {"main": (fl, None)}, admitted=True)
    for c in wl["status"]["conditions"]:
        c["lastTransitionTime"] = timestamp(reserved_at)
    return wl


def incoming(target_cq: str, requests: Mapping[str, str] | None = None, *, priority: int | None = None,
             base: bool = True, pod_sets: Sequence[dict] | None = None, created: float | None = None) -> dict:
    """The incoming workload `in`, pending in the LocalQueue of `target_cq`: baseIncomingWl
    (UID wl-in, job UID job-in) unless `base` is False (MakeWorkload("in", ""))."""
    return workload("in", NS, queue=lq(target_cq), requests=requests, pod_sets=pod_sets, priority=priority,
                    created=created, uid="wl-in" if base else None, job_uid="job-in" if base else None)


# ---------------------------------------------------------------- one cycle and what it gives


def run_case(admitted_wls: Sequence[dict], incoming_wl: dict) -> PassResult:
    cqs = default_cluster_queues()
    objects = [
        namespace(NS),
        *flavors(),
        *cqs,
        *(local_queue(lq(cq["metadata"]["name"]), NS, cq["metadata"]["name"]) for cq in cqs),
        *admitted_wls,
        incoming_wl,
    ]
    return run(objects, cycles=1, feature_gates=DEFAULT_GATES)


def message(why: str, preemptor: str, preemptee: str) -> str:
    return (f"Preempted to accommodate a workload (UID: wl-in, JobUID: job-in) due to {why}; "
            f"preemptor path: {preemptor}; preemptee path: {preemptee}")


def preempted(result: PassResult) -> dict[str, tuple[str, str]]:
    """Every workload the cycle preempted: name -> (Preempted reason, message); the Evicted
    condition must carry reason Preempted and the same message."""
    out = {}
    for w in result.workloads:
        evicted = condition(result, w.workload.name, w.workload.namespace, "Evicted")
        if evicted is None or evicted[0] != "True" or evicted[1] != "Preempted":
            continue
        pre = condition(result, w.workload.name, w.workload.namespace, "Preempted")
        assert pre is not None and pre[0] == "True", (w.key, pre)
        assert evicted[2] == pre[2], (w.key, evicted, pre)
        out[w.workload.name] = (pre[1], pre[2])
    return out


def assert_targets(result: PassResult, want: Mapping[str, tuple[str, str]],
                   flavors_by_pod_set: Mapping[str, Mapping[str, str]]) -> None:
    """The case's targets preempted (wantPreempted and the Evicted/Preempted conditions of
    wantWorkloads), nobody else; the incoming workload on the Go assignment's flavors, waiting."""
    inc = result_of(result, "in", NS)
    assert {ps.name: dict(ps.flavors) for ps in inc.pod_sets} == {k: dict(v) for k, v in flavors_by_pod_set.items()}
    assert preempted(result) == dict(want)
    reserved = condition(result, "in", NS, "QuotaReserved")
    assert reserved is not None and reserved[0] == "False", reserved
    assert reserved[2].endswith(f". Pending the preemption of {len(want)} workload(s)"), reserved


def assert_no_targets(result: PassResult) -> None:
    """wantPreempted 0 and every admitted workload unchanged."""
    assert preempted(result) == {}


# ---------------------------------------------------------------- the cases


def test_preempt_lowest_priority():
    """"preempt lowest priority"."""
    result = run_case([
        admitted("low", "standalone", {"cpu": "2"}, priority=-1),
        admitted("mid", "standalone", {"cpu": "2"}),
        admitted("high", "standalone", {"cpu": "2"}, priority=1),
    ], incoming("standalone", {"cpu": "2"}, priority=1))
    assert_targets(result, {"low": (IN_CQ, message(PRIORITIZATION, "/standalone", "/standalone"))},
                   {"main": {"cpu": "default"}})


def test_preempt_multiple():
    """"preempt multiple"."""
    result = run_case([
        admitted("low", "standalone", {"cpu": "2"}, priority=-1),
        admitted("mid", "standalone", {"cpu": "2"}),
        admitted("high", "standalone", {"cpu": "2"}, priority=1),
    ], incoming("standalone", {"cpu": "3"}, priority=1))
    msg = message(PRIORITIZATION, "/standalone", "/standalone")
    assert_targets(result, {"low": (IN_CQ, msg), "mid": (IN_CQ, msg)}, {"main": {"cpu": "default"}})


def test_no_preemption_for_low_priority():
    """"no preemption for low priority"."""
    result = run_case([
        admitted("low", "standalone", {"cpu": "3"}, priority=-1),
        admitted("mid", "standalone", {"cpu": "3"}),
    ], incoming("standalone", {"cpu": "1"}, priority=-1, base=False))
    assert_no_targets(result)


def test_not_enough_low_priority_workloads():
    """"not enough low priority workloads"."""
    result = run_case([
        admitted("low", "standalone", {"cpu": "3"}, priority=-1),
        admitted("mid", "standalone", {"cpu": "3"}),
    ], incoming("standalone", {"cpu": "4"}, base=False))
    assert_no_targets(result)


def test_some_free_quota_preempt_low_priority():
    """"some free quota, preempt low priority"."""
    result = run_case([
        admitted("low", "standalone", {"cpu": "1"}, priority=-1),
        admitted("mid", "standalone", {"cpu": "1"}),
        admitted("high", "standalone", {"cpu": "3"}, priority=1),
    ], incoming("standalone", {"cpu": "2"}, priority=1))
    assert_targets(result, {"low": (IN_CQ, message(PRIORITIZATION, "/standalone", "/standalone"))},
                   {"main": {"cpu": "default"}})


def test_minimal_set_excludes_low_priority():
    """"minimal set excludes low priority"."""
    result = run_case([
        admitted("low", "standalone", {"cpu": "1"}, priority=-1),
        admitted("mid", "standalone", {"cpu": "2"}),
        admitted("high", "standalone", {"cpu": "3"}, priority=1),
    ], incoming("standalone", {"cpu": "2"}, priority=1))
    assert_targets(result, {"mid": (IN_CQ, message(PRIORITIZATION, "/standalone", "/standalone"))},
                   {"main": {"cpu": "default"}})


def test_only_preempt_workloads_using_the_chosen_flavor():
    """"only preempt workloads using the chosen flavor".

    Go hands the preemptor an assignment, cpu on default and memory on beta, and expects only
    mid, the workload on beta, preempted. A cycle chooses the flavor itself: alpha (where low,
    priority -1, holds 2Gi) and beta both need a preemption in the ClusterQueue, a tie Kueue's
    flavor assigner leaves to the first flavor, alpha. What the case checks holds there: only the
    workload on the chosen flavor, low, is preempted; mid and high on beta are left alone."""
    result = run_case([
        admitted("low", "standalone", {"memory": "2Gi"}, "alpha", priority=-1),
        admitted("mid", "standalone", {"memory": "1Gi"}, "beta"),
        admitted("high", "standalone", {"memory": "1Gi"}, "beta", priority=1),
    ], incoming("standalone", {"cpu": "1", "memory": "2Gi"}, priority=1))
    assert_targets(result, {"low": (IN_CQ, message(PRIORITIZATION, "/standalone", "/standalone"))},
                   {"main": {"cpu": "default", "memory": "alpha"}})


def test_reclaim_quota_from_borrower():
    """"reclaim quota from borrower"."""
    result = run_case([
        admitted("c1-low", "c1", {"cpu": "3"}, priority=-1),
        admitted("c2-mid", "c2", {"cpu": "3"}),
        admitted("c2-high", "c2", {"cpu": "6"}, priority=1),
    ], incoming("c1", {"cpu": "3"}, priority=1))
    assert_targets(result, {"c2-mid": (RECLAIM, message(RECLAMATION, "/cohort/c1", "/cohort/c2"))},
                   {"main": {"cpu": "default"}})


def test_reclaim_quota_if_workload_requests_0_resources_for_a_resource_at_nominal_quota():
    """"reclaim quota if workload requests 0 resources for a resource at nominal quota"."""
    result = run_case([
        admitted("c1-low", "c1", {"cpu": "3", "memory": "3Gi"}, priority=-1),
        admitted("c2-mid", "c2", {"cpu": "3"}),
        admitted("c2-high", "c2", {"cpu": "6"}, priority=1),
    ], incoming("c1", {"cpu": "3", "memory": "0"}, priority=1))
    assert_targets(result, {"c2-mid": (RECLAIM, message(RECLAMATION, "/cohort/c1", "/cohort/c2"))},
                   {"main": {"cpu": "default", "memory": "default"}})


def test_no_workloads_borrowing():
    """"no workloads borrowing".

    c1 holds 4 of its 6 CPUs, c2 4 of its 6: the incoming 4 CPUs fit by borrowing 2 from the
    cohort (12 in all). Go forces a Preempt-mode assignment and finds no target; the engine may
    admit the workload. Either way nobody is preempted."""
    result = run_case([
        admitted("c1-high", "c1", {"cpu": "4"}, priority=1),
        admitted("c2-low-1", "c2", {"cpu": "4"}, priority=-1),
    ], incoming("c1", {"cpu": "4"}, priority=1))
    assert_no_targets(result)


def test_not_enough_workloads_borrowing():
    """"not enough workloads borrowing"."""
    result = run_case([
        admitted("c1-high", "c1", {"cpu": "4"}, priority=1),
        admitted("c2-low-1", "c2", {"cpu": "4"}, priority=-1),
        admitted("c2-low-2", "c2", {"cpu": "4"}, priority=-1),
    ], incoming("c1", {"cpu": "4"}, priority=1))
    assert_no_targets(result)


def test_preempting_locally_and_borrowing_other_resources_in_cohort_without_cohort_candidates():
    """"preempting locally and borrowing other resources in cohort, without cohort candidates"."""
    result = run_case([
        admitted("c1-low", "c1", {"cpu": "4"}, priority=-1),
        admitted("c2-low-1", "c2", {"cpu": "4"}, priority=-1),
        admitted("c2-high-2", "c2", {"cpu": "4"}, priority=1),
    ], incoming("c1", {"cpu": "4", "memory": "5Gi"}, priority=1))
    assert_targets(result, {"c1-low": (IN_CQ, message(PRIORITIZATION, "/cohort/c1", "/cohort/c1"))},
                   {"main": {"cpu": "default", "memory": "default"}})


def test_preempting_locally_and_borrowing_same_resource_in_cohort():
    """"preempting locally and borrowing same resource in cohort"."""
    result = run_case([
        admitted("c1-med", "c1", {"cpu": "4"}, priority=0),
        admitted("c1-low", "c1", {"cpu": "4"}, priority=-1),
        admitted("c2-low-1", "c2", {"cpu": "4"}, priority=-1),
    ], incoming("c1", {"cpu": "4"}, priority=1))
    assert_targets(result, {"c1-low": (IN_CQ, message(PRIORITIZATION, "/cohort/c1", "/cohort/c1"))},
                   {"main": {"cpu": "default"}})


def test_preempting_locally_and_borrowing_same_resource_in_cohort_no_borrowing_limit_in_the_cohort():
    """"preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort"."""
    result = run_case([
        admitted("d1-med", "d1", {"cpu": "4"}, priority=0),
        admitted("d1-low", "d1", {"cpu": "4"}, priority=-1),
        admitted("d2-low-1", "d2", {"cpu": "4"}, priority=-1),
    ], incoming("d1", {"cpu": "4"}, priority=1))
    path = "/cohort-no-limits/d1"
    assert_targets(result, {"d1-low": (IN_CQ, message(PRIORITIZATION, path, path))}, {"main": {"cpu": "default"}})


def test_preempting_locally_and_borrowing_other_resources_in_cohort_with_cohort_candidates():
    """"preempting locally and borrowing other resources in cohort, with cohort candidates"."""
    result = run_case([
        admitted("c1-med", "c1", {"cpu": "4"}, priority=0),
        admitted("c2-low-1", "c2", {"cpu": "5"}, priority=-1),
        admitted("c2-low-2", "c2", {"cpu": "1"}, priority=-1),
        admitted("c2-low-3", "c2", {"cpu": "1"}, priority=-1),
    ], incoming("c1", {"cpu": "2", "memory": "5Gi"}, priority=1))
    assert_targets(result, {"c1-med": (IN_CQ, message(PRIORITIZATION, "/cohort/c1", "/cohort/c1"))},
                   {"main": {"cpu": "default", "memory": "default"}})


def test_preempting_locally_and_not_borrowing_same_resource_in_1_queue_cohort():
    """"preempting locally and not borrowing same resource in 1-queue cohort"."""
    result = run_case([
        admitted("l1-med", "l1", {"cpu": "4"}, priority=0),
        admitted("l1-low", "l1", {"cpu": "2"}, priority=-1),
    ], incoming("l1", {"cpu": "4"}, priority=1))
    assert_targets(result, {"l1-med": (IN_CQ, message(PRIORITIZATION, "/legion/l1", "/legion/l1"))},
                   {"main": {"cpu": "default"}})


def test_do_not_reclaim_borrowed_quota_from_same_priority_for_withincohort_reclaimfromlowerpriority():
    """"do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority"."""
    result = run_case([
        admitted("c1", "c1", {"cpu": "2"}),
        admitted("c2-1", "c2", {"cpu": "4"}),
        admitted("c2-2", "c2", {"cpu": "4"}),
    ], incoming("c1", {"cpu": "4"}))
    assert_no_targets(result)


def test_reclaim_borrowed_quota_from_same_priority_for_withincohort_reclaimfromany():
    """"reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny"."""
    result = run_case([
        admitted("c1-1", "c1", {"cpu": "4"}),
        admitted("c1-2", "c1", {"cpu": "4"}, priority=1),
        admitted("c2", "c2", {"cpu": "2"}),
    ], incoming("c2", {"cpu": "4"}))
    assert_targets(result, {"c1-1": (RECLAIM, message(RECLAMATION, "/cohort/c2", "/cohort/c1"))},
                   {"main": {"cpu": "default"}})


def test_preempt_from_all_clusterqueues_in_cohort():
    """"preempt from all ClusterQueues in cohort"."""
    result = run_case([
        admitted("c1-low", "c1", {"cpu": "3"}, priority=-1),
        admitted("c1-mid", "c1", {"cpu": "2"}),
        admitted("c2-low", "c2", {"cpu": "3"}, priority=-1),
        admitted("c2-mid", "c2", {"cpu": "4"}),
    ], incoming("c1", {"cpu": "4"}))
    assert_targets(result, {
        "c1-low": (IN_CQ, message(PRIORITIZATION, "/cohort/c1", "/cohort/c1")),
        "c2-low": (RECLAIM, message(RECLAMATION, "/cohort/c1", "/cohort/c2")),
    }, {"main": {"cpu": "default"}})


def test_cant_preempt_workloads_in_clusterqueue_for_withinclusterqueue_never():
    """"can't preempt workloads in ClusterQueue for withinClusterQueue=Never".

    c2 holds 3 of its 6 CPUs and nothing else is used in the cohort: the incoming 4 CPUs fit by
    borrowing 1. Go forces a Preempt-mode assignment and finds no target; the engine may admit
    the workload. Either way nobody is preempted."""
    result = run_case([
        admitted("c2-low", "c2", {"cpu": "3"}, priority=-1),
    ], incoming("c2", {"cpu": "4"}, priority=1))
    assert_no_targets(result)


def test_each_podset_preempts_a_different_flavor():
    """"each podset preempts a different flavor"."""
    result = run_case([
        admitted("low-alpha", "standalone", {"memory": "2Gi"}, "alpha", priority=-1),
        admitted("low-beta", "standalone", {"memory": "2Gi"}, "beta", priority=-1),
    ], incoming("standalone", pod_sets=[pod_set("launcher", 1, requests={"memory": "2Gi"}),
                                        pod_set("workers", 2, requests={"memory": "1Gi"})]))
    msg = message(PRIORITIZATION, "/standalone", "/standalone")
    assert_targets(result, {"low-alpha": (IN_CQ, msg), "low-beta": (IN_CQ, msg)},
                   {"launcher": {"memory": "alpha"}, "workers": {"memory": "beta"}})


def test_preempt_newer_workloads_with_the_same_priority():
    """"preempt newer workloads with the same priority".

    wl2 and wl3 (priority 1, created now) are newer than the incoming workload (priority 1,
    created 15 s before now); wl2, whose quota was reserved last (now + 1 s), is preempted."""
    result = run_case([
        admitted("wl1", "prevent-starvation", {"cpu": "2"}, priority=2),
        admitted("wl2", "prevent-starvation", {"cpu": "2"}, priority=1, created=0, reserved_at=1),
        admitted("wl3", "prevent-starvation", {"cpu": "2"}, priority=1, created=0),
    ], incoming("prevent-starvation", priority=1, created=-15,
                pod_sets=[pod_set("launcher", 1, requests={"cpu": "2"})]))
    path = "/prevent-starvation"
    assert_targets(result, {"wl2": (IN_CQ, message(PRIORITIZATION, path, path))}, {"launcher": {"cpu": "default"}})
