"""Kueue's TestFairPreemptions and TestFairPreemptionSkipsUnsatisfiableTournament
(pkg/scheduler/preemption/preemption_fair_test.go, API v1beta2): the preemption targets the fair
sharing preemptor picks for an incoming workload.

The Go runner calls the preemptor's GetTargets directly, with fair sharing on (its
`config.FairSharing` carries the case's `strategies`; none means Kueue's default, both
LessThanOrEqualToFinalShare and LessThanInitialShare), an explicit flavor assignment for the
incoming workload (mode Preempt, on flavor `default` or the case's `assignmentFlavor`), and
compares the set of targets with their reasons (`wantPreempted`; nil or empty: no target).

Here each case is one scheduling cycle of the engine with fair sharing (`FAIR`, or
`config(*strategies)` when the case sets them): the case's ResourceFlavors, ClusterQueues and
Cohorts, a Namespace `default` with a LocalQueue `lq-<cq>` per ClusterQueue, the case's admitted
workloads holding quota and admitted (QuotaReserved and Admitted True), and the incoming workload
pending in the LocalQueue of `targetCQ`. The test compares the workloads the cycle preempted
(Evicted=True/Preempted, and Preempted=True with the Go reason) with `wantPreempted`; when targets
are expected, the incoming workload must wait for them (QuotaReserved=False, "... Pending the
preemption of N workload(s)"); when none are, nobody is preempted and the incoming workload is not
admitted (the Go assignment's mode Preempt: it does not fit without preemption).

Differences from the Go source, none of which changes an ordering the cases depend on:

* Workloads with namespace "" in Go are in namespace "default" (the engine requires one).
* The runner sets each admitted workload's UID to its name (so candidate ordering is
  predictable); the incoming workload has no UID, as in Go. No case states a message.
* Names the API server would refuse: workload names with an underscore are hyphenated
  (`c_incoming` -> `c-incoming`, `a1_low` -> `a1-low`, ...; where this moves a name relative to
  another candidate of the same ClusterQueue, priorities decide first); uppercase Cohort names are
  lowercased (ROOT, LEFT, RIGHT), and the one-to-four-letter Cohorts of "deep preemption" and
  "cohort with zero weight can reclaim nominal quota" (A, AA, AAA, B, ...), which would clash with
  ClusterQueues "a" and "b", are written `cohort-a`, `cohort-aa`, ...
* Empty preemption policies (unit tests skip defaulting; Kueue reads "" as not Never): no case
  relies on one (the ClusterQueues concerned either never preempt, or have no candidate of lower
  priority in their own queue), so they are "Never".
* Go's "can reclaim from queue using less, ..." gives its incoming workload a quota reservation in
  "a" while GetTargets runs it for "c": here it is pending in "c".
* TestFairPreemptionSkipsUnsatisfiableTournament also counts the FairSharing log entries (strategy
  evaluations, skipped ClusterQueues); the engine has no such log: only its targets (none) are
  checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler.features import DEFAULT_GATES
from scheduler.results import PassResult

from .factories import run
from .kueue_schedule import (
    cluster_queue,
    cohort,
    flavor,
    flavor_quotas,
    local_queue,
    namespace,
    reserve_quota,
    resource_group,
    workload,
)
from .test_fair_sharing import FAIR, config

NS = "default"
IN_CQ = "InClusterQueue"
RECLAMATION = "InCohortReclamation"
FAIR_SHARING = "InCohortFairSharing"
LTE_FINAL = "LessThanOrEqualToFinalShare"
LT_INITIAL = "LessThanInitialShare"


# ---------------------------------------------------------------- builders


def policies(within: str = "Never", reclaim: str = "Never", borrow: Mapping | None = None) -> dict:
    out: dict = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}
    if borrow is not None:
        out["borrowWithinCohort"] = dict(borrow)
    return out


def cpu_cq(name: str, cpu: str | None, *, co: str | None = None, preemption: Mapping | None = None,
           fair_weight: str | None = None) -> dict:
    """MakeClusterQueue(name).Cohort(co).ResourceGroup(MakeFlavorQuotas("default").Resource(cpu, cpu))
    (no resource group when `cpu` is None)."""
    groups = (resource_group(flavor_quotas("default", cpu=cpu)),) if cpu is not None else ()
    return cluster_queue(name, *groups, cohort=co, preemption=preemption or policies(),
                         fair_weight=fair_weight)


def cpu_cohort(name: str, cpu: str | None = None, *, parent: str | None = None,
               fair_weight: str | None = None) -> dict:
    groups = (resource_group(flavor_quotas("default", cpu=cpu)),) if cpu is not None else ()
    return cohort(name, *groups, parent=parent, fair_weight=fair_weight)


# baseCQs' preemption: WithinClusterQueue LowerPriority, ReclaimWithinCohort Any,
# BorrowWithinCohort LowerPriority with MaxPriorityThreshold -3
BASE_PREEMPTION = policies("LowerPriority", "Any", {"policy": "LowerPriority", "maxPriorityThreshold": -3})
# "CQ with higher weight can preempt more" and the 0 weight cases
WITHIN_AND_RECLAIM = policies("LowerPriority", "Any")
RECLAIM_ANY = policies(reclaim="Any")


def base_cqs() -> list[dict]:
    return [
        cpu_cq("a", "3", co="all", preemption=BASE_PREEMPTION),
        cpu_cq("b", "3", co="all", preemption=BASE_PREEMPTION),
        cpu_cq("c", "3", co="all", preemption=BASE_PREEMPTION),
        cpu_cq("preemptible", "0", co="all"),
    ]


def held(name: str, cq: str, cpu: str = "1", *, priority: int | None = None, fl: str = "default") -> dict:
    """MakeWorkload(name, "").Request(cpu, cpu)[.Priority(p)].SimpleReserveQuota(cq, fl, now),
    admitted, with UID = name (as the runner sets)."""
    wl = workload(name, NS, requests={"cpu": cpu}, priority=priority, uid=name)
    return reserve_quota(wl, cq, {"main": ({"cpu": fl}, None)}, admitted=True)


def unit(name: str, cq: str, *, priority: int | None = None) -> dict:
    """unitWl.Clone().Name(name)[.Priority(p)].SimpleReserveQuota(cq, "default", now)."""
    return held(name, cq, "1", priority=priority)


def incoming(name: str, cq: str, cpu: str = "1", *, priority: int | None = None) -> dict:
    """The incoming workload, pending in the LocalQueue of `cq`, without a UID (as in Go)."""
    wl = workload(name, NS, queue=f"lq-{cq}", requests={"cpu": cpu}, priority=priority)
    del wl["metadata"]["uid"]
    return wl


def preempt(cluster_queues: Sequence[dict], admitted: Sequence[dict], wl: dict, *,
            cohorts: Sequence[dict] = (), flavors: Sequence[str] = ("default",),
            strategies: Sequence[str] = (), gates: Mapping[str, bool] | None = None) -> PassResult:
    """One scheduling cycle with fair sharing over the case's cluster."""
    objects = [
        namespace(NS),
        *(flavor(f) for f in flavors),
        *cluster_queues,
        *cohorts,
        *(local_queue(f"lq-{cq['metadata']['name']}", NS, cq["metadata"]["name"]) for cq in cluster_queues),
        *admitted,
        wl,
    ]
    return run(objects, cycles=1, feature_gates=DEFAULT_GATES.with_overrides(**(gates or {})),
               config=config(*strategies) if strategies else FAIR)


# ---------------------------------------------------------------- what the cases check


def preempted(result: PassResult) -> dict[str, str | None]:
    """name -> Preempted reason of every workload the cycle evicted or preempted; each must carry
    both Evicted=True/Preempted and Preempted=True."""
    out: dict[str, str | None] = {}
    for w in result.workloads:
        conds = {c.type: c for c in w.conditions}
        ev, pr = conds.get("Evicted"), conds.get("Preempted")
        if (ev is not None and ev.status == "True") or (pr is not None and pr.status == "True"):
            assert ev is not None and (ev.status, ev.reason) == ("True", "Preempted"), w.key
            assert pr is not None and pr.status == "True", w.key
            out[w.workload.name] = pr.reason
    return out


def incoming_of(result: PassResult, name: str):
    for w in result.workloads:
        if w.workload.name == name and w.workload.namespace == NS:
            return w
    raise AssertionError(f"{NS}/{name} missing from the result")


def assert_targets(result: PassResult, wl: dict, want: Mapping[str, str]) -> None:
    """The cycle preempted exactly `want` (name -> reason); the incoming workload waits for them,
    or, when `want` is empty, stays pending without preempting anybody."""
    assert preempted(result) == dict(want)
    w = incoming_of(result, wl["metadata"]["name"])
    conds = {c.type: c for c in w.conditions}
    assert w.status not in ("Admitted", "QuotaReserved"), w.status
    assert conds.get("Admitted") is None or conds["Admitted"].status != "True"
    if want:
        qr = conds.get("QuotaReserved")
        assert qr is not None and qr.status == "False", qr
        assert qr.message.endswith(f". Pending the preemption of {len(want)} workload(s)"), qr.message


def check(cluster_queues: Sequence[dict], admitted: Sequence[dict], wl: dict, want: Mapping[str, str],
          **kwargs) -> None:
    assert_targets(preempt(cluster_queues, admitted, wl, **kwargs), wl, want)


# ---------------------------------------------------------------- TestFairPreemptions


def test_reclaim_nominal_from_user_using_the_most():
    """"reclaim nominal from user using the most"."""
    admitted = [unit(n, "a") for n in ("a1", "a2", "a3")] + [unit(f"b{i}", "b") for i in range(1, 6)] \
        + [unit("c1", "c")]
    check(base_cqs(), admitted, incoming("c-incoming", "c"), {"b1": RECLAMATION})


def test_can_reclaim_from_queue_using_less_if_taking_the_latest_workload_from_user_using_the_most_isnt_enough():
    """"can reclaim from queue using less, if taking the latest workload from user using the most
    isn't enough"."""
    admitted = [held("a1", "a", "3"), held("a2", "a", "1"), held("b1", "b", "2"), held("b2", "b", "3")]
    # attempts to preempt b1, but it's not enough.
    check(base_cqs(), admitted, incoming("c-incoming", "c", "3"), {"a1": RECLAMATION})


def test_reclaim_borrowable_quota_from_user_using_the_most():
    """"reclaim borrowable quota from user using the most"."""
    admitted = [unit(n, "a") for n in ("a1", "a2", "a3")] + [unit(f"b{i}", "b") for i in range(1, 6)] \
        + [unit("c1", "c")]
    check(base_cqs(), admitted, incoming("a-incoming", "a"), {"b1": FAIR_SHARING})


def test_preempt_one_from_each_cq_borrowing():
    """"preempt one from each CQ borrowing"."""
    admitted = [held("a1", "a", "0.5"), held("a2", "a", "0.5"), held("a3", "a", "3"),
                held("b1", "b", "0.5"), held("b2", "b", "0.5"), held("b3", "b", "3")]
    check(base_cqs(), admitted, incoming("c-incoming", "c", "2"), {"a1": RECLAMATION, "b1": RECLAMATION})


def test_cant_preempt_when_everyone_under_nominal():
    """"can't preempt when everyone under nominal"."""
    admitted = [unit(f"{q}{i}", q) for q in "abc" for i in (1, 2, 3)]
    check(base_cqs(), admitted, incoming("c-incoming", "c"), {})


def test_cant_preempt_when_it_would_switch_the_imbalance():
    """"can't preempt when it would switch the imbalance"."""
    admitted = [unit(n, "a") for n in ("a1", "a2", "a3")] + [unit(f"b{i}", "b") for i in range(1, 6)]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "2"), {})


def test_can_preempt_lower_priority_workloads_from_same_cq():
    """"can preempt lower priority workloads from same CQ"."""
    admitted = [unit("a1-low", "a", priority=-1), unit("a2-low", "a", priority=-1), unit("a3", "a"),
                unit("a4", "a")] + [unit(f"b{i}", "b") for i in range(1, 6)]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "2"), {"a1-low": IN_CQ, "a2-low": IN_CQ})


def test_can_preempt_a_combination_of_same_cq_and_highest_user():
    """"can preempt a combination of same CQ and highest user"."""
    admitted = [unit("a-low", "a", priority=-1), unit("a2", "a"), unit("a3", "a")] \
        + [unit(f"b{i}", "b") for i in range(1, 7)]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "2"), {"a-low": IN_CQ, "b1": FAIR_SHARING})


def test_preempt_huge_workload_if_there_is_no_other_option_as_long_as_the_target_cq_gets_a_lower_share():
    """"preempt huge workload if there is no other option, as long as the target CQ gets a lower
    share"."""
    check(base_cqs(), [held("b1", "b", "9")], incoming("a-incoming", "a", "2"), {"b1": RECLAMATION})


def test_cant_preempt_huge_workload_if_the_incoming_is_also_huge():
    """"can't preempt huge workload if the incoming is also huge"."""
    check(base_cqs(), [held("a1", "a", "2"), held("b1", "b", "7")], incoming("a-incoming", "a", "5"), {})


def test_cant_preempt_2_smaller_workloads_if_the_incoming_is_huge():
    """"can't preempt 2 smaller workloads if the incoming is huge"."""
    admitted = [held("b1", "b", "2"), held("b2", "b", "2"), held("b3", "b", "3")]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "6"), {})


def test_preempt_from_target_and_others_even_if_over_nominal():
    """"preempt from target and others even if over nominal"."""
    admitted = [held("a1-low", "a", "2", priority=-1), held("a2-low", "a", "1", priority=-1),
                held("b1", "b", "3"), held("b2", "b", "3")]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "4"), {"a1-low": IN_CQ, "b1": FAIR_SHARING})


def test_prefer_to_preempt_workloads_that_dont_make_the_target_cq_have_the_biggest_share():
    """"prefer to preempt workloads that don't make the target CQ have the biggest share".

    It would have been possible to preempt "/b1" under rule S2-b, but S2-a was possible first."""
    admitted = [held("b1", "b", "2"), held("b2", "b", "1"), held("b3", "b", "2"), held("c1", "c", "1")]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "3.5"), {"b2": FAIR_SHARING})


def test_preempt_from_different_cluster_queues_if_the_end_result_has_a_smaller_max_share():
    """"preempt from different cluster queues if the end result has a smaller max share"."""
    admitted = [held("b1", "b", "2"), held("b2", "b", "2.5"), held("c1", "c", "2"), held("c2", "c", "2.5")]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "3.5"), {"b1": FAIR_SHARING, "c1": FAIR_SHARING})


def test_scenario_above_does_not_flap():
    """"scenario above does not flap"."""
    admitted = [held("a1", "a", "3.5"), held("b2", "b", "2.5"), held("c2", "c", "2.5")]
    check(base_cqs(), admitted, incoming("b-incoming", "b", "2"), {})


def test_cannot_preempt_if_it_would_make_the_candidate_cq_go_under_nominal_after_preempting_one_element():
    """"cannot preempt if it would make the candidate CQ go under nominal after preempting one
    element"."""
    admitted = [held("b1", "b", "3"), held("b2", "b", "3"), held("c1", "c", "3")]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "4"), {})


def test_workloads_under_priority_threshold_not_capriciously_preempted():
    """"workloads under priority threshold not capriciously preempted".

    preemption.borrowWithinCohort does not affect how we handle Fair Sharing preemptions. Lower
    priority workloads are not preempted unless DominantResourceShare value indicates that they
    should be preempted."""
    admitted = [unit(f"{q}{i}", q) for q in "ab" for i in (1, 2, 3)] \
        + [unit(f"preemptible{i}", "preemptible", priority=-3) for i in (1, 2, 3)]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "2"), {})


def test_preempt_lower_priority_first_even_if_big():
    """"preempt lower priority first, even if big" (strategies: LessThanInitialShare)."""
    admitted = [held("a1", "a", "3"), held("b-low", "b", "5", priority=0), held("b-high", "b", "1", priority=1)]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "1"), {"b-low": FAIR_SHARING},
          strategies=[LT_INITIAL])


def test_preempt_workload_that_doesnt_transfer_the_imbalance_even_if_high_priority():
    """"preempt workload that doesn't transfer the imbalance, even if high priority" (strategies:
    LessThanOrEqualToFinalShare)."""
    admitted = [held("a1", "a", "3"), held("b-low", "b", "5", priority=0), held("b-high", "b", "1", priority=1)]
    check(base_cqs(), admitted, incoming("a-incoming", "a", "1"), {"b-high": FAIR_SHARING},
          strategies=[LTE_FINAL])


def test_cq_with_higher_weight_can_preempt_more():
    """"CQ with higher weight can preempt more"."""
    cqs = [cpu_cq("a", "3", co="all", preemption=WITHIN_AND_RECLAIM, fair_weight="2"),
           cpu_cq("b", "3", co="all", preemption=WITHIN_AND_RECLAIM),
           cpu_cq("c", "3", co="all", preemption=WITHIN_AND_RECLAIM)]
    admitted = [unit(n, "a") for n in ("a1", "a2", "a3")] + [unit(f"b{i}", "b") for i in range(1, 7)]
    check(cqs, admitted, incoming("a-incoming", "a", "2"), {"b1": FAIR_SHARING, "b2": FAIR_SHARING})


def test_can_preempt_anything_borrowing_from_cq_with_0_weight():
    """"can preempt anything borrowing from CQ with 0 weight"."""
    cqs = [cpu_cq("a", "3", co="all", preemption=WITHIN_AND_RECLAIM),
           cpu_cq("b", "3", co="all", preemption=WITHIN_AND_RECLAIM, fair_weight="0"),
           cpu_cq("c", "3", co="all", preemption=WITHIN_AND_RECLAIM)]
    admitted = [unit(n, "a") for n in ("a1", "a2", "a3")] + [unit(f"b{i}", "b") for i in range(1, 7)]
    check(cqs, admitted, incoming("a-incoming", "a", "3"),
          {"b1": FAIR_SHARING, "b2": FAIR_SHARING, "b3": FAIR_SHARING})


def test_cant_preempt_nominal_from_cq_with_0_weight():
    """"can't preempt nominal from CQ with 0 weight"."""
    cqs = [cpu_cq("a", "3", co="all", preemption=WITHIN_AND_RECLAIM),
           cpu_cq("b", "3", co="all", preemption=WITHIN_AND_RECLAIM, fair_weight="0")]
    admitted = [unit(f"{q}{i}", q) for q in "ab" for i in (1, 2, 3)]
    check(cqs, admitted, incoming("a-incoming", "a"), {})


def test_cant_preempt_nominal_from_cohort_with_0_weight():
    """"can't preempt nominal from Cohort with 0 weight"."""
    cqs = [cpu_cq("left-cq", "0", co="root", preemption=RECLAIM_ANY),
           cpu_cq("right-cq", "0", co="right-cohort", preemption=RECLAIM_ANY, fair_weight="0")]
    cohorts = [cpu_cohort("right-cohort", "1", parent="root", fair_weight="0")]
    check(cqs, [unit("right-1", "right-cq")], incoming("left-1", "left-cq"), {}, cohorts=cohorts)


def test_can_preempt_within_cluster_queue_when_no_cohort():
    """"can preempt within cluster queue when no cohort"."""
    cqs = [cpu_cq("a", "1", preemption=policies(within="LowerPriority"))]
    check(cqs, [unit("a1", "a")], incoming("a-incoming", "a", priority=1000), {"a1": IN_CQ})


def test_hierarchical_preemption():
    """"hierarchical preemption".

    Each Cohort provides 5 capacity, while each CQ provides 1 capacity.

    Here is a representation of the tree the 3 tuple is: (Usage,Quota,SubtreeQuota)

                   ROOT(20,5,20)
                /       |         \\
          LEFT(5,5,7)  c(5,1,1)   RIGHT(10,5,7)
          /       \\               /      \\
        a(0,1,1)    b(5,1,1)   d(5,1,1)    e(5,1,1)

    We show how ClusterQueue a is able to preempt workloads in all of these ClusterQueues. We set
    FairWeight of a, and LEFT, to 2.0, to make this possible. We set FairWeight of e to 0.99, to
    make preemptions deterministic."""
    cqs = [cpu_cq("a", "1", co="left", preemption=RECLAIM_ANY, fair_weight="2"),
           cpu_cq("b", "1", co="left"),
           cpu_cq("c", "1", co="root"),
           cpu_cq("d", "1", co="right"),
           # for determinism, we slightly prefer preemptions from e compared to d.
           cpu_cq("e", "1", co="right", fair_weight="0.99")]
    cohorts = [cpu_cohort("root", "5"),
               cpu_cohort("left", "5", parent="root", fair_weight="2"),
               cpu_cohort("right", "5", parent="root")]
    admitted = [unit(f"{q}{i}", q, priority=i) for q in "bcde" for i in range(1, 6)]
    check(cqs, admitted, incoming("unit", "a", "5"),
          {"b1": FAIR_SHARING, "b2": FAIR_SHARING, "c1": FAIR_SHARING, "c2": FAIR_SHARING,
           "e1": FAIR_SHARING}, cohorts=cohorts)


def test_borrowing_cq_in_non_borrowing_cohort_is_protected():
    """"borrowing cq in non-borrowing cohort is protected".

    though ClusterQueue b is borrowing, its Cohort is not, and therefore it cannot be preempted.

                ROOT
              /      \\
          a(3,5,5)   RIGHT(1,1,1)
                           \\
                            b(1,0,0)

    incoming workload to a, of size 5, must preempt its own workloads, despite its fair weight
    being high, and RIGHT/b having a low weight."""
    cqs = [cpu_cq("a", "5", co="root", preemption=policies("LowerPriority", "Any"), fair_weight="10"),
           cpu_cq("b", None, co="right", fair_weight="0.1")]
    cohorts = [cpu_cohort("root"), cpu_cohort("right", "1", parent="root", fair_weight="0.1")]
    admitted = [unit(n, q, priority=-1) for n, q in (("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"))]
    check(cqs, admitted, incoming("unit", "a", "5"), {"a1": IN_CQ, "a2": IN_CQ, "a3": IN_CQ}, cohorts=cohorts)


def test_forced_to_preempt_within_clusterqueue_because_borrowing_workload_too_important():
    """"forced to preempt within clusterqueue because borrowing workload too important".

    Preempting the small workload would bring RIGHT to a DRS of 0, and we can't even consider the
    higher priority workload. incoming workload to a, of size 4, must preempt its own workloads

                ROOT
              /      \\
          a(3,5,5)   RIGHT(4,3,3)
                           \\
                            b(4,0,0)
    """
    cqs = [cpu_cq("a", "5", co="root", preemption=policies("LowerPriority", "LowerPriority"), fair_weight="10"),
           cpu_cq("b", None, co="right", fair_weight="0.1")]
    cohorts = [cpu_cohort("root"), cpu_cohort("right", "3", parent="root", fair_weight="0.1")]
    admitted = [unit("a1", "a", priority=-1), unit("a2", "a", priority=-1), unit("a3", "a", priority=-1),
                held("b1", "b", "4", priority=100)]
    check(cqs, admitted, incoming("unit", "a", "4"), {"a1": IN_CQ, "a2": IN_CQ, "a3": IN_CQ}, cohorts=cohorts)


def test_deep_preemption():
    """"deep preemption".

                         ROOT
                       /   |   \\
                      A    B    C
                      |    |    |
                      AA   BB   CC
                      |    |    |
                     AAA  BBB  CCC
                      |    |    |
                      a    b   CCCC
    cq-a wants capacity, cq-b uses capacity, and Cohort-CCCC provides capacity

    Organization A is more important than organization B, indicated by relative FairSharing value,
    so the preemption is possible."""
    cqs = [cpu_cq("a", "0", co="cohort-aaa", preemption=RECLAIM_ANY),
           cpu_cq("b", "0", co="cohort-bbb")]
    cohorts = [
        cpu_cohort("root"),
        # we are comparing almostLCAs=(A,B). In order for the preemption to occur, we indicate
        # that A is more important than B.
        cpu_cohort("cohort-a", parent="root", fair_weight="1.01"),
        cpu_cohort("cohort-aa", parent="cohort-a"),
        cpu_cohort("cohort-aaa", parent="cohort-aa"),
        cpu_cohort("cohort-b", parent="root", fair_weight="0.99"),
        cpu_cohort("cohort-bb", parent="cohort-b"),
        cpu_cohort("cohort-bbb", parent="cohort-bb"),
        cpu_cohort("cohort-c", parent="root"),
        cpu_cohort("cohort-cc", parent="cohort-c"),
        cpu_cohort("cohort-ccc", parent="cohort-cc"),
        cpu_cohort("cohort-cccc", "1", parent="cohort-ccc"),
    ]
    check(cqs, [unit("b1", "b")], incoming("a1", "a"), {"b1": FAIR_SHARING}, cohorts=cohorts)


def test_cq_with_zero_weight_can_reclaim_nominal_quota():
    """"cq with zero weight can reclaim nominal quota"."""
    cqs = [cpu_cq("a", "1", co="root", preemption=RECLAIM_ANY, fair_weight="0.0"),
           cpu_cq("b", "0", co="root", fair_weight="1.0")]
    check(cqs, [unit("b1", "b")], incoming("a1", "a"), {"b1": RECLAMATION})


def test_cohort_with_zero_weight_can_reclaim_nominal_quota():
    """"cohort with zero weight can reclaim nominal quota"."""
    cqs = [cpu_cq("a", "0", co="cohort-a", preemption=RECLAIM_ANY, fair_weight="0.0"),
           cpu_cq("b", "0", co="root", fair_weight="1.0")]
    cohorts = [cpu_cohort("cohort-a", "1", parent="root", fair_weight="0.0")]
    check(cqs, [unit("b1", "b")], incoming("a1", "a"), {"b1": FAIR_SHARING}, cohorts=cohorts)


def test_nominal_first_workload_fitting_within_nominal_can_preempt_despite_high_aggregate_drs():
    """"nominal first: workload fitting within nominal can preempt despite high aggregate DRS"
    (assignmentFlavor: premium).

    CQ "a": 3 CPU nominal on premium, 0 on cheap.
    CQ "b": 0 CPU nominal on premium, 6 on cheap.

    Admitted state:
      a: 2 premium (within nominal) + 5 cheap (borrowed) -> high DRS
      b: 1 premium (borrowed from a's lendable) -> low DRS

    Incoming: a wants 1 premium CPU (within nominal: 2+1=3 <= 3).
    Without nominal-first: DRS(a) > DRS(b) -> preemption blocked.
    With nominal-first: a is within nominal for premium -> preemption allowed."""
    cqs = [
        cluster_queue("a", resource_group(flavor_quotas("premium", cpu="3"), flavor_quotas("cheap", cpu="0")),
                      cohort="all", preemption=RECLAIM_ANY,
                      fungibility={"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}),
        cluster_queue("b", resource_group(flavor_quotas("premium", cpu="0"), flavor_quotas("cheap", cpu="6")),
                      cohort="all", preemption=policies()),
    ]
    admitted = [held("a-prem1", "a", fl="premium"), held("a-prem2", "a", fl="premium"),
                *(held(f"a-cheap{i}", "a", fl="cheap") for i in range(1, 6)),
                held("b-prem1", "b", fl="premium")]
    check(cqs, admitted, incoming("a-incoming", "a"), {"b-prem1": RECLAMATION}, flavors=("premium", "cheap"))


def test_zero_weight_borrowing_preemptor_cannot_preempt_from_a_borrowing_cq_with_a_non_zero_weight():
    """"zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero weight".

    The preemptor has a fair weight of 0 and borrows, so its share is +Inf. The target borrows on
    a non-zero weight, so its share is finite. CompareDRS ranks the preemptor above the target no
    matter which of the target's workloads is removed, so neither strategy can pass and no target
    is returned."""
    cqs = [cpu_cq("a", "1", co="all", preemption=RECLAIM_ANY, fair_weight="0"),
           cpu_cq("b", "1", co="all", fair_weight="1")]
    admitted = [unit("a1", "a"), unit("b1", "b"), unit("b2", "b")]
    check(cqs, admitted, incoming("a-incoming", "a"), {})


def test_zero_weight_borrowing_preemptor_can_preempt_from_a_borrowing_cq_which_also_has_zero_weight():
    """"zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero weight".

    Both the preemptor and the target have a fair weight of 0 and borrow, so both shares are
    +Inf. CompareDRS falls back to the unweighted ratios in that case, and a candidate can win, so
    the tournament must still run."""
    cqs = [cpu_cq("a", "1", co="all", preemption=RECLAIM_ANY, fair_weight="0"),
           cpu_cq("b", "0", co="all", fair_weight="0")]
    admitted = [unit(f"b{i}", "b") for i in (1, 2, 3)]
    check(cqs, admitted, incoming("a-incoming", "a", "2"), {"b1": FAIR_SHARING},
          cohorts=[cpu_cohort("all", "3")])


def test_non_zero_weight_borrowing_preemptor_preempts_from_a_borrowing_cq():
    """"non-zero weight borrowing preemptor preempts from a borrowing CQ".

    Same shape as the case above, with non-zero fair weights on both sides. Neither share is +Inf,
    so the early exit must not trigger and the outcome is the same."""
    cqs = [cpu_cq("a", "1", co="all", preemption=RECLAIM_ANY, fair_weight="1"),
           cpu_cq("b", "0", co="all", fair_weight="1")]
    admitted = [unit(f"b{i}", "b") for i in (1, 2, 3)]
    check(cqs, admitted, incoming("a-incoming", "a", "2"), {"b1": FAIR_SHARING},
          cohorts=[cpu_cohort("all", "3")])


def test_candidates_skipped_by_the_first_strategy_are_still_available_to_the_second_strategy():
    """"candidates skipped by the first strategy are still available to the second strategy".

    Hierarchy:

        ROOT -- A (weight 0, 1 CPU) -- p (weight 1, 2 CPU, preemptor)
             |                      `- y (weight 1, 2 CPU)
             `- x (weight 1, 1 CPU)

    The preemptor's almostLCA is p for target y, and A for target x. A borrows on a zero weight,
    so its share is +Inf and no candidate in x can pass the first strategy. The candidates from x
    must still be kept for the second strategy: the first strategy visits A's subtree first, and
    once y1 is preempted A stops borrowing, which brings A's share down to 0 and lets a candidate
    from x win."""
    cqs = [cpu_cq("p", "2", co="cohort-a", preemption=RECLAIM_ANY, fair_weight="1"),
           cpu_cq("y", "2", co="cohort-a", fair_weight="1"),
           cpu_cq("x", "1", co="root", fair_weight="1")]
    cohorts = [cpu_cohort("cohort-a", "1", parent="root", fair_weight="0")]
    admitted = [held("p1", "p", "2"), held("y1", "y", "2"), held("y2", "y", "2"), unit("x1", "x"), unit("x2", "x")]
    check(cqs, admitted, incoming("p-incoming", "p"), {"y1": FAIR_SHARING, "x1": FAIR_SHARING}, cohorts=cohorts)


def test_can_admit_after_preempting_workloads_from_the_preemptors_cq_with_lower_processing_priority():
    """"can admit after preempting workloads from the preemptor's CQ with lower processing priority"
    (strategies: LessThanOrEqualToFinalShare; FairSharingReevaluatePreemptionCandidates on).

    The case when workloads from preemptor's CQ have lower priority, so all the other workloads are
    processed first, but none are considered fair by DRS. Later, once the preemptor's workloads are
    preempted, now workloads from other CQs are considered fair to be preempted by DRS.

    Detailed scenario:
    * Workloads from CQs "right-b" and "right-c" are processed first because of fairWeights.
    * Initially workloads from "right" cohort doesn't satisfy the strategy because DRS of
      preemptor's is large (because of fairWright).
    * The fair preemption algorithm removes workloads from preemptor's CQ "left-a" without
      considering the strategy (because they are from the same CQ), so preemptor's DRS decreases.
      (preempted: a1, a2, a3)
    * Now, workloads from CQs "right-b" and "right-c" satisfy the fairness condition by the strategy.
    * Workloads from the "right-b" CQ are preempted because they had larger DRS than workloads from
      "right-c" CQ. (preempted: b1, b2)

    Go gives the three ClusterQueues WithinClusterQueue Any, which Kueue's API server refuses (and
    the engine's parser too: Never, LowerPriority or LowerOrNewerEqualPriority). Kueue's policy
    check reads Any as "any priority", so the preemptor's own workloads a1..a3, of its priority
    (0), are candidates. Here left-a has WithinClusterQueue LowerPriority and the incoming workload
    priority 1, which makes a1..a3 candidates just the same; the other candidates come through
    ReclaimWithinCohort Any (priority plays no part there), all candidates keep priority 0 (their
    ordering is unchanged) and the shares do not depend on priorities. right-b and right-c never
    preempt: their WithinClusterQueue is LowerPriority."""
    within_lower = policies("LowerPriority", "Any")
    cqs = [cpu_cq("left-a", "0", co="left", preemption=within_lower),
           cpu_cq("right-b", "0", co="right", preemption=within_lower),
           cpu_cq("right-c", "0", co="right", preemption=within_lower)]
    cohorts = [cpu_cohort("root", "15"),
               cpu_cohort("left", "0", parent="root", fair_weight="20"),
               cpu_cohort("right", "0", parent="root", fair_weight="10")]
    admitted = [*(held(f"a{i}", "left-a") for i in (1, 2, 3)),
                *(held(f"b{i}", "right-b") for i in range(1, 7)),
                held("c1", "right-c")]
    check(cqs, admitted, incoming("a-incoming", "left-a", "10", priority=1),
          {"a1": IN_CQ, "a2": IN_CQ, "a3": IN_CQ, "b1": FAIR_SHARING, "b2": FAIR_SHARING},
          cohorts=cohorts, strategies=[LTE_FINAL], gates={"FairSharingReevaluatePreemptionCandidates": True})


# ---------------------------------------------------------------- TestFairPreemptionSkipsUnsatisfiableTournament


def skips_unsatisfiable_tournament(preemptor_fair_weight: str) -> None:
    """The shared topology: a (the preemptor's weight, 1 CPU, reclaim Any) holding a1, b (weight
    1, 1 CPU) holding b1 and b2, in Cohort "all"; a-incoming of 1 CPU to a, default strategies.
    The preemptor's share is at or above the target's either way, so no candidate wins and nothing
    is preempted."""
    cqs = [cpu_cq("a", "1", co="all", preemption=RECLAIM_ANY, fair_weight=preemptor_fair_weight),
           cpu_cq("b", "1", co="all", fair_weight="1")]
    admitted = [unit("a1", "a"), unit("b1", "b"), unit("b2", "b")]
    check(cqs, admitted, incoming("a-incoming", "a"), {})


def test_skips_unsatisfiable_tournament_zero_weight_preemptor_share_is_inf_and_the_tournament_is_skipped():
    """TestFairPreemptionSkipsUnsatisfiableTournament: "zero weight preemptor: share is +Inf and the
    tournament is skipped" (its log counts, 0 first-strategy and 1 second-strategy evaluations,
    1 skipped ClusterQueue, are not checked)."""
    skips_unsatisfiable_tournament("0")


def test_skips_unsatisfiable_tournament_non_zero_weight_preemptor_share_is_finite_so_the_tournament_runs():
    """TestFairPreemptionSkipsUnsatisfiableTournament: "non-zero weight preemptor: share is finite so
    the tournament runs" (its log counts, 1 first-strategy and 1 second-strategy evaluation, no
    skipped ClusterQueue, are not checked)."""
    skips_unsatisfiable_tournament("1")
