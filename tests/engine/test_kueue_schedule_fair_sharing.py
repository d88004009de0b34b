"""Kueue's TestScheduleForFairSharing (pkg/scheduler, API v1beta2): one scheduling cycle with
fair sharing (the runner's empty `config.FairSharing` when the case sets enableFairSharing) over
the cluster TestSchedule shares (`kueue_schedule`) plus each case's own cohorts, ClusterQueues,
LocalQueues and workloads.

Each test checks what the Go case compares and the engine exposes: every admission held after the
cycle (`wantAssignments`, those admitted before it included), the workloads left in the queues
(`wantLeft`: status Pending) and parked (`wantInadmissibleLeft`: status Inadmissible, none in this
test), the conditions of the workloads (`wantWorkloads`: admitted now, preempted, left pending with
their QuotaReserved reason and message, untouched) and, where the case lists them, the events
(compared without messages).

The Go runner runs every case twice (WorkloadRequestUseMergePatch false/true), which makes no
difference to the scheduler: each case is run once here. It does not set
UnadmittedWorkloadsObservability, and its expectations for not-admitted workloads show
QuotaReserved=False/Pending with no Admitted=False/NoReservation condition: the Go test ran with
that gate off, so the cases with a not-admitted workload pass it off.

Names: the engine, as Kueue's API server, takes only lowercase RFC 1123 names, while the Go test's
fake client takes any: the Go workload names with an underscore (all_nominal, older_new, all_spot)
are written with a hyphen, the Cohorts "Cohort-A", "Cohort-B", "SUB-A" in lowercase and "A", "B",
"C" as "cohort-a", "cohort-b", "cohort-c" (ClusterQueues "a", "b", "c" share some cases with them).
No ordering the cases depend on changes with it.

The metric `wantSkippedPreemptions` (admission_cycle_preemption_skips) has no engine equivalent;
it is quoted in the docstrings of the cases that give it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.results import PassResult

from .kueue_schedule import (
    Quota,
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

# the Go runner's UnadmittedWorkloadsObservability (see the module docstring)
OBSERVABILITY_OFF = {"UnadmittedWorkloadsObservability": False}
NO_LONGER_FITS = "Workload no longer fits after processing another workload"
OVERLAPPING = "Workload has overlapping preemption targets with another workload"


# ---------------------------------------------------------------- builders


def wl_one(name: str, ns: str, queue: str, cpu: str, count: int = 1, *, created: float | None = None,
           priority: int | None = None) -> dict:
    """MakeWorkload(name, ns).Queue(queue).PodSets(MakePodSet("one", count).Request(cpu, cpu))."""
    return workload(name, ns, queue=queue, created=created, priority=priority,
                    pod_sets=[pod_set("one", count, requests={"cpu": cpu})])


def reserved(wl: dict, cq: str, flavors: Mapping[str, str], *, admitted: bool = False) -> dict:
    """ReserveQuotaAt(MakeAdmission(cq).PodSets(MakePodSetAssignment(<its one PodSet>)...), now)
    (plus AdmittedAt(true, now) when `admitted`), or SimpleReserveQuota(cq, flavor, now)."""
    ps = wl["spec"]["podSets"][0]["name"]
    return reserve_quota(wl, cq, {ps: (flavors, None)}, admitted=admitted)


def lqs(ns: str, **by_name: str) -> list[dict]:
    """LocalQueues in `ns`, name -> ClusterQueue."""
    return [local_queue(name, ns, cq) for name, cq in by_name.items()]


def cohort_ref(name: str | None) -> str | None:
    """The Go cases' Cohorts "A", "B", "C" as "cohort-a", ... (see Names in the module docstring)."""
    if name is None or len(name) != 1:
        return name
    return f"cohort-{name.lower()}"


def on_demand_cq(name: str, cpu: Quota | str, co: str | None = None, **kwargs: Any) -> dict:
    """MakeClusterQueue(name).Cohort(co).ResourceGroup(MakeFlavorQuotas("on-demand").Resource(cpu, ...))."""
    return cluster_queue(name, resource_group(flavor_quotas("on-demand", cpu=cpu)), cohort=cohort_ref(co), **kwargs)


def on_demand_cohort(name: str, cpu: str | None = None, parent: str | None = None) -> dict:
    """MakeCohort(name).ResourceGroup(MakeFlavorQuotas("on-demand").Resource(cpu, cpu)).Parent(parent)."""
    groups = (resource_group(flavor_quotas("on-demand", cpu=cpu)),) if cpu is not None else ()
    return cohort(cohort_ref(name), *groups, parent=cohort_ref(parent))


# ---------------------------------------------------------------- what the cases check


def one(cq: str, flavors: Mapping[str, str], count: int = 1, ps: str = "one") -> dict:
    """The admission of a one-PodSet workload."""
    return admission(cq, **{ps: (flavors, count)})


def assert_untouched(result: PassResult, name: str, ns: str, cq: str) -> None:
    """Holding quota before the cycle, neither evicted nor preempted by it."""
    assert condition(result, name, ns, "QuotaReserved") == ("True", "QuotaReserved",
                                                             f"Quota reserved in ClusterQueue {cq}")
    assert condition(result, name, ns, "Evicted") is None
    assert condition(result, name, ns, "Preempted") is None


# ---------------------------------------------------------------- fair sharing ordering


def test_with_fair_sharing_schedule_workload_with_lowest_share_first():
    """"with fair sharing: schedule workload with lowest share first"."""
    eng_shared = on_demand_cq("eng-shared", ("10", "0"), "eng")
    workloads = [
        reserved(wl_one("all-nominal", "eng-alpha", "main", "1", 50), "eng-alpha", {"cpu": "on-demand"}),
        # Use half of shared quota.
        reserved(wl_one("borrowing", "eng-beta", "main", "1", 55), "eng-beta", {"cpu": "on-demand"}),
        wl_one("older-new", "eng-beta", "main", "1", 1, created=-60),
        wl_one("new", "eng-alpha", "main", "1", 5, created=0),
    ]
    result = schedule(workloads, additional_cluster_queues=[eng_shared], fair_sharing=True,
                      gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/all-nominal": one("eng-alpha", {"cpu": "on-demand"}, 50),
        "eng-beta/borrowing": one("eng-beta", {"cpu": "on-demand"}, 55),
        "eng-alpha/new": one("eng-alpha", {"cpu": "on-demand"}, 5),
    }
    assert left(result, "Pending") == {"eng-beta": ["eng-beta/older-new"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "new", "eng-alpha", "eng-alpha")
    assert_waiting(result, "older-new", "eng-beta", NO_LONGER_FITS)
    assert_untouched(result, "all-nominal", "eng-alpha", "eng-alpha")
    assert_untouched(result, "borrowing", "eng-beta", "eng-beta")


def test_with_fair_sharing_nominal_first_ordering_admits_workload_fitting_within_nominal_despite_higher_cq_drs():
    """"with fair sharing: nominal-first ordering admits workload fitting within nominal despite
    higher CQ DRS".

    The Go case gives fs-nom-a and fs-nom-b two resource groups that both cover cpu (on-demand,
    then spot), which Kueue's webhook refuses and the engine's parser too (the Go test's cache
    takes it unvalidated, and its flavor assigner takes cpu's flavors from the first group only,
    while the spot quota still counts in the DRS). Here each has one group with on-demand, then
    spot: the quotas and the DRS are the same, and every workload this case nominates fits (or
    borrows) in on-demand, the first flavor, so the assignments are those of the Go case."""
    cqs = [
        cluster_queue("fs-nom-a",
                      resource_group(flavor_quotas("on-demand", cpu=("50", "0")),
                                     flavor_quotas("spot", cpu=("50", "50"))), cohort="fs-nom"),
        cluster_queue("fs-nom-b",
                      resource_group(flavor_quotas("on-demand", cpu=("10", "50")),
                                     flavor_quotas("spot", cpu=("50", "0"))), cohort="fs-nom"),
    ]
    workloads = [
        reserved(wl_one("spot-heavy", "eng-alpha", "fs-nom", "1", 80), "fs-nom-a", {"cpu": "spot"}),
        reserved(wl_one("light-usage", "eng-beta", "fs-nom", "1", 5), "fs-nom-b", {"cpu": "on-demand"}),
        wl_one("borrow-wl", "eng-beta", "fs-nom", "1", 15, created=-60),
        wl_one("nom-wl", "eng-alpha", "fs-nom", "1", 45, created=0),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs,
                      additional_local_queues=[local_queue("fs-nom", "eng-alpha", "fs-nom-a"),
                                               local_queue("fs-nom", "eng-beta", "fs-nom-b")],
                      fair_sharing=True, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/spot-heavy": one("fs-nom-a", {"cpu": "spot"}, 80),
        "eng-beta/light-usage": one("fs-nom-b", {"cpu": "on-demand"}, 5),
        "eng-alpha/nom-wl": one("fs-nom-a", {"cpu": "on-demand"}, 45),
    }
    assert left(result, "Pending") == {"fs-nom-b": ["eng-beta/borrow-wl"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "nom-wl", "eng-alpha", "fs-nom-a")
    assert_waiting(result, "borrow-wl", "eng-beta", NO_LONGER_FITS)
    assert_untouched(result, "spot-heavy", "eng-alpha", "fs-nom-a")
    assert_untouched(result, "light-usage", "eng-beta", "fs-nom-b")


def _two_pending_in_a_and_b(result: PassResult, admitted_before: Mapping[str, str],
                            a_name: str, a_cq: str) -> None:
    """What the hierarchical nominal-first cases expect: the workload of the A side admitted,
    wl-b left pending, the workloads admitted before untouched."""
    want = {f"eng-alpha/{name}": one(cq, {"cpu": "on-demand"}) for name, cq in admitted_before.items()}
    want[f"eng-alpha/{a_name}"] = one(a_cq, {"cpu": "on-demand"})
    assert assignments(result) == want
    assert left(result, "Pending") == {"cq-b": ["eng-alpha/wl-b"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, a_name, "eng-alpha", a_cq)
    assert_waiting(result, "wl-b", "eng-alpha", NO_LONGER_FITS)
    for name, cq in admitted_before.items():
        assert_untouched(result, name, "eng-alpha", cq)


def test_with_fair_sharing_hierarchical_nominal_first_prefers_non_borrowing_subtree():
    """"with fair sharing: hierarchical nominal-first prefers non-borrowing subtree".

                   ROOT
               /            \\
       COHORT-A (0/10)    COHORT-B (10/5)
            |              /         \\
        cq-a (0/0)    cq-b (0/5)  cq-c (10/0)

    Shown as (usage/subtreeQuota). After pending workloads:
    wl-a (cq-a, 5 CPUs) -> COHORT-A  (5/10), not borrowing
    wl-b (cq-b, 5 CPUs) -> COHORT-B (15/5),  borrowing

    At root, subtree-level borrowing prefers wl-a."""
    cohorts = [on_demand_cohort("root"), on_demand_cohort("cohort-a", "10", "root"),
               on_demand_cohort("cohort-b", parent="root")]
    cqs = [on_demand_cq("cq-a", "0", "cohort-a"), on_demand_cq("cq-b", "5", "cohort-b"),
           on_demand_cq("cq-c", "0", "cohort-b")]
    workloads = [
        reserved(wl_one("c0", "eng-alpha", "lq-c", "10"), "cq-c", {"cpu": "on-demand"}),
        wl_one("wl-a", "eng-alpha", "lq-a", "5"),
        wl_one("wl-b", "eng-alpha", "lq-b", "5"),
    ]
    result = schedule(workloads, cohorts=cohorts, additional_cluster_queues=cqs,
                      additional_local_queues=lqs("eng-alpha", **{"lq-a": "cq-a", "lq-b": "cq-b", "lq-c": "cq-c"}),
                      fair_sharing=True, gates=OBSERVABILITY_OFF)
    _two_pending_in_a_and_b(result, {"c0": "cq-c"}, "wl-a", "cq-a")


def test_with_fair_sharing_hierarchical_nominal_first_with_deeper_nesting():
    """"with fair sharing: hierarchical nominal-first with deeper nesting".

                     ROOT
               /                \\
       COHORT-A (0/10)      COHORT-B (10/5)
          |                  /         \\
       SUB-A (0/10)      cq-b (0/5)  cq-c (10/0)
          |
       cq-a (0/0)

    Shown as (usage/subtreeQuota). After pending workloads:
    wl-a (cq-a, 5 CPUs) -> SUB-A (5/10), COHORT-A  (5/10), not borrowing
    wl-b (cq-b, 5 CPUs) -> COHORT-B (15/5),  borrowing

    At root, subtree-level borrowing prefers wl-a."""
    cohorts = [on_demand_cohort("root"), on_demand_cohort("cohort-a", parent="root"),
               on_demand_cohort("sub-a", "10", "cohort-a"), on_demand_cohort("cohort-b", parent="root")]
    cqs = [on_demand_cq("cq-a", "0", "sub-a"), on_demand_cq("cq-b", "5", "cohort-b"),
           on_demand_cq("cq-c", "0", "cohort-b")]
    workloads = [
        reserved(wl_one("c0", "eng-alpha", "lq-c", "10"), "cq-c", {"cpu": "on-demand"}),
        wl_one("wl-a", "eng-alpha", "lq-a", "5"),
        wl_one("wl-b", "eng-alpha", "lq-b", "5"),
    ]
    result = schedule(workloads, cohorts=cohorts, additional_cluster_queues=cqs,
                      additional_local_queues=lqs("eng-alpha", **{"lq-a": "cq-a", "lq-b": "cq-b", "lq-c": "cq-c"}),
                      fair_sharing=True, gates=OBSERVABILITY_OFF)
    _two_pending_in_a_and_b(result, {"c0": "cq-c"}, "wl-a", "cq-a")


def test_with_fair_sharing_hierarchical_nominal_first_with_mixed_cq_and_cohort_quotas():
    """"with fair sharing: hierarchical nominal-first with mixed CQ and cohort quotas".

                      ROOT
                /            \\
       COHORT-A (6/18)      COHORT-B (20/18)
         /       \\             /        \\
     cq-a1 (0/5) cq-a2 (6/3) cq-b (0/5) cq-c (20/3)

    Shown as (usage/subtreeQuota). SubtreeQuota: 10+5+3=18 each.
    After pending workloads:
    wl-a1 (cq-a1, 7 CPUs) -> COHORT-A (13/18), not borrowing
    wl-b  (cq-b,  4 CPUs) -> COHORT-B (24/18), borrowing

    At root, subtree-level borrowing prefers wl-a1."""
    cohorts = [on_demand_cohort("root"), on_demand_cohort("cohort-a", "10", "root"),
               on_demand_cohort("cohort-b", "10", "root")]
    cqs = [on_demand_cq("cq-a1", "5", "cohort-a"), on_demand_cq("cq-a2", "3", "cohort-a"),
           on_demand_cq("cq-b", "5", "cohort-b"), on_demand_cq("cq-c", "3", "cohort-b")]
    workloads = [
        reserved(wl_one("a2-admitted", "eng-alpha", "lq-a2", "6"), "cq-a2", {"cpu": "on-demand"}),
        reserved(wl_one("c-admitted", "eng-alpha", "lq-c", "20"), "cq-c", {"cpu": "on-demand"}),
        wl_one("wl-a1", "eng-alpha", "lq-a1", "7"),
        wl_one("wl-b", "eng-alpha", "lq-b", "4"),
    ]
    result = schedule(workloads, cohorts=cohorts, additional_cluster_queues=cqs,
                      additional_local_queues=lqs("eng-alpha", **{"lq-a1": "cq-a1", "lq-a2": "cq-a2",
                                                                  "lq-b": "cq-b", "lq-c": "cq-c"}),
                      fair_sharing=True, gates=OBSERVABILITY_OFF)
    _two_pending_in_a_and_b(result, {"a2-admitted": "cq-a2", "c-admitted": "cq-c"}, "wl-a1", "cq-a1")


def test_with_fair_sharing_hierarchical_nominal_first_per_flavor_ignores_cross_flavor_borrowing():
    """"with fair sharing: hierarchical nominal-first per-flavor ignores cross-flavor borrowing".

                        ROOT
               /                    \\
        COHORT-A                   COHORT-B
        on-demand: (0/10)          on-demand: (8/5)
        spot:      (5/0)           spot:      (0/10)
            |                          |
          cq-a                       cq-b
          on-demand: (0/0)           on-demand: (8/5)
          spot:      (5/0)           spot:      (0/0)
          admitted: 5 spot           admitted: 8 on-demand

    Shown as (usage/subtreeQuota). Both cohorts borrow from ROOT, but on different flavors.
    After pending workloads (both request on-demand):
    wl-a (cq-a, 4 on-demand) -> COHORT-A on-demand (4/10), not borrowing
    wl-b (cq-b, 4 on-demand) -> COHORT-B on-demand (12/5), borrowing

    Per-flavor gate prefers wl-a: COHORT-A is not borrowing on-demand despite borrowing spot. Only
    7 on-demand remain, so after wl-a is admitted wl-b cannot fit."""
    cohorts = [cohort("root"),
               cohort("cohort-a", resource_group(flavor_quotas("on-demand", cpu="10")), parent="root"),
               cohort("cohort-b", resource_group(flavor_quotas("spot", cpu="10")), parent="root")]
    cqs = [
        cluster_queue("cq-a", resource_group(flavor_quotas("on-demand", cpu="0"), flavor_quotas("spot", cpu="0")),
                      cohort="cohort-a"),
        cluster_queue("cq-b", resource_group(flavor_quotas("on-demand", cpu="5"), flavor_quotas("spot", cpu="0")),
                      cohort="cohort-b"),
    ]
    workloads = [
        reserved(wl_one("spot-admitted", "eng-alpha", "lq-a", "5"), "cq-a", {"cpu": "spot"}),
        reserved(wl_one("od-admitted", "eng-alpha", "lq-b", "8"), "cq-b", {"cpu": "on-demand"}),
        wl_one("wl-a", "eng-alpha", "lq-a", "4"),
        wl_one("wl-b", "eng-alpha", "lq-b", "4"),
    ]
    result = schedule(workloads, cohorts=cohorts, additional_cluster_queues=cqs,
                      additional_local_queues=lqs("eng-alpha", **{"lq-a": "cq-a", "lq-b": "cq-b"}),
                      fair_sharing=True, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/spot-admitted": one("cq-a", {"cpu": "spot"}),
        "eng-alpha/od-admitted": one("cq-b", {"cpu": "on-demand"}),
        "eng-alpha/wl-a": one("cq-a", {"cpu": "on-demand"}),
    }
    assert left(result, "Pending") == {"cq-b": ["eng-alpha/wl-b"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "wl-a", "eng-alpha", "cq-a")
    assert_waiting(result, "wl-b", "eng-alpha", NO_LONGER_FITS)
    assert_untouched(result, "spot-admitted", "eng-alpha", "cq-a")
    assert_untouched(result, "od-admitted", "eng-alpha", "cq-b")


def test_hierarchical_fair_sharing_schedule_workload_which_wins_tournament():
    """"hierarchical fair sharing schedule workload which wins tournament".

    Cohort A provides 200 capacity, with 70 remaining. We denote Cohorts in UPPERCASE, and
    ClusterQueues in lowercase.

               A
           /       \\
          /          \\
        B(30)         C(100)
       /    \\        /  \\
      d(10) e(20)   f(0)  g(100)

    In (), we display current admissions. These numbers are proportional to
    DominantResourceShare, which we call below pDRS.

    pending workloads -> resulting pDRS if admitted.
    d1: 70 -> d(80) , B(100)
    e1: 61 -> e(81) , B(91)
    f1:  1 -> f(1)  , C(101)
    g1:  1 -> g(101), C(101)

    We expect d1 to admit, since after its admission B has lower pDRS (100) than C (101) after
    admission of either f1 or g1.

    Though admission of e1 would result in an even lower pDRS of B (91), d1 won the tournament at
    the lower level, which we see by comparing d and e's pDRSs, 80 and 81 respectively, after
    admission of d1 and e1 respectively."""
    cohorts = [on_demand_cohort("A", "200"), on_demand_cohort("B", parent="A"), on_demand_cohort("C", parent="A")]
    cqs = [on_demand_cq("d", "0", "B"), on_demand_cq("e", "0", "B"),
           on_demand_cq("f", "0", "C"), on_demand_cq("g", "0", "C")]
    workloads = [
        reserved(wl_one("d0", "eng-alpha", "lq-d", "10"), "d", {"cpu": "on-demand"}),
        reserved(wl_one("e0", "eng-alpha", "lq-e", "20"), "e", {"cpu": "on-demand"}),
        reserved(wl_one("g0", "eng-alpha", "lq-g", "100"), "g", {"cpu": "on-demand"}),
        wl_one("d1", "eng-alpha", "lq-d", "70"),
        wl_one("e1", "eng-alpha", "lq-e", "61"),
        wl_one("f1", "eng-alpha", "lq-f", "1"),
        wl_one("g1", "eng-alpha", "lq-g", "1"),
    ]
    result = schedule(workloads, cohorts=cohorts, additional_cluster_queues=cqs,
                      additional_local_queues=lqs("eng-alpha", **{f"lq-{q}": q for q in "defg"}),
                      fair_sharing=True, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/d0": one("d", {"cpu": "on-demand"}),
        "eng-alpha/e0": one("e", {"cpu": "on-demand"}),
        "eng-alpha/g0": one("g", {"cpu": "on-demand"}),
        "eng-alpha/d1": one("d", {"cpu": "on-demand"}),
    }
    assert left(result, "Pending") == {"e": ["eng-alpha/e1"], "g": ["eng-alpha/g1"], "f": ["eng-alpha/f1"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "d1", "eng-alpha", "d")
    for name in ("e1", "f1", "g1"):
        assert_waiting(result, name, "eng-alpha", NO_LONGER_FITS)
    for name, cq in (("d0", "d"), ("e0", "e"), ("g0", "g")):
        assert_untouched(result, name, "eng-alpha", cq)


def test_fair_sharing_schedule_workload_with_lowest_drf_after_admission():
    """"fair sharing schedule workload with lowest drf after admission".

    b0 is already admitted, using 10 capacity. b1 - 50 capacity, and c1 - 75 capacity are pending.

    we expect b1 to schedule, as b0 + b1 = 60, is less than c1 = 75."""
    cqs = [on_demand_cq("b", "0", "A"), on_demand_cq("c", "0", "A")]
    workloads = [
        reserved(wl_one("b0", "eng-alpha", "lq-b", "10"), "b", {"cpu": "on-demand"}),
        wl_one("b1", "eng-alpha", "lq-b", "50"),
        wl_one("c1", "eng-alpha", "lq-c", "75"),
    ]
    result = schedule(workloads, cohorts=[on_demand_cohort("A", "100")], additional_cluster_queues=cqs,
                      additional_local_queues=lqs("eng-alpha", **{"lq-b": "b", "lq-c": "c"}),
                      fair_sharing=True, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/b0": one("b", {"cpu": "on-demand"}),
        "eng-alpha/b1": one("b", {"cpu": "on-demand"}),
    }
    assert left(result, "Pending") == {"c": ["eng-alpha/c1"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "b1", "eng-alpha", "b")
    assert_waiting(result, "c1", "eng-alpha", NO_LONGER_FITS)
    assert_untouched(result, "b0", "eng-alpha", "b")


def _weighted_pair(weight: str) -> PassResult:
    """The two weighted-queues cases: b and c (FairWeight `weight`, reclaim Any, within the CQ
    Never) share Cohort A's 8 cpu; b0 holds 4 in b, b1 (priority 9001) and c1 (priority 0) ask
    for 4 each."""
    preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
    cqs = [on_demand_cq(name, "0", "A", fair_weight=weight, preemption=preemption) for name in ("b", "c")]
    workloads = [
        reserved(wl_one("b0", "eng-alpha", "lq-b", "4"), "b", {"cpu": "on-demand"}),
        # high priority for tiebreak
        wl_one("b1", "eng-alpha", "lq-b", "4", priority=9001),
        wl_one("c1", "eng-alpha", "lq-c", "4", priority=0),
    ]
    return schedule(workloads, cohorts=[on_demand_cohort("A", "8")], additional_cluster_queues=cqs,
                    additional_local_queues=lqs("eng-alpha", **{"lq-b": "b", "lq-c": "c"}),
                    fair_sharing=True, gates=OBSERVABILITY_OFF)


def _assert_c1_borrows_less(result: PassResult) -> None:
    assert assignments(result) == {
        "eng-alpha/b0": one("b", {"cpu": "on-demand"}),
        "eng-alpha/c1": one("c", {"cpu": "on-demand"}),
    }
    assert left(result, "Pending") == {"b": ["eng-alpha/b1"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "c1", "eng-alpha", "c")
    assert_waiting(result, "b1", "eng-alpha", NO_LONGER_FITS)
    assert_untouched(result, "b0", "eng-alpha", "b")


def test_fair_sharing_two_queues_with_weight_0_schedules_workload_which_borrows_less():
    """"fair sharing two queues with weight 0 schedules workload which borrows less".

    b0 is admitted, using 4 capacity. b1 and c1 are pending.

    Even though b1 has a higher priority, c1 is admitted as it is in a queue that is borrowing
    less than b1."""
    _assert_c1_borrows_less(_weighted_pair("0"))


def test_fair_sharing_two_queues_with_high_weight_schedules_workload_which_borrows_less():
    """"fair sharing two queues with high weight schedules workload which borrows less".

    b0 is admitted, using 4 capacity. b1 and c1 are pending.

    Even though b1 has a higher priority, c1 is admitted as it is in a queue that is borrowing
    less than b1."""
    _assert_c1_borrows_less(_weighted_pair("123456789"))


def test_fair_sharing_schedule_singleton_cqs_and_cq_without_cohort():
    """"fair sharing schedule singleton cqs and cq without cohort".

    Cohort A has Clusterqueue a, and capacity is provided by Cohort.

    Cohort B has Clusterqueue b, and capacity is provided by ClusterQueue.

    Clusterqueue c has no Cohort, and provides its own capacity.

    We ensure that all 3 pending workloads, one for each cq, schedules."""
    cqs = [on_demand_cq("a", "0", "A"), on_demand_cq("b", "10", "B"), on_demand_cq("c", "10")]
    workloads = [wl_one(f"{q}1", "eng-alpha", f"lq-{q}", "10") for q in "abc"]
    result = schedule(workloads, cohorts=[on_demand_cohort("A", "10"), on_demand_cohort("B")],
                      additional_cluster_queues=cqs,
                      additional_local_queues=lqs("eng-alpha", **{f"lq-{q}": q for q in "abc"}),
                      fair_sharing=True)

    assert assignments(result) == {f"eng-alpha/{q}1": one(q, {"cpu": "on-demand"}) for q in "abc"}
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    for q in "abc":
        assert_admitted_now(result, f"{q}1", "eng-alpha", q)


def _b1_c1_in_a(b1: dict, c1: dict) -> PassResult:
    cqs = [on_demand_cq("b", "0", "A"), on_demand_cq("c", "0", "A")]
    return schedule([b1, c1], cohorts=[on_demand_cohort("A", "10"), on_demand_cohort("B")],
                    additional_cluster_queues=cqs,
                    additional_local_queues=lqs("eng-alpha", **{"lq-b": "b", "lq-c": "c"}),
                    fair_sharing=True, gates=OBSERVABILITY_OFF)


def _assert_c1_first(result: PassResult) -> None:
    assert assignments(result) == {"eng-alpha/c1": one("c", {"cpu": "on-demand"})}
    assert left(result, "Pending") == {"b": ["eng-alpha/b1"]}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "c1", "eng-alpha", "c")
    assert_waiting(result, "b1", "eng-alpha", NO_LONGER_FITS)


def test_fair_sharing_schedule_highest_priority_first():
    """"fair sharing schedule highest priority first"."""
    _assert_c1_first(_b1_c1_in_a(wl_one("b1", "eng-alpha", "lq-b", "10", priority=99),
                                 wl_one("c1", "eng-alpha", "lq-c", "10", priority=101)))


def test_fair_sharing_schedule_earliest_timestamp_first():
    """"fair sharing schedule earliest timestamp first"."""
    _assert_c1_first(_b1_c1_in_a(wl_one("b1", "eng-alpha", "lq-b", "10", priority=101, created=1),
                                 wl_one("c1", "eng-alpha", "lq-c", "10", priority=101, created=0)))


# ---------------------------------------------------------------- preemption


def test_with_fair_sharing_preempt_workload_from_cq_with_the_highest_share():
    """"with fair sharing: preempt workload from CQ with the highest share"."""
    eng_gamma = on_demand_cq("eng-gamma", ("50", "0"), "eng")

    def admitted_wl(name: str, ns: str, cpu: str, cq: str, flv: str, uid: str | None = None) -> dict:
        # Go's SimpleReserveQuota with no queue name: the Go unit test runs no workload
        # controller, which takes back a reservation not yet admitted whose LocalQueue is
        # missing (as the engine's pass does); admitted, it holds its quota as in the Go cache
        return reserved(workload(name, ns, requests={"cpu": cpu}, uid=uid), cq, {"cpu": flv}, admitted=True)

    workloads = [
        admitted_wl("all-spot", "eng-alpha", "100", "eng-alpha", "spot"),
        *(admitted_wl(f"alpha{i}", "eng-alpha", "20", "eng-alpha", "on-demand", uid=f"alpha{i}")
          for i in range(1, 5)),
        admitted_wl("gamma1", "eng-gamma", "10", "eng-gamma", "on-demand", uid="gamma1"),
        *(admitted_wl(f"gamma{i}", "eng-gamma", "20", "eng-gamma", "on-demand", uid=f"gamma{i}")
          for i in range(2, 5)),
        workload("preemptor", "eng-beta", queue="main", requests={"cpu": "30"}, uid="wl-preemptor",
                 job_uid="job-preemptor"),
    ]
    result = schedule(workloads, additional_cluster_queues=[eng_gamma], fair_sharing=True,
                      gates=OBSERVABILITY_OFF)

    main = "main"
    assert assignments(result) == {
        "eng-alpha/all-spot": one("eng-alpha", {"cpu": "spot"}, ps=main),
        **{f"eng-alpha/alpha{i}": one("eng-alpha", {"cpu": "on-demand"}, ps=main) for i in range(1, 5)},
        **{f"eng-gamma/gamma{i}": one("eng-gamma", {"cpu": "on-demand"}, ps=main) for i in range(1, 5)},
    }
    # Preemptor is not admitted in this cycle.
    assert left(result, "Pending") == {"eng-beta": ["eng-beta/preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "preemptor", "eng-beta",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                   "on-demand, 30 more needed, insufficient unused quota for cpu in flavor spot, 30 more "
                   "needed. Pending the preemption of 2 workload(s)")
    for name, ns in (("alpha1", "eng-alpha"), ("gamma1", "eng-gamma")):
        assert_preempted(result, name, ns, "InCohortReclamation", preemption_message(
            "wl-preemptor", "job-preemptor", "reclamation within the cohort", "/eng/eng-beta", f"/eng/{ns}"))
    assert_untouched(result, "all-spot", "eng-alpha", "eng-alpha")
    for i in range(2, 5):
        assert_untouched(result, f"alpha{i}", "eng-alpha", "eng-alpha")
        assert_untouched(result, f"gamma{i}", "eng-gamma", "eng-gamma")


def _other_cqs(cpu: str, resources: Mapping[str, str] | None, preemption: Mapping[str, str],
               bank_cpu: str) -> list[dict]:
    """other-alpha/-beta/-gamma and resource-bank in cohort `other` (flavor default)."""
    out = []
    for suffix in ("alpha", "beta", "gamma"):
        extra = {f"{suffix}-resource": resources[suffix]} if resources else {}
        out.append(cluster_queue(f"other-{suffix}", resource_group(flavor_quotas("default", cpu=cpu, **extra)),
                                 cohort="other", preemption=preemption))
    out.append(cluster_queue("resource-bank", resource_group(flavor_quotas("default", cpu=bank_cpu)),
                             cohort="other"))
    return out


OTHER_LQS = [local_queue("other", ns, f"other-{suffix}")
             for ns, suffix in (("eng-alpha", "alpha"), ("eng-beta", "beta"), ("eng-gamma", "gamma"))]


def test_multiple_preemptions_within_cq_when_fair_sharing():
    """"multiple preemptions within cq when fair sharing".

    Multiple CQs can preempt within their CQs, with fair sharing enabled.

    (Metric wantSkippedPreemptions: other-alpha 0, other-beta 0, other-gamma 0.)"""
    # the Go case leaves reclaimWithinCohort empty, which Kueue's code reads as not Never (its
    # webhook would default it to Never): LowerPriority says the same to the engine
    cqs = _other_cqs("2", None, {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}, "3")
    spaces = (("a1", "eng-alpha", "alpha"), ("b1", "eng-beta", "beta"), ("c1", "eng-gamma", "gamma"))
    workloads = [
        *(reserved(workload(name, ns, queue="other", priority=0, requests={"cpu": "3"}), f"other-{s}",
                   {"cpu": "default"}) for name, ns, s in spaces),
        *(workload("preemptor", ns, queue="other", priority=100, requests={"cpu": "3"}, uid="wl-preemptor",
                   job_uid="job-preemptor") for _, ns, _ in spaces),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=OTHER_LQS,
                      fair_sharing=True, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {f"{ns}/{name}": one(f"other-{s}", {"cpu": "default"}, ps="main")
                                   for name, ns, s in spaces}
    assert left(result, "Pending") == {f"other-{s}": [f"{ns}/preemptor"] for _, ns, s in spaces}
    assert left(result, "Inadmissible") == {}
    for name, ns, s in spaces:
        assert_preempted(result, name, ns, "InClusterQueue", preemption_message(
            "wl-preemptor", "job-preemptor", "prioritization in the ClusterQueue",
            f"/other/other-{s}", f"/other/other-{s}"))
        assert_waiting(result, "preemptor", ns,
                       "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                       "default, 3 more needed. Pending the preemption of 1 workload(s)")


def _overlapping_targets_case(gates: Mapping[str, bool]) -> PassResult:
    """The cluster of "multiple preemptions skip overlapping preemption targets", one cycle."""
    preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    cqs = _other_cqs("0", {"alpha": "1", "beta": "1", "gamma": "1"}, preemption, "9")
    workloads = [
        reserved(workload("a1", "eng-alpha", queue="other", priority=0, requests={"alpha-resource": "1"}),
                 "other-alpha", {"alpha-resource": "default"}),
        reserved(workload("b1", "eng-beta", queue="other", priority=0, requests={"beta-resource": "1"}),
                 "other-beta", {"beta-resource": "default"}),
        reserved(workload("c1", "eng-gamma", queue="other", priority=0,
                          requests={"cpu": "9", "gamma-resource": "1"}),
                 "other-gamma", {"cpu": "default"}),
        workload("preemptor", "eng-alpha", queue="other", priority=100, uid="wl-preemptor",
                 job_uid="job-preemptor", requests={"cpu": "3", "alpha-resource": "1"}),
        workload("pretending-preemptor", "eng-beta", queue="other", priority=99,
                 requests={"cpu": "3", "beta-resource": "1"}),
    ]
    return schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=OTHER_LQS,
                    fair_sharing=True, gates={**OBSERVABILITY_OFF, **gates})


def test_multiple_preemptions_skip_overlapping_preemption_targets():
    """"multiple preemptions skip overlapping preemption targets".

    Gamma cq is using more than fair share of CPU. alpha and beta need CPU to run incoming
    workload.

    Alpha workload is higher priority, so sorted first.

    We ensure only alpha (and not beta) workload is preempted, as we disallow overlapping
    preemption targets in the same cycle.

    c1's admission, as the Go case writes it, assigns a flavor to cpu only (not to its
    gamma-resource).

    (Metric wantSkippedPreemptions: other-alpha 0, other-beta 1, other-gamma 0.)"""
    # the case predates RecomputeAssignmentUponPreemptionTargetsOverlap (on in Kueue's v0.19
    # patches): it is Kueue's skip with the gate off; with the gate on, see the next test
    result = _overlapping_targets_case({"RecomputeAssignmentUponPreemptionTargetsOverlap": False})
    assert assignments(result) == {
        "eng-alpha/a1": one("other-alpha", {"alpha-resource": "default"}, ps="main"),
        "eng-beta/b1": one("other-beta", {"beta-resource": "default"}, ps="main"),
        "eng-gamma/c1": one("other-gamma", {"cpu": "default"}, ps="main"),
    }
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/preemptor"],
                                       "other-beta": ["eng-beta/pretending-preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_preempted(result, "a1", "eng-alpha", "InClusterQueue", preemption_message(
        "wl-preemptor", "job-preemptor", "prioritization in the ClusterQueue",
        "/other/other-alpha", "/other/other-alpha"))
    assert_preempted(result, "c1", "eng-gamma", "InCohortFairSharing", preemption_message(
        "wl-preemptor", "job-preemptor", "Fair Sharing within the cohort",
        "/other/other-alpha", "/other/other-gamma"))
    assert_untouched(result, "b1", "eng-beta", "other-beta")
    assert_waiting(result, "preemptor", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for alpha-resource in "
                   "flavor default, 1 more needed, insufficient unused quota for cpu in flavor default, 3 more "
                   "needed. Pending the preemption of 2 workload(s)")
    assert_waiting(result, "pretending-preemptor", "eng-beta", OVERLAPPING)


def test_multiple_preemptions_overlapping_targets_recomputed():
    """The same cluster with RecomputeAssignmentUponPreemptionTargetsOverlap on: the
    pretending-preemptor's targets overlap the preemptor's (c1), so it is assigned again as if
    a1 and c1 were gone. The cpu it needs is then free (9 less the preemptor's 3), and only its
    beta-resource needs a preemption: it preempts b1 in its own ClusterQueue, in the same cycle."""
    result = _overlapping_targets_case({})
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/preemptor"],
                                       "other-beta": ["eng-beta/pretending-preemptor"]}
    assert_preempted(result, "b1", "eng-beta", "InClusterQueue", preemption_message(
        "pretending-preemptor", "UNKNOWN", "prioritization in the ClusterQueue",
        "/other/other-beta", "/other/other-beta"))
    assert_waiting(result, "pretending-preemptor", "eng-beta",
                   "couldn't assign flavors to pod set main: insufficient unused quota for beta-resource in "
                   "flavor default, 1 more needed. Pending the preemption of 1 workload(s)")


def test_not_enough_resources_with_fair_sharing_enabled():
    """"not enough resources with fair sharing enabled"."""
    result = schedule([wl_one("new", "sales", "main", "100")], fair_sharing=True, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {}
    assert left(result, "Pending") == {"sales": ["sales/new"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "new", "sales",
                   "couldn't assign flavors to pod set one: insufficient quota for cpu in flavor default, "
                   "previously considered podsets requests (0) + current podset request (100) > maximum "
                   "capacity (50)")


def test_with_fair_sharing_prefer_reclamation_over_cq_priority_based_preemption_with_preemption_while_borrowing():
    """"with fair sharing: prefer reclamation over cq priority based preemption; with preemption
    while borrowing".

    We enable fair sharing so that preemption while borrowing is enabled.
    Flavor 1, on-demand, requires priority-based preemption in CQ.
    Flavor 2, spot, requires reclaim in Cohort.
    Flavor 2 is a better assignment, because reclaim is preferred over priority-based preemption."""
    cqs = [
        cluster_queue("other-alpha",
                      resource_group(flavor_quotas("on-demand", gpu="7"), flavor_quotas("spot", gpu="7")),
                      cohort="other", preemption={"withinClusterQueue": "LowerPriority",
                                                  "reclaimWithinCohort": "LowerPriority"}),
        cluster_queue("other-beta", resource_group(flavor_quotas("on-demand", gpu="3"), flavor_quotas("spot", gpu="3")),
                      cohort="other"),
    ]
    workloads = [
        reserved(workload("a1", "eng-alpha", queue="other", priority=50, requests={"gpu": "5"}),
                 "other-alpha", {"gpu": "on-demand"}),
        reserved(workload("b1", "eng-beta", queue="other", priority=50, requests={"gpu": "5"}),
                 "other-beta", {"gpu": "spot"}),
        workload("preemptor", "eng-alpha", queue="other", priority=100, uid="wl-preemptor",
                 job_uid="job-preemptor", requests={"gpu": "8"}),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs, additional_local_queues=OTHER_LQS[:2],
                      fair_sharing=True, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {
        "eng-alpha/a1": one("other-alpha", {"gpu": "on-demand"}, ps="main"),
        "eng-beta/b1": one("other-beta", {"gpu": "spot"}, ps="main"),
    }
    assert left(result, "Pending") == {"other-alpha": ["eng-alpha/preemptor"]}
    assert left(result, "Inadmissible") == {}
    assert_untouched(result, "a1", "eng-alpha", "other-alpha")
    assert_preempted(result, "b1", "eng-beta", "InCohortFairSharing", preemption_message(
        "wl-preemptor", "job-preemptor", "Fair Sharing within the cohort", "/other/other-alpha", "/other/other-beta"))
    assert_waiting(result, "preemptor", "eng-alpha",
                   "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor "
                   "on-demand, 3 more needed, insufficient unused quota for gpu in flavor spot, 3 more needed. "
                   "Pending the preemption of 1 workload(s)")


def _most_local_capacity(fair_sharing: bool) -> PassResult:
    cohorts = [
        cohort("root-cohort", resource_group(flavor_quotas("on-demand", gpu="2"), flavor_quotas("spot", gpu="0"))),
        cohort("child-cohort", resource_group(flavor_quotas("on-demand", gpu="5"), flavor_quotas("spot", gpu="7")),
               parent="root-cohort"),
    ]
    queue1 = cluster_queue("queue1",
                           resource_group(flavor_quotas("on-demand", gpu="3"), flavor_quotas("spot", gpu="3")),
                           cohort="child-cohort",
                           preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                           fungibility={"whenCanPreempt": "TryNextFlavor", "whenCanBorrow": "TryNextFlavor"})
    workloads = [
        # exhaust quota in on-demand in ParentCohort
        reserved(workload("a1", "default", queue="queue1", requests={"gpu": "8"}), "queue1", {"gpu": "on-demand"}),
        # exhaust quota in spot in ClusterQueue
        reserved(workload("a2", "default", queue="queue1", requests={"gpu": "3"}), "queue1", {"gpu": "spot"}),
        workload("a3", "default", queue="queue1", requests={"gpu": "1"}),
    ]
    return schedule(workloads, cohorts=cohorts, additional_cluster_queues=[queue1],
                    additional_local_queues=[local_queue("queue1", "default", "queue1")],
                    fair_sharing=fair_sharing)


def _assert_a3_on_spot(result: PassResult) -> None:
    assert assignments(result) == {
        "default/a1": one("queue1", {"gpu": "on-demand"}, ps="main"),
        "default/a2": one("queue1", {"gpu": "spot"}, ps="main"),
        "default/a3": one("queue1", {"gpu": "spot"}, ps="main"),
    }
    assert left(result, "Pending") == {}
    assert left(result, "Inadmissible") == {}
    assert_admitted_now(result, "a3", "default", "queue1")
    assert_untouched(result, "a1", "default", "queue1")
    assert_untouched(result, "a2", "default", "queue1")


def test_prefer_flavor_with_most_local_capacity():
    """"prefer flavor with most local capacity"."""
    _assert_a3_on_spot(_most_local_capacity(True))


def test_prefer_flavor_with_most_local_capacity_fs_false():
    """"prefer flavor with most local capacity (FS=false)"."""
    _assert_a3_on_spot(_most_local_capacity(False))


def test_preemption_over_borrowing_with_fair_sharing_preempt_in_first_flavor_instead_of_borrowing_in_second():
    """"PreemptionOverBorrowing with fair sharing: preempt in first flavor instead of borrowing in
    second"."""
    cqs = [
        cluster_queue("fs-pob-cq",
                      resource_group(flavor_quotas("on-demand", cpu=("5", "0")), flavor_quotas("spot", cpu=("0", "5"))),
                      cohort="fs-pob-cohort", fair_weight="1", preemption={"withinClusterQueue": "LowerPriority"},
                      fungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                                   "preference": "PreemptionOverBorrowing"}),
        cluster_queue("fs-pob-lender",
                      resource_group(flavor_quotas("on-demand", cpu="0"), flavor_quotas("spot", cpu="5")),
                      cohort="fs-pob-cohort", fair_weight="1"),
    ]
    workloads = [
        reserved(workload("fs-low-pob", "default", queue="fs-pob-queue", priority=-1, requests={"cpu": "5"}),
                 "fs-pob-cq", {"cpu": "on-demand"}, admitted=True),
        workload("fs-high-pob", "default", queue="fs-pob-queue", priority=0, requests={"cpu": "5"},
                 uid="wl-fs-high-pob", job_uid="job-fs-high-pob"),
    ]
    result = schedule(workloads, additional_cluster_queues=cqs,
                      additional_local_queues=[local_queue("fs-pob-queue", "default", "fs-pob-cq")],
                      fair_sharing=True, gates=OBSERVABILITY_OFF)

    assert assignments(result) == {"default/fs-low-pob": one("fs-pob-cq", {"cpu": "on-demand"}, ps="main")}
    assert left(result, "Pending") == {"fs-pob-cq": ["default/fs-high-pob"]}
    assert left(result, "Inadmissible") == {}
    assert_waiting(result, "fs-high-pob", "default",
                   "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
                   "on-demand, 5 more needed. Pending the preemption of 1 workload(s)")
    assert_preempted(result, "fs-low-pob", "default", "InClusterQueue", preemption_message(
        "wl-fs-high-pob", "job-fs-high-pob", "prioritization in the ClusterQueue",
        "/fs-pob-cohort/fs-pob-cq", "/fs-pob-cohort/fs-pob-cq"))
    assert event_reasons(result) == sorted([
        ("default/fs-high-pob", "Pending", "Warning"),
        # Kueue's v0.19 preemptor also records PreemptedWorkload (the TAS suites expect it; this
        # Go case predates it)
        ("default/fs-high-pob", "PreemptedWorkload", "Normal"),
        ("default/fs-low-pob", "EvictedDueToPreempted", "Normal"),
        ("default/fs-low-pob", "Preempted", "Normal"),
    ])
